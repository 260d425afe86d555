"""The load a plan of the user's own makes (lab/load/userplan.py reads and maps it): for ./start.sh run --plan its
users and ramp-up as read from it (for the steady state), bounded by the run's duration; for ./start.sh capacity
--plan the lab's steps as the arrival rates of its Open Model Thread Groups, one per machine. What the terminal
shows of it before the load starts."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from lab.load.openmodel import StepLoad
from lab.load.profile import LoadProfile
from lab.load.userplan import PlanError, PlanReading, read
from lab.names import MACHINES


@dataclass
class OwnPlan(LoadProfile):
    """The load of a user's plan: its users and ramp-up as read from it (for the steady state), the run's
    duration, and how its hosts map to the machines."""
    plan: str = ""                                          # the user's file, as given
    plan_map: dict[str, str] = field(default_factory=dict)  # host -> machine
    plan_not_analysed: list[str] = field(default_factory=list)  # its samplers that are not HTTP: they run, unread
    plan_properties: dict[str, str] = field(default_factory=dict)   # JMeter properties given to it (--property)

    def group_properties(self, machine: str, active: bool) -> dict[str, str]:
        return {}

    def properties(self) -> dict[str, str]:
        return dict(self.plan_properties)       # the plan reads none of the lab's: it runs as written

    def describe(self) -> str:
        return f"{Path(self.plan).name}: up to {self.users} users a machine, ramp {self.ramp_s} s, {self.duration_s} s"


@dataclass(frozen=True)
class OwnOpenPlan(StepLoad):
    """The load of a user's plan under ./start.sh capacity: the lab's steps as the arrival rates of the plan's
    Open Model Thread Groups (one per machine, each arrival running its samplers once), how its hosts map to the
    machines, and which group loads which machine."""
    plan: str = ""
    plan_map: dict[str, str] = field(default_factory=dict)              # host -> machine
    plan_groups: dict[str, str] = field(default_factory=dict)           # its open-model thread group -> machine
    plan_not_analysed: list[str] = field(default_factory=list)
    plan_properties: dict[str, str] = field(default_factory=dict)

    def properties(self) -> dict[str, str]:
        return {**super().properties(), **self.plan_properties}

    def describe(self) -> str:
        return f"{Path(self.plan).name}, its arrivals stepped: {super().describe()}"


# A user's plan's load, whichever command runs it: the plan runs as written, none of the lab's properties given.
OWN_PLANS = (OwnPlan, OwnOpenPlan)


def profile(reading: PlanReading, chosen: dict[str, str], duration_s: int | None,
            properties: dict[str, str] | None = None) -> OwnPlan:
    """The run's load: the plan's users a machine (the most any machine gets), its latest ramp-up, and how long:
    --duration, else the plan's own bound; PlanError for a plan that never ends and no --duration."""
    stepped = [group.name for group in reading.groups if group.open]
    if stepped:
        raise PlanError(f"--plan {reading.path}: thread group {stepped[0]!r} is an Open Model Thread Group (arrivals "
                        "at the rates of its schedule): ./start.sh capacity --plan steps its rates to find each "
                        "machine's capacity; ./start.sh run --plan runs closed thread groups (users)")
    endless = [group.name for group in reading.groups if group.forever]
    bounds = [group.duration_s for group in reading.groups if group.duration_s]
    if duration_s is None:
        if endless or not bounds:
            raise PlanError(f"--plan {reading.path}: thread group {(endless or [g.name for g in reading.groups])[0]!r}"
                            " has no scheduler duration (it loops until stopped or its loops end): give --duration "
                            "SECONDS, which bounds every thread group")
        duration_s = max(bounds)
    users = {machine: sum(group.users for group in reading.groups
                          if any(s.group == group.name and chosen[s.host] == machine for s in reading.samplers))
             for machine in MACHINES}
    ramp = max((group.ramp_s for group in reading.groups), default=0)
    if ramp >= duration_s:
        raise PlanError(f"--plan {reading.path}: its ramp-up ends at {ramp} s, and the run lasts {duration_s} s: "
                        "give a longer --duration, for a steady state after it")
    timeouts = [sampler.response_timeout_ms for sampler in reading.samplers]
    longest = None if None in timeouts else max(t for t in timeouts if t is not None)
    return OwnPlan(users=max(1, *users.values()), ramp_s=ramp, duration_s=duration_s,
                   keep_alive=all(sampler.keep_alive for sampler in reading.samplers),
                   response_timeout_ms=longest or OwnPlan.response_timeout_ms, plan=str(reading.path.resolve()),
                   plan_map=dict(chosen), plan_not_analysed=list(reading.not_analysed),
                   plan_properties=dict(properties or {}))


def open_profile(reading: PlanReading, chosen: dict[str, str], steps: StepLoad,
                 properties: dict[str, str] | None = None) -> OwnOpenPlan:
    """./start.sh capacity --plan's load: the steps as the arrival rates of the plan's Open Model Thread Groups, one
    per machine; PlanError for a plan whose load the lab cannot step so, naming the group."""
    groups: dict[str, str] = {}
    for group in reading.groups:
        samplers = [sampler for sampler in reading.samplers if sampler.group == group.name]
        if not samplers:
            continue
        if not group.open:
            raise PlanError(f"--plan {reading.path}: thread group {group.name!r} is a closed model ({group.users} "
                            "users): ./start.sh capacity steps arrival rates, so each machine's load must come from "
                            "an Open Model Thread Group (JMeter 5.5 or later; the rates are the lab's); run a plan "
                            "of closed groups with ./start.sh run --plan")
        machines = sorted({chosen[sampler.host] for sampler in samplers})
        if len(machines) > 1:
            raise PlanError(f"--plan {reading.path}: thread group {group.name!r} sends to {' and '.join(machines)}: "
                            "capacity steps each machine's arrivals on their own, so each machine needs an Open "
                            "Model Thread Group of its own")
        if group.name in groups:
            raise PlanError(f"--plan {reading.path}: two thread groups are named {group.name!r}: name them apart, so "
                            "the lab can tell which machine each loads")
        groups[group.name] = machines[0]
    for machine in MACHINES:
        named = [name for name, loads in groups.items() if loads == machine]
        if not named:
            raise PlanError(f"--plan {reading.path}: no thread group loads the {machine} machine (its samplers are "
                            "outside any thread group): give it an Open Model Thread Group")
        if len(named) > 1:
            raise PlanError(f"--plan {reading.path}: {' and '.join(repr(name) for name in named)} both load the "
                            f"{machine} machine: capacity steps one Open Model Thread Group's arrivals per machine "
                            "(put their samplers in one group, or disable one)")
    kept = {step.name: getattr(steps, step.name) for step in fields(StepLoad) if step.init}
    return OwnOpenPlan(**{**kept, "keep_alive": all(sampler.keep_alive for sampler in reading.samplers)},
                       plan=str(reading.path.resolve()), plan_map=dict(chosen), plan_groups=groups,
                       plan_not_analysed=list(reading.not_analysed), plan_properties=dict(properties or {}))


def shown(profile: OwnPlan | OwnOpenPlan) -> list[str]:
    """What the run will do with the plan, for the terminal before it starts: each thread group with its load
    and bound, each sampler with where it goes and which machine that is, what is not analysed, and the files
    its listeners write (kept in the run folder instead)."""
    reading = read(Path(profile.plan), profile.plan_properties)
    lines = [f"Your plan: {profile.plan} (run unchanged but for where it goes; its hosts: "
             + ", ".join(f"{host} -> {machine}" for host, machine in profile.plan_map.items()) + ")"]
    for group in reading.groups:
        if isinstance(profile, OwnOpenPlan):
            machine = profile.plan_groups.get(group.name)
            what = ("loads no machine" if machine is None else
                    f"an open model at the rates the lab steps for {machine}, instead of its schedule {group.schedule!r}")
            lines.append(f"  {group.name}: {what}")
        else:
            ends = ("loops forever" if group.forever else f"its own bound {group.duration_s} s" if group.duration_s
                    else "until its loops end")
            bound = f"; stopped at {profile.duration_s} s at the latest" if not group.duration_s or \
                group.duration_s > profile.duration_s else ""
            lines.append(f"  {group.name}: {group.users} users, ramp {group.ramp_s} s, {ends}{bound}")
        lines.extend(f"    {sampler.name}: {sampler.protocol}://{sampler.host}:{sampler.port}{sampler.path} -> "
                     f"{profile.plan_map.get(sampler.host, 'no machine')}" for sampler in reading.samplers
                     if sampler.group == group.name)
    if isinstance(profile, OwnOpenPlan):
        lines.append(f"  each arrival runs its group's samplers once, with timeouts of at most connect "
                     f"{profile.connect_timeout_ms} ms and response {profile.response_timeout_ms} ms (every request "
                     "waiting is a JMeter thread in an open model)")
    if reading.not_analysed:
        lines.append(f"  not analysed (not HTTP: they run, their samples are not read): {', '.join(reading.not_analysed)}")
    if reading.writes:
        lines.append(f"  its listeners write in the run folder's jmeter/plan-files/, not to: {', '.join(reading.writes)}")
    return lines
