"""A repeated run (./start.sh run --repeat N): its trials (trials/<k>/, each a run folder with its own
summary) compared, every ratio with its 95% interval over the trials (lab/analysis/trials.py).

    summarize(run_dir) -> dict        # also writes the run folder's summary (RunFolder.summary_json)
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import cast

from lab import contract
from lab.analysis import summary as single
from lab.analysis import thresholds
from lab.analysis import trials as stats
from lab.analysis.verdict import ORDER
from lab.names import MACHINES
from lab.numbers import mean
from lab.runfolder import RunFolder

KIND = "repeated"


def is_repeated(run_dir: Path) -> bool:
    return bool(RunFolder(Path(run_dir)).trials())


def not_counted(run: dict) -> dict[str, str]:
    """The trials (by number) a repeated run (its run.json) did not count, each with why: a trial that gave a machine
    no figure (an ablation's, a validation's) or whose knee the host stood still in (lab/analysis/host_pause.py) was
    replaced."""
    trials = run.get("trials")
    return {str(t.get("number")): str(t.get("not_counted") or "not counted")
            for t in (trials if isinstance(trials, list) else []) if isinstance(t, dict) and t.get("counted") is False}


def counted_trials(folder: RunFolder) -> list[RunFolder]:
    """A run folder's trials but those its run did not count. In an ablation's pair, the other machine's figure in
    such a trial goes too, so that both configurations of a pair rest on the same trials."""
    dropped = not_counted((folder.read_json(folder.run_json, [], "run") or {}) if folder.run_json.is_file() else {})
    return [trial for trial in folder.trials() if trial.root.name not in dropped]


def summarize(run_dir: Path, write: bool = True) -> contract.RepeatedSummary:
    """The trials' figures and their comparison (also written to run_dir/summary.json). Built key by key: its shape
    is held to the type by tests/test_contract.py."""
    folder = RunFolder(Path(run_dir))
    problems: list[str] = []
    run = folder.read_json(folder.run_json, problems, "run") or {}
    trials, left_out = [], not_counted(run)     # run.json as read above
    for trial in folder.trials():
        figures = trial.read_json(trial.summary_json, [], "summary") if trial.summary_json.is_file() else None
        if figures is None and trial.run_json.is_file():
            figures = dict(single.summarize(trial.root))    # read as the trials' stored ones are: a dict
        if figures is None:
            problems.append(f"trial {trial.root.name}: no summary (the trial did not get to load)")
            continue
        trials.append((trial, figures))
    rows = [{**_trial_row(trial, figures, folder), **({"counted": False, "not_counted": left_out[trial.root.name]}
                                                      if trial.root.name in left_out else {"counted": True})}
            for trial, figures in trials]
    # a trial the run did not count (the host paused in a knee, say) is listed, never averaged
    trials = [(trial, figures) for trial, figures in trials if trial.root.name not in left_out]
    result: dict = {
        "schema": single.SCHEMA, "kind": KIND, "generated_at": round(time.time(), 3), "generator": "lab/analysis",
        "run": {key: run.get(key) for key in ("run_id", "backend", "backend_note", "schedule", "profile", "placement",
                                              "started_at", "ended_at", "interrupted", "ended", "host", "versions",
                                              "repeat", "mode", "tuned_knobs", "given_knobs", "configuration", "configurations",
                                              "thresholds")},
        "trials": rows,
        "comparison": _comparison([figures for _, figures in trials]),
        "verdict": _verdict([(trial.root.name, figures) for trial, figures in trials], run.get("repeat")),
        "definitions": {"interval": f"95% {stats.METHOD}; the ratio is mean(tuned) / mean(default) over the trials "
                                    "whose figures are comparable",
                        "interval_note": stats.few_trials_note(len(trials)),
                        **((trials[0][1].get("definitions") or {}) if trials else {})},
        "problems": problems,
    }
    if any((figures.get("capacity") for _, figures in trials)):
        result["capacity"] = _capacity([figures for _, figures in trials], result["comparison"])
    if run.get("mode") == "aa":
        result["noise_floor"] = _noise_floor(result["comparison"])
    if isinstance(run.get("thresholds"), dict) and run["thresholds"]:
        result["thresholds"] = thresholds.check(result, run["thresholds"])
    if write:
        folder.write_json(folder.summary_json, result)
    return cast(contract.RepeatedSummary, result)


def _noise_floor(rows: list[dict]) -> dict:
    """An A/A run's smallest difference this host can tell from noise: for each figure, the largest departure
    from 1 that its interval over the trials allows (both machines had the same knobs)."""
    floor = {row["key"]: round(max(1 - row["low"], row["high"] - 1, 0.0), 6) for row in rows
             if row.get("low") is not None and row.get("high") is not None}
    return {"by_figure": floor, "basis": "A/A: both machines with the default machine's knobs; the largest "
                                         "departure from 1 of each figure's 95% interval over the trials"}


def _trial_row(trial: RunFolder, figures: dict, folder: RunFolder) -> dict:
    rows = {row["key"]: row for row in figures.get("comparison") or []}
    throughput = rows.get("capacity_rps") or rows.get("throughput_rps") or {}    # a capacity run's: its capacity
    verdict = figures.get("verdict") or {}
    run = figures.get("run") or {}
    return {"number": int(trial.root.name), "folder": folder.relative(trial.root),
            "report": folder.relative(trial.report_html) if trial.report_html.is_file() else None,
            "order": (folder.read_json(trial.run_json, [], "run") or {}).get("order"),
            "default_rps": throughput.get("default"), "tuned_rps": throughput.get("tuned"),
            "ratio": throughput.get("ratio"), "verdict": verdict.get("verdict"), "sentence": verdict.get("sentence"),
            "ended": run.get("ended")}


def _comparison(summaries: list[dict]) -> list[dict]:
    """Every row of a single run's comparison, over the trials: the means, the ratio and its interval.
    A trial whose row has no ratio of its own (no steady state, zero on default, measured differently) is left
    out of the ratio, and the row says how many were and why."""
    rows = []
    for key, label, unit, _get, better in single.COMPARED:
        per_trial = [next((row for row in s.get("comparison") or [] if row["key"] == key), None) for s in summaries]
        if not any(per_trial):                          # a row no trial has (capacity, in a run of users)
            continue
        present = [row for row in per_trial if row and row["default"] is not None and row["tuned"] is not None]
        usable = [row for row in present if row["ratio"] is not None]
        interval = stats.ratio_interval([row["default"] for row in usable], [row["tuned"] for row in usable])
        row = {"key": key, "label": label, "unit": unit, "better": better,
               "default": _column(per_trial, present, "default"), "tuned": _column(per_trial, present, "tuned"),
               "ratio": interval["ratio"], "low": interval["low"], "high": interval["high"],
               "points": interval["points"], "trials": len(usable), "of": len(summaries)}
        zeros = sum(1 for r in present if r["ratio"] is None and r["default"] == 0 and r["tuned"] == 0)
        left_out = len(summaries) - len(usable)
        if zeros == left_out and zeros:
            row["note"] = f"0 on both machines in {zeros} of {len(summaries)} trials"
        elif not present and (row["default"] is None) != (row["tuned"] is None):
            row["note"] = "one machine loaded: no ratio"
        elif left_out:
            row["note"] = f"{left_out} of {len(summaries)} trials without a ratio of their own left out"
        rows.append(row)
    return rows


def _column(per_trial: list[dict | None], present: list[dict], machine: str) -> float | None:
    """A machine's mean over the trials that measured both machines; with none, over those that measured it (one
    machine loaded: an ablation's configuration)."""
    return mean([r[machine] for r in present] if present else
                [r[machine] for r in per_trial if r and r[machine] is not None])


def _capacity(summaries: list[dict], comparison: list[dict]) -> dict:
    """A repeated capacity run's capacities: each machine's over the trials, with its 95% interval (measured
    capacities only: a lower bound is not a measurement), each trial's as found, and the figure capacity_rps_min
    reads: the measured mean, or with no trial measured the smallest lower bound (as a single run's)."""
    row = next((r for r in comparison if r["key"] == "capacity_rps"), {})
    machines = {}
    for machine in MACHINES:
        found = [((s.get("machines") or {}).get(machine) or {}).get("capacity") or {} for s in summaries]
        measured = [f.get("capacity_rps") if f.get("found") else None for f in found]
        bounds = [f["capacity_rps"] for f in found if f.get("capacity_rps") is not None and not f.get("found")]
        interval = stats.mean_interval(measured)
        machines[machine] = {**interval,
                             "capacity_rps": interval["mean"] if interval["mean"] is not None else min(bounds, default=None),
                             "lower_bounds": len(bounds),
                             # a knee at the first step: below the lowest rate, no capacity to average
                             "below_first_step": sum(1 for f in found if f.get("found") and f.get("capacity_rps") is None),
                             "per_trial": [{"capacity_rps": f.get("capacity_rps"), "found": bool(f.get("found")),
                                            "reached_max": bool(f.get("reached_max")), "knee_rps": f.get("knee_rps"),
                                            "broke": f.get("broke")} for f in found]}
    return {"default_rps": machines["default"]["mean"], "tuned_rps": machines["tuned"]["mean"],
            "ratio": row.get("ratio"), "low": row.get("low"), "high": row.get("high"), "machines": machines,
            "note": None if row.get("ratio") is not None else row.get("note") or "no trial measured both capacities"}


def _verdict(trials: list[tuple[str, dict]], planned: object) -> dict:
    """Valid when every trial is; else the kind most trials share (most telling first), with its count."""
    verdicts = [(name, figures.get("verdict") or {}) for name, figures in trials]
    kinds = Counter(v.get("verdict") or "unknown" for _, v in verdicts)
    machines = {name: v for name, v in verdicts}
    if not verdicts:
        return {"valid": False, "verdict": "unknown", "sentence": "No trial has figures.", "trials": {}}
    if set(kinds) == {"valid"}:
        count = len(verdicts)
        return {"valid": True, "verdict": "valid", "trials": machines,
                "sentence": f"Valid: all {count} trials settled, and neither the host, JMeter, the backend nor "
                            "memory bound them" + (f" (of {planned} planned)" if planned != count else "") + "."}
    worst = sorted((k for k in kinds if k != "valid"), key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER)))[0]
    name, first = next((name, v) for name, v in verdicts if v.get("verdict") == worst)
    return {"valid": False, "verdict": worst, "trials": machines,
            "sentence": f"{worst} in {kinds[worst]} of {len(verdicts)} trials; trial {name}: {first.get('sentence')}"}
