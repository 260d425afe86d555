"""The write-up's claim, answered from the run's data. The write-up: after about ten minutes the default machine
stopped answering (connect timeouts) while the tuned one served almost every request. For each machine: whether
it stopped answering, when (from the start of its own load), with which errors and what the run recorded beside
it (OOM kills, process deaths, memory against its limit, time in GC); or, when it held, what its figures show.

A machine "stopped answering" in the first 10-s window (by sample end) in which at least STOPPED_ERROR_RATE of
its requests failed."""
from __future__ import annotations

from lab.analysis.jmeter import ERROR_RATE_THRESHOLD
from lab.analysis.prose import oom_kills
from lab.analysis.text import mib, pct
from lab.names import MACHINES, clock
from lab.numbers import number

CLAIM = ("The write-up: after about ten minutes the default machine stopped answering (connect timeouts) while "
         "the tuned one served almost every request.")
CLAIM_AFTER_S = 600
STOPPED_ERROR_RATE = 0.5
BASIS = (f"a machine stopped answering in the first 10-s window (by sample end) in which {STOPPED_ERROR_RATE:.0%} "
         "or more of its requests failed; times from the start of its own load; errors from JMeter's results, "
         "deaths and OOM kills from events.json, memory from PCP, GC from the GC log")


def _stopped(entry: dict, load_series: dict) -> float | None:
    """Seconds from the start of the machine's load to the first window that failed at STOPPED_ERROR_RATE."""
    start = number(entry["load"].get("load_start_s")) or 0.0
    for at, count, rate in zip(load_series.get("buckets") or [], load_series.get("bucket_samples") or [],
                               load_series.get("bucket_error_rate") or [], strict=False):
        if count and rate >= STOPPED_ERROR_RATE:
            return max(0.0, at - start)
    return None


def _beside(entry: dict, start_s: float) -> list[str]:
    """What the run recorded about the machine: deaths, OOM kills, memory, GC."""
    said = []
    events = entry.get("events") or {}
    exits = [e for e in events.get("process_exits") or [] if isinstance(e, dict) and number(e.get("at_s")) is not None]
    if exits:
        first = min(exits, key=lambda e: e["at_s"])
        said.append(f"{first.get('process', 'a process')} died {len(exits)} time{'s' if len(exits) != 1 else ''}, "
                    f"first at {clock(first['at_s'] - start_s)} ({first.get('reason') or 'no reason recorded'})")
    oom = oom_kills(entry)
    if oom:
        said.append(f"the kernel's OOM killer struck {oom} time{'s' if oom != 1 else ''}")
    peak = number((entry.get("memory") or {}).get("peak_bytes"))
    limit = number((entry.get("observed") or {}).get("jvm_memory_limit_bytes"))
    if peak is not None and limit:
        said.append(f"memory peaked at {peak / limit:.0%} of its {mib(limit)} limit")
    gc = entry.get("gc") or {}
    if gc.get("time_in_gc_pct") is not None:
        said.append(f"{gc['time_in_gc_pct']:.1f}% of its time in GC pauses")
    return said


def _machine(name: str, entry: dict, load_series: dict) -> dict:
    load = entry["load"]
    start_s = number(load.get("load_start_s")) or 0.0
    length_s = (number(load.get("load_end_s")) or start_s) - start_s
    stopped = _stopped(entry, load_series)
    total = load.get("all") or {}
    beside = _beside(entry, start_s)
    if stopped is None:
        sentence = (f"{name} did not stop answering: {pct(total.get('error_rate'), 2)} of its "
                    f"{total.get('samples', 0):,} requests failed over {clock(length_s)} "
                    f"of load, never {STOPPED_ERROR_RATE:.0%} in a 10-s window")
    else:
        kinds = load.get("errors_by_type") or []
        errors = ", ".join(f"{k['error']} ({k['count']:,})" for k in kinds[:3]) or "errors"
        sentence = (f"{name} stopped answering in the 10-s window from {clock(stopped)} of its load "
                    f"({STOPPED_ERROR_RATE:.0%} or more of its requests failed; over the whole load "
                    f"{pct(total.get('error_rate'), 2)}): {errors}")
    sentence += ("; " + ", ".join(beside) if beside else "") + "."
    return {"stopped_after_s": None if stopped is None else round(stopped, 1), "sentence": sentence,
            "load_s": round(length_s, 1),
            "error_rate": total.get("error_rate"),
            "errors_above_threshold": (load.get("error_threshold") or {}).get("crossed_at_s") is not None}


def answer(summary: dict, series: dict) -> dict | None:
    """{"claim", "machines": {name: {"stopped_after_s", "sentence"}}, "conclusion", "basis"}; None for a run that
    cannot answer it (a capacity run, or a machine without results)."""
    machines = summary.get("machines") or {}
    if summary.get("capacity") or not all((machines.get(m) or {}).get("load") for m in MACHINES):
        return None
    found = {m: _machine(m, machines[m], ((series.get("machines") or {}).get(m) or {}).get("load") or {})
             for m in MACHINES}
    default, tuned = (found[m]["stopped_after_s"] for m in MACHINES)
    if default is not None and tuned is None:
        conclusion = (f"The claim holds in this run: default stopped answering after {clock(default)} (the write-up: "
                      f"about {clock(CLAIM_AFTER_S)}) and tuned did not.")
    elif default is None and tuned is not None:
        conclusion = (f"The opposite of the claim: tuned stopped answering after {clock(tuned)} and default did not.")
    elif default is not None:
        conclusion = (f"Both stopped answering: default after {clock(default)}, tuned after {clock(tuned)}; the claim "
                      "is that only default does.")
    elif min(found[m]["load_s"] for m in MACHINES) < CLAIM_AFTER_S:
        conclusion = (f"Not answered by this run: neither machine stopped answering, but the shorter load lasted "
                      f"{clock(min(found[m]['load_s'] for m in MACHINES))}, under the {clock(CLAIM_AFTER_S)} after "
                      "which the write-up's default machine stopped (the full profile lasts 20:00).")
    else:
        conclusion = ("Not reproduced: neither machine stopped answering in this run" + (
            f" (errors passed {ERROR_RATE_THRESHOLD:.0%} in a 10-s window on "
            + " and ".join(m for m in MACHINES if found[m]["errors_above_threshold"]) + ")"
            if any(found[m]["errors_above_threshold"] for m in MACHINES) else "") + ".")
    return {"claim": CLAIM, "machines": found, "conclusion": conclusion, "basis": BASIS}
