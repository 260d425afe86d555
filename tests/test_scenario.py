"""Scenario files and thresholds: the shipped scenarios load, a bad file is refused naming the file and the
field, options override the file, thresholds are checked against a summary, a broken one exits 3 with a
JUnit file CI systems read."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import REPO
from lab import cli, load, options, scenario
from lab.analysis import thresholds
from lab.errors import StepFailed
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast
SHIPPED = sorted((REPO / "jmeter" / "scenarios").glob("*.yaml"))


def test_the_shipped_scenarios_load_and_the_readme_names_each():
    assert {p.stem for p in SHIPPED} >= {"soak", "stress-300", "stress-600", "burst", "capacity", "quick-gate", "2018"}
    original = scenario.load(REPO / "jmeter" / "scenarios" / "2018.yaml").profile
    assert (original.keep_alive, original.connect_timeout_ms, original.response_timeout_ms) == (False, 10000, 10000)
    readme = (REPO / "README.md").read_text()
    for path in SHIPPED:
        loaded = scenario.load(path)
        assert loaded.description and f"jmeter/scenarios/{path.name}" in readme, path.name
    assert scenario.load(REPO / "jmeter" / "scenarios" / "soak.yaml").profile == load.FULL
    assert scenario.load(REPO / "jmeter" / "scenarios" / "capacity.yaml").profile == load.FULL_STEPS


@pytest.mark.parametrize("text, message", [
    ("model: closed\nload: {users: [1\n", "line 3: not YAML"),
    ("- a list\n", "the file: must be a mapping"),
    ("modle: open\n", "modle: unknown field"),
    ("model: half-open\n", "model: 'half-open' is not one of closed, open"),
    ("load: {users: many}\n", "load.users: must be an integer, not 'many'"),
    ("load: {users: 0}\n", "load.users: must be 1 or more, not 0"),
    ("load: {ramp_s: 300, duration_s: 100}\n", "load.ramp_s: 300 is longer than duration_s 100"),
    ("load: {rate: 5}\n", "load.rate: unknown for model closed"),
    ("model: open\nload: {start_rps: 100, max_rps: 50}\n", "load.max_rps: must be at least start_rps (100), not 50"),
    ("model: open\nslo: {p99_ms: 0}\n", "slo: p99_ms must be 1 or more"),
    ("model: open\nload: {step_s: 0}\n", "load.step_s: must be an integer >= 1, not 0"),
    ("slo: {p99_ms: 500}\n", "slo: only an open model (a capacity run) has an SLO"),
    ("load: {keep_alive: 1}\n", "load.keep_alive: must be true or false"),
    ("schedule: sometimes\n", "schedule: 'sometimes' is not one of parallel, sequential"),
    ("repeat: 0\n", "repeat: must be 1 or more"),
    ("thresholds: {p95: 100}\n", "thresholds.p95: unknown threshold"),
    ("thresholds: {staging.p95_ms_max: 100}\n", "thresholds.staging.p95_ms_max: 'staging' is not a machine"),
    ("thresholds: {tuned.ratio_min: 1}\n", "ratio_min compares the machines"),
    ("thresholds: {p95_ms_max: fast}\n", "thresholds.p95_ms_max: must be a number"),
])
def test_a_bad_scenario_names_the_file_and_the_field(tmp_path, text, message):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(StepFailed) as caught:
        scenario.load(path, "mine.yaml")
    assert str(caught.value).startswith("mine.yaml: ") and message in str(caught.value), str(caught.value)


def test_a_missing_scenario_file_is_named(tmp_path):
    with pytest.raises(StepFailed, match="^nowhere.yaml: cannot read the scenario file"):
        scenario.load(tmp_path / "nowhere.yaml", "nowhere.yaml")


def test_a_shipped_scenario_is_found_by_its_name_and_an_unknown_name_lists_them(tmp_path, monkeypatch):
    assert _experiment(tmp_path, monkeypatch, ["run", "--scenario", "stress-300"]).profile.users == 300
    assert _experiment(tmp_path, monkeypatch, ["capacity", "--scenario", "burst.yaml"]).profile.max_rps == 600
    # a file of the user's own of that name wins over the shipped one
    (tmp_path / "soak").write_text("model: closed\nload: {users: 7, ramp_s: 1, duration_s: 60}\n")
    assert _experiment(tmp_path, monkeypatch, ["run", "--scenario", "soak"]).profile.users == 7
    with pytest.raises(StepFailed) as caught:
        _experiment(tmp_path, monkeypatch, ["run", "--scenario", "sock"])
    assert str(caught.value).startswith("--scenario sock: no such file, and no shipped scenario of that name "
                                        "(shipped: 2018, burst, capacity, quick-gate, soak, stress-300, stress-600;")


def _experiment(tmp_path: Path, monkeypatch, argv: list[str]) -> options.Experiment:
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    return options.experiment(cli._parser().parse_args(argv))


def test_options_override_the_scenario_and_its_model_decides_the_run(tmp_path, monkeypatch):
    (tmp_path / "s.yaml").write_text("model: closed\nload: {users: 40, ramp_s: 10, duration_s: 100}\n"
                                     "schedule: parallel\nrepeat: 3\nthresholds: {error_pct_max: 1, ratio_min: 1}\n")
    chosen = _experiment(tmp_path, monkeypatch, ["run", "--scenario", "s.yaml", "--users", "60", "--repeat", "2",
                                                 "--threshold", "ratio_min=1.2", "--threshold", "tuned.p95_ms_max=300"])
    assert chosen.profile == load.LoadProfile(users=60, ramp_s=10, duration_s=100)
    assert (chosen.schedule, chosen.repeat) == ("parallel", 2)
    assert chosen.limits == {"error_pct_max": 1, "ratio_min": 1.2, "tuned.p95_ms_max": 300}
    (tmp_path / "o.yaml").write_text("model: open\nload: {start_rps: 10, step_rps: 10, step_s: 5, max_rps: 30}\n")
    opened = _experiment(tmp_path, monkeypatch, ["run", "--scenario", "o.yaml"])
    assert isinstance(opened.profile, load.StepLoad) and opened.profile.rates() == [10, 20, 30]
    assert _experiment(tmp_path, monkeypatch, ["capacity", "--scenario", "o.yaml", "--max-rate", "20"]).profile.rates() \
        == [10, 20]


@pytest.mark.parametrize("argv, message", [
    (["capacity", "--scenario", "s.yaml"], "s.yaml: model closed: ./start.sh capacity runs an open model"),
    (["run", "--scenario", "o.yaml", "--users", "5"], "--users does not apply to an open model"),
    (["run", "--scenario", "s.yaml", "--quick"], "--quick and --scenario s.yaml: choose one"),
    (["run", "--threshold", "p95_ms_max"], "--threshold p95_ms_max: use NAME=VALUE"),
    (["run", "--threshold", "p95_ms_max=soon"], "--threshold p95_ms_max=soon: 'soon' is not a number"),
    # nan fails every comparison (and would make run.json not JSON); inf passes every one
    (["run", "--threshold", "p95_ms_max=nan"], "--threshold p95_ms_max=nan: must be a finite number, not nan"),
    (["run", "--threshold", "tuned.error_pct_max=inf"], "--threshold tuned.error_pct_max=inf: must be a finite number"),
    (["run", "--scenario", "n.yaml"], "n.yaml: thresholds.p95_ms_max: must be a finite number, not nan"),
    (["run", "--threshold", "p50_ms_max=5"], "--threshold p50_ms_max=5: unknown threshold"),
    (["run", "--threshold", "tuned.capacity_rps_min=300"], "threshold tuned.capacity_rps_min: a capacity is measured "
                                                           "by ./start.sh capacity"),
    # a capacity run loads each machine past its knee on purpose: figures over its whole load break by design
    (["capacity", "--threshold", "p99_ms_max=900"], "threshold p99_ms_max: a capacity run steps past each machine's "
                                                    "knee on purpose"),
    (["capacity", "--scenario", "g.yaml"], "threshold tuned.error_pct_max (in g.yaml): a capacity run steps past"),
    # given again on the command line: named as typed there
    (["capacity", "--scenario", "g.yaml", "--threshold", "tuned.error_pct_max=2"],
     "threshold tuned.error_pct_max: a capacity run steps past"),
])
def test_options_that_contradict_the_scenario_are_named(tmp_path, monkeypatch, argv, message):
    (tmp_path / "s.yaml").write_text("model: closed\n")
    (tmp_path / "o.yaml").write_text("model: open\n")
    (tmp_path / "g.yaml").write_text("model: open\nthresholds: {tuned.error_pct_max: 1, capacity_rps_min: 100}\n")
    (tmp_path / "n.yaml").write_text("model: closed\nthresholds: {p95_ms_max: .nan}\n")
    with pytest.raises(StepFailed) as caught:
        _experiment(tmp_path, monkeypatch, argv)
    assert str(caught.value).startswith(message), str(caught.value)


SUMMARY = {"comparison": [
    {"key": "throughput_rps", "default": 400.0, "tuned": 500.0, "ratio": 1.25},
    {"key": "error_rate", "default": 0.002, "tuned": 0.03, "ratio": 15.0},
    {"key": "p95_ms", "default": 80.0, "tuned": None, "ratio": None},
]}


def test_thresholds_hold_for_each_machine_or_the_one_named():
    results = thresholds.check(SUMMARY, {"error_pct_max": 1, "tuned.throughput_rps_min": 450, "ratio_min": 1.3,
                                         "p95_ms_max": 100})
    passed = {(r["threshold"], r["machine"]): r["passed"] for r in results}
    assert passed == {("error_pct_max", "default"): True, ("error_pct_max", "tuned"): False,
                      ("tuned.throughput_rps_min", "tuned"): True, ("ratio_min", None): False,
                      ("p95_ms_max", "default"): True, ("p95_ms_max", "tuned"): False}   # no figure: not passed
    messages = {(r["threshold"], r["machine"]): r["message"] for r in results}
    assert messages[("error_pct_max", "tuned")] == "BROKEN: error_pct_max (tuned error_rate <= 1%): 3%"
    assert messages[("p95_ms_max", "tuned")].endswith(": no figure")
    assert messages[("ratio_min", None)] == "BROKEN: ratio_min (tuned/default throughput_rps >= 1.3x): 1.25x"


def test_a_broken_threshold_exits_3_with_a_junit_file(tmp_path, capsys):
    folder = RunFolder(tmp_path / "20261124-000000")
    folder.root.mkdir()
    results = thresholds.check(SUMMARY, {"error_pct_max": 1, "ratio_min": 1.2})
    assert thresholds.exit_code(folder, {"thresholds": results}) == 3
    err = capsys.readouterr().err
    assert "Thresholds: 2 of 3 passed" in err and "BROKEN: error_pct_max (tuned error_rate <= 1%): 3%" in err
    suite = ET.parse(folder.root / "thresholds.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "3" and suite.get("failures") == "1"
    failed = [case.get("name") for case in suite if case.find("failure") is not None]
    assert failed == ["error_pct_max [tuned]"]
    passing = thresholds.check(SUMMARY, {"ratio_min": 1.2})
    assert thresholds.exit_code(folder, {"thresholds": passing}) == 0
    assert thresholds.exit_code(folder, {}) == 0        # none set: nothing judged


def test_a_capacity_threshold_reads_the_capacity_found_a_lower_bound_included():
    # tuned met the SLO at every step up to 900 (a lower bound, no knee): at least 900 passes a minimum of 800;
    # default has no capacity at all: no figure, broken.
    summary = {"comparison": [], "machines": {
        "default": {"capacity": {"capacity_rps": None, "found": False}},
        "tuned": {"capacity": {"capacity_rps": 900, "found": False, "reached_max": True}}}}
    passed = {r["machine"]: r["passed"] for r in thresholds.check(summary, {"capacity_rps_min": 800})}
    assert passed == {"default": False, "tuned": True}


def test_thresholds_a_run_could_not_be_judged_on_break_it(tmp_path, capsys):
    # The run set thresholds but has no summary (it failed before one could be made): not a pass.
    folder = RunFolder(tmp_path / "20261124-000000")
    folder.root.mkdir()
    folder.write_json(folder.run_json, {"thresholds": {"error_pct_max": 1}})
    assert thresholds.exit_code(folder, None) == 3
    assert "BROKEN: error_pct_max: not checked, the run has no summary" in capsys.readouterr().err
    assert ET.parse(folder.thresholds_xml).getroot().get("failures") == "1"


def test_the_report_shows_each_threshold_passed_or_broken(tmp_path):
    from lab.report.page import environment
    results = thresholds.check(SUMMARY, {"error_pct_max": 1})
    html = environment().get_template("thresholds.html.j2").render(summary={"thresholds": results})
    assert "Thresholds: 1 of 2 passed" in html and 'class="banner bad"' in html
    assert "BROKEN: error_pct_max (tuned error_rate &lt;= 1%): 3%" in html
    assert environment().get_template("thresholds.html.j2").render(summary={}).strip() == ""
