"""lab.analysis and lab.report on small real inputs made here, in tmp folders.

One session-scoped run folder is built from real tools, as `./start.sh run` lays it out:
- JMeter (lab.load) loads two real mock backends on loopback for 16 s, `default` with 20 % injected
  errors, `tuned` without;
- a private pmcd (linux, proc and openmetrics agents, on loopback) and one pmlogger per machine
  record both "machines" at 1 s; a machine's processes are the ones with `/machines/<name>/` in their
  command line, as on the local backend (the mocks get it through `-X pycache_prefix=…`, the JVMs
  through their GC log path); the tuned archive also has the openmetrics agent reading a Prometheus
  file this test updates every second (busy threads = JMeter's active users), the default one has
  no service metrics, and neither has apache metrics (so the report must say "no data");
- two real JVMs (tests/fixtures/Alloc.java) write GC logs during the steady state: SerialGC with
  -Xlog:gc (default), G1 with -Xlog:gc* rotating every 24 KB (tuned), both with the lab's decorations.
Small JMeter CSVs with known values check the figures exactly. The whole file takes about a minute.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import markupsafe
import pytest
import yaml

from conftest import REPO, Process, free_port, http_get, spawn, wait_for

sys.path.insert(0, str(REPO))
from lab import load, report  # noqa: E402
from lab.analysis import gclog, gcviewer, summary  # noqa: E402
from lab.analysis.pcp import pcp_env, pmrep_csv  # noqa: E402
from lab.names import clock  # noqa: E402

PCP_BIN = Path("/usr/lib/pcp/bin")
PMDAS = Path("/var/lib/pcp/pmdas")
PMNS = Path("/var/lib/pcp/pmns")
ALLOC = REPO / "tests" / "fixtures" / "Alloc.java"
PROFILE = load.LoadProfile(users=4, ramp_s=4, duration_s=16)
ERROR_RATE = 0.2
GC_SECONDS = 4
PAUSE_LINE = re.compile(r"\]\[gc\s*\] GC\(\d+\) Pause .*ms$")


# ------------------------------------------------------------------------------------ the real run

def _write_metrics(path: Path, busy: int) -> None:
    """A Prometheus text file as the service's /actuator/prometheus writes it, replaced atomically."""
    text = (
        "# HELP tomcat_threads_busy_threads  \n# TYPE tomcat_threads_busy_threads gauge\n"
        f'tomcat_threads_busy_threads{{name="ajp-apr-127.0.0.1-8009",}} {busy:.1f}\n'
        'tomcat_threads_busy_threads{name="http-nio-8080",} 0.0\n'
        "# HELP httpcomponents_httpclient_pool_total_connections The number of persistent and leased connections for all routes.\n"
        "# TYPE httpcomponents_httpclient_pool_total_connections gauge\n"
        f'httpcomponents_httpclient_pool_total_connections{{endpoint="http://127.0.0.1:9090/data",httpclient="camel-http",state="available",}} 2.0\n'
        f'httpcomponents_httpclient_pool_total_connections{{endpoint="http://127.0.0.1:9090/data",httpclient="camel-http",state="leased",}} {busy:.1f}\n'
        "# HELP httpcomponents_httpclient_pool_total_pending The number of connection requests being blocked awaiting a free connection for all routes.\n"
        "# TYPE httpcomponents_httpclient_pool_total_pending gauge\n"
        'httpcomponents_httpclient_pool_total_pending{endpoint="http://127.0.0.1:9090/data",httpclient="camel-http",} 0.0\n')
    scratch = path.with_suffix(".tmp")
    scratch.write_text(text)
    scratch.replace(path)


def _start_pcp(pcp: Path, processes: list[Process], metrics_file: Path, machines_dir: Path) -> int:
    """A private pmcd on loopback with the linux, proc and openmetrics agents (as the lab's pcp role),
    whose proc agent reports one by one the processes whose command line holds machines_dir."""
    if not (PMNS / "stdpmid").exists():
        subprocess.run(["./Make.stdpmid"], cwd=PMNS, check=True, capture_output=True)
    for folder in ("run", "log", "var/config/pmda", "openmetrics"):
        (pcp / folder).mkdir(parents=True, exist_ok=True)
    (pcp / "root_openmetrics").write_text("root {\n    openmetrics\t144:*:*\n}\n")
    subprocess.run([str(PCP_BIN / "pmnsmerge"), "-f", str(PMNS / "root_root"), str(PMNS / "root_pmcd"),
                    str(PMNS / "root_linux"), str(PMNS / "root_proc"), str(pcp / "root_openmetrics"), str(pcp / "root")],
                   check=True, capture_output=True)
    (pcp / "openmetrics" / "app.url").write_text(f"file://{metrics_file}\n")
    # hotproc.conf as the pcp role writes it (pcp_hotproc_predicate), found through PCP_PMDAS_DIR
    (pcp / "pmdas" / "proc").mkdir(parents=True)
    for help_file in ("help.dir", "help.pag"):
        (pcp / "pmdas" / "proc" / help_file).symlink_to(PMDAS / "proc" / help_file)
    (pcp / "pmdas" / "proc" / "hotproc.conf").write_text(f"psargs ~ /{re.sub(r'[^A-Za-z0-9_-]', '.', str(machines_dir))}./\n")
    # The openmetrics agent keeps an instance cache under $PCP_VAR_DIR/config/pmda: a private one,
    # so this test never touches the host's (which the lab's machines use).
    (pcp / "pmcd.conf").write_text(
        f"pmcd\t2\tdso\tpmcd_init\t{PMDAS}/pmcd/pmda_pmcd.so\n"
        f"linux\t60\tpipe\tbinary\t{PMDAS}/linux/pmdalinux\n"
        f"proc\t3\tpipe\tbinary\t/usr/bin/env PCP_PMDAS_DIR={pcp / 'pmdas'} {PMDAS}/proc/pmdaproc -d 3 -A\n"
        f"openmetrics\t144\tpipe\tbinary notready\t/usr/bin/env PCP_VAR_DIR={pcp / 'var'} /usr/bin/python3 "
        f"{PMDAS}/openmetrics/pmdaopenmetrics.python -c {pcp / 'openmetrics'}\n")
    port = free_port()
    env = dict(os.environ, PCP_RUN_DIR=str(pcp / "run"), PCP_LOG_DIR=str(pcp / "log"))
    spawn(processes, "pmcd", [str(PCP_BIN / "pmcd"), "-f", "-A", "-i", "127.0.0.1", "-p", str(port),
                              "-s", str(pcp / "run" / "pmcd.socket"), "-c", str(pcp / "pmcd.conf"),
                              "-n", str(pcp / "root"), "-l", str(pcp / "log" / "pmcd.log")], pcp, env=env,
          cwd=pcp / "log")           # the agents write their logs (linux.log …) where pmcd runs

    def answers() -> bool:
        done = subprocess.run(["pminfo", "-h", f"127.0.0.1:{port}", "-f", "openmetrics.app.tomcat_threads_busy_threads"],
                              capture_output=True, text=True, env=pcp_env())
        return done.returncode == 0 and "value" in done.stdout
    wait_for(answers, 30, "pmcd answering with the openmetrics agent")
    # The JVMs live 4 s: the hot set is re-evaluated every second here, not every 10 s as in the lab.
    stored = subprocess.run(["pmstore", "-h", f"unix:{pcp / 'run' / 'pmcd.socket'}", "hotproc.control.refresh", "1"],
                            capture_output=True, text=True, env=pcp_env(), timeout=30)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    return port


def _lab_logger_metrics() -> list[str]:
    defaults = yaml.safe_load((REPO / "ansible" / "roles" / "pcp" / "defaults" / "main.yml").read_text())
    return [m for m in defaults["pcp_logger_metrics"] if m not in ("apache", "openmetrics")]   # no HTTPD, no service


def _start_pmlogger(pcp: Path, processes: list[Process], port: int, archive: Path, metrics: list[str]) -> Process:
    archive.parent.mkdir(parents=True, exist_ok=True)
    config = pcp / f"{archive.name}.config"
    config.write_text("log mandatory on every 1sec {\n" + "".join(f"    {m}\n" for m in metrics) + "}\n")
    env = dict(os.environ, PCP_RUN_DIR=str(pcp / "run"), PCP_LOG_DIR=str(pcp / "log"))
    return spawn(processes, f"pmlogger-{archive.name}",
                 ["pmlogger", "-h", f"127.0.0.1:{port}", "-c", str(config), "-t", "1sec", "-T", "120sec",
                  "-l", str(pcp / "log" / f"pmlogger-{archive.name}.log"), str(archive)], pcp, env=env)


def _start_mock(processes: list[Process], machine_dir: Path, error_rate: float) -> int:
    port = free_port()
    command = [sys.executable, "-X", f"pycache_prefix={machine_dir / 'pycache'}", "-m", "mock_service",
               "--port", str(port), "--latency", "fixed:5", "--error-rate", str(error_rate)]
    process = spawn(processes, "mock-service", command, machine_dir / "logs", cwd=REPO / "mock-service")
    process.wait_until(lambda: _health(port), 30, "healthy mock")
    return port


def _health(port: int) -> bool:
    try:
        return http_get(f"http://127.0.0.1:{port}/health", timeout=2)[0] == 200
    except OSError:
        return False


def _gc_jvm(machine_dir: Path, classes: Path) -> list[str]:
    gc_dir = machine_dir / "gc"
    gc_dir.mkdir(parents=True, exist_ok=True)
    if machine_dir.name == "default":   # the default machine: ergonomics on 512 MB is Serial, -Xlog:gc
        options = ["-XX:+UseSerialGC", f"-Xlog:gc:file={gc_dir / 'gc.log'}:time,uptime,level,tags"]
    else:                               # the tuned one: G1, -Xlog:gc*, rotating files
        options = ["-XX:+UseG1GC", f"-Xlog:gc*:file={gc_dir / 'gc.log'}:time,uptime,level,tags:filecount=5,filesize=24k"]
    return ["java", "-Xmx64m", *options, "-cp", str(classes), "Alloc", str(GC_SECONDS)]


def build_real_run(base: Path, processes: list[Process]) -> Path:
    run_dir = base / "runs" / "test-run"
    machines = {m: run_dir / "machines" / m for m in load.MACHINES}
    for machine_dir in machines.values():
        (machine_dir / "logs").mkdir(parents=True)
    pcp_home = base / "pcp"
    metrics_file = pcp_home / "metrics.prom"
    pcp_home.mkdir()
    _write_metrics(metrics_file, 0)
    port = _start_pcp(pcp_home, processes, metrics_file, run_dir / "machines")
    metrics = _lab_logger_metrics()
    loggers = [_start_pmlogger(pcp_home, processes, port, machines["default"] / "pcp" / "default", metrics),
               _start_pmlogger(pcp_home, processes, port, machines["tuned"] / "pcp" / "tuned", metrics + ["openmetrics"])]
    ports = {"default": _start_mock(processes, machines["default"], ERROR_RATE),
             "tuned": _start_mock(processes, machines["tuned"], 0.0)}

    classes = base / "classes"              # compiled now, so the JVMs start at once during the load
    subprocess.run(["javac", "-d", str(classes), str(ALLOC)], check=True, capture_output=True, timeout=120)
    jvms: list[subprocess.Popen] = []

    def on_progress(progress: dict) -> None:
        tuned = progress["machines"]["tuned"]
        _write_metrics(metrics_file, tuned["active_threads"] if tuned["state"] == "running" else 0)
        # The JVMs run inside the steady state, so every pause they log is in its window.
        if not jvms and tuned["samples"] and tuned["elapsed_s"] >= PROFILE.ramp_s + 1.5:
            for machine_dir in machines.values():
                with (machine_dir / "logs" / "camel-app.out").open("w") as out:
                    jvms.append(subprocess.Popen(_gc_jvm(machine_dir, classes), stdout=out, stderr=subprocess.STDOUT))

    result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()}, PROFILE, run_dir / "jmeter",
                      on_progress=on_progress, path="/data", progress_interval_s=1)
    for jvm in jvms:
        assert jvm.wait(timeout=60) == 0
    assert len(jvms) == 2, "the JVMs never started: the load had no steady state?"
    _write_metrics(metrics_file, 0)
    time.sleep(1.5)
    for logger in loggers:
        logger.popen.send_signal(signal.SIGTERM)
        logger.popen.wait(timeout=20)
    for process in reversed(processes):
        process.stop()
    assert not result.interrupted and result.problems == [], result.problems

    note = "local backend (test): both machines share this host's kernel and cores"
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": "test-run", "backend": "local", "backend_note": note, "schedule": result.schedule,
        "profile": dataclasses.asdict(PROFILE), "started_at": result.started_at, "ended_at": result.ended_at,
        "interrupted": result.interrupted,
        # where the machines' processes live (their command lines name it): this folder, here
        "machine_homes": {m: str(d) for m, d in machines.items()},
        "host": {"cpus": os.cpu_count(), "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                 "kernel": platform.release(), "os": platform.platform()},
        "versions": {"jmeter": "5.6.3", "python": platform.python_version()}}, indent=2))
    observed = {
        "default": {"httpd_mpm": "prefork", "proxy_protocol": "http", "tomcat_ajp_protocol": None,
                    "tomcat_native": None, "gc": "Serial", "heap_max_bytes": 67108864,
                    "jvm_memory_limit_bytes": 536870912, "async_logging": False},
        "tuned": {"httpd_mpm": "worker", "proxy_protocol": "ajp", "tomcat_ajp_protocol": "AjpAprProtocol",
                  "tomcat_native": "1.3.9", "gc": "G1", "heap_max_bytes": 67108864,
                  "jvm_memory_limit_bytes": 536870912, "async_logging": True}}
    (run_dir / "status.json").write_text(json.dumps({"backend": "local", "note": note, "machines": {
        m: {"url": f"http://127.0.0.1:{p}/data", "address": "127.0.0.1",
            "processes": {"mock-service": "RUNNING", "camel-app": "RUNNING"}, "observed": observed[m]}
        for m, p in ports.items()}}, indent=2))
    (run_dir / "knobs.json").write_text(json.dumps(
        {m: yaml.safe_load((REPO / "ansible" / "host_vars" / f"{m}.yml").read_text()) for m in load.MACHINES}, indent=2))
    (machines["default"] / "events.json").write_text(json.dumps({
        "process_exits": [{"process": "camel-app", "at": result.started_at + 12.5, "reason": "terminated by SIGKILL"}],
        "oom_kills": 1, "peak_memory_bytes": None}))
    (machines["tuned"] / "events.json").write_text(json.dumps(
        {"process_exits": [], "oom_kills": 0, "peak_memory_bytes": 123456789}))
    (machines["default"] / "crash").mkdir()
    (machines["default"] / "crash" / "hs_err_pid4242.log").write_text("# A fatal error has been detected\n")
    return run_dir


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> Path:
    load.prepare()
    processes: list[Process] = []
    try:
        return build_real_run(tmp_path_factory.mktemp("real"), processes)
    finally:
        for process in reversed(processes):
            process.stop()


@pytest.fixture(scope="session")
def real_summary(real_run: Path) -> dict:
    return summary.summarize(real_run)


@pytest.fixture(scope="session")
def real_report(real_run: Path, real_summary: dict) -> Path:
    return report.render(real_run)


# ------------------------------------------------------------------------------------- helpers

def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


def pause_lines(gc_dir: Path) -> list[str]:
    lines = []
    for path in sorted(gc_dir.glob("gc.log*")):
        lines += [line.rstrip("\n") for line in path.open() if PAUSE_LINE.search(line.rstrip("\n"))]
    return lines


def pause_start(line: str) -> float:
    """Wall clock of a pause's start from its line: [time] minus the duration."""
    stamp = re.match(r"\[([^\]]+)\]", line).group(1)
    from datetime import datetime
    end = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    return end - float(re.search(r"(\d+(?:\.\d+)?)ms$", line).group(1)) / 1000.0


def jmeter_percentile(values: list[int], p: float) -> float:
    """Apache Commons Math's Percentile (legacy estimate), as JMeter's report generator uses it: rank
    p(n+1)/100 (1-based), interpolated between its neighbours, clamped to the ends."""
    ordered = sorted(values)
    rank = p * (len(ordered) + 1) / 100
    if rank < 1:
        return ordered[0]
    if rank >= len(ordered):
        return ordered[-1]
    below = ordered[math.floor(rank) - 1]
    return below + (rank - math.floor(rank)) * (ordered[math.floor(rank)] - below)


JMETER_HEADER = list(load.CSV_COLUMNS)


def write_results(path: Path, rows: list[tuple[int, int, str, str, bool, int]]) -> None:
    """rows: (timeStamp ms, elapsed ms, responseCode, responseMessage, success, grpThreads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(JMETER_HEADER)
        for stamp, elapsed, code, message, ok, threads in rows:
            writer.writerow([stamp, elapsed, path.parent.name, code, message, f"{path.parent.name} 1-1", "text",
                             "true" if ok else "false", "" if ok else f"failed: {message}", 100, 50, threads, threads,
                             "http://127.0.0.1/x", elapsed, 0, 1])


def external_references(html: str) -> list[str]:
    """src/href/url() pointing at another host (the report must work offline)."""
    found = re.findall(r"""(?:src|href)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""", html, re.I)
    found += re.findall(r"""url\(\s*["']?((?:https?:)?//[^"')]+)""", html, re.I)
    found += re.findall(r"""@import\s+["']?((?:https?:)?//[^"';]+)""", html, re.I)
    return found


# ------------------------------------------------------------------------------- summary: real run

def test_load_figures_come_from_the_csvs(real_run: Path, real_summary: dict) -> None:
    t0 = real_summary["run"]["t0"]
    for machine in load.MACHINES:
        rows = read_rows(real_run / "jmeter" / machine / "results.csv")
        figures = real_summary["machines"][machine]["load"]
        assert figures["all"]["samples"] == len(rows) > 100
        assert figures["all"]["errors"] == sum(1 for r in rows if r["success"] != "true")
        # steady state: samples that started after the first one + the ramp-up
        first = min(int(r["timeStamp"]) for r in rows)
        last_end = max(int(r["timeStamp"]) + int(r["elapsed"]) for r in rows)
        steady = [r for r in rows if int(r["timeStamp"]) >= first + PROFILE.ramp_s * 1000]
        window = figures["window"]
        assert window["start_at"] == pytest.approx((first + PROFILE.ramp_s * 1000) / 1000, abs=1e-3)
        assert window["end_at"] == pytest.approx(last_end / 1000, abs=1e-3)
        assert window["start_s"] == pytest.approx(window["start_at"] - t0, abs=1e-3)
        assert figures["samples"] == len(steady)
        assert figures["throughput_rps"] == pytest.approx(len(steady) / ((last_end - first) / 1000 - PROFILE.ramp_s),
                                                          rel=1e-3)
        elapsed = [int(r["elapsed"]) for r in steady]
        for p in (50, 90, 95, 99):
            assert figures["latency_ms"][f"p{p}"] == pytest.approx(jmeter_percentile(elapsed, p), abs=0.001)
        assert figures["latency_ms"]["max"] == max(elapsed)
        assert figures["latency_ms"]["p50"] >= 5                      # the mock waits 5 ms
        assert figures["max_active_users"] == PROFILE.users
    default = real_summary["machines"]["default"]["load"]
    tuned = real_summary["machines"]["tuned"]["load"]
    assert default["all"]["error_rate"] == pytest.approx(ERROR_RATE, abs=0.06)
    assert default["first_error"]["response_code"] == "500"
    assert 0 <= default["first_error_s"] < PROFILE.duration_s + 10
    assert default["error_threshold"]["crossed_at_s"] is not None
    assert tuned["all"]["errors"] == 0 and tuned["first_error"] is None
    assert tuned["error_threshold"]["crossed_at_s"] is None


def test_gc_figures_match_the_logs(real_run: Path, real_summary: dict) -> None:
    for machine, collector in (("default", "Serial"), ("tuned", "G1")):
        gc = real_summary["machines"][machine]["gc"]
        gc_dir = real_run / "machines" / machine / "gc"
        lines = pause_lines(gc_dir)
        assert lines, f"{machine}: the JVM logged no pause"
        assert gc["collector"] == collector
        assert gc["parser"] == gcviewer.NAME, gc["problems"]
        # GCViewer's pauses, file by file, are the log's pause lines
        assert sum(f["pauses"] for f in gc["files"]) == len(lines)
        assert all(f["pauses"] == f["regex_pauses"] for f in gc["files"])
        # over the steady window: the pauses whose start lies in it
        window = real_summary["machines"][machine]["load"]["window"]
        inside = [line for line in lines if window["start_at"] <= pause_start(line) < window["end_at"]]
        assert gc["scope"] == "load window"
        assert gc["pause_count"] == len(inside) > 5
        durations = [float(re.search(r"(\d+(?:\.\d+)?)ms$", line).group(1)) for line in inside]
        assert gc["pause_total_s"] == pytest.approx(sum(durations) / 1000, abs=1e-3)
        assert gc["pause_max_ms"] == pytest.approx(max(durations), abs=0.01)
        assert gc["throughput_pct"] == pytest.approx(100 * (1 - sum(durations) / 1000 / window["duration_s"]), abs=0.01)
        assert gc["full_gc_count"] == sum(1 for line in inside if "Pause Full" in line) >= 1
        assert any("Pause Full (System.gc())" in line for line in inside)              # Alloc's last act
    assert len(list((real_run / "machines" / "tuned" / "gc").glob("gc.log*"))) > 1          # rotated


def test_gcviewers_output_for_a_logs_bytes_is_kept_and_a_changed_log_is_read_again(real_run, tmp_path, monkeypatch):
    # Every summary of a lab reads its machines' earlier JVMs' logs again: GCViewer runs once for each file's bytes.
    monkeypatch.setattr(gcviewer, "CACHE_DIR", tmp_path / "kept")
    launched: list[str] = []
    run = gcviewer.run
    monkeypatch.setattr(gcviewer, "run", lambda java, jar, log, out, kind: launched.append(log.name) or run(
        java, jar, log, out, kind))
    gc_dir = tmp_path / "gc"
    shutil.copytree(real_run / "machines" / "tuned" / "gc", gc_dir)
    (tmp_path / "kept").mkdir()
    stale, fresh = tmp_path / "kept" / "stale.csv", tmp_path / "kept" / "fresh.csv"      # not read for 31 days, and 29
    for path, days in ((stale, 31), (fresh, 29)):
        path.write_text("x")
        os.utime(path, (time.time() - days * 86400,) * 2)
    first = gclog.analyze(gc_dir)
    assert not stale.exists() and fresh.exists()
    files = sorted(path.name for path in gc_dir.glob("gc.log*"))
    assert first["parser"] == gcviewer.NAME and sorted(launched) == sorted(files * 2), first["problems"]
    launched.clear()
    assert gclog.analyze(gc_dir) == first and launched == []           # the same figures, no JVM started
    # a log whose bytes changed (the live JVM's, collected again later) is GCViewer's to read again, alone
    current = gc_dir / "gc.log"
    current.write_bytes(current.read_bytes().rsplit(b"\n", 2)[0] + b"\n")
    again = gclog.analyze(gc_dir)
    assert launched == ["gc.log", "gc.log"] and again["parser"] == gcviewer.NAME
    assert sum(f["pauses"] for f in again["files"]) <= sum(f["pauses"] for f in first["files"])


def test_gc_regex_agrees_with_gcviewer(real_run: Path, real_summary: dict) -> None:
    for machine in load.MACHINES:
        window = real_summary["machines"][machine]["load"]["window"]
        regex = gclog.analyze(real_run / "machines" / machine / "gc", (window["start_at"], window["end_at"]),
                              use_gcviewer=False)
        assert regex["parser"] == "unified-log regex"
        viewer = real_summary["machines"][machine]["gc"]
        # Else the summary fell back to the same regex, and this would compare the regex with itself.
        assert viewer["parser"] == gcviewer.NAME, viewer["problems"]
        assert regex["pause_count"] == viewer["pause_count"]
        assert regex["pause_total_s"] == pytest.approx(viewer["pause_total_s"], abs=1e-3)


def test_pcp_figures(real_run: Path, real_summary: dict) -> None:
    series = json.loads((real_run / "series.json").read_text())
    for machine in load.MACHINES:
        resources = real_summary["machines"][machine]["resources"]
        assert resources["problems"] == []
        assert resources["archive"].endswith(f"machines/{machine}/pcp/{machine}")
        assert resources["own_processes"] >= 2                    # the mock and the JVM
        assert resources["proc_cpu_cores_mean"] > 0
        assert resources["proc_rss_max_bytes"] > 10 * 1024 * 1024
        # PSS splits shared pages among their sharers: never more than RSS, and still the JVM's megabytes
        assert 10 * 1024 * 1024 < resources["proc_pss_max_bytes"] <= resources["proc_rss_max_bytes"]
        commands = set(resources["own_by_command"])             # the mock (python), the JVM, pmlogger
        assert "java" in commands and any(c.startswith("python") for c in commands), commands
        # one by one, the archive holds the machines' processes only: not pytest's, not JMeter's
        assert resources["process_metrics"] == "hotproc"
        listing = subprocess.run(["pminfo", "-a", resources["archive"]], capture_output=True, text=True,
                                 env=pcp_env(), check=True).stdout.split()
        assert "hotproc.psinfo.psargs" in listing and "proc.psinfo.psargs" not in listing
        _, columns, problem = pmrep_csv(resources["archive"], ["hotproc.psinfo.psargs"], scale=False)
        recorded = {v for values in columns.values() for v in values if isinstance(v, str) and v}
        assert problem is None and recorded
        assert all(str(real_run / "machines") + "/" in args for args in recorded), recorded
        assert resources["load1_max"] is not None and resources["mem_used_max_bytes"] > 0
        pcp = series["machines"][machine]["pcp"]
        assert len(pcp["t"]) >= PROFILE.duration_s and len(pcp["proc_t"]) == len(pcp["proc_rss_bytes"]) == len(pcp["proc_pss_bytes"])
    assert "apache_busy" not in real_summary["machines"]["tuned"]["resources"]["app_metrics"]
    # default ran no openmetrics or apache agent: of the application's metrics only the kernel's accept-queue
    # overflows (network.tcp, which every machine's logger records)
    assert real_summary["machines"]["default"]["resources"]["app_metrics"] == ["listen_overflows"]
    tuned = series["machines"]["tuned"]["pcp"]
    assert set(tuned["tomcat_busy"]) == {"name:ajp-apr-127.0.0.1-8009", "name:http-nio-8080"}
    assert max(v for v in tuned["tomcat_busy"]["name:ajp-apr-127.0.0.1-8009"] if v is not None) == PROFILE.users
    assert real_summary["machines"]["tuned"]["resources"]["pool_leased_max"] == PROFILE.users
    # memory: events.json when it has the peak, else the machine's processes in PCP
    assert real_summary["machines"]["tuned"]["memory"]["peak_bytes"] == 123456789
    default_memory = real_summary["machines"]["default"]["memory"]
    assert default_memory["peak_bytes"] == real_summary["machines"]["default"]["resources"]["proc_pss_max_bytes"]
    assert "proc.smaps.pss" in default_memory["source"]


def test_comparison_ratios_and_sentences(real_summary: dict) -> None:
    rows = {row["key"]: row for row in real_summary["comparison"]}
    machines = real_summary["machines"]
    assert rows["throughput_rps"]["default"] == machines["default"]["load"]["throughput_rps"]
    for key in ("gc_pauses", "gc_total_s", "gc_max_ms", "gc_throughput_pct", "peak_memory_bytes", "samples_all"):
        row = rows[key]
        assert row["ratio"] == pytest.approx(row["tuned"] / row["default"], rel=1e-3), key
    # 16 s of load cannot settle: the steady figures are there, their ratios are not, and the verdict says why
    for key in ("throughput_rps", "p95_ms", "error_rate", "connect_p95_ms", "first_byte_p95_ms"):
        assert rows[key]["default"] is not None and rows[key]["ratio"] is None, key
        assert rows[key]["note"] == "no ratio: default and tuned did not reach a steady state"
    assert real_summary["verdict"]["verdict"] == "not settled" and not real_summary["verdict"]["valid"]
    assert rows["error_rate"]["tuned"] == 0
    sentences = real_summary["what_happened"]
    text = "\n".join(sentences)
    crossing = machines["default"]["load"]["error_threshold"]["crossed_at_s"]
    assert f"default: error rate passed 1% at {clock(crossing)}" in text
    assert "first error at" in text and "500" in text
    assert "tuned: error rate passed" not in text and "tuned: no errors" in text
    assert not re.search(r"tuned served [\d.]+x", text)
    assert re.search(r"tuned served [\d,]+ requests: no steady state \(only \d+ s of load after the ramp-up", text)
    for machine in load.MACHINES:
        gc = machines[machine]["gc"]
        assert f"{machine} spent {gc['time_in_gc_pct']:.1f}% of its time in GC pauses" in text
    assert "default: camel-app exited at 0:12 (terminated by SIGKILL)" in text
    assert "default: the kernel's OOM killer struck 1 time." in text
    assert "default: crash files: hs_err_pid4242.log" in text
    assert not any("OOM" in s for s in sentences if s.startswith("tuned"))
    # the knobs that differ, from knobs.json
    differ = {row["variable"] for row in real_summary["knobs"]["differ"]}
    assert {"httpd_mpm", "camel_app_java_options", "httpd_proxy_protocol"} <= differ


# ------------------------------------------------------------------------------- report: real run

SECTIONS = ("header", "comparison", "knobs", "observed", "what-happened", "charts", "links")


def test_report_is_self_contained_with_every_section(real_run: Path, real_report: Path) -> None:
    assert real_report == real_run / "report" / "index.html"
    html = real_report.read_text()
    assert external_references(html) == []
    assert "<script" not in html.lower()
    for section in SECTIONS:
        assert f'id="{section}"' in html, section
    images = re.findall(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) >= 8
    assert all(len(image) > 2000 for image in images)
    # the header: run, backend and its label, profile, interrupted or not
    assert "test-run" in html and "local backend" in html and "shared" in html
    assert "not interrupted" in html
    # data missing in these archives says so: no apache agent at all, no service metrics on default
    assert re.search(r'id="chart-apache".*?no data', html, re.S)
    assert re.search(r'id="chart-tomcat".*?no data for default', html, re.S)
    # every generated sentence is in the report
    summary_json = json.loads((real_run / "summary.json").read_text())
    for sentence in summary_json["what_happened"]:
        assert markupsafe.escape(sentence) in html     # Jinja2's escaping: ' as &#39;, " as &#34;


def test_report_links(real_run: Path, real_report: Path) -> None:
    html = real_report.read_text()
    links = re.findall(r'href="([^"#]+)"', html)
    assert "../jmeter/default/dashboard/index.html" in links and "../jmeter/tuned/dashboard/index.html" in links
    for link in links:
        assert not link.startswith("/") and "://" not in link
        assert (real_report.parent / link).resolve().exists(), link
    assert "pmchart -a machines/tuned/pcp/tuned" in html
    assert "pmrep -a machines/default/pcp/default -t 1s kernel.all.load" in html
    assert "pmdiff" in html


def test_report_in_chromium(real_report: Path) -> None:
    # tools/install-deps installs Chromium: without it this fails rather than skips.
    assert report.chromium(), "Chromium not installed (Debian: apt-get install chromium)"
    png = real_report.parent / "report.png"
    shot = report.screenshot(real_report, png)
    assert shot.png == png and png.stat().st_size > 50_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.console_errors == [], shot.console_errors


# ------------------------------------------------------------------------ degraded run folders

def test_one_machine_missing_and_interrupted(real_run: Path, real_summary: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "broken"
    shutil.copytree(real_run, run_dir, ignore=shutil.ignore_patterns("report", "summary.json", "series.json"))
    shutil.rmtree(run_dir / "jmeter" / "tuned")
    shutil.rmtree(run_dir / "machines" / "tuned")
    run = json.loads((run_dir / "run.json").read_text())
    run["interrupted"] = True
    (run_dir / "run.json").write_text(json.dumps(run))
    figures = summary.summarize(run_dir)
    tuned = figures["machines"]["tuned"]
    assert tuned["load"] is None and tuned["gc"] is None
    assert any("no JMeter results" in m for m in tuned["missing"])
    assert any("no PCP archive" in m for m in tuned["missing"])
    assert figures["machines"]["default"]["load"]["all"]["samples"] == real_summary["machines"]["default"]["load"]["all"]["samples"]
    assert all(row["ratio"] is None for row in figures["comparison"])
    assert figures["what_happened"][0].startswith("The run was interrupted")
    html = report.render(run_dir).read_text()
    assert "interrupted" in html and "tuned: no JMeter results" in html
    assert re.search(r'id="chart-throughput".*?no data for tuned', html, re.S)
    assert external_references(html) == []


def test_knobs_given_by_up_are_said_with_the_knobs_that_differ(real_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "given"
    shutil.copytree(real_run, run_dir, ignore=shutil.ignore_patterns("report", "summary.json", "series.json"))
    run = json.loads((run_dir / "run.json").read_text())
    run["given_knobs"] = {"tuned": {"machine": "tuned", "source": "/lab/runs/20261128-161952/best.yml",
                                    "sha256": "0123456789abcdef" * 4}}
    (run_dir / "run.json").write_text(json.dumps(run))
    # where each machine lives differs by its name only: wiring, said apart from the tuning; a path that differs
    # otherwise is a knob
    knobs = json.loads((run_dir / "knobs.json").read_text())
    for machine in load.MACHINES:
        knobs[machine].update(pcp_home=f"/var/lib/lab/machines/{machine}/pcp", camel_app_node_name=machine,
                              camel_app_native_library_dir=f"/opt/{'tcnative' if machine == 'tuned' else 'none'}")
    (run_dir / "knobs.json").write_text(json.dumps(knobs))
    html = report.render(run_dir).read_text()          # summary.json made on the way
    written = json.loads((run_dir / "summary.json").read_text())
    assert written["run"]["given_knobs"] == run["given_knobs"]
    assert written["knobs"]["wiring"] == ["camel_app_node_name", "pcp_home"], written["knobs"]
    assert "camel_app_native_library_dir" in {row["variable"] for row in written["knobs"]["differ"]}
    section = html[html.index('<section id="knobs">'):html.index('<section id="observed">')]
    assert "Not tuning, so not above: 2 variables differ only by the machine's own name" in section
    assert "<td><code>pcp_home</code></td>" not in section and "<td><code>httpd_mpm</code></td>" in section
    assert re.search(r"The .*tuned.* machine's knobs: its host_vars, then <code>/lab/runs/20261128-161952/best.yml"
                     r"</code> \(sha256 0123456789ab\), given by <code>./start.sh up --knobs</code>", section), section


def test_empty_run_folder_still_renders(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "nothing"
    run_dir.mkdir(parents=True)
    figures = summary.summarize(run_dir)
    assert {"run: run.json missing", "status: status.json missing", "knobs: knobs.json missing"} <= set(figures["problems"])
    assert figures["machines"]["default"]["load"] is None
    html = report.render(run_dir).read_text()
    for section in SECTIONS:
        assert f'id="{section}"' in html
    assert html.count("no data") >= 8
    assert "<img" not in html


def test_broken_inputs_do_not_crash(tmp_path: Path) -> None:
    run_dir = tmp_path / "broken"
    (run_dir / "jmeter" / "default").mkdir(parents=True)
    (run_dir / "jmeter" / "default" / "results.csv").write_text("not,a,jmeter\nfile,at,all\n")
    (run_dir / "machines" / "tuned" / "gc").mkdir(parents=True)
    (run_dir / "machines" / "tuned" / "gc" / "gc.log").write_text("garbage\n")
    (run_dir / "machines" / "tuned" / "pcp").mkdir(parents=True)
    (run_dir / "machines" / "tuned" / "pcp" / "tuned.index").write_text("not an archive")
    (run_dir / "machines" / "tuned" / "events.json").write_text("{not json")
    (run_dir / "run.json").write_text("[]")
    figures = summary.summarize(run_dir)
    assert any("results.csv unreadable" in p for p in figures["problems"])
    assert figures["machines"]["tuned"]["gc"]["pause_count"] == 0
    assert any("unreadable" in p for p in figures["machines"]["tuned"]["resources"]["problems"])
    assert report.render(run_dir).is_file()


# --------------------------------------------------------------------------- known values, exact

def test_known_csv_exact_figures(tmp_path: Path) -> None:
    """default: 100 samples, one every 100 ms from t0 + 1 s, elapsed 1..100 ms; every 10th of the
    last 50 fails with 502. tuned: 40 samples, elapsed 10 ms, no error. Ramp-up 2 s."""
    run_dir = tmp_path / "runs" / "known"
    t0 = 1_700_000_000.0
    base = int(t0 * 1000) + 1000
    default_rows = []
    for i in range(100):
        failed = i >= 50 and i % 10 == 9
        default_rows.append((base + 100 * i, i + 1, "502" if failed else "200", "Proxy Error" if failed else "OK",
                             not failed, min(1 + i // 10, 5)))
    write_results(run_dir / "jmeter" / "default" / "results.csv", default_rows)
    write_results(run_dir / "jmeter" / "tuned" / "results.csv",
                  [(base + 250 * i, 10, "200", "OK", True, 5) for i in range(40)])
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": "known", "backend": "vagrant", "schedule": "parallel", "interrupted": False,
        "profile": {"users": 5, "ramp_s": 2, "duration_s": 11}, "started_at": t0, "ended_at": t0 + 12}))
    figures = summary.summarize(run_dir)
    default = figures["machines"]["default"]["load"]
    # steady: started at or after base + 2000 ms: samples 20..99, elapsed 21..100 ms
    steady = list(range(21, 101))
    assert default["samples"] == 80
    assert default["window"]["start_s"] == 3.0
    assert default["window"]["end_s"] == pytest.approx(1 + 9.9 + 0.1)       # last start 10.9 s + 100 ms
    assert default["window"]["duration_s"] == pytest.approx(8.0)
    assert default["throughput_rps"] == pytest.approx(80 / 8.0)
    # JMeter's estimate over 21..100 (n = 80): rank p(n+1)/100 = 40.5, 72.9, 76.95, 80.19 (past the end: the max)
    assert default["latency_ms"] == {"p50": 60.5, "p90": 92.9, "p95": 96.95, "p99": 100, "max": 100,
                                     "mean": pytest.approx(sum(steady) / 80)}
    assert [default["latency_ms"][f"p{p}"] for p in (50, 90, 95, 99)] == \
        pytest.approx([jmeter_percentile(steady, p) for p in (50, 90, 95, 99)], abs=0.001)
    assert default["errors"] == 5 and default["error_rate"] == pytest.approx(5 / 80)
    assert default["all"]["samples"] == 100 and default["all"]["latency_ms"]["p50"] == 50.5     # rank 50.5 of 1..100
    # first error: sample 59, started at 1 + 5.9 s, 60 ms long: seen at 5.96 s
    assert default["first_error_s"] == pytest.approx(6.96)
    assert default["first_error"]["response_code"] == "502"
    assert default["first_error"]["response_message"] == "Proxy Error"
    assert default["first_error"]["active_users"] == 5
    assert default["errors_by_type"] == [{"error": "502 Proxy Error", "count": 5}]
    # 10-s buckets by end (1.001 s + 101 ms * i): [0, 10) has samples 0..89 (errors 59, 69, 79, 89): 4/90 > 1 %
    assert default["error_threshold"]["crossed_at_s"] == 0
    assert default["error_threshold"]["bucket_samples"] == 90
    assert default["error_threshold"]["bucket_error_rate"] == pytest.approx(4 / 90, abs=1e-6)
    tuned = figures["machines"]["tuned"]["load"]
    assert tuned["samples"] == 32 and tuned["errors"] == 0 and tuned["latency_ms"]["p99"] == 10
    rows = {row["key"]: row for row in figures["comparison"]}
    # 11 s of load cannot settle: the steady figures stand, without a ratio between them
    assert rows["p95_ms"]["default"] == 96.95 and rows["p95_ms"]["tuned"] == 10 and rows["p95_ms"]["ratio"] is None
    assert rows["throughput_rps"]["ratio"] is None and rows["error_rate"]["ratio"] is None
    assert rows["samples_all"]["ratio"] == pytest.approx(40 / 100)
    assert default["window"]["settled"] is False and figures["verdict"]["verdict"] == "not settled"
    text = "\n".join(figures["what_happened"])
    assert "default: error rate passed 1% at 0:00" in text and "first error at 0:06: 502 Proxy Error with 5 users active" in text
    assert "tuned: no errors (40 requests)." in text
    series = json.loads((run_dir / "series.json").read_text())["machines"]["default"]["load"]
    assert sum(series["throughput_rps"]) == 100 and sum(series["errors_per_s"]) == 5
    assert series["seconds"][0] == 1 and series["active_users"][-1] == 5
    html = report.render(run_dir).read_text()
    assert "Local backend: not two separate computers" not in html and "vagrant" in html
    assert re.search(r'id="chart-cpu".*?no data', html, re.S)
    assert re.search(r'id="chart-gc".*?no data', html, re.S)


def test_screenshot_reports_console_errors(tmp_path: Path) -> None:
    # tools/install-deps installs Chromium: without it this fails rather than skips.
    assert report.chromium(), "Chromium not installed (Debian: apt-get install chromium)"
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><h1>broken</h1><script>undefinedFunction();</script></body></html>")
    shot = report.screenshot(page, tmp_path / "broken.png", width=800, height=600)
    assert shot.png.is_file()
    assert any("undefinedFunction" in error for error in shot.console_errors), shot.log[-2000:]
