"""A plan of the user's own (lab/load/userplan.py): read, mapped to the machines, refused with its fault
named, and its run copy; then the copy run by the real JMeter against two loopback mocks."""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))
from lab import load, options  # noqa: E402
from lab.errors import LabError  # noqa: E402
from lab.load import plancopy, planload, userplan  # noqa: E402
from lab.load.plancopy import Target  # noqa: E402
from lab.load.userplan import PlanError  # noqa: E402

ELSEWHERE = REPO / "tests" / "fixtures" / "plans" / "from-elsewhere.jmx"
HOSTS = ("checkout.shop.example.com", "search.shop.example.com")
MAP = f"{HOSTS[0]}=default,{HOSTS[1]}=tuned"


def variant(tmp_path: Path, name: str, *replacements: tuple[str, str]) -> Path:
    """The fixture plan with some of its text replaced, as another author might have written it."""
    text = ELSEWHERE.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.fast
def test_a_plan_is_read_as_jmeter_would_resolve_it_without_running_it() -> None:
    reading = userplan.read(ELSEWHERE)
    assert [(g.name, g.users, g.ramp_s, g.duration_s, g.forever) for g in reading.groups] == [
        ("Checkout", 3, 2, None, True), ("Search", 3, 2, None, True)]
    # the second host through a variable whose value is a property's default; the port from HTTP Request Defaults
    assert [(s.name, s.group, s.host, s.port, s.path, s.keep_alive, s.response_timeout_ms)
            for s in reading.samplers] == [("GET checkout", "Checkout", HOSTS[0], 8080, "/data", False, 10000),
                                           ("GET search", "Search", HOSTS[1], 8080, "/data", False, 10000)]
    assert reading.hosts == HOSTS
    assert reading.not_analysed == ("Debug Sampler (DebugSampler)",)
    assert reading.writes == ("/home/shop-author/jmeter/results/all.jtl",)


@pytest.mark.fast
def test_resolution_follows_variables_and_property_defaults_and_leaves_the_unknown() -> None:
    variables = {"a": "${b}", "b": "x.example"}
    assert userplan.resolve("${a}", variables) == "x.example"
    assert userplan.resolve("${__P(host,${b})}", variables) == "x.example"
    assert userplan.resolve("${__property(host,,y.example)}", {}) == "y.example"
    assert userplan.resolve("${__P(host)}", {}) == "${__P(host)}"
    assert userplan.resolve("${nobody}:${b}", variables) == "${nobody}:x.example"


@pytest.mark.fast
def test_properties_given_to_the_plan_are_read_as_jmeter_would_and_passed_to_it(tmp_path: Path) -> None:
    unnamed = variant(tmp_path, "unnamed.jmx", ("${__P(search.host,search.shop.example.com)}", "${__P(search.host)}"))
    properties = {"users": "7", "search.host": "search.internal"}
    reading = userplan.read(unnamed, properties)
    assert [g.users for g in reading.groups] == [7, 7] and reading.hosts == (HOSTS[0], "search.internal")
    chosen = userplan.mapping(reading, f"{HOSTS[0]}=default,search.internal=tuned")
    profile = planload.profile(reading, chosen, 30, properties)
    # JMeter gets them as -J: the plan's own ${__P(...)} then read what the lab read
    assert profile.users == 7 and profile.properties() == properties
    args = _args("--plan", str(unnamed), "--map", f"{HOSTS[0]}=default,search.internal=tuned", "--duration", "30",
                 "--property", "users=7", "--property", "search.host=search.internal")
    assert options.experiment(args).profile == profile


@pytest.mark.fast
def test_hosts_map_as_typed_or_as_the_plans_names_say(tmp_path: Path) -> None:
    reading = userplan.read(ELSEWHERE)
    assert userplan.mapping(reading, MAP) == {HOSTS[0]: "default", HOSTS[1]: "tuned"}
    assert userplan.mapping(reading, MAP.upper().replace("DEFAULT", "default").replace("TUNED", "tuned")) == {
        HOSTS[0]: "default", HOSTS[1]: "tuned"}               # host names as DNS reads them: in any case
    # thread groups named after the machines map their hosts themselves
    named = userplan.read(variant(tmp_path, "named.jmx", ('testname="Checkout"', 'testname="default users"'),
                                  ('testname="Search"', 'testname="Tuned"')))
    assert userplan.mapping(named, None) == {HOSTS[0]: "default", HOSTS[1]: "tuned"}
    # names that do not decide: the user is told what to type
    with pytest.raises(PlanError, match=re.escape(f"GET checkout would hit {HOSTS[0]}") + ".*" + re.escape(
            f"--map {MAP}")):
        userplan.mapping(reading, None)
    both = userplan.read(variant(tmp_path, "both.jmx", ('testname="Checkout"', 'testname="default"'),
                                 ('testname="Search"', 'testname="default 2"')))
    with pytest.raises(PlanError, match="would hit"):
        userplan.mapping(both, None)


@pytest.mark.fast
@pytest.mark.parametrize(("typed", "fault"), [
    (f"{HOSTS[0]}=default", f"GET search would hit {HOSTS[1]}, which --map {HOSTS[0]}=default does not map"),
    (f"{HOSTS[0]}=default,{HOSTS[1]}=fast", "'fast' is not a machine: the machines are default, tuned"),
    (f"{HOSTS[0]}=default,{HOSTS[1]}=tuned,api.example.com=tuned", "no HTTP sampler of .* goes to 'api.example.com'"),
    (f"{HOSTS[0]}=default,{HOSTS[1]}", f"'{HOSTS[1]}' is not HOST=MACHINE"),
    (f"{HOSTS[0]}=tuned,{HOSTS[1]}=tuned", "no host of the plan goes to the default machine"),
])
def test_a_map_that_cannot_be_is_refused_naming_what_was_typed(typed: str, fault: str) -> None:
    with pytest.raises(PlanError, match=fault):
        userplan.mapping(userplan.read(ELSEWHERE), typed)


@pytest.mark.fast
def test_a_file_that_is_no_plan_or_has_no_http_sampler_is_refused(tmp_path: Path) -> None:
    for name, text in (("notes.jmx", "users: 150\n"), ("other.jmx", "<?xml version='1.0'?><testsuite/>")):
        (tmp_path / name).write_text(text)
        with pytest.raises(PlanError, match=f"--plan {tmp_path / name}: not a JMeter plan"):
            userplan.read(tmp_path / name)
    with pytest.raises(PlanError, match="no such file"):
        userplan.read(tmp_path / "missing.jmx")
    debug_only = variant(tmp_path, "debug.jmx", ("<HTTPSamplerProxy ", "<HTTPSamplerProxy enabled=\"false\" "))
    with pytest.raises(PlanError, match=r"no HTTP sampler .*Debug Sampler \(DebugSampler\)"):
        userplan.read(debug_only)
    unnamed = variant(tmp_path, "unnamed.jmx", ("${__P(search.host,search.shop.example.com)}", "${__P(search.host)}"))
    with pytest.raises(PlanError, match="'GET search' in thread group 'Search' goes to '\\${__P\\(search.host\\)}'"):
        userplan.read(unnamed)


@pytest.mark.fast
def test_a_plan_that_never_ends_needs_a_duration_and_its_load_is_read_from_it() -> None:
    reading = userplan.read(ELSEWHERE)
    chosen = userplan.mapping(reading, MAP)
    with pytest.raises(PlanError, match="'Checkout' has no scheduler duration .* give --duration"):
        planload.profile(reading, chosen, None)
    with pytest.raises(PlanError, match="ramp-up ends at 2 s, and the run lasts 2 s"):
        planload.profile(reading, chosen, 2)
    profile = planload.profile(reading, chosen, 30)
    assert (profile.users, profile.ramp_s, profile.duration_s, profile.keep_alive, profile.response_timeout_ms) == (
        3, 2, 30, False, 10000)
    assert profile.properties() == {} and profile.plan_map == chosen
    # said before it starts: each group's load and bound, each sampler and its machine, and what is not read
    shown = "\n".join(planload.shown(profile))
    assert "  Checkout: 3 users, ramp 2 s, loops forever; stopped at 30 s at the latest" in shown
    assert f"    GET search: http://{HOSTS[1]}:8080/data -> tuned" in shown
    assert "Debug Sampler (DebugSampler)" in shown and "not to: /home/shop-author/jmeter/results/all.jtl" in shown


def _args(*typed: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(parents=[options.load_options(defaults=False)])
    args = parser.parse_args(list(typed))
    args.command = "run"
    return args


@pytest.mark.fast
def test_run_plan_options_are_checked_before_anything_starts() -> None:
    chosen = options.experiment(_args("--plan", str(ELSEWHERE), "--map", MAP, "--duration", "40", "--repeat", "2"))
    assert isinstance(chosen.profile, planload.OwnPlan) and chosen.profile.duration_s == 40 and chosen.repeat == 2
    assert not chosen.a_a and options.experiment(_args("--plan", str(ELSEWHERE), "--map", MAP, "--duration", "40",
                                                       "--aa")).a_a
    for typed, fault in ((("--plan", str(ELSEWHERE), "--map", MAP, "--users", "5"), "--users with --plan"),
                         (("--plan", str(ELSEWHERE), "--map", MAP, "--quick"), "--quick with --plan"),
                         (("--plan", str(ELSEWHERE), "--map", MAP, "--load-from", "loadgen"), "--load-from loadgen"),
                         (("--plan", str(ELSEWHERE), "--map", MAP, "--duration", "30", "--limits"),
                          "--limits with --plan"),
                         (("--map", MAP), f"--map {MAP}: is for a plan of yours"),
                         (("--property", "users=9"), "--property users=9: is for a plan of yours"),
                         (("--plan", str(ELSEWHERE), "--map", MAP, "--duration", "30", "--property", "users"),
                          "--property users: use NAME=VALUE"),
                         (("--plan", str(ELSEWHERE), "--map", MAP), "give --duration")):
        with pytest.raises(LabError, match=re.escape(fault)):
            options.experiment(_args(*typed))


@pytest.mark.fast
def test_the_run_copy_sends_each_sampler_to_its_machine_and_keeps_every_file_in_the_run(tmp_path: Path) -> None:
    reading = userplan.read(ELSEWHERE)
    original = ELSEWHERE.read_bytes()
    chosen = userplan.mapping(reading, MAP)
    targets = {"default": Target("http", "10.213.1.2", 80), "tuned": Target("https", "10.213.2.2", 8443)}
    copy = plancopy.write_copy(reading, chosen, targets, 40, tmp_path / "both.jmx", tmp_path / "files")
    assert ELSEWHERE.read_bytes() == original
    sent = userplan.read(copy)
    assert [(s.name, s.protocol, s.host, s.port, s.path, s.keep_alive) for s in sent.samplers] == [
        ("GET checkout", "http", "10.213.1.2", 80, "/data", False), ("GET search", "https", "10.213.2.2", 8443,
                                                                     "/data", False)]
    # bounded: every group by the run's duration; the author's listener writes in the run folder, and each
    # sampler's samples go to its machine's results
    assert [(g.duration_s, g.forever) for g in sent.groups] == [(40, False), (40, False)]
    assert sent.writes == ("${__P(default.results)}", "${__P(tuned.results)}", str(tmp_path / "files" / "1-all.jtl"))
    # one machine at a time (the sequential schedule): the other's sampler and group disabled
    alone = userplan.read(plancopy.write_copy(reading, chosen, {"tuned": targets["tuned"]}, 40,
                                              tmp_path / "tuned.jmx", tmp_path / "files"))
    assert [g.name for g in alone.groups] == ["Search"] and [s.host for s in alone.samplers] == ["10.213.2.2"]
    assert alone.writes == ("${__P(tuned.results)}", str(tmp_path / "files" / "1-all.jtl"))


def test_jmeter_runs_the_copy_and_each_machines_samples_are_its_own(processes, tmp_path: Path) -> None:
    from test_load import read_results, start_mock  # the same loopback mocks as the lab's own plan's tests
    load.prepare()
    ports = {"default": start_mock(processes, tmp_path / "mock-default"),
             "tuned": start_mock(processes, tmp_path / "mock-tuned")}
    reading = userplan.read(ELSEWHERE)
    profile = planload.profile(reading, userplan.mapping(reading, MAP), 12)
    out = tmp_path / "run"
    for schedule in ("parallel", "sequential"):
        result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()}, profile, out / schedule,
                          schedule=schedule, path="/svc/camel/mock")
        assert not result.interrupted and result.problems == [], result.problems
        for machine, port in ports.items():
            header, rows = read_results(result.results[machine])
            assert tuple(header) == load.CSV_COLUMNS and len(rows) > 20
            label = "GET checkout" if machine == "default" else "GET search"
            assert {(row["label"], row["URL"], row["success"]) for row in rows} == {
                (label, f"http://127.0.0.1:{port}/data", "true")}
            assert max(int(row["grpThreads"]) for row in rows) == 3
            stamps = [int(row["timeStamp"]) for row in rows]
            assert (max(stamps) - min(stamps)) / 1000 <= 13
            assert result.dashboards[machine].is_file()
        # the author's listener wrote in the run folder, both machines' samples and the debug sampler's
        written = (out / schedule / "plan-files" / "1-all.jtl").read_text()
        assert "GET checkout" in written and "GET search" in written and "Debug Sampler" in written
        assert (out / schedule / "own-plan.jmx").read_bytes() == ELSEWHERE.read_bytes()
    assert not Path("/home/shop-author").exists()


@pytest.mark.fast
def test_a_plan_edited_after_it_was_checked_sends_nothing_to_a_host_no_machine_is(tmp_path: Path) -> None:
    import importlib

    from lab.load.targets import _Target
    from lab.runfolder import JMeterFolder
    load_run = importlib.import_module("lab.load.run")          # the module, not lab.load's run()
    plan = variant(tmp_path, "shop.jmx", ("checkout.shop.example.com", "checkout.shop.example.com"))
    reading = userplan.read(plan)
    profile = planload.profile(reading, userplan.mapping(reading, MAP), 30)
    folder = JMeterFolder(tmp_path / "jmeter")
    folder.root.mkdir()
    phase = [_Target("default", "http", "10.213.1.2", 80, "/"), _Target("tuned", "http", "10.213.2.2", 80, "/")]
    copy = load_run._plan(profile, folder, phase)
    assert copy == folder.own_plan_run(["default", "tuned"]) and folder.own_plan.read_bytes() == plan.read_bytes()
    plan.write_text(plan.read_text().replace("checkout.shop.example.com", "api.example.net"))
    with pytest.raises(LabError, match="changed since the run began: its samplers now go to api.example.net"):
        load_run._plan(profile, folder, phase)


# capacity --plan: a plan with JMeter's open model ----------------------------------------------------------

OPEN = REPO / "tests" / "fixtures" / "plans" / "open-model.jmx"
STEPS = load.StepLoad(start_rps=10, step_rps=10, step_s=3, max_rps=20, warmup_s=0, connect_timeout_ms=1000,
                      response_timeout_ms=3000)


def _capacity_args(*typed: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(parents=[options.capacity_options()])
    args = parser.parse_args(list(typed))
    args.command = "capacity"
    return args


@pytest.mark.fast
def test_an_open_model_plan_is_stepped_by_the_capacity_run_one_group_per_machine() -> None:
    reading = userplan.read(OPEN)
    assert [(g.name, g.open) for g in reading.groups] == [("Checkout arrivals", True), ("Search arrivals", True)]
    chosen = options.experiment(_capacity_args("--plan", str(OPEN), "--map", MAP, "--quick"))
    profile = chosen.profile
    assert isinstance(profile, planload.OwnOpenPlan) and isinstance(profile, load.StepLoad)
    # the lab's steps (--quick), the plan's groups each a machine's
    assert profile.rates() == load.QUICK_STEPS.rates() and profile.plan_map == dict(zip(HOSTS, ("default", "tuned")))
    assert profile.plan_groups == {"Checkout arrivals": "default", "Search arrivals": "tuned"}
    # the analysis reads its steps back from run.json's profile, what maps the plan beside them
    from lab.analysis import capacity
    assert capacity.step_load({"model": "open", **dataclasses.asdict(profile)}) == load.QUICK_STEPS
    said = "\n".join(planload.shown(profile))
    assert "Checkout arrivals: an open model at the rates the lab steps for default, instead of its schedule " \
           "'rate(20/s) random_arrivals(10 min) rate(20/s)'" in said
    assert "GET search: http://search.shop.example.com:8080/data -> tuned" in said
    # run --plan runs closed groups: an open one is refused there, pointing to capacity
    with pytest.raises(LabError, match=re.escape("thread group 'Checkout arrivals' is an Open Model Thread Group")):
        options.experiment(_args("--plan", str(OPEN), "--map", MAP, "--duration", "40"))


@pytest.mark.fast
@pytest.mark.parametrize("plan, typed, fault", [
    (ELSEWHERE, (), "thread group 'Checkout' is a closed model (3 users): ./start.sh capacity steps arrival rates"),
    (OPEN, ("--map", f"{HOSTS[0]}=default,{HOSTS[1]}=default"), "no host of the plan goes to the tuned machine"),
    (OPEN, ("--scenario", "capacity"), "--scenario with --plan"),
    (OPEN, ("--load-from", "loadgen"), "--load-from loadgen with --plan"),
])
def test_a_capacity_plan_the_lab_cannot_step_is_refused_naming_it(plan: Path, typed: tuple[str, ...],
                                                                   fault: str) -> None:
    map_given = ("--map", MAP) if "--map" not in typed else ()
    with pytest.raises(LabError, match=re.escape(fault)):
        options.experiment(_capacity_args("--plan", str(plan), *map_given, *typed))


@pytest.mark.fast
def test_a_group_for_both_machines_or_two_groups_for_one_are_refused(tmp_path: Path) -> None:
    text = OPEN.read_text()
    end_of_search = "</hashTree>\n      <ThreadGroup"
    assert text.count(end_of_search) == 1
    shared = tmp_path / "shared.jmx"
    shared.write_text(text.replace(end_of_search, _sampler("GET checkout too", HOSTS[0]) + "<hashTree/>"
                                   + end_of_search))
    reading = userplan.read(shared)
    with pytest.raises(PlanError, match=re.escape("thread group 'Search arrivals' sends to default and tuned")):
        planload.open_profile(reading, userplan.mapping(reading, MAP), STEPS)
    twice = tmp_path / "twice.jmx"
    twice.write_text(text.replace("${search_host}", HOSTS[0]))
    reading = userplan.read(twice)
    with pytest.raises(PlanError, match="'Checkout arrivals' and 'Search arrivals' both load the default machine"):
        planload.open_profile(reading, {HOSTS[0]: "default"}, STEPS)


def _sampler(name: str, host: str) -> str:
    return (f'<HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="{name}">'
            f'<stringProp name="HTTPSampler.domain">{host}</stringProp>'
            '<stringProp name="HTTPSampler.path">/data</stringProp></HTTPSamplerProxy>')


@pytest.mark.fast
def test_the_capacity_copy_steps_each_group_ends_it_when_told_and_caps_its_timeouts(tmp_path: Path) -> None:
    from lab.load import openplan
    reading = userplan.read(OPEN)
    profile = planload.open_profile(reading, userplan.mapping(reading, MAP), STEPS)
    targets = {"default": Target("http", "10.213.1.2", 80), "tuned": Target("http", "10.213.2.2", 80)}
    stepped = plancopy.Stepped(profile.plan_groups, profile.connect_timeout_ms, profile.response_timeout_ms)
    copy = plancopy.write_copy(reading, profile.plan_map, targets, profile.duration_s, tmp_path / "both.jmx",
                               tmp_path / "files", stepped)
    sent = userplan.read(copy)
    # each group at its machine's steps, not its own schedule; the watch that ends a machine's arrivals beside them
    assert [(g.name, g.schedule) for g in sent.groups] == [
        ("Checkout arrivals", openplan.schedule_of("default")), ("Search arrivals", openplan.schedule_of("tuned")),
        (openplan.WATCH, None)]
    # timeouts: the Defaults' 60 s response is capped to the run's 3 s, the sampler's own 2 s kept
    assert [(s.name, s.host, s.response_timeout_ms) for s in sent.samplers] == [
        ("GET checkout", "10.213.1.2", 3000), ("GET search", "10.213.2.2", 2000)]
    root = ElementTree.parse(copy).getroot()
    assert [userplan.prop(sampler, "HTTPSampler.connect_timeout") for sampler in root.iter("HTTPSamplerProxy")] == [
        "1000", "1000", ""]                 # the Defaults' 10 s capped; its author's disabled group's sampler as it was
    # everything a group held is under the If Controller on its machine's flag: the header manager keeps its scope
    for controller, machine in zip(root.iter("IfController"), ("default", "tuned"), strict=True):
        assert userplan.prop(controller, "IfController.condition") == openplan.LOAD_ON.format(machine=machine)
    inner = list(root.iter("IfController"))[0]
    holds = [child.tag for child in _following(root, inner)]
    assert holds == ["HeaderManager", "hashTree", "HTTPSamplerProxy", "hashTree"]
    assert next(root.iter("ThreadGroup")).get("enabled") == "false"     # its author's disabled closed group
    # one machine at a time: the other's group disabled, the watch for this one only
    alone = plancopy.write_copy(reading, profile.plan_map, {"tuned": targets["tuned"]}, profile.duration_s,
                                tmp_path / "tuned.jmx", tmp_path / "files", stepped)
    assert [g.name for g in userplan.read(alone).groups] == ["Search arrivals", openplan.WATCH]
    assert "for (machine in ['tuned'])" in alone.read_text()


def _following(root: ElementTree.Element, element: ElementTree.Element) -> list[ElementTree.Element]:
    """The children of the hashTree that follows element."""
    parent = next(p for p in root.iter() if element in list(p))
    siblings = list(parent)
    return list(siblings[siblings.index(element) + 1])


def test_jmeter_runs_the_stepped_copy_at_the_labs_rates_and_ends_a_machines_arrivals_past_its_knee(
        processes, tmp_path: Path) -> None:
    from test_load import read_results, start_mock
    load.prepare()
    # tuned answers in 1.5 s, over the SLO's 1 s p99: past its knee after two steps (judged once a step's requests had
    # their timeouts' time to end), its arrivals end while default's go on to the last step
    ports = {"default": start_mock(processes, tmp_path / "mock-default"),
             "tuned": start_mock(processes, tmp_path / "mock-tuned", latency="fixed:1500")}
    reading = userplan.read(OPEN)
    steps = replace(STEPS, max_rps=100)
    profile = planload.open_profile(reading, userplan.mapping(reading, MAP), steps)
    result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()}, profile, tmp_path / "run",
                      schedule="parallel", path="/svc/camel/mock", progress_interval_s=1)
    assert not result.interrupted and result.problems == [], result.problems
    rows = {machine: read_results(result.results[machine])[1] for machine in ports}
    for machine, port in ports.items():
        label = "GET checkout" if machine == "default" else "GET search"
        assert {(row["label"], row["URL"]) for row in rows[machine]} == {(label, f"http://127.0.0.1:{port}/data")}
    # the lab's steps: 10, 20, ... 100 req/s for 3 s each (JMeter places exactly rate x length arrivals in each); the
    # plan's own schedules would have sent default 20 a second for 10 minutes, and tuned nothing for a minute
    assert len(rows["default"]) == sum(rate * 3 for rate in steps.rates()) == 1650
    assert {row["success"] for row in rows["default"]} == {"true"}
    # tuned's arrivals ended on the lab's word (its load_ended file, the watch, the If Controller): its first two
    # steps' 90 and a few seconds more, not the 1,650 of all ten
    assert "tuned" in result.ended_early and 90 <= len(rows["tuned"]) < 800, len(rows["tuned"])
    assert "arrivals end for tuned" in result.log.read_text()
    written = (tmp_path / "run" / "plan-files" / "1-arrivals.jtl").read_text()
    assert "GET checkout" in written and "GET search" in written
    assert not Path("/home/shop-author").exists()
