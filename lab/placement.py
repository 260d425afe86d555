"""Where the machines and the load generator run: CPUs of their own when the host has enough, else shared.

A side-by-side comparison is only fair when neither machine steals CPU time from the other or from JMeter,
so plan() gives each machine CPUs of its own and JMeter the rest. A host too small for that shares all CPUs,
and then the machines are loaded one after the other so that they never compete with each other.
for_backend() says what a run really gets: the local backend pins what plan() offers, Vagrant does not.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from lab.names import MACHINES

CPUS_PER_MACHINE = 2
LOADGEN_MIN_CPUS = 1
LOADGEN = "loadgen"
# One part of a cpulist: "3" or "3-5" (ASCII digits only, unlike int()).
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


@dataclass(frozen=True)
class Placement:
    dedicated: bool  # each machine and the load generator have CPUs of their own
    cpus: dict[str, tuple[int, ...]]  # each machine and LOADGEN -> its CPUs (all host CPUs when shared)
    schedule: str  # "parallel" when dedicated, else "sequential": shared machines must not compete
    host_cpus: tuple[int, ...]
    note: str  # one sentence for the report: what is isolated, or what cannot be and why

    def as_json(self) -> dict:
        """JSON-ready, CPUs written as kernel cpulists ("0-1") as cgroups and taskset take them."""
        return {"dedicated": self.dedicated, "cpus": {name: cpulist(cpus) for name, cpus in self.cpus.items()},
                "schedule": self.schedule, "host_cpus": cpulist(self.host_cpus), "note": self.note}


def plan(host_cpus: Sequence[int], machines: Sequence[str] = MACHINES, per_machine: int = CPUS_PER_MACHINE,
         loadgen_min: int = LOADGEN_MIN_CPUS) -> Placement:
    """Give each machine `per_machine` CPUs of its own and the load generator the rest, if the host has enough."""
    cpus = tuple(sorted(set(host_cpus)))
    if not cpus:
        raise ValueError("no host CPUs to place the machines on")
    needed = per_machine * len(machines) + loadgen_min
    if len(cpus) >= needed:
        # Consecutive CPUs of the sorted list, in the machines' order: the same affinity always gives the same split.
        placed = {name: cpus[i * per_machine:(i + 1) * per_machine] for i, name in enumerate(machines)}
        placed[LOADGEN] = cpus[per_machine * len(machines):]
        parts = [f"{name} on {'CPUs ' if i == 0 else ''}{cpulist(placed[name])}" for i, name in enumerate(machines)]
        note = f"dedicated: {', '.join(parts)}, JMeter on {cpulist(placed[LOADGEN])}"
        return Placement(True, placed, "parallel", cpus, note)
    shared = {name: cpus for name in (*machines, LOADGEN)}
    note = (f"shared: this host has {len(cpus)} CPUs, and a fair side-by-side run needs {needed} "
            f"({per_machine} per machine and {loadgen_min} for JMeter); the machines and JMeter share "
            f"CPUs {cpulist(cpus)}, so the schedule defaults to one machine after the other")
    return Placement(False, shared, "sequential", cpus, note)


def as_found(planned: Placement, pinned: dict[str, str | None]) -> Placement:
    """The planned placement when each machine it pins really runs on its CPUs (pinned: machine -> the
    cpulist its cgroup holds, None when it has none of its own), else a shared one saying which machine is
    elsewhere: machines brought up before the lab pinned them, or on other CPUs, must not be reported pinned."""
    off = [f"{name} on {pinned.get(name) or 'every CPU'} (planned: {cpulist(planned.cpus[name])})"
           for name in MACHINES if planned.dedicated and name in planned.cpus
           and parse_cpulist(pinned.get(name) or "") != planned.cpus[name]]
    if not off:
        return planned
    cpus = planned.host_cpus
    return Placement(False, {name: cpus for name in (*MACHINES, LOADGEN)}, "sequential", cpus,
                     f"shared: the machines are not on the CPUs the placement plans ({'; '.join(off)}; "
                     "./start.sh down, then up, pins them), so they and JMeter share CPUs "
                     f"{cpulist(cpus)} and the schedule defaults to one machine after the other")


def host_cpus() -> tuple[int, ...]:
    """The CPUs this process may use (its affinity, which a container or taskset may narrow), sorted."""
    return tuple(sorted(os.sched_getaffinity(0)))


def cpulist(cpus: Iterable[int]) -> str:
    """The kernel's cpulist format: [0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in ranges)


def parse_cpulist(text: str) -> tuple[int, ...]:
    """The CPUs a cpulist names, sorted ("" names none, as the kernel writes an empty set); a ValueError naming
    the text if it is not a cpulist."""
    cpus: set[int] = set()
    if not text.strip():
        return ()
    for part in text.strip().split(","):
        match = _RANGE.fullmatch(part.strip())
        low, high = (int(match[1]), int(match[2] or match[1])) if match else (0, -1)
        if high < low:  # no match, or a range written backwards ("3-1")
            raise ValueError(f"not a cpulist: {text!r} (bad part {part!r})")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


class Pinned(Protocol):
    """What placed_on asks of a backend (lab/machines/protocol.py's Backend has it)."""
    name: str

    def pinned_cpus(self, name: str) -> str | None: ...


def placed_on(backend: Pinned) -> Placement:
    """The backend's placement, as planned only where the machines really run on their CPUs (brought up before
    pinning, they do not)."""
    where = for_backend(backend.name)
    return as_found(where, {name: backend.pinned_cpus(name) for name in MACHINES}) if where.dedicated else where


def for_backend(backend: str, cpus: Sequence[int] | None = None) -> Placement:
    """The placement a run on this backend gets. The ssh backend's machines are hosts of their own; the local
    backend pins each machine to its CPUs (a cgroup cpuset) and JMeter to the rest (taskset) when plan() offers
    CPUs of their own; the Vagrant VMs are not pinned, so they share this host's CPUs whatever plan() offers."""
    cpus = tuple(sorted(set(cpus if cpus is not None else host_cpus())))
    if backend == "ssh":
        return Placement(True, {LOADGEN: cpus}, "parallel", cpus,
                         f"the machines run on hosts of their own (ssh backend); JMeter on this host's CPUs "
                         f"{cpulist(cpus)}")
    offered = plan(cpus)
    if not offered.dedicated or backend == "local":
        return offered
    return Placement(False, {name: cpus for name in offered.cpus}, "sequential", cpus,
                     f"shared: the machines and JMeter share this host's CPUs {cpulist(cpus)} (the {backend} "
                     "backend does not pin them to CPUs of their own yet), so the schedule defaults to one machine "
                     "after the other")
