"""Ending a process the lab started in a session of its own (JMeter, its engines, the report generator); JMeter
first through its own shutdown port, so that it keeps what it measured."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

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


def stop_jmeter(popen: subprocess.Popen, udp_port: int, problems: list[str], prefix: list[str] | None = None) -> None:
    """JMeter's own shutdown (finish current samples), then StopTestNow, then SIGTERM, then SIGKILL."""
    try:
        if popen.poll() is None:
            _send_command(udp_port, "Shutdown", prefix)
            if wait(popen, SHUTDOWN_GRACE_S):
                return
            _send_command(udp_port, "StopTestNow", prefix)
            if wait(popen, STOP_NOW_GRACE_S):
                return
            problems.append("JMeter ignored Shutdown/StopTestNow; terminated")
    except KeyboardInterrupt:                   # a second Ctrl-C: no more patience
        problems.append("stopped JMeter forcibly (second interrupt)")
    kill(popen)
