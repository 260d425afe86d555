"""A repeated run (--repeat N): the trials compared with an interval on every ratio (lab/analysis/repeated.py),
its page (lab/report/trials_page.py) and headline, from trial folders made here out of the stored real run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from conftest import REPO
from lab import report
from lab.analysis import repeated, trials
from lab.analysis.headline import headline
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast

STORED_RUN = REPO / "tests" / "fixtures" / "run-local-tiny"
STORED_SUMMARY = REPO / "tests" / "fixtures" / "run-local-tiny.summary.json"
THROUGHPUT = [(700.0, 760.0), (730.0, 800.0), (720.0, 770.0)]       # default, tuned per trial


def make_repeated_run(root: Path, throughput=THROUGHPUT, settled=(True, True, True),
                      verdicts=("valid", "valid", "valid")) -> RunFolder:
    """A run folder of len(throughput) trials: the stored run in each, its summary given these figures."""
    folder = RunFolder(root)
    base = json.loads(STORED_SUMMARY.read_text())
    for number, ((default, tuned), steady, kind) in enumerate(zip(throughput, settled, verdicts, strict=True), 1):
        trial = folder.trial(number)
        shutil.copytree(STORED_RUN, trial.root)
        order = ["default", "tuned"] if number % 2 else ["tuned", "default"]
        trial.write_json(trial.run_json, {**json.loads(trial.run_json.read_text()), "order": order})
        figures = json.loads(json.dumps(base))
        for row in figures["comparison"]:
            if row["key"] == "throughput_rps":
                row.update(default=default, tuned=tuned, ratio=tuned / default if steady else None)
                if not steady:
                    row["note"] = "no ratio: default did not reach a steady state"
        figures["verdict"] = {"verdict": kind, "valid": kind == "valid", "sentence": f"{kind} sentence"}
        trial.write_json(trial.summary_json, figures)
        trial.report_html.parent.mkdir(parents=True, exist_ok=True)
        trial.report_html.write_text("trial report")
    folder.write_json(folder.run_json, {"run_id": "repeated", "backend": "local", "schedule": "sequential",
                                        "profile": base["run"]["profile"], "repeat": len(throughput)})
    return folder


def test_the_trials_give_each_ratio_its_interval(tmp_path: Path) -> None:
    folder = make_repeated_run(tmp_path / "run")
    summary = repeated.summarize(folder.root)
    assert summary["kind"] == "repeated" and json.loads(folder.summary_json.read_text()) == summary
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    expected = trials.ratio_interval([d for d, _ in THROUGHPUT], [t for _, t in THROUGHPUT])
    assert (row["ratio"], row["low"], row["high"]) == (expected["ratio"], expected["low"], expected["high"])
    assert row["default"] == pytest.approx(716.6667, abs=1e-3) and row["trials"] == 3 and row["low"] > 1
    assert [t["order"] for t in summary["trials"]] == [["default", "tuned"], ["tuned", "default"],
                                                       ["default", "tuned"]]
    assert summary["verdict"]["valid"] and summary["verdict"]["sentence"].startswith("Valid: all 3 trials")
    lines = headline(summary)
    assert lines[0].startswith("Result (3 trials, sequential,")
    assert f"  tuned/default throughput: {row['ratio']:.2f}x (95% interval {row['low']:.2f}x-{row['high']:.2f}x, " \
           "3 trials)" in lines
    assert "  (3 trials: the interval is narrower than a true 95% one (about 75% coverage); 5 or more make it " \
           "honest.)" in lines


def test_a_trial_that_did_not_settle_is_left_out_and_named(tmp_path: Path) -> None:
    folder = make_repeated_run(tmp_path / "run", settled=(True, False, True),
                               verdicts=("valid", "not settled", "host-bound"))
    summary = repeated.summarize(folder.root)
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    assert row["trials"] == 2 and row["note"] == "1 of 3 trials without a ratio of their own left out"
    assert row["ratio"] == pytest.approx((760 + 770) / (700 + 720), abs=1e-6)
    # the most telling kind first, with how many trials it struck
    assert summary["verdict"]["verdict"] == "not settled" and not summary["verdict"]["valid"]
    assert summary["verdict"]["sentence"] == "not settled in 1 of 3 trials; trial 2: not settled sentence"


def test_the_page_of_a_repeated_run_shows_the_trials_and_their_intervals(tmp_path: Path) -> None:
    folder = make_repeated_run(tmp_path / "run")
    html = report.render(folder.root).read_text()
    assert '<div id="verdict" class="banner ok">' in html and html.count('href="../trials/') == 3
    row = next(r for r in repeated.summarize(folder.root)["comparison"] if r["key"] == "throughput_rps")
    assert f"{row['ratio']:.2f}× [{row['low']:.2f}–{row['high']:.2f}×]" in html
    assert "tuned then default" in html and html.count("data:image/png;base64,") == 1


def test_a_run_of_one_machine_gives_its_mean_and_a_chart_of_it_not_empty_columns(tmp_path: Path) -> None:
    # an ablation's configuration loads the tuned machine alone: each trial has no default figure and no ratio
    folder = make_repeated_run(tmp_path / "run", settled=(False, False, False))
    for trial in folder.trials():
        figures = json.loads(trial.summary_json.read_text())
        for row in figures["comparison"]:
            row.update(default=None, ratio=None)
        trial.write_json(trial.summary_json, figures)
    summary = repeated.summarize(folder.root)
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    assert row["tuned"] == pytest.approx(sum(t for _, t in THROUGHPUT) / 3) and row["default"] is None
    assert row["ratio"] is None and row["note"] == "one machine loaded: no ratio"
    run = json.loads(folder.run_json.read_text())
    folder.write_json(folder.run_json, {**run, "mode": "ablation", "machines_loaded": ["tuned"]})
    html = report.render(folder.root).read_text()
    assert html.count("data:image/png;base64,") == 1 and "steady-state throughput in each trial (the only machine loaded)" in html
    assert "the tuned machine alone, measured 3 times" in html


def test_a_pair_of_an_ablation_says_which_configuration_each_machine_carried(tmp_path: Path) -> None:
    folder = make_repeated_run(tmp_path / "run")
    run = json.loads(folder.run_json.read_text())
    folder.write_json(folder.run_json, {**run, "mode": "ablation", "configuration": ["ajp", "apr"],
                                        "configurations": {"default": [], "tuned": ["ajp", "apr"]}})
    html = report.render(folder.root).read_text()
    assert "Two configurations of an ablation:</strong> the default machine had the default machine's knobs plus " \
           "the knob group(s) none; the tuned machine had the default machine's knobs plus the knob group(s) ajp, " \
           "apr" in html and "tuned ÷ default here compares the two configurations" in html


def test_an_a_a_run_reports_its_noise_floor(tmp_path: Path) -> None:
    folder = make_repeated_run(tmp_path / "run", throughput=[(700.0, 705.0), (730.0, 720.0), (720.0, 731.0)])
    run = json.loads(folder.run_json.read_text())
    folder.write_json(folder.run_json, {**run, "mode": "aa", "tuned_knobs": "ansible/host_vars/default.yml"})
    summary = repeated.summarize(folder.root)
    row = next(r for r in summary["comparison"] if r["key"] == "throughput_rps")
    floor = summary["noise_floor"]["by_figure"]["throughput_rps"]
    assert floor == pytest.approx(max(1 - row["low"], row["high"] - 1)) and 0 < floor < 0.05
    lines = headline(summary)
    assert lines[1].startswith("  A/A: the tuned machine ran with the default machine's knobs")
    assert f"  A/A noise floor (throughput): {floor:.1%}: on this host, a difference smaller than that between " \
           "two machines is not one the lab can see." in lines
    assert "A/A run:</strong> the tuned machine had the default machine's knobs" in \
        report.render(folder.root).read_text()


def test_a_trial_is_not_judged_on_the_thresholds_alone_its_run_is(tmp_path: Path) -> None:
    # Each trial's run.json carries the run's thresholds; the run checks them on the trials' means, so a trial's
    # own page must not say "the run exited 3" from its single figures.
    from lab.analysis import summary as single
    folder = make_repeated_run(tmp_path / "run")
    limits = {"tuned.throughput_rps_min": 10_000}
    for trial in folder.trials():
        trial.write_json(trial.run_json, {**json.loads(trial.run_json.read_text()), "thresholds": limits})
    folder.write_json(folder.run_json, {**json.loads(folder.run_json.read_text()), "thresholds": limits})
    assert "thresholds" not in single.summarize(folder.trial(1).root, write=False, use_gcviewer=False)
    judged = repeated.summarize(folder.root)["thresholds"]
    assert [r["passed"] for r in judged] == [False] and judged[0]["machine"] == "tuned"


def test_with_errors_the_headline_leads_with_the_requests_answered_without_error(tmp_path: Path) -> None:
    # As at the full profile here: tuned's JVM killed again and again, HTTPD answering 503s fast
    folder = make_repeated_run(tmp_path / "run", throughput=[(815.0, 1768.0), (810.0, 1700.0), (820.0, 1650.0)])
    for number in (1, 2, 3):
        trial = folder.trial(number)
        figures = json.loads(trial.summary_json.read_text())
        for row in figures["comparison"]:
            if row["key"] == "good_throughput_rps":
                row.update(default=815.0, tuned=385.0 + number, ratio=(385.0 + number) / 815.0)
            if row["key"] == "error_rate":
                row.update(default=0.0, tuned=0.78, ratio=None)
        trial.write_json(trial.summary_json, figures)
    lines = headline(repeated.summarize(folder.root))
    good = next(i for i, line in enumerate(lines) if "requests answered without error, per second" in line)
    assert lines[good].startswith("  tuned/default requests answered without error, per second: 0.47x (95% interval 0.47x-0.48x")
    assert good < next(i for i, line in enumerate(lines) if line.startswith("  tuned/default throughput:"))
    # without errors, no such line
    assert not any("answered without error" in line for line in headline(repeated.summarize(
        make_repeated_run(tmp_path / "clean").root)))


def _capacity_trial(default: dict, tuned: dict) -> dict:
    """A capacity trial's summary: each machine's capacity as the analysis finds it, and the comparison row."""
    measured = {m: c["capacity_rps"] if c.get("found") else None for m, c in (("default", default), ("tuned", tuned))}
    ratio = measured["tuned"] / measured["default"] if measured["default"] and measured["tuned"] else None
    return {"machines": {"default": {"capacity": default}, "tuned": {"capacity": tuned}},
            "capacity": {"ratio": ratio},
            "comparison": [{"key": "capacity_rps", **measured, "ratio": ratio}],
            "verdict": {"verdict": "valid", "valid": True, "sentence": "valid"}}


def test_a_repeated_capacity_run_gives_each_machine_its_capacity_interval_and_its_thresholds(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    found = [({"capacity_rps": 500, "found": True, "knee_rps": 600}, {"capacity_rps": 400, "found": True}),
             ({"capacity_rps": 550, "found": True}, {"capacity_rps": 450, "found": True}),
             # trial 3: tuned met every step up to the last: at least 900, a lower bound and not a measurement
             ({"capacity_rps": 600, "found": True}, {"capacity_rps": 900, "found": False, "reached_max": True})]
    for number, (default, tuned) in enumerate(found, 1):
        trial = folder.trial(number)
        trial.root.mkdir(parents=True)
        trial.write_json(trial.run_json, {"run_id": str(number)})
        trial.write_json(trial.summary_json, _capacity_trial(default, tuned))
    folder.write_json(folder.run_json, {"run_id": "repeated", "repeat": 3, "profile": {"model": "open"},
                                        "thresholds": {"capacity_rps_min": 500}})
    summary = repeated.summarize(folder.root)
    default, tuned = summary["capacity"]["machines"]["default"], summary["capacity"]["machines"]["tuned"]
    assert default["mean"] == 550 and default["low"] < 550 < default["high"] and default["trials"] == 3
    assert [t["capacity_rps"] for t in default["per_trial"]] == [500, 550, 600]
    # the lower bound is left out of tuned's measured mean and interval, and counted
    assert tuned["mean"] == 425 and tuned["trials"] == 2 and tuned["lower_bounds"] == 1
    # the ratio: trials where both were measured (1 and 2)
    assert summary["capacity"]["ratio"] == pytest.approx(850 / 1050, abs=1e-6)
    # capacity_rps_min reads the measured mean, the headline's figure (a repeated run has no "machines" of its
    # own): default 550 passes 500; tuned 425 does not, whatever its lower bound
    assert [(r["machine"], r["passed"]) for r in summary["thresholds"]] == [("default", True), ("tuned", False)]
    lines = headline(summary)
    assert "  default  capacity 550 req/s (95% interval 500-600 req/s, 3 trials)" in lines, lines
    assert any(line.startswith("  tuned    capacity 425 req/s (95% interval") and line.endswith(
        "2 trials; 1 more gave only a lower bound, left out)") for line in lines), lines
    assert "Capacity by machine" in (report.render(folder.root)).read_text()


def test_a_machine_that_missed_the_slo_from_the_first_step_is_said_not_averaged() -> None:
    from lab.analysis.headline import _capacity_interval
    assert _capacity_interval({"mean": 500, "low": None, "trials": 1, "below_first_step": 2}) == \
        "500 req/s (one trial: no interval; 2 missed the SLO from the first step, left out)"
    assert _capacity_interval({"mean": None, "below_first_step": 3}) == \
        "none measured (3 missed the SLO from the first step, left out)"


def test_a_trial_the_run_did_not_count_is_listed_with_why_and_left_out_of_every_figure(tmp_path: Path) -> None:
    """runs/20261205-014008: the host stood still in trial 1's tuned knee; a repeated capacity run replaces such a
    trial (lab/experiment.py) and its summary must not average it in."""
    folder = RunFolder(tmp_path / "run")
    found = [({"capacity_rps": 825, "found": True}, {"capacity_rps": 975, "found": True}),
             ({"capacity_rps": 825, "found": True}, {"capacity_rps": 1700, "found": True}),
             ({"capacity_rps": 850, "found": True}, {"capacity_rps": 1800, "found": True})]
    for number, (default, tuned) in enumerate(found, 1):
        trial = folder.trial(number)
        trial.root.mkdir(parents=True)
        trial.write_json(trial.run_json, {"run_id": str(number)})
        trial.write_json(trial.summary_json, _capacity_trial(default, tuned))
    why = "the host stood still 1.0 s in the tuned machine's knee step (at 5:57): that miss measured the host"
    folder.write_json(folder.run_json, {"run_id": "repeated", "repeat": 2, "profile": {"model": "open"},
                                        "trials": [{"number": 1, "counted": False, "not_counted": why},
                                                   {"number": 2, "counted": True}, {"number": 3, "counted": True}]})
    summary = repeated.summarize(folder.root)
    assert [(t["number"], t["counted"]) for t in summary["trials"]] == [(1, False), (2, True), (3, True)]
    assert summary["trials"][0]["not_counted"] == why
    tuned = summary["capacity"]["machines"]["tuned"]
    assert tuned["mean"] == 1750 and tuned["trials"] == 2
    assert [t["capacity_rps"] for t in tuned["per_trial"]] == [1700, 1800]
    assert summary["capacity"]["ratio"] == pytest.approx(3500 / 1675, abs=1e-6)
    page = report.render(folder.root).read_text()
    assert f"<strong>not counted</strong>: {escape(why)}" in page
