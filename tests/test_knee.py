"""The knee search's second half without a lab: which machines get finer steps, with which steps, where they go,
and what an interrupt or a failure of them leaves (lab/knee.py)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_capacity import STEPS, T0_MS, _write_results

from lab import knee, load
from lab.errors import StepFailed
from lab.load.profile import LoadResult
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast

LOAD = replace(STEPS, resolution_rps=25)
KNEE_AT_400 = [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200), (4000, 300, 0, 2500),
               (5000, 900, 0.05, 4000)]
NO_KNEE = [(1000, 20, 0, 40), (2000, 25, 0, 60)]


def _folder(tmp_path: Path) -> RunFolder:
    folder = RunFolder(tmp_path / "run")
    for machine, steps in (("default", KNEE_AT_400), ("tuned", NO_KNEE)):
        folder.jmeter.machine_dir(machine).mkdir(parents=True)
        _write_results(folder.jmeter.results(machine), steps)
    return folder


def _coarse(interrupted: bool = False) -> LoadResult:
    return LoadResult(results={}, dashboards={}, interrupted=interrupted, started_at=T0_MS / 1000,
                      ended_at=T0_MS / 1000 + 50, schedule="sequential", profile=LOAD, problems=[], log=Path("/x"))


def test_only_a_machine_whose_coarse_steps_found_a_knee_gets_finer_steps(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    assert knee.brackets(folder, LOAD, ("default", "tuned"), T0_MS / 1000) == {"default": (300, 400)}
    calls = []

    def run(targets, profile, out_dir, **kwargs):
        calls.append((targets, profile, Path(out_dir), kwargs["dashboards"]))
        return replace(_coarse(), results={})
    monkeypatch.setattr(load, "run", run)
    problems: list[str] = []
    result = knee.refine(folder, LOAD, _coarse(), {"default": "http://d", "tuned": "http://t"}, "/svc", None, None,
                         None, problems)
    assert not result.interrupted and result.ended_at > T0_MS / 1000 + 50 and problems == []
    [(targets, profile, out, dashboards)] = calls
    assert targets == {"default": "http://d"} and profile.rates() == [200, 300, 325, 350, 375] and not dashboards
    assert out == folder.jmeter.refine("default").root
    record = json.loads((out / "steps.json").read_text())
    assert (record["met_rps"], record["missed_rps"], record["profile"]["start_rps"], record["profile"]["lead_rps"]) == (
        300, 400, 300, 200)


def test_a_machine_whose_load_the_watch_ended_on_a_stalled_miss_gets_finer_steps(tmp_path, monkeypatch):
    # its 400 req/s step missed with its arrivals over twice its length: one miss by arrivals, two by the watch's clock
    folder = RunFolder(tmp_path / "run")
    folder.jmeter.machine_dir("tuned").mkdir(parents=True)
    _write_results(folder.jmeter.results("tuned"), [*KNEE_AT_400[:3], (2000, 900, 0.05, 7000), (2000, 900, 0.05, 7000)])
    assert knee.brackets(folder, LOAD, ("tuned",), T0_MS / 1000) == {}
    assert knee.brackets(folder, LOAD, ("tuned",), T0_MS / 1000, {"tuned": 61.0}) == {"tuned": (300, 400)}
    calls = []
    monkeypatch.setattr(load, "run", lambda targets, *args, **kwargs: calls.append(targets) or _coarse())
    knee.refine(folder, LOAD, replace(_coarse(), ended_early={"tuned": 61.0}), {"tuned": "http://t"}, "/svc", None,
                None, None, [])
    assert calls == [{"tuned": "http://t"}]


def test_an_interrupted_or_failed_refinement_keeps_the_coarse_figures_and_says_so(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    monkeypatch.setattr(load, "run", lambda *args, **kwargs: _coarse(interrupted=True))
    assert knee.refine(folder, LOAD, _coarse(), {"default": "http://d"}, "/svc", None, None, None, []).interrupted

    def fail(*args, **kwargs):
        raise StepFailed("JMeter failed (exit 1) before any sample")
    monkeypatch.setattr(load, "run", fail)
    problems: list[str] = []
    assert not knee.refine(folder, LOAD, _coarse(), {"default": "http://d"}, "/svc", None, None, None,
                           problems).interrupted
    assert problems == ["default: its knee was not refined (JMeter failed (exit 1) before any sample); the coarse "
                        "steps' capacity stands"]
    # a coarse load cut short is not refined at all
    monkeypatch.setattr(load, "run", lambda *args, **kwargs: pytest.fail("refined after an interrupt"))
    assert knee.refine(folder, LOAD, _coarse(interrupted=True), {"default": "http://d"}, "/svc", None, None, None,
                       []).interrupted
