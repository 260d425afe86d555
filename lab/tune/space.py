"""ansible/knob-space.yml: the knob space ./start.sh tune searches, checked against the roles' argument specs, and a
point of it (one value per dimension) as the extra vars that give the tuned machine exactly that configuration."""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab import knobs
from lab.ablation import groups as knob_groups
from lab.errors import StepFailed
from lab.paths import ANSIBLE_DIR

SPACE_FILE = ANSIBLE_DIR / "knob-space.yml"
JAVA_OPTIONS = "camel_app_java_options"
STACK = "camel_app_stack"               # the knob that chooses the service's build (app/README.md)
Value = int | str


@dataclass(frozen=True)
class Choice:
    """What one choice of a categorical dimension sets, and the stacks it exists on (none named: every one)."""
    variables: dict = field(default_factory=dict)
    jvm_options: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dimension:
    name: str
    group: str
    about: str
    low: int | None = None                  # an integer dimension's range (inclusive)...
    high: int | None = None
    log: bool = False
    step: int = 1
    variables: tuple[str, ...] = ()         # ... and where its value goes
    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = ()
    choices: dict[str, Choice] = field(default_factory=dict)   # a categorical dimension's

    @property
    def categorical(self) -> bool:
        return bool(self.choices)

    def describe(self) -> str:
        if self.categorical:
            return f"{self.name}: {' | '.join(self.choices)}"
        return f"{self.name}: {self.low}..{self.high}" + (" (log)" if self.log else "") + \
            (f" by {self.step}" if self.step != 1 else "")

    def contains(self, value: object) -> bool:
        if self.categorical:
            return value in self.choices
        assert self.low is not None and self.high is not None
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high \
            and (value - self.low) % self.step == 0

    def nearest_at_least(self, value: int) -> int:
        """An integer dimension's smallest value at or above value on its grid, its top if value is past it."""
        assert self.low is not None and self.high is not None
        if value <= self.low:
            return self.low
        return min(self.high, self.low + -(-(value - self.low) // self.step) * self.step)


@dataclass(frozen=True)
class Space:
    groups: dict[str, str]                  # name -> about
    dimensions: dict[str, Dimension]
    role_defaults: dict = field(default_factory=dict)   # what a dict variable's settings merge over, unset

    def chosen(self, names: tuple[str, ...]) -> Space:
        return Space({g: a for g, a in self.groups.items() if g in names},
                     {n: d for n, d in self.dimensions.items() if d.group in names}, self.role_defaults)

    def dimension_setting(self, knob: str) -> str | None:
        """The integer dimension whose value sets knob: a variable ("camel_app_tomcat_max_threads") or one key of a
        dict variable ("httpd_mpm_event_settings.MaxRequestWorkers"), as the verdict names a pool's size."""
        variable, _, key = knob.partition(".")
        for name, dim in self.dimensions.items():
            if not dim.categorical and (variable in dim.variables if not key else variable in dim.settings.get(key, ())):
                return name
        return None

    def variables(self) -> set[str]:
        """Every variable a point of this space may set."""
        found: set[str] = set()
        for dim in self.dimensions.values():
            found |= set(dim.variables) | {v for targets in dim.settings.values() for v in targets}
            found |= {v for choice in dim.choices.values() for v in choice.variables}
            if dim.jvm_options or any(c.jvm_options for c in dim.choices.values()):
                found.add(JAVA_OPTIONS)
        return found

    def impossible(self, point: dict[str, Value], knobs: dict) -> str | None:
        """Why a point cannot be provisioned (a choice that does not exist on the stack its knobs give the machine,
        which site.yml would refuse), else None: the tune sets such a point aside unmeasured."""
        stack = knobs.get(STACK, self.role_defaults.get(STACK))
        for name, dim in self.dimensions.items():
            choice = dim.choices.get(str(point.get(name))) if dim.categorical and name in point else None
            if choice is not None and choice.stacks and stack not in choice.stacks:
                return (f"{name} {point[name]} exists on the {' and '.join(choice.stacks)} stack only, and this "
                        f"configuration runs the {stack} one")
        return None

    def knobs(self, point: dict[str, Value], base: dict) -> dict:
        """The tuned machine's extra vars at a point: base (the default machine's knobs) with each dimension's
        value applied, in the file's order; the JVM's options appended to base's."""
        chosen = copy.deepcopy(base)
        options = list(chosen.get(JAVA_OPTIONS) or [])
        for name, dim in self.dimensions.items():
            if name not in point:
                continue
            value = point[name]
            if not dim.contains(value):
                raise StepFailed(f"{name} = {value!r} is not in the knob space ({dim.describe()}; {SPACE_FILE.name})")
            if dim.categorical:
                choice = dim.choices[str(value)]
                chosen.update(copy.deepcopy(choice.variables))
                options += choice.jvm_options
                continue
            for variable in dim.variables:
                chosen[variable] = value
            for key, targets in dim.settings.items():
                for variable in targets:
                    # extra vars replace a dict whole: the key is merged over the dict the machine would have
                    merged = chosen.get(variable, self.role_defaults.get(variable)) or {}
                    chosen[variable] = {**merged, key: value}
            options += [option.replace("{value}", str(value)) for option in dim.jvm_options]
        if options or JAVA_OPTIONS in chosen:
            chosen[JAVA_OPTIONS] = options
        return chosen


def base_knobs(host_vars: Path = knob_groups.HOST_VARS) -> dict:
    """Where every point starts: the default machine's knobs, with what only the tuned machine sets back at its
    role default (extra vars override only the variables they name)."""
    return knob_groups.extra_vars({}, frozenset(), host_vars) | _tuned_only_defaults(host_vars)


def _tuned_only_defaults(host_vars: Path) -> dict:
    default = knobs.load_vars(host_vars / "default.yml")
    tuned = knobs.load_vars(host_vars / "tuned.yml")
    role_defaults = knobs.role_defaults(ANSIBLE_DIR)
    return {v: role_defaults[v] for v in tuned if v not in default and v in role_defaults}


def load(path: Path = SPACE_FILE, ansible_dir: Path = ANSIBLE_DIR) -> Space:
    """The space, in the file's order; StepFailed naming the file and the dimension for anything wrong."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise StepFailed(f"{path}: cannot read the knob space ({error})") from error
    if not isinstance(data, dict) or set(data) - {"groups", "dimensions"}:
        raise StepFailed(f"{path}: groups and dimensions only")
    raw_groups, raw_dims = data.get("groups"), data.get("dimensions")
    if not isinstance(raw_groups, dict) or not raw_groups or not isinstance(raw_dims, dict) or not raw_dims:
        raise StepFailed(f"{path}: groups (name: about) and dimensions (name: its range or choices)")
    groups = {}
    for name, spec in raw_groups.items():
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise StepFailed(f"{path}: groups.{name}: a group's name is lower-case letters, digits and _")
        groups[name] = str((spec or {}).get("about") or "") if isinstance(spec, dict) else str(spec or "")
    declared = knobs.declared_variables(ansible_dir)
    stacks = _stacks(ansible_dir)
    dimensions = {str(name): _dimension(str(name), spec, groups, declared, f"{path}: dimensions.{name}", stacks)
                  for name, spec in raw_dims.items()}
    empty = [g for g in groups if not any(d.group == g for d in dimensions.values())]
    if empty:
        raise StepFailed(f"{path}: groups {', '.join(empty)}: no dimension belongs to them")
    return Space(groups, dimensions, knobs.role_defaults(ansible_dir))


def _stacks(ansible_dir: Path) -> tuple[str, ...]:
    """The stacks camel_app_stack may name (its argument spec's choices)."""
    specs = knobs.load_vars(ansible_dir / "roles" / "camel_app" / "meta" / "argument_specs.yml")
    options = ((specs.get("argument_specs") or {}).get("main") or {}).get("options") or {}
    return tuple((options.get(STACK) or {}).get("choices") or ())


def _dimension(name: str, spec: object, groups: dict[str, str], declared: set[str], where: str,
               stacks: tuple[str, ...]) -> Dimension:
    if not isinstance(spec, dict):
        raise StepFailed(f"{where}: a mapping (group, about, and int or choices)")
    allowed = {"group", "about", "int", "log", "step", "variables", "settings", "jvm_options", "choices"}
    if set(spec) - allowed:
        raise StepFailed(f"{where}: {', '.join(sorted(set(spec) - allowed))}: not a dimension's field "
                         f"({', '.join(sorted(allowed))})")
    group = spec.get("group")
    if group not in groups:
        raise StepFailed(f"{where}.group: {group!r} is not one of the groups ({', '.join(groups)})")
    about = str(spec.get("about") or "")

    def known(variable: object, field_: str) -> str:
        if not isinstance(variable, str) or variable not in declared:
            raise StepFailed(f"{where}.{field_}: {variable!r} is not a variable any role declares "
                             "(meta/argument_specs.yml)")
        return variable

    if ("int" in spec) == ("choices" in spec):
        raise StepFailed(f"{where}: either int: [low, high] or choices")
    if "choices" in spec:
        return Dimension(name, group, about, choices=_choices(spec, where, known, stacks))
    bounds = spec["int"]
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int) for b in bounds)
            and 0 < bounds[0] < bounds[1]):
        raise StepFailed(f"{where}.int: [low, high], two positive integers, low below high")
    step = spec.get("step", 1)
    if not isinstance(step, int) or step < 1 or (bounds[1] - bounds[0]) % step:
        raise StepFailed(f"{where}.step: a positive integer that divides high - low")
    if spec.get("log") and step != 1:
        raise StepFailed(f"{where}: log or step, not both (a log-scaled dimension has no grid)")
    variables = tuple(known(v, "variables") for v in spec.get("variables") or [])
    settings_raw = spec.get("settings") or {}
    if not isinstance(settings_raw, dict):
        raise StepFailed(f"{where}.settings: a mapping of key to the dict variables that hold it")
    settings = {str(key): tuple(known(v, f"settings.{key}") for v in (targets or []))
                for key, targets in settings_raw.items()}
    options = _options(spec.get("jvm_options"), where)
    if not (variables or settings or options):
        raise StepFailed(f"{where}: its value goes nowhere: variables, settings or jvm_options")
    return Dimension(name, group, about, bounds[0], bounds[1], bool(spec.get("log")), step, variables, settings,
                     options)


def _choices(spec: dict, where: str, known: Callable[[object, str], str], stacks: tuple[str, ...]) -> dict[str, Choice]:
    """A dimension's named choices, each the variables and JVM options it sets (known: refuses an undeclared one) and
    the stacks it exists on."""
    raw = spec["choices"]
    if not isinstance(raw, dict) or len(raw) < 2 or set(spec) - {"group", "about", "choices"}:
        raise StepFailed(f"{where}.choices: two choices at least, each name: {{variables, jvm_options}}")
    choices = {}
    for choice, sets in raw.items():
        sets = sets or {}
        if not isinstance(sets, dict) or set(sets) - {"variables", "jvm_options", "stacks"}:
            raise StepFailed(f"{where}.choices.{choice}: variables (name: value), jvm_options and stacks only")
        only = sets.get("stacks") or []
        if not isinstance(only, list) or not all(stack in stacks for stack in only):
            raise StepFailed(f"{where}.choices.{choice}.stacks: {only!r}: a list of the stacks it exists on, of "
                             f"{', '.join(stacks)} ({STACK}'s choices)")
        variables = sets.get("variables") or {}
        if not isinstance(variables, dict):
            raise StepFailed(f"{where}.choices.{choice}.variables: a mapping of variable to value")
        for variable in variables:
            known(variable, f"choices.{choice}.variables")
        choices[str(choice)] = Choice(dict(variables), _options(sets.get("jvm_options"), f"{where}.choices.{choice}"),
                                      tuple(only))
    return choices


def _options(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(o, str) and o.startswith("-") for o in raw):
        raise StepFailed(f"{where}.jvm_options: a list of JVM options, each starting with -")
    return tuple(raw)
