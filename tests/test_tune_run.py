"""tune's search end to end without a lab: each configuration Optuna proposes is given to the tuned machine (the
playbook run recorded, not run) and measured (a made-up capacity, from the knobs file the machine was given); what the
memory budget sets aside, or a choice the configuration's stack lacks, is never provisioned nor measured; broken
constraints are kept with why; the tuned machine gets its own knobs back; tune.json, best.yml and the report are
written."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from test_experiment import FakeBackend

from lab import cli, experiment, provision, runfolder
from lab.analysis import host_pause
from lab.errors import StepFailed
from lab.provision import PlaybookResult
from lab.runfolder import RunFolder
from lab.tune import command
from published import violations

pytestmark = pytest.mark.fast


class ModelledBackend(FakeBackend):
    """The local backend's memory model (397 MiB, 1 GiB of swap), which the memory budget reads."""
    memory = SimpleNamespace(as_json=lambda: {"limit_mib": 397, "swap_mib": 1024})


def _heap(knobs: dict) -> int:
    return next(int(o[4:-1]) for o in knobs["camel_app_java_options"] if o.startswith("-Xmx"))


def made_up(knobs: dict) -> tuple[int, dict]:
    """A capacity that grows with the backend pool up to 150 (calls wait for it at the knee below that); a heap
    under 96 MiB is OOM-killed under load."""
    pool, heap = knobs["camel_app_http_client_per_route"], _heap(knobs)
    capacity = 50 * round((300 + 3 * min(pool, 150)) / 50)
    events = {"oom_kills": 1 if heap < 96 else 0, "process_exits": []}
    stage = "the backend pool" if pool < 150 else None
    queued = {"stage": stage, "knob": "camel_app_http_client_per_route" if stage else None,
              "sentence": f"{'requests queued at the backend pool' if stage else 'no pool was full'} (pool {pool})"}
    return capacity, {"events": events, "memory": {"budget": {"held_peak_mib": 250 + 0.5 * heap},
                                                   "major_faults_per_s": 1.0},
                      "capacity": {"found": True, "capacity_rps": capacity, "generator_bound_rps": None,
                                   "knee_rps": capacity + 50,
                                   "at_knee": {"queued": queued, "pool_pending_peak": max(0, 150 - pool)}}}


@pytest.fixture()
def lab(monkeypatch, tmp_path) -> SimpleNamespace:
    seen = SimpleNamespace(given=[], measured=[], pause_at=set())     # pause_at: the measurements the host stood still in

    def run_playbook(inventory, log_dir, limit=None, given=None, knobs_only=False):
        seen.given.append((limit, (given or {}).get(limit)))
        return PlaybookResult(0, {limit: 1}, {}, tmp_path / "ansible.log")

    def measure(backend, profile, repeat, folder: RunFolder, mode, machines, unusable, extra, schedule=None):
        assert machines == ("tuned",) and repeat == 1 and extra == 0 and mode["mode"] == "tune"
        limit, path = seen.given[-1]
        assert limit == "tuned" and str(path) == mode["tuned_knobs"]            # measured as it was given
        knobs = yaml.safe_load(Path(path).read_text())
        capacity, figures = made_up(knobs)
        seen.measured.append((knobs, capacity))
        if len(seen.measured) in seen.pause_at:
            figures["capacity"]["at_knee"]["host_paused"] = {"seconds": 1.0, "at_s": [357.4], "sentence": "", "basis": ""}
        RunFolder.write_json(folder.summary_json, {"machines": {"tuned": {"load": {"all": {"samples": 9000}}, **figures}}})
        RunFolder.write_json(folder.run_json, {"ended": {"how": "completed"}})
        folder.write_text(folder.report_html, "<html></html>")
        return {"how": "completed"}

    monkeypatch.setattr(provision, "run_playbook", run_playbook)
    monkeypatch.setattr(experiment, "measure", measure)
    monkeypatch.setattr(experiment, "check_machines", lambda backend: {})
    monkeypatch.setattr(runfolder, "RUNS", tmp_path / "runs")
    return seen


def test_a_tune_measures_what_fits_keeps_what_broke_and_writes_the_best(host, lab, capsys):
    prepared = command.prepare(cli._parser().parse_args(["tune", "--groups", "backend_client,jvm", "--trials", "6",
                                                         "--quick", "--seed", "2"]))
    assert command.run(ModelledBackend(), host, prepared) == 0
    err = capsys.readouterr().err
    root = next(runfolder.RUNS.glob("2*"))
    assert violations([root / "tune.json"]) == []                # the published contract (docs/schema/)
    record = yaml.safe_load((root / "tune.json").read_text())
    rows = record["result"]["configurations"]
    measured = [r for r in rows if r["measured"]]
    aside = [r for r in rows if not r["measured"]]
    # 6 measured, each once, as the machine was given it; what the budget set aside never reached the machine
    assert len(measured) == 6 == len(lab.measured) and len(lab.given) == 6 + 1
    for row, (knobs, capacity) in zip(measured, lab.measured):
        assert knobs["camel_app_http_client_per_route"] == row["point"]["backend_pool"] == \
            knobs["camel_app_http_client_max_total"]
        assert _heap(knobs) == row["point"]["jvm_heap_mib"] and row["capacity_rps"] == capacity
        assert (row["broken"] == {"process_died": "1 OOM kill"}) == (_heap(knobs) < 96), row
        assert yaml.safe_load((root / "knobs" / f"{row['number']}.yml").read_text().split("\n", 2)[2]) == knobs
    for row in aside:
        assert "set aside unmeasured" in row["broken"]["memory_over"] and row["capacity_rps"] is None
        assert f"configuration {row['number']} " in err and "set aside: its memory budget" in err
    # where each one's requests waited at its knee: said as it was measured, kept, counted and shown
    for row in measured:
        pool = row["point"]["backend_pool"]
        assert row["figures"]["queued_at"] == ("the backend pool" if pool < 150 else None)
        assert f"at its knee ({row['capacity_rps'] + 50:.0f} req/s): " in err and f"(pool {pool})" in err
    assert record["result"]["bound_at_knee"] == dict(Counter(r["figures"]["queued_at"] or "no pool full" for r in measured))
    # a configuration within the constraints whose knee was the backend pool is followed by the same configuration
    # with the pool widened to the calls in flight there (150 here), queued by that verdict and said so
    numbers = {r["number"]: r for r in rows}
    guided = [r for r in rows if r["chosen_by"]]
    assert guided, "no knee's verdict queued a configuration: the guided step was not exercised"
    for row in guided:
        before = numbers[int(row["chosen_by"].split()[1][:-2])]
        assert before["figures"]["queued_at"] == "the backend pool" and not before["broken"]
        pool = before["point"]["backend_pool"]
        assert row["point"] == {**before["point"], "backend_pool": max(150, 2 * pool)}
        assert row["chosen_by"].endswith(f"(camel_app_http_client_per_route, {150 - pool} calls waiting beside its "
                                         f"{pool}): backend_pool {pool} -> {max(150, 2 * pool)}")
        assert row["number"] > before["number"]
        assert f"next, as its knee's verdict points: backend_pool {pool} -> {max(150, 2 * pool)}" in err
        assert f"configuration {row['number']} (" in err and row["chosen_by"] in err
    for row in measured:
        if row["figures"]["queued_at"] and not row["broken"] and row["point"]["backend_pool"] < 150:
            assert any(g["chosen_by"].startswith(f"configuration {row['number']}'s knee") for g in guided) or \
                row["number"] == max(r["number"] for r in rows), row       # queued, unless the plan ended there
    assert lab.given[-1] == ("tuned", None)                     # its own knobs back
    assert not host.aa_pending()
    # the best: the highest capacity among those within every constraint
    feasible = [r for r in measured if not r["broken"]]
    best = record["result"]["best"]
    assert feasible and best["number"] == max(feasible, key=lambda r: (r["capacity_rps"], -r["number"]))["number"]
    knobs = yaml.safe_load((root / "best.yml").read_text())
    assert knobs["camel_app_http_client_per_route"] == best["point"]["backend_pool"]
    assert knobs["httpd_mpm"] == "prefork"                      # not searched: the default machine's
    assert record["result"]["sentence"] in err and f"Report: {root}/report/index.html" in err
    html = (root / "report" / "index.html").read_text()
    assert html.count('href="../configs/') == 6 and "1 OOM kill" in html
    assert "What bound each measured configuration at its knee" in html and "(pool " in html
    assert html.count("<br>queued by configuration ") == len(guided)
    # this seed's proposals exercise both: a configuration set aside, and one broken when measured
    assert aside and any(r["broken"].get("process_died") for r in measured)


@pytest.mark.parametrize(("written", "why"), [
    ("{cut short", r"tune: tune\.json unreadable \(Expecting"),
    ('{"plan": 3}', r"tune\.json: no plan this lab wrote \(TypeError"),
    ('{"started": "yesterday"}', r"tune\.json: no plan this lab wrote \(KeyError")])
def test_resume_on_a_damaged_tune_record_names_it_and_starts_nothing(monkeypatch, tmp_path, written, why):
    monkeypatch.setattr(runfolder, "RUNS", tmp_path / "runs")
    folder = tmp_path / "runs" / "20261129-010000"
    folder.mkdir(parents=True)
    (folder / "tune.json").write_text(written)
    with pytest.raises(StepFailed, match=rf"^--resume 20261129-010000: .*{why}.*start a new tune$"):
        command.prepare(cli._parser().parse_args(["tune", "--resume", "20261129-010000"]))


def test_the_best_is_validated_against_the_default_machine_and_the_2018_tuning_and_a_resume_keeps_what_completed(
        host, lab, monkeypatch, capsys):
    # Two capacity runs of --validate trials, both machines in each: the tuned machine given best.yml, then its own
    # knobs (the 2018 tuning). The second one is cut short once: --resume keeps the first and measures the second.
    searched = experiment.measure
    validated: list[tuple[str, object]] = []
    cut = {"own": 1}

    def measure(backend, profile, repeat, folder: RunFolder, mode, machines, unusable, extra, schedule=None):
        if mode["mode"] != "tune-validation":
            return searched(backend, profile, repeat, folder, mode, machines, unusable, extra, schedule)
        assert machines == ("default", "tuned") and repeat == 2 and extra == 2 and schedule == "parallel"
        assert unusable is host_pause.trial_not_counted     # a lower bound counts; a pause in a knee does not
        name = mode["validation"]
        validated.append((name, lab.given[-1]))
        if cut.get(name):
            cut[name] -= 1
            RunFolder.write_json(folder.run_json, {"ended": {"how": "interrupted"}})
            return {"how": "interrupted"}
        tuned = 800.0 if name == "found" else 420.0
        RunFolder.write_json(folder.summary_json, {"kind": "repeated", "capacity": {     # a repeated run's
            "machines": {"default": {"mean": 400.0, "low": 380.0, "high": 420.0, "trials": 2},
                         "tuned": {"mean": tuned, "low": tuned - 40, "high": tuned + 40, "trials": 2}},
            "ratio": tuned / 400, "low": tuned / 400 - 0.2, "high": tuned / 400 + 0.2}})
        # what bound the best at its knee in each trial: the host's CPUs (with the most they serve at its cost
        # per request), then Tomcat's threads
        for number, stage, ceiling in ((1, "the host's CPUs", 1633), (2, "Tomcat's threads", 1500)):
            if name == "found":
                RunFolder.write_json(folder.trial(number).summary_json, {"machines": {"tuned": {"capacity": {
                    "at_knee": {"queued": {"stage": stage}},
                    "at_capacity": {"cpu_per_request": {"host_ceiling_rps": ceiling}}}}}})
        RunFolder.write_json(folder.run_json, {"ended": {"how": "completed"}})
        folder.write_text(folder.report_html, "<html></html>")
        return {"how": "completed"}

    monkeypatch.setattr(experiment, "measure", measure)
    argv = ["tune", "--groups", "backend_client,jvm", "--trials", "6", "--quick", "--seed", "2", "--validate", "2",
            "--schedule", "parallel"]
    prepared = command.prepare(cli._parser().parse_args(argv))
    assert prepared.plan.validate == 2 and prepared.plan.schedule == "parallel"
    assert command.run(ModelledBackend(), host, prepared) == 130
    err = capsys.readouterr().err
    assert "then the best configuration validated: the default machine against the tuned one given it, and " \
           "against the tuned machine's own knobs, each a capacity run of 2 trials (both machines, at once;" in err
    # from the search's last configuration straight to the best one: its own knobs back once, after that run only
    searched_given = lab.given[:-2]
    assert lab.given[-2:] == [("tuned", root_best := next(runfolder.RUNS.glob("2*")) / "best.yml"), ("tuned", None)]
    assert searched_given and ("tuned", None) not in searched_given and ("tuned", root_best) not in searched_given
    root = next(runfolder.RUNS.glob("2*"))
    assert f"./start.sh tune --resume {root.name} continues it" in err
    best = root / "best.yml"
    # the best configuration on the tuned machine while it was measured, its own knobs back before the 2018 tuning's
    assert validated == [("found", ("tuned", best)), ("own", ("tuned", None))]

    # as if that run had been cut short again while the tuned machine got its own knobs back: the resume gives them
    # back first, never measuring the 2018 tuning on the best configuration's knobs
    host.aa_begin(("tuned",))
    before = len(lab.given)
    assert command.run(ModelledBackend(), host, command.prepare(cli._parser().parse_args(
        ["tune", "--resume", root.name]))) == 0
    err = capsys.readouterr().err
    assert lab.given[before:] == [("tuned", None)]
    assert validated[2:] == [("own", ("tuned", None))]             # the completed run kept, the cut one measured
    assert "the run with the tuned machine carrying the best configuration was completed: kept" in err
    record = yaml.safe_load((root / "tune.json").read_text())
    sentence = record["validation"]["sentence"]
    assert sentence in err
    assert ("the best configuration served 800 req/s [760, 840] against the default machine's 400 req/s [380, 420], "
            "2.00x [1.80, 2.20]; the tuned machine's own knobs (the 2018 tuning) 420 req/s [380, 460] against 400 "
            "req/s [380, 420], 1.05x [0.85, 1.25]") in sentence
    # the ceiling: only a knee the host's CPUs bound gives one (Tomcat's threads' 1,500 is not the host's)
    assert sentence.endswith(". What bound the best configuration at its knees: the host's CPUs at 1 of 2; Tomcat's "
                             "threads at 1 of 2; at its CPU cost per request at its capacity the host's CPUs serve at most about 1,633 "
                             "req/s of it and its load together, 4.08x the default machine's 400: no pool passes that "
                             "on this host")
    assert record["validation"]["bound"]["stages"] == {"the host's CPUs": 1, "Tomcat's threads": 1}
    html = (root / "report" / "index.html").read_text()
    assert '<section id="validation">' in html and 'href="../validation/found/report/index.html"' in html
    assert 'href="../validation/own/report/index.html"' in html and "2.00x [1.80, 2.20]" in html
    assert not host.aa_pending()


def test_a_tune_validates_three_trials_unless_quick_or_told_and_an_older_plan_validates_nothing():
    from lab.tune.folder import Plan
    chosen = {tuple(argv): command.prepare(cli._parser().parse_args(["tune", *argv])).plan.validate
              for argv in ([], ["--quick"], ["--validate", "0"], ["--quick", "--validate", "2"])}
    assert chosen == {(): 3, ("--quick",): 0, ("--validate", "0"): 0, ("--quick", "--validate", "2"): 2}
    plan = command.prepare(cli._parser().parse_args(["tune"])).plan
    assert Plan.from_json(plan.as_json()) == plan
    older = {key: value for key, value in plan.as_json().items() if key != "validate"}
    assert Plan.from_json(older).validate == 0


def test_a_validation_of_one_trial_reads_each_machines_capacity_from_its_run_and_claims_no_interval(tmp_path):
    from lab.tune.folder import Tuning
    from lab.tune.validate import outcome
    tuning = Tuning(tmp_path)
    for name, tuned in (("found", {"found": True, "capacity_rps": 300}), ("own", {"found": False,
                                                                                 "capacity_rps": 200})):
        folder = RunFolder(tmp_path / "validation" / name)
        RunFolder.write_json(folder.summary_json, {"capacity": {"default_rps": 150, "tuned_rps": 300, "ratio": 2.0},
                                                   "machines": {"default": {"capacity": {"found": True,
                                                                                         "capacity_rps": 150}},
                                                                "tuned": {"capacity": tuned}}})
        RunFolder.write_json(folder.run_json, {"ended": {"how": "completed"}})
    found = outcome(tuning)
    assert found["runs"]["found"]["tuned"] == {"mean": 300, "low": None, "high": None, "trials": 1, "at_least": None}
    assert found["runs"]["own"]["tuned"]["mean"] is None        # a lower bound is not a capacity measured
    assert found["sentence"] == (
        "Validated, both machines in every trial: the best configuration served 300 req/s against the default "
        "machine's 150 req/s, 2.00x (one trial: no interval); the tuned machine's own knobs (the 2018 tuning) at "
        "least 200 req/s against 150 req/s, 2.00x (one trial: no interval)")


def test_a_tune_refuses_while_the_default_machine_carries_other_knobs_and_a_plan_with_an_unknown_schedule(
        host, lab, monkeypatch, tmp_path):
    # The default machine is what every configuration is measured from and validated against: an ablation cut short
    # while it carried a configuration must give it its own knobs back first.
    host.aa_begin(("default",))
    prepared = command.prepare(cli._parser().parse_args(["tune", "--trials", "1", "--quick"]))
    with pytest.raises(StepFailed, match=r"the default machine still carries other knobs than its own .*"
                                         r"\./start\.sh up restores them"):
        command.run(ModelledBackend(), host, prepared)
    assert lab.given == [] and not list(runfolder.RUNS.glob("2*"))
    folder = runfolder.RUNS / "20261129-020000"
    folder.mkdir(parents=True)
    (folder / "tune.json").write_text(json.dumps({"plan": {**prepared.plan.as_json(), "schedule": "sometimes"}}))
    with pytest.raises(StepFailed, match=r"no plan this lab wrote \(ValueError: schedule 'sometimes' is none of "
                                         r"parallel, sequential\)"):
        command.prepare(cli._parser().parse_args(["tune", "--resume", folder.name]))


def test_a_configuration_whose_knee_the_host_stood_still_in_is_measured_again_next_once(host, lab, capsys):
    lab.pause_at = {1, 2}           # the first configuration's knee, and that of its measurement again (next)
    prepared = command.prepare(cli._parser().parse_args(["tune", "--groups", "backend_client,jvm", "--trials", "3",
                                                         "--quick", "--seed", "2"]))
    assert command.run(ModelledBackend(), host, prepared) == 0
    root = next(runfolder.RUNS.glob("2*"))
    rows = {r["number"]: r for r in yaml.safe_load((root / "tune.json").read_text())["result"]["configurations"]}
    first = min(n for n, r in rows.items() if r["measured"])
    why = "the host stood still 1.0 s in the tuned machine's knee step (at 5:57): that miss measured the host, not the machine"
    assert rows[first]["broken"] == {"measured_again": why} and rows[first]["capacity_rps"] is None
    again = next(r for n, r in rows.items() if n > first and r["measured"])
    assert again["point"] == rows[first]["point"] and lab.measured[1][0] == lab.measured[0][0]
    err = capsys.readouterr().err
    assert f"measured again next: {why}" in err and f"configuration {first} again: {why}" in err
    # its measurement again stood still too: told as it came out (no figure, with why), never a third time
    assert again["broken"] == {"no_figure": why} and lab.measured[2][0] != lab.measured[0][0]
    assert len([r for r in rows.values() if r["measured"] and r["capacity_rps"] is not None]) == 3 - 1


def test_a_choice_its_stack_lacks_is_set_aside_never_provisioned_and_the_stack_is_searched(host, lab, monkeypatch,
                                                                                         capsys):
    # APR's connector exists on the classic stack only (Tomcat 11 has none): a point putting it on the modern stack
    # would be refused by site.yml; the search sets it aside unmeasured instead, and goes on.
    original = made_up

    def by_stack(knobs: dict) -> tuple[int, dict]:
        capacity, figures = original({**knobs, "camel_app_http_client_per_route": 20,
                                     "camel_app_java_options": ["-Xmx128m"]})
        return capacity + (100 if knobs.get("camel_app_stack") == "modern" else 0), figures
    monkeypatch.setitem(globals(), "made_up", by_stack)
    prepared = command.prepare(cli._parser().parse_args(["tune", "--groups", "stack,proxy", "--trials", "8",
                                                         "--quick", "--seed", "3"]))
    assert command.run(ModelledBackend(), host, prepared) == 0
    err = capsys.readouterr().err
    record = yaml.safe_load((next(runfolder.RUNS.glob("2*")) / "tune.json").read_text())
    rows = record["result"]["configurations"]
    impossible = [r for r in rows if r["point"]["proxy_protocol"] == "ajp_apr" and r["point"]["stack"] != "classic"]
    assert impossible, "this seed proposed no APR on the modern stack: the set-aside was not exercised"
    for row in impossible:
        assert not row["measured"] and row["capacity_rps"] is None
        assert row["broken"] == {"no_figure": "proxy_protocol ajp_apr exists on the classic stack only, and this "
                                              "configuration runs the modern one: set aside unmeasured"}
    assert "set aside: proxy_protocol ajp_apr exists on the classic stack only" in err
    given = [yaml.safe_load(Path(path).read_text()) for _, path in lab.given if path is not None]
    assert len(given) == 8 == len(lab.measured)                  # only what can exist reached the machine
    assert not any(k["camel_app_stack"] == "modern" and k.get("camel_app_ajp_protocol") == "APR" for k in given)
    stacks = {k["camel_app_stack"] for k, _ in lab.measured}
    assert stacks == {"classic", "modern"}                       # both searched
    assert any(k.get("camel_app_virtual_threads") is True or k.get("camel_app_route_pool_size") == 200
               for k, _ in lab.measured if k["camel_app_stack"] == "modern")
