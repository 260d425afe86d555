"""./start.sh compare RUN_A RUN_B on small stored runs: each machine's figures side by side, B/A with an
interval when both runs had trials, the knobs that differ, and bad run names refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import cli
from lab.analysis.compare import compare
from lab.report import compare_page

pytestmark = pytest.mark.fast
PROFILE = {"users": 20, "ramp_s": 20, "duration_s": 90}


def _summary(default_rps: float, tuned_rps: float, p95: tuple[float, float] = (50.0, 40.0)) -> dict:
    return {"run": {"profile": PROFILE, "schedule": "sequential", "backend": "local"},
            "verdict": {"verdict": "valid"},
            "comparison": [{"key": "throughput_rps", "default": default_rps, "tuned": tuned_rps,
                            "ratio": tuned_rps / default_rps},
                           {"key": "p95_ms", "default": p95[0], "tuned": p95[1], "ratio": p95[1] / p95[0]},
                           {"key": "error_rate", "default": 0.012, "tuned": 0.0, "ratio": None}]}


def _run(root: Path, trials: list[tuple[float, float]], knobs: dict | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"run_id": root.name, "profile": PROFILE}))
    (root / "knobs.json").write_text(json.dumps(knobs or {"default": {"x": 1}, "tuned": {"x": 2}}))
    if len(trials) == 1:
        (root / "summary.json").write_text(json.dumps(_summary(*trials[0])))
        return root
    for number, figures in enumerate(trials, start=1):
        trial = root / "trials" / str(number)
        trial.mkdir(parents=True)
        (trial / "run.json").write_text("{}")
        (trial / "summary.json").write_text(json.dumps(_summary(*figures)))
    (root / "summary.json").write_text(json.dumps({"kind": "repeated", "verdict": {"verdict": "valid"},
                                                   "run": {"profile": PROFILE}}))
    return root


def _row(result: dict, key: str, of: str) -> dict:
    return next(r for r in result["rows"] if r["key"] == key and r["of"] == of)


def test_two_repeated_runs_give_b_over_a_with_an_interval(tmp_path):
    a = _run(tmp_path / "20261124-010000", [(100, 100), (100, 110), (100, 105)])
    b = _run(tmp_path / "20261124-020000", [(100, 120), (100, 130), (100, 125)],
             knobs={"default": {"x": 1}, "tuned": {"x": 3}})
    result = compare(a, b)
    tuned = _row(result, "throughput_rps", "tuned")
    assert tuned["a"] == 105 and tuned["b"] == 125 and tuned["b_over_a"] == pytest.approx(125 / 105, abs=1e-6)
    assert 1 < tuned["low"] <= tuned["b_over_a"] <= tuned["high"]
    assert tuned["points_a"] == [100, 110, 105]
    default = _row(result, "throughput_rps", "default")
    assert default["b_over_a"] == 1 and default["low"] == default["high"] == 1
    assert _row(result, "throughput_rps", "ratio")["b_over_a"] == pytest.approx(1.25 / 1.05, abs=1e-3)
    assert result["knobs"] == [{"machine": "tuned", "variable": "x", "a": 2, "b": 3}]
    assert result["comparable"] is None
    result, page = compare_page.render(a, b, tmp_path)
    html = page.read_text()
    assert page == tmp_path / "compare" / "20261124-010000-vs-20261124-020000" / "index.html"
    assert "1.190×" in html and "<code>x</code>" in html
    # each figure in its row's unit, as on the report: an error rate of 0.012 is 1.20 %, not "0.012 %"
    assert "1.20 %" in html and "0.012" not in html and "105.0 req/s" in html
    lines = compare_page.lines(result)
    assert any(line.startswith("  tuned    throughput_rps     A       105   B       125   B/A 1.19x (95% interval")
               for line in lines), lines


def test_single_runs_give_b_over_a_without_an_interval(tmp_path):
    a = _run(tmp_path / "a", [(100, 100)])
    b = _run(tmp_path / "b", [(100, 90)])
    tuned = _row(compare(a, b), "throughput_rps", "tuned")
    assert tuned["b_over_a"] == 0.9 and tuned["low"] is None and "one trial" in tuned["note"]


def test_runs_of_different_loads_are_flagged(tmp_path):
    a = _run(tmp_path / "a", [(100, 100)])
    b = _run(tmp_path / "b", [(100, 90)])
    summary = json.loads((b / "summary.json").read_text())
    summary["run"]["profile"] = {**PROFILE, "users": 150}
    (b / "summary.json").write_text(json.dumps(summary))
    assert "differ in their load" in compare(a, b)["comparable"]


def test_compare_refuses_what_is_not_a_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    a = _run(tmp_path / "a", [(100, 100)])
    assert cli.main(["compare", "a", "nowhere"]) == 1
    assert "compare: RUN_B 'nowhere' is not a run folder" in capsys.readouterr().err
    assert cli.main(["compare", str(a), "a"]) == 1
    assert "RUN_A and RUN_B are the same run" in capsys.readouterr().err


def test_compare_writes_nothing_into_the_runs_it_reads(tmp_path):
    # A run folder without summary.json: compare makes its figures for itself, and leaves the saved run as it was.
    a = _run(tmp_path / "a", [(100, 100)])
    b = _run(tmp_path / "b", [(100, 90)])
    (b / "summary.json").unlink()
    before = sorted(path.name for path in b.rglob("*"))
    compare(a, b)
    assert sorted(path.name for path in b.rglob("*")) == before


def test_two_capacity_runs_compare_each_machines_capacity(tmp_path):
    # A knob before and after, measured as capacity: its row leads, in req/s, B/A for each machine and the ratio.
    def capacity_run(root: Path, default_rps: int, tuned_rps: int) -> Path:
        root.mkdir(parents=True)
        profile = {"model": "open", "start_rps": 50, "step_rps": 50, "step_s": 60, "max_rps": 1500}
        (root / "run.json").write_text(json.dumps({"run_id": root.name, "profile": profile}))
        (root / "knobs.json").write_text(json.dumps({"default": {}, "tuned": {}}))
        (root / "summary.json").write_text(json.dumps({
            "run": {"profile": profile, "schedule": "sequential", "backend": "local"}, "verdict": {"verdict": "valid"},
            "capacity": {"default_rps": default_rps, "tuned_rps": tuned_rps, "ratio": tuned_rps / default_rps},
            "comparison": [{"key": "capacity_rps", "default": default_rps, "tuned": tuned_rps,
                            "ratio": tuned_rps / default_rps}]}))
        return root
    a = capacity_run(tmp_path / "20261124-010000", 500, 400)
    b = capacity_run(tmp_path / "20261124-020000", 500, 600)
    result = compare(a, b)
    assert result["rows"][0]["key"] == "capacity_rps"
    assert _row(result, "capacity_rps", "tuned")["b_over_a"] == pytest.approx(1.5)
    assert _row(result, "capacity_rps", "default")["b_over_a"] == 1
    assert _row(result, "capacity_rps", "ratio")["b_over_a"] == pytest.approx(1.2 / 0.8)
    page = compare_page.render(a, b, runs=tmp_path)[1].read_text()
    assert "Capacity" in page and "req/s" in page


def test_a_damaged_run_is_named_with_what_is_wrong_never_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    _run(tmp_path / "a", [(100, 100)])
    b = _run(tmp_path / "b", [(100, 90)])
    (b / "summary.json").write_text("{cut short")
    assert cli.main(["compare", "a", "b"]) == 1
    assert f"start.sh: compare: {b}: summary: summary.json unreadable (Expecting" in capsys.readouterr().err


@pytest.mark.parametrize(("written", "wrong"), [
    ("[1, 2]", "summary: summary.json is not a JSON object"),
    ('{"comparison": [1]}', "its summary.json's comparison is not a list of rows; is it a run folder the lab wrote?"),
    ('{"comparison": [], "run": "parallel"}',
     "its summary.json's run or verdict is not an object; is it a run folder the lab wrote?")])
def test_a_foreign_summary_is_named_with_what_is_wrong_never_a_traceback(tmp_path, monkeypatch, capsys, written,
                                                                         wrong):
    # JSON that parses, but not as the lab writes it (another tool's, or edited by hand)
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    _run(tmp_path / "a", [(100, 100)])
    b = _run(tmp_path / "b", [(100, 90)])
    for summary in [b / "summary.json", *(b / "trials").glob("*/summary.json")]:
        summary.write_text(written)
    assert cli.main(["compare", "a", "b"]) == 1
    assert f"start.sh: compare: {b}: {wrong}" in capsys.readouterr().err


def test_a_knobs_file_not_as_the_lab_writes_it_shows_no_knobs_never_a_traceback(tmp_path):
    a, b = _run(tmp_path / "a", [(100, 100)]), _run(tmp_path / "b", [(100, 90)])
    (a / "knobs.json").write_text("[1]")
    (b / "knobs.json").write_text('{"default": 3, "tuned": {"tomcat_max_threads": 300}}')
    assert compare(a, b)["knobs"] == [{"machine": "tuned", "variable": "tomcat_max_threads", "a": "(unset)",
                                       "b": 300}]


def test_a_failure_message_longer_than_pythons_csv_field_limit_is_read(tmp_path):
    # JMeter writes a failed sample's message into the CSV, which can carry a whole answer
    from lab.analysis.jmeter import read_results
    results = tmp_path / "results.csv"
    body = "x" * 300_000
    results.write_text("timeStamp,elapsed,label,responseCode,responseMessage,success,failureMessage\n"
                       f"1700000000000,12,tuned,500,Server Error,false,\"{body}\"\n"
                       "1700000000100,8,tuned,200,OK,true,\n")
    samples = read_results(results)
    assert len(samples) == 2 and samples.elapsed == [12, 8]


@pytest.fixture
def gate_in(tmp_path, monkeypatch):
    """cli.main(["compare", ..., "--fail-if-worse", PCT]) on runs under tmp_path, its page written there too."""
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    render = compare_page.render
    monkeypatch.setattr(compare_page, "render", lambda a, b: render(a, b, tmp_path))
    return tmp_path


def _junit(root: Path, a: str, b: str) -> str:
    return (root / "compare" / f"{a}-vs-{b}" / "thresholds.xml").read_text()


def test_a_baseline_gate_fails_on_a_figure_worse_by_more_than_it_allows(gate_in, capsys):
    # B/A of one trial each: tuned serves 10% less, and its p95 is 25% longer; default is as it was.
    _run(gate_in / "a", [(100, 100)])
    b = _run(gate_in / "b", [(100, 90)])
    summary = json.loads((b / "summary.json").read_text())
    summary["comparison"][1].update(tuned=50.0)                 # p95: 40 ms in A, 50 in B
    (b / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["compare", "a", "b", "--fail-if-worse", "5"]) == 3
    err = capsys.readouterr().err
    assert "Fail if worse than RUN_A by more than 5%: 2 of 4 passed" in err
    assert "  BROKEN: tuned throughput_rps (B/A >= 0.95x): B/A 0.90x" in err
    assert "  BROKEN: tuned p95_ms (B/A <= 1.05x): B/A 1.25x" in err
    assert "  passed: default throughput_rps (B/A >= 0.95x): B/A 1.00x" in err
    junit = _junit(gate_in, "a", "b")
    assert 'tests="4"' in junit and 'failures="2"' in junit and "tuned throughput_rps" in junit
    # a looser gate lets the same runs pass, and says so
    assert cli.main(["compare", "a", "b", "--fail-if-worse", "30"]) == 0
    assert "4 of 4 passed" in capsys.readouterr().err and 'failures="0"' in _junit(gate_in, "a", "b")
    # without the option: the comparison alone, whatever it shows
    assert cli.main(["compare", "a", "b"]) == 0


def test_a_baseline_gate_on_repeated_runs_fails_only_where_the_trials_show_a_regression(gate_in, capsys):
    # tuned: 10% less on the mean, but its trials spread so that the interval reaches above 0.95x: not shown
    _run(gate_in / "a", [(100, 100), (100, 100), (100, 100)])
    _run(gate_in / "b", [(100, 70), (100, 100), (100, 100)])
    assert cli.main(["compare", "a", "b", "--fail-if-worse", "5"]) == 0, capsys.readouterr().err
    assert "  passed: tuned throughput_rps (B/A >= 0.95x): B/A 0.90x, 95% interval 0.70x-1.00x" \
        in capsys.readouterr().err
    # every trial 10% less: the whole interval is below 0.95x
    _run(gate_in / "c", [(100, 90), (100, 91), (100, 89)])
    assert cli.main(["compare", "a", "c", "--fail-if-worse", "5"]) == 3
    assert "  BROKEN: tuned throughput_rps (B/A >= 0.95x): B/A 0.90x, 95% interval 0.89x-0.91x" \
        in capsys.readouterr().err


def test_a_baseline_gate_cannot_pass_a_figure_it_cannot_compare(gate_in, capsys):
    # B never settled: no throughput to set against A's, broken rather than passed
    _run(gate_in / "a", [(100, 100)])
    b = _run(gate_in / "b", [(100, 90)])
    summary = json.loads((b / "summary.json").read_text())
    summary["comparison"][0].update(default=None, tuned=None)
    (b / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["compare", "a", "b", "--fail-if-worse", "5"]) == 3
    assert "  BROKEN: tuned throughput_rps (B/A >= 0.95x): no B/A (no figure in one of the runs)" \
        in capsys.readouterr().err
    # runs with none of the gated figures: the gate is broken, never passed unchecked
    for run in ("a", "b"):
        summary = json.loads((gate_in / run / "summary.json").read_text())
        summary["comparison"] = [row for row in summary["comparison"] if row["key"] == "error_rate"]
        (gate_in / run / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["compare", "a", "b", "--fail-if-worse", "5"]) == 3
    assert "neither run has a capacity, a throughput or a p95 to compare" in capsys.readouterr().err


@pytest.mark.parametrize("typed", ["-5", "nan"])
def test_a_baseline_gate_of_no_percentage_is_refused_before_anything_is_written(gate_in, capsys, typed):
    _run(gate_in / "a", [(100, 100)])
    _run(gate_in / "b", [(100, 90)])
    assert cli.main(["compare", "a", "b", f"--fail-if-worse={typed}"]) == 1
    assert f"compare: --fail-if-worse {typed}: must be a percentage, 0 or more" in capsys.readouterr().err
    assert not (gate_in / "compare").exists()


def test_the_terminal_lines_give_each_figure_in_its_unit(tmp_path):
    a, b = _run(tmp_path / "a", [(100, 100)]), _run(tmp_path / "b", [(100, 90)])
    for run, peak in ((a, 331_000_000), (b, 347_000_000)):
        summary = json.loads((run / "summary.json").read_text())
        summary["comparison"].append({"key": "peak_memory_bytes", "default": peak, "tuned": peak, "ratio": 1.0})
        (run / "summary.json").write_text(json.dumps(summary))
    lines = compare_page.lines(compare(a, b))
    memory = next(line for line in lines if line.startswith("  default  peak_memory_bytes"))
    assert "A   316 MiB   B   331 MiB" in memory and "e+" not in memory, memory
    errors = next(line for line in lines if line.startswith("  default  error_rate"))
    assert "A     1.20%   B     1.20%" in errors, errors
