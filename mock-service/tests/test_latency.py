"""Latency injection on GET /data, measured over real HTTP."""

from __future__ import annotations

from .helpers import get, median, parallel_gets


def test_fixed_300_each_request_waits(start_mock) -> None:
    server = start_mock("--latency", "fixed:300")
    for _ in range(3):
        reply = get(server.base_url, "/data")
        assert reply.status == 200
        assert 0.3 <= reply.elapsed < 0.3 + 0.25


def test_fixed_0_is_fast(fast_mock) -> None:
    times = [get(fast_mock.base_url, "/data").elapsed for _ in range(20)]
    assert median(times) < 0.05
    assert max(times) < 0.25


def test_uniform_bounds_respected(start_mock) -> None:
    server = start_mock("--latency", "uniform:50,150")
    replies = parallel_gets(server.base_url, "/data", 20)
    times = [r.elapsed for r in replies]
    assert all(r.status == 200 for r in replies)
    assert min(times) >= 0.05
    assert max(times) < 0.15 + 0.15
    assert max(times) - min(times) > 0.02  # really drawn, not a fixed value


def test_lognormal_median_roughly_right(start_mock) -> None:
    server = start_mock("--latency", "lognormal:40,0.5")
    replies = parallel_gets(server.base_url, "/data", 200, concurrency=25)
    times = sorted(r.elapsed for r in replies)
    assert all(r.status == 200 for r in replies)
    assert 0.6 * 0.040 <= median(times) <= 1.6 * 0.040
    # sigma 0.5 -> p90/p10 = e^(2 * 1.2816 * 0.5) ~ 3.6; a spread this wide
    # rules out a server that ignores the distribution and sleeps the median.
    assert times[180] / times[20] > 1.8


def test_health_has_no_latency(start_mock) -> None:
    server = start_mock("--latency", "fixed:400")
    times = [get(server.base_url, "/health").elapsed for _ in range(5)]
    assert max(times) < 0.2
