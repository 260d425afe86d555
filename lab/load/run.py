"""One load run: JMeter runs jmeter/camel-tuning-lab.jmx against the machines (one JMeter for both in
parallel, or one per machine in sequence), reports progress from the results CSVs, stops cleanly
through its own shutdown port on Ctrl-C/SIGTERM, then its report generator makes each machine's
dashboard."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from lab.interrupts import sigterm_as_interrupt
from lab.load import plancopy, planload, userplan
from lab.load.cpu import CpuSampler
from lab.load.dashboards import generate as generate_dashboards
from lab.load.engines import Engines, client_arguments, split_users
from lab.load.jmeter import PLAN, as_properties, java_executable, launch, log_levels, runtime_jar
from lab.load.network import ClientNetwork
from lab.load.openmodel import StepLoad, StepWatch
from lab.load.openplan import open_plan
from lab.load.processes import free_udp_port, kill, killed_by, stop_jmeter
from lab.load.profile import SCHEDULES, LoadError, LoadProfile, LoadResult
from lab.load.progress import _MachineProgress, drained
from lab.load.targets import _parse_targets, _Target
from lab.names import MACHINES
from lab.placement import cpulist, parse_cpulist
from lab.runfolder import JMeterFolder

# Settings the lab relies on (also in the assembled bin/user.properties, see jmeter/pom.xml): the samplers'
# (where the plan runs: this JMeter, or its remote engines), and the JMeter that writes the results'.
SAMPLER_PROPERTIES = {"httpclient.reset_state_on_thread_group_iteration": "false"}
ENGINE_PROPERTIES = {
    "jmeter.save.saveservice.autoflush": "true",          # every sample reaches the CSV at once
    "jmeter.save.saveservice.output_format": "csv",
    "jmeter.save.saveservice.print_field_names": "true",
    "jmeter.save.saveservice.timestamp_format": "ms",
    "jmeterengine.force.system.exit": "true",
    "jmeterengine.stopfail.system.exit": "false",      # else an exit 1 after StopTestNow (jmeter/README.md)
    "summariser.interval": "10",
}
CSV_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
               "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency",
               "IdleTime", "Connect")

def _plan(profile: LoadProfile | StepLoad, folder: JMeterFolder, phase: list[_Target]) -> Path:
    """The plan this profile runs: the lab's, or for an open model the lab's made open, or the user's own sent
    to this phase's machines, kept in the run."""
    if isinstance(profile, planload.OWN_PLANS):
        # Read again, as it is now: the copy and the plan kept beside it are of the same bytes, whose hosts were mapped
        reading = userplan.read(Path(profile.plan), profile.plan_properties)
        unmapped = [host for host in reading.hosts if host not in profile.plan_map]
        if unmapped:
            raise LoadError(f"--plan {profile.plan} changed since the run began: its samplers now go to {unmapped[0]}, "
                            f"which is no machine's (mapped: {', '.join(profile.plan_map)}); nothing was sent there")
        if isinstance(profile, planload.OwnOpenPlan) and \
                planload.open_profile(reading, profile.plan_map, profile).plan_groups != profile.plan_groups:
            raise LoadError(f"--plan {profile.plan} changed since the run began: its open-model thread groups are no "
                            f"longer {', '.join(f'{g} -> {m}' for g, m in profile.plan_groups.items())}")
        if not folder.own_plan.is_file():
            folder.own_plan.write_bytes(reading.data)
        targets = {t.machine: plancopy.Target(t.protocol, t.host, t.port) for t in phase}
        stepped = plancopy.Stepped(profile.plan_groups, profile.connect_timeout_ms, profile.response_timeout_ms) \
            if isinstance(profile, planload.OwnOpenPlan) else None
        return plancopy.write_copy(reading, profile.plan_map, targets, profile.duration_s,
                                   folder.own_plan_run([t.machine for t in phase]), folder.plan_files, stepped)
    if isinstance(profile, StepLoad):
        return open_plan(PLAN, folder.open_plan)
    return PLAN


def _jmeter_command(java: str, jar: Path, log: Path, udp_port: int, profile: LoadProfile | StepLoad,
                    phase: list[_Target], path: str, folder: JMeterFolder, engines: Engines | None = None) -> list[str]:
    """JMeter for one phase: the plan's properties (-J here, or -G, sent to the remote engines that run it)
    and the client's own (its shutdown port, where each machine's results go)."""
    own = isinstance(profile, planload.OWN_PLANS)        # the user's plan runs as written: none of the lab's
    plan = profile.properties() if own else {**SAMPLER_PROPERTIES, **profile.properties(), "path": path}
    client = {**ENGINE_PROPERTIES, "jmeterengine.nongui.port": str(udp_port),
              "jmeterengine.nongui.maxport": str(udp_port)}
    active = {t.machine: t for t in phase}
    for machine in MACHINES:
        target = active.get(machine)
        plan.update(profile.group_properties(machine, active=target is not None))
        if target is None:                      # this group idles, its results nowhere
            client[f"{machine}.results"] = os.devnull
            continue
        if not own:
            plan.update({f"{machine}.protocol": target.protocol, f"{machine}.host": target.host,
                         f"{machine}.port": str(target.port), f"{machine}.path": target.path})
        if isinstance(profile, StepLoad):
            plan[f"{machine}.load_ended"] = str(folder.load_ended(machine))
        client[f"{machine}.results"] = str(folder.results(machine))
    head = ["-n", "-t", str(_plan(profile, folder, phase)), "-j", str(log), *log_levels()]
    if engines is None:
        return launch(java, jar, *head, *as_properties({**plan, **client}))
    if isinstance(profile, LoadProfile):        # each engine runs the whole plan: a share of the users each
        for machine in active:
            plan[f"{machine}.users"] = str(split_users(profile.users, len(engines.hosts)))
    elif len(engines.hosts) > 1:
        raise LoadError(f"an open model's arrival rates are not split over {len(engines.hosts)} engines: use one")
    return launch(java, jar, *head, *client_arguments(engines),
                  *as_properties(client), *as_properties(plan, flag="-G"))


def run(targets: dict[str, str], profile: LoadProfile | StepLoad, out_dir: Path, schedule: str = "parallel",
        on_progress: Callable[[dict], None] | None = None, *, path: str,
        progress_interval_s: float = 5.0, allow_any_host: bool = False,
        order: tuple[str, ...] | None = None, cpus: str | None = None, engines: Engines | None = None,
        enter: dict[str, list[str]] | None = None, network: ClientNetwork | None = None,
        stop_when: Callable[[dict], dict | None] | None = None, dashboards: bool = True,
        at_rest: Callable[[list[str]], bool] | None = None) -> LoadResult:
    """Load the machines with the plan, then build each machine's dashboard.

    targets: machine ("default"/"tuned") -> base URL (http://10.213.1.2); the request path is `path`
    (a target URL's own path, if any, wins). schedule "parallel": one JMeter loads all machines at once;
    "sequential": one machine after the other, each with the full profile. Ctrl-C or SIGTERM stops
    JMeter cleanly, keeps what it measured, still builds the dashboards and returns interrupted=True.
    order: the machines' order in the sequential schedule (default: default first), so repeated trials can
    alternate it and drift favours neither machine. cpus: a cpulist JMeter is pinned to (taskset), the CPUs the
    placement gives the load generator; the affinity JMeter really had is in the result (loadgen_cpus).
    engines: remote JMeter engines that generate the load (lab/load/engines.py), this JMeter their client.
    enter: machine -> a command prefix that runs its JMeter in the machine's network (sequential schedule only).
    network: the load generator's own network on this host (the backend's client_network), where every JMeter runs.
    stop_when: called with each progress report; what it returns (a lost threshold, lab/load/abort.py) ends the load
    at once, the phases still to come included, and is the result's `lost`.
    at_rest: whether the machines named serve nothing now (lab/status.py); an open model's phase ends once they do
    and its samples have ended, rather than after the whole grace JMeter's Shutdown is given.
    Writes the layout of lab.runfolder.JMeterFolder(out_dir): per machine results.csv and dashboard/."""
    parsed = _checked_targets(targets, schedule, path, allow_any_host, order, enter)
    generator = _Generator(java_executable(), runtime_jar(), cpus, engines, enter or {}, network.prefix if network else ())
    out = _fresh_folder(JMeterFolder(Path(out_dir).resolve()), parsed)
    sampler = CpuSampler(out.loadgen)
    phases = [parsed] if schedule == "parallel" else [[target] for target in parsed]
    # the lab's own plan sends one request an arrival (a user's runs each of its group's samplers)
    progress = {t.machine: _MachineProgress(t.machine, out.results(t.machine), watch=StepWatch(
        profile, one_sample_each=not isinstance(profile, planload.OWN_PLANS)) if isinstance(profile, StepLoad) else None)
                for t in parsed}
    problems: list[str] = []
    started_at, started = time.time(), time.monotonic()
    report = _Report(schedule, started, profile.duration_s * len(phases), progress, problems, on_progress, stop_when)
    load = _Load(generator, profile, out, progress, report, progress_interval_s, problems, sampler, [], at_rest)
    with sigterm_as_interrupt():
        interrupted = _run_phases(load, phases)
        results = {m: p.results for m, p in progress.items() if p.results.is_file()}
        made = generate_dashboards(generator.java, generator.jar, results, profile, out, problems) if dashboards else {}
        if "dashboard generation interrupted" in problems:
            interrupted = True
    return LoadResult(results=results, dashboards=made, interrupted=interrupted, started_at=started_at,
                      ended_at=time.time(), schedule=schedule, profile=profile, problems=problems, log=out.log,
                      ended_early={m: p.ended_early_s for m, p in progress.items() if p.ended_early_s is not None},
                      loadgen_cpus=cpulist(cpu for found in load.affinity for cpu in parse_cpulist(found)) or None,
                      lost=report.lost)


def _checked_targets(targets: dict[str, str], schedule: str, path: str, allow_any_host: bool,
                     order: tuple[str, ...] | None, enter: dict[str, list[str]] | None) -> list[_Target]:
    """run()'s targets parsed, in the order asked; a schedule or an `enter` run() cannot keep refused."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    parsed = _parse_targets(targets, path, allow_any_host)
    if order is not None:
        parsed.sort(key=lambda target: order.index(target.machine) if target.machine in order else len(order))
    if enter and schedule != "sequential":
        raise ValueError("JMeter enters a machine's network one machine at a time: schedule='sequential'")
    return parsed


def _fresh_folder(out: JMeterFolder, parsed: list[_Target]) -> JMeterFolder:
    """The run's JMeter folder emptied of an earlier run's results, log and CPU samples."""
    out.root.mkdir(parents=True, exist_ok=True)
    for target in parsed:                       # a fresh run: JMeter would append to old results
        out.machine_dir(target.machine).mkdir(exist_ok=True)
        out.results(target.machine).unlink(missing_ok=True)
        out.load_ended(target.machine).unlink(missing_ok=True)
        shutil.rmtree(out.dashboard_dir(target.machine), ignore_errors=True)
    out.log.write_text("")
    out.loadgen.unlink(missing_ok=True)
    return out


@dataclass
class _Report:
    """Each progress report: shown (on_progress), and judged by stop_when, whose first threshold lost is kept."""
    schedule: str
    started: float                      # time.monotonic() when the load began
    planned_s: float
    progress: dict[str, _MachineProgress]
    problems: list[str]
    on_progress: Callable[[dict], None] | None
    stop_when: Callable[[dict], dict | None] | None
    lost: dict | None = None

    def __call__(self, now: float) -> bool:
        """Shows the progress; True when the load must stop (stop_when found a threshold lost)."""
        snapshot = {"schedule": self.schedule, "elapsed_s": round(now - self.started, 1), "planned_s": self.planned_s,
                    "machines": {m: p.snapshot(now) for m, p in self.progress.items()}}
        if self.on_progress is not None:
            self.on_progress(snapshot)
        if self.lost is None and self.stop_when is not None and (lost := self.stop_when(snapshot)) is not None:
            self.lost = lost
            self.problems.append(f"stopped early: {lost['why']}")
        return self.lost is not None


@dataclass(frozen=True)
class _Generator:
    """The JMeter that loads: its Java and jar, the CPUs it is pinned to, the remote engines it drives."""
    java: str
    jar: Path
    cpus: str | None
    engines: Engines | None
    enter: dict[str, list[str]]         # machine -> the prefix that puts its JMeter in the machine's network
    within: tuple[str, ...] = ()        # else the prefix that puts every JMeter in the load generator's network

    @property
    def pids(self) -> tuple[int, ...]:
        """Engines on this host whose CPU counts as the load generator's."""
        return self.engines.pids if self.engines else ()


@dataclass(frozen=True)
class _Load:
    """What every phase of one run shares, and what the phases gather into it."""
    generator: _Generator
    profile: LoadProfile | StepLoad
    out: JMeterFolder
    progress: dict[str, _MachineProgress]
    report: _Report
    interval_s: float
    problems: list[str]
    sampler: CpuSampler
    affinity: list[str]                 # what each JMeter could run on, as the kernel says
    at_rest: Callable[[list[str]], bool] | None = None    # whether the machines named serve nothing now


def _run_phases(load: _Load, phases: list[list[_Target]]) -> bool:
    """The phases one after the other; True if the run was interrupted (Ctrl-C, SIGTERM, JMeter killed)."""
    for phase in phases:
        try:
            complete = _run_phase(load, phase, len(phases) > 1)
        except KeyboardInterrupt:
            return True
        if not complete:        # JMeter itself was killed: what it measured is kept, the run ends
            return True
        if load.report.lost is not None:    # a threshold is lost: the phases still to come would not change that
            break
    return False


def _run_phase(load: _Load, phase: list[_Target], own_log: bool) -> bool:
    """One JMeter process for the machines of this phase; KeyboardInterrupt after stopping it cleanly.
    False if JMeter was killed by a signal the lab did not send (the kernel's OOM killer sends SIGKILL)."""
    udp_port = free_udp_port()
    out, problems = load.out, load.problems
    phase_log = out.phase_log(phase[0].machine) if own_log else out.log
    command, entered = _phase_command(load, phase, phase_log, udp_port)
    machines = [load.progress[t.machine] for t in phase]
    # Open models only (their watch counts until Shutdown: a closed plan ends then), no engines (each counts its own)
    stop = partial(stop_jmeter, udp_port=udp_port, problems=problems, prefix=entered, drained=partial(
        drained, machines, load.at_rest) if isinstance(load.profile, StepLoad) and not load.generator.engines else None)
    popen = None
    try:
        with out.out.open("a") as stream:
            # With engines, in the keystore's folder: rmi.properties names it without one (lab/load/engines.py)
            popen = subprocess.Popen(command, cwd=load.generator.engines.folder if load.generator.engines
                                     else load.generator.jar.parent, stdout=stream, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        load.sampler.sample((popen.pid, *load.generator.pids), force=True)
        started = time.monotonic()          # the phase's start: every machine's
        for machine in machines:
            machine.start(started)
        stopped = _watch(load, popen, machines, started, stop)
    except KeyboardInterrupt:
        if popen is not None:
            for machine in machines:
                machine.state = "stopping"
            stop(popen)
        _finish_phase(machines, popen, own_log, phase_log, out.log, problems)
        raise
    except BaseException:
        if popen is not None:
            kill(popen)
        raise
    _finish_phase(machines, popen, own_log, phase_log, out.log, problems)
    if popen.returncode not in (0, None) and not any(m.samples for m in machines):
        raise LoadError(f"JMeter failed (exit {popen.returncode}) before any sample; see {phase_log} and "
                        f"{out.out}")
    load.report(time.monotonic())
    signal = killed_by(popen.returncode)
    if signal and not stopped:
        lasted = time.monotonic() - started
        problems.append(f"JMeter was killed by {signal} after {lasted:.0f} s of the planned "
                        f"{load.profile.duration_s} s (SIGKILL: perhaps the kernel's OOM killer); the run is incomplete")
        return False
    return True


def _phase_command(load: _Load, phase: list[_Target], phase_log: Path, udp_port: int
                   ) -> tuple[list[str], list[str] | None]:
    """JMeter's command line for this phase, and the prefix that puts it in a network (None: this host's own)."""
    generator = load.generator
    command = _jmeter_command(generator.java, generator.jar, phase_log, udp_port, load.profile, phase, phase[0].path,
                              load.out, generator.engines)
    entered = generator.enter.get(phase[0].machine) or list(generator.within) or None
    command = [*(entered or []), *command]
    if generator.cpus:
        command = ["taskset", "--cpu-list", generator.cpus, *command]     # it sets the affinity, then execs JMeter
    return command, entered


def _watch(load: _Load, popen: subprocess.Popen, machines: list[_MachineProgress], started: float,
           stop: Callable[[subprocess.Popen], None]) -> bool:
    """JMeter's CPU sampled and the progress reported until it ends; True if the lab stopped it first."""
    profile = load.profile
    # Bounded whatever happens: the plan stops itself at duration_s; past that plus the longest sample
    # and a margin, the lab stops it.
    overrun_s = profile.duration_s + profile.response_timeout_ms / 1000 + 60
    next_report = started + load.interval_s
    observed = None
    while popen.poll() is None:
        time.sleep(0.2)
        load.sampler.sample((popen.pid, *load.generator.pids))
        if observed is None and (observed := _affinity(popen.pid)) is not None:
            load.affinity.append(observed)
        now = time.monotonic()
        if now - started > overrun_s:
            load.problems.append(f"JMeter ran past duration_s + {overrun_s - profile.duration_s:.0f} s; stopped it")
            stop(popen)
            return True
        if now >= next_report:
            must_stop = _reported(load, machines, started, now)
            next_report = now + load.interval_s
            if must_stop:
                stop(popen)
                return True
    return False


def _reported(load: _Load, machines: list[_MachineProgress], started: float, now: float) -> bool:
    """The machines' progress read and reported; True when the load must stop: a threshold is lost
    (--stop-on-fail), or every machine is past its capacity."""
    for machine in machines:
        machine.poll(now)
    if load.report(now):                    # a threshold is lost (--stop-on-fail)
        return True
    for machine in machines:                # past its knee while another still loads: its arrivals end
        if machine.broken and machine.ended_early_s is None and len(machines) > 1:
            machine.ended_early_s = round(now - started, 1)
            load.out.load_ended(machine.machine).touch()
    # an open model's steps: nothing more to see once each machine is past its capacity or had every arrival answered
    # (its last step met: the schedule's drain would wait out the timeouts for requests that all ended)
    if all(machine.broken or machine.answered for machine in machines):
        for machine in machines:
            if machine.ended_early_s is None and machine.broken:
                machine.ended_early_s = round(now - started, 1)
        return True
    return False


def _affinity(pid: int) -> str | None:
    """The CPUs JMeter may run on, as a cpulist; None while taskset has not yet set them and exec'd JMeter
    (on a busy host that can take longer than a poll), or when the process is gone."""
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() == "taskset":
            return None
        return cpulist(os.sched_getaffinity(pid))
    except OSError:
        return None


def _finish_phase(machines: list[_MachineProgress], popen: subprocess.Popen | None, own_log: bool,
                  phase_log: Path, log: Path, problems: list[str]) -> None:
    now = time.monotonic()
    for machine in machines:
        machine.finish(now)
    if popen is not None and popen.returncode and not killed_by(popen.returncode):   # signals: see _run_phase
        problems.append(f"JMeter exited with {popen.returncode}; see {phase_log}")
    if own_log and phase_log.is_file():
        with log.open("a") as whole:
            whole.write(f"==== {', '.join(m.machine for m in machines)} ({phase_log}) ====\n")
            whole.write(phase_log.read_text(errors="replace"))

