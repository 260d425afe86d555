"""What a run records about where and with what it ran (run.json's host and versions): the host, the Java
JMeter runs on, the lab's own commit."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

from lab import contract, load
from lab.paths import REPO


def environment() -> contract.Host:
    """The host a run ran on: its CPUs, memory, kernel, OS, Python and the Java JMeter runs on."""
    meminfo = Path("/proc/meminfo").read_text()
    memory_kb = int(meminfo.split("MemTotal:")[1].split()[0])
    return {"cpus": os.cpu_count(), "memory_bytes": memory_kb * 1024, "kernel": platform.release(),
            "os": platform.platform(), "python": platform.python_version(), "java": java_version()}


def java_version() -> str | None:
    """The first line of `java -version` of the Java JMeter runs on (JAVA_HOME first, as there)."""
    try:
        lines = load.java_version(load.java_executable()).splitlines()
    except load.LoadError:
        return None
    return lines[0] if lines else None


def lab_version(repo: Path = REPO) -> str:
    """The checkout's commit (git describe), or why there is none: the run is kept either way."""
    if shutil.which("git") is None:
        return "unknown (git is not installed)"
    described = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty"],
                               capture_output=True, text=True)
    if described.returncode != 0:
        return f"unknown ({described.stderr.strip().splitlines()[-1] if described.stderr.strip() else 'not a git checkout'})"
    return described.stdout.strip()
