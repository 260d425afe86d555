"""Error injection on GET /data; /health is never affected."""

from __future__ import annotations

import http.client
import json

from .helpers import get, get_on, parallel_gets


def _statuses(base_url: str, n: int) -> list[int]:
    # Sequential on one keep-alive connection: fast at fixed:0.
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        return [get_on(conn, "/data").status for _ in range(n)]
    finally:
        conn.close()


def test_rate_one_always_errors_with_json_body(start_mock) -> None:
    server = start_mock("--latency", "fixed:0", "--error-rate", "1.0",
                        "--error-status", "503")
    for _ in range(20):
        reply = get(server.base_url, "/data")
        assert reply.status == 503
        assert reply.headers["content-type"].startswith("application/json")
        body = json.loads(reply.body)
        assert body["status"] == 503
        assert isinstance(body["error"], str) and body["error"]


def test_default_error_status_is_500(start_mock) -> None:
    server = start_mock("--latency", "fixed:0", "--error-rate", "1")
    reply = get(server.base_url, "/data")
    assert reply.status == 500
    assert json.loads(reply.body) == {"error": "injected failure", "status": 500}


def test_rate_half_is_roughly_half(start_mock) -> None:
    server = start_mock("--latency", "fixed:0", "--error-rate", "0.5",
                        "--error-status", "429")
    statuses = _statuses(server.base_url, 400)
    errors = statuses.count(429)
    assert set(statuses) <= {200, 429}
    assert 0.35 * 400 <= errors <= 0.65 * 400


def test_rate_zero_never_errors(fast_mock) -> None:
    assert set(_statuses(fast_mock.base_url, 200)) == {200}


def test_health_never_errors_or_waits(start_mock) -> None:
    server = start_mock("--latency", "fixed:300", "--error-rate", "1.0")
    replies = parallel_gets(server.base_url, "/health", 30)
    assert all(r.status == 200 for r in replies)
    assert all(json.loads(r.body) == {"status": "UP"} for r in replies)
    assert max(r.elapsed for r in replies) < 0.25


def test_unknown_path_is_404(fast_mock) -> None:
    assert get(fast_mock.base_url, "/nope").status == 404
