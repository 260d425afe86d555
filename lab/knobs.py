"""The knobs: those set in ansible/host_vars or ansible/group_vars that no role declares, and each
machine's knobs as its roles get them (rendered, secrets masked) for the run's knobs.json.

Ansible ignores a variable nobody reads, so a misspelled knob (httpd_mpn: worker) leaves the machine
at the role's default without a word. A role declares its variables in meta/argument_specs.yml;
every other top-level key of a host_vars or group_vars file is unknown, except Ansible's own
(ansible_*: connection and magic variables)."""
from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab.errors import StepFailed
from lab.paths import ANSIBLE_DIR, REPO

VARS_FOLDERS = ("host_vars", "group_vars")
# The roles' variables a machine's knobs are (knobs.json, the memory budget): the rest are the lab's own.
KNOB_PREFIXES = ("httpd_", "camel_app_", "tomcat_native_", "mock_service_", "pcp_")
VARS_SUFFIXES = {".yml", ".yaml", ".json", ""}
RESERVED = ("lab_",)                    # the lab role's account, home and secrets (ansible_* are unknown to roles)
TEMPLATE_MARKS = ("{{", "{%", "{#")
# Variables naming a folder root writes, a program root runs or a download root builds: a machine profile sets how
# the software runs, never what it is or where it lives.
WHERE = ("_home", "_dir", "_python", "_java", "_executable", "_package", "_source", "_download_url",
         "_download_checksum", "_download_cache")


@dataclass(frozen=True)
class UnknownKnob:
    """A key no role declares: file (relative to the ansible folder's parent, as in
    ansible/host_vars/tuned.yml), the key, and the closest declared name, if any is close."""
    file: Path
    key: str
    suggestion: str | None


class _TolerantLoader(yaml.SafeLoader):
    """A safe loader that reads Ansible's tags (!unsafe, !vault) as plain values."""


def _plain(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_TolerantLoader.add_multi_constructor("!", _plain)


def load_vars(path: Path, text: str | None = None) -> dict:
    """A vars file's mapping ({} if it holds none); text: its content as already read (read once, checked once)."""
    data = yaml.load(path.read_text() if text is None else text, Loader=_TolerantLoader)
    return data if isinstance(data, dict) else {}


def declared_variables(ansible_dir: Path) -> set[str]:
    """Every option of every entry point of every role's meta/argument_specs.yml."""
    names: set[str] = set()
    for spec in sorted((ansible_dir / "roles").glob("*/meta/argument_specs.y*ml")):
        for entry in (load_vars(spec).get("argument_specs") or {}).values():
            names.update((entry or {}).get("options") or {})
    return names


def role_defaults(ansible_dir: Path) -> dict:
    """Every role's defaults/main.yml merged, as written (templates unrendered): a variable's value where
    no inventory, group_vars or host_vars sets it."""
    merged: dict = {}
    for path in sorted((ansible_dir / "roles").glob("*/defaults/main.yml")):
        merged.update(load_vars(path))
    return merged


def vars_files(ansible_dir: Path) -> list[Path]:
    """host_vars and group_vars files as Ansible reads them: <name>.yml or a folder <name>/ of files."""
    files = []
    for folder in VARS_FOLDERS:
        for path in sorted((ansible_dir / folder).glob("*")):
            candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            files += [p for p in candidates if p.suffix in VARS_SUFFIXES and not p.name.startswith(".")]
    return files


def unknown_knobs(ansible_dir: Path) -> list[UnknownKnob]:
    """The keys of ansible_dir's host_vars and group_vars that no role declares, file by file."""
    declared = declared_variables(ansible_dir)
    return [knob for path in vars_files(ansible_dir) for knob in unknown_in(path, declared, ansible_dir.parent)]


def unknown_in(path: Path, declared: set[str], base: Path, connection_vars: bool = True,
               text: str | None = None) -> list[UnknownKnob]:
    """The keys of one vars file (a host_vars file, a machine profile) that no role declares; the file named
    from base when it lies under it. connection_vars: Ansible's own ansible_* may be set there (an inventory's
    host_vars), else they are unknown too (a profile, given to every host as extra vars)."""
    choices = sorted(declared)
    shown = path.relative_to(base) if path.is_relative_to(base) else path
    unknown = []
    for key in load_vars(path, text):
        key = str(key)
        if key in declared or (connection_vars and key.startswith("ansible_")):
            continue
        close = difflib.get_close_matches(key, choices, n=1)
        unknown.append(UnknownKnob(shown, key, close[0] if close else None))
    return unknown


def checked_vars(path: Path, label: str, what: str, templates: bool, ansible_dir: Path | None = None,
                 content: bytes | None = None) -> dict:
    """A vars file the user gives machines on top of their host_vars (a machine profile, a knobs file): a mapping
    whose every key some role declares (a misspelled one would be ignored), none of the lab's own (RESERVED) nor
    Ansible's connection variables; templates: whether values may hold template syntax (a profile may not: Ansible
    would run it as root on this host, nor may it set where a role installs, what it runs or downloads, WHERE; a
    knobs file is a host_vars file and may, as the roles' own do). label names what the user typed in every error, what the kind
    of file. content: the file's bytes as the caller read them, the very bytes it hands on (else read here, once)."""
    ansible_dir = ansible_dir or ANSIBLE_DIR
    try:
        text = path.read_text() if content is None else content.decode()
        data = load_vars(path, text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise StepFailed(f"{label}: cannot read {path} ({error})") from error
    if not isinstance(data, dict) or not data:
        raise StepFailed(f"{label}: {path} must be a mapping of role variables (httpd_tls_enabled: true, ...)")
    unknown = unknown_in(path, declared_variables(ansible_dir), REPO, connection_vars=False, text=text)
    if unknown:
        hints = "".join(f"; did you mean {knob.suggestion} for {knob.key}?" for knob in unknown if knob.suggestion)
        raise StepFailed(f"{label}: {path}: no role declares {', '.join(knob.key for knob in unknown)} "
                         f"(roles/*/meta/argument_specs.yml{hints})")
    reserved = sorted(str(key) for key in data if str(key).startswith(RESERVED))
    if reserved:
        raise StepFailed(f"{label}: {path}: {', '.join(reserved)}: the lab's own account, folders and "
                         f"secrets are not {what}'s to change")
    # (a knobs file may name the roles' own folders through templates, as a tune's best.yml does for APR's library;
    # whoever writes one could run anything as root anyway)
    located = [] if templates else sorted(str(key) for key in data if str(key).endswith(WHERE))
    if located:
        raise StepFailed(f"{label}: {path}: {', '.join(located)}: where a role installs, what it runs and what it "
                         f"downloads are the roles' own (provisioning acts on them as root), not {what}'s to change")
    templated = [] if templates else sorted(str(key) for key, value in data.items() if _templated(value))
    if templated:
        raise StepFailed(f"{label}: {path}: {', '.join(templated)}: {what} gives plain values; Ansible "
                         "would run template syntax ({{ }}, {% %}) as root on this host")
    return data


def _templated(value: object) -> bool:
    if isinstance(value, str):
        return any(mark in value for mark in TEMPLATE_MARKS)
    if isinstance(value, dict):
        return any(_templated(key) or _templated(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_templated(item) for item in value)
    return False


def describe(unknown: list[UnknownKnob]) -> str:
    """One line per unknown key, naming its file and the likely intended name."""
    lines = []
    for knob in unknown:
        hint = f" (did you mean {knob.suggestion}?)" if knob.suggestion else ""
        lines.append(f"{knob.file.as_posix()}: {knob.key} is not a variable of any role{hint}")
    return "\n".join(lines)


# Variables whose values are never written to a run folder (it may be shared): by name, and wherever else they
# would be rendered into.
SECRET = re.compile(r"secret|password|token", re.IGNORECASE)
MASKED = "(secret: not shown)"


def masked(value: object) -> object:
    """value with every secret's value not shown: a key SECRET names, at any depth of its mappings and lists (a
    `password:` inside a knob's dict as much as a top-level `httpd_ajp_secret`)."""
    if isinstance(value, Mapping):
        return {key: MASKED if SECRET.search(str(key)) else masked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item) for item in value]
    return value


def rendered(inventory: Path, ansible_dir: Path, hosts: Iterable[str], prefixes: tuple[str, ...],
             extra_vars: dict[str, Path] | None = None, profile: Path | None = None) -> dict[str, dict]:
    """Each host's knobs (variables with these prefixes) as its roles get them: the roles' defaults, then
    group_vars and host_vars, templates rendered ("{{ camel_app_home }}/gc" → the path), secrets masked before
    anything is rendered (a lookup that would make a secret is never run). extra_vars: a host's vars file that
    wins over the rest, as ansible-playbook --extra-vars @file gives it (an A/A run's tuned machine); profile: a machine profile's vars
    file (lab/profiles.py), which wins over everything, on every host."""
    from ansible.inventory.manager import InventoryManager  # the lab's venv: imported only when asked
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    _once(init_plugin_loader)
    loader = DataLoader()
    loader.set_basedir(str(ansible_dir))        # group_vars and host_vars beside site.yml, as ansible-playbook
    hosts_of = InventoryManager(loader=loader, sources=[str(inventory)])
    variables_of = VariableManager(loader=loader, inventory=hosts_of)
    defaults: dict = {}
    for path in sorted((ansible_dir / "roles").glob("*/defaults/main.yml")):
        defaults.update(loader.load_from_file(str(path.resolve()), trusted_as_template=True) or {})
    knobs = {}
    for name in hosts:
        variables = {**defaults, **variables_of.get_vars(host=hosts_of.get_host(name))}
        if extra_vars and name in extra_vars:
            variables.update(loader.load_from_file(str(extra_vars[name].resolve()), trusted_as_template=True) or {})
        if profile:
            variables.update(loader.load_from_file(str(profile.resolve()), trusted_as_template=True) or {})
        variables.update({key: MASKED for key in variables if SECRET.search(key)})
        # and a knob's nested ones (not hostvars' and the like: only the knobs are shown)
        variables.update({key: masked(variables[key]) for key in variables if key.startswith(prefixes)})
        templar = Templar(loader=loader, variables=variables)
        knobs[name] = {key: _render(templar, variables[key]) for key in sorted(variables) if key.startswith(prefixes)}
    return knobs


def _render(templar, value: object) -> object:
    """A value rendered to plain JSON types; one Ansible cannot render here (it needs the machine's facts, say)
    stays as written, saying so, and the other knobs are still shown."""
    try:
        return json.loads(json.dumps(templar.template(value), default=str))
    except Exception as error:  # noqa: BLE001  (Ansible's templating errors are many)
        return f"{json.loads(json.dumps(value, default=str))} (not rendered here: {type(error).__name__})"


@functools.cache
def _once(setup) -> None:
    """Ansible's plugin loader is set up once per process (a second time, it warns)."""
    setup()
