"""Several saved capacity runs' machines in one table (./start.sh compare RUN_A RUN_B RUN_C ...): with two machines
a run measures two configurations side by side; a line-up puts the configurations of several runs together (the
classic and the modern stack, default and tuned: docs/machines.md, "Tune or upgrade"). Each configuration is a run's
machine: its stack as the running service showed it, its capacity at the SLO over the run's trials with its interval,
its capacity over the first run's default machine (the baseline) with an unpaired interval, the memory it held at
its knee, the CPU a request cost it where it last kept up, and what bound it (each trial's verdict). The same
machine with the same knobs in two runs is said to be one configuration measured twice: how far apart the two are
is what the runs' conditions moved it.

    line_up(runs) -> LineUp
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TypedDict

from lab.analysis import repeated, trials
from lab.analysis.compare import figures_of, knobs_of
from lab.analysis.knobs_differ import named
from lab.errors import StepFailed
from lab.knobs import WHERE
from lab.names import MACHINES
from lab.numbers import mean, number
from lab.runfolder import RunFolder


class Interval(TypedDict):
    mean: float | None
    low: float | None
    high: float | None
    trials: int
    note: str | None


class Versus(TypedDict):
    ratio: float | None
    low: float | None
    high: float | None
    note: str | None


class Configuration(TypedDict):
    id: str                         # RUN/machine
    run_id: str
    machine: str
    label: str
    stack: str | None
    versions: str | None
    virtual_threads: bool | None
    knobs_file: str | None          # the knobs file the machine was given over its host_vars (up --knobs), if any
    capacity: Interval
    per_trial_rps: list[float | None]
    lower_bounds: int               # trials whose load generator ran out before the machine missed the SLO
    versus_baseline: Versus
    memory_at_knee_bytes: float | None      # the most any trial's knee step held (PSS of the machine's processes)
    memory_peak_bytes: float | None         # the most over any trial's whole load
    memory_limit_bytes: float | None
    cpu_ms_per_request: float | None        # the machine's processes, at the step that gave its capacity (mean)
    bound: str                              # each trial's verdict for the machine, counted
    differs_from_baseline: list[str]        # the knobs whose value differs from the baseline's
    same_as: list[str]                      # the ids of the other runs' configurations with the same machine and knobs


class RunAbout(TypedDict):
    run_id: str
    path: str
    trials: int
    schedule: str | None
    memory_model: str | None
    profile: dict
    verdicts: str


class LineUp(TypedDict):
    runs: list[RunAbout]
    configurations: list[Configuration]     # the best capacity first
    baseline: str
    notes: list[str]
    basis: str


BASIS = ("capacity: each trial's highest rate that met the SLO, their mean over the run's counted trials with a "
         "percentile bootstrap interval of the mean (a trial whose load generator ran out first is a lower bound, "
         "left out and counted); over the baseline: an unpaired percentile bootstrap of the ratio of the means, each "
         "run's trials resampled on their own (two runs' trials share no host conditions); memory: the proportional "
         "set size of the machine's processes (PCP), the most any trial held over its knee step and over its whole "
         "load; CPU: the machine's processes' CPU milliseconds per request answered at the step that gave the "
         "capacity, the mean over the trials; bound: each trial's verdict for the machine")


def line_up(runs: list[Path]) -> LineUp:
    folders = [RunFolder(Path(run)) for run in runs]
    about, configurations, knobs = [], [], {}
    for folder in folders:
        summaries = _capacity_summaries(folder)
        about.append(_about(folder, summaries))
        knobs[folder.root.name] = knobs_of(folder)
        given = _given(summaries)
        configurations += [_configuration(folder, machine, summaries, knobs[folder.root.name].get(machine),
                                          given.get(machine)) for machine in MACHINES]
    baseline = configurations[0]
    for configuration in configurations:
        configuration["versus_baseline"] = _versus(baseline["per_trial_rps"], configuration["per_trial_rps"])
    _relate(configurations, knobs)
    configurations.sort(key=lambda c: -(c["capacity"]["mean"] or 0))
    return {"runs": about, "configurations": configurations, "baseline": baseline["id"],
            "notes": _notes(about, configurations), "basis": BASIS}


def _capacity_summaries(folder: RunFolder) -> list[dict]:
    """The run's counted trials' figures (a single run: its own); a run without a capacity is refused, named."""
    runs = repeated.counted_trials(folder) if folder.trials() else [folder]
    summaries: list[dict] = [dict(figures) for run in runs if (figures := figures_of(folder, run)) is not None]
    if not any(((s.get("machines") or {}).get(m) or {}).get("capacity") for s in summaries for m in MACHINES):
        raise StepFailed(f"compare: {folder.root.name} has no capacity (made by ./start.sh run, not capacity?): "
                         "three or more runs are lined up by their capacities at the SLO")
    return summaries


def _machine(summary: dict, machine: str) -> dict:
    found = (summary.get("machines") or {}).get(machine)
    return found if isinstance(found, dict) else {}


def _path(value: object, *keys: str) -> object:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _configuration(folder: RunFolder, machine: str, summaries: list[dict], knobs: dict | None,
                   given: str | None) -> Configuration:
    figures = [_machine(s, machine) for s in summaries]
    capacities = [f.get("capacity") or {} for f in figures]
    measured = [number(c.get("capacity_rps")) if c.get("found") else None for c in capacities]
    interval = trials.mean_interval(measured)
    observed: dict = next((f["observed"] for f in figures if isinstance(f.get("observed"), dict)), {})
    verdicts = _counted(str(_path(s, "verdict", "machines", machine, "verdict") or "no verdict") for s in summaries)
    # A run from before camel_app_stack existed ran the classic stack: the only one there was.
    stack = observed.get("stack") or (knobs or {}).get("camel_app_stack") or ("classic" if knobs else None)
    label = f"{stack or 'unknown'} stack" + (", virtual threads" if observed.get("virtual_threads") else "")
    label += f"; {machine}'s knobs" + (f" + {Path(given).name}" if given else "")
    limits = [number(_path(f, "memory", "budget", "limit_mib")) for f in figures]
    return {"id": f"{folder.root.name}/{machine}", "run_id": folder.root.name, "machine": machine, "label": label,
            "stack": stack, "versions": observed.get("stack_versions"), "virtual_threads": observed.get("virtual_threads"),
            "knobs_file": given,
            "capacity": {"mean": interval["mean"], "low": interval["low"], "high": interval["high"],
                         "trials": interval["trials"], "note": interval.get("note")},
            "per_trial_rps": measured,
            "lower_bounds": sum(1 for c in capacities if c.get("capacity_rps") is not None and not c.get("found")),
            "versus_baseline": {"ratio": None, "low": None, "high": None, "note": None},
            "memory_at_knee_bytes": _most(number(_path(c, "at_knee", "memory_pss_peak_bytes")) for c in capacities),
            "memory_peak_bytes": _most(number(_path(f, "memory", "peak_bytes")) for f in figures),
            "memory_limit_bytes": (_most(limits) or 0) * 2**20 or None,
            "cpu_ms_per_request": _mean(number(_path(c, "at_capacity", "cpu_per_request", "machine_ms"))
                                        for c in capacities),
            "bound": verdicts,
            "differs_from_baseline": [], "same_as": []}


def _counted(verdicts: Iterable[str]) -> str:
    """Each trial's verdict, counted: "backend-bound 2/3, valid 1/3"."""
    counts = Counter(verdicts)
    return ", ".join(f"{verdict} {count}/{counts.total()}" for verdict, count in counts.most_common())


def _most(values) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return round(value, 3) if (value := mean(present)) is not None else None


def _versus(baseline: list[float | None], other: list[float | None]) -> Versus:
    interval = trials.unpaired_interval([v for v in baseline if v is not None], [v for v in other if v is not None])
    return {"ratio": interval["ratio"], "low": interval["low"], "high": interval["high"], "note": interval.get("note")}


def _given(summaries: list[dict]) -> dict[str, str]:
    """The knobs file each machine was given over its host_vars (run.given_knobs: up --knobs), by machine."""
    given = _path(summaries[0] if summaries else {}, "run", "given_knobs")
    return {m: str(g["source"]) for m, g in given.items() if isinstance(g, dict) and g.get("source")} \
        if isinstance(given, dict) else {}


def _tuning(knobs: dict | None, machine: str) -> dict[str, str]:
    """A machine's knobs as they set its tuning: where things live (WHERE) left out, its own name in a value (a node
    name) put as MACHINE, each value as JSON, so that two runs' or two machines' tunings compare."""
    return {variable: named(json.dumps(value, sort_keys=True, default=str), machine)
            for variable, value in (knobs or {}).items() if not variable.endswith(WHERE)}


def _relate(configurations: list[Configuration], knobs: dict[str, dict[str, dict]]) -> None:
    """Each configuration's knobs against the baseline's, and the same machine with the same knobs in other runs."""
    tuning = {c["id"]: _tuning(knobs[c["run_id"]].get(c["machine"]), c["machine"]) for c in configurations}
    base = tuning[configurations[0]["id"]]
    for configuration in configurations:
        own = tuning[configuration["id"]]
        configuration["differs_from_baseline"] = sorted(v for v in set(own) | set(base) if own.get(v) != base.get(v))
        configuration["same_as"] = [other["id"] for other in configurations
                                    if other["id"] != configuration["id"] and other["machine"] == configuration["machine"]
                                    and own and tuning[other["id"]] == own]


def _about(folder: RunFolder, summaries: list[dict]) -> RunAbout:
    run = (summaries[0].get("run") if summaries else None) or {}
    return {"run_id": folder.root.name, "path": str(folder.root), "trials": len(summaries),
            "schedule": run.get("schedule"), "memory_model": str(_path(run, "memory_model", "name") or "") or None,
            "profile": run.get("profile") or {},
            "verdicts": _counted(str(_path(s, "verdict", "verdict") or "no verdict") for s in summaries)}


def _notes(about: list[RunAbout], configurations: list[Configuration]) -> list[str]:
    """What makes the table less than one measurement: runs that loaded differently, machines with different memory,
    a run of one trial, a capacity the load generator capped, one configuration measured twice."""
    notes = []
    for part, what in (("profile", "load profile"), ("schedule", "schedule"), ("memory_model", "memory model")):
        groups: dict[str, list[str]] = {}
        for run in about:
            groups.setdefault(json.dumps(dict(run)[part], sort_keys=True), []).append(run["run_id"])
        if len(groups) > 1:
            notes.append(f"the runs differ in their {what} ({' | '.join(', '.join(ids) for ids in groups.values())}): "
                         "a difference between their figures mixes that in")
    singles = [run["run_id"] for run in about if run["trials"] < 2]
    if singles:
        notes.append(f"{', '.join(singles)}: one trial, no interval (--repeat 3 or more gives one)")
    for configuration in configurations:
        if configuration["lower_bounds"]:
            notes.append(f"{configuration['id']}: in {configuration['lower_bounds']} trial(s) the load generator ran "
                         "out before the machine missed the SLO: a lower bound, not in its mean")
    shown = set()
    for configuration in configurations:
        twins = [configuration["id"], *configuration["same_as"]]
        if len(twins) > 1 and frozenset(twins) not in shown:
            shown.add(frozenset(twins))
            figures = ", ".join(f"{c['id']} {c['capacity']['mean']:.0f} req/s" for c in configurations
                                if c["id"] in twins and c["capacity"]["mean"] is not None)
            notes.append(f"one configuration measured in {len(twins)} runs: {figures}; how far apart they are is "
                         "what the runs' conditions moved it")
    return notes
