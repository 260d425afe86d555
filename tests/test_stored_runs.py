"""The stored real runs (tests/fixtures/run-local-*/, recorded and trimmed by tools/stored_runs.py): each gives the
summary stored beside it, and shows what it was recorded to show: a closed load that never settles, one that
settles, two trials with an interval, an open model stepped past each machine's knee."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.analysis import pcp
from lab.runfolder import RunFolder
from tools import stored_runs
from tools.stored_runs import STORED, StoredRun, comparable, figures

FIXTURES = stored_runs.FIXTURES

pytestmark = pytest.mark.fast

MACHINES = ("default", "tuned")


def _copy(stored: StoredRun, tmp_path: Path) -> Path:
    copy = tmp_path / stored.folder.name
    shutil.copytree(stored.folder, copy)
    return copy


def _stored(name: str) -> dict:
    return json.loads(stored_runs.by_name(name).summary.read_text())


@pytest.mark.parametrize("stored", STORED, ids=lambda s: s.name)
def test_a_stored_run_gives_the_summary_stored_beside_it(stored: StoredRun, tmp_path: Path) -> None:
    assert stored.folder.is_dir(), f"not recorded: .venv/bin/python -m tools.stored_runs record {stored.name}"
    copy = _copy(stored, tmp_path)
    assert comparable(figures(copy)) == comparable(json.loads(stored.summary.read_text()))
    # a repeated run's trials: each gives the summary stored in its folder (figures() wrote the copy's again)
    for trial in RunFolder(copy).trials():
        kept = RunFolder(stored.folder).trial(int(trial.root.name)).summary_json
        assert comparable(json.loads(trial.summary_json.read_text())) == comparable(json.loads(kept.read_text()))


def test_the_settled_run_compares_steady_states_and_is_valid() -> None:
    summary = _stored("settled")
    for machine in MACHINES:
        load = summary["machines"][machine]["load"]
        assert load["window"]["settled"] is True and load["errors"] == 0, (machine, load["window"])
        assert load["throughput_rps"] > 0 and load["samples"] < load["all"]["samples"]     # the window, not all
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    assert row["ratio"] == pytest.approx(row["tuned"] / row["default"], rel=1e-3)
    assert summary["verdict"]["verdict"] == "valid" and summary["verdict"]["valid"], summary["verdict"]


def test_the_repeated_run_gives_each_ratio_its_interval_over_both_trials() -> None:
    summary = _stored("repeated")
    assert summary["kind"] == "repeated" and [t["number"] for t in summary["trials"]] == [1, 2]
    assert all(t["counted"] for t in summary["trials"])
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    assert row["trials"] == 2 and row["low"] <= row["ratio"] <= row["high"], row
    assert summary["verdict"]["valid"] and summary["verdict"]["sentence"].startswith("Valid: all 2 trials settled")


def test_the_capacity_run_finds_each_machines_knee_and_their_ratio() -> None:
    summary = _stored("capacity")
    for machine in MACHINES:
        found = summary["machines"][machine]["capacity"]
        assert found["found"] and found["knee_rps"] > (found["capacity_rps"] or 0), (machine, found)
        assert any(not step["met"] for step in found["steps"] if not step["warmup"]), found["steps"]
    capacities = [summary["machines"][m]["capacity"]["capacity_rps"] for m in MACHINES]
    assert summary["capacity"]["ratio"] == pytest.approx(capacities[1] / capacities[0], abs=0.01)


def _logged(archive: Path) -> set[str]:
    """The metrics an archive holds values of (pmdumplog -d: those that appear in it at least once)."""
    dump = subprocess.run([pcp._pcp_tool("pmdumplog") or "pmdumplog", "-d", str(archive)], capture_output=True,
                          text=True, check=True, env=pcp.pcp_env())
    return set(re.findall(r"^PMID: \S+ \(([^)]+)\)", dump.stdout, re.M))


def test_storing_keeps_of_each_archive_the_metrics_the_analysis_reads_and_every_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = stored_runs.by_name("tiny")
    run = _copy(tiny, tmp_path / "runs")
    with stored_runs.metrics_read() as read:
        figures(_copy(tiny, tmp_path / "read"))
    monkeypatch.setattr(stored_runs, "FIXTURES", tmp_path / "fixtures")
    (tmp_path / "fixtures").mkdir()
    stored_runs.store(tiny, run)
    kept = tmp_path / "fixtures" / tiny.folder.name
    for machine in MACHINES:
        logged = _logged(kept / "machines" / machine / "pcp" / machine)
        prelude = {name for name in logged if name in stored_runs.PRELUDE
                   or name.startswith(tuple(f"{p}." for p in stored_runs.PRELUDE))}
        assert prelude and logged - prelude == read & _logged(run / "machines" / machine / "pcp" / machine)
    assert comparable(figures(kept)) == \
        comparable(json.loads((tmp_path / "fixtures" / tiny.summary.name).read_text()))
    assert not (kept / "report").exists() and not list(kept.rglob("series.json"))


def test_a_trimmed_run_that_gives_other_figures_is_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without pmlogger's prelude the trimmed archive begins a tenth of a second later: pmrep's one-second steps
    # fall elsewhere, and the CPU and memory figures move.
    tiny = stored_runs.by_name("tiny")
    run = _copy(tiny, tmp_path / "runs")
    monkeypatch.setattr(stored_runs, "FIXTURES", tmp_path / "fixtures")
    monkeypatch.setattr(stored_runs, "PRELUDE", ())
    with pytest.raises(SystemExit, match="the trimmed folder gives other figures than the run did; nothing stored"):
        stored_runs.store(tiny, run)
    assert not (tmp_path / "fixtures").exists()


def test_summaries_writes_again_the_summary_whose_figures_moved_and_leaves_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    tiny, settled = stored_runs.by_name("tiny"), stored_runs.by_name("settled")
    monkeypatch.setattr(stored_runs, "FIXTURES", tmp_path)
    monkeypatch.setattr(stored_runs, "STORED", (tiny, settled))
    for stored in (tiny, settled):          # the stored ones, copied where FIXTURES now points
        shutil.copytree(FIXTURES / stored.folder.name, stored.folder)
        shutil.copy(FIXTURES / stored.summary.name, stored.summary)
    moved = json.loads(tiny.summary.read_text())
    moved["machines"]["default"]["load"]["samples"] += 1         # as if a definition had changed since
    tiny.summary.write_text(json.dumps(moved, indent=2) + "\n")
    untouched = settled.summary.read_text()
    assert stored_runs.summaries() == 0
    printed = capsys.readouterr().out
    assert '"samples":' in printed and "stored_runs: settled: the same figures" in printed
    assert comparable(json.loads(tiny.summary.read_text())) == comparable(
        json.loads((FIXTURES / tiny.summary.name).read_text()))
    assert settled.summary.read_text() == untouched
