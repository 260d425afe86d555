"""Machine profiles: variables given to both machines alike, on top of their knobs (ansible/profiles/).

A profile changes the experiment, not the tuning: ``ansible/profiles/2018.yml`` gives both machines the
2018 write-up's TLS, audit workload and backend, and the tuned machine still differs from the default
one by its host_vars only. ``./start.sh up --profile NAME`` records it for this checkout's lab; every
playbook run after that (up, up --only, an A/A run, an ablation step) passes it last, so it wins over
the host_vars and over any other extra vars, until ``up --profile none`` or ``down``."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lab import knobs
from lab.errors import StepFailed
from lab.paths import ANSIBLE_DIR, REPO, callers

PROFILES = ANSIBLE_DIR / "profiles"
ACTIVE = REPO / ".cache" / "machine-profile.json"
NONE = "none"


@dataclass(frozen=True)
class Profile:
    name: str
    file: Path

    def variables(self) -> dict:
        return load(self.file, self.name)

    def describe(self) -> str:
        shown = self.file.relative_to(REPO) if self.file.is_relative_to(REPO) else self.file
        return f"{self.name} ({shown})"

    def as_json(self) -> dict:
        return {"name": self.name, "file": str(self.file), "variables": self.variables()}


def shipped() -> list[str]:
    return sorted(path.stem for path in PROFILES.glob("*.yml"))


def find(typed: str) -> Profile:
    """The profile --profile names: a shipped one's name, else a vars file of the user's."""
    named = PROFILES / f"{typed.removesuffix('.yml')}.yml"
    if "/" not in typed and named.is_file():
        return Profile(named.stem, named)
    path = callers(typed)
    if not path.is_file():
        raise StepFailed(f"--profile {typed}: no shipped profile of that name (shipped: {', '.join(shipped())}, or "
                         f"{NONE}) and no such file")
    load(path, typed)
    return Profile(path.stem, path.resolve())


def load(path: Path, typed: str) -> dict:
    """The profile's variables, every one of them a knob some role declares (a misspelled one would be ignored)."""
    try:
        data = knobs.load_vars(path)
    except (OSError, ValueError) as error:
        raise StepFailed(f"--profile {typed}: cannot read {path} ({error})") from error
    if not isinstance(data, dict) or not data:
        raise StepFailed(f"--profile {typed}: {path} must be a mapping of role variables (httpd_tls_enabled: true, ...)")
    unknown = knobs.unknown_in(path, knobs.declared_variables(ANSIBLE_DIR), REPO, connection_vars=False)
    if unknown:
        hints = "".join(f"; did you mean {knob.suggestion} for {knob.key}?" for knob in unknown if knob.suggestion)
        raise StepFailed(f"--profile {typed}: {path}: no role declares {', '.join(knob.key for knob in unknown)} "
                         f"(roles/*/meta/argument_specs.yml{hints})")
    return data


def active(record: Path | None = None) -> Profile | None:
    """The profile this checkout's machines were brought up with, None without one."""
    record = record or ACTIVE
    try:
        data = json.loads(record.read_text())
        return Profile(str(data["name"]), Path(data["file"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StepFailed(f"{record} is unreadable ({error}): ./start.sh up --profile NAME|none records it again") \
            from error


def choose(typed: str, record: Path | None = None) -> Profile | None:
    """Records the profile --profile names (none: no profile) for the playbook runs that follow."""
    record = record or ACTIVE
    if typed == NONE:
        record.unlink(missing_ok=True)
        return None
    profile = find(typed)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"name": profile.name, "file": str(profile.file)}) + "\n")
    return profile


def forget(record: Path | None = None) -> None:
    (record or ACTIVE).unlink(missing_ok=True)


def extra_vars(record: Path | None = None) -> list[str]:
    """ansible-playbook's arguments for the active profile (last, so they win), none without one."""
    profile = active(record)
    return ["--extra-vars", f"@{profile.file}"] if profile else []
