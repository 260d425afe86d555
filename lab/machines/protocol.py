"""What every backend offers the rest of the lab: the two machines, created and removed, reached by
command, their files pulled. Every backend provisions with the same playbook; they differ in how
machines are created and destroyed, and how a command reaches a machine."""
from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Pulled:
    """Files copied from a machine, and what went wrong if not all could be."""
    files: list[Path] = field(default_factory=list)
    problem: str | None = None


class Backend(Protocol):
    name: str                   # local, ssh or vagrant
    service_manager: str        # supervisord or systemd: how the machines' processes are supervised
    inventory: Path             # the Ansible inventory the playbook runs with

    @property
    def emulation_note(self) -> str:
        """One sentence on what these machines are (shared host, VMs, real hosts)."""
        ...

    def up(self) -> None:
        """Creates the machines (idempotent); provisioning is the playbook's job."""
        ...

    def down(self) -> None:
        """Removes everything up created."""
        ...

    def address(self, name: str) -> str: ...

    def exists(self, name: str) -> bool: ...

    def processes(self, name: str) -> dict[str, str]:
        """The lab's processes on the machine and their states, in supervisord's words (RUNNING …)."""
        ...

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess: ...

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status one of the machine's processes."""
        ...

    def home(self, name: str) -> Path | str:
        """The machine's lab_home (on the machine; on the local backend also readable from this host)."""
        ...

    def remove(self, name: str, glob: str) -> None:
        """Deletes the files matching glob under the machine's lab_home."""
        ...

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination, keeping their paths."""
        ...

    def begin_measurement(self, name: str) -> None: ...

    def memory_events(self, name: str) -> dict:
        """{"oom_kills": int | None, "peak_memory_bytes": int | None} so far."""
        ...

    def journal(self, name: str, since: float, until: float) -> str:
        """What the service manager logged about the lab's processes (systemd machines; else "")."""
        ...


def place(sources: list[Path], root: Path, destination: Path, transfer: Callable[[Path, Path], object]) -> list[Path]:
    """Copies or moves (transfer) the files among sources to destination, at their paths under root."""
    placed = []
    for source in sources:
        if source.is_file():
            target = destination / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            transfer(source, target)
            placed.append(target)
    return placed
