"""Ending a process the lab started in a session of its own (JMeter, its engines, the report generator)."""
from __future__ import annotations

import os
import signal
import subprocess

KILL_GRACE_S = 5.0          # SIGTERM, then SIGKILL


def wait(popen: subprocess.Popen, seconds: float) -> bool:
    """True if the process ended within seconds."""
    try:
        popen.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def kill(popen: subprocess.Popen, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM to the process's group (its own session: the process and what it started), then SIGKILL."""
    if popen.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if wait(popen, grace):
            return
