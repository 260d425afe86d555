"""The few lines a run ends with on the terminal, from its summary: what each machine did in the
steady state, the ratio, and how the run ended (the report has the rest)."""
from __future__ import annotations

from lab.analysis.text import ms, pct, rate, times
from lab.names import MACHINES, clock
from lab.numbers import number
from lab.numbers import ratio as _ratio

AA_LINE = "  A/A: the tuned machine ran with the default machine's knobs; any difference below is noise."


def headline(summary: dict) -> list[str]:
    lines = _repeated(summary) if summary.get("kind") == "repeated" else _single(summary)
    if (summary.get("run") or {}).get("mode") == "aa":
        lines.insert(1, AA_LINE)
    return lines


def _capacity(summary: dict) -> list[str]:
    run = summary.get("run") or {}
    machines = summary.get("machines") or {}
    slo = next((m["capacity"]["slo"]["text"] for m in machines.values() if (m or {}).get("capacity")), "?")
    lines = [f"Capacity ({run.get('schedule') or '?'}, open model; a step meets the SLO when {slo}):"]
    for machine in MACHINES:
        found = (machines.get(machine) or {}).get("capacity")
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
    ratio = (summary.get("capacity") or {}).get("ratio")
    lines.append(f"  tuned/default capacity: {times(ratio)}" if ratio is not None
                 else f"  {(summary.get('capacity') or {}).get('note') or 'no ratio'}.")
    return lines + _ending(summary)


def _single(summary: dict) -> list[str]:
    if summary.get("capacity"):
        return _capacity(summary)
    run = summary.get("run") or {}
    profile = run.get("profile") or {}
    machines = summary.get("machines") or {}
    loads = {m: machines[m]["load"] for m in MACHINES if (machines.get(m) or {}).get("load")}
    unsettled = [machine for machine, load in loads.items() if (load.get("window") or {}).get("settled") is False]
    lines = [f"Result ({run.get('schedule') or '?'}, {profile.get('users', '?')} users per machine, "
             f"{clock(number(profile.get('duration_s')))} of load{' each' if run.get('schedule') == 'sequential' else ''}"
             f"; {'whole run: no steady state' if unsettled else 'steady state'}):"]
    for machine in MACHINES:
        load = loads.get(machine)
        if not load:
            lines.append(f"  {machine:<8} no JMeter results")
            continue
        shown = load["all"] if unsettled and isinstance(load.get("all"), dict) else load
        lines.append(f"  {machine:<8} {rate(shown.get('throughput_rps')):>13}   "
                     f"{shown.get('errors', 0):,} errors ({pct(shown.get('error_rate'), 2)})   "
                     f"p95 {ms((shown.get('latency_ms') or {}).get('p95'))}")
    # With errors, the requests answered well are what counts: a machine failing fast looks busy.
    served_well = {machine: _served_well(load) for machine, load in loads.items()}
    if unsettled:
        lines.append(f"  No ratio: {' and '.join(unsettled)} did not reach a steady state.")
    elif any(load.get("error_rate") for load in loads.values()):
        ratio = _ratio(served_well.get("tuned"), served_well.get("default"))
        if ratio is not None:
            lines.append(f"  tuned/default requests answered without error, per second: {times(ratio)} "
                         f"({rate(served_well['tuned'])} vs {rate(served_well['default'])})")
    else:
        ratio = _ratio((loads.get("tuned") or {}).get("throughput_rps"),
                       (loads.get("default") or {}).get("throughput_rps"))
        if ratio is not None:
            lines.append(f"  tuned/default throughput: {times(ratio)}")
    for limit in ((summary.get("limits") or {}).get("machines") or {}).values():
        lines.extend(f"  {sentence}" for sentence in limit.get("sentences") or [])
    return lines + _ending(summary)


def _ending(summary: dict) -> list[str]:
    """How the run ended, its verdict, its backend, and that one trial has no interval."""
    run = summary.get("run") or {}
    lines = []
    ended = run["ended"] if isinstance(run.get("ended"), dict) else {}
    if ended.get("how") not in (None, "completed"):
        how = "stopped by an error" if ended["how"] == "failed" else ended["how"]
        lines.append(f"  The run was {how} during {ended.get('during', '?')}"
                     + (f": {ended['error']}" if ended.get("error") else "") + "; the figures cover what it measured.")
    if summary.get("verdict"):
        lines.append(_verdict_line(summary))
    if run.get("backend") not in (None, "local") and run.get("backend_note"):    # local: the verdict says it
        lines.append(f"  Backend: {run['backend_note']}.")
    lines.append("  One trial: the ratio carries no interval of its own (--repeat N gives one).")
    return lines


def _served_well(load: dict) -> float | None:
    """Requests answered without error per second (summaries from before it was a figure: from the rate)."""
    if "good_throughput_rps" in load:
        return number(load["good_throughput_rps"])
    rate, errors = number(load.get("throughput_rps")), number(load.get("error_rate"))
    return None if rate is None else rate * (1 - (errors or 0))


def interval_text(row: dict) -> str:
    """1.05x (95% interval 0.98x-1.12x, 3 trials), or why there is no interval."""
    if row.get("ratio") is None:
        return "no ratio" + (f" ({row['note']})" if row.get("note") else "")
    if row.get("low") is None:
        return f"{times(row['ratio'])} ({row.get('note') or 'no interval'})"
    return (f"{times(row['ratio'])} (95% interval {times(row['low'])}-{times(row['high'])}, "
            f"{row['trials']} trials" + (f"; {row['note']}" if row.get("note") else "") + ")")


def _repeated(summary: dict) -> list[str]:
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
    for machine, found in ((summary.get("capacity") or {}).get("machines") or {}).items():
        lines.append(f"  {machine:<8} capacity {_capacity_interval(found)}")
    rows = {row["key"]: row for row in summary.get("comparison") or []}
    errors = rows.get("error_rate") or {}
    # With errors, a machine failing fast looks busy: what was answered well leads.
    failing = (("good_throughput_rps", "requests answered without error, per second"),) \
        if any(number(errors.get(m)) for m in MACHINES) else ()
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


def _verdict_line(summary: dict) -> str:
    verdict = summary.get("verdict") or {}
    return f"  Verdict: {verdict.get('verdict', 'unknown')}. {verdict.get('sentence', '')}"
