"""What `make check` installs, and a PATH that hides the rest from the fast tests.

`make check` runs `tools/install-deps --with-tests`; `make test` adds `--with-vagrant --with-vm-test`. The programs
of the packages only the latter names are hidden from every test marked fast, so a fast test that calls one
fails here, as it would on a machine where only `make check` ran.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSTALL_DEPS = REPO / "tools" / "install-deps"
CHECK_OPTIONS = ("--with-tests",)
TEST_OPTIONS = ("--with-tests", "--with-vagrant", "--with-vm-test")


def listed_packages(*options: str) -> set[str]:
    """The Debian packages `tools/install-deps OPTIONS` installs, as its --list says."""
    listing = subprocess.run([str(INSTALL_DEPS), "--list", *options], capture_output=True, text=True, check=True).stdout
    line = next(line for line in listing.splitlines() if line.startswith("packages: "))
    return set(line.removeprefix("packages: ").split())


def packages_only_make_test_installs() -> set[str]:
    return listed_packages(*TEST_OPTIONS) - listed_packages(*CHECK_OPTIONS)


def programs_only_make_test_installs() -> set[str]:
    """The names of the programs those packages put on this host (none where they are not installed)."""
    packages = sorted(packages_only_make_test_installs())
    files = subprocess.run(["dpkg-query", "-L", *packages], capture_output=True, text=True).stdout.splitlines()
    program_dirs = {"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}
    return {Path(f).name for f in files if str(Path(f).parent) in program_dirs}


def hidden_path(path: str, hidden: set[str], shadow: Path) -> str:
    """A PATH of one folder, `shadow`, holding a link to every program `path` finds, except those named `hidden`.

    First match wins, as on `path`: a name in two of its folders links to the first.
    """
    shadow.mkdir(parents=True, exist_ok=True)
    for folder in path.split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = shadow / entry.name
            if entry.name in hidden or link.exists() or link.is_symlink():
                continue
            if os.access(entry.path, os.X_OK) and not entry.is_dir():
                link.symlink_to(os.path.abspath(entry.path))
    return str(shadow)
