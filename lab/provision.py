"""Builds what the machines run and applies the Ansible playbook."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lab import given_knobs, profiles
from lab.errors import StepFailed
from lab.paths import ANSIBLE_DIR, JAR, LOGS, PLAYBOOK, REPO, VENV
from lab.progress import info, run_logged

BUILD_LOG = LOGS / "build-service.log"
BUILD_TIMEOUT_S = 1800
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def build_service() -> None:
    """The service jar, rebuilt when a source is newer than it."""
    sources = [p for p in (REPO / "app" / "src").rglob("*") if p.is_file()] + [REPO / "app" / "pom.xml"]
    if JAR.is_file() and max(p.stat().st_mtime for p in sources) <= JAR.stat().st_mtime:
        info(f"{JAR.relative_to(REPO)} is up to date")
        return
    BUILD_LOG.parent.mkdir(parents=True, exist_ok=True)
    command = [str(REPO / "mvnw"), "-B", "-ntp", "-f", "app/pom.xml", "package", "-DskipTests"]
    try:
        result = run_logged(command, BUILD_LOG, "Maven", BUILD_TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"building the service took over {BUILD_TIMEOUT_S / 60:.0f} min; see {BUILD_LOG}") from None
    if result.returncode != 0:
        tail = "\n".join(BUILD_LOG.read_text(errors="replace").strip().splitlines()[-20:])
        raise StepFailed(f"building the service failed (./mvnw -f app/pom.xml package); the log: {BUILD_LOG}\n{tail}")


@dataclass
class PlaybookResult:
    returncode: int
    changed: dict[str, int]
    failed: dict[str, int]
    log: Path


def run_playbook(inventory: Path, log_dir: Path, limit: str | None = None,
                 given: dict[str, Path] | None = None, playbook: Path = PLAYBOOK,
                 variables: dict | None = None, knobs_only: bool = False) -> PlaybookResult:
    """Runs site.yml (or another playbook of ansible/); prints each task as it starts, keeps the full output in
    a log file. limit: the hosts (comma separated); given: a knobs file per machine, which wins over the machine's
    own knobs (an A/A run gives the tuned machine the default one's, an ablation a configuration to each machine of
    a pair, in one run), else what up --knobs gave it (lab/given_knobs.py); variables: extra vars, which win over every other; knobs_only: skips the tasks tagged base
    (packages, accounts, folders, the build's files, PCP, the mock backend: what no tuning knob changes), for
    machines `up` provisioned (an A/A run, an ablation; tests/test_ansible.py checks no knob reaches those tasks)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"ansible-{time.strftime('%Y%m%d-%H%M%S')}.log"
    command = [str(VENV / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    if limit:
        command += ["--limit", limit]
    if playbook == PLAYBOOK:            # what up --knobs gave a machine, unless this run gives it something else
        given = {**given_knobs.files(), **(given or {})}
    if given:
        command += ["--extra-vars", json.dumps({"lab_given_knobs": {m: str(path) for m, path in given.items()}})]
    if variables:
        command += ["--extra-vars", json.dumps(variables)]
    if knobs_only:
        command += ["--skip-tags", "base"]
    if playbook == PLAYBOOK:            # the machine profile, last: both machines get it, whatever else they get
        command += profiles.extra_vars()
    env = {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
           "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '')}"}
    changed: dict[str, int] = {}
    failed: dict[str, int] = {}
    with log.open("w") as sink, subprocess.Popen(command, cwd=ANSIBLE_DIR, env=env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None       # stdout=PIPE
        for line in process.stdout:
            sink.write(line)
            if line.startswith("TASK ["):
                info(line.strip(" *\n"))
            elif line.startswith(("fatal:", "failed:", "ERROR!", "[ERROR]")):
                info(line.rstrip())
            elif match := RECAP.match(line):
                changed[match[1]] = int(match[3])
                failed[match[1]] = int(match[4]) + int(match[5])
    return PlaybookResult(process.returncode, changed, failed, log)
