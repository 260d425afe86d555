"""Latency must never block the event loop, and keep-alive must work."""

from __future__ import annotations

import http.client
import time

from .helpers import get_on, parallel_gets


def test_fifty_parallel_requests_overlap(start_mock) -> None:
    server = start_mock("--latency", "fixed:500")
    t0 = time.perf_counter()
    replies = parallel_gets(server.base_url, "/data", 50)
    wall = time.perf_counter() - t0
    assert len(replies) == 50
    assert all(r.status == 200 for r in replies)
    assert all(r.elapsed >= 0.5 for r in replies)
    # Serial would be 25 s; one latency plus slack proves they overlapped.
    assert wall < 1.5


def test_keep_alive_reuses_connection(fast_mock) -> None:
    host, port = fast_mock.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        first = get_on(conn, "/data")
        sock = conn.sock
        assert sock is not None
        local = sock.getsockname()
        for path in ("/data", "/health", "/data", "/data"):
            reply = get_on(conn, path)
            assert reply.status == 200
            assert reply.headers.get("connection", "").lower() != "close"
            # http.client silently reconnects if the server closed; the same
            # socket object and local port prove the connection was reused.
            assert conn.sock is sock
            assert sock.getsockname() == local
        assert first.headers.get("connection", "").lower() != "close"
    finally:
        conn.close()


def test_max_concurrency_serves_requests_one_at_a_time(start_mock) -> None:
    # The original backend (http.server) answered one request at a time: four at once take four latencies.
    server = start_mock("--latency", "fixed:300", "--max-concurrency", "1", "--backlog", "5")
    assert "max_concurrency=1 backlog=5" in server.startup_line
    t0 = time.perf_counter()
    replies = parallel_gets(server.base_url, "/data", 4)
    wall = time.perf_counter() - t0
    assert all(r.status == 200 for r in replies)
    assert wall >= 4 * 0.3 - 0.05
    assert sorted(r.elapsed for r in replies)[-1] >= 4 * 0.3 - 0.05   # the last waited for the three before it
