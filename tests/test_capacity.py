"""The capacity experiment's pure parts: the open model's steps and plan, the capacity and knee found in
recorded results, the watch that ends a load past its capacity, and the command line's bad input."""
from __future__ import annotations

import csv
import json
import random
import xml.etree.ElementTree as ET
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from lab import cli, options
from lab.ablation import folder as ablation_folder
from lab.analysis import capacity, step_state
from lab.analysis.jmeter import error_class, read_results
from lab.analysis.summary import summarize
from lab.load import ceiling, openplan
from lab.load.jmeter import PLAN
from lab.load.openmodel import IDLE_SCHEDULE, Slo, StepLoad, StepWatch
from lab.load.openplan import open_plan
from lab.load.run import CSV_COLUMNS
from lab.report import render
from lab.runfolder import JMeterFolder, RunFolder
from lab.tune import options as tune_options

pytestmark = pytest.mark.fast

# Every step judged (no warm-up step): the tests of the rules that judge them; the warm-up has tests of its own.
STEPS = StepLoad(start_rps=100, step_rps=100, step_s=10, max_rps=600, connect_timeout_ms=2000,
                 response_timeout_ms=3000, warmup_s=0)
T0_MS = 1_795_000_000_000


def test_the_schedule_holds_each_rate_for_a_step_then_drains():
    assert STEPS.rates() == [100, 200, 300, 400, 500, 600]
    assert STEPS.arrivals() == [1000, 2000, 3000, 4000, 5000, 6000]
    assert STEPS.schedule() == " ".join(f"rate({r}/s) random_arrivals(10 s) rate({r}/s)" for r in STEPS.rates()) \
        + " pause(5 s)"
    assert STEPS.duration_s == 65
    assert StepLoad(start_rps=50, step_rps=40, max_rps=200).rates() == [50, 90, 130, 170]     # never past max


@pytest.mark.parametrize("bad", [dict(start_rps=0), dict(step_s=0), dict(max_rps=10, start_rps=20),
                                 dict(step_rps=True), dict(response_timeout_ms=-1)])
def test_a_step_load_refuses_what_cannot_run(bad):
    with pytest.raises(ValueError):
        StepLoad(**bad)


def test_the_open_plan_is_the_labs_plan_with_open_model_groups(tmp_path):
    plan = ET.parse(open_plan(PLAN, tmp_path / "open.jmx")).getroot()
    closed = ET.parse(PLAN).getroot()
    assert [g.get("testname") for g in plan.findall(".//ThreadGroup")] == [openplan.WATCH]
    # nothing runs before the load: the open model counts its schedule from the test's start, so a setUp thread
    # group's time would arrive as one burst; the watch's one script knows both machines
    assert not plan.findall(".//SetupThreadGroup") and not plan.findall(".//PostThreadGroup")
    scripts = [s.text for s in plan.iter("stringProp") if s.get("name") == "script"]
    assert len(scripts) == 1 and "'default', 'tuned'" in scripts[0]
    groups = plan.findall(".//OpenModelThreadGroup")
    assert [g.get("testname") for g in groups] == ["default", "tuned"]
    schedules = [g.find("stringProp[@name='OpenModelThreadGroup.schedule']").text for g in groups]
    assert schedules == [f"${{__P({m}.schedule,${{__P(schedule,{IDLE_SCHEDULE})}})}}" for m in ("default", "tuned")]
    # the same requests, to the same result files
    for tag in ("HTTPSamplerProxy", "ResultCollector"):
        assert [ET.tostring(e) for e in plan.iter(tag)] == [ET.tostring(e) for e in closed.iter(tag)]
    # each group's requests under an If Controller on its own flag; its results writer stays at the group's level
    for group, machine in zip(groups, ("default", "tuned"), strict=True):
        tree = next(parent for parent in plan.iter() if group in list(parent))
        below = list(tree)[list(tree).index(group) + 1]
        assert [child.tag for child in below] == ["IfController", "hashTree", "ResultCollector", "hashTree"]
        condition = below[0].find("stringProp[@name='IfController.condition']").text
        assert condition == f"${{__P({machine}.load_on,true)}}"     # a property read per arrival, no script
        assert below[0].find("boolProp[@name='IfController.useExpression']").text == "true"
        assert [child.tag for child in below[1]] == ["HTTPSamplerProxy", "hashTree"]
        assert below[1][0].get("testname") == machine
    # the watch that sets them: one thread for the schedule's length, its samples ignored
    watch = plan.find(".//ThreadGroup")
    assert watch is not None and watch.find("stringProp[@name='ThreadGroup.num_threads']").text == "1"
    assert watch.find("stringProp[@name='ThreadGroup.duration']").text == "${__P(watch_s,1)}"
    script = plan.find(".//JSR223Sampler/stringProp[@name='script']").text
    assert "SampleResult.setIgnore()" in script and "for (machine in ['default', 'tuned'])" in script
    assert "props.setProperty(machine + '.load_on', 'false')" in script
    assert STEPS.properties()["watch_s"] == str(STEPS.duration_s)


def test_a_capacity_run_keeps_the_plan_it_ran_in_its_folder(tmp_path):
    import importlib

    from lab.runfolder import JMeterFolder
    load_run = importlib.import_module("lab.load.run")          # the module, not lab.load's run()
    folder = JMeterFolder(tmp_path / "jmeter")
    assert load_run._plan(STEPS, folder, []) == folder.open_plan and folder.open_plan.is_file()
    assert ET.parse(folder.open_plan).getroot().find(".//OpenModelThreadGroup") is not None
    assert load_run._plan(cli.load.QUICK, folder, []) == PLAN                 # a closed model runs the lab's own


def _write_results(path: Path, steps: list[tuple[int, int, float, int]]) -> None:
    """A results CSV: per step (arrivals, typical ms, error fraction, slow ms every 50th), Poisson-like starts."""
    rng = random.Random(7)
    with path.open("w", newline="") as stream:
        out = csv.writer(stream)
        out.writerow(CSV_COLUMNS)
        start = T0_MS
        for number, (count, typical, error_fraction, slow) in enumerate(steps):
            for k in range(count):
                at = start + number * 10_000 + int(k * 10_000 / count) + rng.randrange(0, 5)
                failed = rng.random() < error_fraction
                elapsed = slow if k % 50 == 0 else typical
                out.writerow([at, elapsed, "default", "502" if failed else "200", "Proxy Error" if failed else "OK",
                              "default 1-1", "text", "false" if failed else "true", "", 100, 50, 5, 5,
                              "http://x/", elapsed, 0, 0])


def _analyze(tmp_path: Path, steps: list[tuple[int, int, float, int]], load: StepLoad = STEPS) -> dict:
    _write_results(tmp_path / "results.csv", steps)
    return capacity.analyze(read_results(tmp_path / "results.csv"), load, T0_MS / 1000)


def test_capacity_is_the_last_rate_that_met_the_slo_before_two_misses(tmp_path):
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                (4000, 300, 0, 2500), (5000, 900, 0.05, 4000), (6000, 900, 0.2, 5000)])
    assert [s["met"] for s in found["steps"]] == [True, True, True, False, False, False]
    assert found["capacity_rps"] == 300 and found["knee_rps"] == 400 and found["found"]
    assert found["steps"][3]["p99_ms"] == 2500
    assert found["steps"][1]["arrived_rps"] == pytest.approx(200, rel=0.01)        # over its arrivals' span
    assert "p99 2500 ms (SLO 1000 ms)" in found["broke"]
    assert capacity.compare({"default": found, "tuned": {**found, "capacity_rps": 450}})["ratio"] == 1.5


def test_one_missed_step_between_good_ones_is_not_the_knee(tmp_path):
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 1500), (3000, 40, 0, 200),
                                (4000, 300, 0.3, 2500), (5000, 900, 0.3, 4000)])
    assert [s["met"] for s in found["steps"]] == [True, False, True, False, False]
    assert found["capacity_rps"] == 300 and found["knee_rps"] == 400
    assert "errors" in found["broke"] and "502 Proxy Error" in found["broke"]


def test_a_load_the_watch_ended_on_misses_by_its_clock_has_its_knee_where_the_arrivals_show_one(tmp_path):
    # A stalled machine holds the open model's threads: the missed step's arrivals ran over twice its length (200 req/s
    # of 400: not delivered), the watch ended the load on its clock's second miss, and no later step has arrivals.
    steps = [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200), (2000, 900, 0.05, 7000), (2000, 900, 0.05, 7000)]
    _write_results(tmp_path / "results.csv", steps)
    samples = read_results(tmp_path / "results.csv")
    alone = capacity.analyze(samples, STEPS, T0_MS / 1000)
    assert [s["met"] for s in alone["steps"]] == [True, True, True, False]
    assert not alone["steps"][-1]["delivered"]
    assert (alone["found"], alone["capacity_rps"], alone["knee_rps"]) == (False, 300, None)
    ended = capacity.analyze(samples, STEPS, T0_MS / 1000, ended_past_knee=True)
    assert (ended["found"], ended["capacity_rps"], ended["knee_rps"]) == (True, 300, 400)
    assert ended["broke"].startswith("at 400 req/s offered") and ended["note"] is None
    # ended early, its last step met: no knee is made up
    _write_results(tmp_path / "met.csv", steps[:3])
    met = capacity.analyze(read_results(tmp_path / "met.csv"), STEPS, T0_MS / 1000, ended_past_knee=True)
    assert (met["found"], met["knee_rps"]) == (False, None)


def test_a_machine_that_met_every_step_has_a_capacity_of_at_least_the_last(tmp_path):
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200), (4000, 40, 0, 200),
                                (5000, 40, 0, 200), (6000, 40, 0, 200)])
    assert found["reached_max"] and not found["found"] and found["capacity_rps"] == 600
    assert "at least" in found["note"]
    assert capacity.compare({"default": found, "tuned": found})["ratio"] is None


def test_a_step_the_load_did_not_finish_is_judged_only_when_its_miss_is_certain(tmp_path):
    # 1,200 of its 3,000 requests, half of them errors: it missed, whatever the rest would have done
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (1200, 900, 0.5, 5000)])
    assert [s["partial"] for s in found["steps"]] == [False, False, True]
    assert found["steps"][2]["met"] is False and found["capacity_rps"] == 200 and not found["found"]
    assert "not settled" in found["note"]
    # 1,200 good ones: the rest could still have met it or not, so it is not judged
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (1200, 30, 0, 60)])
    assert found["steps"][2]["partial"] and found["steps"][2]["met"] is None


def test_a_load_the_watch_ended_mid_step_still_has_its_knee(tmp_path):
    # The watch ends a load as soon as its second step has certainly missed: that step is partial, and
    # it is the same rule (Slo.certainly_missed) that judges it here.
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 400, 0, 2500), (900, 900, 0.5, 4000)])
    assert found["steps"][3]["partial"] and found["steps"][3]["met"] is False
    assert found["found"] and found["capacity_rps"] == 200 and found["knee_rps"] == 300


def test_the_slo_is_configurable(tmp_path):
    strict = StepLoad(**{**{k: getattr(STEPS, k) for k in ("start_rps", "step_rps", "step_s", "max_rps",
                                                              "connect_timeout_ms", "response_timeout_ms",
                                                              "warmup_s")},
                         "slo": Slo(p99_ms=100)})
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200), (4000, 40, 0, 200)],
                     strict)
    assert found["capacity_rps"] == 200 and found["knee_rps"] == 300


def _capacity_folder(tmp_path: Path) -> None:
    """A sequential capacity run's folder: default's knee at its 300 req/s step (20-30 s), tuned's at 400 (30-40 s)."""
    for machine in ("default", "tuned"):
        (tmp_path / "jmeter" / machine).mkdir(parents=True)
    _write_results(tmp_path / "jmeter" / "default" / "results.csv",
                   [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 400, 0, 2500), (4000, 900, 0, 4000)])
    _write_results(tmp_path / "jmeter" / "tuned" / "results.csv",
                   [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 60), (4000, 900, 0, 4000),
                    (5000, 900, 0, 4000)])
    profile = {"model": "open", **{k: getattr(STEPS, k) for k in ("start_rps", "step_rps", "step_s", "max_rps",
                                                                   "connect_timeout_ms", "response_timeout_ms",
                                                                   "keep_alive", "stop_after_misses",
                                                                   "warmup_s")},
               "slo": {"p99_ms": 1000, "error_pct": 0.1}}
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "backend": "local", "schedule": "sequential",
                                                   "profile": profile, "started_at": T0_MS / 1000 - 1,
                                                   "ended_at": T0_MS / 1000 + 60}))


def test_a_capacity_run_folder_is_summarised_and_reported_with_each_machines_capacity(tmp_path):
    _capacity_folder(tmp_path)
    summary = summarize(tmp_path, write=False, use_gcviewer=False)
    assert summary["machines"]["default"]["capacity"]["capacity_rps"] == 200
    assert summary["machines"]["tuned"]["capacity"]["capacity_rps"] == 300
    assert summary["capacity"]["ratio"] == 1.5
    assert summary["machines"]["default"]["load"]["window"]["settled"] is None     # no steady state looked for
    assert all(f["kind"] != "not settled" for f in summary["verdict"]["machines"]["default"]["findings"])
    page = render(tmp_path).read_text()
    section = page[page.index('<section id="capacity">'):page.index('<section id="what-happened">')]
    assert "p99 &lt;= 1000 ms and errors &lt;= 0.1%" in section
    assert "200 req/s" in section and "300 req/s" in section and "<strong>1.50×</strong>" in section
    assert 'id="chart-capacity"' in section and "data:image/png;base64," in section
    assert "p99 2500 ms (SLO 1000 ms)" in section                       # how default broke
    assert "The load generator's ceiling on this host: not measured" in section
    # with the machines' knobs and the host's CPU counters (JMeter's host, shared): where each knee's requests queued,
    # the host's CPUs over default's knee step (20-30 s) busy 1.9 of 2 with JMeter at 0.8
    (tmp_path / "knobs.json").write_text(json.dumps({"default": {"httpd_mpm": "prefork"}, "tuned": {}}))
    # (the rows from 9 s on are a refinement's JMeter's, jmeter/refine/default/: read with the run's own)
    header = "time,host_busy_s,host_idle_s,host_cpus,loadgen_pid,loadgen_cpu_s"
    rows = {pid: [header] + [f"{T0_MS / 1000 + s},{1000 + 1.9 * s:.2f},{500 + 0.1 * s:.2f},2,{pid},{0.8 * s:.2f}"
                             for s in seconds] for pid, seconds in ((4242, range(-1, 9)), (4343, range(9, 61)))}
    (tmp_path / "jmeter" / "loadgen.csv").write_text("\n".join(rows[4242]) + "\n")
    (tmp_path / "jmeter" / "refine" / "default").mkdir(parents=True)
    (tmp_path / "jmeter" / "refine" / "default" / "loadgen.csv").write_text("\n".join(rows[4343]) + "\n")
    found = summarize(tmp_path, write=False, use_gcviewer=False)["machines"]["default"]["capacity"]
    knee = found["at_knee"]
    assert knee["host"]["host_busy_cores"] == pytest.approx(1.9) and knee["host"]["loadgen_cores"] == pytest.approx(0.8)
    assert knee["queued"]["stage"] == "the host's CPUs" and knee["queued"]["sizes"]["httpd_workers"] == 150
    assert "JMeter 0.80 cores" in knee["queued"]["sentence"]
    # where it last kept up (200 req/s, one machine after the other): a request's cost of JMeter's CPU and the
    # host's, and the most the host's 2 CPUs serve at that cost
    kept_up = found["at_capacity"]
    assert kept_up["rate_rps"] == 200 and kept_up["answered_rps"] == pytest.approx(200, rel=0.01)
    cost = kept_up["cpu_per_request"]
    assert cost["host_ms"] == pytest.approx(1000 * 1.9 / kept_up["answered_rps"], abs=0.01)
    assert cost["jmeter_ms"] == pytest.approx(1000 * 0.8 / kept_up["answered_rps"], abs=0.01)
    assert cost["host_ceiling_rps"] == round(2000 / cost["host_ms"]) and 200 <= cost["host_ceiling_rps"] <= 212
    page = render(tmp_path).read_text()
    assert f"at most about {cost['host_ceiling_rps']:,} req/s" in page


def test_a_knee_step_the_host_stood_still_in_is_not_valid_and_gives_no_figure(tmp_path):
    """runs/20261205-014008 trial 1: the host still 1.0 s in the tuned machine's knee step; its miss measured the
    host. Here tuned's knee is its 400 req/s step (30-40 s), default's its 300 (20-30 s); the host stands still
    1.2 s at 34 s."""
    _capacity_folder(tmp_path)
    # the wall clock runs on 1.2 s after the sample at 34 s while the host's CPU counters do not
    rows = ["time,host_busy_s,host_idle_s,host_cpus,loadgen_pid,loadgen_cpu_s"] + [
        f"{T0_MS / 1000 + s + (1.2 if s > 34 else 0)},{1000 + 1.9 * s:.2f},{500 + 0.1 * s:.2f},2,4242,{0.8 * s:.2f}"
        for s in range(-1, 61)]
    (tmp_path / "jmeter" / "loadgen.csv").write_text("\n".join(rows) + "\n")
    machines = summarize(tmp_path, use_gcviewer=False)["machines"]
    paused = machines["tuned"]["capacity"]["at_knee"]["host_paused"]
    assert paused["seconds"] == pytest.approx(1.2, abs=0.01) and paused["at_s"] == [35.0]    # from the run's start
    assert machines["default"]["capacity"]["at_knee"]["host_paused"] is None   # its knee step ended before
    assert machines["tuned"]["capacity"]["capacity_rps"] == 300                 # as found: said not valid, not hidden
    value, why = ablation_folder.figure(RunFolder(tmp_path), ablation_folder.CAPACITY, "tuned")
    assert value is None and why is not None and "stood still 1.2 s in the tuned machine's knee step" in why
    assert ablation_folder.figure(RunFolder(tmp_path), ablation_folder.CAPACITY, "default") == (200.0, None)
    page = render(tmp_path).read_text()
    assert "<strong>Not valid: the host stood still 1.2 s at 0:35" in page


def _ceiling_folder(root: Path, steps: list[tuple[int, int, float, int]], load: StepLoad) -> JMeterFolder:
    folder = JMeterFolder(root / "jmeter" / "generator")
    (folder.root / "default").mkdir(parents=True)
    _write_results(folder.results("default"), steps)
    (folder.root / "target.json").write_text(json.dumps({"url": "http://10.213.3.2:8099/ceiling.txt",
                                                         "group": "default", "where": "JMeter in ctlab-loadgen",
                                                         "profile": {"model": "open", **asdict(load)}}))
    return folder


def test_the_warm_up_before_the_steps_is_shown_and_never_judged(tmp_path):
    warm = replace(STEPS, warmup_s=10)
    assert warm.segments()[:2] == [(100, 10, True), (100, 10, False)] and warm.rates() == STEPS.rates()
    assert warm.duration_s == STEPS.duration_s + 10 and warm.arrivals()[0] == 1000
    assert warm.schedule().startswith("rate(100/s) random_arrivals(10 s) rate(100/s) rate(100/s) random_arrivals(10 s)")
    # a cold JIT: the warm-up's p99 misses the SLO; then the machine keeps up until 400 req/s
    found = _analyze(tmp_path, [(1000, 900, 0, 3000), (1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                (4000, 300, 0, 2500), (5000, 900, 0.05, 4000)], warm)
    assert [(s["warmup"], s["rate_rps"], s["met"]) for s in found["steps"]] == [
        (True, 100, None), (False, 100, True), (False, 200, True), (False, 300, True), (False, 400, False),
        (False, 500, False)]
    assert found["capacity_rps"] == 300 and found["knee_rps"] == 400 and found["found"]
    assert "after a 10 s warm-up (not judged)" in warm.describe()


def test_the_watch_ignores_the_warm_up_and_starts_the_steps_where_the_analysis_does():
    warm = replace(STEPS, warmup_s=10)
    watch = StepWatch(warm)
    _feed(watch, 0, 1000, 3000)             # the warm-up, every request slow: no miss
    _feed(watch, 1, 1000, 20)
    watch.update(T0_MS + 20_000 + 6_001)
    assert watch.judged == {0: True} and watch.anchored and watch.origin_ms == T0_MS + 10_000
    # JMeter started its schedule 0.5 s before its first request and caught up within the first segment: the steps
    # start at the warm-up's 1000th request, not 10 s after the first; a clock would put the next step's slow
    # requests into this one and see a miss the analysis does not
    late = StepWatch(replace(STEPS, warmup_s=10))
    for k in range(1000):
        late.add(T0_MS + 500 + int(k * 9_500 / 1000), 20, True)
    _feed(late, 1, 1000, 20)
    for k in range(100):                    # the next step: its first 100 requests slow
        late.add(T0_MS + 20_000 + 4 * k, 2000, True)
    late.update(T0_MS + 20_000 + 6_001)
    assert late.origin_ms == T0_MS + 10_000 and late.judged[0] is True     # a clock from T0 + 500 says False


def test_the_watch_judges_no_step_before_it_knows_where_the_steps_begin():
    # CI, 2026-11-29 (an ablation's pair): the first answer came 0.8 s into JMeter's schedule and the step after the
    # first judged one was past the knee; by the clock the first step took in its first slow requests and was
    # "certainly missed" before the warm-up's requests had all ended (5 s steps, 11 s for them to end), so the
    # load ended a step early, before two steps the analysis calls missed, and the trial was not counted
    load = replace(STEPS, warmup_s=10, step_s=5, connect_timeout_ms=5000, response_timeout_ms=5000)
    late = StepWatch(load)
    for k in range(1000):                   # the warm-up: 1000 requests from T0 + 800 ms to T0 + 10 s
        late.add(T0_MS + 800 + int(k * 9_200 / 1000), 20, True)
    for k in range(500):                    # the first judged step, 100 req/s: fast
        late.add(T0_MS + 10_000 + 10 * k, 20, True)
    for k in range(400):                    # the next, past the knee: slow from its first request
        late.add(T0_MS + 15_000 + 5 * k, 2500, True)
    late.update(T0_MS + 17_000)              # a clock from T0 + 800 counts 80 slow requests in the first step
    assert late.judged == {} and not late.anchored and not late.broken
    late.update(T0_MS + 15_000 + 11_001)    # the first step's requests have all ended: met; the next certainly missed
    assert late.anchored and late.origin_ms == T0_MS + 10_000 and late.judged == {0: True, 1: False}
    # a machine that answered fewer requests than the warm-up sent, by the time all of them must have ended: the
    # clock's guess stands, and its steps are judged by it
    few = StepWatch(load)
    for k in range(500):
        few.add(T0_MS + 20 * k, 20, True)
    for k in range(400):
        few.add(T0_MS + 10_000 + 10 * k, 2500, True)
    few.update(T0_MS + 10_000 + 11_001)    # the warm-up's 1000 must have ended: 500 answered
    assert few.anchored and few.origin_ms == T0_MS + 10_000 and few.judged[0] is False


def test_a_run_recorded_before_the_warm_up_has_none():
    profile = {"model": "open", "start_rps": 100, "step_rps": 100, "step_s": 10, "max_rps": 600,
               "slo": {"p99_ms": 1000, "error_pct": 0.1}}
    assert capacity.step_load(profile).warmup_s == 0
    assert capacity.step_load({**profile, "warmup_s": 30}).warmup_s == 30


def test_the_load_generators_ceiling_is_the_last_step_it_delivered_within_the_slo(tmp_path):
    load = StepLoad(start_rps=100, step_rps=100, step_s=10, max_rps=400, connect_timeout_ms=1000,
                    response_timeout_ms=1000, stop_after_misses=1, warmup_s=0)
    # three steps delivered and fast; the fourth's 4,000 requests arrive over 20 s: JMeter fell behind
    folder = _ceiling_folder(tmp_path / "behind", [(1000, 2, 0, 5), (2000, 2, 0, 5), (3000, 2, 0, 5)], load)
    rows = folder.results("default").read_text().splitlines()
    rest = rows[1].split(",", 1)[1]
    rows += [f"{T0_MS + 30_000 + int(k * 20_000 / 4000)},{rest}" for k in range(4000)]
    folder.results("default").write_text("\n".join(rows) + "\n")
    found = capacity.generator_ceiling(folder)
    assert found["ceiling_rps"] == 300 and not found["reached_max"]
    assert found["text"] == "300 req/s (at 400 req/s its requests arrived at 200 req/s)"
    assert [s["delivered"] for s in found["steps"]] == [True, True, True, False]
    # delivered but slow: the target's answers miss the SLO (a host out of CPU), which ends the ceiling too
    found = capacity.generator_ceiling(_ceiling_folder(tmp_path / "slow", [(1000, 2, 0, 5), (2000, 2, 0, 5),
                                                                           (3000, 1500, 0, 3000)], load))
    assert found["ceiling_rps"] == 200 and found["text"].startswith("200 req/s (at 300 req/s its p99 was 3000 ms")
    found = capacity.generator_ceiling(_ceiling_folder(tmp_path / "all", [(1000, 2, 0, 5), (2000, 2, 0, 5),
                                                                          (3000, 2, 0, 5), (4000, 2, 0, 5)], load))
    assert found["ceiling_rps"] == 400 and found["reached_max"] and found["text"].startswith("at least 400")
    assert capacity.generator_ceiling(JMeterFolder(tmp_path / "none")) is None       # not measured
    # JMeter's own warm-up, slow as a cold JVM is, ends nothing
    found = capacity.generator_ceiling(_ceiling_folder(tmp_path / "warm", [(500, 1500, 0, 3000), (1000, 2, 0, 5),
                                                                           (2000, 2, 0, 5), (3000, 1500, 0, 3000)],
                                                       replace(load, warmup_s=5)))
    assert found["ceiling_rps"] == 200 and found["steps"][0]["warmup"]
    # the ceiling's own rule, two steps in a row: JMeter still warming up fell behind once (the second step's
    # requests over 15 s) and then delivered the third; the fourth and fifth missed: its ceiling is the third's
    twice = replace(load, max_rps=500, stop_after_misses=2)
    folder = _ceiling_folder(tmp_path / "hiccup", [(1000, 2, 0, 5)], twice)
    rows = folder.results("default").read_text().splitlines()
    tail = rows[1].split(",", 2)[2]                 # after the start and the elapsed time
    rows += [f"{T0_MS + 10_000 + int(k * 15_000 / 2000)},2,{tail}" for k in range(2000)]
    rows += [f"{T0_MS + 25_000 + int(k * 10_000 / 3000)},2,{tail}" for k in range(3000)]
    rows += [f"{T0_MS + 35_000 + int(k * 10_000 / 4000)},3000,{tail}" for k in range(9000)]
    folder.results("default").write_text("\n".join(rows) + "\n")
    found = capacity.generator_ceiling(folder)
    assert [s["delivered"] and s["met"] for s in found["steps"]] == [True, False, True, False, False], found["steps"]
    assert found["ceiling_rps"] == 300 and found["text"].startswith("300 req/s (at 400 req/s its p99 was 3000 ms")
    assert ceiling.STEPS.stop_after_misses == 2


def test_a_tune_reuses_the_first_ceiling_that_was_measured_not_the_first_that_was_tried(tmp_path):
    from lab.tune.folder import Tuning
    load = StepLoad(start_rps=100, step_rps=100, step_s=10, max_rps=400, slo=Slo(p99_ms=1000, error_pct=0.1),
                    response_timeout_ms=1000, stop_after_misses=1, warmup_s=0)
    tuning = Tuning(tmp_path)
    assert tuning.ceiling_measured_in() is None                                     # no configuration yet
    # configuration 1 tried: its load gave no results (the record is there, the CSV is not)
    tried = JMeterFolder(tuning.config_folder(1).root / "jmeter" / "generator")
    tried.root.mkdir(parents=True)
    (tried.root / "target.json").write_text(json.dumps({"group": "default", "profile": {"model": "open",
                                                                                           **asdict(load)}}))
    assert capacity.generator_ceiling(tried) is not None and not capacity.ceiling_measured(tried)
    assert tuning.ceiling_measured_in() is None
    # configuration 2 measured it, under its first step too: that is a measurement, and the one reused
    _ceiling_folder(tuning.config_folder(2).root, [(1000, 1500, 0, 3000)], load)
    _ceiling_folder(tuning.config_folder(3).root, [(1000, 2, 0, 5), (2000, 2, 0, 5)], load)
    assert capacity.generator_ceiling(tuning.config_folder(2).jmeter.generator)["ceiling_rps"] is None
    assert tuning.ceiling_measured_in() == str(tuning.config_folder(2).root)


def test_a_capacity_report_shows_the_load_generators_ceiling(tmp_path):
    test_a_capacity_run_folder_is_summarised_and_reported_with_each_machines_capacity(tmp_path)
    _ceiling_folder(tmp_path, [(1000, 2, 0, 5), (2000, 2, 0, 5), (3000, 2, 0, 5)],
                    replace(STEPS, max_rps=300, stop_after_misses=1))
    summary = summarize(tmp_path, write=True, use_gcviewer=False)
    assert summary["capacity"]["generator"]["ceiling_rps"] == 300
    assert summary["machines"]["default"]["capacity"]["capacity_rps"] == 200    # the ceiling is no machine
    page = render(tmp_path).read_text()
    section = page[page.index('<section id="capacity">'):page.index('<section id="what-happened">')]
    assert "The load generator's ceiling on this host: <strong>at least 300 req/s" in section


def _feed(watch: StepWatch, step: int, count: int, elapsed: int, ok: bool = True) -> None:
    for k in range(count):
        watch.add(T0_MS + step * 10_000 + int(k * 10_000 / count), elapsed, ok)


def test_the_watch_ends_a_load_after_two_steps_certainly_missed():
    watch = StepWatch(STEPS)
    _feed(watch, 0, 1000, 20)
    watch.update(T0_MS + 10_000)             # the step's requests may still be in flight: not judged yet
    assert watch.judged == {}
    watch.update(T0_MS + 10_000 + 6_001)     # every request of it has ended: met
    assert watch.judged == {0: True} and not watch.broken
    _feed(watch, 1, 100, 2000)              # already more slow requests than 1 % of the most it could have
    _feed(watch, 2, 100, 2000)
    watch.update(T0_MS + 25_000)
    assert watch.judged == {0: True, 1: False, 2: False} and watch.broken


def test_once_every_arrival_has_its_sample_the_watch_judges_the_last_steps_at_once():
    # A load whose last step met waited out the schedule's drain (the timeouts, 10 s on the quick steps) for requests
    # that had all ended: each refinement, each run whose machine never broke. JMeter's schedule sends exactly rate x
    # length a segment, and the lab's plan one request an arrival: once that many samples are in, none is in flight.
    steps = replace(STEPS, max_rps=300)
    counted, plain = StepWatch(steps, one_sample_each=True), StepWatch(steps)
    for watch in (counted, plain):
        for step, rate in enumerate(steps.rates()):
            _feed(watch, step, rate * steps.step_s, 20)
        watch.update(T0_MS + 30_000 + 10)       # the last step just over: its timeouts not yet waited out
    assert counted.answered and counted.judged == {0: True, 1: True, 2: True} and not counted.broken
    assert not plain.answered and plain.judged == {0: True, 1: True}      # a user's plan: samplers an arrival unknown
    # one sample short (still in flight): its step waits, as before
    short = StepWatch(steps, one_sample_each=True)
    for step, rate in enumerate(steps.rates()):
        _feed(short, step, rate * steps.step_s - (step == 2), 20)
    short.update(T0_MS + 30_000 + 10)
    assert not short.answered and short.judged == {0: True, 1: True}
    # a last step answered slow is judged missed at once too
    slow = StepWatch(replace(steps, stop_after_misses=1), one_sample_each=True)
    for step, rate in enumerate(steps.rates()):
        _feed(slow, step, rate * steps.step_s, 20 if step < 2 else 2000)
    slow.update(T0_MS + 30_000 + 10)
    assert slow.judged == {0: True, 1: True, 2: False} and slow.broken


def test_the_watch_does_not_end_a_load_on_one_missed_step():
    watch = StepWatch(STEPS)
    for step, elapsed in enumerate((20, 2000, 20, 2000)):
        _feed(watch, step, 1000 * (step + 1), elapsed if step % 2 == 0 else 20)
        if step % 2:
            _feed(watch, step, 100, elapsed)
    watch.update(T0_MS + 46_001)         # step 4 not yet over
    assert watch.judged == {0: True, 1: False, 2: True, 3: False} and not watch.broken


def test_the_ceilings_watch_ends_its_load_on_the_first_step_the_generator_fell_behind_in():
    # the second step's 2,000 requests: 1,700 of them arrived in its 10 s (85%), every one fast
    for behind, judged in ((True, {0: True, 1: False}), (False, {0: True, 1: True})):
        watch = StepWatch(replace(STEPS, stop_after_misses=1, stop_when_behind=behind))
        _feed(watch, 0, 1000, 20)
        _feed(watch, 1, 1700, 20)
        watch.update(T0_MS + 20_000 + 6_001)
        assert watch.judged == judged and watch.broken == behind
    # at 90% of its rate a step was delivered, as the analysis counts it
    watch = StepWatch(replace(STEPS, stop_after_misses=1, stop_when_behind=True))
    _feed(watch, 0, 900, 20)
    watch.update(T0_MS + 10_000 + 6_001)
    assert watch.judged == {0: True}
    assert ceiling.STEPS.stop_when_behind and "or arrives under 90% of its rate" in ceiling.STEPS.describe()


@pytest.mark.parametrize("argv, message", [
    (["capacity", "--max-rate", "10", "--start-rate", "50"], "--max-rate 10 is below --start-rate 50"),
    (["capacity", "--step-length", "0"], "--step-length 0: must be 1 or more"),
    (["capacity", "--slo-errors", "150"], "--slo-errors 150: must be a percentage"),
    (["capacity", "--slo-p99", "0"], "--slo-p99 0: must be 1 ms or more"),
    (["capacity", "--repeat", "0"], "--repeat 0: must be 1 or more"),
])
def test_bad_capacity_options_are_named_before_anything_starts(argv, message, capsys):
    class NoHost:
        def __getattr__(self, name):
            raise AssertionError(f"the host's lab was touched ({name}) before the options were checked")

    assert cli.main(argv, host=NoHost()) == 1
    assert message in capsys.readouterr().err


def test_capacity_options_reach_the_steps():
    args = cli._parser().parse_args(["capacity", "--quick", "--step-length", "5", "--slo-p99", "250",
                                     "--stop-after-misses", "3"])
    steps = options.experiment(args).profile
    assert steps.step_s == 5 and steps.slo.p99_ms == 250 and steps.start_rps == cli.load.QUICK_STEPS.start_rps
    assert steps.stop_after_misses == 3 and "until 3 steps miss" in steps.describe()


def test_a_tunes_steps_warm_a_restarted_jvm_up_climbing_whatever_warm_up_is_asked():
    def steps(*argv: str):
        return tune_options.checked(cli._parser().parse_args(["tune", *argv])).steps
    assert steps().segments()[:4] == [(25, 10, True), (50, 10, True), (75, 10, True), (100, 10, False)]
    assert steps("--quick").segments()[:3] == [(25, 5, True), (50, 5, True), (75, 5, True)]
    assert steps("--quick").max_rps == cli.load.QUICK_STEPS.max_rps
    # as many climbing segments as the typed length divides into; none at all for 0
    assert steps("--warmup", "10").segments()[:3] == [(25, 5, True), (62, 5, True), (100, 10, False)]
    assert steps("--warmup", "7").segments()[:2] == [(25, 7, True), (100, 10, False)]
    assert not any(warm for _, _, warm in steps("--warmup", "0").segments())
    assert "after a 30 s warm-up climbing from 25 to 75 req/s (not judged)" in steps().describe()



def test_capacity_warms_a_restarted_jvm_up_climbing_and_never_above_its_first_step():
    def steps(*argv: str):
        return options.experiment(cli._parser().parse_args(["capacity", *argv])).profile
    assert steps("--quick").segments()[:4] == [(25, 5, True), (50, 5, True), (75, 5, True), (100, 10, False)]
    # the full steps too (cold JVMs given their first step at once failed a third of it), and any warm-up typed
    assert steps().segments()[:4] == [(25, 10, True), (50, 10, True), (75, 10, True), (100, 15, False)]
    assert "after a 30 s warm-up climbing from 25 to 75 req/s (not judged)" in steps().describe()
    assert steps("--warmup", "60").segments()[:3] == [(25, 20, True), (50, 20, True), (75, 20, True)]
    # from a quarter of the first step typed, whichever it is, as a refinement climbs to the rate it rechecks
    high = steps("--start-rate", "200", "--warmup", "30")
    assert high.segments()[:4] == [(50, 10, True), (100, 10, True), (150, 10, True), (200, 15, False)]
    low = steps("--quick", "--start-rate", "20")
    assert low.segments()[:4] == [(5, 5, True), (10, 5, True), (15, 5, True), (20, 10, False)]
    assert steps("--start-rate", "3").warmup_rates() == [1, 1, 2]
    # none asked for: none
    assert not any(warm for _, _, warm in steps("--warmup", "0").segments())

def test_a_recheck_that_missed_says_why_from_what_pcp_saw_over_both_steps(tmp_path):
    coarse = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                 (4000, 300, 0, 2500), (5000, 900, 0.05, 4000)])
    # the second climb's first step, 200 req/s (met on the coarse climb), missed
    folder = _refined_folder(tmp_path / "sick", 300, 400, [*_warm(40, 200), (2000, 900, 0.3, 5000)])
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    met = next(s for s in found["steps"] if s["rate_rps"] == 200 and not s.get("refined"))
    again = next(s for s in found["steps"] if s["rate_rps"] == 200 and s.get("refined"))
    times = [met["start_s"] + 1, met["start_s"] + 5, again["start_s"] + 1, again["start_s"] + 5]

    def series(page_ins: list[float], host: list[float], own: list[float]) -> dict:
        return {"pcp": {"t": times, "host_cpu_cores": host, "proc_t": times, "proc_cpu_cores": own,
                        "proc_major_faults_per_s": page_ins, "proc_swap_bytes": [0, 0, 150 * 2**20, 140 * 2**20]}}

    def why(pcp: dict) -> dict:
        copy = json.loads(json.dumps(found))
        step_state.why_not_recovered(copy, pcp)
        return copy["refined"]

    # paging through the recheck: the memory the overload pushed to swap, named with its figures
    refined = why(series([1, 3, 400, 200], [1.5, 1.5, 1.6, 1.6], [1.0, 1.0, 0.9, 0.9]))
    assert refined["cause"] == "paging" and refined["recovered"] is False
    assert "its processes paged in 300 pages/s over it (2 when it met it), with 150 MiB in swap" in refined["note"]
    assert refined["note"].startswith("at 200 req/s, which it met before (p99 ") and "the coarse steps' " in refined[
        "note"]
    assert refined["seen"]["again"]["swap_peak_bytes"] == 150 * 2**20
    # no page-ins: the note gives both steps' p99 and claims no cause; PCP's figures are kept all the same
    refined = why(series([0, 0, 10, 10], [1.2, 1.2, 2.0, 2.0], [1.0, 1.0, 0.8, 0.6]))
    assert "cause" not in refined and refined["seen"]["again"]["host_cpu_cores"] == 2.0
    assert (": PCP shows no cause (page-ins 10/s, under 50; the host's CPUs 2.00 cores busy, its own processes 0.70): "
            "a rate this close to the knee") in refined["note"]
    assert refined["note"].startswith("at 200 req/s, which it met before (p99 ")
    assert "cause" not in why({}) and "seen" not in why({})
    # a recheck that met (recovered) is left alone
    copy = json.loads(json.dumps(found))
    copy["refined"]["recovered"] = True
    step_state.why_not_recovered(copy, series([1, 3, 400, 200], [1.5, 1.5, 1.6, 1.6], [1, 1, 1, 1]))
    assert "cause" not in copy["refined"]


def test_the_headline_of_a_capacity_run_gives_each_capacity_and_the_ratio(tmp_path):
    from lab.analysis.headline import headline
    summary = {"run": {"schedule": "sequential"}, "capacity": {"ratio": 1.5},
               "machines": {"default": {"capacity": _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60),
                                                                        (3000, 400, 0, 2500), (4000, 900, 0, 4000)])},
                            "tuned": {"capacity": _analyze(tmp_path, [(1000 * k, 20, 0, 40) for k in range(1, 7)])}}}
    lines = headline(summary)
    assert lines[0] == "Capacity (sequential, open model; a step meets the SLO when p99 <= 1000 ms and errors <= 0.1%):"
    assert lines[1].startswith("  default  capacity 200 req/s; at 300 req/s offered it answered 300 req/s; p99 2500 ms")
    assert lines[2].startswith("  tuned    capacity at least 600 req/s")
    assert lines[3] == "  tuned/default capacity: 1.50x"
    # where a machine's requests queued at its knee, under its line
    summary["machines"]["default"]["capacity"]["at_knee"] = {"queued": {"sentence": "requests queued at the backend "
                                                                                    "pool (...)"}}
    lines = headline(summary)
    assert lines[2] == "           at its knee, requests queued at the backend pool (...)"
    assert lines[3].startswith("  tuned    capacity at least 600 req/s")


def test_the_knee_says_where_requests_queued_and_what_died(tmp_path):
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 400, 0, 2500), (4000, 900, 0, 4000)])
    knee = next(s for s in found["steps"] if s["rate_rps"] == found["knee_rps"])
    start = knee["start_s"]
    times = [start - 5, start + 1, start + 9, start + 15]           # the first and last outside the knee step
    series = {"pcp": {"t": times, "host_cpu_cores": [0.4, 1.7, 2.3, 0.5],      # a one-second rate past 2 CPUs
                      "proc_t": times, "proc_pss_bytes": [900e6, 300e6, 400e6, 950e6],
                      "proc_cpu_cores": [1.9, 1.2, 1.5, 1.9], "proc_threads": [500, 200, 250, 600],
                      "app_t": times, "tomcat_busy": {"http": [1, 150, 200, 7], "ajp": [9, 10, 20, 9]},
                      "apache_busy": {"": [0, 140, 150, 0]},
                      "tomcat_connections": {"http": [3, 150, 210, 5], "ajp": [1, 2, 2, 1]},
                      "listen_overflows": {"listenoverflows": [0, 10, 70, 400]},
                      # the REST route's exchanges in flight, not the audit route's it calls
                      "camel_inflight": {"route:mock": [2, 8, 7, 30], "route:audit-reply": [1, 12, 12, 1]}},
              "gc": [{"t": start + 2, "pause_ms": 80}, {"t": start + 3, "pause_ms": 120}, {"t": start + 30, "pause_ms": 900}]}
    events = {"oom_kills": 1, "process_exits": [{"process": "service", "reason": "killed by SIGKILL", "at_s": start + 8},
                                                {"process": "httpd", "reason": "exited", "at_s": start - 40}],
              "peak_cgroup_usage_bytes": 536870912}
    state = step_state.at_knee(found, series, events)
    # connections held by Tomcat (both connectors), and those the kernel dropped from a full accept queue in the step
    assert state["tomcat_connections_peak"] == 212 and state["accept_queue_overflows"] == 70    # from before the step
    # deaths over the whole load, beside those in the knee step, and the memory the OOM killer saw
    assert state["process_exits_in_run"] == 2 and state["first_exit_s"] == start - 40
    assert state["cgroup_peak_bytes"] == 536870912
    assert state["memory_pss_peak_bytes"] == 400e6 and state["cpu_cores_peak"] == 1.5 and state["threads_peak"] == 250
    assert state["host_cpu_cores_mean"] == 2.0                  # the host's CPUs: their mean over the step
    assert state["tomcat_busy_peak"] == 220 and state["httpd_busy_peak"] == 150 and state["pool_pending_peak"] is None
    assert state["route_inflight_peak"] == 8
    assert state["gc_pauses"] == 2 and state["gc_pause_max_ms"] == 120
    assert [e["process"] for e in state["process_exits"]] == ["service"] and state["oom_kills_in_run"] == 1
    assert step_state.at_knee({**found, "knee_rps": None}, series, events) is None


def test_the_step_that_gave_the_capacity_carries_what_each_role_spent_over_it(tmp_path):
    found = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 400, 0, 2500), (4000, 900, 0, 4000)])
    met = next(s for s in found["steps"] if s["rate_rps"] == found["capacity_rps"] and s["met"])
    start = met["start_s"]
    times = [start - 5, start + 1, start + 9, start + 15]           # the first and last outside the step
    series = {"pcp": {"t": times, "host_cpu_cores": [0.4, 1.7, 1.9, 2.0], "proc_t": times,
                      "proc_cpu_cores_by_role": {"service": [0.1, 0.6, 0.8, 1.5], "httpd": [0.0, 0.2, 0.2, 0.9]}}}
    state = step_state.at_capacity(found, series)
    assert state is not None and state["rate_rps"] == found["capacity_rps"] == 200
    assert (state["from_s"], state["to_s"]) == (start, pytest.approx(start + found["step_s"]))
    assert state["answered_rps"] == met["answered_rps"] and state["refined"] is False
    assert state["cpu_cores_mean_by_role"] == {"service": 0.7, "httpd": 0.2} and state["host_cpu_cores_mean"] == 1.8
    assert step_state.at_capacity({**found, "capacity_rps": None}, series) is None


def test_a_step_the_load_generator_did_not_deliver_can_miss_the_slo_but_not_meet_it(tmp_path):
    # Step 3 should bring 3,000 requests in 10 s; they arrive over 20 s (JMeter fell behind on a shared host):
    # meeting the SLO at two thirds of the rate says nothing of the rate, so it is not judged; step 4 missed.
    _write_results(tmp_path / "results.csv", [(1000, 20, 0, 40), (2000, 25, 0, 60)])
    rows = (tmp_path / "results.csv").read_text().splitlines()
    rest = rows[1].split(",", 1)[1]
    extra = [f"{T0_MS + 20_000 + int(k * 20_000 / 3000)},{rest}" for k in range(3000)]
    extra += [f"{T0_MS + 40_000 + int(k * 10_000 / 4000)},{rest.replace('40,', '2500,', 1)}" for k in range(4000)]
    (tmp_path / "results.csv").write_text("\n".join(rows + extra) + "\n")
    found = capacity.analyze(read_results(tmp_path / "results.csv"), STEPS, T0_MS / 1000)
    assert [(s["delivered"], s["met"]) for s in found["steps"]] == [(True, True), (True, True), (False, None),
                                                                     (True, False)]
    assert found["capacity_rps"] == 200 and found["generator_bound_rps"] == 300 and not found["found"]
    assert found["knee_rps"] is None and "the load generator fell behind at 300 req/s" in found["note"]


def test_requests_the_load_generator_could_not_send_are_its_errors_not_the_machines(tmp_path):
    # Step 2: 40% of its requests failed in JMeter itself (no local port left): they never reached the machine,
    # so they are not its errors, and the step was not delivered.
    _write_results(tmp_path / "results.csv", [(1000, 20, 0, 40), (2000, 25, 0, 60)])
    lines = (tmp_path / "results.csv").read_text().splitlines()
    bind = "Non HTTP response code: java.net.BindException,Non HTTP response message: Cannot assign requested address"
    for k in range(1001, 3001, 5):
        for _ in range(2):
            fields = lines[k].split(",")
            lines[k] = ",".join(fields[:3] + bind.split(",") + fields[5:7] + ["false"] + fields[8:])
            k += 1
    (tmp_path / "results.csv").write_text("\n".join(lines) + "\n")
    step = capacity.analyze(read_results(tmp_path / "results.csv"), STEPS, T0_MS / 1000)["steps"][1]
    assert step["client_errors"] == 800 and step["errors"] == 0 and step["error_rate"] == 0
    assert not step["delivered"] and step["met"] is None and step["answered_rps"] < 150


@pytest.mark.parametrize("label, kind", [
    ("Non HTTP response code: org.apache.http.conn.ConnectTimeoutException", "connect timeout"),
    ("java.net.SocketTimeoutException Read timed out", "response timeout"),
    ("org.apache.http.conn.HttpHostConnectException Connect to 10.213.1.2:80 failed: Connection refused",
     "connection refused"),
    ("java.net.BindException Cannot assign requested address", "no local port (JMeter's)"),
    ("503 Service Unavailable", "503"), ("502 Proxy Error", "502"), ("504 Gateway Timeout", "504"),
    ("500 Internal Server Error", "5xx"), ("404 Not Found", "4xx"), ("failed", "other"),
])
def test_each_failure_has_the_class_an_engineer_reads_a_breaking_point_by(label, kind):
    assert error_class(label) == kind


def test_each_step_counts_its_error_classes(tmp_path):
    _write_results(tmp_path / "results.csv", [(1000, 20, 0, 40), (2000, 25, 0, 60)])
    lines = (tmp_path / "results.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    code = header.split(",").index("responseCode")
    failed = []
    for index, row in enumerate(rows[1000:1100]):          # 100 of step 2's requests fail: 60 with 503, 40 time out
        cells = row.split(",")
        cells[code] = "503" if index < 60 else "Non HTTP response code: java.net.SocketTimeoutException"
        cells[header.split(",").index("success")] = "false"
        failed.append(",".join(cells))
    (tmp_path / "results.csv").write_text("\n".join([header, *rows[:1000], *failed, *rows[1100:]]) + "\n")
    found = capacity.analyze(read_results(tmp_path / "results.csv"), STEPS, T0_MS / 1000)
    assert found["steps"][0]["errors_by_class"] == {}
    assert found["steps"][1]["errors_by_class"] == {"503": 60, "response timeout": 40}


def test_the_finer_steps_lie_between_the_last_rate_met_and_the_knee_at_the_resolution():
    load = replace(STEPS, resolution_rps=25)
    finer = load.refined(300, 400)
    # a second climb: the coarse step below the rate met first (did the machine recover from the overload?), the rate
    # met reached from it as the coarse steps reached it, then the finer ones
    assert finer.rates() == [200, 300, 325, 350, 375] and finer.stop_after_misses == 1
    # a fresh JMeter sending a machine at rest its rate at once is a burst it may not come back from: the warm-up
    # climbs to the first step as the coarse steps did (a quarter, a half, three quarters of it, not judged)
    assert finer.segments()[:5] == [(50, 3, True), (100, 3, True), (150, 3, True), (200, finer.step_s, False),
                                    (300, finer.step_s, False)]
    assert finer.arrivals()[:3] == [150, 300, 450] and finer.warmup_s == 9
    assert "open model: 200, then 300 to 375 req/s by 25 every 10 s after a 9 s warm-up climbing from 50 to 150" \
        in finer.describe()
    assert [rate for rate, _, warm in replace(STEPS, step_s=15).refined(700, 800).segments() if warm] == [150, 300, 450]
    assert finer.step_of(finer.step_s * 1.5) == 1 and finer.duration_s == 9 + 5 * finer.step_s + finer.drain_s
    # the rate met was the first step: no step below it, the recheck is that rate
    first = load.refined(100, 200)
    assert first.rates() == [100, 125, 150, 175] and first.warmup_rates() == [25, 50, 75]
    with pytest.raises(ValueError, match="must divide into its 3 steps"):
        replace(finer, warmup_s=10)
    with pytest.raises(ValueError, match="lead_rps must be under start_rps"):
        replace(finer, lead_rps=300)
    assert finer.step_s == load.step_s and finer.slo == load.slo
    assert load.refined(300, 325) is None and replace(STEPS, resolution_rps=100).refined(300, 400) is None
    assert replace(STEPS, resolution_rps=30).refined(300, 400).rates() == [200, 300, 330, 360, 390]


def _warm(typical_ms: int, slow_ms: int) -> list[tuple[int, int, float, int]]:
    """The finer steps' warm-up climbing to 200 req/s, the step below the rate met (50, 100, 150 req/s for 3 s
    each), as results."""
    return [(count, typical_ms, 0, slow_ms) for count in (150, 300, 450)]


def _refined_folder(root: Path, met: int, missed: int, steps: list[tuple[int, int, float, int]]) -> JMeterFolder:
    folder = JMeterFolder(root / "jmeter" / "refine" / "default")
    (folder.root / "default").mkdir(parents=True)
    finer = replace(STEPS, resolution_rps=25).refined(met, missed)
    _write_results(folder.results("default"), steps)
    (folder.root / "steps.json").write_text(json.dumps({"machine": "default", "met_rps": met, "missed_rps": missed,
                                                        "profile": {"model": "open", **asdict(finer)}}))
    return folder


def test_a_knee_refined_gives_the_highest_finer_step_met_before_the_first_that_missed(tmp_path):
    coarse = _analyze(tmp_path, [(1000, 20, 0, 40), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                 (4000, 300, 0, 2500), (5000, 900, 0.05, 4000)])
    assert (coarse["capacity_rps"], coarse["knee_rps"]) == (300, 400)
    # 200 met again, 300 met again, 325 met, 350 missed: the load ended there
    folder = _refined_folder(tmp_path, 300, 400, [*_warm(900, 3000), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                                  (3250, 40, 0, 200), (3500, 400, 0, 2500)])
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["knee_rps"], found["found"]) == (325, 350, True)
    assert [(s["step"], s["rate_rps"], s.get("refined", False), s["warmup"]) for s in found["steps"]][-8:] == [
        (5, 500, False, False), (6, 50, True, True), (7, 100, True, True), (8, 150, True, True),
        (9, 200, True, False), (10, 300, True, False), (11, 325, True, False), (12, 350, True, False)]
    assert found["refined"] == {"between": [300, 400], "steps": 7, "resolution_rps": 25, "recheck_rps": 200,
                                "recovered": True}
    assert found["broke"].startswith("at 350 req/s offered")
    # every finer step met: the coarse knee stands, the capacity is the last of them
    folder = _refined_folder(tmp_path / "all", 300, 400, [*_warm(40, 200), (2000, 25, 0, 60), (3000, 40, 0, 200),
                                                          (3250, 40, 0, 200), (3500, 40, 0, 200), (3750, 40, 0, 200)])
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["knee_rps"]) == (375, 400) and "note" not in found["refined"]
    # the step below met, the rate the coarse climb met now missed: met on one climb of two is not the capacity
    folder = _refined_folder(tmp_path / "once", 300, 400, [*_warm(40, 200), (2000, 25, 0, 60), (3000, 400, 0, 2500)])
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["knee_rps"], found["refined"]["recovered"]) == (200, 300, True)
    assert found["refined"]["note"] == ("300 req/s, met on the coarse climb, missed on the second: the capacity is "
                                        "200 req/s, met on both")
    # the step below not delivered (its arrivals over twice its length: not judged), the rate met now missed: nothing
    # was met on both climbs, the coarse figures stand
    folder = _refined_folder(tmp_path / "unjudged", 300, 400, [(1000, 25, 0, 60), (1000, 25, 0, 60), (3000, 400, 0, 2500)])
    record = json.loads((folder.root / "steps.json").read_text())
    record["profile"].update(warmup_s=0, warmup_steps=1)
    (folder.root / "steps.json").write_text(json.dumps(record))
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert [s["met"] for s in found["steps"] if s.get("refined")] == [None, False]
    assert (found["capacity_rps"], found["knee_rps"], found["refined"]["recovered"]) == (300, 400, None)
    assert found["refined"]["note"] == ("300 req/s, met on the coarse climb, missed on the second, with no step below "
                                        "it judged: the coarse steps' capacity stands")
    # the step below, met before, now missed: it had not recovered from the overload, so nothing finer is claimed
    folder = _refined_folder(tmp_path / "sick", 300, 400, [*_warm(40, 200), (2000, 900, 0.3, 5000)])
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["knee_rps"]) == (300, 400) and not found["refined"]["recovered"]
    assert "had not recovered from the coarse steps' overload: at 200 req/s" in found["refined"]["note"]
    assert found["steps"][-1]["refined"] and found["steps"][-1]["met"] is False
    # finer steps recorded before the second climb began below: their recheck is the rate met
    folder = _refined_folder(tmp_path / "older", 300, 400, [*_warm(40, 200), (3000, 900, 0.3, 5000)])
    record = json.loads((folder.root / "steps.json").read_text())
    record["profile"].update(lead_rps=0, warmup_rps=75)
    del record["profile"]["lead_rps"]
    (folder.root / "steps.json").write_text(json.dumps(record))
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["refined"]["recheck_rps"], found["refined"]["recovered"]) == (300, 300, False)
    # finer steps that began above the rate met (no recheck) are not one: their first miss is the knee
    folder = _refined_folder(tmp_path / "norecheck", 300, 400, [(3250, 40, 0, 200), (3500, 400, 0, 2500)])
    record = json.loads((folder.root / "steps.json").read_text())
    record["profile"].update(start_rps=325, warmup_s=0, warmup_rps=0, lead_rps=0)
    (folder.root / "steps.json").write_text(json.dumps(record))
    found = capacity.with_refined(coarse, folder, T0_MS / 1000)
    assert (found["capacity_rps"], found["knee_rps"], found["refined"]["recovered"]) == (325, 350, None)
    assert "note" not in found["refined"]
    # none ran: the coarse figures
    assert capacity.with_refined(coarse, JMeterFolder(tmp_path / "none"), T0_MS / 1000) == coarse
