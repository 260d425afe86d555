"""./start.sh compare RUN_A RUN_B RUN_C on small stored capacity runs: every machine of each run a configuration, the
best capacity first, over the first run's default machine with an unpaired interval, with its memory, CPU and
verdicts; one configuration measured in two runs named; runs that loaded differently said; what is not a repeated
capacity run's trial left out or refused, named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import cli
from lab.analysis.lineup import line_up
from lab.report import lineup_page

pytestmark = pytest.mark.fast
PROFILE = {"model": "open", "start_rps": 100, "step_rps": 150, "step_s": 10, "max_rps": 1600}
MIB = 2**20


def _machine(rps: float | None, knee_mib: float, cpu_ms: float, stack: str, found: bool = True,
             virtual_threads: bool = False) -> dict:
    return {"capacity": {"capacity_rps": rps, "found": found,
                         "at_knee": {"memory_pss_peak_bytes": knee_mib * MIB},
                         "at_capacity": {"cpu_per_request": {"machine_ms": cpu_ms}}},
            "memory": {"peak_bytes": (knee_mib + 10) * MIB, "budget": {"limit_mib": 397.0}},
            "observed": {"stack": stack, "stack_versions": f"{stack} versions", "virtual_threads": virtual_threads}}


def _run(root: Path, trials: list[tuple[dict, dict]], knobs: dict, profile: dict = PROFILE,
         verdicts: tuple[str, str] = ("backend-bound", "valid"), given: dict | None = None,
         not_counted: int | None = None) -> Path:
    """A repeated capacity run as the lab writes it: run.json, knobs.json, a summary per trial (default, tuned)."""
    root.mkdir(parents=True)
    record = {"run_id": root.name, "profile": profile,
              "trials": [{"number": n, "counted": n != not_counted} for n in range(1, len(trials) + 1)]}
    (root / "run.json").write_text(json.dumps(record))
    (root / "knobs.json").write_text(json.dumps(knobs))
    for number, (default, tuned) in enumerate(trials, start=1):
        trial = root / "trials" / str(number)
        trial.mkdir(parents=True)
        (trial / "run.json").write_text("{}")
        (trial / "summary.json").write_text(json.dumps({
            "run": {"profile": profile, "schedule": "sequential", "backend": "local",
                    "memory_model": {"name": "vm"}, "given_knobs": given},
            "verdict": {"verdict": verdicts[0], "machines": {"default": {"verdict": verdicts[0]},
                                                             "tuned": {"verdict": verdicts[1]}}},
            "machines": {"default": default, "tuned": tuned},
            "comparison": [{"key": "capacity_rps", "default": default["capacity"]["capacity_rps"],
                            "tuned": tuned["capacity"]["capacity_rps"]}]}))
    (root / "summary.json").write_text(json.dumps({"kind": "repeated", "verdict": {"verdict": verdicts[0]},
                                                   "run": {"profile": profile}}))
    return root


def _knobs(machine_home: str, **tuned: object) -> dict:
    # where each machine lives differs between checkouts and machines: not part of what a configuration is
    return {"default": {"camel_app_home": f"/{machine_home}/default", "camel_app_node_name": "default",
                        "camel_app_stack": "classic", "httpd_mpm": "prefork"},
            "tuned": {"camel_app_home": f"/{machine_home}/tuned", "camel_app_node_name": "tuned",
                      "camel_app_stack": "classic", "httpd_mpm": "worker", **tuned}}


@pytest.fixture
def three(tmp_path: Path) -> list[Path]:
    classic = _run(tmp_path / "runs" / "20261205-100000",
                   [(_machine(800, 300, 1.0, "classic"), _machine(700, 360, 1.0, "classic")),
                    (_machine(780, 310, 1.1, "classic"), _machine(720, 370, 0.9, "classic")),
                    (_machine(820, 305, 0.9, "classic"), _machine(710, 365, 1.1, "classic"))],
                   _knobs("a"))
    modern = _run(tmp_path / "runs" / "20261205-110000",
                  [(_machine(780, 380, 0.8, "modern", virtual_threads=True), _machine(300, 390, 1.2, "modern")),
                   (_machine(850, 385, 0.8, "modern", virtual_threads=True), _machine(350, 395, 1.2, "modern")),
                   (_machine(700, 375, 0.8, "modern", virtual_threads=True), _machine(300, 392, 1.2, "modern"))],
                  {"default": {**_knobs("a")["default"], "camel_app_stack": "modern", "camel_app_virtual_threads": True},
                   "tuned": {**_knobs("a")["tuned"], "camel_app_stack": "modern"}},
                  verdicts=("backend-bound", "memory-bound"),
                  given={"default": {"source": "/x/ansible/knobs/modern-virtual-threads.yml"},
                         "tuned": {"source": "/x/ansible/knobs/modern-2018.yml"}})
    # the classic tuned machine again, from another checkout (its home elsewhere): the same configuration
    again = _run(tmp_path / "runs" / "20261205-120000",
                 [(_machine(310, 380, 1.3, "modern"), _machine(690, 360, 1.0, "classic")),
                  (_machine(320, 385, 1.3, "modern"), _machine(700, 370, 1.0, "classic")),
                  (_machine(330, 390, 1.3, "modern"), _machine(705, 365, 1.0, "classic"))],
                 {"default": {**_knobs("b")["default"], "camel_app_stack": "modern"}, "tuned": _knobs("b")["tuned"]})
    return [classic, modern, again]


def _of(result: dict, configuration: str) -> dict:
    return next(c for c in result["configurations"] if c["id"] == configuration)


def test_each_machine_of_each_run_is_a_configuration_the_best_first_over_the_first_runs_default(three):
    result = line_up(three)
    assert result["baseline"] == "20261205-100000/default"
    capacities = [c["capacity"]["mean"] for c in result["configurations"]]
    assert len(capacities) == 6 and capacities == sorted(capacities, reverse=True)
    base = _of(result, "20261205-100000/default")
    assert base["capacity"]["mean"] == pytest.approx(800) and base["capacity"]["low"] <= 800 <= base["capacity"]["high"]
    assert base["versus_baseline"]["ratio"] == 1 and base["differs_from_baseline"] == []
    two_thousand_eighteen = _of(result, "20261205-110000/tuned")
    assert two_thousand_eighteen["capacity"]["mean"] == pytest.approx(316.667, abs=1e-3)
    versus = two_thousand_eighteen["versus_baseline"]
    assert versus["ratio"] == pytest.approx(316.667 / 800, abs=1e-4)
    assert versus["low"] <= versus["ratio"] <= versus["high"] < 1
    assert "about 75% coverage" in versus["note"]                 # 3 trials: said, not hidden
    assert two_thousand_eighteen["label"] == "modern stack; tuned's knobs + modern-2018.yml"
    assert two_thousand_eighteen["bound"] == "memory-bound 3/3"
    assert two_thousand_eighteen["memory_at_knee_bytes"] == 395 * MIB      # the most any trial held
    assert two_thousand_eighteen["memory_peak_bytes"] == 405 * MIB
    assert two_thousand_eighteen["memory_limit_bytes"] == 397 * MIB
    assert two_thousand_eighteen["cpu_ms_per_request"] == pytest.approx(1.2)
    assert two_thousand_eighteen["differs_from_baseline"] == ["camel_app_stack", "httpd_mpm"]
    threads = _of(result, "20261205-110000/default")
    assert threads["label"] == "modern stack, virtual threads; default's knobs + modern-virtual-threads.yml"
    assert threads["versions"] == "modern versions"


def test_the_same_machine_with_the_same_knobs_in_two_runs_is_named_as_one_configuration_measured_twice(three):
    result = line_up(three)
    assert _of(result, "20261205-100000/tuned")["same_as"] == ["20261205-120000/tuned"]
    assert _of(result, "20261205-120000/tuned")["same_as"] == ["20261205-100000/tuned"]
    assert _of(result, "20261205-100000/default")["same_as"] == []      # another stack in the third run
    twice = [note for note in result["notes"] if note.startswith("one configuration measured in 2 runs")]
    assert twice == ["one configuration measured in 2 runs: 20261205-100000/tuned 710 req/s, 20261205-120000/tuned "
                     "698 req/s; how far apart they are is what the runs' conditions moved it"]
    assert not any("differ in their" in note for note in result["notes"])     # one profile, schedule, memory model


def test_runs_that_loaded_differently_are_said_and_a_capped_capacity_is_a_lower_bound_left_out(tmp_path, three):
    other = dict(PROFILE, step_s=15)
    capped = _run(tmp_path / "runs" / "20261205-130000",
                  [(_machine(900, 300, 1.0, "classic"), _machine(1600, 300, 1.0, "classic", found=False)),
                   (_machine(900, 300, 1.0, "classic"), _machine(1500, 300, 1.0, "classic"))],
                  _knobs("a"), profile=other)
    result = line_up([*three, capped])
    assert ("the runs differ in their load profile (20261205-100000, 20261205-110000, 20261205-120000 | "
            "20261205-130000): a difference between their figures mixes that in") in result["notes"]
    tuned = _of(result, "20261205-130000/tuned")
    assert tuned["per_trial_rps"] == [None, 1500] and tuned["capacity"]["mean"] == 1500 and tuned["lower_bounds"] == 1
    assert tuned["capacity"]["low"] is None and "one trial" in tuned["capacity"]["note"]
    assert any(note.startswith("20261205-130000/tuned: in 1 trial(s) the load generator ran out") for note in
               result["notes"])


def test_a_trial_its_run_did_not_count_is_left_out(tmp_path):
    runs = [_run(tmp_path / name, [(_machine(rps, 300, 1.0, "classic"), _machine(rps, 300, 1.0, "classic"))
                                   for rps in (800, 100, 820)], _knobs("a"), not_counted=2 if name == "a" else None)
            for name in ("a", "b", "c")]
    result = line_up(runs)
    assert _of(result, "a/default")["per_trial_rps"] == [800, 820]
    assert _of(result, "b/default")["per_trial_rps"] == [800, 100, 820]


def test_compare_of_three_runs_writes_the_page_and_its_figures_and_prints_each_configuration(three, monkeypatch,
                                                                                             capsys):
    render = lineup_page.render
    monkeypatch.setattr(lineup_page, "render", lambda runs: render(runs, three[0].parent))
    assert cli.main(["compare", *(str(run) for run in three)]) == 0
    err = capsys.readouterr().err
    folder = three[0].parent / "compare" / "20261205-100000-vs-20261205-110000-vs-20261205-120000"
    assert f"Report: {folder / 'index.html'}" in err
    assert "6 configurations from 3 runs; baseline 20261205-100000/default" in err
    assert "  317 req/s [300, 350]" in err and "0.40x [" in err and "knee 395 MiB of 397 MiB  1.20 ms/req" in err
    page = (folder / "index.html").read_text()
    assert "6 configurations from 3 runs" in page and "modern stack, virtual threads" in page
    assert "also measured as 20261205-120000/tuned" in page
    figures = json.loads((folder / "lineup.json").read_text())
    assert figures["baseline"] == "20261205-100000/default" and len(figures["configurations"]) == 6


def test_what_cannot_be_lined_up_is_refused_naming_it(three, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "run.json").write_text(json.dumps({"run_id": "closed"}))
    (closed / "summary.json").write_text(json.dumps({"run": {}, "verdict": {}, "comparison": [
        {"key": "throughput_rps", "default": 100, "tuned": 110}], "machines": {"default": {}, "tuned": {}}}))
    assert cli.main(["compare", str(three[0]), str(three[1]), "closed"]) == 1
    assert "compare: closed has no capacity (made by ./start.sh run, not capacity?)" in capsys.readouterr().err
    assert cli.main(["compare", str(three[0]), str(three[1]), str(three[0])]) == 1
    assert "compare: 20261205-100000 is given twice" in capsys.readouterr().err
    assert cli.main(["compare", str(three[0]), str(three[1]), "nowhere"]) == 1
    assert "compare: RUN 3 'nowhere' is not a run folder" in capsys.readouterr().err
    assert cli.main(["compare", *(str(run) for run in three), "--fail-if-worse", "5"]) == 1
    assert "--fail-if-worse 5 gates RUN_B against RUN_A: give two runs, not 3" in capsys.readouterr().err
