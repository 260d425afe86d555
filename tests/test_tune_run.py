"""tune's search end to end without a lab: each configuration Optuna proposes is given to the tuned machine (the
playbook run recorded, not run) and measured (a made-up capacity, from the knobs file the machine was given); what the
memory budget sets aside is never provisioned nor measured; broken constraints are kept with why; the tuned machine
gets its own knobs back; tune.json, best.yml and the report are written."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from test_experiment import FakeBackend

from lab import cli, experiment, provision, runfolder
from lab.errors import StepFailed
from lab.provision import PlaybookResult
from lab.runfolder import RunFolder
from lab.tune import command

pytestmark = pytest.mark.fast


class ModelledBackend(FakeBackend):
    """The local backend's memory model (397 MiB, 1 GiB of swap), which the memory budget reads."""
    memory = SimpleNamespace(as_json=lambda: {"limit_mib": 397, "swap_mib": 1024})


def _heap(knobs: dict) -> int:
    return next(int(o[4:-1]) for o in knobs["camel_app_java_options"] if o.startswith("-Xmx"))


def made_up(knobs: dict) -> tuple[int, dict]:
    """A capacity that grows with the backend pool up to 150; a heap under 96 MiB is OOM-killed under load."""
    pool, heap = knobs["camel_app_http_client_per_route"], _heap(knobs)
    capacity = 50 * round((300 + 3 * min(pool, 150)) / 50)
    events = {"oom_kills": 1 if heap < 96 else 0, "process_exits": []}
    return capacity, {"events": events, "memory": {"budget": {"held_peak_mib": 250 + 0.5 * heap},
                                                   "major_faults_per_s": 1.0}}


@pytest.fixture()
def lab(monkeypatch, tmp_path) -> SimpleNamespace:
    seen = SimpleNamespace(given=[], measured=[])

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
        RunFolder.write_json(folder.summary_json, {"machines": {"tuned": {
            "load": {"all": {"samples": 9000}}, **figures,
            "capacity": {"found": True, "capacity_rps": capacity, "generator_bound_rps": None}}}})
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
