"""A run folder → summary.json (the figures) and series.json (the time series the report charts).

    summarize(run_dir) -> dict          # also writes run_dir/summary.json and run_dir/series.json
    python3 -m lab.summary runs/<run-id>

Every figure is computed here from the raw files the run collected (the contract is in
lab/report.py's docstring and the README): JMeter's results CSV of each machine, the machine's PCP
archive (read with PCP's own pmrep/pminfo), its GC logs (GCViewer, see lab/gc.py), events.json,
status.json, knobs.json and run.json. Any of them may be missing: the summary then says so
(`problems`, and `missing` per machine) and carries on.

Definitions (also shown in the report):
- a sample's time is its end (JMeter's timeStamp, the start, + elapsed): when the client saw the
  answer or the error. Times in the JSON are epoch seconds (`*_at`) or seconds from the run's start
  (`*_s`, from run.json started_at, else the first sample of any machine).
- steady-state window of a machine: from its first sample's start + the profile's ramp-up, to its
  last sample's end. Samples that *started* in it count for the steady figures.
- throughput = samples in the window / window length; error rate = failed / samples.
- percentiles: nearest rank (the smallest elapsed value with at least p % of the samples at or
  below it), over every sample, failed ones included (as JMeter's dashboard).
- the error-rate threshold is crossed in the first 10-second bucket (by sample end) whose error rate
  is above 1 %.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

try:
    from . import gc as gclog
    from .paths import LOCAL_ROOT
except ImportError:                     # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from lab import gc as gclog         # type: ignore
    from lab.paths import LOCAL_ROOT    # type: ignore

SCHEMA = 1
MEMORY_EVENTS_SOURCE = "events.json peak_memory_bytes (the machine's memory peak)"
MACHINES = ("default", "tuned")
PERCENTILES = (50, 90, 95, 99)
ERROR_RATE_THRESHOLD = 0.01
THRESHOLD_BUCKET_S = 10                 # = LATENCY_BUCKET_S: the threshold is read on the latency buckets
THRESHOLD_MIN_SAMPLES = 10              # a bucket with fewer requests says too little to count
LATENCY_BUCKET_S = THRESHOLD_BUCKET_S
PSARGS_STEP_S = 5                       # how often the process list is read to find a machine's processes
PCP_TIMEOUT_S = 300


# ------------------------------------------------------------------------------------------- helpers

def _read_json(path: Path, problems: list[str], what: str) -> dict | None:
    if not path.is_file():
        problems.append(f"{what}: {path.name} missing")
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        problems.append(f"{what}: {path.name} unreadable ({error})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{what}: {path.name} is not a JSON object")
        return None
    return data


def _number(value) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def percentile(ordered: list[float], p: float) -> float | None:
    """Nearest rank over an already sorted list."""
    if not ordered:
        return None
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100.0 * len(ordered)) - 1))]


def clock(seconds: float | None) -> str:
    """Seconds from the run's start as m:ss (or h:mm:ss)."""
    if seconds is None:
        return "?"
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    hours, rest = divmod(total, 3600)
    return f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{sign}{rest // 60}:{rest % 60:02d}"


def _rel(path: Path, run_dir: Path) -> str:
    try:
        return str(path.relative_to(run_dir))
    except ValueError:
        return str(path)


def _machines(run_dir: Path, status: dict | None, knobs: dict | None) -> list[str]:
    """default and tuned always (a missing one is reported as missing), then any other the run names."""
    names = list(MACHINES)
    found = set()
    for folder in (run_dir / "jmeter", run_dir / "machines"):
        if folder.is_dir():
            found.update(p.name for p in folder.iterdir() if p.is_dir())
    if status and isinstance(status.get("machines"), dict):
        found.update(status["machines"])
    if knobs:
        found.update(k for k, v in knobs.items() if isinstance(v, dict))
    return names + sorted(found - set(names))


# --------------------------------------------------------------------------------------------- JMeter

class Samples:
    """One machine's JMeter samples, column-wise (ms since epoch)."""

    def __init__(self) -> None:
        self.start: list[int] = []
        self.elapsed: list[int] = []
        self.ok: list[bool] = []
        self.code: list[str] = []
        self.message: list[str] = []
        self.failure: list[str] = []
        self.threads: list[int] = []
        self.skipped = 0

    def __len__(self) -> int:
        return len(self.start)

    def end(self, i: int) -> int:
        return self.start[i] + self.elapsed[i]


def read_results(path: Path) -> Samples:
    """JMeter's default CSV (header line; timeStamp in ms). Broken or partial rows are skipped."""
    samples = Samples()
    with path.open(newline="", errors="replace") as stream:
        reader = csv.reader(stream)
        header = next(reader, None)
        if not header:
            return samples
        col = {name: i for i, name in enumerate(header)}
        need = ("timeStamp", "elapsed", "success")
        if any(name not in col for name in need):
            raise ValueError(f"{path}: not a JMeter CSV with a header (columns {header[:6]}…)")
        ts, el, su = col["timeStamp"], col["elapsed"], col["success"]
        rc, rm, fm = col.get("responseCode"), col.get("responseMessage"), col.get("failureMessage")
        gt = col.get("grpThreads")
        width = max(ts, el, su) + 1
        for row in reader:
            if len(row) < width or not row[ts].isdigit() or not row[el].lstrip("-").isdigit() \
                    or row[su] not in ("true", "false"):
                samples.skipped += 1
                continue
            samples.start.append(int(row[ts]))
            samples.elapsed.append(max(0, int(row[el])))
            ok = row[su] == "true"
            samples.ok.append(ok)
            samples.code.append(row[rc] if rc is not None and rc < len(row) else "")
            samples.message.append(row[rm] if (not ok and rm is not None and rm < len(row)) else "")
            samples.failure.append(row[fm] if (not ok and fm is not None and fm < len(row)) else "")
            threads = row[gt] if gt is not None and gt < len(row) else ""
            samples.threads.append(int(threads) if threads.isdigit() else 0)
    return samples


def _stats(samples: Samples, indices: list[int], duration_s: float | None) -> dict:
    values = sorted(samples.elapsed[i] for i in indices)
    errors = sum(1 for i in indices if not samples.ok[i])
    latency = {f"p{p}": percentile(values, p) for p in PERCENTILES}
    latency["max"] = values[-1] if values else None
    latency["mean"] = round(sum(values) / len(values), 3) if values else None
    return {"samples": len(indices), "errors": errors,
            "error_rate": round(errors / len(indices), 6) if indices else None,
            "throughput_rps": round(len(indices) / duration_s, 3) if duration_s and duration_s > 0 else None,
            "duration_s": round(duration_s, 3) if duration_s is not None else None,
            "latency_ms": latency}


def _error_label(code: str, message: str) -> str:
    code = code.strip()
    message = message.strip()
    for prefix in ("Non HTTP response code: ", "Non HTTP response message: "):
        code = code.replace(prefix, "")
        message = message.replace(prefix, "")
    if message and message != code:
        return f"{code} {message}".strip()
    return code or message or "failed"


def analyze_load(samples: Samples, t0: float, ramp_s: float, series: dict) -> dict:
    """Figures of one machine's samples; fills series with its per-second and per-10-s series."""
    n = len(samples)
    first_start = min(samples.start) / 1000.0
    last_end = max(samples.end(i) for i in range(n)) / 1000.0
    steady_start = min(first_start + ramp_s, last_end)
    window = {"start_at": round(steady_start, 3), "end_at": round(last_end, 3),
              "start_s": round(steady_start - t0, 3), "end_s": round(last_end - t0, 3),
              "duration_s": round(last_end - steady_start, 3),
              "basis": f"first sample's start + ramp-up ({ramp_s:g} s) .. last sample's end; "
                       "samples that started in it"}
    steady_ms = steady_start * 1000.0
    steady = [i for i in range(n) if samples.start[i] >= steady_ms]
    everything = list(range(n))
    result = {"load_start_s": round(first_start - t0, 3), "load_end_s": round(last_end - t0, 3),
              "window": window}
    if window["duration_s"] <= 0:
        window["note"] = "the load ended before the ramp-up did: no steady state"
    result["steady"] = _stats(samples, steady, window["duration_s"])
    result["all"] = _stats(samples, everything, last_end - first_start)
    for key in ("samples", "errors", "error_rate", "throughput_rps"):
        result[key] = result["steady"][key]
    result["latency_ms"] = result["steady"]["latency_ms"]
    result["skipped_rows"] = samples.skipped
    result["max_active_users"] = max(samples.threads) if samples.threads else None

    failed = [i for i in range(n) if not samples.ok[i]]
    if failed:
        first = min(failed, key=lambda i: (samples.end(i), samples.start[i]))
        result["first_error_s"] = round(samples.end(first) / 1000.0 - t0, 3)
        result["first_error"] = {
            "at": samples.end(first) / 1000.0, "at_s": result["first_error_s"],
            "response_code": samples.code[first], "response_message": samples.message[first],
            "failure_message": samples.failure[first][:500], "active_users": samples.threads[first],
            "label": _error_label(samples.code[first], samples.message[first])}
        kinds = Counter(_error_label(samples.code[i], samples.message[i]) for i in failed)
        result["errors_by_type"] = [{"error": k, "count": v} for k, v in kinds.most_common(8)]
    else:
        result["first_error_s"] = None
        result["first_error"] = None
        result["errors_by_type"] = []

    # Buckets by sample end, from the run's start.
    per_second = defaultdict(int)
    errors_per_second = defaultdict(int)
    users = defaultdict(int)
    buckets: dict[int, list[int]] = defaultdict(list)
    bucket_errors = defaultdict(int)
    for i in range(n):
        end_s = samples.end(i) / 1000.0 - t0
        second = math.floor(end_s)
        per_second[second] += 1
        users[second] = max(users[second], samples.threads[i])
        bucket = math.floor(end_s / LATENCY_BUCKET_S)
        buckets[bucket].append(samples.elapsed[i])
        if not samples.ok[i]:
            errors_per_second[second] += 1
            bucket_errors[bucket] += 1
    seconds = list(range(min(per_second), max(per_second) + 1))
    series["seconds"] = seconds
    series["throughput_rps"] = [per_second.get(s, 0) for s in seconds]
    series["errors_per_s"] = [errors_per_second.get(s, 0) for s in seconds]
    series["active_users"] = [users.get(s) for s in seconds]
    bucket_keys = sorted(buckets)
    series["bucket_s"] = LATENCY_BUCKET_S
    series["buckets"] = [k * LATENCY_BUCKET_S for k in bucket_keys]
    for p in (50, 95, 99):
        series[f"p{p}_ms"] = [percentile(sorted(buckets[k]), p) for k in bucket_keys]
    series["bucket_error_rate"] = [bucket_errors.get(k, 0) / len(buckets[k]) for k in bucket_keys]

    def above(k: int) -> bool:
        return len(buckets[k]) >= THRESHOLD_MIN_SAMPLES and bucket_errors.get(k, 0) / len(buckets[k]) > ERROR_RATE_THRESHOLD
    crossed = next((k for k in bucket_keys if above(k)), None)
    result["error_threshold"] = {
        "threshold": ERROR_RATE_THRESHOLD, "bucket_s": THRESHOLD_BUCKET_S,
        "crossed_at_s": crossed * THRESHOLD_BUCKET_S if crossed is not None else None,
        "bucket_error_rate": round(bucket_errors[crossed] / len(buckets[crossed]), 6) if crossed is not None else None,
        "bucket_samples": len(buckets[crossed]) if crossed is not None else None,
        "buckets_above": sum(1 for k in bucket_keys if above(k)),
        "buckets": sum(1 for k in bucket_keys if len(buckets[k]) >= THRESHOLD_MIN_SAMPLES),
        "min_samples": THRESHOLD_MIN_SAMPLES}
    return result


# ------------------------------------------------------------------------------------------------ PCP

def _pcp_env() -> dict:
    env = dict(os.environ)
    if Path("/usr/bin/python3").exists():
        env["PCP_PYTHON_PROG"] = "/usr/bin/python3"     # Debian's python3-pcp lives there, not in a venv
    env["TZ"] = "UTC"
    return env


def _pcp_tool(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for p in (Path("/usr/bin") / name, Path("/usr/lib/pcp/bin") / name)
                                       if p.exists()), None)


def archive_of(pcp_dir: Path) -> str | None:
    """The archive(s) in a machine's pcp folder, as PCP names them (base names, comma separated)."""
    if not pcp_dir.is_dir():
        return None
    bases = sorted(str(p)[: -len(".index")] for p in pcp_dir.glob("*.index"))
    if not bases:     # an archive without its index (pmlogger killed) still reads from .meta + .0
        bases = sorted(str(p)[: -len(".meta")] for p in pcp_dir.glob("*.meta") if Path(str(p)[:-5] + ".0").exists())
    return ",".join(bases) or None


def _run_pcp(command: list[str]) -> tuple[str, str | None]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PCP_TIMEOUT_S, env=_pcp_env())
    except (OSError, subprocess.TimeoutExpired) as error:
        return "", f"{Path(command[0]).name}: {error}"
    if done.returncode != 0:
        return done.stdout, f"{Path(command[0]).name} exited {done.returncode}: {done.stderr.strip()[:300]}"
    return done.stdout, None


def pmrep_csv(archive: str, metrics: list[str], step_s: int = 1, instances: str | None = None,
              scale: bool = True, derived: dict[str, str] | None = None,
              interpolate: bool = True) -> tuple[list[float], dict[str, list[float | str | None]], str | None]:
    """pmrep -a ARCHIVE -t STEP -o csv METRICS → (epoch times, {"metric-instance" column: values}, problem).

    Counters come as rates per second; with scale, space in bytes and time in seconds. derived defines
    metrics on the fly (name: expression); without interpolate, every record as logged (-u)."""
    pmrep = _pcp_tool("pmrep")
    if not pmrep:
        return [], {}, "pmrep not found (apt-get install pcp)"
    command = [pmrep, "-a", archive, "-o", "csv", "-Z", "UTC", "-f", "%s.%f", "-I"]
    command += ["-t", f"{step_s}s"] if interpolate else ["-u"]
    if scale:
        command += ["-b", "byte", "-y", "sec"]
    for name, expression in (derived or {}).items():
        command += ["-e", f"{name}={expression}"]
    if instances:
        command += ["-i", instances]
    out, problem = _run_pcp(command + metrics)
    if problem and not out:
        return [], {}, problem
    rows = list(csv.reader(out.splitlines()))
    if not rows:
        return [], {}, problem or "pmrep printed nothing"
    header = rows[0]
    times: list[float] = []
    columns: dict[str, list] = {name: [] for name in header[1:]}
    for row in rows[1:]:
        stamp = _number(row[0]) if row else None
        if stamp is None:
            continue
        times.append(stamp)
        for name, value in zip(header[1:], row[1:] + [""] * (len(header) - len(row))):
            number = _number(value) if value not in ("", "N/A") else None
            columns[name].append(number if number is not None or value in ("", "N/A") else value)
    return times, columns, problem


def _columns_of(columns: dict, metric: str) -> dict[str, list]:
    """The columns of one metric: {instance name or "": values}."""
    found = {}
    for name, values in columns.items():
        if name == metric:
            found[""] = values
        elif name.startswith(metric + "-"):
            found[name[len(metric) + 1:]] = values
    return found


def _pid_of(column: str) -> str | None:
    """'proc.memory.rss-020192 java' -> '020192'."""
    found = re.match(r"^proc\.[\w.]+-(\d+) ", column)
    return found.group(1) if found else None


def _instance_label(name: str) -> str:
    """'2 name:http-nio-8080' -> 'name:http-nio-8080' (openmetrics instances start with their number)."""
    return re.sub(r"^\d+ ", "", name)


def _sum_rows(columns: list[list]) -> list[float | None]:
    if not columns:
        return []
    out = []
    for values in zip(*columns):
        numbers = [v for v in values if isinstance(v, float)]
        out.append(sum(numbers) if numbers else None)
    return out


def _finite(values: list) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def analyze_pcp(pcp_dir: Path, machine: str, backend: str | None, t0: float,
                window: tuple[float, float] | None, series: dict, markers: list[str] | None = None) -> dict:
    """A machine's PCP archive → figures; fills series["pcp"]. markers: what the command lines of the
    machine's own processes contain, most specific first; the first one any process has is used
    (the last is always /machines/<machine>/)."""
    result: dict = {"archive": None, "problems": []}
    archive = archive_of(pcp_dir)
    if not archive:
        result["problems"].append(f"no PCP archive in {pcp_dir}")
        return result
    result["archive"] = archive
    pminfo = _pcp_tool("pminfo")
    if not pminfo:
        result["problems"].append("pminfo not found (apt-get install pcp)")
        return result
    listing, problem = _run_pcp([pminfo, "-a", archive])
    names = set(listing.split())
    if problem and not names:
        result["problems"].append(f"archive {archive} unreadable: {problem}")
        return result
    result["metrics_in_archive"] = len(names)
    pcp: dict = {}
    series["pcp"] = pcp

    def in_window(times: list[float], values: list) -> list[float]:
        if not window:
            return _finite(values)
        return _finite([v for t, v in zip(times, values) if window[0] <= t <= window[1]])

    # Whole machine (on the local backend: the host, which both machines share).
    host_metrics = [m for m in ("kernel.all.load", "kernel.all.cpu.user", "kernel.all.cpu.sys", "mem.util.used",
                                "mem.physmem", "hinv.ncpu") if m in names]
    if host_metrics:
        times, columns, problem = pmrep_csv(archive, host_metrics)
        if problem:
            result["problems"].append(problem)
        if times:
            pcp["t"] = [round(t - t0, 3) for t in times]
            load = _columns_of(columns, "kernel.all.load")
            one = next((v for k, v in load.items() if k.startswith("1 ")), None)
            if one:
                pcp["load1"] = one
                result["load1_max"] = max(in_window(times, one), default=None)
                result["load1_mean"] = _mean(in_window(times, one))
            user = _columns_of(columns, "kernel.all.cpu.user").get("")
            system = _columns_of(columns, "kernel.all.cpu.sys").get("")
            if user and system:
                pcp["host_cpu_cores"] = _sum_rows([user, system])
                result["host_cpu_cores_mean"] = _mean(in_window(times, pcp["host_cpu_cores"]))
            used = _columns_of(columns, "mem.util.used").get("")
            if used:
                pcp["mem_used_bytes"] = used
                result["mem_used_max_bytes"] = max(in_window(times, used), default=None)
            physmem = _finite(_columns_of(columns, "mem.physmem").get("", []))
            if physmem:
                result["physmem_bytes"] = physmem[-1]
            ncpu = _finite(_columns_of(columns, "hinv.ncpu").get("", []))
            if ncpu:
                result["ncpu"] = int(ncpu[-1])
    result["scope"] = ("host (shared by both machines on the local backend)" if backend == "local"
                       else "machine")

    # The machine's own processes: on the local backend every host process is in the archive; the
    # machine's have its folder (…/machines/<name>/) in their command line.
    if {"proc.psinfo.psargs", "proc.psinfo.utime"} <= names:
        times, columns, problem = pmrep_csv(archive, ["proc.psinfo.psargs"], step_s=PSARGS_STEP_S, scale=False)
        if problem:
            result["problems"].append(problem)
        commands: dict[str, str] = {}
        for name, values in columns.items():
            args = next((v for v in reversed(values) if isinstance(v, str) and v), "")
            if args and name.startswith("proc.psinfo.psargs-"):
                commands[name[len("proc.psinfo.psargs-"):].split(" ", 1)[0]] = args
        own: dict[str, str] = {}
        marker = None
        for marker in list(markers or []) + [f"/machines/{machine}/"]:
            own = {pid: args for pid, args in commands.items() if marker in args}
            if own:
                break
        result["own_processes"] = len(own)
        if own:
            # Every process, filtered here: pmrep's -i drops instances that appear after the archive's start.
            metrics = [m for m in ("proc.psinfo.utime", "proc.psinfo.stime", "proc.memory.rss", "proc.smaps.pss",
                                   "proc.psinfo.threads") if m in names]
            ptimes, every, problem = pmrep_csv(archive, metrics)
            if problem:
                result["problems"].append(problem)
            pcolumns = {name: values for name, values in every.items() if _pid_of(name) in own}
            if ptimes:
                pcp["proc_t"] = [round(t - t0, 3) for t in ptimes]
                cpu_columns = list(_columns_of(pcolumns, "proc.psinfo.utime").values()) + \
                    list(_columns_of(pcolumns, "proc.psinfo.stime").values())
                pcp["proc_cpu_cores"] = _sum_rows(cpu_columns)
                rss = _columns_of(pcolumns, "proc.memory.rss")
                pcp["proc_rss_bytes"] = _sum_rows(list(rss.values()))
                pss = _columns_of(pcolumns, "proc.smaps.pss")
                if pss:
                    pcp["proc_pss_bytes"] = _sum_rows(list(pss.values()))
                    result["proc_pss_max_bytes"] = max(_finite(pcp["proc_pss_bytes"]), default=None)
                threads = _columns_of(pcolumns, "proc.psinfo.threads")
                pcp["proc_threads"] = _sum_rows(list(threads.values()))
                result["proc_cpu_cores_mean"] = _mean(in_window(ptimes, pcp["proc_cpu_cores"]))
                result["proc_cpu_cores_max"] = max(in_window(ptimes, pcp["proc_cpu_cores"]), default=None)
                result["proc_rss_max_bytes"] = max(_finite(pcp["proc_rss_bytes"]), default=None)
                by_command: dict[str, dict] = {}
                for instance, values in rss.items():
                    pid = instance.split(" ", 1)[0]
                    command = Path(own.get(pid, instance).split(" ", 1)[0]).name or "?"
                    entry = by_command.setdefault(command, {"processes": 0, "rss_max_bytes": 0.0})
                    entry["processes"] += 1
                    entry["rss_max_bytes"] = max(entry["rss_max_bytes"], max(_finite(values), default=0.0))
                result["own_by_command"] = by_command
        result["own_processes_marker"] = marker

    # The service's Prometheus metrics (openmetrics agent) and HTTPD's mod_status (apache agent).
    wanted = {"tomcat_busy": "openmetrics.app.tomcat_threads_busy_threads",
              "tomcat_current": "openmetrics.app.tomcat_threads_current_threads",
              "tomcat_max": "openmetrics.app.tomcat_threads_config_max_threads",
              "pool_connections": "openmetrics.app.httpcomponents_httpclient_pool_total_connections",
              "pool_pending": "openmetrics.app.httpcomponents_httpclient_pool_total_pending",
              "pool_max": "openmetrics.app.httpcomponents_httpclient_pool_total_max",
              "camel_inflight": "openmetrics.app.camel_exchanges_inflight",
              "jvm_memory_used": "openmetrics.app.jvm_memory_used_bytes",
              "apache_busy": "apache.busy_servers", "apache_idle": "apache.idle_servers",
              "apache_rps": "apache.requests_per_sec"}
    present = {key: metric for key, metric in wanted.items() if metric in names}
    result["app_metrics"] = sorted(present)
    if present:
        # As logged: instant() because the openmetrics agent makes a counter of any name with "total"
        # in it (…_pool_total_connections is a gauge), and no interpolation between records.
        derived = {f"lab.{key}": f"instant({metric})" for key, metric in present.items()}
        times, columns, problem = pmrep_csv(archive, list(derived), scale=False, derived=derived, interpolate=False)
        if problem:
            result["problems"].append(problem)
        if times:
            pcp["app_t"] = [round(t - t0, 3) for t in times]
            for key, metric in present.items():
                found = _columns_of(columns, f"lab.{key}")
                if not found:
                    continue
                # Instances that never have a value (stale names from the agent's instance cache) are left out.
                found = {k: v for k, v in found.items() if _finite(v)}
                if found:
                    pcp[key] = {_instance_label(k) or metric.rsplit(".", 1)[1]: v for k, v in found.items()}
            if "tomcat_busy" in pcp:
                result["tomcat_busy_max"] = {k: max(_finite(v), default=None) for k, v in pcp["tomcat_busy"].items()}
            if "pool_pending" in pcp:
                result["pool_pending_max"] = max((max(_finite(v), default=0.0) for v in pcp["pool_pending"].values()),
                                                 default=None)
            if "pool_connections" in pcp:
                leased = [v for k, v in pcp["pool_connections"].items() if "state:leased" in k]
                result["pool_leased_max"] = max((max(_finite(v), default=0.0) for v in leased), default=None)
    return result


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


# ------------------------------------------------------------------------------------------ summarize

def _ratio(tuned, default) -> float | None:
    tuned, default = _number(tuned), _number(default)
    if tuned is None or default is None or default == 0:
        return None
    return round(tuned / default, 6)


def _list_files(folder: Path, run_dir: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(_rel(p, run_dir) for p in folder.rglob("*") if p.is_file())


def summarize(run_dir: Path, write: bool = True, use_gcviewer: bool = True) -> dict:
    """The run's figures (also written to run_dir/summary.json, and its series to series.json)."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder {run_dir}")
    run = _read_json(run_dir / "run.json", problems, "run") or {}
    status = _read_json(run_dir / "status.json", problems, "status")
    knobs = _read_json(run_dir / "knobs.json", problems, "knobs")
    profile = run.get("profile") if isinstance(run.get("profile"), dict) else {}
    ramp_s = _number(profile.get("ramp_s")) or 0.0
    backend = run.get("backend") or (status or {}).get("backend")
    machines = _machines(run_dir, status, knobs)

    samples: dict[str, Samples] = {}
    for machine in machines:
        path = run_dir / "jmeter" / machine / "results.csv"
        if path.is_file():
            try:
                found = read_results(path)
            except (OSError, ValueError) as error:
                problems.append(f"{machine}: results.csv unreadable ({error})")
                continue
            if len(found):
                samples[machine] = found
    started = _number(run.get("started_at"))
    ended = _number(run.get("ended_at"))
    t0 = started if started is not None else (
        min(min(s.start) for s in samples.values()) / 1000.0 if samples else time.time())

    summary: dict = {
        "schema": SCHEMA, "generated_at": round(time.time(), 3), "generator": "lab/summary.py",
        "run": {"run_id": run.get("run_id") or run_dir.name, "backend": backend,
                "backend_note": run.get("backend_note") or (status or {}).get("note"),
                "schedule": run.get("schedule"), "profile": profile, "started_at": started, "ended_at": ended,
                "duration_s": round(ended - started, 3) if started is not None and ended is not None else None,
                "interrupted": run.get("interrupted"), "host": run.get("host"), "versions": run.get("versions"),
                "t0": t0, "t0_basis": "run.json started_at" if started is not None else "first sample"},
        "definitions": {"percentile": "nearest rank, all samples (failed included)",
                        "steady_window": "first sample's start + ramp-up .. last sample's end",
                        "sample_time": "end of the sample (timeStamp + elapsed)",
                        "error_threshold": f"first {THRESHOLD_BUCKET_S}-s bucket (by sample end, from the run's "
                                           f"start) of at least {THRESHOLD_MIN_SAMPLES} requests with an error "
                                           f"rate above {ERROR_RATE_THRESHOLD:.0%}",
                        "gc_throughput": "100 % - time in GC pauses / length of the load window"},
        "machines": {}, "problems": problems,
    }
    series: dict = {"t0": t0, "machines": {}}

    for machine in machines:
        entry, machine_series = _summarize_machine(run_dir, machine, samples.get(machine), t0, ramp_s, backend,
                                                   status, run, use_gcviewer)
        summary["machines"][machine] = entry
        series["machines"][machine] = machine_series
        problems.extend(f"{machine}: {p}" for p in entry["missing"])

    summary["comparison"] = _comparison(summary["machines"])
    summary["knobs"] = _knobs(knobs)
    summary["observed"] = _observed(status, machines)
    summary["what_happened"] = what_happened(summary)
    if write:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        (run_dir / "series.json").write_text(json.dumps(series, separators=(",", ":"), default=str) + "\n")
    return summary


def _summarize_machine(run_dir: Path, machine: str, samples: Samples | None, t0: float, ramp_s: float,
                       backend: str | None, status: dict | None, run: dict, use_gcviewer: bool) -> tuple[dict, dict]:
    missing: list[str] = []
    machine_dir = run_dir / "machines" / machine
    series: dict = {}
    entry: dict = {"missing": missing}

    results = run_dir / "jmeter" / machine / "results.csv"
    dashboard = run_dir / "jmeter" / machine / "dashboard" / "index.html"
    if samples:
        entry["load"] = analyze_load(samples, t0, ramp_s, series.setdefault("load", {}))
        window = (entry["load"]["window"]["start_at"], entry["load"]["window"]["end_at"])
        load_window = (t0 + entry["load"]["load_start_s"], t0 + entry["load"]["load_end_s"])
    else:
        entry["load"] = None
        missing.append("no JMeter results (jmeter/%s/results.csv %s)" %
                       (machine, "has no samples" if results.is_file() else "missing"))
        window = load_window = None

    # GC over the steady window (the load's steady state), whole log if no window or wall clock.
    gc_dir = machine_dir / "gc"
    if gclog.log_files(gc_dir):
        gc = gclog.analyze(gc_dir, window, use_gcviewer=use_gcviewer)
        series["gc"] = [{"t": round(p["at"] - t0, 4) if p["at"] is not None else None, "uptime_s": p["uptime_s"],
                         "pause_ms": p["pause_ms"], "heap_after_bytes": p["heap_after_bytes"],
                         "heap_before_bytes": p["heap_before_bytes"], "heap_total_bytes": p["heap_total_bytes"],
                         "kind": p["kind"]} for p in gc.pop("series")]
        entry["gc"] = gc
    else:
        entry["gc"] = None
        missing.append(f"no GC log (machines/{machine}/gc/)")

    # PCP: resources over the whole load (ramp-up included: that is when things change).
    pcp_dir = machine_dir / "pcp"
    # The machine's processes on a shared host: its folder in their command line (run.json's optional
    # machine_homes, else the local backend's folder, else any …/machines/<name>/).
    homes = run.get("machine_homes") if isinstance(run.get("machine_homes"), dict) else {}
    markers = [homes[machine].rstrip("/") + "/"] if isinstance(homes.get(machine), str) and homes[machine] else []
    if backend == "local":
        markers.append(f"{LOCAL_ROOT}/machines/{machine}/")
    resources = analyze_pcp(pcp_dir, machine, backend, t0, load_window, series, markers)
    entry["resources"] = resources
    if not resources.get("archive"):
        missing.append(f"no PCP archive (machines/{machine}/pcp/)")

    events, event_problem = _read_events(machine_dir / "events.json")
    entry["events"] = events
    if event_problem:
        missing.append(event_problem)
    if events:
        for exit_ in events.get("process_exits") or []:
            at = _number(exit_.get("at")) if isinstance(exit_, dict) else None
            if at is not None:
                exit_["at_s"] = round(at - t0, 3)

    peak = _number((events or {}).get("peak_memory_bytes"))
    if resources.get("proc_pss_max_bytes") is not None:
        pcp_peak = {"peak_bytes": resources["proc_pss_max_bytes"],
                    "source": "PCP: peak of the summed proc.smaps.pss (proportional set size) of the machine's "
                              "processes"}
    elif resources.get("proc_rss_max_bytes") is not None:
        pcp_peak = {"peak_bytes": resources["proc_rss_max_bytes"],
                    "source": "PCP: peak of the summed proc.memory.rss of the machine's processes"}
    elif resources.get("mem_used_max_bytes") is not None and backend != "local":
        pcp_peak = {"peak_bytes": resources["mem_used_max_bytes"], "source": "PCP: peak mem.util.used"}
    else:
        pcp_peak = {"peak_bytes": None, "source": None}
    if peak is not None:
        entry["memory"] = {"peak_bytes": peak, "source": MEMORY_EVENTS_SOURCE}
    else:
        entry["memory"] = dict(pcp_peak)
    entry["memory"]["events_peak_bytes"] = peak
    entry["memory"]["pcp_peak_bytes"] = pcp_peak["peak_bytes"]
    entry["memory"]["pcp_source"] = pcp_peak["source"]
    if resources.get("proc_cpu_cores_mean") is not None:
        entry["cpu"] = {"mean_cores": resources["proc_cpu_cores_mean"], "max_cores": resources["proc_cpu_cores_max"],
                        "source": "PCP: proc.psinfo.utime + stime of the machine's processes, over the load"}
    elif resources.get("host_cpu_cores_mean") is not None and backend != "local":
        entry["cpu"] = {"mean_cores": resources["host_cpu_cores_mean"], "max_cores": None,
                        "source": "PCP: kernel.all.cpu.user + sys, over the load"}
    else:
        entry["cpu"] = {"mean_cores": None, "max_cores": None, "source": None}

    state = ((status or {}).get("machines") or {}).get(machine) if status else None
    if isinstance(state, dict):
        entry["url"] = state.get("url")
        entry["address"] = state.get("address")
        entry["processes"] = state.get("processes")
        entry["observed"] = state.get("observed")
    else:
        entry["url"] = entry["address"] = entry["processes"] = entry["observed"] = None
        missing.append("not in status.json")

    crash = _list_files(machine_dir / "crash", run_dir)
    entry["crash_files"] = crash
    entry["files"] = {
        "results": _rel(results, run_dir) if results.is_file() else None,
        "dashboard": _rel(dashboard, run_dir) if dashboard.is_file() else None,
        "archive": [_rel(Path(a), run_dir) for a in resources["archive"].split(",")] if resources.get("archive") else [],
        "gc_logs": _list_files(gc_dir, run_dir),
        "logs": _list_files(machine_dir / "logs", run_dir),
        "crash": crash,
        "events": _rel(machine_dir / "events.json", run_dir) if (machine_dir / "events.json").is_file() else None,
    }
    if not dashboard.is_file() and samples:
        missing.append("no JMeter dashboard")
    return entry, series


def _read_events(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, f"no events.json (machines/{path.parent.name}/events.json)"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return None, f"events.json unreadable ({error})"
    return (data, None) if isinstance(data, dict) else (None, "events.json is not a JSON object")


COMPARED = (
    # key, label, unit, getter, better
    ("throughput_rps", "Throughput (steady state)", "req/s", lambda m: (m.get("load") or {}).get("throughput_rps"), "higher"),
    ("samples_all", "Requests served (whole run)", "", lambda m: ((m.get("load") or {}).get("all") or {}).get("samples"), "higher"),
    ("error_rate", "Error rate (steady state)", "%", lambda m: (m.get("load") or {}).get("error_rate"), "lower"),
    ("error_rate_all", "Error rate (whole run)", "%", lambda m: ((m.get("load") or {}).get("all") or {}).get("error_rate"), "lower"),
    ("p50_ms", "Latency p50", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p50"), "lower"),
    ("p90_ms", "Latency p90", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p90"), "lower"),
    ("p95_ms", "Latency p95", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p95"), "lower"),
    ("p99_ms", "Latency p99", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("p99"), "lower"),
    ("max_ms", "Latency max", "ms", lambda m: ((m.get("load") or {}).get("latency_ms") or {}).get("max"), "lower"),
    ("gc_pauses", "GC pauses", "", lambda m: (m.get("gc") or {}).get("pause_count"), "lower"),
    ("gc_total_s", "GC pause time, total", "s", lambda m: (m.get("gc") or {}).get("pause_total_s"), "lower"),
    ("gc_max_ms", "GC pause, longest", "ms", lambda m: (m.get("gc") or {}).get("pause_max_ms"), "lower"),
    ("gc_throughput_pct", "GC throughput (time not in GC)", "%", lambda m: (m.get("gc") or {}).get("throughput_pct"), "higher"),
    ("peak_memory_bytes", "Peak memory", "bytes", lambda m: (m.get("memory") or {}).get("peak_bytes"), "lower"),
    ("cpu_mean_cores", "CPU, mean (machine's processes)", "cores", lambda m: (m.get("cpu") or {}).get("mean_cores"), "lower"),
)


def _comparison(machines: dict) -> list[dict]:
    default, tuned = machines.get("default") or {}, machines.get("tuned") or {}
    rows = []
    for key, label, unit, get, better in COMPARED:
        a, b = get(default), get(tuned)
        row = {"key": key, "label": label, "unit": unit, "default": a, "tuned": b, "ratio": _ratio(b, a),
               "better": better}
        if key == "peak_memory_bytes":
            # Compare like with like: events.json on both, else PCP on both.
            ma, mb = default.get("memory") or {}, tuned.get("memory") or {}
            if ma.get("events_peak_bytes") is not None and mb.get("events_peak_bytes") is not None:
                row.update(default=ma["events_peak_bytes"], tuned=mb["events_peak_bytes"], source=MEMORY_EVENTS_SOURCE)
            elif ma.get("pcp_peak_bytes") is not None and mb.get("pcp_peak_bytes") is not None \
                    and ma.get("pcp_source") == mb.get("pcp_source"):
                row.update(default=ma["pcp_peak_bytes"], tuned=mb["pcp_peak_bytes"], source=ma["pcp_source"])
            else:
                if a is not None and b is not None:
                    row["source"] = "measured differently on each machine: no ratio"
                row["ratio"] = None
                rows.append(row)
                continue
            row["ratio"] = _ratio(row["tuned"], row["default"])
        rows.append(row)
    return rows


def _knobs(knobs: dict | None) -> dict:
    if not knobs:
        return {"differ": [], "same": 0, "available": False}
    default = knobs.get("default") if isinstance(knobs.get("default"), dict) else {}
    tuned = knobs.get("tuned") if isinstance(knobs.get("tuned"), dict) else {}
    differ, same = [], 0
    for variable in sorted(set(default) | set(tuned)):
        a, b = default.get(variable, "(unset)"), tuned.get(variable, "(unset)")
        if json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str):
            same += 1
        else:
            differ.append({"variable": variable, "default": a, "tuned": b})
    return {"differ": differ, "same": same, "available": bool(default or tuned)}


def _observed(status: dict | None, machines: list[str]) -> dict:
    rows: dict[str, dict] = {}
    for machine in machines:
        state = ((status or {}).get("machines") or {}).get(machine) or {}
        for key, value in (state.get("observed") or {}).items():
            rows.setdefault(key, {})[machine] = value
    return rows


# ---------------------------------------------------------------------------------------- sentences

def _pct(value: float | None, digits: int = 1) -> str:
    return "?" if value is None else f"{value * 100:.{digits}f}%"


def _ms(value) -> str:
    return "?" if value is None else f"{value:,.0f} ms"


def _mib(value) -> str:
    return "?" if value is None else f"{value / 1048576:,.0f} MiB"


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def what_happened(summary: dict) -> list[str]:
    """Sentences generated from the figures (each only when its data is there)."""
    sentences: list[str] = []
    run = summary["run"]
    machines = summary["machines"]
    if run.get("interrupted"):
        planned = _number((run.get("profile") or {}).get("duration_s"))
        lasted = run.get("duration_s")
        sentences.append("The run was interrupted" + (f" after {clock(lasted)}" if lasted is not None else "")
                         + (f" (planned: {clock(planned)} of load per machine)." if planned else "."))
    for machine, entry in machines.items():
        if not entry.get("load") and machine in MACHINES:
            sentences.append(f"{machine}: no JMeter results: the machine was not loaded, or JMeter recorded nothing.")
    loaded = {m: e["load"] for m, e in machines.items() if e.get("load")}
    # Throughput and latency, tuned against default.
    d, t = loaded.get("default"), loaded.get("tuned")
    ratio = _ratio(t.get("throughput_rps"), d.get("throughput_rps")) if d and t else None
    if ratio is not None:
        total = _ratio(t["all"]["samples"], d["all"]["samples"])
        sentences.append(
            f"tuned served {_times(ratio)} the requests per second of default in the steady state "
            f"({t['throughput_rps']:,.1f} vs {d['throughput_rps']:,.1f} req/s) at p95 {_ms(t['latency_ms']['p95'])} "
            f"vs {_ms(d['latency_ms']['p95'])}"
            + (f"; {_times(total)} the requests over the whole run ({t['all']['samples']:,} vs "
               f"{d['all']['samples']:,})." if total is not None else "."))
    for machine, load in loaded.items():
        if ratio is None or machine not in ("default", "tuned"):
            steady = (f"{_fmt_rate(load['throughput_rps'])} in the steady state, p95 {_ms(load['latency_ms']['p95'])}"
                      if load["window"]["duration_s"] > 0 else "no steady state (the load ended during the ramp-up)")
            sentences.append(f"{machine} served {load['all']['samples']:,} requests: {steady}.")
        first = load.get("first_error")
        if not first:
            sentences.append(f"{machine}: no errors ({load['all']['samples']:,} requests).")
            continue
        threshold = load["error_threshold"]
        if threshold["crossed_at_s"] is not None:
            start = threshold["crossed_at_s"]
            text = (f"{machine}: error rate passed {ERROR_RATE_THRESHOLD:.0%} at {clock(start)} "
                    f"({_pct(threshold['bucket_error_rate'])} of the {threshold['bucket_samples']:,} requests that "
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
                 f"{load['all']['errors']:,} errors in all ({_pct(load['all']['error_rate'], 2)} of "
                 f"{load['all']['samples']:,} requests){by_kind}.")
        sentences.append(text)
    # GC
    for machine, entry in machines.items():
        gc = entry.get("gc")
        if gc and gc.get("time_in_gc_pct") is not None and gc.get("pause_count"):
            sentences.append(
                f"{machine} spent {gc['time_in_gc_pct']:.1f}% of its time in GC pauses "
                f"({gc.get('collector') or 'collector unknown'}: {gc['pause_count']:,} pauses, "
                f"{gc['pause_total_s']:.2f} s in all, longest {_ms(gc['pause_max_ms'])}"
                + (f", {gc['full_gc_count']} full" if gc.get("full_gc_count") else "") + f"; {gc['scope']}).")
        elif gc and gc.get("scope"):
            sentences.append(f"{machine}: no GC pause in its GC log ({gc['scope']}).")
    # Memory
    for machine, entry in machines.items():
        peak = (entry.get("memory") or {}).get("peak_bytes")
        if peak is not None:
            limit = _number((entry.get("observed") or {}).get("jvm_memory_limit_bytes"))
            sentences.append(f"{machine} peaked at {_mib(peak)} of memory"
                             + (f", {peak / limit:.0%} of its {_mib(limit)} limit" if limit else "")
                             + f" ({entry['memory']['source']}).")
    # Process exits, OOM kills, crash files
    for machine, entry in machines.items():
        events = entry.get("events") or {}
        for exit_ in events.get("process_exits") or []:
            if isinstance(exit_, dict):
                sentences.append(f"{machine}: {exit_.get('process', 'a process')} exited at {clock(exit_.get('at_s'))} "
                                 f"({exit_.get('reason') or 'no reason recorded'}).")
        oom = events.get("oom_kills")
        if isinstance(oom, int) and not isinstance(oom, bool) and oom > 0:
            sentences.append(f"{machine}: the kernel's OOM killer struck {oom} time{'s' if oom != 1 else ''}.")
        if entry.get("crash_files"):
            sentences.append(f"{machine}: crash files: " + ", ".join(Path(f).name for f in entry["crash_files"]) + ".")
    return sentences


def _fmt_rate(value) -> str:
    return "? req/s" if value is None else f"{value:,.1f} req/s"


def load_series(run_dir: Path) -> dict:
    """series.json, computed (with summary.json) if missing."""
    path = Path(run_dir) / "series.json"
    if not path.is_file():
        summarize(run_dir)
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python3 -m lab.summary", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    summary = summarize(args.run_dir)
    for sentence in summary["what_happened"]:
        print(sentence)
    for problem in summary["problems"]:
        print(f"missing: {problem}", file=sys.stderr)
    print(f"written: {args.run_dir / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
