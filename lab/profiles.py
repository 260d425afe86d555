"""Machine profiles: variables given to both machines alike, on top of their knobs (ansible/profiles/).

A profile changes the experiment, not the tuning: ``ansible/profiles/2018.yml`` gives both machines the
2018 write-up's TLS, audit workload and backend, and the tuned machine still differs from the default
one by its host_vars only. ``./start.sh up --profile NAME`` records it for this checkout's lab; every
playbook run after that (up, up --only, an A/A run, an ablation step) passes it last, so it wins over
the host_vars and over any other extra vars, until ``up --profile none`` or ``down``."""
from __future__ import annotations

import hashlib
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
        """What run.json keeps (a run folder may be shared): a secret's value is not shown."""
        return {"name": self.name, "file": str(self.file),
                "variables": knobs.masked(self.variables())}


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


def load(path: Path, typed: str, content: bytes | None = None) -> dict:
    """The profile's variables, every one of them a knob some role declares (a misspelled one would be ignored),
    plain values only: Ansible would run template syntax as root on this host. content: the bytes to check (the
    ones hashed and handed on), else the file's."""
    return knobs.checked_vars(path, f"--profile {typed}", "a profile", templates=False, content=content)


def active(record: Path | None = None) -> Profile | None:
    """The profile this checkout's machines were brought up with, None without one; checked again, and refused
    if its file changed since it was chosen."""
    return _recorded(record or ACTIVE)[0]


def _recorded(record: Path) -> tuple[Profile | None, bytes]:
    """The recorded profile and its file's content, as it was when chosen (checked again here)."""
    try:
        data = json.loads(record.read_text())
        profile, chosen = Profile(str(data["name"]), Path(data["file"])), data.get("sha256")
    except FileNotFoundError:
        return None, b""
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StepFailed(f"{record} is unreadable ({error}): ./start.sh up --profile NAME|none records it again") \
            from error
    try:
        content = profile.file.read_bytes()
    except OSError as error:
        raise StepFailed(f"the machine profile {profile.describe()} cannot be read ({error}): ./start.sh up "
                         "--profile NAME|none chooses again") from error
    if chosen is None:                  # recorded by a lab that kept no digest
        raise StepFailed(f"the machine profile {profile.describe()} was chosen by an earlier version of the lab, "
                         f"which kept no digest of it: ./start.sh up --profile {profile.file} chooses it again")
    if hashlib.sha256(content).hexdigest() != chosen:
        raise StepFailed(f"the machine profile {profile.describe()} changed since ./start.sh up chose it: "
                         f"./start.sh up --profile {profile.file} gives both machines what it says now "
                         "(or --profile none)")
    load(profile.file, profile.name, content)           # the bytes hashed are the bytes checked and handed on
    return profile, content


def choose(typed: str, record: Path | None = None) -> Profile | None:
    """Records the profile --profile names (none: no profile) for the playbook runs that follow, with a digest of
    its content: a later edit is refused rather than given to the machines unchecked."""
    record = record or ACTIVE
    if typed == NONE:
        forget(record)
        return None
    profile = find(typed)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"name": profile.name, "file": str(profile.file),
                                  "sha256": hashlib.sha256(profile.file.read_bytes()).hexdigest()}) + "\n")
    return profile


def forget(record: Path | None = None) -> None:
    record = record or ACTIVE
    record.unlink(missing_ok=True)
    record.with_suffix(".checked.yml").unlink(missing_ok=True)


def extra_vars(record: Path | None = None) -> list[str]:
    """ansible-playbook's arguments for the active profile (last, so they win), none without one: a copy of the
    content that was checked, so that what the playbook reads is what was checked."""
    record = record or ACTIVE
    profile, content = _recorded(record)
    if profile is None:
        return []
    checked = record.with_suffix(".checked.yml")
    checked.write_bytes(content)
    return ["--extra-vars", f"@{checked}"]
