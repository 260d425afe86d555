"""Knobs a machine is given by ``./start.sh up --knobs FILE`` over its host_vars: a tune's best.yml, a user's own file.

The file is checked (lab.knobs.checked_vars: every key a role's variable) and copied into .cache/given-knobs/: the
machine keeps what it was given even when the file changes or goes away. Every playbook run after that (up, up --only,
the restore after an A/A run or an ablation) gives it again (lab/provision.py), until ``up --knobs none`` or ``down``;
an A/A run or an ablation step gives the machine a configuration of its own instead, for that run only. The file is a
host_vars file (the tune writes ``{{ lab_ajp_secret }}`` where AJP is chosen), so, unlike a machine profile, it may
hold template syntax, as the roles' own host_vars do."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from lab import knobs
from lab.errors import StepFailed
from lab.names import MACHINES
from lab.paths import REPO, callers

FOLDER = REPO / ".cache" / "given-knobs"
NONE = "none"
DEFAULT_MACHINE = "tuned"               # --knobs without --only: the machine that differs by its knobs


@dataclass(frozen=True)
class Given:
    machine: str
    source: str                         # the file as it was given (it may have changed or gone since)
    sha256: str                         # of its content when given, the content the copy holds
    file: Path                          # the checked copy every playbook run reads

    def as_json(self) -> dict:
        return {"machine": self.machine, "source": self.source, "sha256": self.sha256}

    def describe(self) -> str:
        return f"{self.source} (sha256 {self.sha256[:12]}; given by up --knobs)"


def check(typed: str) -> Path:
    """The file --knobs names, checked; StepFailed naming what was typed."""
    return _read_checked(typed)[0]


def _read_checked(typed: str) -> tuple[Path, bytes]:
    """The file --knobs names and its content, read once: the bytes checked are the bytes recorded and copied."""
    path = callers(typed)
    if not path.is_file():
        raise StepFailed(f"--knobs {typed}: no such file ({path}); a vars file of role variables, such as a tune's "
                         f"best.yml, or {NONE} for the machine's host_vars alone")
    try:
        content = path.read_bytes()
    except OSError as error:
        raise StepFailed(f"--knobs {typed}: cannot read {path} ({error})") from error
    knobs.checked_vars(path, f"--knobs {typed}", "a knobs file", templates=True, content=content)
    return path.resolve(), content


def give(machine: str, typed: str, folder: Path | None = None) -> Given | None:
    """Records what the machine is given from now on (none: nothing, its host_vars alone)."""
    folder = folder or FOLDER
    if typed == NONE:
        forget(machine, folder)
        return None
    path, content = _read_checked(typed)
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{machine}.yml"
    copy.write_bytes(content)
    record = {"machine": machine, "source": str(path), "sha256": hashlib.sha256(content).hexdigest()}
    (folder / f"{machine}.json").write_text(json.dumps(record) + "\n")
    return Given(machine, record["source"], record["sha256"], copy)


def forget(machine: str | None = None, folder: Path | None = None) -> None:
    """The machine (every machine: None) back to its host_vars alone at its next provisioning."""
    folder = folder or FOLDER
    for name in MACHINES if machine is None else (machine,):
        (folder / f"{name}.json").unlink(missing_ok=True)
        (folder / f"{name}.yml").unlink(missing_ok=True)


def given(folder: Path | None = None, besides: str | None = None) -> dict[str, Given]:
    """Each machine's given knobs, for those that have some; a copy that is not what was recorded is refused.
    besides: a machine about to be given others (or none), whose record is not read: up --knobs mends a broken one."""
    folder = folder or FOLDER
    found = {}
    for machine in (m for m in MACHINES if m != besides):
        record_file, copy = folder / f"{machine}.json", folder / f"{machine}.yml"
        if not record_file.exists():
            continue
        try:
            record = json.loads(record_file.read_text())
            content = copy.read_bytes()
            source, sha = str(record["source"]), str(record["sha256"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StepFailed(f"{record_file} is unreadable ({error}): ./start.sh up --only {machine} --knobs FILE|none "
                             "records it again") from error
        if hashlib.sha256(content).hexdigest() != sha:
            raise StepFailed(f"{copy} is not what the {machine} machine was given ({source}): ./start.sh up --only "
                             f"{machine} --knobs FILE|none gives it again")
        found[machine] = Given(machine, source, sha, copy)
    return found


def instead(mode: dict) -> dict[str, str]:
    """The knobs file a run's mode (lab/experiment.py) gave each machine for that run instead of its own: an A/A
    run's, an ablation's or a tune's configuration."""
    given = mode.get("knobs_files") or ({"tuned": mode["tuned_knobs"]} if mode.get("tuned_knobs") else {})
    return {machine: path for machine, path in given.items() if path}


def in_effect(mode: dict) -> dict[str, dict]:
    """What up --knobs gave each machine, where a run of that mode left it in place (run.json's given_knobs)."""
    return {machine: item.as_json() for machine, item in given().items() if machine not in instead(mode)}


def knobs_files(mode: dict) -> dict[str, Path]:
    """The knobs file each machine reads in a run of that mode, over its host_vars: the mode's, else up --knobs'."""
    return {**files(), **{machine: REPO / path for machine, path in instead(mode).items()}}


def files(folder: Path | None = None, besides: str | None = None) -> dict[str, Path]:
    """The vars file each machine with given knobs reads, for ansible-playbook and the knobs' rendering."""
    return {machine: item.file for machine, item in given(folder, besides).items()}
