"""A machine's PCP archive, read with PCP's own pmrep and pminfo: host, per-process and service figures."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.numbers import finite as _finite
from lab.numbers import mean as _mean
from lab.numbers import number as _number

PSARGS_STEP_S = 5                       # how often the process list is read to find a machine's processes
PCP_TIMEOUT_S = 300


def pcp_env() -> dict:
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
        done = subprocess.run(command, capture_output=True, text=True, timeout=PCP_TIMEOUT_S, env=pcp_env())
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
    """'hotproc.memory.rss-020192 java' (or proc.…, in archives from before hotproc) -> '020192'."""
    found = re.match(r"^(?:hot)?proc\.[\w.]+-(\d+) ", column)
    return found.group(1) if found else None


def _instance_label(name: str) -> str:
    """'2 name:http-nio-8080' -> 'name:http-nio-8080' (openmetrics instances start with their number)."""
    return re.sub(r"^\d+ ", "", name)


# What a machine's process is, from its command line (the first that matches).
ROLES = (("backend", "mock_service"), ("service", "java"), ("httpd", "httpd"), ("httpd", "apache2"),
         ("httpd", "rotatelogs"), ("pcp", "/pcp/"))


def role_of(args: str) -> str:
    return next((role for role, marker in ROLES if marker in args), "other")


def _summed_by_role(columns: Iterable[tuple[str, list]], own: dict[str, str]) -> dict[str, list[float | None]]:
    """Per role (by each process's command line), its processes' values summed at each time; columns: (instance,
    values) pairs, an instance named "<pid> <command>"."""
    rows: dict[str, list[list]] = {}
    for instance, values in columns:
        rows.setdefault(role_of(own.get(instance.split(" ", 1)[0], instance)), []).append(values)
    return {role: _sum_rows(parts) for role, parts in sorted(rows.items())}


def _cpu_by_role(pcolumns: dict, own: dict[str, str], family: str) -> dict[str, list[float | None]]:
    """The CPU cores of the machine's processes at each time, by role (service, httpd, backend, pcp)."""
    cpu = [pair for metric in (f"{family}.psinfo.utime", f"{family}.psinfo.stime")
           for pair in _columns_of(pcolumns, metric).items()]
    return _summed_by_role(cpu, own)


def _peak_by_role(columns: dict[str, list], own: dict[str, str]) -> dict[str, float | None]:
    """Per role, the peak over time of its processes' summed values (e.g. the service's PSS, all HTTPD's children)."""
    return {role: max(_finite(summed), default=None) for role, summed in _summed_by_role(columns.items(), own).items()}


def _sum_rows(columns: list[list]) -> list[float | None]:
    if not columns:
        return []
    out = []
    for values in zip(*columns):
        numbers = [v for v in values if isinstance(v, float)]
        out.append(sum(numbers) if numbers else None)
    return out


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
    reading = _Reading(archive, names, t0, window, result, pcp)
    _host_figures(reading)
    result["scope"] = ("host (shared by both machines on the local backend)" if backend == "local"
                       else "machine")
    _own_processes(reading, machine, markers)
    _app_metrics(reading)
    return result


@dataclass(frozen=True)
class _Reading:
    """One archive being read: what it holds, the run's start and steady window, and where the figures go
    (result: the summary's; pcp: the series for the charts)."""
    archive: str
    names: set[str]
    t0: float
    window: tuple[float, float] | None
    result: dict
    pcp: dict

    def in_window(self, times: list[float], values: list) -> list[float]:
        if not self.window:
            return _finite(values)
        return _finite([v for t, v in zip(times, values) if self.window[0] <= t <= self.window[1]])

    def csv(self, metrics: list[str], **options: Any) -> tuple[list[float], dict[str, list]]:
        """pmrep_csv on the archive, its problem (if any) kept with the figures'."""
        times, columns, problem = pmrep_csv(self.archive, metrics, **options)
        if problem:
            self.result["problems"].append(problem)
        return times, columns


def _host_figures(reading: _Reading) -> None:
    """The whole machine (on the local backend: the host, which both machines share)."""
    result, pcp, in_window = reading.result, reading.pcp, reading.in_window
    host_metrics: list[str] = [m for m in ("kernel.all.load", "kernel.all.cpu.user", "kernel.all.cpu.sys",
                                           "mem.util.used", "mem.physmem", "hinv.ncpu") if m in reading.names]
    if not host_metrics:
        return
    times, columns = reading.csv(host_metrics)
    if not times:
        return
    pcp["t"] = [round(t - reading.t0, 3) for t in times]
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


def _own_processes(reading: _Reading, machine: str, markers: list[str] | None) -> None:
    """The machine's own processes: their command line holds its folder (…/machines/<name>/). The lab
    records only those (hotproc.*, the pcp role's pcp_hotproc_predicate); archives from before it
    recorded every process (proc.*), on the local backend the whole host's: filtered here alike."""
    result, names = reading.result, reading.names
    family = next((f for f in ("hotproc", "proc") if {f"{f}.psinfo.psargs", f"{f}.psinfo.utime"} <= names), None)
    if not family:
        return
    result["process_metrics"] = family
    _, columns = reading.csv([f"{family}.psinfo.psargs"], step_s=PSARGS_STEP_S, scale=False)
    commands: dict[str, str] = {}
    for name, values in columns.items():
        args = next((v for v in reversed(values) if isinstance(v, str) and v), "")
        if args and name.startswith(f"{family}.psinfo.psargs-"):
            commands[name[len(f"{family}.psinfo.psargs-"):].split(" ", 1)[0]] = args
    own: dict[str, str] = {}
    marker = None
    for marker in list(markers or []) + [f"/machines/{machine}/"]:
        own = {pid: args for pid, args in commands.items() if marker in args}
        if own:
            break
    result["own_processes"] = len(own)
    if own:
        # Every process, filtered here: pmrep's -i drops instances that appear after the archive's start.
        metrics = [f"{family}.{m}" for m in ("psinfo.utime", "psinfo.stime", "memory.rss", "smaps.pss",
                                             "psinfo.threads", "memory.vmswap", "psinfo.maj_flt")
                   if f"{family}.{m}" in names]
        ptimes, every = reading.csv(metrics)
        pcolumns = {name: values for name, values in every.items() if _pid_of(name) in own}
        if ptimes:
            _process_figures(reading, family, own, ptimes, pcolumns)
    result["own_processes_marker"] = marker


def _process_figures(reading: _Reading, family: str, own: dict[str, str], ptimes: list[float],
                     pcolumns: dict[str, list]) -> None:
    """The own processes' CPU, memory (RSS, PSS, swap), page-ins and threads, summed and by role and command."""
    result, pcp = reading.result, reading.pcp

    def in_window(values: list) -> list[float]:
        return reading.in_window(ptimes, values)

    pcp["proc_t"] = [round(t - reading.t0, 3) for t in ptimes]
    cpu_columns = list(_columns_of(pcolumns, f"{family}.psinfo.utime").values()) + \
        list(_columns_of(pcolumns, f"{family}.psinfo.stime").values())
    pcp["proc_cpu_cores"] = _sum_rows(cpu_columns)
    rss = _columns_of(pcolumns, f"{family}.memory.rss")
    pcp["proc_rss_bytes"] = _sum_rows(list(rss.values()))
    pss = _columns_of(pcolumns, f"{family}.smaps.pss")
    if pss:
        pcp["proc_pss_bytes"] = _sum_rows(list(pss.values()))
        result["proc_pss_max_bytes"] = max(_finite(pcp["proc_pss_bytes"]), default=None)
        result["pss_max_bytes_by_role"] = _peak_by_role(pss, own)
    swap = _columns_of(pcolumns, f"{family}.memory.vmswap")
    if swap:
        pcp["proc_swap_bytes"] = _sum_rows(list(swap.values()))
        result["proc_swap_max_bytes"] = max(_finite(pcp["proc_swap_bytes"]), default=None)
        if pss:     # what the processes held, in memory or swapped out: what a memory budget estimates
            result["proc_held_max_bytes"] = max(_finite(_sum_rows([pcp["proc_pss_bytes"],
                                                                   pcp["proc_swap_bytes"]])), default=None)
    faults = _columns_of(pcolumns, f"{family}.psinfo.maj_flt")
    if faults:      # a counter: pmrep gives its rate, page-ins a second
        pcp["proc_major_faults_per_s"] = _sum_rows(list(faults.values()))
        result["proc_major_faults_per_s_mean"] = _mean(in_window(pcp["proc_major_faults_per_s"]))
    threads = _columns_of(pcolumns, f"{family}.psinfo.threads")
    pcp["proc_threads"] = _sum_rows(list(threads.values()))
    result["proc_cpu_cores_mean"] = _mean(in_window(pcp["proc_cpu_cores"]))
    result["proc_cpu_cores_max"] = max(in_window(pcp["proc_cpu_cores"]), default=None)
    result["proc_rss_max_bytes"] = max(_finite(pcp["proc_rss_bytes"]), default=None)
    by_command: dict[str, dict] = {}
    for instance, values in rss.items():
        pid = instance.split(" ", 1)[0]
        command = Path(own.get(pid, instance).split(" ", 1)[0]).name or "?"
        entry = by_command.setdefault(command, {"processes": 0, "rss_max_bytes": 0.0})
        entry["processes"] += 1
        entry["rss_max_bytes"] = max(entry["rss_max_bytes"], max(_finite(values), default=0.0))
    result["own_by_command"] = by_command
    # by role at each time too: what a capacity step's requests cost each (lab/analysis/step_state.py)
    pcp["proc_cpu_cores_by_role"] = _cpu_by_role(pcolumns, own, family)
    result["cpu_cores_mean_by_role"] = {role: _mean(in_window(summed))
                                        for role, summed in pcp["proc_cpu_cores_by_role"].items()}


# The service's Prometheus metrics (openmetrics agent) and HTTPD's mod_status (apache agent).
APP_METRICS = {"tomcat_busy": "openmetrics.app.tomcat_threads_busy_threads",
               "tomcat_current": "openmetrics.app.tomcat_threads_current_threads",
               "tomcat_max": "openmetrics.app.tomcat_threads_config_max_threads",
               "tomcat_connections": "openmetrics.app.tomcat_connections_current_connections",
               # A counter: connections the kernel dropped because a listen queue was full (HTTPD's or Tomcat's).
               "listen_overflows": "network.tcp.listenoverflows",
               "pool_connections": "openmetrics.app.httpcomponents_httpclient_pool_total_connections",
               "pool_pending": "openmetrics.app.httpcomponents_httpclient_pool_total_pending",
               "pool_max": "openmetrics.app.httpcomponents_httpclient_pool_total_max",
               "camel_inflight": "openmetrics.app.camel_exchanges_inflight",
               "jvm_memory_used": "openmetrics.app.jvm_memory_used_bytes",
               "apache_busy": "apache.busy_servers", "apache_idle": "apache.idle_servers",
               "apache_rps": "apache.requests_per_sec"}


def _app_metrics(reading: _Reading) -> None:
    """The service's pools and threads and HTTPD's workers, as logged, with their peaks."""
    result, pcp = reading.result, reading.pcp
    present = {key: metric for key, metric in APP_METRICS.items() if metric in reading.names}
    result["app_metrics"] = sorted(present)
    if not present:
        return
    # As logged: instant() because the openmetrics agent makes a counter of any name with "total"
    # in it (…_pool_total_connections is a gauge), and no interpolation between records.
    derived = {f"lab.{key}": f"instant({metric})" for key, metric in present.items()}
    times, columns = reading.csv(list(derived), scale=False, derived=derived, interpolate=False)
    if not times:
        return
    pcp["app_t"] = [round(t - reading.t0, 3) for t in times]
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
