"""The backend named on the command line, or the one a bare ./start.sh picks."""
from __future__ import annotations

from pathlib import Path

from lab.errors import StepFailed
from lab.machines.local.backend import LocalBackend
from lab.machines.protocol import Backend
from lab.machines.ssh import SshBackend
from lab.machines.vagrant import VagrantBackend, default_backend

__all__ = ["choose", "default_backend"]


def choose(name: str | None, inventory: Path | None) -> Backend:
    if name == "local":
        return LocalBackend()
    if name == "ssh":
        if inventory is None:
            raise StepFailed("--backend ssh needs --inventory PATH (see ansible/inventories/ssh/hosts.example.yml)")
        return SshBackend(inventory)
    if name == "vagrant":
        return VagrantBackend()
    raise StepFailed(f"unknown backend {name!r}: choose local, vagrant or ssh")
