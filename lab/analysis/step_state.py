"""What PCP, the GC log and the machine's events saw of it over one capacity step (times from the run's start, as
lab/analysis/capacity.py gives its steps): at its knee, where its requests queued and what died (at_knee); at the
step that gave its capacity, the CPU it spent (at_capacity); at a knee's
recheck that missed a rate the coarse steps met, what differed from the step that met it (why_not_recovered).

    at_knee(found, series, events) -> dict | None
    at_capacity(found, series) -> dict | None         # the step that gave the capacity, its CPU by role
    why_not_recovered(found, series) -> None          # found["refined"]: its note, cause and seen
"""
from __future__ import annotations

from lab.analysis.text import mib
from lab.analysis.verdict import PAGE_INS_MAX


def _in(times: list | None, values: list | None, start: float, end: float) -> list[float]:
    return [v for t, v in zip(times or [], values or []) if start <= t <= end and isinstance(v, (int, float))]


def _peak(times: list | None, values: list | None, start: float, end: float) -> float | None:
    found = _in(times, values, start, end)
    return max(found) if found else None


def _mean_in(times: list | None, values: list | None, start: float, end: float) -> float | None:
    found = _in(times, values, start, end)
    return round(sum(found) / len(found), 3) if found else None


# The service's REST route's instance of camel_exchanges_inflight (MockRoute's routeId).
ROUTE = "route:mock"


def _summed(pcp: dict, key: str) -> list | None:
    """A PCP series at each time; per instance (a connector, a pool): their sum."""
    values = pcp.get(key)
    if isinstance(values, dict):
        columns = list(values.values())
        values = [sum(v for v in row if isinstance(v, (int, float))) for row in zip(*columns)] if columns else None
    return values


def _over_step(pcp: dict, step: dict, step_s: float) -> dict:
    """What PCP saw of the machine and its host over one step: the host's busy CPUs and the machine's processes'
    CPU and page-ins (means), the swap they held (peak)."""
    start, end = step["start_s"], step["start_s"] + step_s
    return {"host_cpu_cores": _mean_in(pcp.get("t"), pcp.get("host_cpu_cores"), start, end),
            "cpu_cores": _mean_in(pcp.get("proc_t"), _summed(pcp, "proc_cpu_cores"), start, end),
            "page_ins_per_s": _mean_in(pcp.get("proc_t"), _summed(pcp, "proc_major_faults_per_s"), start, end),
            "swap_peak_bytes": _peak(pcp.get("proc_t"), _summed(pcp, "proc_swap_bytes"), start, end)}


def why_not_recovered(found: dict, series: dict) -> None:
    """When a knee's recheck missed a rate the coarse steps met: both steps' p99 and what PCP saw over each in the
    refinement (`seen`), and its note with the cause where PCP shows one: its processes paging in (the overload
    pushed their memory to swap; measured on a machine over its memory model: 67-488 pages/s through its rechecks, 2-5
    when it met the rate). Else the note says what else was measured to miss so: on this project's 2-CPU host, a
    default machine met 800 req/s (p99 100-431 ms) climbing from 700, near its backend pool's limit, and missed it
    (p99 5-7 s) reached from rest after its knee, with neither paging nor its host's CPUs full, where its
    recheck at 700 met; a rate that close to the knee is met from a warm climb only."""
    refined = found.get("refined") or {}
    steps, pcp = found.get("steps") or [], series.get("pcp") or {}
    rate = refined.get("recheck_rps") or (refined.get("between") or [None])[0]     # older runs: the last rate met
    if refined.get("recovered") is not False or rate is None:
        return
    coarse = next((s for s in steps if s["rate_rps"] == rate and not s.get("refined") and not s["warmup"]), None)
    again = next((s for s in steps if s["rate_rps"] == rate and s.get("refined") and not s["warmup"]), None)
    if coarse is None or again is None:
        return
    step_s = found.get("step_s") or 0
    before, now = _over_step(pcp, coarse, step_s), _over_step(pcp, again, step_s)
    page_ins, swap = now["page_ins_per_s"], now["swap_peak_bytes"]
    if page_ins is not None and page_ins >= PAGE_INS_MAX:
        refined["cause"] = "paging"
        cause = (f"its processes paged in {page_ins:,.0f} pages/s over it ({before['page_ins_per_s'] or 0:,.0f} when "
                 f"it met it){f', with {mib(swap)} in swap' if swap else ''}: the overload pushed its memory out, "
                 "and bringing it back bound it, not its pools")
    else:
        seen = (f" (page-ins {page_ins:,.0f}/s, under {PAGE_INS_MAX:g}; the host's CPUs {now['host_cpu_cores']:.2f} "
                f"cores busy, its own processes {now['cpu_cores']:.2f})" if page_ins is not None and now[
                    "host_cpu_cores"] is not None and now["cpu_cores"] is not None else "")
        cause = (f"PCP shows no cause{seen}: a rate this close to the knee can be met climbing from the step below "
                 "and missed reached from rest, or it had not recovered from the overload")
    if pcp:
        refined["seen"] = {"when_met": before, "again": now}
    refined["note"] = (f"at {rate} req/s, which it met before (p99 {coarse['p99_ms']:,.0f} ms), it missed (p99 "
                       f"{again['p99_ms']:,.0f} ms): {cause}; the coarse steps' capacity stands")


def at_capacity(found: dict, series: dict) -> dict | None:
    """The step that gave the capacity (the last one met at its rate): its time span, what it answered, and the CPU
    each role of the machine spent over it (PCP) and the host's, from which lab/analysis/cpu_cost.py gives a request's
    cost where the machine still kept up (at the knee, an overload's own costs swell it: JMeter's threads waiting).
    None without a capacity."""
    rate = found.get("capacity_rps")
    step = next((s for s in reversed(found.get("steps") or []) if s["rate_rps"] == rate and s.get("met")), None)
    if step is None:
        return None
    start = step["start_s"]
    end = start + (found.get("step_s") or 0)
    pcp = series.get("pcp") or {}
    return {"rate_rps": rate, "from_s": round(start, 3), "to_s": round(end, 3), "answered_rps": step["answered_rps"],
            "refined": bool(step.get("refined")),
            "cpu_cores_mean_by_role": {role: _mean_in(pcp.get("proc_t"), values, start, end)
                                       for role, values in (pcp.get("proc_cpu_cores_by_role") or {}).items()},
            "host_cpu_cores_mean": _mean_in(pcp.get("t"), pcp.get("host_cpu_cores"), start, end)}


def at_knee(found: dict, series: dict, events: dict | None) -> dict | None:
    """The machine during its knee step (times from the run's start): its memory, CPU and threads, where
    requests queued (Tomcat's busy threads, HTTPD's busy workers, the HTTP client pool's waiters: PCP), its
    GC pauses (GC log) and the processes that died (events.json). None without a knee."""
    knee = next((s for s in found.get("steps") or [] if s["rate_rps"] == found.get("knee_rps")), None)
    if knee is None:
        return None
    start = knee["start_s"]
    end = start + (found.get("step_s") or 0)
    pcp = series.get("pcp") or {}

    def peak_of(times_key: str, key: str) -> float | None:
        return _peak(pcp.get(times_key), _summed(pcp, key), start, end)

    def increase_of(times_key: str, key: str) -> float | None:
        """A counter's increase over the knee step (the accept queue's overflows): from its last value before the
        step to its last in it, never below 0 (a counter that restarted)."""
        values = next(iter((pcp.get(key) or {}).values()), None)
        points = [(t, v) for t, v in zip(pcp.get(times_key) or [], values or []) if isinstance(v, (int, float))]
        before = [v for t, v in points if t < start]
        inside = [v for t, v in points if start <= t <= end]
        first = before[-1] if before else inside[0] if inside else None
        return max(0.0, inside[-1] - first) if inside and first is not None and (before or len(inside) > 1) else None

    pauses = [p for p in series.get("gc") or [] if isinstance(p.get("t"), (int, float)) and start <= p["t"] <= end]
    exits = [e for e in (events or {}).get("process_exits") or []
             if isinstance(e, dict) and isinstance(e.get("at_s"), (int, float))]
    deaths = [e for e in exits if start <= e["at_s"] <= end]
    return {"from_s": round(start, 3), "to_s": round(end, 3),
            "memory_pss_peak_bytes": peak_of("proc_t", "proc_pss_bytes"),
            "cpu_cores_peak": peak_of("proc_t", "proc_cpu_cores"), "threads_peak": peak_of("proc_t", "proc_threads"),
            # beside the host's mean: a peak of one-second rates can pass the CPUs there are (2.03 of 2 seen)
            "cpu_cores_mean": _mean_in(pcp.get("proc_t"), _summed(pcp, "proc_cpu_cores"), start, end),
            # every process of the host the machine is on; its mean: one-second rates jitter past the CPUs there are
            "host_cpu_cores_mean": _mean_in(pcp.get("t"), pcp.get("host_cpu_cores"), start, end),
            "tomcat_busy_peak": peak_of("app_t", "tomcat_busy"), "httpd_busy_peak": peak_of("app_t", "apache_busy"),
            "tomcat_connections_peak": peak_of("app_t", "tomcat_connections"),
            "accept_queue_overflows": increase_of("app_t", "listen_overflows"),
            "pool_pending_peak": peak_of("app_t", "pool_pending"),
            # the service's route in flight: on the modern stack, what its task pool runs at once
            "route_inflight_peak": _peak(pcp.get("app_t"), (pcp.get("camel_inflight") or {}).get(ROUTE), start, end),
            "gc_pauses": len(pauses), "gc_pause_max_ms": max((p["pause_ms"] for p in pauses
                                                              if isinstance(p.get("pause_ms"), (int, float))),
                                                             default=None),
            "process_exits": deaths, "oom_kills_in_run": (events or {}).get("oom_kills"),
            "process_exits_in_run": len(exits), "first_exit_s": min((e["at_s"] for e in exits), default=None),
            "cgroup_peak_bytes": (events or {}).get("peak_cgroup_usage_bytes"),
            "basis": "the knee step's time span: PCP's per-process and application metrics (the accept queue's "
                     "overflows: network.tcp.listenoverflows, the machine's own network namespace or host), the GC "
                     "log, events.json (deaths and OOM kills over the whole load, the cgroup's peak)"}
