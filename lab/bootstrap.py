"""Gets the command line into the project's venv: what the lab needs installed (tools/install-deps),
then the same command again under .venv/bin/python, so every module runs in one interpreter with the
pinned packages. Standard library only: it runs under the system's python3."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lab.errors import LabError
from lab.hostlab import HostLab
from lab.paths import REPO, VENV
from lab.progress import step

# Commands that change the machines install what is missing first; the others only when the venv is.
INSTALLING = {None, "up"}
COMMANDS = ("up", "run", "capacity", "ablate", "compare", "status", "down", "jmeter")


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _command(argv: list[str]) -> str | None:
    return next((arg for arg in argv if arg in COMMANDS), None)


def enter_venv(argv: list[str]) -> None:
    """Installs what is missing, then replaces this process with the same command in the venv."""
    python = VENV / "bin" / "python"
    host = HostLab()
    if _command(argv) in INSTALLING:
        try:    # another checkout's lab: refused before anything is installed (the others: by lab.cli)
            host.check_checkout(_command(argv) or "up")
        except LabError as error:
            print(f"start.sh: {error}", file=sys.stderr)
            sys.exit(1)
    if _command(argv) in INSTALLING or not python.is_file():
        try:
            # Under the host's lock, as every command that changes the lab: two installs at once would race in
            # apt and pip.
            with host.busy(f"./start.sh {' '.join(argv)}".rstrip() + " (installing)"):
                _install()
        except LabError as error:
            print(f"start.sh: {error}", file=sys.stderr)
            sys.exit(1)
    os.execv(str(python), [str(python), "-m", "lab", *argv])


def _install() -> None:
    """tools/install-deps, its lines on this process's stderr; exits if it fails."""
    with step("Installing what the lab needs"):
        # Its lines go through this process's stderr, so the step's heartbeat knows when it is silent.
        with subprocess.Popen([str(REPO / "tools" / "install-deps")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace") as install:
            assert install.stdout is not None
            for line in install.stdout:
                print(line, end="", file=sys.stderr, flush=True)
        if install.returncode != 0:
            print("start.sh: tools/install-deps failed (see its message above)", file=sys.stderr)
            sys.exit(1)
