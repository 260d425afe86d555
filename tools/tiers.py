#!/usr/bin/env python3
"""`make test` tier by tier: each tier's time against its budget, then the slowest tests, at the end of the log.

    python3 tools/tiers.py            every tier in order, stopping at the first that fails; the report either way
    python3 tools/tiers.py --report   the report of the last run (.cache/ci/)

A tier is a list of make targets. Its budget is what it may take on this project's 2-core machine from a clean
clone, so that the whole test command fits CI_BUDGET_S; a tier over its budget is reported, not failed (CI's own
limit is the hard one). Under CI (CI set), a tier that took longer on this host last time (HOST_RECORD) than is
left of CI's limit is not started: CI would be killed in it, and every tier before it lost. The log then says,
in its last lines, which tier did not run and why; `make TARGETS` runs it alone. A tier that runs past what is left
is stopped (its process group: SIGTERM, time to clean up, SIGKILL) and reported as stopped, so that CI's limit never
kills the whole run. Work that mostly waits (the VM test's box: downloads, a chroot's dpkg, single-threaded
steps) runs in the background from the end of one tier to the start of the tier that needs it (BACKGROUND): its
own time, exit and log are in the report, and the tier that waits for it counts the wait. The slowest tests are
read from the JUnit XML files the test runners write into .cache/ci/junit/ (pytest's --junitxml, Maven
Surefire's reports); the VM test's steps from its own log. Standard library only: it runs before the project's
venv exists.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / ".cache" / "ci"
JUNIT = OUT / "junit"
SUREFIRE = REPO / "app" / "target" / "surefire-reports"
VM_LOG = REPO / ".cache" / "vagrant" / "logs" / "run.log"
CI_BUDGET_S = 45 * 60
# CI's own hard limit, less room for the report and the clone's cleanup.
CI_LIMIT_S = 90 * 60
CI_MARGIN_S = 180
# A tier that runs past what is left of CI's limit is stopped (SIGTERM to its process group) and given this long to
# clean up (the VM test destroys its VMs) before it is killed.
STOP_GRACE_S = 120
# Each tier's last passing time on this host (or when it was stopped at CI's limit), kept outside the checkout (CI's clones are new every time).
HOST_RECORD = Path("/var/cache/camel-tuning-lab/tiers-last.json")
SLOWEST = 25


@dataclass(frozen=True)
class Tier:
    name: str
    budget_s: int
    targets: tuple[str, ...]
    # what it took on this project's machine from a clean clone, for a host that has no record of it yet (a CI
    # host's first run): under CI's limit it is not started either when that is more than is left
    measured_s: int | None = None


TIERS = (
    Tier("install and build", 300, ("deps", "vm-deps", "test-app")),
    Tier("fast tests", 150, ("lint", "test-mock", "test-fast")),
    Tier("integration", 1500, ("test-integration",)),
    # 1,007 s here on 2026-12-06, 238 s of it building the box (both VMs booted in 199 s, provisioned under emulation
    # in 226 s with Mitogen, 533 s without; status 23 s, the tuned VM provisioned again in 92 s, the quick run 199 s);
    # the box is now built beside the tiers before it (BACKGROUND).
    # Another host of this kind took 3,000 s (2026-11-29): one that runs past CI's limit is stopped, not CI.
    Tier("VM test", 750, ("test-vagrant",), measured_s=1700),
)


@dataclass(frozen=True)
class Background:
    """Make targets started in the background once `after` has passed, waited for before `before` starts."""
    name: str
    targets: tuple[str, ...]
    after: str
    before: str
    log: str        # under OUT


# The box takes 160-400 s to build on a fresh host (debootstrap and apt from the registry, a chroot's dpkg, one
# emulated boot), about half of the 2 CPUs: beside the fast and the non-lab integration tests, not after them.
# (The whole VM test beside them gained nothing, measured 2026-12-06: the fast tests 80 -> 255 s, the non-lab
# integration tests 314 -> 598 s, the VM test 558 -> 950 s; its emulated VMs and those tests are all CPU-bound.)
# When it is current (one copy per host), it is done in a second. The VM test builds it itself if this one failed.
BACKGROUND = (Background("the VM test's box", ("vm-box",), after="install and build", before="VM test",
                         log="vm-box.log"),)


@dataclass
class Timing:
    name: str
    budget_s: int
    seconds: float | None    # None: not run
    status: int | None
    not_run: str | None = None   # why it was not run, or did not finish
    stopped: bool = False        # started, then stopped at what was left of CI's limit


def last_times() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(HOST_RECORD.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def remember(name: str, seconds: float) -> None:
    try:
        HOST_RECORD.parent.mkdir(parents=True, exist_ok=True)
        HOST_RECORD.write_text(json.dumps({**last_times(), name: round(seconds)}, indent=1))
    except OSError:
        pass    # not root: nothing is remembered, and every tier runs


def run_within(argv: list[str], limit_s: float | None) -> int | None:
    """argv's exit status; None when it ran past limit_s and was stopped (its process group: make and what it runs
    get SIGTERM, then STOP_GRACE_S to clean up, then SIGKILL)."""
    # a group of its own only under a limit (CI): at a terminal, Ctrl-C must still reach make and what it runs
    with subprocess.Popen(argv, cwd=REPO, start_new_session=limit_s is not None) as process:
        try:
            return process.wait(timeout=None if limit_s is None else max(limit_s, 0))
        except subprocess.TimeoutExpired:
            stop(process)
            return None


@dataclass
class Started:
    job: Background
    process: subprocess.Popen
    began: float
    ended: float | None = None      # when it ended, seen by its watcher thread (not when a tier came to wait)
    status: int | None = None       # None: stopped unfinished
    watcher: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.watcher = threading.Thread(target=self._watch, name=self.job.name, daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        status = self.process.wait()
        self.ended, self.status = time.monotonic(), status

    def wait(self, limit_s: float | None) -> None:
        """Until it ends; past limit_s it is stopped, as a tier is (and said to be: no exit status)."""
        assert self.watcher is not None
        self.watcher.join(timeout=None if limit_s is None else max(limit_s, 0))
        if self.watcher.is_alive():
            stop(self.process)
            self.watcher.join()
            self.status = None

    def said(self) -> str:
        how = "passed" if self.status == 0 else "stopped unfinished" if self.status is None else f"exit {self.status}"
        took = (self.ended or time.monotonic()) - self.began
        return f"{self.job.name}: {took:.0f} s in the background, {how} (log: {OUT / self.job.log})"


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to its process group, STOP_GRACE_S to clean up, then SIGKILL."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run(tiers: tuple[Tier, ...] = TIERS, make: tuple[str, ...] = ("make", "--no-print-directory"),
        deadline_s: float | None = None, background: tuple[Background, ...] = BACKGROUND) -> int:
    """Each tier in order; with a deadline (seconds from now), a tier that would not finish by then is not started,
    and one that runs past it is stopped (said, as a tier not run: CI's limit would have killed the whole run)."""
    began = time.monotonic()
    last = last_times()
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in [*JUNIT.glob("*.xml"), VM_LOG, *(OUT / job.log for job in background)]:   # an earlier run's
        stale.unlink(missing_ok=True)
    started: list[Started] = []
    try:
        return _tiers(tiers, make, deadline_s, background, began, last, started)
    finally:
        for job in started:     # still running: the tier it was for will not run (an earlier one failed)
            job.wait(0)
        (OUT / "background.json").write_text(json.dumps([job.said() for job in started], indent=1))
        report()


def _tiers(tiers: tuple[Tier, ...], make: tuple[str, ...], deadline_s: float | None,
           background: tuple[Background, ...], began: float, last: dict[str, float], started: list[Started]) -> int:
    timings: list[Timing] = []
    failed = 0
    for tier in tiers:
        left = None if deadline_s is None else deadline_s - (time.monotonic() - began)
        awaited = [job for job in started if job.job.before == tier.name]
        if failed:
            timings.append(Timing(tier.name, tier.budget_s, None, None, "an earlier tier failed"))
        elif (left is not None and (known := last.get(tier.name, tier.measured_s)) is not None
              and known > left - STOP_GRACE_S):
            took = (f"it took {known:.0f} s on this host last time" if tier.name in last else
                    f"it takes about {known:.0f} s (measured on this project's machine; no record on this host)")
            why = f"{took}, and {left:.0f} s were left of CI's {CI_LIMIT_S} s; run it alone: make {' '.join(tier.targets)}"
            print(f"tiers: {tier.name}: NOT RUN: {why}", flush=True)
            timings.append(Timing(tier.name, tier.budget_s, None, None, why))
        else:
            print(f"tiers: {tier.name} (make {' '.join(tier.targets)}; budget {tier.budget_s} s)", flush=True)
            start = time.monotonic()
            for job in awaited:         # counted in this tier's time: it waits for it
                if job.ended is None:
                    print(f"tiers: waiting for {job.job.name} (started {start - job.began:.0f} s ago)", flush=True)
                job.wait(None if left is None else left - STOP_GRACE_S)
                print(f"tiers: {job.said()}", flush=True)
            waited = time.monotonic() - start
            status = run_within([*make, *tier.targets], None if left is None else left - STOP_GRACE_S - waited)
            took = time.monotonic() - start
            if status is None:
                why = (f"stopped after {took:.0f} s, at what was left of CI's {CI_LIMIT_S} s; "
                       f"run it alone: make {' '.join(tier.targets)}")
                print(f"tiers: {tier.name}: STOPPED: {why}", flush=True)
                timings.append(Timing(tier.name, tier.budget_s, None, None, why, stopped=True))
                remember(tier.name, took)       # at least that long: next time it is not started with less left
            else:
                failed = status
                timings.append(Timing(tier.name, tier.budget_s, took, failed))
                print(f"tiers: {tier.name}: {took:.0f} s, exit {failed}", flush=True)
                if not failed:
                    remember(tier.name, took)
                    started.extend(_start(job, make) for job in background if job.after == tier.name)
        # after every tier: a run killed halfway (CI's limit) still leaves what it measured
        (OUT / "tiers.json").write_text(json.dumps([asdict(t) for t in timings], indent=1))
    return failed


def _start(job: Background, make: tuple[str, ...]) -> Started:
    """A background job started, its output into its log."""
    print(f"tiers: {job.name} (make {' '.join(job.targets)}) in the background until {job.before}", flush=True)
    with (OUT / job.log).open("w") as log:
        process = subprocess.Popen([*make, *job.targets], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return Started(job, process, time.monotonic())


def slowest_tests() -> list[tuple[float, str]]:
    cases: list[tuple[float, str]] = []
    for path in [*sorted(JUNIT.glob("*.xml")), *sorted(SUREFIRE.glob("TEST-*.xml"))]:
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError):
            continue
        for case in root.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            cases.append((float(case.get("time") or 0), name))
    return sorted(cases, reverse=True)[:SLOWEST]


def vm_steps() -> list[str]:
    """The VM test's steps with the seconds each took (its log stamps each step with seconds since it began)."""
    if not VM_LOG.is_file():
        return []
    steps = [(int(m[1]), m[2]) for m in re.finditer(r"^run: \[(\d+)s\] (.*)$", VM_LOG.read_text(), re.M)]
    return [f"{later[0] - at:6d} s  {what[:110]}" for (at, what), later in zip(steps, steps[1:])]


def report() -> None:
    timings = [Timing(**t) for t in json.loads((OUT / "tiers.json").read_text())] if (OUT / "tiers.json").is_file() else []
    print(f"\ntiers: the {SLOWEST} slowest tests (setup and teardown included)")
    for seconds, name in slowest_tests():
        print(f"  {seconds:8.1f} s  {name}")
    if steps := vm_steps():
        print("tiers: the VM test's steps")
        print("\n".join(f"  {line}" for line in steps))
    print("tiers: each tier's time against its budget")
    total = 0.0
    for t in timings:
        if t.seconds is None:
            print(f"  {t.name:<18} {'STOPPED' if t.stopped else 'NOT RUN'}: {t.not_run or 'an earlier tier failed'}")
            continue
        total += t.seconds
        over = "" if t.seconds <= t.budget_s else f"  OVER by {t.seconds - t.budget_s:.0f} s"
        print(f"  {t.name:<18} {t.seconds:7.0f} s of {t.budget_s:5d} s{over}{'' if t.status == 0 else '  FAILED'}")
    over = "" if total <= CI_BUDGET_S else f"  OVER by {total - CI_BUDGET_S:.0f} s"
    print(f"  {'all tiers':<18} {total:7.0f} s of {CI_BUDGET_S:5d} s{over}")
    if (OUT / "background.json").is_file():     # beside the tiers, so not in their sum; the tier after waited for it
        for line in json.loads((OUT / "background.json").read_text()):
            print(f"  beside them: {line}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report()
        sys.exit(0)
    if sys.argv[1:]:
        sys.exit(f"tiers: unknown argument {' '.join(sys.argv[1:])!r} (use no argument, or --report)")
    os.chdir(REPO)
    sys.exit(run(deadline_s=CI_LIMIT_S - CI_MARGIN_S if os.environ.get("CI") else None))
