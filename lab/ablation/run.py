"""./start.sh ablate: the tuned machine walked from the default machine's knobs to its own, one knob group
at a time (lab/analysis/ablation.py chooses the path as it goes), each configuration measured as a
repeated run of the tuned machine alone. Each trial's figure is the tuned machine's steady-state throughput of
requests answered without error under a fixed load (a closed model: users), or its capacity under stepped
arrivals (an open model, such as the capacity scenario): the highest rate that met the SLO. The baseline is the default configuration measured on the same machine, so the default
machine, whose knobs never change, is not loaded again for every configuration: that halves the cost where
the machines are loaded one after the other, and keeps each configuration's figure free of the host sharing
its CPUs between two loads.

The ablation's folder (runs/<id>/) holds ablation.json (the plan, then the analysis), knobs/<config>.yml
(the extra vars that made each configuration) and configs/<config>/ (each configuration's run folder,
trials, summaries and report). A configuration whose run folder says it completed is never measured
again: `--resume <id>` continues an interrupted ablation from there."""
from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from lab import aa, experiment, interrupts, load, runfolder
from lab.ablation import groups as knob_groups
from lab.ablation.groups import Group, valid
from lab.analysis import ablation as analysis
from lab.analysis import capacity
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.machines.protocol import Backend
from lab.paths import callers
from lab.progress import info
from lab.runfolder import RUNS, RunFolder

ABLATION_JSON = "ablation.json"
TUNED = "tuned"                 # the machine each configuration is given; the default machine is left alone
# Rough costs on top of the load, for the estimate printed before it starts (measured on the local
# backend: a playbook run that changes one group 37-52 s; a trial's PCP logger, evidence and summary about 10 s).
PROVISION_S = 45
TRIAL_OVERHEAD_S = 10


UNIT = "req/s"


@dataclass(frozen=True)
class Measure:
    """What each trial gives, by the load's model."""
    name: str           # ablation.json's plan.figure
    what: str           # said on the page and in the plan
    short: str          # a column's heading


# Closed: requests answered without error (a configuration that fails requests fast must not look faster).
THROUGHPUT = Measure("tuned_good_rps", "its steady-state throughput of requests answered without error", "throughput")
CAPACITY = Measure("tuned_capacity_rps", "its capacity: the highest arrival rate that met the SLO", "capacity")
MEASURES = {m.name: m for m in (THROUGHPUT, CAPACITY)}


@dataclass(frozen=True)
class Plan:
    groups: tuple[str, ...]         # the groups ablated, in the file's order
    profile: load.Profile
    repeat: int

    @property
    def measure(self) -> Measure:
        return CAPACITY if isinstance(self.profile, load.StepLoad) else THROUGHPUT

    def as_json(self) -> dict:
        return {"groups": list(self.groups), "profile": asdict(self.profile), "repeat": self.repeat,
                "figure": self.measure.name, "load": self.profile.describe()}

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        profile = data["profile"]
        return cls(tuple(data["groups"]), capacity.step_load(profile) if profile.get("model") == "open"
                   else load.LoadProfile(**profile), int(data["repeat"]))


def chosen_groups(every: dict[str, Group], typed: str | None) -> tuple[str, ...]:
    """--groups as typed (comma separated), checked: known names, their needs among them."""
    if typed is None:
        return tuple(every)
    names = [name.strip() for name in typed.split(",") if name.strip()]
    unknown = [name for name in names if name not in every]
    if unknown or not names:
        raise StepFailed(f"--groups {typed}: {', '.join(unknown) or 'no group named'}: the groups are "
                         f"{', '.join(every)} ({knob_groups.GROUPS_FILE.name})")
    for name in names:
        missing = [need for need in every[name].needs if need not in names]
        if missing:
            raise StepFailed(f"--groups {typed}: {name} needs {', '.join(missing)}: add it")
    return tuple(name for name in every if name in names)


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
    """At most (trials that replace those without a steady state not counted: each is said when it happens)."""
    return configurations * (PROVISION_S + plan.repeat * (plan.profile.duration_s + TRIAL_OVERHEAD_S))


def describe(plan: Plan, groups: dict[str, Group]) -> list[str]:
    at_most = configurations_at_most(groups)
    hours = estimate_s(plan, at_most) / 3600
    return [f"Ablation of {len(groups)} knob group{'s' if len(groups) != 1 else ''}: {', '.join(groups)}",
            f"  at most {at_most} configurations (the greedy forward path and leave-one-out share many) x "
            f"{plan.repeat} trials x {plan.profile.describe()}, each on the tuned machine alone, measured as "
            f"{plan.measure.what} (the default configuration is the baseline)",
            f"  about {hours:.1f} h at most (provisioning and reports included); an interrupted ablation "
            "continues with --resume"]


def key(config: frozenset[str]) -> str:
    return "+".join(sorted(config)) or "default"


class Ablation:
    """An ablation's folder, and each configuration's measurement in it."""

    def __init__(self, root: Path):
        self.root = root
        self.file = root / ABLATION_JSON

    @property
    def measure(self) -> Measure:
        return MEASURES.get((self.record().get("plan") or {}).get("figure"), THROUGHPUT)

    @classmethod
    def create(cls, plan: Plan, groups: dict[str, Group], runs: Path | None = None, **facts) -> Ablation:
        """A new ablation's folder in runs/; facts (its backend, its knobs' hash) are kept for --resume."""
        folder = RunFolder.create(runs or RUNS)
        ablation = cls(folder.root)
        RunFolder.write_json(ablation.file, {"kind": "ablation", "plan": plan.as_json(), "started_at": time.time(),
                                             "groups": {n: asdict(g) for n, g in groups.items()}, **facts})
        return ablation

    @classmethod
    def resume(cls, typed: str, runs: Path | None = None) -> Ablation:
        """The ablation a user named: its folder (from where they ran ./start.sh), else its id in runs/."""
        runs = runs or RUNS
        for root in (callers(typed), runs / typed):
            if (root / ABLATION_JSON).is_file():
                return cls(root.resolve())
        raise StepFailed(f"--resume {typed}: no ablation there (no {ABLATION_JSON} in {typed} nor in {runs / typed})")

    def record(self) -> dict:
        return RunFolder(self.root).read_json(self.file, [], "ablation") or {}

    def update(self, **fields) -> None:
        RunFolder.write_json(self.file, {**self.record(), **fields})

    def config_folder(self, config: frozenset[str]) -> RunFolder:
        return RunFolder(self.root / "configs" / key(config))

    def completed(self, config: frozenset[str]) -> bool:
        """Measured to its end, with a figure from enough trials (else it is measured again on --resume)."""
        folder = self.config_folder(config)
        run = folder.read_json(folder.run_json, [], "run") if folder.run_json.is_file() else None
        return bool(run) and (run.get("ended") or {}).get("how") == "completed" and len(self._figures(config)) >= 2

    def _figures(self, config: frozenset[str]) -> list[float]:
        folder, measure = self.config_folder(config), self.measure
        found = [figure(trial, measure) for trial in folder.trials()]
        return [value for value, _why in found if value is not None]

    def figures(self, config: frozenset[str]) -> list[float]:
        """The tuned machine's figure in each trial of a configuration (2 at least)."""
        found = self._figures(config)
        if len(found) < 2:
            raise StepFailed(f"configuration {key(config)}: {len(found)} of its trials gave the tuned machine's "
                             f"{self.measure.short} (see {self.config_folder(config).report_html}; each trial's own "
                             "report says why)" + ("; a longer --duration settles more surely"
                                                  if self.measure is THROUGHPUT else ""))
        return found

    def set_aside(self, config: frozenset[str]) -> None:
        """A configuration cut short: its folder kept under interrupted/, measured anew."""
        folder = self.config_folder(config)
        if folder.root.exists():
            aside = self.root / "interrupted" / f"{key(config)}-{time.strftime('%Y%m%d-%H%M%S')}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(folder.root, aside)
            info(f"{key(config)}: its earlier measurement (cut short, or without enough figures) is kept in {aside}; "
                 "measuring it again")

    def write_knobs(self, config: frozenset[str], every: dict[str, Group]) -> Path:
        path = self.root / "knobs" / f"{key(config)}.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        chosen = knob_groups.extra_vars(every, config)
        RunFolder(self.root).write_text(path, f"# {key(config)}: the tuned machine's knobs for this configuration "
                                              "(ansible-playbook --extra-vars)\n" + yaml.safe_dump(chosen))
        return path


def ablate(backend: Backend, host: HostLab, ablation: Ablation, plan: Plan, every: dict[str, Group]) -> dict:
    """Measures the path and the leave-one-out set (what is not measured yet), then analyses them into
    ablation.json. The tuned machine gets its own knobs back however it ends."""
    groups = {name: every[name] for name in plan.groups}
    with interrupts.sigterm_as_interrupt(), aa.tuned_with(backend, host, None) as give:
        def measure(config: frozenset[str]) -> list[float]:
            if ablation.completed(config):
                return ablation.figures(config)
            runfolder.check_free_space(load.run_folder_bytes(plan.profile) * plan.repeat, ablation.root.parent)
            ablation.set_aside(config)
            knobs_file = ablation.write_knobs(config, every)
            give(knobs_file, f"configuration {key(config)}")
            info(f"measuring configuration {key(config)} on the tuned machine ({plan.repeat} trials)")
            ended = experiment.measure(backend, plan.profile, plan.repeat, ablation.config_folder(config),
                                       {"mode": "ablation", "configuration": sorted(config), "thresholds": {},
                                        "tuned_knobs": str(knobs_file)},
                                       machines=(TUNED,), unusable=lambda trial: figure(trial, plan.measure)[1],
                                       extra=plan.repeat)
            if ended["how"] == "interrupted":
                raise KeyboardInterrupt
            if ended["how"] != "completed":
                raise StepFailed(f"configuration {key(config)}: the run {ended['how']} during {ended.get('during')}"
                                 + (f": {ended['error']}" if ended.get("error") else ""))
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
             plan: Plan) -> dict:
    result = analysis.analyze(groups, measure, UNIT)
    result["measure"] = {"name": plan.measure.name, "what": plan.measure.what, "short": plan.measure.short}
    result["costs"] = {name: costs(ablation.config_folder(analysis.config_of(name))) for name in result["configurations"]}
    return result


def _tuned(trial: RunFolder) -> dict:
    """The tuned machine's figures in a summarised trial ({} before its summary)."""
    summary = (trial.read_json(trial.summary_json, [], "summary") if trial.summary_json.is_file() else None) or {}
    return (summary.get("machines") or {}).get(TUNED) or {}


def figure(trial: RunFolder, measure: Measure = THROUGHPUT) -> tuple[float | None, str | None]:
    """A summarised trial's figure (the tuned machine's steady-state throughput without errors, or its capacity), or
    why it has none. A machine that failed every request it was sent has a figure, 0: that configuration broke it
    (the OOM killer ending its JVM, say), which is a result, not a measurement that went wrong."""
    if measure is CAPACITY:
        return _capacity(trial)
    load_ = _tuned(trial).get("load") or {}
    throughput = load_.get("good_throughput_rps")
    if (load_.get("window") or {}).get("settled") is False:
        return None, "the tuned machine did not reach a steady state"
    if not isinstance(throughput, (int, float)) or throughput < 0:
        return None, "the tuned machine has no steady-state throughput"
    if throughput == 0 and not (load_.get("all") or {}).get("samples"):
        return None, "the tuned machine was sent no request"
    return float(throughput), None


def _capacity(trial: RunFolder) -> tuple[float | None, str | None]:
    """The tuned machine's capacity in a trial. One that missed the SLO from its first step has 0: the configuration
    could not meet it at the lowest rate. A capacity that is only a lower bound (the load generator fell behind, or
    the SLO was met up to the highest step) is no figure."""
    tuned = _tuned(trial)
    found = tuned.get("capacity") or {}
    if not ((tuned.get("load") or {}).get("all") or {}).get("samples"):
        return None, "the tuned machine was sent no request"
    if found.get("generator_bound_rps") is not None:
        return None, (f"the load generator fell behind at {found['generator_bound_rps']} req/s, before the tuned "
                      "machine's knee")
    if not found.get("found"):
        return None, ("the tuned machine met the SLO up to the highest step: its capacity lies beyond it (a higher "
                      "max_rps)" if found.get("reached_max") else "the tuned machine's steps were not judged against "
                                                                      "the SLO")
    return float(found.get("capacity_rps") or 0), None


def costs(folder: RunFolder) -> dict:
    """The tuned machine's cost in a configuration, over its trials: peak memory and CPU time per request."""
    peaks, per_request = [], []
    for trial in folder.trials():
        tuned = _tuned(trial)
        peak = (tuned.get("memory") or {}).get("peak_bytes")
        cores = (tuned.get("cpu") or {}).get("mean_cores")
        rps = (tuned.get("load") or {}).get("throughput_rps")
        if isinstance(peak, (int, float)):
            peaks.append(peak)
        if isinstance(cores, (int, float)) and isinstance(rps, (int, float)) and rps > 0:
            per_request.append(cores / rps * 1000)
    return {"peak_memory_bytes": max(peaks) if peaks else None,
            "cpu_ms_per_request": round(sum(per_request) / len(per_request), 3) if per_request else None,
            "basis": f"the tuned machine over {len(folder.trials())} trials: the highest memory peak, and the mean "
                     "of its CPU cores over the load divided by its throughput"}
