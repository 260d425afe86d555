"""The few lines a run ends with on the terminal, from its summary: what each machine did in the
steady state, the ratio, and how the run ended (the report has the rest)."""
from __future__ import annotations

from lab.analysis.numbers import clock, number
from lab.analysis.numbers import ratio as _ratio
from lab.analysis.prose import _fmt_rate, _ms, _pct, _times
from lab.machines import MACHINES


def headline(summary: dict) -> list[str]:
    run = summary.get("run") or {}
    profile = run.get("profile") or {}
    lines = [f"Result ({run.get('schedule') or '?'}, {profile.get('users', '?')} users per machine, "
             f"{clock(number(profile.get('duration_s')))} of load{' each' if run.get('schedule') == 'sequential' else ''}"
             "; steady state):"]
    loads = {}
    for machine in MACHINES:
        load = ((summary.get("machines") or {}).get(machine) or {}).get("load")
        if not load:
            lines.append(f"  {machine:<8} no JMeter results")
            continue
        loads[machine] = load
        lines.append(f"  {machine:<8} {_fmt_rate(load.get('throughput_rps')):>13}   "
                     f"{load.get('errors', 0):,} errors ({_pct(load.get('error_rate'), 2)})   "
                     f"p95 {_ms((load.get('latency_ms') or {}).get('p95'))}")
    # With errors, the requests answered well are what counts: a machine failing fast looks busy.
    served_well = {machine: _served_well(load) for machine, load in loads.items()}
    if any(load.get("error_rate") for load in loads.values()):
        ratio = _ratio(served_well.get("tuned"), served_well.get("default"))
        if ratio is not None:
            lines.append(f"  tuned/default requests answered without error, per second: {_times(ratio)} "
                         f"({_fmt_rate(served_well['tuned'])} vs {_fmt_rate(served_well['default'])})")
    else:
        ratio = _ratio((loads.get("tuned") or {}).get("throughput_rps"),
                       (loads.get("default") or {}).get("throughput_rps"))
        if ratio is not None:
            lines.append(f"  tuned/default throughput: {_times(ratio)}")
    ended = run.get("ended") if isinstance(run.get("ended"), dict) else {}
    if ended.get("how") not in (None, "completed"):
        how = "stopped by an error" if ended["how"] == "failed" else ended["how"]
        lines.append(f"  The run was {how} during {ended.get('during', '?')}"
                     + (f": {ended['error']}" if ended.get("error") else "") + "; the figures cover what it measured.")
    if run.get("backend") == "local":
        lines.append("  One trial on the local backend, both machines on this host's cores: see the report's notes "
                     "before reading the ratio as the tuning's.")
    return lines


def _served_well(load: dict) -> float | None:
    rate, errors = number(load.get("throughput_rps")), number(load.get("error_rate"))
    return None if rate is None else rate * (1 - (errors or 0))
