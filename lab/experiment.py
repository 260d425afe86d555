"""./start.sh run: both machines loaded side by side, their evidence collected into runs/<id>/,
then the summary and the report made from it."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import cast

from lab import aa, evidence, generator, interrupts, knee, knobs, load, placement, profiles, provenance, status
from lab import limits as lab_limits
from lab.analysis import host_pause
from lab.conclusion import conclude, make_report
from lab.contract import RUN_SCHEMA, Ended, Profile, RunRecord
from lab.errors import LabError, StepFailed
from lab.given_knobs import in_effect, knobs_files
from lab.hostlab import HostLab
from lab.load.abort import ThresholdWatch
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.machines import manifest
from lab.machines.protocol import Backend
from lab.names import MACHINES, at_once
from lab.paths import ANSIBLE_DIR
from lab.progress import info, step
from lab.runfolder import RunFolder


def _knobs(backend: Backend, mode: dict) -> dict:
    """Each machine's knobs as its roles get them (rendered, secrets masked; an A/A run's or an ablation's tuned
    machine with the extra vars it was given); none if they cannot be read (the run goes on: the report says
    knobs.json has none)."""
    try:
        # each machine with the knobs file it was given: an A/A run's, an ablation's, up --knobs'
        profile = profiles.active()
        return knobs.rendered(backend.inventory, ANSIBLE_DIR, MACHINES, knobs.KNOB_PREFIXES,
                              extra_vars=knobs_files(mode) or None, profile=profile.file if profile else None)
    except Exception as error:  # noqa: BLE001  (Ansible's own errors are many; the load matters more)
        info(f"the knobs could not be read from {backend.inventory}: {type(error).__name__}: {error}")
        return {}


def run(backend: Backend, profile: load.Profile, schedule: str | None = None, repeat: int = 1,
        host: HostLab | None = None, a_a: bool = False, limits: dict[str, float] | None = None,
        load_from: str = "here", host_limits: bool = False, stop_on_fail: bool = False) -> int:
    """Loads both machines, collects their evidence, writes the report. However it ends (Ctrl-C or
    SIGTERM at any step, an error), once the run folder exists it holds run.json saying how, the
    evidence collected so far, and a report of it; PCP's logger is never left recording. Without a
    schedule, the placement's: at once only when the machines and JMeter have CPUs of their own.
    repeat > 1: that many trials, each a run folder of its own in trials/<k>/ (in the sequential
    schedule the machines' order alternates), compared in the run folder's summary and report.
    a_a: an A/A run (lab/aa.py): the tuned machine with the default one's knobs, restored after (host
    remembers it meanwhile); an A/B run refuses while a cut-short A/A run left them there. limits: thresholds
    (lab/analysis/thresholds.py) the run must pass, or it exits 3, with a JUnit file of them. load_from: "here"
    (JMeter on this host) or "loadgen" (the backend's remote engines, lab/load/engines.py). host_limits: each
    trial also measures the host's limits (lab/limits.py). stop_on_fail: the load stops once a threshold is lost
    (lab/load/abort.py)."""
    asked = {"load_from": load_from, "host_limits": host_limits, "stop_on_fail": stop_on_fail}
    mode = {"mode": "ab", "thresholds": limits or {}, **asked}
    if host_limits:
        lab_limits.check(backend, profile)
    if load_from == "loadgen" and not backend.has_engines:
        hint = ("LAB_VAGRANT_LOADGEN=1 ./start.sh up adds the Vagrantfile's load generator VM" if backend.name == "vagrant"
                else "name its hosts there: ansible/inventories/ssh/hosts.example.yml shows how")
        raise StepFailed(f"--load-from loadgen: the {backend.name} backend has no remote JMeter engines: its inventory "
                         f"({backend.inventory}) has no loadgen group ({hint})")
    # a repeated capacity run replaces each trial whose knee the host stood still in, as many as it planned
    chosen = _Trials(unusable=host_pause.trial_not_counted, extra=repeat) \
        if isinstance(profile, load.StepLoad) and repeat > 1 else _Trials()
    if host is not None:
        aa.refuse_if_pending(host, a_a)
    if a_a:
        if host is None:
            raise ValueError("an A/A run needs the host's lab record")
        # The report before the restore: a restore that fails still leaves the run summarised.
        with interrupts.sigterm_as_interrupt(), aa.tuned_as_default(backend, host) as aa_mode:
            return _finish(*_experiment(backend, profile, schedule, repeat,
                                        {**aa_mode, "thresholds": limits or {}, **asked}, chosen=chosen))
    return _finish(*_experiment(backend, profile, schedule, repeat, mode, chosen=chosen))


def check_machines(backend: Backend) -> dict:
    """What each machine runs (status), once both answer through HTTPD; StepFailed naming those that do not."""
    with step("Checking both machines answer"):
        observed = status.observe_all(backend, MACHINES)
        down = [f"{name} ({m['url']} -> {m.get('http_status')})" for name, m in observed.items()
                if m.get("http_status") != 200]
        if down:
            raise StepFailed(f"not answering: {', '.join(down)}; run ./start.sh up first")
    return observed


def measure(backend: Backend, profile: load.Profile, repeat: int, folder: RunFolder, mode: dict,
            machines: tuple[str, ...], unusable: Callable[[RunFolder], str | None], extra: int,
            schedule: str | None = None) -> dict:
    """One experiment into a folder chosen by the caller (an ablation's configurations) on some of the machines,
    summarised and reported; returns how it ended ({"how": "completed"} or why not). A trial in which
    unusable(its summarised folder) finds no figure is not counted: up to `extra` more trials replace such ones
    (each a trial folder of its own, even when one is asked for). schedule: as run's (None: the placement's)."""
    folder, measured = _experiment(backend, profile, schedule, repeat, mode, folder,
                                   _Trials(machines, unusable, extra))
    with step("Summarising and writing the report"):
        make_report(folder)
    return measured.ended


@dataclass(frozen=True)
class _Trials:
    """Which machines a run loads, and whether a trial counts (a run's: both machines, every trial)."""
    machines: tuple[str, ...] = MACHINES
    unusable: Callable[[RunFolder], str | None] = lambda _trial: None    # why a trial has no figure, or None
    extra: int = 0                                                      # at most this many trials replace those

    def plan(self, repeat: int) -> str:
        return f"{repeat}" + (f" (up to {repeat + self.extra} if some are not counted)" if self.extra else "")


def _experiment(backend: Backend, profile: load.Profile, schedule: str | None, repeat: int,
                mode: dict, folder: RunFolder | None = None, chosen: _Trials = _Trials()
                ) -> tuple[RunFolder, _Measured]:
    """The run up to its report: the placement, the machines checked, then one trial or several (into
    folder, else a new one in runs/)."""
    where = placement.placed_on(backend)
    placed = {**where.as_json(), "schedule_from": "--schedule" if schedule else "the placement"}
    schedule = schedule or where.schedule
    info(f"placement: {where.note}" + ("" if placed["schedule_from"] == "--schedule" or where.dedicated
                                       else " (--schedule parallel loads both at once anyway)"))
    with interrupts.sigterm_as_interrupt():
        observed = check_machines(backend)
        wiring = {name: manifest.read(name) for name in MACHINES}
        if mode.get("host_limits"):
            lab_limits.check_wiring(wiring)
        load.check_targets({name: wiring[name].base_url for name in MACHINES}, wiring["default"].service_path)
        with step("Preparing JMeter"):
            load.prepare()
        if folder is None:
            folder = RunFolder.create()
        folder.root.mkdir(parents=True, exist_ok=True)
        info(f"run folder: {os.path.relpath(folder.root)}")
        mode = {**mode, "given_knobs": in_effect(mode)}
        setup = _Setup(backend, profile, schedule, wiring, observed, placed, mode, _knobs(backend, mode))
        if repeat == 1 and not chosen.extra:
            return folder, _trial(setup, folder, chosen.machines)
        trials: list[dict] = []
        measured = _Measured()
        try:
            while len(trials) < repeat + chosen.extra and sum(t["counted"] for t in trials) < repeat:
                number = len(trials) + 1
                order = chosen.machines if number % 2 or schedule == "parallel" else tuple(reversed(chosen.machines))
                info(f"trial {number} of {chosen.plan(repeat)}"
                     + (f" ({' then '.join(order)})" if schedule == "sequential" and len(order) > 1 else ""))
                measured = _trial(setup, folder.trial(number), order)
                trials.append({"number": number, "order": list(order), "ended": measured.ended,
                               "problems": measured.problems + (measured.result.problems if measured.result else []),
                               "folder": folder.relative(folder.trial(number).root), "counted": True})
                if measured.ended["how"] != "completed":
                    measured.ended = {**measured.ended, "during": f"trial {number}: {measured.ended['during']}"}
                    break
                measured.phase = f"summarising trial {number}"
                with step(f"Summarising trial {number}"):
                    make_report(folder.trial(number))
                if why := chosen.unusable(folder.trial(number)):
                    trials[-1].update(counted=False, not_counted=why)
                    info(f"trial {number} is not counted: {why}")
                if number == 1 and setup.capacity_steps is not None:    # the host's ceiling: later trials copy it
                    setup = replace(setup, mode={"ceiling_from": str(folder.trial(1).root), **setup.mode})
        except KeyboardInterrupt:       # between trials (or in a trial's report): the run still says how it ended
            measured.ended = {"how": "interrupted", "during": measured.phase}
        except Exception as error:      # a bug in a trial: the run's record says so before its traceback
            measured.ended = {"how": "failed", "during": f"trial {len(trials) + 1}",
                              "error": f"{type(error).__name__}: {error}"}
            raise
        finally:
            with interrupts.deferred():
                _write_repeated_run_json(setup, folder, measured, repeat, trials, chosen.machines)
        return folder, measured


@dataclass(frozen=True)
class _Setup:
    """What every trial of a run shares."""
    backend: Backend
    profile: load.Profile
    schedule: str
    wiring: dict
    observed: dict
    placed: dict
    mode: dict                  # {"mode": "ab"} or an A/A run's (lab/aa.py), and the run's thresholds
    knobs: dict                 # each machine's, read once per run

    @property
    def capacity_steps(self) -> load.StepLoad | None:
        """A capacity run's steps: it measures the generator's ceiling and refines each knee (an ablation's don't)."""
        return self.profile if isinstance(self.profile, load.StepLoad) and self.mode.get("mode") != "ablation" else None


def _trial(setup: _Setup, folder: RunFolder, order: tuple[str, ...]) -> _Measured:
    """One load of the machines in order into folder, which holds run.json however it ends."""
    backend = setup.backend
    folder.root.mkdir(parents=True, exist_ok=True)
    measured = _Measured()
    try:
        folder.write_json(folder.status_json, {"backend": backend.name, "note": backend.emulation_note,
                                               "machines": setup.observed})
        folder.write_json(folder.knobs_json, setup.knobs)
        measured.phase = "starting PCP's logger"
        _measure(setup, folder, measured, order)
    except KeyboardInterrupt:
        measured.ended = {"how": "interrupted", "during": measured.phase}
    except (LabError, OSError) as error:    # OSError: a full disk, a file gone; a message, not a traceback
        measured.ended = {"how": "failed", "during": measured.phase, "error": str(error)}
    except Exception as error:              # a bug: its traceback, after run.json says where it struck
        measured.ended = {"how": "failed", "during": measured.phase, "error": f"{type(error).__name__}: {error}"}
        raise
    finally:
        with interrupts.deferred():                 # a second Ctrl-C waits until run.json is written
            # never left recording into a run that is over (said in run.json; the run's own end matters more)
            for name, why in _stop_recording(backend, measured).items():
                measured.problems.append(f"{name}: PCP's logger could not be stopped ({why})")
            loaded = _run_json(backend, setup.profile, setup.schedule, folder, measured, order)
            folder.write_json(folder.run_json, {**loaded, "placement": setup.placed, "order": list(order),
                                                **setup.mode})
    return measured


def _write_repeated_run_json(setup: _Setup, folder: RunFolder, measured: _Measured, repeat: int,
                             trials: list[dict], machines: tuple[str, ...]) -> None:
    """The repeated run's own run.json (and the first trial's status and knobs): its trials and how it ended."""
    first = folder.trial(1)
    for path in (first.status_json, first.knobs_json):
        if path.is_file():
            shutil.copyfile(path, folder.root / path.name)
    times = [folder.read_json(trial.run_json, [], "run") or {} for trial in folder.trials()]
    starts = [t["started_at"] for t in times if isinstance(t.get("started_at"), (int, float))]
    ends = [t["ended_at"] for t in times if isinstance(t.get("ended_at"), (int, float))]
    single = _run_json(setup.backend, setup.profile, setup.schedule, folder, measured, machines)
    folder.write_json(folder.run_json, {
        **single, "placement": setup.placed, "repeat": repeat, "trials": trials, **setup.mode,
        "uncounted_trials": sum(not t["counted"] for t in trials),
        "planned_s": single["planned_s"] * max(repeat, len(trials)), "problems": [p for t in trials for p in t["problems"]],
        "started_at": min(starts) if starts else None, "ended_at": max(ends) if ends else None})


@dataclass
class _Measured:
    """What a run got to, step by step: enough to write run.json however it ended."""
    phase: str = "recording the machines' configuration"
    recording: list[str] = field(default_factory=list)
    memory_before: dict[str, dict] = field(default_factory=dict)
    result: load.LoadResult | None = None
    load_generator: dict | None = None      # what generated the load: JMeter here, or its remote engines
    limits: dict | None = None              # the host's limits' load, when the run measured them
    ended: dict = field(default_factory=lambda: {"how": "completed"})
    problems: list[str] = field(default_factory=list)


def _stop_recording(backend: Backend, measured: _Measured) -> dict[str, Exception]:
    """Every machine still recording stopped, all at once, and no longer counted as recording however its stop went."""
    names, measured.recording[:] = list(measured.recording), []
    return evidence.stop_all(backend, names)


def _measure(setup: _Setup, folder: RunFolder, measured: _Measured, order: tuple[str, ...]) -> None:
    backend, profile = setup.backend, setup.profile
    # JMeter on CPUs of its own when the placement gives it some (taskset)
    cpus = setup.placed["cpus"].get(placement.LOADGEN) if setup.placed.get("dedicated") else None
    steps = setup.capacity_steps
    if steps is not None:
        measured.phase = "measuring the load generator's ceiling"
        ceiling_from = setup.mode.get("ceiling_from")
        generator.measure_ceiling(backend, _targets(setup), steps, folder, cpus, measured.problems,
                                  RunFolder(Path(ceiling_from)) if ceiling_from else None)
    measured.phase = "starting PCP's logger"
    _start_recording(backend, measured, order)
    measured.phase = "the load"
    result = _load(setup, folder, measured, order, cpus, steps)
    _say_how_the_load_ended(measured, result)
    measured.phase = "collecting the evidence"
    _collect(backend, folder, measured, order, result)
    if setup.mode.get("host_limits") and not result.interrupted:
        assert isinstance(profile, load.LoadProfile)    # run() refused --limits with an open model (lab_limits.check)
        measured.phase = "measuring the host's limits"
        measured.limits = {"profile": asdict(lab_limits.profile_for(profile)), "kinds": lab_limits.KINDS}
        measured.problems.extend(lab_limits.measure(backend, profile, setup.wiring, folder, cpus))


def _start_recording(backend: Backend, measured: _Measured, order: tuple[str, ...]) -> None:
    with step(f"Starting PCP's logger on {_both(order)}"):
        # Both machines at once: supervisord waits out each logger's start (its startsecs, 1 s) before it answers.
        # Each counts as recording from here, so that whatever happens its logger is stopped (a stopped one stops
        # again harmlessly).
        measured.recording.extend(order)
        started = at_once(lambda name: evidence.start_recording(backend, name), order)
        measured.memory_before.update(zip(order, started, strict=True))


def _load(setup: _Setup, folder: RunFolder, measured: _Measured, order: tuple[str, ...], cpus: str | None,
          steps: load.StepLoad | None) -> load.LoadResult:
    """The load (a capacity run's knees refined after it); PCP's loggers stopped however it ends."""
    backend, profile, schedule, wiring = setup.backend, setup.profile, setup.schedule, setup.wiring
    title = (f"Loading {_both(order)} ({schedule}: {profile.describe()}"
             f"{' per machine' if schedule == 'sequential' and len(order) > 1 else ''}; Ctrl-C stops cleanly)")
    with step(title):
        try:
            with generator.load_generator(backend, _targets(setup), setup.mode, folder) as sender:
                engines = sender if isinstance(sender, Engines) else None
                network = sender if isinstance(sender, ClientNetwork) else None
                measured.load_generator = sender.as_json() if sender else {"where": "JMeter on this host"}
                urls, path = {name: wiring[name].base_url for name in order}, wiring["default"].service_path
                measured.result = load.run(
                    urls, profile, folder.jmeter.root, schedule=schedule, on_progress=load.print_progress, path=path,
                    order=order, engines=engines, cpus=cpus, network=network, at_rest=partial(status.at_rest, backend),
                    stop_when=ThresholdWatch(setup.mode["thresholds"], getattr(profile, "ramp_s", 0))
                    if setup.mode.get("stop_on_fail") else None)
                if steps is not None:
                    measured.phase = "refining the knees"
                    measured.result = knee.refine(folder, steps, measured.result, urls, path, engines, network, cpus,
                                                  measured.problems, partial(status.at_rest, backend))
                if engines is None:                 # JMeter's own affinity (an engine's is in its where)
                    measured.load_generator["cpus"] = measured.result.loadgen_cpus
        finally:
            if failed := _stop_recording(backend, measured):      # the first machine's error ends the run
                (_, error), *others = failed.items()
                measured.problems.extend(f"{name}: PCP's logger could not be stopped ({why})" for name, why in others)
                raise error
    return measured.result


def _say_how_the_load_ended(measured: _Measured, result: load.LoadResult) -> None:
    """Stopped early, a machine's load ended past its capacity, or interrupted (which ends the run)."""
    if result.lost:
        info(f"stopped early: {result.lost['why']}")
    for name, after_s in result.ended_early.items():
        info(f"{name}: its load ended after {after_s:.0f} s, past its capacity (the SLO missed in consecutive steps)")
    if result.interrupted:
        measured.ended = {"how": "interrupted", "during": "the load"}
        killed = [problem for problem in result.problems if problem.startswith("JMeter was killed")]
        if killed:
            measured.ended["error"] = killed[0]


def _collect(backend: Backend, folder: RunFolder, measured: _Measured, order: tuple[str, ...],
             result: load.LoadResult) -> None:
    with step("Collecting PCP archives, GC logs and logs"):
        # Both machines at once: a VM's or a host's evidence comes through several Ansible calls (24 s a VM, one
        # after the other, under emulation); each machine's goes to folders of its own.
        collected = at_once(lambda name: evidence.collect(backend, name, folder, result.started_at, result.ended_at,
                                                          measured.memory_before[name]), order)
        for name, events in zip(order, collected, strict=True):
            for exit_ in events["process_exits"]:
                info(f"{name}: {exit_['process']} exited during the run ({exit_['reason']})")
            if events["oom_kills"]:
                info(f"{name}: the kernel's OOM killer struck {events['oom_kills']} time(s)")
            if events["missing"]:
                info(f"{name}: missing {', '.join(events['missing'])}")


def _targets(setup: _Setup) -> list[tuple[str, int]]:
    """Where the load generator must reach each machine: its address and client port."""
    return [(wiring.address, wiring.client_port) for wiring in setup.wiring.values()]


def _both(machines: tuple[str, ...]) -> str:
    return "both machines" if len(machines) > 1 else f"the {machines[0]} machine"


def _run_json(backend: Backend, profile: load.Profile, schedule: str, folder: RunFolder,
              measured: _Measured, machines: tuple[str, ...]) -> RunRecord:
    result = measured.result
    return {
        "schema": RUN_SCHEMA, "run_id": folder.run_id, "backend": backend.name,
        "backend_note": backend.emulation_note,
        "machine_profile": machine_profile.as_json() if (machine_profile := profiles.active()) else None,
        "memory_model": memory_model.as_json() if (memory_model := getattr(backend, "memory", None)) else None,
        "backend_emulated": bool(getattr(backend, "emulated", False)),
        "schedule": schedule, "profile": cast(Profile, {"model": profile.model, **asdict(profile)}),
        "ended_early_s": result.ended_early if result else {},
        "threshold_lost": result.lost if result else None,
        "loadgen_cpus": result.loadgen_cpus if result else None,
        "load_generator": measured.load_generator, "limits": measured.limits,
        "machines_loaded": list(machines),
        "planned_s": profile.duration_s * (len(machines) if schedule == "sequential" else 1),
        "started_at": result.started_at if result else None, "ended_at": result.ended_at if result else None,
        "interrupted": measured.ended["how"] != "completed", "ended": cast(Ended, measured.ended),
        "problems": (result.problems if result else []) + measured.problems, "host": provenance.environment(),
        "machine_homes": {name: str(backend.home(name)) for name in MACHINES},
        "versions": {"lab": provenance.lab_version()},
    }


def _finish(folder: RunFolder, measured: _Measured) -> int:
    dashboards = measured.result.dashboards if measured.result and not folder.trials() else {}
    return conclude(folder, measured.ended, dashboards)
