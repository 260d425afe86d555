"""./start.sh run: both machines loaded side by side, their evidence collected into runs/<id>/,
then the summary and the report made from it."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from lab import evidence, load, report, status
from lab.errors import StepFailed
from lab.machines import MACHINES, manifest
from lab.machines.protocol import Backend
from lab.paths import ANSIBLE_DIR, REPO, VENV
from lab.progress import info, step
from lab.runfolder import RunFolder

KNOB_PREFIXES = ("httpd_", "camel_app_", "tomcat_native_", "mock_service_", "pcp_")


def _knobs(backend: Backend) -> dict:
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


def _make_report(run: RunFolder) -> Path | None:
    """summary.json and report/index.html; a failure is reported, the run folder stays."""
    try:
        return report.render(run.root)
    except Exception as error:  # noqa: BLE001  (the evidence is kept whatever the report's trouble)
        info(f"the report could not be made: {type(error).__name__}: {error}")
        return None


def run(backend: Backend, profile: load.LoadProfile, schedule: str) -> int:
    with step("Checking both machines answer"):
        observed = {name: status.observe(backend, name) for name in MACHINES}
        down = [f"{name} ({m['url']} -> {m.get('http_status')})" for name, m in observed.items()
                if m.get("http_status") != 200]
        if down:
            raise StepFailed(f"not answering: {', '.join(down)}; run ./start.sh up first")
    with step("Preparing JMeter"):
        load.prepare()
    folder = RunFolder.create()
    info(f"run folder: {folder.root.relative_to(REPO)}")
    folder.write_json(folder.status_json, {"backend": backend.name, "note": backend.emulation_note, "machines": observed})
    folder.write_json(folder.knobs_json, _knobs(backend))

    with step("Starting PCP's logger on both machines"):
        memory_before = {name: evidence.start_recording(backend, name) for name in MACHINES}
    planned = profile.duration_s * (2 if schedule == "sequential" else 1)
    title = (f"Loading both machines ({schedule}: {profile.users} users each, ramp {profile.ramp_s} s, "
             f"{profile.duration_s} s{' per machine' if schedule == 'sequential' else ''}; Ctrl-C stops cleanly)")
    with step(title):
        wiring = {name: manifest.read(name) for name in MACHINES}
        targets = {name: wiring[name].base_url for name in MACHINES}
        try:
            result = load.run(targets, profile, folder.jmeter.root, schedule=schedule, on_progress=load.print_progress,
                              path=wiring["default"].service_path)
        finally:
            for name in MACHINES:
                evidence.stop_recording(backend, name)
    with step("Collecting PCP archives, GC logs and logs"):
        for name in MACHINES:
            events = evidence.collect(backend, name, folder, result.started_at, result.ended_at, memory_before[name])
            for exit_ in events["process_exits"]:
                info(f"{name}: {exit_['process']} exited during the run ({exit_['reason']})")
            if events["oom_kills"]:
                info(f"{name}: the kernel's OOM killer struck {events['oom_kills']} time(s)")
            if events["missing"]:
                info(f"{name}: missing {', '.join(events['missing'])}")
    folder.write_json(folder.run_json, {
        "run_id": folder.root.name, "backend": backend.name, "backend_note": backend.emulation_note,
        "schedule": schedule, "profile": asdict(profile), "planned_s": planned,
        "started_at": result.started_at, "ended_at": result.ended_at, "interrupted": result.interrupted,
        "problems": result.problems, "host": _environment(),
        "machine_homes": {name: str(backend.home(name)) for name in MACHINES},
        "versions": {"lab": subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                           capture_output=True, text=True).stdout.strip()},
    })
    with step("Summarising and writing the report"):
        page = _make_report(folder)
    print(f"\nRun folder: {folder.root}", file=sys.stderr)
    for name, dashboard in result.dashboards.items():
        print(f"  JMeter dashboard ({name}): {dashboard}", file=sys.stderr)
    if page:
        print(f"Report: {page}", file=sys.stderr)
    return 130 if result.interrupted else 0
