"""One machine's figures from its evidence in the run folder: its load (JMeter's results), a capacity run's
capacity, its GC pauses, its resources (PCP), its events, CPU and memory, what status saw and its files
(lab/analysis/summary.py puts the machines together and judges the run)."""
from __future__ import annotations

from pathlib import Path

from lab.analysis import capacity, gclog, inputs, memory, step_state
from lab.analysis.jmeter import Samples, analyze_load
from lab.analysis.pcp import analyze_pcp
from lab.load.openmodel import StepLoad
from lab.numbers import number as _number
from lab.paths import LOCAL_ROOT
from lab.runfolder import RunFolder


def machine_figures(folder: RunFolder, machine: str, samples: Samples | None, t0: float, ramp_s: float,
                    backend: str | None, status: dict | None, run: dict, use_gcviewer: bool) -> tuple[dict, dict]:
    """The machine's summary entry and its series for the charts; what is missing is named in entry["missing"]."""
    missing: list[str] = []
    series: dict = {}
    entry: dict = {"missing": missing}
    window, load_window = _load(entry, folder, machine, samples, t0, ramp_s, run, series)
    gc_dir = folder.evidence(machine, "gc")
    entry["gc"] = _gc(gc_dir, window, t0, use_gcviewer, series)
    if entry["gc"] is None:
        missing.append(f"no GC log (machines/{machine}/gc/)")
    resources = _resources(folder, machine, backend, run, t0, load_window, series)
    entry["resources"] = resources
    if not resources.get("archive"):
        missing.append(f"no PCP archive (machines/{machine}/pcp/)")
    entry["events"] = events = _events(folder, machine, t0, missing)
    if entry.get("capacity"):
        entry["capacity"]["at_knee"] = step_state.at_knee(entry["capacity"], series, events)
        entry["capacity"]["at_capacity"] = step_state.at_capacity(entry["capacity"], series)
        step_state.why_not_recovered(entry["capacity"], series)
    entry["memory"] = memory.figures(resources, events, backend)
    entry["cpu"] = _cpu(resources, backend)
    state = ((status or {}).get("machines") or {}).get(machine) if status else None
    if isinstance(state, dict):
        entry.update({key: state.get(key) for key in ("url", "address", "processes", "observed")})
    else:
        entry.update(url=None, address=None, processes=None, observed=None)
        missing.append("not in status.json")
    entry["crash_files"] = _list_files(folder.evidence(machine, "crash"), folder)
    entry["files"] = _files(folder, machine, resources, entry["crash_files"])
    if not folder.dashboard(machine).is_file() and samples:
        missing.append("no JMeter dashboard")
    return entry, series


def _load(entry: dict, folder: RunFolder, machine: str, samples: Samples | None, t0: float, ramp_s: float,
          run: dict, series: dict) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The load's figures (and a capacity run's capacity) in entry; the steady state's window and the whole
    load's (epoch seconds), None without samples."""
    steps = step_load(run)
    if not samples:
        entry["load"] = None
        entry["missing"].append(f"no JMeter results (jmeter/{machine}/results.csv "
                                f"{'has no samples' if folder.results(machine).is_file() else 'missing'})")
        return None, None
    entry["load"] = analyze_load(samples, t0, ramp_s, series.setdefault("load", {}), steady=steps is None)
    if steps is not None:
        ended_past_knee = machine in (run.get("ended_early_s") or {})
        entry["capacity"] = capacity.with_refined(capacity.analyze(samples, steps, t0, ended_past_knee),
                                                  folder.jmeter.refine(machine), t0)
    return ((entry["load"]["window"]["start_at"], entry["load"]["window"]["end_at"]),
            (t0 + entry["load"]["load_start_s"], t0 + entry["load"]["load_end_s"]))


def _gc(gc_dir: Path, window: tuple[float, float] | None, t0: float, use_gcviewer: bool, series: dict) -> dict | None:
    """GC over the steady window (the load's steady state), whole log if no window or wall clock; None: no log."""
    if not gclog.log_files(gc_dir):
        return None
    gc = gclog.analyze(gc_dir, window, use_gcviewer=use_gcviewer)
    series["gc"] = [{"t": round(p["at"] - t0, 4) if p["at"] is not None else None, "uptime_s": p["uptime_s"],
                     "pause_ms": p["pause_ms"], "heap_after_bytes": p["heap_after_bytes"],
                     "heap_before_bytes": p["heap_before_bytes"], "heap_total_bytes": p["heap_total_bytes"],
                     "kind": p["kind"]} for p in gc.pop("series")]
    return gc


def _resources(folder: RunFolder, machine: str, backend: str | None, run: dict, t0: float,
               load_window: tuple[float, float] | None, series: dict) -> dict:
    """PCP: resources over the whole load (ramp-up included: that is when things change)."""
    # The machine's processes on a shared host: its folder in their command line (run.json's optional
    # machine_homes, else the local backend's folder, else any …/machines/<name>/).
    homes = run["machine_homes"] if isinstance(run.get("machine_homes"), dict) else {}
    markers = [homes[machine].rstrip("/") + "/"] if isinstance(homes.get(machine), str) and homes[machine] else []
    if backend == "local":
        markers.append(f"{LOCAL_ROOT}/machines/{machine}/")
    return analyze_pcp(folder.evidence(machine, "pcp"), machine, backend, t0, load_window, series, markers)


def _events(folder: RunFolder, machine: str, t0: float, missing: list[str]) -> dict | None:
    """events.json, each process exit placed on the run's clock."""
    events, event_problem = inputs.read_events(folder, machine)
    if event_problem:
        missing.append(event_problem)
    if events:
        for exit_ in events.get("process_exits") or []:
            at = _number(exit_.get("at")) if isinstance(exit_, dict) else None
            if at is not None:
                exit_["at_s"] = round(at - t0, 3)
    return events


def _cpu(resources: dict, backend: str | None) -> dict:
    """The machine's CPU: its own processes', else (not on a shared host) the whole machine's."""
    family = resources.get("process_metrics") or "proc"
    if resources.get("proc_cpu_cores_mean") is not None:
        return {"mean_cores": resources["proc_cpu_cores_mean"], "max_cores": resources["proc_cpu_cores_max"],
                "source": f"PCP: {family}.psinfo.utime + stime of the machine's processes, over the load"}
    if resources.get("host_cpu_cores_mean") is not None and backend != "local":
        return {"mean_cores": resources["host_cpu_cores_mean"], "max_cores": None,
                "source": "PCP: kernel.all.cpu.user + sys, over the load"}
    return {"mean_cores": None, "max_cores": None, "source": None}


def _files(folder: RunFolder, machine: str, resources: dict, crash: list[str]) -> dict:
    """The machine's files in the run folder, relative to it (None or [] where missing)."""
    results, dashboard = folder.results(machine), folder.dashboard(machine)
    return {
        "results": folder.relative(results) if results.is_file() else None,
        "dashboard": folder.relative(dashboard) if dashboard.is_file() else None,
        "archive": [folder.relative(Path(a)) for a in resources["archive"].split(",")] if resources.get("archive") else [],
        "gc_logs": _list_files(folder.evidence(machine, "gc"), folder),
        "logs": _list_files(folder.evidence(machine, "logs"), folder),
        "crash": crash,
        "events": folder.relative(folder.events_json(machine)) if (folder.events_json(machine)).is_file() else None,
    }


def step_load(run: dict) -> StepLoad | None:
    """A capacity run's steps, from run.json's profile (None for a closed model's run, or a bad profile)."""
    profile = run["profile"] if isinstance(run.get("profile"), dict) else {}
    try:
        return capacity.step_load(profile)
    except (TypeError, ValueError):
        return None


def _list_files(folder: Path, run: RunFolder) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(run.relative(p) for p in folder.rglob("*") if p.is_file())
