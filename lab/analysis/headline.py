"""The few lines a run ends with on the terminal, from its summary: what each machine did in the
steady state, the ratio, and how the run ended (the report has the rest)."""
from __future__ import annotations

from lab import contract
from lab.analysis.text import ms, pct, rate, times
from lab.names import MACHINES, clock
from lab.numbers import number
from lab.numbers import ratio as _ratio
from lab.runfolder import is_repeated

AA_LINE = "  A/A: the tuned machine ran with the default machine's knobs; any difference below is noise."


def headline(summary: contract.Summary | contract.RepeatedSummary) -> list[str]:
    lines = _repeated(summary) if is_repeated(summary) else _single(summary)
    if (summary.get("run") or {}).get("mode") == "aa":
        lines.insert(1, AA_LINE)
    return lines


def _capacity(summary: contract.Summary, comparison: contract.CapacityComparison) -> list[str]:
    run, machines = summary.get("run") or {}, summary.get("machines") or {}
    capacities = {m: found for m in MACHINES if (figures := machines.get(m)) and (found := figures.get("capacity"))}
    slo = next(((found.get("slo") or {}).get("text") for found in capacities.values()), None) or "?"
    lines = [f"Capacity ({run.get('schedule') or '?'}, open model; a step meets the SLO when {slo}):"]
    for machine in MACHINES:
        found = capacities.get(machine)
        if not found:
            lines.append(f"  {machine:<8} no JMeter results")
            continue
        capacity = found.get("capacity_rps")
        shown = "none" if capacity is None else f"{'at least ' if found.get('reached_max') else ''}{capacity} req/s"
        lines.append(f"  {machine:<8} capacity {shown}" + (f"; {found['broke']}" if found.get("broke") else
                                                          f" ({found['note']})" if found.get("note") else ""))
        queued = (found.get("at_knee") or {}).get("queued") or {}
        if queued.get("sentence"):
            lines.append(f"  {'':<8} at its knee, {queued['sentence']}")
    ratio = comparison.get("ratio")
    lines.append(f"  tuned/default capacity: {times(ratio)}" if ratio is not None
                 else f"  {comparison.get('note') or 'no ratio'}.")
    return lines + _ending(summary)


def _single(summary: contract.Summary) -> list[str]:
    if comparison := summary.get("capacity"):
        return _capacity(summary, comparison)
    run, machines = summary.get("run") or {}, summary.get("machines") or {}
    profile = run.get("profile") or {}
    loads = {m: load for m in MACHINES if (figures := machines.get(m)) and (load := figures.get("load"))}
    unsettled = [machine for machine, load in loads.items() if (load.get("window") or {}).get("settled") is False]
    lines = [f"Result ({run.get('schedule') or '?'}, {profile.get('users', '?')} users per machine, "
             f"{clock(number(profile.get('duration_s')))} of load{' each' if run.get('schedule') == 'sequential' else ''}"
             f"; {'whole run: no steady state' if unsettled else 'steady state'}):"]
    for machine in MACHINES:
        load = loads.get(machine)
        if not load:
            lines.append(f"  {machine:<8} no JMeter results")
            continue
        shown = (load.get("all") or {}) if unsettled else load
        lines.append(f"  {machine:<8} {rate(shown.get('throughput_rps')):>13}   "
                     f"{shown.get('errors', 0):,} errors ({pct(shown.get('error_rate'), 2)})   "
                     f"p95 {ms((shown.get('latency_ms') or {}).get('p95'))}")
    # With errors, the requests answered well are what counts: a machine failing fast looks busy.
    if unsettled:
        lines.append(f"  No ratio: {' and '.join(unsettled)} did not reach a steady state.")
    elif any(load.get("error_rate") for load in loads.values()):
        served_well = {machine: load.get("good_throughput_rps") for machine, load in loads.items()}
        ratio = _ratio(served_well.get("tuned"), served_well.get("default"))
        if ratio is not None:
            lines.append(f"  tuned/default requests answered without error, per second: {times(ratio)} "
                         f"({rate(served_well['tuned'])} vs {rate(served_well['default'])})")
    else:
        ratio = _ratio(loads["tuned"].get("throughput_rps") if "tuned" in loads else None,
                       loads["default"].get("throughput_rps") if "default" in loads else None)
        if ratio is not None:
            lines.append(f"  tuned/default throughput: {times(ratio)}")
    for limit in ((summary.get("limits") or {}).get("machines") or {}).values():
        lines.extend(f"  {sentence}" for sentence in limit.get("sentences") or [])
    return lines + _ending(summary)


def _ending(summary: contract.Summary) -> list[str]:
    """How the run ended, its verdict, its backend, and that one trial has no interval."""
    run = summary.get("run") or {}
    lines = []
    ended = run.get("ended")
    if ended and ended.get("how") not in (None, "completed"):
        how = "stopped by an error" if ended["how"] == "failed" else ended["how"]
        lines.append(f"  The run was {how} during {ended.get('during', '?')}"
                     + (f": {ended['error']}" if ended.get("error") else "") + "; the figures cover what it measured.")
    if summary.get("verdict"):
        lines.append(_verdict_line(summary))
    if run.get("backend") not in (None, "local") and run.get("backend_note"):    # local: the verdict says it
        lines.append(f"  Backend: {run['backend_note']}.")
    lines.append("  One trial: the ratio carries no interval of its own (--repeat N gives one).")
    return lines


def interval_text(row: contract.ComparisonRow) -> str:
    """1.05x (95% interval 0.98x-1.12x, 3 trials), or why there is no interval."""
    ratio, low, high, note = row.get("ratio"), row.get("low"), row.get("high"), row.get("note")
    if ratio is None:
        return "no ratio" + (f" ({note})" if note else "")
    if low is None or high is None:
        return f"{times(ratio)} ({note or 'no interval'})"
    return (f"{times(ratio)} (95% interval {times(low)}-{times(high)}, {row.get('trials')} trials"
            + (f"; {note}" if note else "") + ")")


def _repeated(summary: contract.RepeatedSummary) -> list[str]:
    run = summary.get("run") or {}
    profile = run.get("profile") or {}
    trials = summary.get("trials") or []
    load = "open model, capacity" if profile.get("model") == "open" else \
        f"{profile.get('users', '?')} users per machine, {clock(number(profile.get('duration_s')))} of load each; " \
        "steady state"
    lines = [f"Result ({len(trials)} trials, {run.get('schedule') or '?'}, {load}):"]
    for trial in trials:
        lines.append(f"  trial {trial['number']}: default {rate(trial.get('default_rps'))}, tuned "
                     f"{rate(trial.get('tuned_rps'))}" + (f"  ({trial['verdict']})" if trial.get("verdict") else ""))
    capacity = summary.get("capacity")
    for machine, found in ((capacity.get("machines") if capacity else None) or {}).items():
        lines.append(f"  {machine:<8} capacity {_capacity_interval(found)}")
    rows = {row["key"]: row for row in summary.get("comparison") or []}
    errors = rows.get("error_rate")
    # With errors, a machine failing fast looks busy: what was answered well leads.
    failing = (("good_throughput_rps", "requests answered without error, per second"),) \
        if errors and (number(errors.get("default")) or number(errors.get("tuned"))) else ()
    for key, label in (("capacity_rps", "capacity"), *failing, ("throughput_rps", "throughput"),
                       ("p95_ms", "p95 latency")):
        if key in rows:
            lines.append(f"  tuned/default {label}: {interval_text(rows[key])}")
    note = (summary.get("definitions") or {}).get("interval_note")
    if note:
        lines.append(f"  ({note}.)")
    floor = ((summary.get("noise_floor") or {}).get("by_figure") or {}).get("throughput_rps")
    if floor is not None:
        lines.append(f"  A/A noise floor (throughput): {floor:.1%}: on this host, a difference smaller than that "
                     "between two machines is not one the lab can see.")
    lines.append(_verdict_line(summary))
    return lines


def _capacity_interval(found: dict) -> str:
    """550 req/s (95% interval 500-600 req/s, 3 trials), from repeated.summarize's capacity of a machine."""
    below = f"; {found['below_first_step']} missed the SLO from the first step, left out" \
        if found.get("below_first_step") else ""
    if found.get("mean") is None:
        return "none measured" + (f" ({found['lower_bounds']} trials gave only a lower bound{below})"
                                  if found.get("lower_bounds") else f" ({below[2:]})" if below else "")
    extra = (f"; {found['lower_bounds']} more gave only a lower bound, left out" if found.get("lower_bounds") else "") \
        + below
    if found.get("low") is None:
        return f"{found['mean']:.0f} req/s (one trial: no interval{extra})"
    return (f"{found['mean']:.0f} req/s (95% interval {found['low']:.0f}-{found['high']:.0f} req/s, "
            f"{found['trials']} trials{extra})")


def _verdict_line(summary: contract.Summary | contract.RepeatedSummary) -> str:
    verdict = summary.get("verdict") or {}
    return f"  Verdict: {verdict.get('verdict', 'unknown')}. {verdict.get('sentence', '')}"
