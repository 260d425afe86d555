"""One load run: JMeter runs jmeter/camel-tuning-lab.jmx against the machines (one JMeter for both in
parallel, or one per machine in sequence), reports progress from the results CSVs, stops cleanly
through its own shutdown port on Ctrl-C/SIGTERM, then its report generator makes each machine's
dashboard."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lab.interrupts import sigterm_as_interrupt
from lab.load.cpu import CpuSampler
from lab.load.jmeter import PLAN, _runtime_jar, as_properties, java_executable, jmeter_home, launch, prepare
from lab.load.openmodel import StepLoad, StepWatch, open_plan
from lab.load.profile import SCHEDULES, LoadError, LoadProfile, LoadResult
from lab.load.progress import _complete_records, _MachineProgress
from lab.load.targets import _parse_targets, _Target
from lab.machines import MACHINES
from lab.placement import cpulist, parse_cpulist
from lab.runfolder import JMeterFolder

# Engine settings the lab relies on (also in the assembled bin/user.properties, see jmeter/pom.xml).
ENGINE_PROPERTIES = {
    "jmeter.save.saveservice.autoflush": "true",          # every sample reaches the CSV at once
    "jmeter.save.saveservice.output_format": "csv",
    "jmeter.save.saveservice.print_field_names": "true",
    "jmeter.save.saveservice.timestamp_format": "ms",
    "httpclient.reset_state_on_thread_group_iteration": "false",
    "jmeterengine.force.system.exit": "true",
    "summariser.interval": "10",
}
# The dashboards' statistics over every sample: JMeter's default (20,000) keeps only the last samples
# for percentiles, so a long run's dashboard would describe its last seconds. -1: no window.
DASHBOARD_PROPERTIES = {"jmeter.reportgenerator.statistic_window": "-1"}
CSV_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
               "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency",
               "IdleTime", "Connect")

SHUTDOWN_GRACE_S = 10.0     # "Shutdown": threads finish their current sample
STOP_NOW_GRACE_S = 10.0     # "StopTestNow": in-flight samples are interrupted
KILL_GRACE_S = 5.0          # SIGTERM, then SIGKILL
DASHBOARD_TIMEOUT_S = 900.0


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send_command(port: int, command: str) -> None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(command.encode(), ("127.0.0.1", port))
    except OSError:
        pass


def _wait(popen: subprocess.Popen, seconds: float) -> bool:
    try:
        popen.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _stop_jmeter(popen: subprocess.Popen, udp_port: int, problems: list[str]) -> None:
    """JMeter's own shutdown (finish current samples), then StopTestNow, then SIGTERM, then SIGKILL."""
    try:
        if popen.poll() is None:
            _send_command(udp_port, "Shutdown")
            if _wait(popen, SHUTDOWN_GRACE_S):
                return
            _send_command(udp_port, "StopTestNow")
            if _wait(popen, STOP_NOW_GRACE_S):
                return
            problems.append("JMeter ignored Shutdown/StopTestNow; terminated")
    except KeyboardInterrupt:                   # a second Ctrl-C: no more patience
        problems.append("stopped JMeter forcibly (second interrupt)")
    _kill(popen)


def _kill(popen: subprocess.Popen) -> None:
    if popen.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(popen.pid, sig)           # own session: the group is JMeter's JVM only
        except (ProcessLookupError, PermissionError):
            pass
        if _wait(popen, grace):
            return


def _plan(profile: LoadProfile | StepLoad, folder: JMeterFolder) -> Path:
    """The plan this profile runs: the lab's, or for an open model the lab's made open, kept in the run."""
    return open_plan(PLAN, folder.open_plan) if isinstance(profile, StepLoad) else PLAN


def _jmeter_command(java: str, jar: Path, log: Path, udp_port: int, profile: LoadProfile | StepLoad,
                    phase: list[_Target], path: str, folder: JMeterFolder) -> list[str]:
    props = {**ENGINE_PROPERTIES, **profile.properties(), "path": path,
             "jmeterengine.nongui.port": str(udp_port), "jmeterengine.nongui.maxport": str(udp_port)}
    active = {t.machine: t for t in phase}
    for machine in MACHINES:
        target = active.get(machine)
        props.update(profile.group_properties(machine, active=target is not None))
        if target is None:                      # this group idles, its results nowhere
            props[f"{machine}.results"] = os.devnull
            continue
        props.update({f"{machine}.protocol": target.protocol,
                      f"{machine}.host": target.host, f"{machine}.port": str(target.port),
                      f"{machine}.path": target.path,
                      f"{machine}.results": str(folder.results(machine))})
    return launch(java, jar, "-n", "-t", str(_plan(profile, folder)), "-j", str(log), *as_properties(props))


def _granularity_ms(duration_s: int) -> int:
    """Dashboard graph granularity: fine for short runs, smoother for long ones."""
    return 1000 if duration_s <= 300 else 5000 if duration_s <= 1800 else 10000


def _trim_partial_record(csv_path: Path) -> None:
    """A killed JMeter may leave half a line; the report generator would choke on it."""
    data = csv_path.read_bytes()
    complete, rest = _complete_records(data)
    if rest:
        with csv_path.open("r+b") as stream:
            stream.truncate(len(complete))


def _has_samples(csv_path: Path) -> bool:
    try:
        with csv_path.open("rb") as stream:
            stream.readline()
            return bool(stream.readline().strip())
    except OSError:
        return False


def _generate_dashboards(java: str, jar: Path, results: dict[str, Path], profile: LoadProfile | StepLoad,
                         out: JMeterFolder, problems: list[str]) -> dict[str, Path]:
    """JMeter's report generator (`-g results.csv -o dashboard`), one per machine, concurrently."""
    running: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    dashboards: dict[str, Path] = {}
    try:
        for machine, csv_path in results.items():
            if not _has_samples(csv_path):
                problems.append(f"{machine}: no samples, no dashboard")
                continue
            _trim_partial_record(csv_path)
            folder = out.dashboard_dir(machine)
            shutil.rmtree(folder, ignore_errors=True)
            log = out.dashboard_log(machine)
            scratch = out.dashboard_scratch(machine)
            shutil.rmtree(scratch, ignore_errors=True)
            command = launch(java, jar, "-g", str(csv_path), "-o", str(folder), "-j", str(log), *as_properties({
                **DASHBOARD_PROPERTIES,
                "jmeter.reportgenerator.overall_granularity": str(_granularity_ms(profile.duration_s)),
                "jmeter.reportgenerator.report_title": f"camel-tuning-lab: {machine}",
                "jmeter.reportgenerator.temp_dir": str(scratch)}))
            with out.dashboard_out(machine).open("w") as stream:
                popen = subprocess.Popen(command, cwd=jar.parent, stdout=stream, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            running[machine] = (popen, folder, log)
        deadline = time.monotonic() + DASHBOARD_TIMEOUT_S
        for machine, (popen, folder, log) in running.items():
            if not _wait(popen, max(1.0, deadline - time.monotonic())):
                _kill(popen)
                problems.append(f"{machine}: dashboard generation timed out")
            elif popen.returncode == 0 and (folder / "index.html").is_file():
                dashboards[machine] = folder / "index.html"
            else:
                problems.append(f"{machine}: dashboard generation failed (exit {popen.returncode}); see {log}")
    except KeyboardInterrupt:
        problems.append("dashboard generation interrupted")
    finally:
        for machine, (popen, _, _) in running.items():
            _kill(popen)
            shutil.rmtree(out.dashboard_scratch(machine), ignore_errors=True)
    return dashboards


def run(targets: dict[str, str], profile: LoadProfile | StepLoad, out_dir: Path, schedule: str = "parallel",
        on_progress: Callable[[dict], None] | None = None, *, path: str,
        progress_interval_s: float = 5.0, allow_any_host: bool = False,
        order: tuple[str, ...] | None = None, cpus: str | None = None) -> LoadResult:
    """Load the machines with the plan, then build each machine's dashboard.

    targets: machine ("default"/"tuned") -> base URL (http://10.213.1.2); the request path is `path`
    (a target URL's own path, if any, wins). schedule "parallel": one JMeter loads all machines at once;
    "sequential": one machine after the other, each with the full profile. Ctrl-C or SIGTERM stops
    JMeter cleanly, keeps what it measured, still builds the dashboards and returns interrupted=True.
    order: the machines' order in the sequential schedule (default: default first), so repeated trials can
    alternate it and drift favours neither machine. cpus: a cpulist JMeter is pinned to (taskset), the CPUs the
    placement gives the load generator; the affinity JMeter really had is in the result (loadgen_cpus).
    Writes the layout of lab.runfolder.JMeterFolder(out_dir): per machine results.csv and dashboard/."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    parsed = _parse_targets(targets, path, allow_any_host)
    if order is not None:
        parsed.sort(key=lambda target: order.index(target.machine) if target.machine in order else len(order))
    prepare()
    java = java_executable()
    home = jmeter_home()
    if home is None:
        raise LoadError("JMeter is not assembled: prepare() failed")
    jar = _runtime_jar(home)

    out = JMeterFolder(Path(out_dir).resolve())
    out.root.mkdir(parents=True, exist_ok=True)
    for target in parsed:                       # a fresh run: JMeter would append to old results
        out.machine_dir(target.machine).mkdir(exist_ok=True)
        out.results(target.machine).unlink(missing_ok=True)
        shutil.rmtree(out.dashboard_dir(target.machine), ignore_errors=True)
    log = out.log
    log.write_text("")
    out.loadgen.unlink(missing_ok=True)
    sampler = CpuSampler(out.loadgen)
    phases = [parsed] if schedule == "parallel" else [[target] for target in parsed]
    progress = {t.machine: _MachineProgress(t.machine, out.results(t.machine),
                                            watch=StepWatch(profile) if isinstance(profile, StepLoad) else None)
                for t in parsed}
    planned_s = profile.duration_s * len(phases)
    problems: list[str] = []
    affinity: list[str] = []                    # what each JMeter could run on, as the kernel says
    interrupted = False
    started_at, started = time.time(), time.monotonic()

    def report(now: float) -> None:
        if on_progress is not None:
            on_progress({"schedule": schedule, "elapsed_s": round(now - started, 1), "planned_s": planned_s,
                         "machines": {m: p.snapshot(now) for m, p in progress.items()}})

    with sigterm_as_interrupt():
        for phase in phases:
            try:
                complete = _run_phase(java, jar, phase, profile, out, len(phases) > 1, progress, report,
                                      progress_interval_s, problems, sampler, cpus, affinity)
            except KeyboardInterrupt:
                interrupted = True
                break
            if not complete:        # JMeter itself was killed: what it measured is kept, the run ends
                interrupted = True
                break
        results = {m: p.results for m, p in progress.items() if p.results.is_file()}
        dashboards = _generate_dashboards(java, jar, results, profile, out, problems)
        if "dashboard generation interrupted" in problems:
            interrupted = True
    return LoadResult(results=results, dashboards=dashboards, interrupted=interrupted, started_at=started_at,
                      ended_at=time.time(), schedule=schedule, profile=profile, problems=problems, log=log,
                      ended_early={m: p.ended_early_s for m, p in progress.items() if p.ended_early_s is not None},
                      loadgen_cpus=cpulist(cpu for found in affinity for cpu in parse_cpulist(found)) or None)


def _run_phase(java: str, jar: Path, phase: list[_Target], profile: LoadProfile | StepLoad, out: JMeterFolder,
               own_log: bool, progress: dict[str, _MachineProgress], report: Callable[[float], None],
               interval_s: float, problems: list[str], sampler: CpuSampler, cpus: str | None,
               affinity: list[str]) -> bool:
    """One JMeter process for the machines of this phase; KeyboardInterrupt after stopping it cleanly.
    False if JMeter was killed by a signal the lab did not send (the kernel's OOM killer sends SIGKILL)."""
    udp_port = _free_udp_port()
    log = out.log
    phase_log = out.phase_log(phase[0].machine) if own_log else log
    command = _jmeter_command(java, jar, phase_log, udp_port, profile, phase, phase[0].path, out)
    if cpus:
        command = ["taskset", "--cpu-list", cpus, *command]     # it sets the affinity, then execs JMeter
    popen = None
    machines = [progress[t.machine] for t in phase]
    # Bounded whatever happens: the plan stops itself at duration_s; past that plus the longest sample
    # and a margin, the lab stops it.
    overrun_s = profile.duration_s + profile.response_timeout_ms / 1000 + 60
    stopped = False
    try:
        with out.out.open("a") as stream:
            popen = subprocess.Popen(command, cwd=jar.parent, stdout=stream, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        sampler.sample(popen.pid, force=True)
        now = time.monotonic()
        for machine in machines:
            machine.start(now)
        next_report = now + interval_s
        observed = None
        while popen.poll() is None:
            time.sleep(0.2)
            sampler.sample(popen.pid)
            if observed is None and (observed := _affinity(popen.pid)) is not None:
                affinity.append(observed)
            now = time.monotonic()
            if now - machines[0].started > overrun_s:
                problems.append(f"JMeter ran past duration_s + {overrun_s - profile.duration_s:.0f} s; stopped it")
                _stop_jmeter(popen, udp_port, problems)
                stopped = True
                break
            if now >= next_report:
                for machine in machines:
                    machine.poll(now)
                report(now)
                next_report = now + interval_s
                if all(machine.broken for machine in machines):     # an open model's steps: nothing more to see
                    for machine in machines:
                        machine.ended_early_s = round(now - machines[0].started, 1)
                    _stop_jmeter(popen, udp_port, problems)
                    stopped = True
                    break
    except KeyboardInterrupt:
        if popen is not None:
            for machine in machines:
                machine.state = "stopping"
            _stop_jmeter(popen, udp_port, problems)
        _finish_phase(machines, popen, own_log, phase_log, log, problems)
        raise
    except BaseException:
        if popen is not None:
            _kill(popen)
        raise
    _finish_phase(machines, popen, own_log, phase_log, log, problems)
    if popen.returncode not in (0, None) and not any(m.samples for m in machines):
        raise LoadError(f"JMeter failed (exit {popen.returncode}) before any sample; see {phase_log} and "
                        f"{out.out}")
    report(time.monotonic())
    killed_by = _killed_by(popen.returncode)
    if killed_by and not stopped:
        lasted = time.monotonic() - machines[0].started
        problems.append(f"JMeter was killed by {killed_by} after {lasted:.0f} s of the planned {profile.duration_s} s "
                        "(SIGKILL: perhaps the kernel's OOM killer); the run is incomplete")
        return False
    return True


def _affinity(pid: int) -> str | None:
    """The CPUs JMeter may run on, as a cpulist; None while taskset has not yet set them and exec'd JMeter
    (on a busy host that can take longer than a poll), or when the process is gone."""
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() == "taskset":
            return None
        return cpulist(os.sched_getaffinity(pid))
    except OSError:
        return None


def _killed_by(returncode: int | None) -> str | None:
    """The signal that ended JMeter: killed outright (negative), or a JVM that exited on one (128 + n)."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 \
        if returncode - 128 in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM) else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _finish_phase(machines: list[_MachineProgress], popen: subprocess.Popen | None, own_log: bool,
                  phase_log: Path, log: Path, problems: list[str]) -> None:
    now = time.monotonic()
    for machine in machines:
        machine.finish(now)
    if popen is not None and popen.returncode and not _killed_by(popen.returncode):   # signals: see _run_phase
        problems.append(f"JMeter exited with {popen.returncode}; see {phase_log}")
    if own_log and phase_log.is_file():
        with log.open("a") as whole:
            whole.write(f"==== {', '.join(m.machine for m in machines)} ({phase_log}) ====\n")
            whole.write(phase_log.read_text(errors="replace"))

