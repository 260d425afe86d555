"""Fixtures that run the REAL mock server as a subprocess on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MOCK_DIR = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_mock(*args: str, env: dict[str, str] | None = None,
             timeout: float = 15.0) -> subprocess.CompletedProcess[str]:
    """Run `python -m mock_service` to completion (for config-error tests)."""
    return subprocess.run(
        [sys.executable, "-m", "mock_service", *args],
        cwd=MOCK_DIR, env=clean_env(env), capture_output=True, text=True, timeout=timeout,
    )


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # Drop any MOCK_* from the caller's shell so tests see only what they set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOCK_")}
    env.update(extra or {})
    return env


@dataclass
class MockServer:
    proc: subprocess.Popen
    host: str
    port: int
    startup_line: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _start(args: list[str], env: dict[str, str] | None, port_via_env: bool) -> MockServer:
    # A picked port can be taken in the gap before the child binds it;
    # retry a few times rather than be flaky.
    last_err = ""
    for _ in range(3):
        port = free_port()
        child_env = dict(env or {})
        cmd = [sys.executable, "-m", "mock_service", *args]
        if port_via_env:
            child_env["MOCK_PORT"] = str(port)
        else:
            cmd += ["--port", str(port)]
        proc = subprocess.Popen(
            cmd, cwd=MOCK_DIR, env=clean_env(child_env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        server = MockServer(proc, "127.0.0.1", port)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_err = proc.stderr.read() if proc.stderr else ""
                break
            try:
                with urllib.request.urlopen(f"{server.base_url}/health", timeout=1) as r:
                    if r.status == 200:
                        # The start-up line is printed before serving begins.
                        server.startup_line = proc.stdout.readline().strip()
                        return server
            except OSError:
                time.sleep(0.05)
        else:
            server.stop()
            raise RuntimeError(f"mock did not become healthy on port {port}")
        if "already in use" not in last_err:
            raise RuntimeError(f"mock exited early: {last_err}")
    raise RuntimeError(f"could not start mock: {last_err}")


@pytest.fixture
def start_mock() -> Iterator[Callable[..., MockServer]]:
    """Factory: start_mock('--latency', 'fixed:0', env={...}) -> running MockServer.

    Every server started is terminated at teardown, pass or fail.
    """
    started: list[MockServer] = []

    def factory(*args: str, env: dict[str, str] | None = None,
                port_via_env: bool = False) -> MockServer:
        server = _start(list(args), env, port_via_env)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()
        for stream in (server.proc.stdout, server.proc.stderr):
            if stream:
                stream.close()


@pytest.fixture(scope="module")
def fast_mock() -> Iterator[MockServer]:
    """One shared zero-latency server with default payload, for read-only tests."""
    server = _start(["--latency", "fixed:0"], None, False)
    yield server
    server.stop()
