"""However a run ends once its folder exists (Ctrl-C or SIGTERM at any step, an error), the folder says
how in run.json, holds a report, and PCP's logger is never left recording. The steps themselves are
stood in for here (they are run for real by the end-to-end tests); what is tested is the run's
bookkeeping around them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

from lab import evidence, experiment, generator, load, placement, report, status
from lab.analysis import host_pause
from lab.errors import LabError, StepFailed
from lab.machines import manifest
from lab.names import MACHINES
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast


class FakeBackend:
    name = "local"
    service_manager = "supervisord"
    emulation_note = "a note"
    inventory = Path("/nonexistent")

    def home(self, name: str) -> Path:
        return Path("/nonexistent") / name

    pinned: dict = {"default": "0-1", "tuned": "2-3"}     # where a 16-CPU host's placement puts them

    def pinned_cpus(self, name: str) -> str | None:
        return self.pinned.get(name)

    def client_network(self, targets: list) -> AbstractContextManager[None]:
        return nullcontext(None)        # JMeter in this host's own network


@pytest.fixture()
def steps(tmp_path: Path, monkeypatch) -> dict:
    """The run's steps, recorded; `fail` names a step and what it raises there."""
    calls: dict = {"recording": set(), "stopped": [], "fail": {}}

    def maybe_fail(step: str) -> None:
        if step in calls["fail"]:
            raise calls["fail"][step]

    wiring = manifest.Manifest(machine="default", address="10.213.1.2", home="/h", user="u", group="g",
                               service_manager="supervisord", service_path="/svc/camel/mock",
                               ports={"httpd": 80}, processes=(), pcp_archive="pcp/archives/current", evidence={})
    monkeypatch.setattr(status, "observe", lambda backend, name: {"url": "u", "http_status": 200})
    monkeypatch.setattr(manifest, "read", lambda name: wiring)
    monkeypatch.setattr(load, "prepare", lambda: None)
    monkeypatch.setattr(experiment, "_knobs", lambda backend, mode: {})
    monkeypatch.setattr(RunFolder, "create", classmethod(lambda cls: cls((tmp_path / "run").resolve())))
    (tmp_path / "run").mkdir()

    def start_recording(backend, name):
        maybe_fail(f"start {name}")
        calls["recording"].add(name)
        return {}

    def stop_recording(backend, name):
        calls["stopped"].append(name)
        calls["recording"].discard(name)

    def run_load(targets, profile, out, **kwargs):
        calls["schedule"] = kwargs.get("schedule")
        calls["loadgen_cpus"] = kwargs.get("cpus")
        calls.setdefault("orders", []).append(kwargs.get("order"))
        maybe_fail("load")
        return load.LoadResult(results={}, dashboards={}, interrupted=False, started_at=1.0, ended_at=2.0,
                               schedule="parallel", profile=profile)

    def collect(backend, name, folder, started, ended, before):
        maybe_fail(f"collect {name}")
        return {"process_exits": [], "oom_kills": 0, "missing": []}

    def render(root):
        (Path(root) / "report").mkdir(exist_ok=True)
        (Path(root) / "report" / "index.html").write_text("report")
        return Path(root) / "report" / "index.html"

    monkeypatch.setattr(evidence, "start_recording", start_recording)
    monkeypatch.setattr(evidence, "stop_recording", stop_recording)
    monkeypatch.setattr(evidence, "collect", collect)
    monkeypatch.setattr(load, "run", run_load)
    monkeypatch.setattr(report, "render", render)
    calls["run"] = tmp_path / "run"
    return calls


def _run_json(steps: dict) -> dict:
    return json.loads((steps["run"] / "run.json").read_text())


def test_a_complete_run_says_so(steps):
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 0
    assert _run_json(steps)["ended"] == {"how": "completed"} and not _run_json(steps)["interrupted"]
    assert steps["recording"] == set() and sorted(steps["stopped"]) == sorted(MACHINES)



def test_both_machines_evidence_is_collected_at_once_and_said_in_their_order(steps, monkeypatch, capsys):
    # a VM's evidence takes several Ansible calls (24 s each under emulation): one machine's never waits for the other's
    arrived = threading.Barrier(2, timeout=10)

    def collect(backend, name, folder, started, ended, before):
        arrived.wait()                  # broken (an error) unless the other machine's is being collected too
        return {"process_exits": [], "oom_kills": 0, "missing": [f"{name}'s GC log"]}
    monkeypatch.setattr(evidence, "collect", collect)
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 0
    err = capsys.readouterr().err
    assert err.index("default: missing default's GC log") < err.index("tuned: missing tuned's GC log")


def test_both_machines_loggers_are_stopped_at_once(steps, monkeypatch):
    # on a VM each stop is an Ansible call of seconds: one machine's never waits for the other's
    arrived = threading.Barrier(2, timeout=10)

    def stop_recording(backend, name):
        arrived.wait()                  # broken (an error) unless the other machine's logger is being stopped too
        steps["stopped"].append(name)
    monkeypatch.setattr(evidence, "stop_recording", stop_recording)
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 0
    assert sorted(steps["stopped"]) == sorted(MACHINES) and _run_json(steps)["problems"] == []


def test_without_a_schedule_the_placement_chooses_it(steps, monkeypatch, capsys):
    # a host of 16 CPUs: the local backend pins each machine to 2 and JMeter to the rest, so both at once
    monkeypatch.setattr(placement, "host_cpus", lambda: tuple(range(16)))
    assert experiment.run(FakeBackend(), load.QUICK) == 0
    placed = _run_json(steps)["placement"]
    assert steps["schedule"] == _run_json(steps)["schedule"] == placed["schedule"] == "parallel"
    assert placed["schedule_from"] == "the placement" and placed["host_cpus"] == "0-15" and placed["dedicated"]
    assert steps["loadgen_cpus"] == placed["cpus"]["loadgen"] == "4-15"           # JMeter pinned there
    assert "placement: dedicated: default on CPUs 0-1, tuned on 2-3, JMeter on 4-15" in capsys.readouterr().err
    # a host of 2: they share them, so one machine after the other, and JMeter is not pinned
    monkeypatch.setattr(placement, "host_cpus", lambda: (0, 1))
    assert experiment.run(FakeBackend(), load.QUICK) == 0
    placed = _run_json(steps)["placement"]
    assert steps["schedule"] == placed["schedule"] == "sequential" and not placed["dedicated"]
    assert steps["loadgen_cpus"] is None
    assert "placement: shared: this host has 2 CPUs" in capsys.readouterr().err
    # asked for: as asked, and the placement still says what it could not isolate
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 0
    assert steps["schedule"] == _run_json(steps)["schedule"] == "parallel"
    assert _run_json(steps)["placement"]["schedule_from"] == "--schedule"


def test_machines_that_are_not_on_their_planned_cpus_are_not_reported_pinned(steps, monkeypatch, capsys):
    # A 16-CPU host plans default on 0-1 and tuned on 2-3; brought up before the lab pinned them, they are not.
    monkeypatch.setattr(placement, "host_cpus", lambda: tuple(range(16)))
    backend = FakeBackend()
    backend.pinned = {"default": None, "tuned": "2-3"}
    assert experiment.run(backend, load.QUICK) == 0
    placed = _run_json(steps)["placement"]
    assert not placed["dedicated"] and steps["schedule"] == placed["schedule"] == "sequential"
    assert steps["loadgen_cpus"] is None
    assert "default on every CPU (planned: 0-1)" in placed["note"] and "tuned on" not in placed["note"]
    assert "placement: shared: the machines are not on the CPUs the placement plans" in capsys.readouterr().err


def test_repeated_trials_alternate_the_order_and_each_keeps_its_own_folder(steps):
    assert experiment.run(FakeBackend(), load.QUICK, "sequential", repeat=3) == 0
    assert steps["orders"] == [("default", "tuned"), ("tuned", "default"), ("default", "tuned")]
    top = _run_json(steps)
    assert top["repeat"] == 3 and [t["number"] for t in top["trials"]] == [1, 2, 3]
    assert [t["order"] for t in top["trials"]] == [["default", "tuned"], ["tuned", "default"], ["default", "tuned"]]
    for number in (1, 2, 3):
        trial = json.loads((steps["run"] / "trials" / str(number) / "run.json").read_text())
        assert trial["ended"] == {"how": "completed"} and trial["order"] == top["trials"][number - 1]["order"]
        assert "ceiling_from" not in trial          # no generator's ceiling in a closed-model run, none copied
    assert (steps["run"] / "status.json").is_file() and (steps["run"] / "report" / "index.html").is_file()


def test_a_repeated_capacity_run_measures_the_generators_ceiling_once_and_its_later_trials_copy_it(steps, monkeypatch):
    asked = []
    monkeypatch.setattr(generator, "measure_ceiling", lambda backend, targets, profile, folder, cpus, problems,
                        measured_in=None: asked.append((folder.root, measured_in and measured_in.root)))
    assert experiment.run(FakeBackend(), load.QUICK_STEPS, "sequential", repeat=3) == 0
    first = steps["run"] / "trials" / "1"
    assert asked == [(first, None), (steps["run"] / "trials" / "2", first), (steps["run"] / "trials" / "3", first)]


def test_a_repeated_capacity_run_replaces_a_trial_whose_knee_the_host_stood_still_in(steps, monkeypatch, capsys):
    paused = {1: "the host stood still 1.0 s in the tuned machine's knee step (at 5:57)"}
    monkeypatch.setattr(host_pause, "trial_not_counted", lambda trial: paused.get(int(trial.root.name)))
    monkeypatch.setattr(generator, "measure_ceiling", lambda *args, **kwargs: None)
    assert experiment.run(FakeBackend(), load.QUICK_STEPS, "sequential", repeat=2) == 0
    top = _run_json(steps)
    assert [(t["number"], t["counted"]) for t in top["trials"]] == [(1, False), (2, True), (3, True)]
    assert top["trials"][0]["not_counted"] == paused[1] and top["uncounted_trials"] == 1
    assert "trial 1 of 2 (up to 4 if some are not counted)" in capsys.readouterr().err
    # a closed-model run's trials are never replaced: it has no knee
    steps["orders"].clear()
    assert experiment.run(FakeBackend(), load.QUICK, "sequential", repeat=2) == 0
    assert len(steps["orders"]) == 2


def test_a_trial_is_not_counted_when_a_machines_knee_step_held_a_pause_of_the_host(tmp_path):
    trial = RunFolder(tmp_path / "trials" / "1")
    trial.root.mkdir(parents=True)
    still = {"seconds": 1.0, "at_s": [357.4], "sentence": "", "basis": ""}
    trial.write_json(trial.summary_json, {"machines": {"default": {"capacity": {"at_knee": {"host_paused": None}}},
                                                       "tuned": {"capacity": {"at_knee": {"host_paused": still}}}}})
    assert host_pause.trial_not_counted(trial) == ("the host stood still 1.0 s in the tuned machine's knee step (at "
                                              "5:57): that miss measured the host, not the machine")
    trial.write_json(trial.summary_json, {"machines": {"tuned": {"capacity": {"at_knee": {"host_paused": None}}}}})
    assert host_pause.trial_not_counted(trial) is None


def test_a_measurement_of_one_machine_loads_and_records_only_it_and_replaces_trials_without_a_figure(
        steps, tmp_path, capsys, monkeypatch):
    steps["targets"] = []
    loaded = load.run

    def run_load(targets, profile, out, **kwargs):      # the fixture's, remembering the targets
        steps["targets"].append(sorted(targets))
        return loaded(targets, profile, out, **kwargs)
    monkeypatch.setattr(load, "run", run_load)
    folder = RunFolder((tmp_path / "config").resolve())
    # trials 1 and 3 have no figure: 2 more replace them (extra 2), so 4 trials give the 2 planned
    unusable = {1: "the tuned machine did not reach a steady state", 3: "no requests"}
    ended = experiment.measure(FakeBackend(), load.QUICK, 2, folder, {"mode": "ablation", "thresholds": {}},
                               machines=("tuned",), unusable=lambda trial: unusable.get(int(trial.root.name)),
                               extra=2)
    assert ended == {"how": "completed"}
    assert steps["targets"] == [["tuned"]] * 4 and steps["orders"] == [("tuned",)] * 4
    assert steps["stopped"] == ["tuned"] * 4        # PCP recorded on the loaded machine only
    top = json.loads(folder.run_json.read_text())
    assert [(t["number"], t["counted"]) for t in top["trials"]] == [(1, False), (2, True), (3, False), (4, True)]
    assert top["trials"][0]["not_counted"] == unusable[1] and top["uncounted_trials"] == 2
    assert top["machines_loaded"] == ["tuned"] and top["repeat"] == 2
    assert json.loads(folder.trial(4).run_json.read_text())["machines_loaded"] == ["tuned"]
    err = capsys.readouterr().err
    assert "trial 1 of 2 (up to 4 if some are not counted)" in err and f"trial 1 is not counted: {unusable[1]}" in err
    # never more than repeat + extra: a machine that never settles ends the measurement, its trials kept
    steps["targets"].clear()
    experiment.measure(FakeBackend(), load.QUICK, 2, RunFolder((tmp_path / "never").resolve()),
                       {"mode": "ablation", "thresholds": {}}, machines=("tuned",), unusable=lambda trial: "no",
                       extra=1)
    assert len(steps["targets"]) == 3


def test_an_interrupted_trial_ends_the_repeated_run_and_says_so(steps, monkeypatch):
    loads = []

    def second_trial_interrupted(*args, **kwargs):
        loads.append(kwargs.get("order"))
        if len(loads) == 2:
            raise KeyboardInterrupt
        return load.LoadResult(results={}, dashboards={}, interrupted=False, started_at=1.0, ended_at=2.0,
                               schedule="parallel", profile=load.QUICK)
    monkeypatch.setattr(load, "run", second_trial_interrupted)
    assert experiment.run(FakeBackend(), load.QUICK, "parallel", repeat=3) == 130
    top = _run_json(steps)
    assert [t["number"] for t in top["trials"]] == [1, 2] and top["interrupted"]
    assert top["ended"] == {"how": "interrupted", "during": "trial 2: the load"}
    assert top["trials"][1]["ended"] == {"how": "interrupted", "during": "the load"}
    assert not (steps["run"] / "trials" / "3").exists() and steps["recording"] == set()


def test_ctrl_c_while_a_trial_is_summarised_still_leaves_the_runs_own_record(steps, monkeypatch):
    def render(root):
        if Path(root).parent.name == "trials":
            raise KeyboardInterrupt
        (Path(root) / "report").mkdir(exist_ok=True)
        (Path(root) / "report" / "index.html").write_text("report")
        return Path(root) / "report" / "index.html"
    monkeypatch.setattr(report, "render", render)
    assert experiment.run(FakeBackend(), load.QUICK, "parallel", repeat=3) == 130
    top = _run_json(steps)
    assert top["ended"] == {"how": "interrupted", "during": "summarising trial 1"} and top["repeat"] == 3
    assert [t["number"] for t in top["trials"]] == [1] and top["planned_s"] == 3 * load.QUICK.duration_s
    assert (steps["run"] / "report" / "index.html").is_file() and steps["recording"] == set()


def test_a_bug_in_a_trial_is_in_the_repeated_runs_record_too(steps):
    steps["fail"]["collect tuned"] = ZeroDivisionError("a bug")
    with pytest.raises(ZeroDivisionError):
        experiment.run(FakeBackend(), load.QUICK, "parallel", repeat=2)
    assert _run_json(steps)["ended"] == {"how": "failed", "during": "trial 1", "error": "ZeroDivisionError: a bug"}
    trial = json.loads((steps["run"] / "trials" / "1" / "run.json").read_text())
    assert trial["ended"]["during"] == "collecting the evidence"


@pytest.mark.parametrize("step, during", [("start tuned", "starting PCP's logger"),
                                          ("collect default", "collecting the evidence")])
def test_an_interrupt_outside_the_load_leaves_a_run_that_says_where_it_stopped(steps, step, during):
    steps["fail"][step] = KeyboardInterrupt()
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 130
    ended = _run_json(steps)
    assert ended["ended"] == {"how": "interrupted", "during": during} and ended["interrupted"]
    assert steps["recording"] == set(), "PCP's logger left recording"
    assert (steps["run"] / "report" / "index.html").is_file()


def test_a_sigterm_outside_the_load_leaves_a_run_that_says_where_it_stopped(steps):
    # A real SIGTERM to this process while the evidence is collected (as `kill` or a CI's timeout sends it)
    class Sigterm(Exception):
        def __init__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)                   # the handler raises before this ends
            raise AssertionError("SIGTERM did not interrupt the run")
    steps["fail"]["collect default"] = Sigterm
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 130
    ended = _run_json(steps)
    assert ended["ended"] == {"how": "interrupted", "during": "collecting the evidence"} and ended["interrupted"]
    assert steps["recording"] == set() and (steps["run"] / "report" / "index.html").is_file()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL        # the run's handler is gone after it


def test_an_error_mid_run_is_a_message_and_the_run_says_so(steps):
    steps["fail"]["collect tuned"] = StepFailed("tuned: the machine went away")
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 1
    assert _run_json(steps)["ended"] == {"how": "failed", "during": "collecting the evidence",
                                         "error": "tuned: the machine went away"}


def test_a_bug_keeps_its_traceback_after_run_json_says_where(steps):
    steps["fail"]["load"] = ZeroDivisionError("a bug")
    with pytest.raises(ZeroDivisionError):
        experiment.run(FakeBackend(), load.QUICK, "parallel")
    assert _run_json(steps)["ended"] == {"how": "failed", "during": "the load", "error": "ZeroDivisionError: a bug"}
    assert steps["recording"] == set()


def test_the_summary_says_where_an_interrupted_run_stopped():
    from lab.analysis.prose import what_happened
    sentences = what_happened({"run": {"interrupted": True, "ended": {"how": "interrupted",
                                                                      "during": "collecting the evidence"}},
                               "machines": {}})
    assert sentences[0] == ("The run was interrupted while collecting the evidence: what follows comes from what "
                            "it had collected by then.")


def test_a_logger_that_will_not_stop_is_said_and_run_json_still_written(steps, monkeypatch):
    def stop_recording(backend, name):
        raise StepFailed(f"{name}: ssh timed out")
    monkeypatch.setattr(evidence, "stop_recording", stop_recording)
    assert experiment.run(FakeBackend(), load.QUICK, "parallel") == 1
    assert _run_json(steps)["ended"] == {"how": "failed", "during": "the load", "error": "default: ssh timed out"}
    assert _run_json(steps)["problems"] == ["tuned: PCP's logger could not be stopped (tuned: ssh timed out)"]


def test_a_machine_near_its_memory_limit_gets_a_sentence_not_just_a_ratio():
    from lab.analysis.prose import what_happened
    def machine(peak_mib: int) -> dict:
        return {"memory": {"peak_bytes": peak_mib * 2**20, "source": "PCP"},
                "observed": {"jvm_memory_limit_bytes": 512 * 2**20}}
    sentences = what_happened({"run": {}, "machines": {"default": machine(390), "tuned": machine(500)}})
    near = [s for s in sentences if "OOM killer" in s]
    assert near == ["tuned peaked at 500 MiB of memory, 98% of its 512 MiB limit (PCP). That is within 10% of the "
                    "limit: a little more load, or a burst, and the kernel's OOM killer ends the largest process, "
                    "the JVM."]


def test_a_machine_the_oom_killer_kept_striking_is_said_in_a_few_sentences_that_lead_with_its_good_answers():
    # As measured here at the full profile: tuned's JVM killed 23 times, about every 40 s, HTTPD answering 503
    from lab.analysis.prose import what_happened

    def load(rps: float, good: float, errors: float) -> dict:
        window = {"settled": True, "duration_s": 1000.0}
        return {"throughput_rps": rps, "good_throughput_rps": good, "error_rate": errors, "window": window,
                "latency_ms": {"p95": 300.0}, "all": {"samples": 1000, "errors": int(1000 * errors),
                                                      "error_rate": errors}, "first_error": None}
    exits = [{"process": "camel-app", "at_s": 1528.0 + 40 * k, "reason": "terminated by SIGKILL; not expected"}
             for k in range(23)]
    tuned = {"load": load(1768.1, 385.5, 0.78), "events": {"process_exits": exits, "oom_kills": 23},
             "memory": {"peak_bytes": 503 * 2**20, "source": "PCP"}, "observed": {"jvm_memory_limit_bytes": 512 * 2**20}}
    default = {"load": load(815.7, 815.7, 0.0)}
    sentences = what_happened({"run": {}, "machines": {"default": default, "tuned": tuned}})
    assert sentences[0] == ("tuned answered 0.47x the requests per second without error of default in the steady "
                            "state (385.5 vs 815.7 req/s); in all tuned served 1,768.1 req/s with 78.0% errors, "
                            "default 815.7 req/s with 0.0%.")
    assert "tuned: camel-app exited 23 times between 25:28 and 40:08, about every 40 s (terminated by SIGKILL; not " \
           "expected)." in sentences
    assert not [s for s in sentences if "exited at" in s]
    assert "tuned peaked at 503 MiB of memory, 98% of its 512 MiB limit (PCP). At that, the kernel's OOM killer " \
           "struck 23 times." in sentences


@pytest.fixture()
def small_disk(steps):
    """The run folder on a disk of its own, 256 KiB: a real ENOSPC, not a raised one."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(steps["run"])], check=True)
    yield steps["run"]
    subprocess.run(["umount", str(steps["run"])], check=True)


def test_a_disk_that_fills_mid_run_ends_it_with_a_message_and_the_logger_stopped(steps, small_disk, monkeypatch):
    def collect(backend, name, folder, started, ended, before):
        with (small_disk / f"{name}.evidence").open("wb") as out:     # the evidence fills the disk
            while True:
                out.write(b"x" * 65536)
    monkeypatch.setattr(evidence, "collect", collect)
    with pytest.raises(LabError, match=r"run\.json could not be written: the disk is full \(No space left on device\)"
                                       rf"\. What the run had collected stays in {small_disk}"):
        experiment.run(FakeBackend(), load.QUICK, "parallel")
    assert steps["recording"] == set(), "PCP's logger left recording"
    assert not list(small_disk.glob("*.tmp")), "a half-written file left behind"


def test_a_run_folders_files_are_durable_and_never_hold_a_nan(tmp_path, monkeypatch):
    # JSON has no NaN (json.loads elsewhere would refuse the file): a figure that is not a number is none
    path = tmp_path / "run" / "run.json"
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real_fsync(fd))
    RunFolder.write_json(path, {"ratio": float("nan"), "rates": [1.5, float("inf")], "nested": {"p95": -float("inf")}})
    text = path.read_text()
    assert json.loads(text) == {"ratio": None, "rates": [1.5, None], "nested": {"p95": None}}
    assert "NaN" not in text and "Infinity" not in text
    # the file's content before it replaces the old one, then the folder's entry for it: a crash leaves one or
    # the other, never an empty file
    assert synced == [str(path) + ".tmp", str(path.parent)]
    assert not list(path.parent.glob("*.tmp"))
