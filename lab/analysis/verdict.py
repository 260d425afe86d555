"""The verdict on a run and each machine: may its ratio be read as the tuning's effect, and if not,
what bound it. Computed from the figures already in the summary (JMeter's results, PCP, events)
and from the load generator's own CPU counters (jmeter/loadgen.csv), with the figures behind it.

Kinds, most telling first (a machine the OOM killer struck is memory-bound before anything else bound its
load); a machine gets every kind that applies, the run the first of all:
- not settled: no steady state (lab/analysis/steady.py): its ratio would compare warm-ups;
- host-bound: the machines and JMeter share CPUs and the host had under HOST_IDLE_MIN_PCT idle;
- load-generator-bound: JMeter used over LOADGEN_BUSY_MAX of the CPUs it had, requests failed on the load
  generator itself (out of client ports), or (a capacity run) it could not deliver a step's rate before the
  machine had missed the SLO;
- backend-bound: the mock backend (single-threaded) used over BACKEND_CPU_MAX_CORES of a core, or more of the
  service's calls held a connection to it than it answers at a time (mock_service_max_concurrency), or the
  service's HTTP client pool to it was full with at least POOL_WAITING_MIN as many calls waiting for one of its
  connections as held one, or (with the host's limits measured) the machine served BACKEND_NEAR or more of what the
  mock alone served;
- memory-bound: the machine peaked at NEAR_LIMIT or more of its memory limit, the OOM killer struck, or it read
  back PAGE_INS_MAX or more pages a second over the load (major faults: from swap, or files the kernel evicted);
- incomplete: the run was interrupted or failed before the plan's end.
A run is valid only when every check could be made: a machine without JMeter results, or a run without
jmeter/loadgen.csv (runs from before the lab sampled it), is "unknown", with what was not checked.
"""
from __future__ import annotations

from pathlib import Path

from lab.analysis import loadgen
from lab.analysis.jmeter import client_errors
from lab.analysis.prose import NEAR_LIMIT, oom_kills
from lab.analysis.text import mib
from lab.contract import MachineVerdict, Verdict
from lab.names import MACHINES, clock
from lab.numbers import number
from lab.placement import LOADGEN, parse_cpulist

HOST_IDLE_MIN_PCT = 10.0
LOADGEN_BUSY_MAX = 0.9
BACKEND_CPU_MAX_CORES = 0.9
CLIENT_ERRORS_MAX = 0.001  # requests failing on JMeter itself (out of client ports): from 0.1% on, JMeter's limit
BACKEND_NEAR = 0.9      # through HTTPD at 90% or more of what the mock alone served (--limits): the backend's pace
POOL_WAITING_MIN = 1.0  # calls waiting for a backend connection per call holding one, at their peaks (PCP)
# A page-in waits for a disk read (here the lab's swap file, on the host's disk): about a millisecond. From 50 a
# second the machine waits for its own memory a noticeable share of the time; cold pages resting in swap cost nothing.
PAGE_INS_MAX = 50.0
THRESHOLDS = {"host_idle_min_pct": HOST_IDLE_MIN_PCT, "loadgen_busy_max": LOADGEN_BUSY_MAX,
              "backend_cpu_max_cores": BACKEND_CPU_MAX_CORES, "memory_near_limit": NEAR_LIMIT,
              "pool_waiting_min": POOL_WAITING_MIN, "page_ins_max_per_s": PAGE_INS_MAX}
ORDER = ("incomplete", "not settled", "host-bound", "load-generator-bound", "backend-bound", "memory-bound")


def judge(summary: dict, loadgen_csv: Path) -> Verdict:
    """{"valid", "verdict", "sentence", "machines": {name: {"findings", "checked"}}, "thresholds"}."""
    run = summary.get("run") or {}
    placement = run["placement"] if isinstance(run.get("placement"), dict) else {}
    rows = loadgen.read(loadgen_csv)
    machines: dict[str, MachineVerdict] = {}
    # the machines the summary has: both, or the one an ablation's configuration loaded
    names = [name for name in MACHINES if name in (summary.get("machines") or {})] or list(MACHINES)
    for name in names:
        entry = (summary.get("machines") or {}).get(name) or {}
        limits = ((summary.get("limits") or {}).get("machines") or {}).get(name)
        machines[name] = _judge_machine(name, entry, placement, rows, run.get("schedule"), limits,
                                        swap_mib=number((run.get("memory_model") or {}).get("swap_mib")) or 0,
                                        alone=len(run.get("machines_loaded") or names) == 1)
        if entry.get("load") and (run.get("load_generator") or {}).get("engines_sampled") is False:
            # Engines on other hosts (the ssh and Vagrant backends' loadgen group): their CPU is not recorded.
            machines[name]["unchecked"].append("the CPU of the JMeter engines on other hosts (the lab does not "
                                               "sample it): a load generator at its limit there would not show")
    findings = [f for name in names for f in machines[name]["findings"]]
    ended = run["ended"] if isinstance(run.get("ended"), dict) else {}
    if ended.get("how") not in (None, "completed"):
        findings.insert(0, {"kind": "incomplete", "machine": None, "figures": {"ended": ended},
                            "sentence": f"The run was {'stopped by an error' if ended['how'] == 'failed' else ended['how']} "
                                        f"during {ended.get('during', '?')}: its figures cover only part of the plan."})
    unchecked = [f"{name}: {what}" for name in names for what in machines[name]["unchecked"]]
    findings.sort(key=_rank)
    if findings:
        verdict, sentence = findings[0]["kind"], findings[0]["sentence"]
    elif unchecked:
        verdict, sentence = "unknown", f"Not every check could be made ({'; '.join(unchecked)})."
    else:
        which = ("both machines", "them") if len(names) > 1 else (f"the {names[0]} machine", "it")
        verdict, sentence = "valid", (f"Valid: {which[0]} settled, and neither the host, JMeter, the backend nor "
                                      f"memory bound {which[1]} (the figures below).")
    return {"valid": verdict == "valid", "verdict": verdict, "sentence": sentence,
            "kinds": sorted({f["kind"] for f in findings}, key=ORDER.index),
            "placement": placement.get("note"), "machines": machines, "thresholds": THRESHOLDS,
            "basis": "lab/analysis/verdict.py: steady-state detection, jmeter/loadgen.csv over each machine's "
                     "steady window, PCP's per-process CPU over the load and the backend pool's peaks, the memory "
                     "peak against the limit, swap and page-ins (PCP's per-process vmswap and maj_flt)"}


def _rank(finding: dict) -> float:
    """ORDER's, except that a machine the OOM killer struck comes before any bound on the load: it failed."""
    if finding["kind"] == "memory-bound" and (finding.get("figures") or {}).get("oom_kills"):
        return ORDER.index("host-bound") - 0.5
    return ORDER.index(finding["kind"])


def _judge_machine(name: str, entry: dict, placement: dict, rows: list[dict], schedule: str | None,
                   limits: dict | None = None, swap_mib: float = 0, alone: bool = False) -> MachineVerdict:
    """alone: the run loaded this machine only (an ablation's configuration), so there is no ratio to speak of."""
    findings: list[dict] = []
    checked: list[str] = []
    unchecked: list[str] = []
    load = entry.get("load") or {}
    window = load.get("window") or {}
    _judge_window(name, load, window, findings, checked, unchecked, alone)
    _judge_client_errors(name, load, findings, checked, alone)
    _judge_host(name, load, window, placement, rows, schedule, findings, checked, unchecked, alone)
    _judge_steps(name, entry.get("capacity") or {}, findings, checked)
    _judge_backend(name, entry, findings, checked, alone)
    _judge_backend_limit(name, limits or {}, findings, checked)
    _judge_memory(name, entry, swap_mib, findings, checked)
    findings.sort(key=_rank)
    return {"verdict": findings[0]["kind"] if findings else ("unknown" if unchecked else "valid"),
            "findings": findings, "checked": checked, "unchecked": unchecked}


def _judge_window(name: str, load: dict, window: dict, findings: list[dict], checked: list[str],
                  unchecked: list[str], alone: bool) -> None:
    """Whether the machine reached a steady state, and which part of its load the figures cover."""
    if not load:
        unchecked.append("no JMeter results")
    else:
        if window.get("settled") is False:
            reason = (window.get("detection") or {}).get("reason") or window.get("note") or "no steady state"
            findings.append({"kind": "not settled", "machine": name, "figures": {"detection": window.get("detection")},
                             "sentence": f"{name} never reached a steady state ({reason}): "
                                         + ("its figures are of its warm-up" if alone else "no ratio is reported")
                                         + "; a longer run (--duration) lets it settle."})
        elif window.get("settled") is None and window.get("start_s") is not None:
            checked.append(f"the whole load, {clock(window['start_s'])} to {clock(window.get('end_s'))} (its rate "
                           "steps up: no steady state is looked for)")
        elif window.get("start_s") is not None:
            checked.append(f"steady from {clock(window['start_s'])} ({window.get('warmup_s') or 0:.0f} s of warm-up "
                           f"after the ramp-up) to {clock(window.get('end_s'))}")


def _judge_host(name: str, load: dict, window: dict, placement: dict, rows: list[dict], schedule: str | None,
                findings: list[dict], checked: list[str], unchecked: list[str], alone: bool) -> None:
    """The host's CPUs and JMeter's over the machine's steady window (jmeter/loadgen.csv): host-bound where a
    shared host had almost none idle, load-generator-bound where JMeter filled its CPUs."""
    host = loadgen.over(rows, window["start_at"], window["end_at"]) if window.get("duration_s", 0) > 0 else None
    shared = not placement.get("dedicated", False)
    if load and not host:
        unchecked.append("the host's and JMeter's CPU (no jmeter/loadgen.csv rows in its steady window)")
    if host:
        cpus = len(parse_cpulist(((placement.get("cpus") or {}).get(LOADGEN)) or "")) or host["host_cpus"]
        if shared and host["host_idle_pct"] is not None and host["host_idle_pct"] < HOST_IDLE_MIN_PCT:
            others = "JMeter" + (" and the other machine" if schedule != "sequential" and not alone else "")
            findings.append({"kind": "host-bound", "machine": name, "figures": host,
                             "sentence": f"{name} shared this host's {host['host_cpus']} CPUs with {others}, and only "
                                         f"{host['host_idle_pct']:.1f}% of them was idle while it was loaded: its "
                                         f"figures{'' if alone else ', and the ratio,'} show how the host divided its "
                                         "CPUs, not what the tuning bought."})
        else:
            checked.append(f"host CPUs {host['host_idle_pct']:.0f}% idle ({'shared' if shared else 'dedicated'})")
        if host["loadgen_cores"] is not None and cpus and host["loadgen_cores"] > LOADGEN_BUSY_MAX * cpus:
            findings.append({"kind": "load-generator-bound", "machine": name, "figures": host,
                             "sentence": f"JMeter used {host['loadgen_cores']:.2f} of its {cpus} CPUs while {name} was "
                                         "loaded: the load generator, not the machine, set the pace."})
        elif host["loadgen_cores"] is not None:
            checked.append(f"JMeter {host['loadgen_cores']:.2f} cores of {cpus}")


def _judge_backend(name: str, entry: dict, findings: list[dict], checked: list[str], alone: bool) -> None:
    """The mock backend's CPU (single-threaded: a core is all it has), else its queue, else the service's pool."""
    backend = number(((entry.get("resources") or {}).get("cpu_cores_mean_by_role") or {}).get("backend"))
    if backend is not None and backend > BACKEND_CPU_MAX_CORES:
        findings.append({"kind": "backend-bound", "machine": name, "figures": {"backend_cpu_cores": backend},
                         "sentence": f"{name}'s mock backend used {backend:.2f} cores (it is single-threaded: one "
                                     "core is all it has): the backend set the pace, so "
                                     f"{_understated(alone)}."})
    elif (not _judge_backend_queue(name, entry, findings, alone)
          and not _judge_client_pool(name, entry, findings, checked, alone) and backend is not None):
        checked.append(f"backend {backend:.2f} cores")


def _judge_memory(name: str, entry: dict, swap_mib: float, findings: list[dict], checked: list[str]) -> None:
    """Page-ins (memory short of what it works with), and the peak against the machine's limit."""
    memory = entry.get("memory") or {}
    peak = number(memory.get("peak_bytes"))
    limit = number((entry.get("observed") or {}).get("jvm_memory_limit_bytes"))
    swapped, page_ins = number(memory.get("swap_peak_bytes")), number(memory.get("major_faults_per_s"))
    paging = (f"{mib(swapped)} in swap at the peak, {page_ins:.1f} page-ins a second over the load"
              if swapped is not None and page_ins is not None else None)
    if page_ins is not None and page_ins >= PAGE_INS_MAX:
        findings.append({"kind": "memory-bound", "machine": name,
                         "figures": {"major_faults_per_s": page_ins, "swap_peak_bytes": swapped},
                         "sentence": f"{name} read back {page_ins:.0f} pages a second over the load (major faults: "
                                     f"from swap, or files the kernel had evicted; {mib(swapped or 0)} in swap at the "
                                     "peak): its memory is short of what it works with, so its figures include the "
                                     "cost of waiting for its own pages."})
    elif paging:
        checked.append(paging)
    if peak is not None and limit:
        kills = oom_kills(entry)
        if peak / limit >= NEAR_LIMIT or kills:
            findings.append({"kind": "memory-bound", "machine": name,
                             "figures": {"peak_bytes": peak, "limit_bytes": limit, "oom_kills": int(kills)},
                             "sentence": f"{name} peaked at {peak / limit:.0%} of its {mib(limit)} memory limit"
                                         + (f", and the kernel's OOM killer struck {int(kills)} time(s): its figures "
                                            "past that point are of a machine restarting its processes." if kills else
                                            f": past it the machine swaps (its memory model gives it {swap_mib:.0f} MiB "
                                            "of swap), so its figures include the cost of swapping." if swap_mib else
                                            ": it held this load one burst from the OOM killer, so its figures hold "
                                            "only up to this load.")})
        else:
            checked.append(f"memory peak {peak / limit:.0%} of {mib(limit)}")

def _understated(alone: bool) -> str:
    return "its throughput understates what its knobs can buy" if alone else "the ratio understates what the tuning can buy"


def _judge_client_errors(name: str, load: dict, findings: list[dict], checked: list[str], alone: bool = False) -> None:
    """Requests that failed on the load generator itself: out of client ports (keep-alive off leaves every closed
    connection's port in TIME_WAIT for 60 s), so they say nothing about the machine. From CLIENT_ERRORS_MAX of
    the requests on, JMeter was the limit."""
    client = client_errors(load)
    samples = number((load.get("all") or {}).get("samples")) or 0
    if not client:
        return
    if samples and client / samples < CLIENT_ERRORS_MAX:
        checked.append(f"{client:,} requests failed on JMeter itself (under {CLIENT_ERRORS_MAX:.1%})")
        return
    findings.append({"kind": "load-generator-bound", "machine": name,
                     "figures": {"client_errors": client, "samples": samples or None},
                     "sentence": f"{client:,} of the requests to {name} failed on the load generator itself "
                                 "(\"Cannot assign requested address\": it ran out of client ports, each closed "
                                 "connection holding one for 60 s): those errors"
                                 f"{'' if alone else ', and the ratio,'} are the client's, not the machine's."})


def _judge_backend_queue(name: str, entry: dict, findings: list[dict], alone: bool = False) -> bool:
    """A backend that answers N requests at a time (mock_service_max_concurrency, the 2018 backend's 1) while more of
    the service's calls held a connection to it (the HTTP client pool's leased peak, from PCP): they queued there,
    so the backend set the pace however little CPU it used."""
    slots = number(entry.get("backend_max_concurrency"))
    leased = number((entry.get("resources") or {}).get("pool_leased_max"))
    if not slots or leased is None or leased <= slots:
        return False
    findings.append({"kind": "backend-bound", "machine": name,
                     "figures": {"backend_max_concurrency": int(slots), "backend_calls_in_flight_max": int(leased)},
                     "sentence": f"{name}'s mock backend answers {int(slots)} request(s) at a time "
                                 f"(mock_service_max_concurrency) while up to {int(leased)} of the service's calls held a "
                                 "connection to it (the HTTP client pool's leased peak): they queued at the backend, so "
                                 f"it set the pace and {_understated(alone)}."})
    return True


def _judge_client_pool(name: str, entry: dict, findings: list[dict], checked: list[str], alone: bool) -> bool:
    """The service's HTTP client pool to the backend full, calls queued for one of its connections (the pool's
    pending and leased peaks, from PCP): the pool set the pace, whatever the backend's CPU. Its size is a knob of
    its own (camel_app_http_client_per_route; unset, Camel's default of 20)."""
    resources = entry.get("resources") or {}
    waiting, leased = number(resources.get("pool_pending_max")), number(resources.get("pool_leased_max"))
    if waiting is None or not leased:
        return False
    if waiting < POOL_WAITING_MIN * leased:
        checked.append(f"backend connections: {leased:.0f} in use at most, {waiting:.0f} calls waiting")
        return False
    findings.append({"kind": "backend-bound", "machine": name,
                     "figures": {"pool_leased_max": int(leased), "pool_pending_max": int(waiting)},
                     "sentence": f"{name}'s calls to the backend queued in the service's HTTP client pool: up to "
                                 f"{waiting:.0f} waited for one of the {leased:.0f} connections in use (PCP: the "
                                 f"pool's peaks), so the pool set the pace and {_understated(alone)}; its size is "
                                 "the knob camel_app_http_client_per_route."})
    return True


def _judge_backend_limit(name: str, limits: dict, findings: list[dict], checked: list[str]) -> None:
    """--limits: did the machine serve through HTTPD about what the mock alone serves at the same users?"""
    share = number(limits.get("backend_share"))
    if share is None:
        return
    served, alone = limits["httpd"]["throughput_rps"], limits["mock"]["throughput_rps"]
    if share >= BACKEND_NEAR:
        findings.append({"kind": "backend-bound", "machine": name,
                         "figures": {"throughput_rps": served, "mock_alone_rps": alone, "backend_share": share},
                         "sentence": f"{name} served {served:.0f} req/s through HTTPD, {share:.0%} of the {alone:.0f} "
                                     "req/s the mock backend served alone at the same users: the backend set the "
                                     "pace, so the ratio understates what the tuning can buy."})
    else:
        checked.append(f"{share:.0%} of the mock alone")


def _judge_steps(name: str, capacity: dict, findings: list[dict], checked: list[str]) -> None:
    """A capacity run: did JMeter deliver each step's rate (lab/analysis/capacity.py's "delivered")?"""
    steps = capacity.get("steps") or []
    short = [s for s in steps if s.get("delivered") is False]
    if capacity.get("generator_bound_rps") is not None:
        first = short[0]
        findings.append({"kind": "load-generator-bound", "machine": name,
                         "figures": {"offered_rps": first["rate_rps"], "arrived_rps": first["arrived_rps"]},
                         "sentence": f"JMeter could not deliver {first['rate_rps']} req/s to {name} (they arrived at "
                                     f"{first['arrived_rps']:.0f} req/s) before any step missed the SLO for certain: "
                                     "its capacity is the load generator's limit here, not the machine's."})
    elif short:
        checked.append(f"JMeter fell behind at {', '.join(str(s['rate_rps']) for s in short)} req/s: those steps "
                       "could miss the SLO but not meet it")
    elif steps:
        checked.append("JMeter delivered every step's rate")
