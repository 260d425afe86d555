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
from lab.paths import ANSIBLE_DIR, JAR, LOGS, MODERN_JAR, PLAYBOOK, REPO, VENV, shown
from lab.progress import info, run_logged

BUILD_TIMEOUT_S = 1800
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


@dataclass(frozen=True)
class Build:
    """One of the service's builds (app/README.md, "Two stacks, one service"): its pom, its jar, and the sources
    newer than which the jar is rebuilt."""
    stack: str
    pom: Path
    jar: Path
    sources: tuple[Path, ...]

    @property
    def log(self) -> Path:
        return LOGS / f"build-service-{self.stack}.log"


# Both, whatever the machines' stacks now: a later `up --knobs` may switch either machine to the other.
BUILDS = (Build("classic", REPO / "app" / "pom.xml", JAR,
                (REPO / "app" / "src" / "main", REPO / "app" / "src" / "classic", REPO / "app" / "pom.xml")),
          Build("modern", REPO / "app" / "modern" / "pom.xml", MODERN_JAR,
                (REPO / "app" / "src" / "main", REPO / "app" / "modern" / "src" / "main",
                 REPO / "app" / "modern" / "pom.xml")))


def _newest(paths: tuple[Path, ...]) -> float:
    files = [p for path in paths for p in ((path,) if path.is_file() else path.rglob("*")) if p.is_file()]
    return max((p.stat().st_mtime for p in files), default=0.0)


def build_service(builds: tuple[Build, ...] = BUILDS) -> None:
    """Each stack's service jar, rebuilt when a source is newer than it."""
    for build in builds:
        if build.jar.is_file() and _newest(build.sources) <= build.jar.stat().st_mtime:
            info(f"{shown(build.jar)} is up to date")
            continue
        build.log.parent.mkdir(parents=True, exist_ok=True)
        pom = build.pom.relative_to(REPO)
        command = [str(REPO / "mvnw"), "-B", "-ntp", "-f", str(pom), "package", "-DskipTests"]
        try:
            result = run_logged(command, build.log, f"Maven ({build.stack} stack)", BUILD_TIMEOUT_S, cwd=REPO)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"building the {build.stack} stack's service took over {BUILD_TIMEOUT_S / 60:.0f} min; "
                             f"see {build.log}") from None
        if result.returncode != 0:
            tail = "\n".join(build.log.read_text(errors="replace").strip().splitlines()[-20:])
            raise StepFailed(f"building the {build.stack} stack's service failed (./mvnw -f {pom} package); "
                             f"the log: {build.log}\n{tail}")


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
    said = ""
    with log.open("w") as sink, subprocess.Popen(command, cwd=ANSIBLE_DIR, env=env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None       # stdout=PIPE
        for line in process.stdout:
            sink.write(line)
            if line.startswith("TASK ["):
                if (task := line.strip(" *\n")) != said:   # once: a meta task's banner (flush_handlers) comes per host
                    said = task
                    info(said)
            elif line.startswith(("fatal:", "failed:", "ERROR!", "[ERROR]")):
                info(line.rstrip())
            elif match := RECAP.match(line):
                changed[match[1]] = int(match[3])
                failed[match[1]] = int(match[4]) + int(match[5])
    return PlaybookResult(process.returncode, changed, failed, log)
