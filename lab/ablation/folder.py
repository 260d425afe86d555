"""An ablation's folder, runs/<id>/: ablation.json (the plan, then the analysis), knobs/<machine>-<config>.yml (the
extra vars that made each configuration on a machine), and where each configuration was measured:
- configs/<config>/: measured alone, on the tuned machine (the default machine is not loaded);
- pairs/<a>--<b>/: two configurations measured at once, a on the default machine and b on the tuned one (a pair's
  trials are split between pairs/<a>--<b>/ and pairs/<b>--<a>/, each machine carrying each configuration for half
  of them); pairs/<a>--<a>/: one configuration on both machines.
Each of those is a run folder (trials, summaries, report). A trial's figure is a machine's steady-state throughput
of requests answered without error (a closed model) or its capacity (an open model)."""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from lab import contract
from lab.ablation import groups as knob_groups
from lab.ablation.groups import Group
from lab.analysis import host_pause
from lab.analysis.repeated import counted_trials
from lab.errors import StepFailed
from lab.progress import info
from lab.runfolder import RecordFolder, RunFolder

ABLATION_JSON = "ablation.json"
TUNED = "tuned"                 # the machine a configuration measured alone is given
PAIR_SEPARATOR = "--"           # a group's name has no "-": pairs/<a>--<b> splits one way only
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


def key(config: frozenset[str]) -> str:
    return "+".join(sorted(config)) or "default"


def config_from_key(name: str) -> frozenset[str]:
    """The configuration key() named."""
    return frozenset() if name == "default" else frozenset(name.split("+"))


def pair_key(on_default: frozenset[str], on_tuned: frozenset[str]) -> str:
    return f"{key(on_default)}{PAIR_SEPARATOR}{key(on_tuned)}"


@dataclass(frozen=True)
class Source:
    """Where some of a configuration's trials are: a run folder, and the machine that carried it there."""
    folder: RunFolder
    machine: str


class Ablation(RecordFolder):
    """An ablation's folder, and each configuration's measurements in it."""
    FILE = ABLATION_JSON
    KIND = "ablation"
    SCHEMA = contract.ABLATION_SCHEMA

    @property
    def measure(self) -> Measure:
        return MEASURES.get((self.record().get("plan") or {}).get("figure", THROUGHPUT.name), THROUGHPUT)

    @classmethod
    def create(cls, plan_json: dict, groups: dict[str, Group], runs: Path | None = None, **facts) -> Ablation:
        """A new ablation's folder in runs/; facts (its backend, its knobs' hash) are kept for --resume."""
        return cls.start({"plan": plan_json, "groups": {n: asdict(g) for n, g in groups.items()}, **facts}, runs)

    def config_folder(self, config: frozenset[str]) -> RunFolder:
        """A configuration measured alone, on the tuned machine."""
        return RunFolder(self.root / "configs" / key(config))

    def pair_folder(self, on_default: frozenset[str], on_tuned: frozenset[str]) -> RunFolder:
        return RunFolder(self.root / "pairs" / pair_key(on_default, on_tuned))

    def sources(self, config: frozenset[str]) -> list[Source]:
        """Every run folder holding trials of a configuration, with the machine that carried it there."""
        found = [Source(self.config_folder(config), TUNED)] if self.config_folder(config).root.is_dir() else []
        pairs = self.root / "pairs"
        for root in sorted(pairs.iterdir()) if pairs.is_dir() else ():
            on_default, _, on_tuned = root.name.partition(PAIR_SEPARATOR)
            found += [Source(RunFolder(root), machine) for machine, name in (("default", on_default),
                                                                              (TUNED, on_tuned)) if name == key(config)]
        return found

    @staticmethod
    def finished(folder: RunFolder) -> bool:
        """A run folder measured to its end."""
        run = folder.read_json(folder.run_json, [], "run") if folder.run_json.is_file() else None
        return bool(run and (run.get("ended") or {}).get("how") == "completed")

    def completed(self, config: frozenset[str]) -> bool:
        """Measured alone to its end, with a figure from enough trials (else it is measured again on --resume)."""
        return self.finished(self.config_folder(config)) and self.counted(config) >= 2

    def counted(self, config: frozenset[str]) -> int:
        """How many of a configuration's trials gave a figure, on whichever machine carried it."""
        return len(self._figures(config))

    def _figures(self, config: frozenset[str]) -> list[float]:
        found = [figure(trial, self.measure, source.machine) for source in self.sources(config)
                 for trial in counted_trials(source.folder)]
        return [value for value, _why in found if value is not None]

    def figures(self, config: frozenset[str]) -> list[float]:
        """A configuration's figure in each trial, on whichever machine carried it (2 at least)."""
        found = self._figures(config)
        if len(found) < 2:
            where = self.sources(config)
            machines = sorted({source.machine for source in where}) or [TUNED]
            whose = f"the {machines[0]} machine's" if len(machines) == 1 else "either machine's"
            raise StepFailed(f"configuration {key(config)}: {len(found)} of its trials gave {whose} "
                             f"{self.measure.short} (see {where[0].folder.report_html if where else self.root}; each "
                             "trial's own report says why)" + ("; a longer --duration settles more surely"
                                                               if self.measure is THROUGHPUT else ""))
        return found

    def set_aside(self, folder: RunFolder) -> None:
        """A measurement cut short: its folder kept under interrupted/, measured anew."""
        if folder.root.exists():
            aside = self.root / "interrupted" / f"{folder.root.name}-{time.strftime('%Y%m%d-%H%M%S')}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(folder.root, aside)
            info(f"{folder.root.name}: its earlier measurement (cut short, or without enough figures) is kept in "
                 f"{aside}; measuring it again")

    def write_knobs(self, config: frozenset[str], every: dict[str, Group], machine: str = TUNED) -> Path:
        path = self.root / "knobs" / (f"{key(config)}.yml" if machine == TUNED else f"{machine}-{key(config)}.yml")
        path.parent.mkdir(parents=True, exist_ok=True)
        chosen = knob_groups.extra_vars(every, config)
        RunFolder(self.root).write_text(path, f"# {key(config)}: the {machine} machine's knobs for this configuration "
                                              "(site.yml loads it over the machine's own host_vars)\n" + yaml.safe_dump(chosen))
        return path


def machine_figures(trial: RunFolder, machine: str) -> contract.MachineFigures | None:
    """A machine's figures in a summarised trial (None before its summary, or when it did not load that machine)."""
    summary = trial.run_summary()
    return (summary.get("machines") or {}).get(machine) if summary else None


def _samples(measured: contract.MachineFigures | None) -> int:
    """The requests a machine was sent over its whole load."""
    load_ = measured.get("load") if measured else None
    return int(((load_.get("all") if load_ else None) or {}).get("samples") or 0)


def figure(trial: RunFolder, measure: Measure = THROUGHPUT, machine: str = TUNED) -> tuple[float | None, str | None]:
    """A summarised trial's figure on a machine (its steady-state throughput without errors, or its capacity), or
    why it has none. A machine that failed every request it was sent has a figure, 0: that configuration broke it
    (the OOM killer ending its JVM, say), which is a result, not a measurement that went wrong."""
    if measure is CAPACITY:
        return _capacity(trial, machine)
    measured = machine_figures(trial, machine)
    load_ = measured.get("load") if measured else None
    throughput = load_.get("good_throughput_rps") if load_ else None
    if load_ and (load_.get("window") or {}).get("settled") is False:
        return None, f"the {machine} machine did not reach a steady state"
    if not isinstance(throughput, (int, float)) or throughput < 0:
        return None, f"the {machine} machine has no steady-state throughput"
    if throughput == 0 and not _samples(measured):
        return None, f"the {machine} machine was sent no request"
    return float(throughput), None


def _capacity(trial: RunFolder, machine: str) -> tuple[float | None, str | None]:
    """A machine's capacity in a trial. One that missed the SLO from its first step has 0: the configuration
    could not meet it at the lowest rate. A capacity that is only a lower bound (the load generator fell behind, or
    the SLO was met up to the highest step) is no figure, and so is one whose knee step the host paused in
    (lab/analysis/host_pause.py): that miss measured the host."""
    measured = machine_figures(trial, machine)
    found = measured.get("capacity") if measured else None
    if not _samples(measured):
        return None, f"the {machine} machine was sent no request"
    if found and found.get("generator_bound_rps") is not None:
        return None, (f"the load generator fell behind at {found['generator_bound_rps']} req/s, before the {machine} "
                      "machine's knee")
    if not found or not found.get("found"):
        return None, (f"the {machine} machine met the SLO up to the highest step: its capacity lies beyond it (a "
                      "higher max_rps)" if found and found.get("reached_max")
                      else f"the {machine} machine's steps were not judged against the SLO")
    if why := host_pause.why_not_counted(machine, found):
        return None, why
    return float(found.get("capacity_rps") or 0), None


def unusable(measure: Measure, machines: tuple[str, ...]) -> Callable[[RunFolder], str | None]:
    """Why a trial gives no figure on one of the machines loaded (None: it counts)."""
    def why(trial: RunFolder) -> str | None:
        return next((reason for machine in machines if (reason := figure(trial, measure, machine)[1])), None)
    return why


def costs(sources: list[Source]) -> dict:
    """A configuration's cost over its trials, on whichever machine carried it: peak memory and CPU time per
    request."""
    peaks, per_request, trials = [], [], 0
    for source in sources:
        for trial in counted_trials(source.folder):
            trials += 1
            measured = machine_figures(trial, source.machine)
            if measured is None:
                continue
            peak = (measured.get("memory") or {}).get("peak_bytes")
            cores = (measured.get("cpu") or {}).get("mean_cores")
            load_ = measured.get("load")
            rps = load_.get("throughput_rps") if load_ else None
            if isinstance(peak, (int, float)):
                peaks.append(peak)
            if isinstance(cores, (int, float)) and isinstance(rps, (int, float)) and rps > 0:
                per_request.append(cores / rps * 1000)
    machines = sorted({source.machine for source in sources}) or [TUNED]
    return {"peak_memory_bytes": max(peaks) if peaks else None,
            "cpu_ms_per_request": round(sum(per_request) / len(per_request), 3) if per_request else None,
            "basis": f"the {' and '.join(machines)} machine{'s' if len(machines) > 1 else ''} over {trials} trials: "
                     "the highest memory peak, and the mean of the CPU cores over the load divided by the throughput"}
