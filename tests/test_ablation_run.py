"""./start.sh ablate around the measurements: options refused before anything starts, the plan and its
estimate, configurations measured once each into their own folders, an interrupted ablation resumed without
measuring again what it finished, the tuned machine's own knobs back however it ends, and the report.
The playbook and the load are stood in for here (the end-to-end test runs a real one on the local backend)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_experiment import FakeBackend

from lab import cli, experiment, placement, provision, runfolder
from lab.ablation import analysis, command, pairs, run
from lab.ablation import folder as ablation_folder
from lab.ablation import groups as knob_groups
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.provision import PlaybookResult
from lab.runfolder import RunFolder
from published import violations

pytestmark = pytest.mark.fast

# Made-up gains (of the default configuration's throughput) per group: gc_heap most, async_logging some,
# httpd_mpm nothing.
GAINS = {"gc_heap": 0.30, "async_logging": 0.10, "httpd_mpm": 0.0}
TRIAL_NOISE = (-0.01, 0.0, 0.01)
DEFAULT_RPS = 500.0


@pytest.fixture()
def lab(monkeypatch, tmp_path) -> SimpleNamespace:
    """Each machine a playbook run provisioned, with the knobs file it was given (playbooks), each run's hosts
    (playbook_runs) and measurements (their folders) recorded; interrupt_at: the measurement number that is cut
    short by Ctrl-C."""
    seen = SimpleNamespace(playbooks=[], playbook_runs=[], measured=[], interrupt_at=None, unsettled=set(),
                           at_once=False, schedule=None, bias={"default": 1.0, "tuned": 1.0})

    def run_playbook(inventory, log_dir, limit=None, given=None, knobs_only=False):
        seen.playbook_runs.append(limit)
        seen.playbooks.extend((machine, (given or {}).get(machine)) for machine in limit.split(","))
        return PlaybookResult(0, {machine: 1 for machine in limit.split(",")}, {}, tmp_path / "ansible.log")

    def measure(backend, profile, repeat, folder: RunFolder, mode, machines, unusable, extra, schedule=None):
        if seen.at_once:    # both machines loaded at once, each with its configuration
            # the placement's (at once where each machine has CPUs of its own), else asked for
            assert machines == ("default", "tuned") and schedule == seen.schedule, (machines, schedule)
        else:               # the tuned machine alone, at the placement's schedule
            assert machines == ("tuned",) and schedule is None and mode["configuration"] == \
                mode["configurations"]["tuned"]
        assert extra == repeat                                  # unsettled trials replaced
        seen.measured.append(folder.root.name)
        folder.root.mkdir(parents=True)
        if len(seen.measured) == seen.interrupt_at:
            RunFolder.write_json(folder.run_json, {"ended": {"how": "interrupted", "during": "trial 1"}})
            return {"how": "interrupted", "during": "trial 1: the load"}
        figures, settled = {}, True
        for machine in machines:
            config = set(mode["configurations"][machine])
            # what the machine was given for this configuration is what makes its figure here
            knobs = seen.last_knobs(machine) or {}
            assert (knobs.get("camel_app_logback_async") is True) == ("async_logging" in config), (machine, config)
            given = seen.last_extra(machine)      # none: the default machine carries its own knobs, the default ones
            assert mode["knobs_files"][machine] == (str(given) if given else None) and (given or not config)
            figures[machine] = (config, seen.bias[machine] * (1.0 + sum(gain for group, gain in GAINS.items()
                                                                          if group in config)))
            settled = settled and frozenset(config) not in seen.unsettled
        for number, noise in enumerate(TRIAL_NOISE[:repeat], start=1):
            RunFolder.write_json(folder.trial(number).summary_json, {"machines": {machine: {
                "memory": {"peak_bytes": 300e6 + 100e6 * ("gc_heap" in config)}, "cpu": {"mean_cores": 0.5},
                "load": {"throughput_rps": DEFAULT_RPS * (base + noise) + 50.0,     # 50 req/s failed
                         "good_throughput_rps": DEFAULT_RPS * (base + noise), "window": {"settled": settled},
                         "all": {"samples": 30000}},
                # an open model's figure: the highest step that met the SLO (steps of 50 req/s here)
                "capacity": {"found": settled, "capacity_rps": 50 * round(DEFAULT_RPS * (base + noise) / 50),
                             "generator_bound_rps": None, "reached_max": False}}
                for machine, (config, base) in figures.items()}})
            assert (unusable(folder.trial(number)) is None) == settled
        host_bound = any(config == {"httpd_mpm"} for config, _ in figures.values())
        verdict = {"verdict": "host-bound", "valid": False} if host_bound else {"verdict": "valid", "valid": True}
        RunFolder.write_json(folder.summary_json, {"verdict": verdict})
        # as experiment.measure records them: a trial without a figure on a machine loaded is not counted
        RunFolder.write_json(folder.run_json, {"ended": {"how": "completed"}, "trials": [
            {"number": number, "counted": settled} for number in range(1, min(repeat, len(TRIAL_NOISE)) + 1)]})
        folder.write_text(folder.report_html, "<html></html>")
        return {"how": "completed"}

    def last_extra(machine: str = "tuned") -> Path | None:
        # the last provisioning of the machine (None: with its own knobs)
        return next((e for limit, e in reversed(seen.playbooks) if limit == machine), None)

    def last_knobs(machine: str = "tuned") -> dict | None:
        import yaml
        extra = last_extra(machine)
        return yaml.safe_load(Path(extra).read_text()) if extra else None
    seen.last_knobs, seen.last_extra = last_knobs, last_extra
    monkeypatch.setattr(provision, "run_playbook", run_playbook)
    monkeypatch.setattr(experiment, "measure", measure)
    monkeypatch.setattr(experiment, "check_machines", lambda backend: {})
    monkeypatch.setattr(runfolder, "RUNS", tmp_path / "runs")
    return seen


def _prepared(*argv: str) -> command.Prepared:
    return command.prepare(cli._parser().parse_args(["ablate", *argv]))


@pytest.mark.parametrize("argv, message", [
    (["--groups", "apr"], "--groups apr: apr needs ajp: add it"),
    (["--groups", "gc,heap"], "--groups gc,heap: gc, heap: the groups are httpd_mpm, timeouts, ajp, apr"),
    (["--repeat", "1"], "--repeat 1: an ablation needs 2 trials or more per configuration"),
    (["--aa"], "--aa does not apply to ./start.sh ablate"),
    (["--resume", "nothing-here"], "--resume nothing-here: no ablation there"),
    (["--resume", "x", "--users", "5"], "--resume continues an ablation as it was planned: --users cannot change it"),
    (["--ramp", "10", "--duration", "30"], "--duration 30 with --ramp 10: 20 s after the ramp-up, and a trial's figure "
                                           "needs a steady state of 30 s at least"),
])
def test_a_bad_ablation_is_refused_naming_what_was_typed(argv, message, tmp_path, capsys):
    host = HostLab(owner_file=tmp_path / "owner.json", busy_file=tmp_path / "busy.lock", checkout=tmp_path,
                   legacy_file=tmp_path / "legacy.json")
    assert cli.main(["ablate", "--backend", "local", *argv], host=host) == 1
    err = capsys.readouterr().err
    assert f"start.sh: {message}" in err and "==>" not in err, err


def test_the_plan_says_how_many_configurations_and_how_long_at_most():
    prepared = _prepared("--groups", "gc_heap,async_logging", "--users", "10", "--ramp", "5", "--duration", "40")
    groups = {name: prepared.every[name] for name in prepared.plan.groups}
    # default, both alone, both together: the leave-one-out set is made of the same configurations
    assert run.configurations_at_most(groups) == 4
    lines = run.describe(prepared.plan, groups)
    assert lines[0] == "Ablation of 2 knob groups: gc_heap, async_logging"
    assert "at most 4 configurations" in lines[1] and "x 3 trials x 10 users each, ramp 5 s, 40 s" in lines[1]
    assert lines[1].endswith("each on the tuned machine alone, measured as its steady-state throughput of requests "
                             "answered without error (the default configuration is the baseline)")
    # 4 x (35 s provisioning + 3 x (40 s + 10 s)): the default machine is not loaded again
    assert run.estimate_s(prepared.plan, 4) == 740 and "about 0.2 h at most" in lines[2]
    # two at once: 2 pairs, each with both machines provisioned for each half, and the pair's 3 trials loading both
    assert run.estimate_s(replace(prepared.plan, schedule="parallel"), 4) == 2 * (2 * run.PAIR_PROVISION_S + 3 * (40 + 10))
    assert run.configurations_at_most(knob_groups.load()) == 1 + 28 + 7
    # apr needs ajp: no ablation of the two measures apr alone
    every = knob_groups.load()
    assert run.configurations_at_most({name: every[name] for name in ("ajp", "apr")}) == 3


def test_each_configuration_is_measured_once_and_an_interrupted_ablation_resumes_where_it_stopped(host, lab, capsys):
    groups_typed = "httpd_mpm,gc_heap,async_logging"
    lab.interrupt_at = 3
    prepared = _prepared("--groups", groups_typed, "--quick")
    assert command.run(FakeBackend(), host, prepared) == 130
    root = next(runfolder.RUNS.glob("2*"))
    assert "./start.sh ablate --resume " + root.name in capsys.readouterr().err
    assert lab.playbooks[-1] == ("tuned", None) and not host.aa_pending()   # tuned got its own knobs back
    first = list(lab.measured)
    assert len(first) == 3 and all((root / "configs" / name / "run.json").is_file() for name in first[:2])

    # resumed: the two finished configurations are not measured again; the cut-short one is kept aside
    lab.measured.clear()
    lab.interrupt_at = None
    resumed = _prepared("--resume", root.name)
    # as planned, with the schedule the placement chose (this host's machines share CPUs)
    assert resumed.plan == replace(prepared.plan, schedule="sequential")
    assert command.run(FakeBackend(), host, resumed) == 0
    assert not set(first[:2]) & set(lab.measured) and first[2] in lab.measured
    assert [p.name.rsplit("-", 2)[0] for p in (root / "interrupted").iterdir()] == [first[2]]
    measured_once = first[:2] + lab.measured
    assert len(measured_once) == len(set(measured_once))

    assert violations([root / "ablation.json"]) == []            # the published contract (docs/schema/)
    result = json.loads((root / "ablation.json").read_text())["analysis"]
    assert [r["group"] for r in result["path"]] == ["gc_heap", "async_logging", "httpd_mpm"]
    assert result["default"] == pytest.approx(DEFAULT_RPS) and result["tuned"] == pytest.approx(1.4 * DEFAULT_RPS)
    assert result["unit"] == "req/s" and result["path"][0]["gain"] == pytest.approx(0.3 * DEFAULT_RPS)
    assert result["path"][0]["share"] == pytest.approx(0.75, abs=0.02)
    assert not result["path"][2]["measurable"]
    assert result["sentence"].startswith("gc_heap and async_logging explain 100% of the gain")
    # the cost of a configuration: the tuned machine's peak memory, CPU per request
    costs = result["costs"]["gc_heap"]
    assert costs["peak_memory_bytes"] == 400e6 and costs["cpu_ms_per_request"] == pytest.approx(0.5 / 700 * 1000,
                                                                                             abs=1e-3)
    page = (root / "report" / "index.html").read_text()
    assert "gc_heap and async_logging explain 100% of the gain" in page and "data:image/png;base64," in page
    assert result["interval_note"].startswith("3 trials: the interval is narrower than a true 95% one")
    assert "Every interval here: 3 trials: the interval is narrower" in page
    assert 'href="../configs/gc_heap/report/index.html"' in page and 'href="../configs/default/report/index.html"' in page
    assert result["costs"]["async_logging,gc_heap"]["peak_memory_bytes"] == 400e6     # a key of two groups

    # resumed once finished: analysed again from the trials kept (here, one edited by hand), nothing provisioned,
    # nothing measured
    trial = RunFolder(root / "configs" / "default" / "trials" / "1")
    kept = json.loads(trial.summary_json.read_text())
    kept["machines"]["tuned"]["load"]["good_throughput_rps"] += 30.0
    RunFolder.write_json(trial.summary_json, kept)
    lab.playbooks.clear()
    lab.measured.clear()
    assert command.run(FakeBackend(), host, _prepared("--resume", root.name)) == 0
    assert lab.playbooks == [] and lab.measured == [] and not host.aa_pending()
    assert "is a finished ablation: analysed again from its trials, its report written again" in capsys.readouterr().err
    again = json.loads((root / "ablation.json").read_text())["analysis"]
    assert again["default"] == pytest.approx(result["default"] + 10.0) and again["tuned"] == result["tuned"]
    # a configuration whose own verdict is not valid is said where the figures are shown
    assert "<strong>1 of 8 configurations not valid</strong> (httpd_mpm:" in page


def test_resume_refuses_when_a_groups_variables_changed(host, lab, tmp_path, monkeypatch):
    lab.interrupt_at = 1
    assert command.run(FakeBackend(), host, _prepared("--groups", "gc_heap", "--quick")) == 130
    root = next(runfolder.RUNS.glob("2*"))
    record = json.loads((root / "ablation.json").read_text())
    record["groups"]["gc_heap"]["variables"] = ["camel_app_java_options"]
    (root / "ablation.json").write_text(json.dumps(record))
    with pytest.raises(StepFailed, match=r"--resume .*: the knob group\(s\) gc_heap changed in knob-groups.yml"):
        _prepared("--resume", str(root))
    record["groups"]["gc_heap"]["variables"] = list(knob_groups.load()["gc_heap"].variables)
    record["knobs_sha256"] = "0" * 64
    (root / "ablation.json").write_text(json.dumps(record))
    with pytest.raises(StepFailed, match=r"host_vars/default.yml or tuned.yml changed since the ablation started"):
        _prepared("--resume", str(root))
    del record["plan"]["figure"]        # an ablation of an earlier lab: tuned ÷ default, both machines loaded
    (root / "ablation.json").write_text(json.dumps(record))
    with pytest.raises(StepFailed, match=r"measured by an earlier lab \(each figure tuned ÷ default"):
        _prepared("--resume", str(root))
    # a record that is not this lab's, or not whole: named, never a traceback
    record["plan"] = {**record["plan"], "figure": "tuned_good_rps"}
    del record["plan"]["repeat"]
    (root / "ablation.json").write_text(json.dumps(record))
    with pytest.raises(StepFailed, match=r"ablation.json: its plan is not one this lab wrote \(KeyError: 'repeat'\)"):
        _prepared("--resume", str(root))
    for text, reason in (("{not json", r"ablation: ablation.json unreadable \(Expecting"),
                         ("[]", "ablation: ablation.json is not a JSON object"), ("{}", "ablation.json holds no plan")):
        (root / "ablation.json").write_text(text)
        with pytest.raises(StepFailed, match=rf"--resume {root}: .*{reason}.*start a new ablation"):
            _prepared("--resume", str(root))


def test_a_configuration_without_two_figures_stops_the_ablation_and_is_measured_again_on_resume(host, lab, capsys):
    lab.unsettled = {frozenset({"gc_heap"})}
    with pytest.raises(StepFailed, match=r"configuration gc_heap: 0 of its trials gave the tuned machine's "
                                         r"throughput \(see .*each trial's own report says why\); a longer "
                                         r"--duration settles more surely\. What was measured is kept: \./start\.sh "
                                         r"ablate --resume \S+ continues it"):
        command.run(FakeBackend(), host, _prepared("--groups", "gc_heap", "--quick"))
    assert lab.playbooks[-1] == ("tuned", None) and not host.aa_pending()
    root = next(runfolder.RUNS.glob("2*"))
    lab.unsettled = set()
    lab.measured.clear()
    assert command.run(FakeBackend(), host, _prepared("--resume", root.name)) == 0
    # the baseline, measured first, is kept; the configuration is measured again, the unusable one kept aside
    assert lab.measured == ["gc_heap"]
    assert [p.name.rsplit("-", 2)[0] for p in (root / "interrupted").iterdir()] == ["gc_heap"]


@pytest.mark.parametrize(("load", "expected"), [
    ({"good_throughput_rps": 812.5, "all": {"samples": 48000}, "window": {"settled": True}}, (812.5, None)),
    # every request failed (the OOM killer ending the JVM over and over): the configuration broke the machine,
    # and that is its figure, not a trial to replace
    ({"good_throughput_rps": 0.0, "all": {"samples": 123512}, "window": {"settled": True}}, (0.0, None)),
    ({"good_throughput_rps": 0.0, "all": {"samples": 0}, "window": {"settled": True}},
     (None, "the tuned machine was sent no request")),
    ({"good_throughput_rps": 812.5, "all": {"samples": 48000}, "window": {"settled": False}},
     (None, "the tuned machine did not reach a steady state")),
    ({"window": {"settled": True}}, (None, "the tuned machine has no steady-state throughput")),
])
def test_a_trials_figure_is_its_good_throughput_and_zero_when_the_configuration_broke_the_machine(
        tmp_path, load, expected):
    trial = RunFolder(tmp_path / "trial")
    RunFolder.write_json(trial.summary_json, {"machines": {"tuned": {"load": load}}})
    assert ablation_folder.figure(trial) == expected


def test_an_ablation_with_an_open_model_measures_each_configurations_capacity(host, lab, capsys):
    prepared = _prepared("--groups", "gc_heap,async_logging", "--scenario", "capacity")
    assert prepared.plan.measure is ablation_folder.CAPACITY
    chosen = replace(prepared.plan, schedule="sequential")
    assert run.Plan.from_json(chosen.as_json()) == chosen           # as --resume reads it back
    groups = {name: prepared.every[name] for name in prepared.plan.groups}
    assert "measured as its capacity: the highest arrival rate that met the SLO" in run.describe(prepared.plan, groups)[1]
    assert command.run(FakeBackend(), host, prepared) == 0
    root = next(runfolder.RUNS.glob("2*"))
    record = json.loads((root / "ablation.json").read_text())
    assert record["plan"]["figure"] == "tuned_capacity_rps" and record["plan"]["profile"]["model"] == "open"
    analysis = record["analysis"]
    assert analysis["measure"]["short"] == "capacity"
    # the capacities, not the throughputs: 500 x (1 - 0.01, 1, 1 + 0.01) in steps of 50
    assert analysis["configurations"]["(default)"] == [500.0, 500.0, 500.0]
    assert analysis["configurations"]["gc_heap"] == [650.0, 650.0, 650.0]
    html = (root / "report" / "index.html").read_text()
    assert "as its capacity: the highest arrival rate that met the SLO" in html and "<th>capacity per trial" in html
    resumed = _prepared("--resume", root.name)
    assert resumed.plan == chosen


@pytest.mark.parametrize("found, expected", [
    ({"found": True, "capacity_rps": 550}, (550.0, None)),
    ({"found": True, "capacity_rps": None}, (0.0, None)),         # the SLO missed from the first step on
    ({"found": False, "generator_bound_rps": 700, "reached_max": False},
     (None, "the load generator fell behind at 700 req/s, before the tuned machine's knee")),
    ({"found": False, "generator_bound_rps": None, "reached_max": True},
     (None, "the tuned machine met the SLO up to the highest step: its capacity lies beyond it (a higher max_rps)")),
])
def test_a_trials_capacity_is_a_figure_only_when_the_knee_was_found(tmp_path, found, expected):
    trial = RunFolder(tmp_path / "trial")
    RunFolder.write_json(trial.summary_json, {"machines": {"tuned": {"capacity": found,
                                                                      "load": {"all": {"samples": 9000}}}}})
    assert ablation_folder.figure(trial, ablation_folder.CAPACITY) == expected
    RunFolder.write_json(trial.summary_json, {"machines": {"tuned": {"capacity": found, "load": {"all": {}}}}})
    assert ablation_folder.figure(trial, ablation_folder.CAPACITY) == (None, "the tuned machine was sent no request")


def test_pairs_split_each_pairs_trials_between_the_machines_and_an_odd_one_out_takes_a_later_configuration():
    none, a, b, c = frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})
    assert pairs.partners([a, b, c], ahead=[none, c, b]) == [(a, b), (c, none)]
    assert pairs.partners([a, b, c, a], ahead=[]) == [(a, b), (c, c)]       # nothing ahead: both machines carry it
    assert pairs.orientations((a, b), 3) == [({"default": a, "tuned": b}, 2), ({"default": b, "tuned": a}, 1)]
    assert pairs.orientations((a, a), 2) == [({"default": a, "tuned": a}, 1)]   # two figures a trial


def test_where_each_machine_has_its_own_cpus_two_configurations_are_measured_at_once_swapping_machines(
        host, lab, capsys, monkeypatch):
    # a 16-CPU host: the placement gives each machine CPUs of its own (FakeBackend is pinned there)
    monkeypatch.setattr(placement, "host_cpus", lambda: tuple(range(16)))
    lab.at_once, lab.bias["default"] = True, 0.98       # the default machine 2% slower than the tuned one
    lab.interrupt_at = 3
    prepared = _prepared("--groups", "httpd_mpm,gc_heap,async_logging", "--quick", "--repeat", "2")
    assert command.run(FakeBackend(), host, prepared) == 130
    err = capsys.readouterr().err
    assert "two at once, one on each machine, which swap configurations halfway through a pair's trials" in err
    root = next(runfolder.RUNS.glob("2*"))
    everything = "async_logging+gc_heap+httpd_mpm"
    # the baseline with the tuned configuration, then the machines swapped; then a forward step's first two
    # candidates, cut short. The default machine already carries the default configuration: not provisioned for it.
    assert lab.measured == [f"default--{everything}", f"{everything}--default", "httpd_mpm--gc_heap"]
    assert [limit for limit, _ in lab.playbooks[:3]] == ["tuned", "default", "tuned"]
    assert lab.playbooks[-2:] == [("default", None), ("tuned", None)] and not host.aa_pending()
    # the swapped machines provisioned together, each with its configuration, in one run; restored in one too
    assert lab.playbook_runs[:2] == ["tuned", "default,tuned"] and lab.playbook_runs[-1] == "default,tuned"
    record = json.loads((root / "ablation.json").read_text())
    assert record["plan"]["schedule"] == "parallel" and record["placement"]["dedicated"] is True
    assert record["pairs"] == [["default", everything], ["httpd_mpm", "gc_heap"]]

    lab.measured.clear()
    lab.interrupt_at = None
    assert command.run(FakeBackend(), host, _prepared("--resume", root.name)) == 0
    # the pair cut short is finished before anything else is paired; nothing is measured twice
    assert lab.measured[:2] == ["httpd_mpm--gc_heap", "gc_heap--httpd_mpm"]
    assert len(lab.measured) == len(set(lab.measured)) == 6 and f"default--{everything}" not in lab.measured
    assert [p.name.rsplit("-", 2)[0] for p in (root / "interrupted").iterdir()] == ["httpd_mpm--gc_heap"]
    ablation = ablation_folder.Ablation(root)
    result = json.loads((root / "ablation.json").read_text())["analysis"]
    for name in result["configurations"]:     # each configuration carried by each machine in one trial of two
        assert sorted(s.machine for s in ablation.sources(analysis.config_of(name))) == ["default", "tuned"], name
        assert len(result["configurations"][name]) == 2
    # the slower machine's 2% falls on every configuration alike: the path and the shares are the ones it has
    assert result["default"] == pytest.approx(DEFAULT_RPS * ((0.98 + 1.0) / 2 - 0.01))
    assert [r["group"] for r in result["path"]] == ["gc_heap", "async_logging", "httpd_mpm"]
    assert result["path"][0]["share"] == pytest.approx(0.75, abs=0.02) and not result["path"][2]["measurable"]
    page = (root / "report" / "index.html").read_text()
    assert "two at a time, one on each machine" in page and "shared CPUs" not in page
    assert f'href="../pairs/default--{everything}/report/index.html">default--{everything} (default)</a>' in page


def test_two_at_once_on_shared_cpus_is_asked_for_and_said_and_an_odd_one_out_is_carried_by_both_machines(
        host, lab, capsys):
    lab.at_once, lab.schedule = True, "parallel"
    prepared = _prepared("--groups", "ajp,apr", "--quick", "--repeat", "2", "--schedule", "parallel")
    assert command.run(FakeBackend(), host, prepared) == 0
    assert "--schedule parallel measures two configurations at once anyway" in capsys.readouterr().err
    root = next(runfolder.RUNS.glob("2*"))
    # default with ajp+apr; ajp, the forward path's only first step, has no partner left: both machines carry it
    assert lab.measured == ["default--ajp+apr", "ajp+apr--default", "ajp--ajp"]
    assert len(RunFolder(root / "pairs" / "ajp--ajp").trials()) == 1
    analysed = json.loads((root / "ablation.json").read_text())["analysis"]
    assert all(len(figures) == 2 for figures in analysed["configurations"].values())
    page = (root / "report" / "index.html").read_text()
    assert "Measured two at a time on shared CPUs (--schedule parallel):" in page and "shared: this host has" in page


def test_a_pair_whose_trials_gave_no_figures_stops_the_ablation_and_only_its_halves_are_measured_again(
        host, lab, monkeypatch):
    monkeypatch.setattr(placement, "host_cpus", lambda: tuple(range(16)))
    lab.at_once, lab.unsettled = True, {frozenset({"gc_heap"})}
    with pytest.raises(StepFailed, match=r"configuration default: 0 of its trials gave either machine's throughput"):
        command.run(FakeBackend(), host, _prepared("--groups", "gc_heap", "--quick", "--repeat", "2"))
    assert lab.measured == ["default--gc_heap", "gc_heap--default"] and not host.aa_pending()
    root = next(runfolder.RUNS.glob("2*"))
    lab.unsettled = set()
    lab.measured.clear()
    assert command.run(FakeBackend(), host, _prepared("--resume", root.name)) == 0
    assert lab.measured == ["default--gc_heap", "gc_heap--default"]         # the pair as it was recorded
    assert sorted(p.name.rsplit("-", 2)[0] for p in (root / "interrupted").iterdir()) == ["default--gc_heap",
                                                                                          "gc_heap--default"]
    assert json.loads((root / "ablation.json").read_text())["pairs"] == [["default", "gc_heap"]]


def test_a_trial_the_run_did_not_count_gives_no_figure_to_either_configuration_of_a_pair(tmp_path):
    # the tuned machine's configuration did not settle in trial 1: the run replaced it, and the default machine's
    # figure in it goes too (a configuration is not read from trials its partner has no figure in)
    ablation = ablation_folder.Ablation(tmp_path)
    half = ablation.pair_folder(frozenset(), frozenset({"gc_heap"}))
    for number, tuned in ((1, {"window": {"settled": False}}), (2, {"good_throughput_rps": 640.0,
                                                                      "all": {"samples": 9}})):
        RunFolder.write_json(half.trial(number).summary_json, {"machines": {
            "default": {"load": {"good_throughput_rps": 500.0 + number, "all": {"samples": 9}}}, "tuned": {"load": tuned}}})
    RunFolder.write_json(half.run_json, {"ended": {"how": "completed"}, "trials": [
        {"number": 1, "counted": False, "not_counted": "the tuned machine did not reach a steady state"},
        {"number": 2, "counted": True}]})
    assert ablation.counted(frozenset()) == 1 and ablation.counted(frozenset({"gc_heap"})) == 1
    assert ablation_folder.costs(ablation.sources(frozenset()))["basis"].startswith("the default machine over 1 trials")
