"""Sentences about what happened in a run, generated from its figures (each only when its data is there)."""
from __future__ import annotations

from pathlib import Path

from lab.analysis.jmeter import ERROR_RATE_THRESHOLD
from lab.analysis.text import mib, ms, pct, rate, times
from lab.names import MACHINES, clock
from lab.numbers import number
from lab.numbers import ratio as _ratio

# A machine whose memory peaked above this share of its limit is one burst from the OOM killer.
NEAR_LIMIT = 0.9


def what_happened(summary: dict) -> list[str]:
    """Sentences generated from the figures (each only when its data is there)."""
    run, machines = summary["run"], summary["machines"]
    return [*_how_it_ended(run), *_load(machines), *_gc(machines), *_memory(run, machines), *_events(machines)]


def _how_it_ended(run: dict) -> list[str]:
    """A run that did not end as planned says so first."""
    sentences: list[str] = []
    ended: dict = run["ended"] if isinstance(run.get("ended"), dict) else {}
    if ended.get("how") == "failed" or (ended.get("how") == "interrupted" and ended.get("during") != "the load"):
        sentences.append(f"The run was {'interrupted' if ended['how'] == 'interrupted' else 'stopped by an error'} "
                         f"while {ended.get('during') or 'running'}"
                         + (f" ({ended['error']})" if ended.get("error") else "")
                         + ": what follows comes from what it had collected by then.")
    elif run.get("interrupted"):
        planned = number((run.get("profile") or {}).get("duration_s"))
        lasted = run.get("duration_s")
        sentences.append("The run was interrupted" + (f" after {clock(lasted)}" if lasted is not None else "")
                         + (f" (planned: {clock(planned)} of load per machine)" if planned else "")
                         + (f": {ended['error']}." if ended.get("error") else "."))
    return sentences


def _load(machines: dict) -> list[str]:
    """Throughput and latency, tuned against default; then each machine's requests and errors."""
    sentences: list[str] = []
    for machine, entry in machines.items():
        if not entry.get("load") and machine in MACHINES:
            sentences.append(f"{machine}: no JMeter results: the machine was not loaded, or JMeter recorded nothing.")
    loaded = {m: e["load"] for m, e in machines.items() if e.get("load")}
    # Throughput and latency, tuned against default.
    d, t = loaded.get("default", {}), loaded.get("tuned", {})
    settled = all((load.get("window") or {}).get("settled") is not False for load in (d, t) if load)
    ratio = _ratio(t.get("throughput_rps"), d.get("throughput_rps")) if d and t and settled else None
    failing = ratio is not None and any(load.get("error_rate") for load in (d, t))
    if failing:
        # A machine failing fast looks busy: with errors, what counts is what was answered well.
        good = _ratio(t.get("good_throughput_rps"), d.get("good_throughput_rps"))
        lead = (f"tuned answered {times(good)} the requests per second without error of default in the steady state"
                if good is not None else "default answered no request without error in the steady state")
        sentences.append(
            f"{lead} ({t['good_throughput_rps']:,.1f} vs {d['good_throughput_rps']:,.1f} req/s); in all tuned served "
            f"{rate(t['throughput_rps'])} with {pct(t.get('error_rate'))} errors, default {rate(d['throughput_rps'])} "
            f"with {pct(d.get('error_rate'))}.")
    elif ratio is not None:
        total = _ratio(t["all"]["samples"], d["all"]["samples"])
        sentences.append(
            f"tuned served {times(ratio)} the requests per second of default in the steady state "
            f"({t['throughput_rps']:,.1f} vs {d['throughput_rps']:,.1f} req/s) at p95 {ms(t['latency_ms']['p95'])} "
            f"vs {ms(d['latency_ms']['p95'])}"
            + (f"; {times(total)} the requests over the whole run ({t['all']['samples']:,} vs "
               f"{d['all']['samples']:,})." if total is not None else "."))
    for machine, load in loaded.items():
        if ratio is None or machine not in ("default", "tuned"):
            window = load["window"]
            steady = (f"no steady state ({window.get('note', '').removeprefix('no steady state: ')}); over the whole "
                      f"run {rate(load['all']['throughput_rps'])}, p95 {ms(load['all']['latency_ms']['p95'])}"
                      if window.get("settled") is False or window["duration_s"] <= 0 else
                      f"{rate(load['throughput_rps'])} in the steady state, p95 {ms(load['latency_ms']['p95'])}")
            sentences.append(f"{machine} served {load['all']['samples']:,} requests: {steady}.")
        first = load.get("first_error")
        if not first:
            sentences.append(f"{machine}: no errors ({load['all']['samples']:,} requests).")
            continue
        sentences.append(_errors(machine, load, first))
    return sentences


def _errors(machine: str, load: dict, first: dict) -> str:
    """When a machine's errors began, how they grew and of what kinds."""
    threshold = load["error_threshold"]
    if threshold["crossed_at_s"] is not None:
        start = threshold["crossed_at_s"]
        text = (f"{machine}: error rate passed {ERROR_RATE_THRESHOLD:.0%} at {clock(start)} "
                f"({pct(threshold['bucket_error_rate'])} of the {threshold['bucket_samples']:,} requests that "
                f"ended in {clock(start)}–{clock(start + threshold['bucket_s'])}; above {ERROR_RATE_THRESHOLD:.0%} "
                f"in {threshold['buckets_above']} of {threshold['buckets']} {threshold['bucket_s']}-s windows)")
    else:
        text = (f"{machine}: error rate stayed at or below {ERROR_RATE_THRESHOLD:.0%} in every "
                f"{threshold['bucket_s']}-s window")
    count = first.get("active_users")
    users = f" with {count} user{'s' if count != 1 else ''} active" if count else ""
    kinds = load.get("errors_by_type") or []
    by_kind = (": " + ", ".join(f"{k['error']} ({k['count']:,})" for k in kinds[:3])
               + (", …" if len(kinds) > 3 else "")) if len(kinds) > 1 else ""
    text += (f"; first error at {clock(first['at_s'])}: {first['label']}{users}; "
             f"{load['all']['errors']:,} errors in all ({pct(load['all']['error_rate'], 2)} of "
             f"{load['all']['samples']:,} requests){by_kind}.")
    return text


def _gc(machines: dict) -> list[str]:
    sentences: list[str] = []
    for machine, entry in machines.items():
        gc = entry.get("gc")
        if gc and gc.get("time_in_gc_pct") is not None and gc.get("pause_count"):
            sentences.append(
                f"{machine} spent {gc['time_in_gc_pct']:.1f}% of its time in GC pauses "
                f"({gc.get('collector') or 'collector unknown'}: {gc['pause_count']:,} pauses, "
                f"{gc['pause_total_s']:.2f} s in all, longest {ms(gc['pause_max_ms'])}"
                + (f", {gc['full_gc_count']} full" if gc.get("full_gc_count") else "") + f"; {gc['scope']})."
                + _lone_pause(gc))
        elif gc and gc.get("scope"):
            sentences.append(f"{machine}: no GC pause in its GC log ({gc['scope']}).")
    return sentences


def _memory(run: dict, machines: dict) -> list[str]:
    """Each machine's memory peak against its limit, and what that risks."""
    sentences: list[str] = []
    swap_mib = number((run.get("memory_model") or {}).get("swap_mib")) or 0
    for machine, entry in machines.items():
        peak = (entry.get("memory") or {}).get("peak_bytes")
        if peak is None:
            continue
        limit = number((entry.get("observed") or {}).get("jvm_memory_limit_bytes"))
        struck, share = oom_kills(entry), peak / limit if limit else 0.0
        if swap_mib:
            after = (f" With {swap_mib:.0f} MiB of swap beside it, past the limit it swaps"
                     + (f"; the kernel's OOM killer still struck {struck} time{'s' if struck != 1 else ''}." if struck
                        else " before the kernel's OOM killer strikes.") if share >= NEAR_LIMIT or struck else "")
        elif struck and share >= NEAR_LIMIT:
            after = f" At that, the kernel's OOM killer struck {struck} time{'s' if struck != 1 else ''}."
        elif not struck and NEAR_LIMIT <= share < 1:
            after = (f" That is within {1 - NEAR_LIMIT:.0%} of the limit: a little more load, or a burst, "
                     "and the kernel's OOM killer ends the largest process, the JVM.")
        elif not struck and share >= 1:
            after = " That is at the limit: the kernel's OOM killer was one allocation away."
        else:
            after = ""
        sentences.append(f"{machine} peaked at {mib(peak)} of memory"
                         + (f", {share:.0%} of its {mib(limit)} limit" if limit else "")
                         + f" ({entry['memory']['source']})." + after)
    return sentences


def _events(machines: dict) -> list[str]:
    """Process exits, OOM kills, crash files and unreadable results rows."""
    sentences: list[str] = []
    for machine, entry in machines.items():
        events = entry.get("events") or {}
        sentences.extend(_exits(machine, [e for e in events.get("process_exits") or [] if isinstance(e, dict)]))
        oom = oom_kills(entry)
        if oom:
            sentences.append(f"{machine}: the kernel's OOM killer struck {oom} time{'s' if oom != 1 else ''}.")
        if entry.get("crash_files"):
            sentences.append(f"{machine}: crash files: " + ", ".join(Path(f).name for f in entry["crash_files"]) + ".")
        skipped = (entry.get("load") or {}).get("skipped_rows")
        if isinstance(skipped, int) and skipped > 0:
            sentences.append(f"{machine}: {skipped} row{'s' if skipped != 1 else ''} of results.csv could not be read "
                             "(broken, or a time no run could have) and {} left out of every figure."
                             .format("were" if skipped != 1 else "was"))
    return sentences


def oom_kills(entry: dict) -> int:
    """The OOM kills events.json counted for a machine (0 when none, or not known)."""
    oom = (entry.get("events") or {}).get("oom_kills")
    return oom if isinstance(oom, int) and not isinstance(oom, bool) and oom > 0 else 0


# A process that exited this many times in a run gets one sentence, not one per exit.
REPEATED_EXITS = 3


def _exits(machine: str, exits: list[dict]) -> list[str]:
    """Each process's exits: one sentence each, or one for all of a process that kept exiting."""
    said: list[str] = []
    for process in dict.fromkeys(e.get("process", "a process") for e in exits):
        own = [e for e in exits if e.get("process", "a process") == process]
        if len(own) < REPEATED_EXITS:
            said.extend(f"{machine}: {process} exited at {clock(e.get('at_s'))} "
                        f"({e.get('reason') or 'no reason recorded'})." for e in own)
            continue
        times_s = [at for at in (number(e.get("at_s")) for e in own) if at is not None]
        reasons = list(dict.fromkeys(e.get("reason") or "no reason recorded" for e in own))
        span = (f" between {clock(min(times_s))} and {clock(max(times_s))}, about every "
                f"{(max(times_s) - min(times_s)) / (len(times_s) - 1):.0f} s" if len(times_s) > 1 else "")
        said.append(f"{machine}: {process} exited {len(own)} times{span} ({'; '.join(reasons)}).")
    return said


# A longest pause this many times the 99th percentile, among at least LONE_PAUSE_MIN_COUNT, stands alone.
LONE_PAUSE_FACTOR = 5
LONE_PAUSE_MIN_COUNT = 20


def lone_pause(gc: dict) -> float | None:
    """How many times the 99th percentile of the other pauses the longest one is, when it stands alone (at least
    LONE_PAUSE_FACTOR, among LONE_PAUSE_MIN_COUNT pauses or more); else None."""
    longest, p99 = number(gc.get("pause_max_ms")), number(gc.get("pause_others_p99_ms"))
    if longest is None or not p99 or gc.get("pause_count", 0) < LONE_PAUSE_MIN_COUNT \
            or longest < LONE_PAUSE_FACTOR * p99:
        return None
    return longest / p99


def _lone_pause(gc: dict) -> str:
    """The longest GC pause put in context when it is one outlier: its ratio alone reads as a pattern."""
    factor = lone_pause(gc)
    if factor is None:
        return ""
    return (f" Its longest pause ({ms(number(gc['pause_max_ms']))}) stands alone: {factor:.1f} times the 99th "
            f"percentile of the others ({ms(number(gc['pause_others_p99_ms']))}); one pause, not a pattern.")



