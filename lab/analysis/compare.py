"""Two saved runs side by side (./start.sh compare RUN_A RUN_B), for example a knob before and after:
each machine's figures in A and in B, B/A with its 95% interval when the runs had trials (their trials are
independent: an unpaired bootstrap, lab/analysis/trials.py), and each run's own tuned/default ratio.

    compare(run_a, run_b) -> dict
    gate(result, worse_pct) -> list[dict]     compare --fail-if-worse: each gated figure, passed or BROKEN
"""
from __future__ import annotations

import json
from pathlib import Path

from lab import contract
from lab.analysis import repeated, trials
from lab.analysis import summary as single
from lab.analysis.text import times
from lab.errors import StepFailed
from lab.names import MACHINES
from lab.runfolder import RunFolder

Figures = contract.Summary | contract.RepeatedSummary     # a run's summary.json (a folder without trials: either)


def _checked(folder: RunFolder, summary: Figures) -> Figures:
    """A summary as the lab writes it (its comparison a list of rows with a key; its run and verdict objects),
    else the folder named with what is wrong: a foreign or hand-edited file is a message, never a traceback (its
    type says what the lab writes, not what a file holds: these are the parts compare indexes)."""
    rows = summary.get("comparison")
    if not isinstance(rows or [], list) or not all(isinstance(row, dict) and "key" in row for row in rows or []):
        wrong = "its summary.json's comparison is not a list of rows"
    elif not all(isinstance(summary.get(part) or {}, dict) for part in ("run", "verdict")):
        wrong = "its summary.json's run or verdict is not an object"
    else:
        return summary
    raise StepFailed(f"compare: {folder.root}: {wrong}; is it a run folder the lab wrote?")


def figures_of(folder: RunFolder, run: RunFolder) -> Figures | None:
    """One run's figures (a trial of folder, or folder itself), made where missing (None: neither summary nor run
    record); a summary that cannot be read is named, with why."""
    if run.summary_json.is_file():
        problems: list[str] = []
        summary = run.summary(problems)
        if summary is None:
            raise StepFailed(f"compare: {folder.root}: {'; '.join(problems)}")
        return _checked(folder, summary)
    if run.run_json.is_file():                  # figures made here, never written into a saved run
        return single.summarize(run.root, write=False, use_gcviewer=False)     # its problems: what is missing
    return None


def _summaries(folder: RunFolder) -> list[Figures]:
    """The figures of each trial (a single run: its own)."""
    return [figures for run in folder.trials() or [folder] if (figures := figures_of(folder, run)) is not None]


def _values(summaries: list[Figures], key: str, column: str) -> list[float]:
    """A comparison row's column (a machine, or "ratio") in each trial that has it."""
    rows = [next((row for row in s.get("comparison") or [] if row["key"] == key), None) for s in summaries]
    return [value for row in rows if row and isinstance(value := row.get(column), (int, float))]


def _about(folder: RunFolder, summaries: list[Figures]) -> dict:
    top = folder.summary() or (summaries[0] if summaries else None)
    if top is not None:
        _checked(folder, top)
    run = (top.get("run") if top else None) or {}
    verdict = top.get("verdict") if top else None
    return {"run_id": folder.root.name, "path": str(folder.root), "trials": len(summaries),
            "repeated": repeated.is_repeated(folder.root), "schedule": run.get("schedule"),
            "profile": run.get("profile") or {}, "backend": run.get("backend"),
            "verdict": verdict.get("verdict") if verdict else None, "mode": run.get("mode"),
            "report": str(folder.report_html) if folder.report_html.is_file() else None}


def compare(run_a: Path, run_b: Path) -> dict:
    a, b = RunFolder(Path(run_a)), RunFolder(Path(run_b))
    figures_a, figures_b = _summaries(a), _summaries(b)
    rows = []
    for key, label, unit, _get, better in single.COMPARED:
        for column in (*MACHINES, "ratio"):
            before, after = _values(figures_a, key, column), _values(figures_b, key, column)
            if not before and not after:
                continue
            interval = trials.unpaired_interval(before, after)
            rows.append({"key": key, "label": label, "unit": "x" if column == "ratio" else unit, "better": better,
                         "of": column, "a": sum(before) / len(before) if before else None,
                         "b": sum(after) / len(after) if after else None, "b_over_a": interval["ratio"],
                         "low": interval["low"], "high": interval["high"], "note": interval.get("note"),
                         "points_a": before, "points_b": after})
    differing = _knobs(a, b)
    return {"a": _about(a, figures_a), "b": _about(b, figures_b), "rows": rows, "knobs": differing,
            "basis": "each figure: the run's own (a repeated run: the mean over its trials); B/A with a 95% "
                     "percentile bootstrap interval, each run's trials resampled on their own",
            "comparable": _comparable(figures_a, figures_b)}


def knobs_of(folder: RunFolder) -> dict[str, dict]:
    """Each machine's knobs as the run recorded them (knobs.json), {} where it holds none the lab could read."""
    try:
        knobs = json.loads(folder.knobs_json.read_text())
    except (OSError, ValueError):
        return {}
    return {machine: given for machine, given in knobs.items() if isinstance(given, dict)} \
        if isinstance(knobs, dict) else {}


def _knobs(a: RunFolder, b: RunFolder) -> list[dict]:
    """The knobs of each machine that differ between the runs (their knobs.json), what a user changed."""
    knobs_a, knobs_b = knobs_of(a), knobs_of(b)
    changed = []
    for machine in MACHINES:
        before, after = knobs_a.get(machine) or {}, knobs_b.get(machine) or {}
        for variable in sorted(set(before) | set(after)):
            if json.dumps(before.get(variable), sort_keys=True) != json.dumps(after.get(variable), sort_keys=True):
                changed.append({"machine": machine, "variable": variable, "a": before.get(variable, "(unset)"),
                                "b": after.get(variable, "(unset)")})
    return changed


def _comparable(figures_a: list[Figures], figures_b: list[Figures]) -> str | None:
    """Why B/A may mislead: the runs loaded differently (another profile or schedule)."""
    def shape(figures: list[Figures]) -> tuple:
        run = (figures[0].get("run") if figures else None) or {}
        return json.dumps(run.get("profile"), sort_keys=True), run.get("schedule"), run.get("backend")
    if figures_a and figures_b and shape(figures_a) != shape(figures_b):
        return "the runs differ in their load, schedule or backend: B/A mixes that difference with any other"
    return None


# What a baseline gate judges, on each machine: its headline rate and its p95 (B/A means something for each; an error
# rate of 0 in the baseline has no ratio).
GATED = ("capacity_rps", "throughput_rps", "p95_ms")


def gate(result: dict, worse_pct: float) -> list[dict]:
    """compare RUN_A RUN_B --fail-if-worse PCT: each gated figure of each machine, B against A as the baseline, in
    the rows thresholds use (lab/analysis/thresholds.py: the same JUnit file, exit code 3). Worse than A by more than
    PCT breaks it: with an interval (both runs repeated) only when the whole 95% interval is, a regression the trials
    show rather than noise; else by B/A itself. A figure with no B/A (one run lacks it, or A's is 0) breaks it: it
    cannot be shown to pass."""
    results = []
    for row in result["rows"]:
        if row["key"] not in GATED or row["of"] not in MACHINES:
            continue
        higher = row["better"] == "higher"
        limit = 1 - worse_pct / 100 if higher else 1 + worse_pct / 100
        best = row["high"] if higher else row["low"]            # the interval's end most in B's favour
        judged = best if best is not None else row["b_over_a"]
        passed = judged is not None and (judged >= limit if higher else judged <= limit)
        name = f"{row['key']} worse by at most {worse_pct:g}%"
        if row["b_over_a"] is None:
            shown = f"no B/A ({row.get('note') or 'no figure'})"
        else:
            interval = f", 95% interval {times(row['low'])}-{times(row['high'])}" if row["low"] is not None else ""
            shown = f"B/A {times(row['b_over_a'])}{interval}"
        results.append({"threshold": name, "machine": row["of"], "limit": round(limit, 6), "value": judged,
                        "passed": passed,
                        "message": f"{'passed' if passed else 'BROKEN'}: {row['of']} {row['key']} "
                                   f"(B/A {'>=' if higher else '<='} {limit:.2f}x): {shown}"})
    return results
