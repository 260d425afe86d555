"""A tune's last stage: its best configuration measured as a user would measure it before relying on it. One capacity
run per configuration ranks configurations; this gives the answer its intervals. Two capacity runs of plan.validate
trials each, both machines loaded in every trial, so that each ratio pairs trials measured on the host as it then was
(its 95% interval over them: lab/analysis/repeated.py): the default machine against the tuned one given best.yml
(validation/found/), then against the tuned machine with its own knobs, the 2018 write-up's tuning (validation/own/).
A run that completed is kept when a tune is resumed."""
from __future__ import annotations

from pathlib import Path

from lab import aa, contract, experiment
from lab.ablation.folder import TUNED, machine_figures
from lab.analysis import host_pause
from lab.analysis.queues import HOST_CPUS
from lab.analysis.repeated import counted_trials
from lab.machines.protocol import Backend
from lab.names import MACHINES
from lab.progress import info
from lab.runfolder import RunFolder, is_repeated
from lab.tune.folder import Plan, Tuning

# name: what the tuned machine carries in that run
RUNS = {"found": "the best configuration", "own": "its own knobs (the 2018 tuning)"}


def folder_of(tuning: Tuning, name: str) -> RunFolder:
    return RunFolder(tuning.root / "validation" / name)


def completed(folder: RunFolder) -> bool:
    run = (folder.read_json(folder.run_json, [], "run") if folder.run_json.is_file() else None) or {}
    return (run.get("ended") or {}).get("how") == "completed" and folder.summary_json.is_file()


def run(backend: Backend, tuning: Tuning, plan: Plan, name: str, best_file: Path | None = None,
        give: aa.Give | None = None) -> None:
    """One validation run (RUNS' name), unless a resumed tune completed it: "found" inside the search's
    aa.machines_with, whose give hands the tuned machine best_file; "own" once the tuned machine has its own knobs back.
    A Ctrl-C during its load is raised as KeyboardInterrupt."""
    if (name == "found") != (best_file is not None and give is not None):
        raise ValueError(f"validation run {name!r}: the best configuration and a give come with 'found' only")
    folder = folder_of(tuning, name)
    carried = RUNS[name]
    if completed(folder):
        info(f"validation: the run with the tuned machine carrying {carried} was completed: kept")
        return
    info(f"validation: the default machine against the tuned one carrying {carried} ({plan.validate} trial"
         f"{'s' if plan.validate != 1 else ''})")
    # the generator's ceiling is the host's: the one the tune measured, copied into every trial
    mode: dict = {"mode": "tune-validation", "validation": name, "thresholds": {},
                  "ceiling_from": tuning.ceiling_measured_in()}
    if best_file is not None and give is not None:     # given as the search's configurations were
        give({TUNED: best_file}, "the best configuration")
        mode.update(tuned_knobs=str(best_file), knobs_files={TUNED: str(best_file)})
    # a trial whose knee the host stood still in is replaced, as many as planned (a single trial's is said: its
    # layout stays a single run's); one that gave only a lower bound counts, as a lower bound, as a capacity run's
    ended = experiment.measure(backend, plan.steps, plan.validate, folder, mode, machines=MACHINES,
                               unusable=host_pause.trial_not_counted,
                               extra=plan.validate if plan.validate > 1 else 0, schedule=plan.schedule)
    if ended["how"] == "interrupted":
        raise KeyboardInterrupt


def outcome(tuning: Tuning) -> dict:
    """Each validation run's capacities with their intervals and its ratio, and the sentence that leads the report."""
    runs = {}
    for name in RUNS:
        folder = folder_of(tuning, name)
        summary = folder.summary()
        found = summary.get("capacity") if summary else None
        runs[name] = {"folder": str(folder.root), "completed": completed(folder),
                      **{key: found.get(key) if found else None for key in ("ratio", "low", "high", "note")},
                      **{machine: _machine(summary, machine) for machine in MACHINES}}
    bound = what_bound(folder_of(tuning, "found"))
    lead = sentence(runs)
    return {"runs": runs, "bound": bound, "sentence": lead + (f". {bound['sentence']}" if bound else "")}


def what_bound(folder: RunFolder) -> dict | None:
    """What bound the best configuration at its knee in each trial of its validation run (the host's CPUs, a pool,
    none), and where the host's CPUs bound it, the most they serve at its CPU cost per request where it last kept up
    (the lowest of those trials') against the default machine's capacity in the same run: the ceiling no pool can
    pass on this host."""
    stages: dict[str, int] = {}
    ceilings: list[float] = []
    # a trial not counted (the host stood still in a knee) measured the host, not the configuration
    for trial in counted_trials(folder) or [folder]:
        measured = machine_figures(trial, TUNED)
        capacity: dict = dict((measured.get("capacity") if measured else None) or {})
        knee = capacity.get("at_knee") or {}
        if not knee:
            continue
        stage = (knee.get("queued") or {}).get("stage") or "no pool full"
        stages[stage] = stages.get(stage, 0) + 1
        ceiling = ((capacity.get("at_capacity") or {}).get("cpu_per_request") or {}).get("host_ceiling_rps")
        if stage == HOST_CPUS and isinstance(ceiling, (int, float)):
            ceilings.append(float(ceiling))
    if not stages:
        return None
    knees = sum(stages.values())
    said = "; ".join(f"{stage} at {count} of {knees}" for stage, count in sorted(stages.items(), key=lambda i: -i[1]))
    said = f"What bound the best configuration at its knees: {said}"
    default = _machine(folder.summary(), "default").get("mean")
    if ceilings:
        said += (f"; at its CPU cost per request at its capacity the host's CPUs serve at most about "
                 f"{min(ceilings):,.0f} req/s of it and its load together" + (
                     f", {min(ceilings) / default:.2f}x the default machine's {default:.0f}: no pool passes that on "
                     "this host" if isinstance(default, (int, float)) and default else ""))
    return {"stages": stages, "host_ceiling_rps": min(ceilings) if ceilings else None, "sentence": said}


def _machine(summary: contract.Summary | contract.RepeatedSummary | None, machine: str) -> dict:
    """A machine's capacity in a validation run: over its trials (a repeated run's mean and interval), or its one
    trial's (--validate 1: a run of its own, no interval)."""
    if summary is not None and is_repeated(summary):
        capacity = summary.get("capacity")
        figures: dict = ((capacity.get("machines") if capacity else None) or {}).get(machine) or {}
        return {**{key: figures.get(key) for key in ("mean", "low", "high", "trials")},
                "at_least": figures.get("capacity_rps") if figures.get("mean") is None else None}
    figures_of = (summary.get("machines") or {}).get(machine) if summary else None
    found = figures_of.get("capacity") if figures_of else None
    measured = found.get("capacity_rps") if found and found.get("found") else None
    return {"mean": measured, "low": None, "high": None, "trials": 1 if measured is not None else 0,
            "at_least": found.get("capacity_rps") if found and measured is None else None}


def _capacity(figures: dict) -> str:
    if figures.get("mean") is None:
        # past the last step or the generator's reach: a lower bound, never a capacity measured
        return f"at least {figures['at_least']:.0f} req/s" if figures.get("at_least") is not None else "no capacity"
    interval = (f" [{figures['low']:.0f}, {figures['high']:.0f}]" if figures.get("low") is not None
                and figures.get("high") is not None else "")
    return f"{figures['mean']:.0f} req/s{interval}"


def _ratio(run: dict) -> str:
    if run.get("ratio") is None:
        return f"no ratio ({run.get('note') or 'no trial measured both capacities'})"
    interval = (f" [{run['low']:.2f}, {run['high']:.2f}]" if run.get("low") is not None and run.get("high") is not None
                else " (one trial: no interval)")
    return f"{run['ratio']:.2f}x{interval}"


def sentence(runs: dict) -> str:
    found, own = runs["found"], runs["own"]
    return (f"Validated, both machines in every trial: the best configuration served {_capacity(found[TUNED])} against "
            f"the default machine's {_capacity(found['default'])}, {_ratio(found)}; the tuned machine's own knobs (the "
            f"2018 tuning) {_capacity(own[TUNED])} against {_capacity(own['default'])}, {_ratio(own)}"
            + (" (95% intervals over the trials)" if any(run.get("low") is not None for run in runs.values()) else ""))
