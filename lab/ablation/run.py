"""./start.sh ablate: the tuned machine walked from the default machine's knobs to its own, one knob group
at a time (lab/ablation/analysis.py chooses the path as it goes), each configuration measured in repeated trials.
Each trial's figure is a machine's steady-state throughput of requests answered without error under a fixed load
(a closed model: users), or its capacity under stepped arrivals (an open model, such as the capacity scenario): the
highest rate that met the SLO. The baseline is the default configuration, measured as every other one.

One configuration after the other (where the machines share CPUs): each on the tuned machine alone, the default
machine left as it is, which halves the cost and keeps each figure free of a second load on the same CPUs. Two at
once (where placement gives each machine CPUs of its own, or --schedule parallel): lab/ablation/pairs.py.
The folder: lab/ablation/folder.py. A configuration whose measurement completed is never measured again:
`--resume <id>` continues an interrupted ablation from there."""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from lab import aa, experiment, interrupts, load, options, placement, runfolder
from lab.ablation import analysis
from lab.ablation import groups as knob_groups
from lab.ablation.folder import CAPACITY, THROUGHPUT, TUNED, UNIT, Ablation, Measure, costs, key, unusable
from lab.ablation.groups import Group, valid
from lab.ablation.pairs import Pairs
from lab.analysis import capacity
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.machines.protocol import Backend
from lab.progress import info
from lab.runfolder import RunFolder

AT_ONCE = "parallel"            # the schedule that measures two configurations at once
# Rough costs on top of the load, for the estimate printed before it starts (measured on the local
# backend, a playbook run that changes knobs only: 35 s for one machine, 47-63 s for both, 63 s when one
# builds the native library; a trial's PCP logger, evidence and summary about 10 s).
PROVISION_S = 35
PAIR_PROVISION_S = 55           # both machines in one run
TRIAL_OVERHEAD_S = 10



@dataclass(frozen=True)
class Plan:
    groups: tuple[str, ...]         # the groups ablated, in the file's order
    profile: load.Profile
    repeat: int
    schedule: str | None = None     # AT_ONCE: two configurations at once; "sequential"; None: the placement's

    @property
    def measure(self) -> Measure:
        return CAPACITY if isinstance(self.profile, load.StepLoad) else THROUGHPUT

    @property
    def at_once(self) -> bool:
        return self.schedule == AT_ONCE

    def as_json(self) -> dict:
        return {"groups": list(self.groups), "profile": asdict(self.profile), "repeat": self.repeat,
                "figure": self.measure.name, "load": self.profile.describe(), "schedule": self.schedule}

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        profile = data["profile"]
        return cls(tuple(data["groups"]), capacity.step_load(profile) if profile.get("model") == "open"
                   else load.LoadProfile(**profile), int(data["repeat"]), data.get("schedule") or "sequential")


def chosen_groups(every: dict[str, Group], typed: str | None) -> tuple[str, ...]:
    """--groups as typed (comma separated), checked: known names, their needs among them."""
    names = options.named_groups(typed, list(every), knob_groups.GROUPS_FILE.name)
    for name in names:
        missing = [need for need in every[name].needs if need not in names]
        if missing:
            raise StepFailed(f"--groups {typed}: {name} needs {', '.join(missing)}: add it")
    return names


def configurations_at_most(groups: dict[str, Group]) -> int:
    """How many configurations the ablation may measure: the default, each forward step's candidates
    (n, then n-1, ...) and the leave-one-out set, many of them shared; never more than the configurations
    whose needs are met (apr without ajp is none)."""
    n = len(groups)
    names = list(groups)
    possible = sum(valid(groups, frozenset(config)) for size in range(n + 1)
                   for config in itertools.combinations(names, size))
    return min(possible, 1 + n * (n + 1) // 2 + n)


def estimate_s(plan: Plan, configurations: int) -> float:
    """At most (trials that replace those without a steady state not counted: each is said when it happens).
    Two at once: a pair's trials load both machines, and both are provisioned, in one run, for each half of them."""
    trial_s = plan.profile.duration_s + TRIAL_OVERHEAD_S
    if plan.at_once:
        return math.ceil(configurations / 2) * (2 * PAIR_PROVISION_S + plan.repeat * trial_s)
    return configurations * (PROVISION_S + plan.repeat * trial_s)


def describe(plan: Plan, groups: dict[str, Group]) -> list[str]:
    at_most = configurations_at_most(groups)
    hours = estimate_s(plan, at_most) / 3600
    where = ("two at once, one on each machine, which swap configurations halfway through a pair's trials"
             if plan.at_once else "each on the tuned machine alone")
    return [f"Ablation of {len(groups)} knob group{'s' if len(groups) != 1 else ''}: {', '.join(groups)}",
            f"  at most {at_most} configurations (the greedy forward path and leave-one-out share many) x "
            f"{plan.repeat} trials x {plan.profile.describe()}, {where}, measured as "
            f"{plan.measure.what} (the default configuration is the baseline)",
            f"  about {hours:.1f} h at most (provisioning and reports included); an interrupted ablation "
            "continues with --resume"]


def ablate(backend: Backend, host: HostLab, ablation: Ablation, plan: Plan, every: dict[str, Group]) -> dict:
    """Measures the path and the leave-one-out set (what is not measured yet), then analyses them into
    ablation.json. Every machine given a configuration gets its own knobs back however it ends."""
    groups = {name: every[name] for name in plan.groups}
    with interrupts.sigterm_as_interrupt(), aa.machines_with(backend, host) as give:
        # What each machine carries: a configuration, and the knobs file that gave it (None: its own knobs). The
        # default machine's own knobs are the default configuration (unless a run cut short left it with others).
        carrying: dict[str, tuple[str, str | None]] = {} if host.aa_pending() else {"default": ("default", None)}

        def given(on: dict[str, frozenset[str]]) -> dict[str, str | None]:
            """The knobs file each machine carries its configuration with; the machines that do not carry it yet
            are provisioned with it, together in one playbook run."""
            files = {machine: ablation.write_knobs(config, every, machine) for machine, config in on.items()
                     if (carrying.get(machine) or ("", None))[0] != key(config)}
            if files:
                for machine in files:       # until the provisioning succeeds, what they carry is unknown
                    carrying.pop(machine, None)
                give(files, " and ".join(f"configuration {key(on[machine])}" + (f" ({machine})" if len(files) > 1
                                                                                 else "") for machine in files))
                carrying.update({machine: (key(on[machine]), str(path)) for machine, path in files.items()})
            return {machine: carrying[machine][1] for machine in on}

        # two at once where the machines share CPUs only because the plan says so (run.json says it was asked for)
        asked = None if placement.placed_on(backend).dedicated else AT_ONCE

        def loaded(folder: RunFolder, on: dict[str, frozenset[str]], trials: int) -> None:
            runfolder.check_free_space(load.run_folder_bytes(plan.profile) * trials, ablation.root.parent)
            knobs_files = given(on)
            label = " and ".join(f"{key(config)} on {machine}" for machine, config in on.items())
            info(f"measuring {label} ({trials} trial{'s' if trials != 1 else ''})")
            machines = tuple(on)
            ended = experiment.measure(backend, plan.profile, trials, folder,
                                       {"mode": "ablation", "configuration": sorted(on.get(TUNED, frozenset())),
                                        "configurations": {m: sorted(c) for m, c in on.items()}, "thresholds": {},
                                        "tuned_knobs": knobs_files.get(TUNED), "knobs_files": knobs_files},
                                       machines=machines, unusable=unusable(plan.measure, machines), extra=trials,
                                       schedule=asked if len(machines) > 1 else None)
            if ended["how"] == "interrupted":
                raise KeyboardInterrupt
            if ended["how"] != "completed":
                raise StepFailed(f"{label}: the run {ended['how']} during {ended.get('during')}"
                                 + (f": {ended['error']}" if ended.get("error") else ""))

        if plan.at_once:
            pairs = Pairs(ablation, groups, plan.repeat, loaded)
            result = _analyse(ablation, groups, pairs.figures, plan, pairs.prefetch)
        else:
            def measure(config: frozenset[str]) -> list[float]:
                if not ablation.completed(config):
                    ablation.set_aside(ablation.config_folder(config))
                    loaded(ablation.config_folder(config), {TUNED: config}, plan.repeat)
                return ablation.figures(config)

            result = _analyse(ablation, groups, measure, plan)
    ablation.update(analysis=result, ended_at=time.time())
    return result


def reanalyse(ablation: Ablation, plan: Plan, every: dict[str, Group]) -> dict:
    """A finished ablation analysed again from the trials kept in its folder, by this lab's analysis: no machine
    is touched."""
    result = _analyse(ablation, {name: every[name] for name in plan.groups}, ablation.figures, plan)
    ablation.update(analysis=result)
    return result


def _analyse(ablation: Ablation, groups: dict[str, Group], measure: Callable[[frozenset[str]], list[float]],
             plan: Plan, prefetch: analysis.Prefetch = analysis.nothing_ahead) -> dict:
    result = analysis.analyze(groups, measure, UNIT, prefetch=prefetch)
    result["measure"] = {"name": plan.measure.name, "what": plan.measure.what, "short": plan.measure.short}
    result["costs"] = {name: costs(ablation.sources(analysis.config_of(name))) for name in result["configurations"]}
    return result
