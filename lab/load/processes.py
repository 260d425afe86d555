"""Ending a process the lab started in a session of its own (JMeter, its engines, the report generator); JMeter
first through its own shutdown port, so that it keeps what it measured."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

KILL_GRACE_S = 5.0          # SIGTERM, then SIGKILL
SHUTDOWN_GRACE_S = 10.0     # "Shutdown": threads finish their current sample
STOP_NOW_GRACE_S = 10.0     # "StopTestNow": in-flight samples are interrupted


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


def _ended(popen: subprocess.Popen, seconds: float, drained: Callable[[float], bool] | None, since_ms: float) -> bool:
    """True if the process ended within seconds; False at once when drained(since_ms) says its samples have."""
    if drained is None:
        return wait(popen, seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wait(popen, 0.2):
            return True
        try:
            if drained(since_ms):
                return False
        except Exception:  # noqa: BLE001  (a results file it cannot read: the grace, as without it)
            return wait(popen, max(0.0, deadline - time.monotonic()))
    return False


def _send_command(port: int, command: str, prefix: list[str] | None = None) -> None:
    """One of JMeter's UDP commands to its loopback port; inside a machine's network when JMeter runs there."""
    if prefix:
        script = "import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(sys.argv[2].encode(), " \
                 "('127.0.0.1', int(sys.argv[1])))"
        try:
            subprocess.run([*prefix, sys.executable, "-c", script, str(port), command], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        return
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(command.encode(), ("127.0.0.1", port))
    except OSError:
        pass


def stop_jmeter(popen: subprocess.Popen, udp_port: int, problems: list[str], prefix: list[str] | None = None,
                drained: Callable[[float], bool] | None = None) -> None:
    """JMeter's own shutdown (finish current samples), then StopTestNow, then SIGTERM, then SIGKILL.

    drained(ms): whether the load is over: every sample running at that time (epoch ms, just before Shutdown was
    sent) has ended, and the machines have served what they were sent (lab/load/run.py); then StopTestNow follows at
    once. JMeter 5.6's Open Model Thread Group never ends on Shutdown alone (its graceful stop leaves its thread pool
    open, and the engine waits for that pool): every capacity run waited out the whole grace, 3-7 s after its last
    sample had ended. (Two last samples that end together each see the other: the grace then runs out as before.)"""
    try:
        if popen.poll() is None:
            since_ms = time.time() * 1000
            _send_command(udp_port, "Shutdown", prefix)
            if _ended(popen, SHUTDOWN_GRACE_S, drained, since_ms):
                return
            _send_command(udp_port, "StopTestNow", prefix)
            if wait(popen, STOP_NOW_GRACE_S):
                return
            problems.append("JMeter ignored Shutdown/StopTestNow; terminated")
    except KeyboardInterrupt:                   # a second Ctrl-C: no more patience
        problems.append("stopped JMeter forcibly (second interrupt)")
    kill(popen)


def free_udp_port() -> int:
    """A UDP port free on loopback now, for JMeter's shutdown commands."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def killed_by(returncode: int | None) -> str | None:
    """The signal that ended JMeter: killed outright (negative), or a JVM that exited on one (128 + n)."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 \
        if returncode - 128 in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM) else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
