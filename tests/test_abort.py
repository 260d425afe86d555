"""--stop-on-fail (lab/load/abort.py): which progress reports lose a threshold, the options that ask for it, and
a lost threshold judged broken whatever the shortened load's figures say. A real JMeter stopped by it:
tests/test_load.py::test_a_lost_threshold_stops_the_load_and_the_phases_still_to_come."""
from __future__ import annotations

import pytest

from lab import cli, options
from lab.analysis import thresholds
from lab.errors import StepFailed
from lab.load.abort import ThresholdWatch
from lab.load.openmodel import Slo, StepLoad, StepWatch

pytestmark = pytest.mark.fast


def report(elapsed_s: float, **machines: dict) -> dict:
    base = {"state": "running", "elapsed_s": elapsed_s, "error_rate": 0.0, "p95_ms": 40.0, "broken": False,
            "capacity_rps": None}
    return {"elapsed_s": elapsed_s, "machines": {name: {**base, **figures} for name, figures in machines.items()}}


def test_an_error_rate_over_its_limit_twice_in_a_row_after_the_ramp_is_lost():
    watch = ThresholdWatch({"error_pct_max": 1}, ramp_s=20)
    assert watch(report(10, default={"error_rate": 0.5}, tuned={})) is None       # in the ramp: not judged
    assert watch(report(25, default={"error_rate": 0.02}, tuned={})) is None      # once: a spike, perhaps
    assert watch(report(30, default={"error_rate": 0.005}, tuned={})) is None     # back under it: the count restarts
    assert watch(report(35, default={"error_rate": 0.02}, tuned={})) is None
    lost = watch(report(40, default={"error_rate": 0.03}, tuned={}))
    assert lost == {"threshold": "error_pct_max", "machine": "default",
                    "why": "threshold error_pct_max lost on default after 40 s of its load: errors 3.00% > 1% in 2 "
                           "progress reports in a row"}


def test_a_threshold_named_for_one_machine_watches_that_machine_only():
    watch = ThresholdWatch({"tuned.p95_ms_max": 100}, ramp_s=0)
    slow_default = report(5, default={"p95_ms": 900.0}, tuned={})
    assert watch(slow_default) is None and watch(slow_default) is None
    assert watch(report(5, default={}, tuned={"p95_ms": 150.0})) is None
    assert watch(report(10, default={}, tuned={"p95_ms": 180.0}))["machine"] == "tuned"
    # a machine still waiting for its turn (sequential) is not judged
    assert ThresholdWatch({"p95_ms_max": 1}, 0)(report(5, default={"state": "waiting", "p95_ms": 9.0})) is None


def test_a_capacity_under_its_minimum_is_lost_once_the_machine_is_past_its_knee():
    watch = ThresholdWatch({"capacity_rps_min": 500}, ramp_s=0)
    assert watch(report(60, default={"capacity_rps": None}, tuned={})) is None        # not past its knee yet
    assert watch(report(60, default={"broken": True, "capacity_rps": 600}, tuned={})) is None
    lost = watch(report(90, default={"broken": True, "capacity_rps": 600},
                        tuned={"broken": True, "capacity_rps": 300, "state": "done"}))
    assert lost["machine"] == "tuned" and "a capacity of 300 req/s, below 500" in lost["why"]
    assert "no capacity" in ThresholdWatch({"capacity_rps_min": 1}, 0)(
        report(9, default={"broken": True, "capacity_rps": None}))["why"]


def test_the_step_watch_knows_its_capacity_once_past_the_knee():
    load = StepLoad(start_rps=100, step_rps=100, step_s=10, max_rps=600, slo=Slo(p99_ms=1000, error_pct=0.1))
    watch = StepWatch(load)
    watch.judged = {0: True, 1: True, 2: False}
    assert watch.capacity_rps is None and not watch.broken
    watch.judged[3] = False
    assert watch.broken and watch.knee == 2 and watch.capacity_rps == 200
    watch.judged = {0: False, 1: False}
    assert watch.broken and watch.capacity_rps is None


def _experiment(argv: list[str]) -> options.Experiment:
    return options.experiment(cli._parser().parse_args(argv))


def test_stop_on_fail_is_asked_for_with_a_threshold_it_can_watch():
    chosen = _experiment(["run", "--quick", "--threshold", "error_pct_max=1", "--stop-on-fail"])
    assert chosen.stop_on_fail and chosen.limits == {"error_pct_max": 1}
    assert not _experiment(["run", "--quick", "--threshold", "error_pct_max=1"]).stop_on_fail


@pytest.mark.parametrize("argv, message", [
    (["run", "--quick", "--stop-on-fail"], "--stop-on-fail: none of the run's thresholds can be lost during the load"),
    (["run", "--quick", "--threshold", "ratio_min=1.1", "--stop-on-fail"], "--stop-on-fail: none of the run's"),
    (["run", "--quick", "--threshold", "error_pct_max=1", "--stop-on-fail", "--repeat", "3"],
     "--stop-on-fail with --repeat 3: a repeated run's thresholds are judged on the trials' means"),
    (["ablate", "--quick", "--stop-on-fail"], "--stop-on-fail does not apply to ./start.sh ablate"),
    (["run", "--scenario", "r.yaml", "--stop-on-fail"],
     "--stop-on-fail with repeat: 2 (in r.yaml): a repeated run's thresholds"),
])
def test_stop_on_fail_without_a_threshold_it_can_lose_is_refused(argv, message, tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text("model: closed\nrepeat: 2\nthresholds: {error_pct_max: 1}\n")
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    with pytest.raises(StepFailed) as caught:
        options.ablation(cli._parser().parse_args(argv)) if argv[0] == "ablate" else _experiment(argv)
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_threshold_that_stopped_the_load_is_broken_whatever_the_short_loads_figures():
    summary = {"comparison": [{"key": "error_rate", "default": 0.0, "tuned": 0.0, "ratio": None}]}
    lost = {"threshold": "error_pct_max", "machine": "default", "why": "threshold error_pct_max lost on default"}
    results = {r["machine"]: r for r in thresholds.check(summary, {"error_pct_max": 1}, lost=lost)}
    assert not results["default"]["passed"] and results["tuned"]["passed"]
    assert results["default"]["message"] == ("BROKEN: threshold error_pct_max lost on default; the load stopped "
                                             "there (--stop-on-fail)")
    # a capacity is the report's own figure (the live watch also counts JMeter's port errors): judged as found
    summary = {"comparison": [], "machines": {"default": {"capacity": {"capacity_rps": 600, "found": True}},
                                              "tuned": {"capacity": {"capacity_rps": 300, "found": True}}}}
    lost = {"threshold": "capacity_rps_min", "machine": "default", "why": "a capacity of 450 req/s, below 500"}
    passed = {r["machine"]: r["passed"] for r in thresholds.check(summary, {"capacity_rps_min": 500}, lost=lost)}
    assert passed == {"default": True, "tuned": False}
