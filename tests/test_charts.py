"""The time the charts are drawn on: the run's clock when the machines were loaded at once; in a sequential run each
machine's own, from when its load began, so the two overlay and each carries its own ramp-up and steady marks (the
second machine's latency chart used to carry the first one's marks, 70 s before its own load began)."""
from __future__ import annotations

import pytest

from lab.report.plotting import OWN_TIME_AXIS, TIME_AXIS, ChartContext

pytestmark = pytest.mark.fast


def _load(start: float, end: float, ramp_end: float, steady: float) -> dict:
    return {"load_start_s": start, "load_end_s": end,
            "window": {"duration_s": end - steady, "start_s": steady, "ramp_end_s": ramp_end, "settled": True}}


def _series(start: float) -> dict:
    return {"load": {"seconds": [start + s for s in range(3)], "buckets": [start, start + 10], "throughput_rps": [1, 2, 3]},
            "pcp": {"t": [start - 90, start], "proc_t": [start], "app_t": [start + 1], "load1": [0.5, 0.7]},
            "gc": [{"t": start + 5, "pause_ms": 3}, {"t": None, "uptime_s": 2, "pause_ms": 4}]}


# runs/20261129-125247 (a quick run, one machine after the other): default loaded 3.1-92.9 s of the run, steady
# from 49.0; tuned 95.4-185.4 s, steady from 136.0; both ramped up for 20 s
SEQUENTIAL = {"run": {"schedule": "sequential", "backend": "local", "duration_s": 187.0},
              "machines": {"default": {"load": _load(3.079, 92.93, 23.079, 49.0)},
                           "tuned": {"load": _load(95.427, 185.357, 115.427, 136.0)}}}


def test_a_sequential_run_draws_each_machine_on_its_own_time_with_its_own_marks() -> None:
    ctx = ChartContext.of(SEQUENTIAL, {"machines": {"default": _series(3.079), "tuned": _series(95.427)}})
    assert ctx.time_axis == OWN_TIME_AXIS
    for name in ("default", "tuned"):
        assert ctx.series_of(name, "load", "seconds") == pytest.approx([0, 1, 2])
        assert ctx.series_of(name, "load", "buckets") == pytest.approx([0, 10])
        assert ctx.series_of(name, "pcp", "t") == pytest.approx([-90, 0]) and ctx.series_of(name, "pcp", "app_t") == [
            pytest.approx(1)]
        assert [p["t"] for p in ctx.series_of(name, "gc")] == [pytest.approx(5), None]    # uptime-only stays so
        assert ctx.series_of(name, "load", "throughput_rps") == [1, 2, 3]                # values untouched
    # one ramp-up mark (20 s into each load), each machine's own steady mark
    assert [(round(x, 3), label) for x, label in ctx.marks] == [
        (20.0, "end of ramp-up"), (40.573, "tuned: steady from"), (45.921, "default: steady from")]
    # a panel of its own: only its machine's marks, its name left out
    assert [(round(x, 3), label) for x, label in ctx.marks_of("tuned")] == [(20.0, "end of ramp-up"),
                                                                           (40.573, "steady from")]
    # the axis: both loads, from their start to the longer one's end
    assert ctx.xlim == pytest.approx((-0.8993, 90.8293), abs=1e-3)


def test_machines_loaded_at_once_share_the_runs_clock_and_one_mark_where_theirs_agree() -> None:
    parallel = {"run": {**SEQUENTIAL["run"], "schedule": "parallel", "duration_s": 95.0},
                "machines": {"default": {"load": _load(3.0, 93.0, 23.0, 49.0)},
                             "tuned": {"load": _load(3.1, 92.0, 23.1, 49.4)}}}
    series = {"machines": {"default": _series(3.0), "tuned": _series(3.1)}}
    ctx = ChartContext.of(parallel, series)
    assert ctx.time_axis == TIME_AXIS and ctx.series["tuned"] is series["machines"]["tuned"]
    assert ctx.marks == [(23.0, "end of ramp-up"), (49.0, "steady from")]
    assert ctx.xlim == pytest.approx((-0.95, 95.95))
    # a sequential run of one machine (an ablation's configuration, a tune's): its run's clock too
    alone = {"run": SEQUENTIAL["run"], "machines": {"tuned": SEQUENTIAL["machines"]["tuned"]}}
    assert ChartContext.of(alone, {"machines": {"tuned": _series(95.427)}}).time_axis == TIME_AXIS
