"""Collects what a run leaves on the machines into the run folder: PCP archives, GC logs, the
service's and HTTPD's logs, crash files, and the processes that died during the run."""
from __future__ import annotations

import glob
import re
import shutil
import time
from datetime import datetime
from pathlib import Path

from lab.errors import StepFailed
from lab.machines import manifest
from lab.machines.protocol import Backend
from lab.names import at_once
from lab.runfolder import RunFolder

# supervisord's log line for a process that ended: "2026-11-22 05:07:41,123 WARN exited: camel-app (terminated by SIGKILL; not expected)"
EXITED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ \w+ exited: (\S+) \((.+?)\)$", re.M)
# systemd's, in `journalctl -o short-unix`: "1763790461.123456 lab-tuned systemd[1]: camel-app.service: Main
# process exited, code=killed, status=9/KILL", and the OOM killer's verdict on a unit.
SYSTEMD_EXITED = re.compile(r"^(\d+\.\d+) \S+ systemd\[1\]: ([\w@.-]+)\.service: "
                            r"(Main process exited, code=\w+, status=\S+|A process of this unit has been killed by the OOM killer)",
                            re.M)
# The lab's own processes whose end is part of the run, not news: the logger stops when the load does.
EXPECTED_TO_STOP = {"pmlogger"}


def start_recording(backend: Backend, name: str) -> dict:
    """A fresh PCP archive for this run, and the machine's peak-memory counter restarted; returns
    the kernel's memory counters before the run, to count what happens during it."""
    wiring = manifest.read(name)
    backend.remove(name, f"{wiring.pcp_archive}.*")
    backend.begin_measurement(name)
    # pmlogger records the service's metrics the openmetrics agent knows when it starts; a fetch
    # makes the agent scrape the service again and learn names that appeared since (see site.yml).
    backend.run_in(name, ["pminfo", "-h", wiring.pmcd, "-f", "openmetrics.app"], timeout=60)
    result = backend.control(name, "start", "pmlogger")
    if result.returncode != 0:
        raise StepFailed(f"{name}: pmlogger did not start: {result.stdout.strip()} {result.stderr.strip()}")
    return backend.memory_events(name)


def stop_recording(backend: Backend, name: str) -> None:
    backend.control(name, "stop", "pmlogger")


def stop_all(backend: Backend, names: list[str]) -> dict[str, Exception]:
    """Each machine's logger stopped, all at once (on a VM each stop is an Ansible call of seconds); returns the
    machines whose stop failed, with why (the caller says or raises it, once every other one is stopped)."""
    def stop(name: str) -> Exception | None:
        try:
            stop_recording(backend, name)
            return None
        except Exception as error:  # noqa: BLE001  (returned, not lost)
            return error
    return {name: error for name, error in zip(names, at_once(stop, names), strict=True) if error is not None}


def process_exits(supervisord_log: Path, since: float, until: float) -> list[dict]:
    """Processes supervisord saw end during the run, with the reason it gave."""
    exits = []
    text = supervisord_log.read_text(errors="replace") if supervisord_log.is_file() else ""
    for stamp, process, reason in EXITED.findall(text):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()
        if since <= at <= until + 1 and process not in EXPECTED_TO_STOP:
            exits.append({"process": process, "at": at, "reason": reason})
    return exits


def systemd_exits(journal: str, since: float, until: float) -> list[dict]:
    """The same from systemd's journal (machines where the services are systemd units)."""
    exits = []
    for stamp, unit, reason in SYSTEMD_EXITED.findall(journal):
        at = float(stamp)
        if since <= at <= until + 1 and unit not in EXPECTED_TO_STOP:
            exits.append({"process": unit, "at": at, "reason": reason})
    return exits


def _memory_during_run(before: dict, after: dict) -> dict:
    """OOM kills during the run; the cgroup's peak usage, which on cgroup v1 counts page cache too
    (the audit log fills it), so the resident-memory peak comes from PCP instead."""
    kills = None if after.get("oom_kills") is None else after["oom_kills"] - (before.get("oom_kills") or 0)
    return {"oom_kills": kills, "peak_cgroup_usage_bytes": after.get("peak_memory_bytes"), "peak_memory_bytes": None}


def _keep_crash_files_private_and_off_the_machine(backend: Backend, name: str, run: RunFolder,
                                                  arrived: list[str]) -> None:
    """Heap dumps hold the service's memory, the AJP secret included: in the run folder only their owner
    reads them. Once there, they leave the machine (those that arrived, nothing else), so the next run
    does not report them again."""
    crash = run.evidence(name, "crash")
    if not crash.is_dir():
        return
    crash.chmod(0o700)
    for path in crash.iterdir():
        path.chmod(0o600)
    for relative in arrived:
        backend.remove(name, glob.escape(relative))


def collect(backend: Backend, name: str, run: RunFolder, started_at: float, ended_at: float,
            memory_before: dict) -> dict:
    """Copies one machine's evidence into machines/<name>/ of the run; returns its events (deaths, OOM kills, gaps)."""
    wiring = manifest.read(name)
    archive = Path(wiring.pcp_archive).name
    target = run.machine_dir(name)
    staging = target / ".pulled"
    pulled = backend.pull(name, [glob for globs in wiring.evidence.values() for glob in globs], staging)
    crash_files = []
    for kind, patterns in wiring.evidence.items():
        for pattern in patterns:
            for source in sorted(staging.glob(pattern)):
                # The archive is named after the machine, so both machines' archives can sit side by side.
                file_name = source.name.replace(archive, name, 1) if kind == "pcp" else source.name
                run.evidence(name, kind).mkdir(parents=True, exist_ok=True)
                shutil.move(source, run.evidence(name, kind) / file_name)
                if kind == "crash":
                    crash_files.append(str(source.relative_to(staging)))
    shutil.rmtree(staging, ignore_errors=True)
    _keep_crash_files_private_and_off_the_machine(backend, name, run, crash_files)
    missing = [what for kind, what in (("pcp", "PCP archive"), ("gc", "GC log")) if not run.evidence(name, kind).is_dir()]
    if pulled.problem:
        missing.append(f"files from the machine ({pulled.problem})")
    if backend.service_manager == "systemd":
        journal = backend.journal(name, started_at, ended_at)
        run.write_text(run.evidence(name, "logs") / "journal.log", journal)
        exits = systemd_exits(journal, started_at, ended_at)
    else:
        exits = process_exits(run.evidence(name, "logs") / "supervisord.log", started_at, ended_at)
    events = {"process_exits": exits, **_memory_during_run(memory_before, backend.memory_events(name)),
              "missing": missing, "collected_at": time.time()}
    run.write_json(run.events_json(name), events)
    return events
