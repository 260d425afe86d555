"""A scenario file (YAML): an experiment a user keeps and shares. It names the load model and its
parameters, the SLO of a capacity run, the schedule and trials, and the thresholds the run must pass.
Options on the command line override it. The shipped ones are in jmeter/scenarios/ (docs/scenarios.md lists them).

    model: closed                   # closed: users that wait for their answer; open: arrivals at a rate
    load: {users: 300, ramp_s: 150, duration_s: 1200}
    thresholds: {error_pct_max: 1, tuned.p95_ms_max: 500, ratio_min: 1.0}

A file that does not parse, an unknown field, or a value of the wrong kind is refused before anything
starts, with the file and the field named."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab import profiles
from lab.analysis.thresholds import THRESHOLDS
from lab.errors import StepFailed
from lab.load import SCHEDULES, LoadProfile, Profile, Slo, StepLoad
from lab.machines.local import memory
from lab.names import MACHINES
from lab.paths import SCENARIOS, callers

MODELS = {"closed": LoadProfile, "open": StepLoad}
TOP_LEVEL = {"description", "model", "load", "slo", "schedule", "repeat", "thresholds", "machines"}
# What a scenario may ask of the machines themselves (lab/profiles.py, lab/machines/local/memory.py): `up` with
# the bare ./start.sh gives it to them; `run` refuses machines brought up otherwise.
MACHINE_FIELDS = {"profile": str, "memory": str, "swap_mib": int}


@dataclass(frozen=True)
class Scenario:
    source: str                                     # the file as the user named it
    profile: Profile
    description: str = ""
    schedule: str | None = None
    repeat: int | None = None
    thresholds: dict[str, float] = field(default_factory=dict)     # [machine.]name -> limit
    machines: dict[str, object] = field(default_factory=dict)      # profile, memory, swap_mib


def _fail(source: str, where: str, message: str) -> StepFailed:
    return StepFailed(f"{source}: {where}: {message}")


def _number(source: str, where: str, value: object, integer: bool) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise _fail(source, where, f"must be {'an integer' if integer else 'a number'}, not {value!r}")
    return value


def shipped() -> list[str]:
    """The shipped scenarios' names (--scenario NAME)."""
    return sorted(path.stem for path in SCENARIOS.glob("*.yaml"))


def find(typed: str) -> Path:
    """The file --scenario names: a path as typed (from the user's folder), else a shipped scenario's name."""
    path = callers(typed)
    named = SCENARIOS / f"{typed.removesuffix('.yaml')}.yaml"
    if not path.is_file() and "/" not in typed and named.is_file():
        return named
    if not path.exists():
        raise StepFailed(f"--scenario {typed}: no such file, and no shipped scenario of that name "
                         f"(shipped: {', '.join(shipped())}; or a path to a YAML file of your own)")
    return path


def load(path: Path, typed: str | None = None) -> Scenario:
    """The scenario in path; StepFailed naming the file (as typed) and the field for anything wrong."""
    source = typed or str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise StepFailed(f"{source}: cannot read the scenario file ({error.strerror or error})") from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise _fail(source, where, f"not YAML ({getattr(error, 'problem', None) or error})") from error
    if not isinstance(data, dict):
        raise _fail(source, "the file", "must be a mapping (model:, load:, ...)")
    unknown = sorted(set(map(str, data)) - TOP_LEVEL)
    if unknown:
        raise _fail(source, unknown[0], f"unknown field (known: {', '.join(sorted(TOP_LEVEL))})")
    model = data.get("model", "closed")
    if model not in MODELS:
        raise _fail(source, "model", f"{model!r} is not one of {', '.join(MODELS)}")
    schedule = data.get("schedule")
    if schedule is not None and schedule not in SCHEDULES:
        raise _fail(source, "schedule", f"{schedule!r} is not one of {', '.join(SCHEDULES)}")
    repeat = data.get("repeat")
    if repeat is not None and _number(source, "repeat", repeat, True) < 1:
        raise _fail(source, "repeat", f"must be 1 or more, not {repeat}")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise _fail(source, "description", "must be text")
    return Scenario(source, _profile(source, model, data.get("load") or {}, data.get("slo")), description,
                    schedule, repeat, _thresholds(source, data.get("thresholds") or {}),
                    _machines(source, data.get("machines") or {}))


def _machines(source: str, values: object) -> dict[str, object]:
    if not isinstance(values, dict):
        raise _fail(source, "machines", "must be a mapping (profile, memory, swap_mib)")
    values = dict(values)
    if isinstance(values.get("profile"), int) and not isinstance(values["profile"], bool):
        values["profile"] = str(values["profile"])     # profile: 2018, unquoted, is a number to YAML
    for name, value in values.items():
        kind = MACHINE_FIELDS.get(name)
        if kind is None:
            raise _fail(source, f"machines.{name}", f"unknown field (known: {', '.join(MACHINE_FIELDS)})")
        if isinstance(value, bool) or not isinstance(value, kind):
            raise _fail(source, f"machines.{name}", f"must be {'text' if kind is str else 'an integer'}, not {value!r}")
    try:
        if "profile" in values:
            profiles.find(str(values["profile"]))
        memory.MemoryModel(str(values.get("memory", memory.DEFAULT)), int(values.get("swap_mib", memory.DEFAULT_SWAP_MIB)))
    except StepFailed as error:
        raise _fail(source, "machines", str(error)) from error
    return values


def _profile(source: str, model: str, values: object, slo: object) -> Profile:
    kind = MODELS[model]
    if not isinstance(values, dict):
        raise _fail(source, "load", "must be a mapping of the load's parameters")
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init and f.name != "slo"}
    for name, value in values.items():
        if name not in fields:
            raise _fail(source, f"load.{name}", f"unknown for model {model} (known: {', '.join(fields)})")
        if fields[name].type in ("bool", bool):
            if not isinstance(value, bool):
                raise _fail(source, f"load.{name}", f"must be true or false, not {value!r}")
        else:
            _number(source, f"load.{name}", value, True)
    if slo is not None and model != "open":
        raise _fail(source, "slo", "only an open model (a capacity run) has an SLO")
    extra = {"slo": _slo(source, slo)} if model == "open" and slo is not None else {}
    try:
        profile = kind(**values, **extra)
    except ValueError as error:     # "StepLoad.step_s must be …": the field named as the file has it
        field_name, _, message = str(error).removeprefix(f"{kind.__name__}.").partition(" ")
        where = f"load.{field_name}" if field_name in fields else "load"
        raise _fail(source, where, message if where != "load" else str(error).replace(f"{kind.__name__}.", "")) \
            from error
    if isinstance(profile, LoadProfile) and profile.ramp_s > profile.duration_s:
        raise _fail(source, "load.ramp_s", f"{profile.ramp_s} is longer than duration_s {profile.duration_s}")
    return profile


def _slo(source: str, slo: object) -> Slo:
    if not isinstance(slo, dict) or set(slo) - {"p99_ms", "error_pct"}:
        raise _fail(source, "slo", "must be a mapping of p99_ms and error_pct")
    p99 = _number(source, "slo.p99_ms", slo.get("p99_ms", Slo.p99_ms), True)
    errors = _number(source, "slo.error_pct", slo.get("error_pct", Slo.error_pct), False)
    try:
        return Slo(p99_ms=int(p99), error_pct=float(errors))
    except ValueError as error:
        raise _fail(source, "slo", str(error).replace("Slo.", "")) from error


def _thresholds(source: str, values: object) -> dict[str, float]:
    if not isinstance(values, dict):
        raise _fail(source, "thresholds", "must be a mapping of threshold: limit")
    return {str(name): threshold_value(f"{source}: thresholds.{name}", str(name), value)
            for name, value in values.items()}


def threshold_value(where: str, name: str, value: object) -> float:
    """A threshold's limit, checked: [machine.]known-name, a number (StepFailed naming where)."""
    machine, _, bare = name.rpartition(".")
    if bare not in THRESHOLDS:
        raise StepFailed(f"{where}: unknown threshold (known: {', '.join(THRESHOLDS)}, each optionally after "
                         f"{' or '.join(f'{m}.' for m in MACHINES)})")
    if machine and machine not in MACHINES:
        raise StepFailed(f"{where}: {machine!r} is not a machine ({', '.join(MACHINES)})")
    if bare == "ratio_min" and machine:
        raise StepFailed(f"{where}: ratio_min compares the machines: it takes no machine")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StepFailed(f"{where}: must be a number, not {value!r}")
    if not math.isfinite(value):        # nan fails no comparison and is not JSON; inf always passes
        raise StepFailed(f"{where}: must be a finite number, not {value!r}")
    return float(value)
