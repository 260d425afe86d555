"""./start.sh run: both machines loaded side by side, their evidence collected into runs/<id>/,
then the summary and the report made from it."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from lab import evidence, load, status
from lab.backend import MACHINES
from lab.paths import ANSIBLE_DIR, REPO, VENV
from lab.progress import StepFailed, info, step

RUNS = REPO / "runs"
KNOB_PREFIXES = ("httpd_", "camel_app_", "tomcat_native_", "mock_service_", "pcp_")


def _knobs(backend) -> dict:
    """Each machine's knobs as written in ansible/host_vars (templated values stay unrendered)."""
    knobs = {}
    for name in MACHINES:
        result = subprocess.run([str(VENV / "bin" / "ansible-inventory"), "-i", str(backend.inventory),
                                 "--playbook-dir", str(ANSIBLE_DIR), "--host", name],
                                capture_output=True, text=True)
        hostvars = json.loads(result.stdout) if result.returncode == 0 else {}
        knobs[name] = {k: v for k, v in sorted(hostvars.items()) if k.startswith(KNOB_PREFIXES)}
    return knobs


def _environment() -> dict:
    meminfo = Path("/proc/meminfo").read_text()
    memory_kb = int(meminfo.split("MemTotal:")[1].split()[0])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {"cpus": os.cpu_count(), "memory_bytes": memory_kb * 1024, "kernel": platform.release(),
            "os": platform.platform(), "python": platform.python_version(), "java": java[0] if java else None}


def _new_run_dir() -> Path:
    run_id = time.strftime("%Y%m%d-%H%M%S")
    run_dir = RUNS / run_id
    run_dir.mkdir(parents=True)
    latest = RUNS / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(run_id)
    return run_dir


def _make_report(run_dir: Path) -> Path | None:
    """summary.json and report/index.html, made by lab.report in the venv (its plotting library)."""
    result = subprocess.run([str(VENV / "bin" / "python"), "-m", "lab.report", str(run_dir)],
                            cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        info(f"the report could not be made: {result.stderr.strip()[-2000:]}")
        return None
    return Path(result.stdout.strip().splitlines()[-1])


def run(backend, profile: load.LoadProfile, schedule: str) -> int:
    with step("Checking both machines answer"):
        observed = {name: status.observe(backend, name) for name in MACHINES}
        down = [f"{name} ({m['url']} -> {m.get('http_status')})" for name, m in observed.items()
                if m.get("http_status") != 200]
        if down:
            raise StepFailed(f"not answering: {', '.join(down)}; run ./start.sh up first")
    with step("Preparing JMeter"):
        load.prepare()
    run_dir = _new_run_dir()
    info(f"run folder: {run_dir.relative_to(REPO)}")
    (run_dir / "status.json").write_text(json.dumps(
        {"backend": backend.name, "note": backend.emulation_note, "machines": observed}, indent=2))
    (run_dir / "knobs.json").write_text(json.dumps(_knobs(backend), indent=2))

    with step("Starting PCP's logger on both machines"):
        memory_before = {name: evidence.start_recording(backend, name) for name in MACHINES}
    planned = profile.duration_s * (2 if schedule == "sequential" else 1)
    title = (f"Loading both machines ({schedule}: {profile.users} users each, ramp {profile.ramp_s} s, "
             f"{profile.duration_s} s{' per machine' if schedule == 'sequential' else ''}; Ctrl-C stops cleanly)")
    with step(title):
        def show(progress: dict) -> None:
            print(load.progress_bar(progress), file=sys.stderr)
            print(load.format_progress(progress), file=sys.stderr, flush=True)
        targets = {name: f"http://{backend.address(name)}" for name in MACHINES}
        try:
            result = load.run(targets, profile, run_dir / "jmeter", schedule=schedule, on_progress=show)
        finally:
            for name in MACHINES:
                evidence.stop_recording(backend, name)
    with step("Collecting PCP archives, GC logs and logs"):
        for name in MACHINES:
            events = evidence.collect(backend, name, run_dir, result.started_at, result.ended_at, memory_before[name])
            for exit_ in events["process_exits"]:
                info(f"{name}: {exit_['process']} exited during the run ({exit_['reason']})")
            if events["oom_kills"]:
                info(f"{name}: the kernel's OOM killer struck {events['oom_kills']} time(s)")
            if events["missing"]:
                info(f"{name}: missing {', '.join(events['missing'])}")
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": run_dir.name, "backend": backend.name, "backend_note": backend.emulation_note,
        "schedule": schedule, "profile": asdict(profile), "planned_s": planned,
        "started_at": result.started_at, "ended_at": result.ended_at, "interrupted": result.interrupted,
        "problems": result.problems, "host": _environment(),
        "machine_homes": {name: str(backend.home(name)) for name in MACHINES},
        "versions": {"lab": subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                           capture_output=True, text=True).stdout.strip()},
    }, indent=2))
    with step("Summarising and writing the report"):
        report = _make_report(run_dir)
    print(f"\nRun folder: {run_dir}", file=sys.stderr)
    for name, dashboard in result.dashboards.items():
        print(f"  JMeter dashboard ({name}): {dashboard}", file=sys.stderr)
    if report:
        print(f"Report: {report}", file=sys.stderr)
    return 130 if result.interrupted else 0
