"""Configuration from environment and command line, and clean failures."""

from __future__ import annotations

import signal
import socket

import pytest

from mock_service.config import parse_config

from .conftest import run_mock
from .helpers import get


def test_environment_configures_server(start_mock) -> None:
    env = {"MOCK_PAYLOAD_BYTES": "20000", "MOCK_LATENCY": "fixed:300", "MOCK_SEED": "9",
           "MOCK_HOST": "127.0.0.1"}
    server = start_mock(env=env, port_via_env=True)
    reply = get(server.base_url, "/data")
    assert reply.status == 200
    assert len(reply.body) == 20000
    assert reply.elapsed >= 0.3
    line = server.startup_line
    assert f"127.0.0.1:{server.port}" in line
    assert "payload_bytes=20000" in line and "latency=fixed:300" in line
    assert "error_rate=0" in line


def test_environment_error_injection(start_mock) -> None:
    server = start_mock(env={"MOCK_LATENCY": "fixed:0", "MOCK_ERROR_RATE": "1",
                             "MOCK_ERROR_STATUS": "418"})
    assert get(server.base_url, "/data").status == 418


def test_command_line_overrides_environment(start_mock) -> None:
    env = {"MOCK_PAYLOAD_BYTES": "20000", "MOCK_LATENCY": "fixed:300",
           "MOCK_ERROR_RATE": "1"}
    server = start_mock("--payload-bytes", "8000", "--latency", "fixed:0",
                        "--error-rate", "0", env=env)
    reply = get(server.base_url, "/data")
    assert reply.status == 200
    assert len(reply.body) == 8000
    assert reply.elapsed < 0.25
    assert "payload_bytes=8000" in server.startup_line
    assert "latency=fixed:0" in server.startup_line


@pytest.mark.parametrize(
    "args, env, named",
    [
        (["--latency", "banana"], {}, "--latency"),
        (["--latency", "uniform:9,1"], {}, "--latency"),
        (["--error-rate", "2"], {}, "--error-rate"),
        (["--error-rate", "x"], {}, "--error-rate"),
        (["--error-status", "200"], {}, "--error-status"),
        (["--port", "70000"], {}, "--port"),
        (["--port", "http"], {}, "--port"),
        (["--payload-bytes", "-5"], {}, "--payload-bytes"),
        (["--seed", "abc"], {}, "--seed"),
        ([], {"MOCK_LATENCY": "banana"}, "MOCK_LATENCY"),
        ([], {"MOCK_ERROR_RATE": "2"}, "MOCK_ERROR_RATE"),
        ([], {"MOCK_PORT": "0"}, "MOCK_PORT"),
        ([], {"MOCK_ERROR_STATUS": "302"}, "MOCK_ERROR_STATUS"),
        (["--max-concurrency", "-1"], {}, "--max-concurrency"),
        (["--backlog", "0"], {}, "--backlog"),
        ([], {"MOCK_MAX_CONCURRENCY": "one"}, "MOCK_MAX_CONCURRENCY"),
    ],
)
def test_bad_value_exits_2_with_one_clear_line(args, env, named) -> None:
    done = run_mock(*args, env=env)
    assert done.returncode == 2
    err = done.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert named in err
    assert "expected" in err or "need" in err  # states the accepted form
    assert done.stdout == ""  # never got as far as starting


def test_bad_env_ignored_when_command_line_wins() -> None:
    cfg = parse_config(["--latency", "fixed:5"], {"MOCK_LATENCY": "banana"})
    assert str(cfg.latency) == "fixed:5"


def test_parse_config_defaults_and_env() -> None:
    cfg = parse_config([], {})
    assert (cfg.host, cfg.port, cfg.payload_bytes, str(cfg.latency), cfg.error_rate,
            cfg.error_status, cfg.access_log) == (
        "127.0.0.1", 9090, 5120, "lognormal:20,0.5", 0.0, 500, False)
    cfg = parse_config(["--port", "1234"], {"MOCK_PORT": "4321", "MOCK_SEED": "5",
                                            "MOCK_ACCESS_LOG": "1"})
    assert (cfg.port, cfg.seed, cfg.access_log) == (1234, 5, True)


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_mock("--port", str(port), "--latency", "fixed:0")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr
    assert "in use" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(start_mock, sig) -> None:
    server = start_mock("--latency", "fixed:0")
    server.proc.send_signal(sig)
    assert server.proc.wait(timeout=10) == 0
    assert "Traceback" not in server.proc.stderr.read()
