"""ansible/knob-groups.yml: the tuning in groups of knobs, checked against both machines' host_vars, and a
configuration (a set of groups) as the extra vars that give the tuned machine exactly those groups."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab import knobs
from lab.errors import StepFailed
from lab.paths import ANSIBLE_DIR

GROUPS_FILE = ANSIBLE_DIR / "knob-groups.yml"
HOST_VARS = ANSIBLE_DIR / "host_vars"


@dataclass(frozen=True)
class Group:
    name: str
    about: str
    variables: tuple[str, ...]
    needs: tuple[str, ...] = ()


def _yaml(path: Path, what: str) -> dict:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise StepFailed(f"{path}: cannot read {what} ({error})") from error
    if not isinstance(data, dict):
        raise StepFailed(f"{path}: {what} must be a mapping")
    return data


def load(path: Path = GROUPS_FILE, host_vars: Path = HOST_VARS) -> dict[str, Group]:
    """The groups, in the file's order; StepFailed naming the file and the group for anything wrong: an
    unknown variable, a variable in two groups, a tuned variable in none, a need that is no group, a cycle."""
    default, tuned = _yaml(host_vars / "default.yml", "the default machine's knobs"), \
        _yaml(host_vars / "tuned.yml", "the tuned machine's knobs")
    raw = _yaml(path, "the knob groups").get("groups")
    if not isinstance(raw, dict) or not raw:
        raise StepFailed(f"{path}: groups: a mapping of group name to its about, variables and needs")
    groups: dict[str, Group] = {}
    owner: dict[str, str] = {}
    for name, spec in raw.items():
        where = f"{path}: groups.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name == "default":
            raise StepFailed(f"{where}: a group's name is lower-case letters, digits and _ (and not 'default', the "
                             "configuration without any group)")
        if not isinstance(spec, dict) or set(spec) - {"about", "variables", "needs"}:
            raise StepFailed(f"{where}: about, variables and needs only")
        variables = spec.get("variables")
        if not isinstance(variables, list) or not variables or not all(isinstance(v, str) for v in variables):
            raise StepFailed(f"{where}.variables: a list of host_vars variables")
        for variable in variables:
            if variable not in default and variable not in tuned:
                raise StepFailed(f"{where}.variables: {variable} is in neither host_vars/default.yml nor tuned.yml")
            if variable in owner:
                raise StepFailed(f"{where}.variables: {variable} is already in group {owner[variable]}")
            owner[variable] = name
        needs = spec.get("needs") or []
        if not isinstance(needs, list):
            raise StepFailed(f"{where}.needs: a list of groups")
        groups[name] = Group(name, str(spec.get("about") or ""), tuple(variables), tuple(map(str, needs)))
    for group in groups.values():
        for need in group.needs:
            if need not in groups:
                raise StepFailed(f"{path}: groups.{group.name}.needs: {need} is not a group")
    orphans = [v for v in tuned if v not in owner and tuned[v] != default.get(v)]
    if orphans:
        raise StepFailed(f"{path}: {', '.join(orphans)} (host_vars/tuned.yml) in no group: the groups together "
                         "would not make the tuned machine")
    role_defaults = knobs.role_defaults(ANSIBLE_DIR)
    unset = [v for v in owner if v in tuned and v not in default and v not in role_defaults]
    if unset:
        raise StepFailed(f"{path}: {', '.join(unset)} (host_vars/tuned.yml) has no value without the tuned machine: "
                         "no role default, and host_vars/default.yml does not set it")
    for name in groups:
        _requires(groups, name, (), path)
    return groups


def _requires(groups: dict[str, Group], name: str, seen: tuple[str, ...], path: Path) -> set[str]:
    """Every group name needs, directly or not (StepFailed on a cycle, naming the file it is in)."""
    if name in seen:
        raise StepFailed(f"{path}: groups {' -> '.join((*seen, name))}: a cycle of needs")
    found: set[str] = set()
    for need in groups[name].needs:
        found |= {need, *_requires(groups, need, (*seen, name), path)}
    return found


def valid(groups: dict[str, Group], applied: frozenset[str]) -> bool:
    """Whether a configuration can run: every group's needs are in it too."""
    return all(set(groups[name].needs) <= applied for name in applied)


def extra_vars(groups: dict[str, Group], applied: frozenset[str], host_vars: Path = HOST_VARS) -> dict:
    """The tuned machine's extra vars for a configuration: default's knobs, with the applied groups'
    variables as tuned.yml has them (a variable tuned.yml leaves unset keeps default's value). A variable
    only tuned.yml sets, in a group not applied, gets its role default: extra vars override host_vars
    only where they name a variable, so left out it would keep its tuned value."""
    default, tuned = _yaml(host_vars / "default.yml", "knobs"), _yaml(host_vars / "tuned.yml", "knobs")
    role_defaults = knobs.role_defaults(ANSIBLE_DIR)
    chosen = dict(default)
    for group in groups.values():
        for variable in group.variables:
            if group.name in applied and variable in tuned:
                chosen[variable] = tuned[variable]
            elif group.name not in applied and variable not in default and variable in role_defaults:
                chosen[variable] = role_defaults[variable]
    return chosen
