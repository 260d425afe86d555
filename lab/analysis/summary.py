"""A run folder → summary.json (the figures) and series.json (the time series the report charts).

    summarize(run_dir) -> Summary       # also writes run_dir/summary.json and run_dir/series.json
    python3 -m lab.analysis runs/<run-id>

Every figure is computed here from the raw files the run collected (their layout: lab/runfolder.py):
JMeter's results CSV of each machine (lab/analysis/jmeter.py, which states the definitions), the
machine's PCP archive (read with PCP's own pmrep/pminfo, lab/analysis/pcp.py), its GC logs
(GCViewer, lab/analysis/gclog.py), events.json, status.json, knobs.json and run.json. Any of them
may be missing: the summary then says so (`problems`, and `missing` per machine) and carries on.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Final, cast

from typing_extensions import TypedDict

from lab import budget, contract
from lab.analysis import (
    capacity,
    claims,
    cpu_cost,
    host_pause,
    inputs,
    limits,
    loadgen,
    memory,
    queues,
    thresholds,
    verdict,
)
from lab.analysis.jmeter import (
    ERROR_RATE_THRESHOLD,
    RUN_MARGIN_MS,
    THRESHOLD_BUCKET_S,
    THRESHOLD_MIN_SAMPLES,
    Samples,
    read_results,
)
from lab.analysis.knobs_differ import knobs_differ
from lab.analysis.machine import machine_figures, step_load
from lab.analysis.prose import LONE_PAUSE_FACTOR, lone_pause, what_happened
from lab.names import MACHINES, at_once
from lab.numbers import PERCENTILE_DEFINITION
from lab.numbers import number as _number
from lab.numbers import ratio as _ratio
from lab.runfolder import RunFolder

SCHEMA: Final = contract.SUMMARY_SCHEMA     # the shape summarize() writes: lab/contract.py's Summary


class _Sometimes(TypedDict, total=False):
    """The Summary's parts only some runs have (a capacity run's capacity, a run's thresholds), in their place."""
    capacity: contract.CapacityComparison
    thresholds: list[dict[str, Any]]


def _budget(machine: str, knobs: dict | None, run: dict, backend: str | None, entry: dict) -> dict | None:
    """The machine's memory budget from its knobs (lab/budget.py) beside what its processes held at their peak."""
    if not isinstance(knobs, dict):
        return None
    limit, swap, sees = budget.machine_memory(backend, run.get("memory_model"))
    held = (entry.get("resources") or {}).get("proc_held_max_bytes")
    estimate = budget.estimate(machine, knobs, limit, swap, sees)
    if estimate is None:
        return None
    return {**estimate.as_json(),
            "held_peak_mib": None if held is None else round(held / 2**20, 1),
            "held_source": "PCP: peak of the summed smaps.pss plus memory.vmswap of the machine's processes"}


def _host_at(rows: list[dict], run: dict, t0: float, knee: dict) -> dict | None:
    """The host's CPUs and JMeter's over the knee step (jmeter/loadgen.csv, as the verdict reads them), where the
    machine shared the host with JMeter; None where it had CPUs of its own (its own host's: PCP's, in at_knee)."""
    placement = run["placement"] if isinstance(run.get("placement"), dict) else {}
    if placement.get("dedicated"):
        return None
    return loadgen.over(rows, t0 + knee["from_s"], t0 + knee["to_s"])


def _machines(run: RunFolder, record: dict, status: dict | None, knobs: dict | None) -> list[str]:
    """The machines the run loaded (an ablation's configuration: the tuned one only); else default and tuned
    always (a missing one is reported as missing), then any other the run names."""
    loaded = record.get("machines_loaded")
    if isinstance(loaded, list) and loaded and all(isinstance(name, str) for name in loaded):
        return [name for name in MACHINES if name in loaded] + sorted(set(loaded) - set(MACHINES))
    names = list(MACHINES)
    found = run.machines_found()
    if status and isinstance(status.get("machines"), dict):
        found.update(status["machines"])
    if knobs:
        found.update(k for k, v in knobs.items() if isinstance(v, dict))
    return names + sorted(found - set(names))


def _samples(folder: RunFolder, machines: list[str], started: float | None, ended: float | None,
             problems: list[str]) -> dict[str, Samples]:
    """Each machine's JMeter samples within the run's time (a little margin each side); an unreadable results
    file is a problem named, a machine without samples is left out."""
    samples: dict[str, Samples] = {}
    window_ms = (started * 1000 - RUN_MARGIN_MS, ended * 1000 + RUN_MARGIN_MS) \
        if started is not None and ended is not None else None
    for machine in machines:
        path = folder.results(machine)
        if path.is_file():
            try:
                found = read_results(path, window_ms)
            except (OSError, ValueError) as error:
                problems.append(f"{machine}: results.csv unreadable ({error})")
                continue
            if len(found):
                samples[machine] = found
    return samples


def _run_entry(folder: RunFolder, run: dict, status: dict | None, profile: dict, backend: str | None,
               started: float | None, ended: float | None, t0: float) -> contract.SummaryRun:
    """The summary's "run": what run.json says of it, and the time every figure counts from (t0)."""
    return {"run_id": run.get("run_id") or folder.run_id, "backend": backend,
            "backend_note": run.get("backend_note") or (status or {}).get("note"),
            "backend_emulated": run.get("backend_emulated"),
            "memory_model": run.get("memory_model"), "machine_profile": run.get("machine_profile"),
            "schedule": run.get("schedule"), "profile": profile, "started_at": started, "ended_at": ended,
            "duration_s": round(ended - started, 3) if started is not None and ended is not None else None,
            "interrupted": run.get("interrupted"),
            "ended": run.get("ended") if isinstance(run.get("ended"), dict) else None,
            "host": run.get("host"), "versions": run.get("versions"),
            "placement": run.get("placement") if isinstance(run.get("placement"), dict) else None,
            "mode": run.get("mode"), "tuned_knobs": run.get("tuned_knobs"), "given_knobs": run.get("given_knobs"),
            "configuration": run.get("configuration"), "configurations": run.get("configurations"),
            "load_from": run.get("load_from"), "load_generator": run.get("load_generator"),
            "t0": t0, "t0_basis": "run.json started_at" if started is not None else "first sample"}


# What the summary's figures mean, written into it.
DEFINITIONS = {"percentile": PERCENTILE_DEFINITION,
               "steady_window": "end of the warm-up (MSER-5 on throughput and latency, never before the "
                                "ramp-up's end) .. last sample's end",
               "first_byte": "JMeter's Latency: from just before the request is sent to the first byte "
                             "of the answer",
               "connect": "JMeter's Connect: time to open the connection (0 when a kept-alive one is "
                          "reused)",
               "sample_time": "end of the sample (timeStamp + elapsed)",
               "error_threshold": f"first {THRESHOLD_BUCKET_S}-s bucket (by sample end, from the run's "
                                  f"start) of at least {THRESHOLD_MIN_SAMPLES} requests with an error "
                                  f"rate above {ERROR_RATE_THRESHOLD:.0%}",
               "gc_throughput": "100 % - time in GC pauses / length of the load window"}


def _with_knobs(entry: dict, machine: str, machine_knobs: dict | None, run: dict, backend: str | None,
                generator_cpu: list[dict], t0: float) -> None:
    """What the machine's knobs (knobs.json) add to its figures: the backend's concurrency, the memory budget, and
    at a capacity run's knee, the host's CPUs and the first full queue with its knob; at the step that gave its
    capacity, the host's CPUs and a request's CPU cost."""
    # How many requests the mock answers at once (0: no limit): a backend that queues the service's calls sets the
    # pace whatever its CPU (the verdict's backend-bound).
    entry["backend_max_concurrency"] = (machine_knobs or {}).get("mock_service_max_concurrency")
    entry["memory"]["budget"] = _budget(machine, machine_knobs, run, backend, entry)
    found = entry.get("capacity") or {}
    cpus = _number((entry.get("resources") or {}).get("ncpu"))
    knee = found.get("at_knee")
    steps = step_load(run)
    if knee and steps is not None:
        # a pause before the step too: a request that arrived before it can still be waiting, its timeouts long
        knee["host_paused"] = host_pause.over(host_pause.pauses(generator_cpu), t0 + knee["from_s"] - steps.drain_s,
                                              t0 + knee["to_s"], t0)
    if knee and isinstance(machine_knobs, dict):
        knee["host"] = _host_at(generator_cpu, run, t0, knee)
        knee["queued"] = queues.where_queued(knee, queues.sizes(machine_knobs, entry.get("observed")), cpus)
    kept_up = found.get("at_capacity")
    if kept_up:
        kept_up["host"] = _host_at(generator_cpu, run, t0, kept_up)
        # JMeter's and the host's CPU are this machine's alone where no other machine was loaded beside it
        alone = run.get("schedule") == "sequential" or len(run.get("machines_loaded") or []) == 1
        kept_up["cpu_per_request"] = cpu_cost.per_request(kept_up, alone, cpus)


def summarize(run_dir: Path, write: bool = True, use_gcviewer: bool = True) -> contract.Summary:
    """The run's figures (also written to run_dir/summary.json, and its series to series.json)."""
    folder = RunFolder(Path(run_dir))
    problems: list[str] = []
    if not folder.root.is_dir():
        raise FileNotFoundError(f"no run folder {folder.root}")
    run = folder.read_json(folder.run_json, problems, "run") or {}
    status = inputs.status_shape(folder.read_json(folder.status_json, problems, "status"), problems)
    knobs = folder.read_json(folder.knobs_json, problems, "knobs")
    profile = run["profile"] if isinstance(run.get("profile"), dict) else {}
    ramp_s = _number(profile.get("ramp_s")) or 0.0
    backend = run.get("backend") or (status or {}).get("backend")
    names = _machines(folder, run, status, knobs)

    started, ended = _number(run.get("started_at")), _number(run.get("ended_at"))
    samples = _samples(folder, names, started, ended, problems)
    t0 = started if started is not None else (
        min(min(s.start) for s in samples.values()) / 1000.0 if samples else time.time())

    generated_at = round(time.time(), 3)
    run_entry = _run_entry(folder, run, status, profile, backend, started, ended, t0)
    machines: dict[str, contract.MachineFigures] = {}
    series: dict = {"t0": t0, "machines": {}}

    # jmeter/loadgen.csv, read once for every machine's knee (a capacity run's; the verdict reads it for the load),
    # with each machine's finer steps' (jmeter/refine/<machine>/): a capacity can be one of theirs
    generator_cpu = sorted([row for path in [folder.jmeter.loadgen, *(folder.jmeter.refine(m).loadgen for m in names)]
                            for row in loadgen.read(path)], key=lambda row: row["time"]) \
        if step_load(run) is not None else []
    # Both machines at once: most of a machine's time is GCViewer's JVM and PCP's tools, processes of their own
    figured = at_once(lambda machine: machine_figures(folder, machine, samples.get(machine), t0, ramp_s, backend,
                                                      status, run, use_gcviewer), names)
    for machine, (entry, machine_series) in zip(names, figured, strict=True):
        _with_knobs(entry, machine, (knobs or {}).get(machine), run, backend, generator_cpu, t0)
        # machine.py builds the entry key by key, _with_knobs adds the last: held to its type by tests/test_contract.py
        machines[machine] = cast(contract.MachineFigures, entry)
        series["machines"][machine] = machine_series
        problems.extend(f"{machine}: {p}" for p in entry["missing"])

    comparison = _comparison(machines)
    found_limits = limits.analyze(folder, run, machines, problems)
    sometimes: _Sometimes = {}
    if step_load(run) is not None:
        sometimes["capacity"] = capacity.compare({name: m.get("capacity") for name, m in machines.items()})
        sometimes["capacity"]["generator"] = capacity.generator_ceiling(folder.jmeter.generator)
    # The summary's parts the judges below read: each takes a summary (their tests hand them whole ones)
    so_far = {"run": run_entry, "machines": machines, "comparison": comparison, "limits": found_limits, **sometimes}
    # A trial is not judged alone: its repeated run checks the thresholds on the trials' means.
    if isinstance(run.get("thresholds"), dict) and run["thresholds"] and not folder.is_trial:
        sometimes["thresholds"] = thresholds.check(so_far, run["thresholds"], lost=run.get("threshold_lost"))
    summary: contract.Summary = {
        "schema": SCHEMA, "generated_at": generated_at, "generator": "lab/analysis", "run": run_entry,
        "definitions": dict(DEFINITIONS), "machines": machines, "problems": problems,
        "comparison": comparison, "limits": found_limits, **sometimes,
        "verdict": verdict.judge(so_far, folder.jmeter.loadgen),
        "claims": claims.answer(so_far, series),
        "knobs": knobs_differ(knobs),
        "observed": _observed(status, names),
        "what_happened": what_happened(so_far),
    }
    if write:
        folder.write_json(folder.summary_json, summary)
        folder.write_json(folder.series_json, series, compact=True)
    return summary


def _measured_capacity(machine: dict) -> float | None:
    """A capacity run's capacity, when it was found (a lower bound, or none, gives no ratio)."""
    found = machine.get("capacity") or {}
    return found.get("capacity_rps") if found.get("found") else None


COMPARED = (
    # key, label, unit, getter, better
    ("capacity_rps", "Capacity (the highest arrival rate that met the SLO)", "req/s", _measured_capacity, "higher"),
    ("throughput_rps", "Throughput (steady state)", "req/s", lambda m: (m.get("load") or {}).get("throughput_rps"), "higher"),
    ("good_throughput_rps", "Answered without error, per second (steady state)", "req/s",
     lambda m: (m.get("load") or {}).get("good_throughput_rps"), "higher"),
    ("samples_all", "Requests served (whole run)", "", lambda m: ((m.get("load") or {}).get("all") or {}).get("samples"), "higher"),
    ("error_rate", "Error rate (steady state)", "%", lambda m: (m.get("load") or {}).get("error_rate"), "lower"),
    ("error_rate_all", "Error rate (whole run)", "%", lambda m: ((m.get("load") or {}).get("all") or {}).get("error_rate"), "lower"),
    ("p50_ms", "Latency p50", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p50"), "lower"),
    ("p90_ms", "Latency p90", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p90"), "lower"),
    ("p95_ms", "Latency p95", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p95"), "lower"),
    ("p99_ms", "Latency p99", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p99"), "lower"),
    ("max_ms", "Latency max", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("max"), "lower"),
    ("first_byte_p95_ms", "Time to first byte p95", "ms",
     lambda m: ((m.get("load") or {}).get("first_byte_ms") or {}).get("p95"), "lower"),
    ("connect_p95_ms", "Connect time p95", "ms", lambda m: ((m.get("load") or {}).get("connect_ms") or {}).get("p95"),
     "lower"),
    ("connect_max_ms", "Connect time max", "ms", lambda m: ((m.get("load") or {}).get("connect_ms") or {}).get("max"),
     "lower"),
    ("gc_pauses", "GC pauses", "", lambda m: (m.get("gc") or {}).get("pause_count"), "lower"),
    ("gc_total_s", "GC pause time, total", "s", lambda m: (m.get("gc") or {}).get("pause_total_s"), "lower"),
    ("gc_max_ms", "GC pause, longest", "ms", lambda m: (m.get("gc") or {}).get("pause_max_ms"), "lower"),
    ("gc_throughput_pct", "GC throughput (time not in GC)", "%", lambda m: (m.get("gc") or {}).get("throughput_pct"), "higher"),
    ("peak_memory_bytes", "Peak memory", "bytes", lambda m: (m.get("memory") or {}).get("peak_bytes"), "lower"),
    ("cpu_mean_cores", "CPU, mean (machine's processes)", "cores", lambda m: (m.get("cpu") or {}).get("mean_cores"), "lower"),
)


# Figures of the steady window: no ratio between machines when either did not settle.
STEADY_KEYS = {"throughput_rps", "good_throughput_rps", "error_rate", "p50_ms", "p90_ms", "p95_ms", "p99_ms",
               "max_ms", "first_byte_p95_ms", "connect_p95_ms", "connect_max_ms"}


def _same_measure(a: str | None, b: str | None) -> bool:
    """Two PCP memory sources measure alike: hotproc.* is proc.* for the machine's own processes only (a lab
    provisioned before hotproc, then one machine again, records one of each)."""
    return a is not None and (a or "").replace("hotproc.", "proc.") == (b or "").replace("hotproc.", "proc.")


def _comparison(machines: dict) -> list[contract.ComparisonRow]:
    default, tuned = machines.get("default") or {}, machines.get("tuned") or {}
    unsettled = [name for name, m in (("default", default), ("tuned", tuned))
                 if ((m.get("load") or {}).get("window") or {}).get("settled") is False]
    rows: list[contract.ComparisonRow] = []
    for key, label, unit, get, better in COMPARED:
        if key == "capacity_rps" and "capacity" not in default and "capacity" not in tuned:
            continue                                    # not a capacity run
        a, b = get(default), get(tuned)
        row: contract.ComparisonRow = {"key": key, "label": label, "unit": unit, "default": a, "tuned": b,
                                       "ratio": _ratio(b, a), "better": better}
        if key == "gc_max_ms":
            lone = [m for m, entry in (("default", default), ("tuned", tuned)) if lone_pause(entry.get("gc") or {})]
            if lone:        # one outlier's ratio reads as a pattern: said, and not coloured
                row.update({"outlier": True, "note": f"a lone pause on {' and '.join(lone)}: at least "
                                                     f"{LONE_PAUSE_FACTOR} times the 99th percentile of the other "
                                                     "pauses (see What happened)"})
        if key in STEADY_KEYS and unsettled:
            row.update({"ratio": None, "note": f"no ratio: {' and '.join(unsettled)} did not reach a steady state"})
        if key == "peak_memory_bytes":
            # Compare like with like: events.json on both, else PCP on both.
            ma, mb = default.get("memory") or {}, tuned.get("memory") or {}
            if ma.get("events_peak_bytes") is not None and mb.get("events_peak_bytes") is not None:
                row.update({"default": ma["events_peak_bytes"], "tuned": mb["events_peak_bytes"],
                            "source": memory.EVENTS_SOURCE})
            elif ma.get("pcp_peak_bytes") is not None and mb.get("pcp_peak_bytes") is not None \
                    and _same_measure(ma.get("pcp_source"), mb.get("pcp_source")):
                row.update({"default": ma["pcp_peak_bytes"], "tuned": mb["pcp_peak_bytes"], "source": ma["pcp_source"]})
            else:
                if a is not None and b is not None:
                    row["source"] = "measured differently on each machine: no ratio"
                row["ratio"] = None
                rows.append(row)
                continue
            row["ratio"] = _ratio(row["tuned"], row["default"])
        rows.append(row)
    return rows


def _observed(status: dict | None, machines: list[str]) -> dict[str, contract.Machines]:
    rows: dict[str, contract.Machines] = {}
    for machine in machines:
        state = ((status or {}).get("machines") or {}).get(machine) or {}
        for key, value in (state.get("observed") or {}).items():
            rows.setdefault(key, {})[machine] = value
    return rows



def load_series(run_dir: Path) -> dict:
    """series.json, computed (with summary.json) if missing."""
    path = RunFolder(Path(run_dir)).series_json
    if not path.is_file():
        summarize(run_dir)
    return json.loads(path.read_text())


