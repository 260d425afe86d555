"""The host's limits beside each machine, measured in the same run (`./start.sh run --limits`): the service hit
on its own HTTP port without HTTPD, and the mock backend alone, each at the run's concurrency, one machine and
one limit after the other, after both machines' own load and its evidence. With them "HTTPD costs 20%" or "the
backend set the pace" is a figure (lab/analysis/limits.py), not a guess. They never fail the run: what went
wrong is among its problems.

Both ports listen on the machine's loopback only: JMeter enters the machine's network (the backend's
network_prefix) but not its cgroup, and stays on the load generator's CPUs. A limit's load is the run's, made
shorter: at most MAX_S, with a ramp-up of at most RAMP_MAX_S."""
from __future__ import annotations

from dataclasses import replace

from lab import load
from lab.errors import LabError, StepFailed
from lab.machines.manifest import Manifest
from lab.machines.protocol import Backend
from lab.names import MACHINES
from lab.progress import step
from lab.runfolder import RunFolder

# What each limit loads, in the report's words.
KINDS = {"direct": "the service without HTTPD", "mock": "the mock backend alone"}
MAX_S = 120
RAMP_MAX_S = 20


def profile_for(profile: load.LoadProfile) -> load.LoadProfile:
    """The run's load for a limit: the same users, think time, timeouts and keep-alive, shorter."""
    duration = min(profile.duration_s, MAX_S)
    return replace(profile, duration_s=duration, ramp_s=min(profile.ramp_s, RAMP_MAX_S, duration // 3))


def target(wiring: Manifest, kind: str) -> str:
    """The URL a limit loads, as the machine's own processes reach it (its loopback)."""
    found = wiring.app_path if kind == "direct" else wiring.backend_url
    if not found:
        raise StepFailed(f"{wiring.machine}'s manifest does not say " + (
            "the service's own path" if kind == "direct" else "where its service calls the mock")
            + " (provisioned before the lab recorded it): ./start.sh up provisions it again")
    return f"http://127.0.0.1:{wiring.ports['app_http']}{found}" if kind == "direct" else found


def check(backend: Backend, profile: load.Profile) -> None:
    """Refuses --limits before anything starts where they cannot be measured."""
    if not isinstance(profile, load.LoadProfile):
        raise StepFailed("--limits: a capacity run's open model has no fixed concurrency to measure the limits at")
    if backend.network_prefix(MACHINES[0]) is None:
        raise StepFailed(f"--limits: the {backend.name} backend's machines listen on their own loopback, which this "
                         "host cannot enter (the local backend can)")


def check_wiring(wiring: dict[str, Manifest]) -> None:
    """Refuses --limits before the load when a machine's manifest lacks what a limit needs."""
    for manifest in wiring.values():
        for kind in KINDS:
            target(manifest, kind)


def measure(backend: Backend, profile: load.LoadProfile, wiring: dict[str, Manifest], folder: RunFolder,
            cpus: str | None) -> list[str]:
    """Each machine's limits into folder's jmeter/limits/<kind>/; what went wrong, which never fails the run: its
    own load is measured already. Ctrl-C ends the limits, and the run goes on to its report."""
    limited = profile_for(profile)
    problems: list[str] = []
    for kind, what in KINDS.items():
        out = folder.jmeter.limits(kind)
        targets = {name: target(wiring[name], kind) for name in MACHINES}
        try:
            with step(f"Limits: {what}, one machine after the other ({limited.describe()})"):
                result = load.run(targets, limited, out.root, schedule="sequential", on_progress=load.print_progress,
                                  path=wiring[MACHINES[0]].service_path, cpus=cpus,
                                  enter={name: backend.network_prefix(name) or [] for name in MACHINES})
        except LabError as error:
            problems.append(f"limits, {what}: not measured ({error})")
            continue
        problems.extend(f"limits, {what}: {problem}" for problem in result.problems)
        if result.interrupted:
            problems.append(f"limits, {what}: cut short; the limits after it were not measured")
            break
    return problems
