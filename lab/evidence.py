"""Collects what a run leaves on the machines into the run folder: PCP archives, GC logs, the
service's and HTTPD's logs, crash files, and the processes that died during the run."""
from __future__ import annotations

import json
import re
import shutil
import time
from datetime import datetime
from pathlib import Path

from lab.progress import StepFailed

ARCHIVE = "current"  # pmlogger's archive on the machine (ansible/roles/pcp/tasks/service.yml)
# Files worth keeping, relative to the machine's lab_home: where -> what.
LOGS = {
    "logs": ["app/logs/app.log", "httpd/logs/error.log", "logs/camel-app.out", "logs/httpd.out",
             "logs/mock-service.out", "logs/pmcd.out", "logs/supervisord.log", "pcp/logs/pmcd.log",
             "pcp/logs/linux.log", "pcp/logs/proc.log", "pcp/logs/apache.log",
             "pcp/logs/openmetrics.log", "pcp/archives/pmlogger.log"],
}
# supervisord's log line for a process that ended: "2026-11-22 05:07:41,123 WARN exited: camel-app (terminated by SIGKILL; not expected)"
EXITED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ \w+ exited: (\S+) \((.+?)\)$", re.M)


def start_recording(backend, name: str) -> dict:
    """A fresh PCP archive for this run, and the machine's peak-memory counter restarted; returns
    the kernel's memory counters before the run, to count what happens during it."""
    archives = backend.home(name) / "pcp" / "archives"
    for old in archives.glob(f"{ARCHIVE}.*"):
        old.unlink()
    backend.begin_measurement(name)
    result = backend.control(name, "start", "pmlogger")
    if result.returncode != 0:
        raise StepFailed(f"{name}: pmlogger did not start: {result.stdout.strip()} {result.stderr.strip()}")
    return backend.memory_events(name)


def stop_recording(backend, name: str) -> None:
    backend.control(name, "stop", "pmlogger")


def _copy(source: Path, destination: Path) -> bool:
    if not source.is_file():
        return False
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, destination)
    return True


def process_exits(supervisord_log: Path, since: float, until: float) -> list[dict]:
    """Processes supervisord saw end during the run, with the reason it gave."""
    exits = []
    text = supervisord_log.read_text(errors="replace") if supervisord_log.is_file() else ""
    for stamp, process, reason in EXITED.findall(text):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()
        if since <= at <= until + 1 and process != "pmlogger":
            exits.append({"process": process, "at": at, "reason": reason})
    return exits


def _memory_during_run(before: dict, after: dict) -> dict:
    """OOM kills during the run; the cgroup's peak usage, which on cgroup v1 counts page cache too
    (the audit log fills it), so the resident-memory peak comes from PCP instead."""
    kills = None if after.get("oom_kills") is None else after["oom_kills"] - (before.get("oom_kills") or 0)
    return {"oom_kills": kills, "peak_cgroup_usage_bytes": after.get("peak_memory_bytes"), "peak_memory_bytes": None}


def collect(backend, name: str, run_dir: Path, started_at: float, ended_at: float, memory_before: dict) -> dict:
    """Copies one machine's evidence into run_dir/machines/<name>/; returns what was found missing."""
    home = backend.home(name)
    target = run_dir / "machines" / name
    missing = []
    for part in (home / "pcp" / "archives").glob(f"{ARCHIVE}.*"):
        _copy(part, target / "pcp" / part.name.replace(ARCHIVE, name, 1))
    if not (target / "pcp").is_dir():
        missing.append("PCP archive")
    gc_logs = sorted((home / "app" / "gc").glob("gc.log*"))
    for log in gc_logs:
        _copy(log, target / "gc" / log.name)
    if not gc_logs:
        missing.append("GC log")
    for folder, files in LOGS.items():
        for relative in files:
            _copy(home / relative, target / folder / Path(relative).name)
    for crash in [*(home / "app").glob("hs_err_pid*.log"), *(home / "app" / "dumps").glob("*.hprof")]:
        _copy(crash, target / "crash" / crash.name)
    events = {"process_exits": process_exits(home / "logs" / "supervisord.log", started_at, ended_at),
              **_memory_during_run(memory_before, backend.memory_events(name)), "missing": missing,
              "collected_at": time.time()}
    target.mkdir(parents=True, exist_ok=True)
    (target / "events.json").write_text(json.dumps(events, indent=2))
    return events
