"""lab/load.py with the real JMeter (assembled by jmeter/pom.xml) against real mock backends on loopback.

Short loads (a few users, seconds), each bounded by the plan's own duration; the whole file runs in
about two minutes once JMeter is assembled (the first prepare() downloads it: ~1.5 min).
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, Process, free_port, http_get, spawn

sys.path.insert(0, str(REPO))
from lab import load, placement  # noqa: E402
from lab.analysis import jmeter as jmeter_analysis  # noqa: E402
from lab.analysis import loadgen  # noqa: E402
from lab.errors import LabError  # noqa: E402
from lab.load import dashboards as load_dashboards  # noqa: E402
from lab.load import openplan  # noqa: E402
from lab.runfolder import JMeterFolder  # noqa: E402

load_run = sys.modules["lab.load.run"]


@pytest.fixture(autouse=True)
def assembled_jmeter(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("fast") is None:
        load.prepare()      # ~0 s once JMeter is assembled


def start_mock(processes: list[Process], folder: Path, latency: str = "fixed:5") -> int:
    port = free_port()
    process = spawn(processes, f"mock-{port}",
                    [sys.executable, "-m", "mock_service", "--port", str(port), "--latency", latency],
                    folder, cwd=REPO / "mock-service")

    def healthy() -> bool:
        try:
            return http_get(f"http://127.0.0.1:{port}/health", timeout=2)[0] == 200
        except OSError:
            return False
    process.wait_until(healthy, 30, "healthy mock")
    return port


def read_results(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames or []), list(reader)


def time_wait_connections(port: int) -> int:
    """TCP connections to/from this port now in TIME_WAIT (each closed connection leaves one for 60 s).

    iproute2's ss, which `make check` installs: where it fails, so does the test, rather than pass unchecked."""
    listing = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True, timeout=10,
                             check=True)
    return sum(1 for line in listing.stdout.splitlines() if f":{port} " in line + " ")


def jmeter_processes(marker: Path) -> list[int]:
    """JMeter JVMs whose command line names the test's folder (so other runs on the host don't count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "ApacheJMeter" in command and str(marker) in command:
                found.append(int(entry.name))
    return found


def assert_agrees_with_the_dashboard(results: Path, dashboard: Path) -> None:
    """The lab's figures over every sample of results.csv equal JMeter's own statistics.json for that file."""
    total = json.loads((dashboard.parent / "statistics.json").read_text())["Total"]
    samples = jmeter_analysis.read_results(results)
    figures = jmeter_analysis._stats(samples, list(range(len(samples))), None)
    assert figures["samples"] == total["sampleCount"] and figures["errors"] == total["errorCount"]
    latency = figures["latency_ms"]
    assert latency["max"] == total["maxResTime"]
    assert latency["mean"] == pytest.approx(total["meanResTime"], abs=0.001)
    for ours, theirs in (("p50", "medianResTime"), ("p90", "pct1ResTime"), ("p95", "pct2ResTime"),
                         ("p99", "pct3ResTime")):
        assert latency[ours] == pytest.approx(total[theirs], abs=0.001), (ours, latency, total)


# ------------------------------------------------------------------------------------------ no JMeter

@pytest.mark.fast
def test_profiles_follow_the_write_up_and_quick_is_short() -> None:
    full = load.LoadProfile()
    assert (full.users, full.ramp_s, full.duration_s, full.think_ms) == (150, 150, 1200, 0)
    assert (full.connect_timeout_ms, full.response_timeout_ms, full.keep_alive) == (30000, 60000, True)
    assert load.QUICK.duration_s <= 100 and load.QUICK.users < full.users
    with pytest.raises(ValueError):
        load.LoadProfile(users=0)


@pytest.mark.fast
def test_targets_are_checked() -> None:
    parsed = load._parse_targets({"tuned": "http://127.0.0.1:8080", "default": "http://10.213.1.2"},
                                 "/svc/camel/mock", allow_any_host=False)
    assert [(t.machine, t.host, t.port, t.path) for t in parsed] == [
        ("default", "10.213.1.2", 80, "/svc/camel/mock"), ("tuned", "127.0.0.1", 8080, "/svc/camel/mock")]
    assert load._parse_targets({"default": "http://127.0.0.1:9/other"}, "/x", False)[0].path == "/other"
    with pytest.raises(ValueError, match="not a loopback or private"):
        load._parse_targets({"default": "http://8.8.8.8"}, "/", False)
    # What ./start.sh checks before a run starts: a message (a LabError) saying what to do, no traceback.
    with pytest.raises(LabError, match=r"default: 8\.8\.8\.8 is not a loopback or private address: .*ansible_host"):
        load.check_targets({"default": "http://8.8.8.8"}, "/svc/camel/mock")
    with pytest.raises(ValueError, match="unknown machine"):
        load._parse_targets({"prod": "http://127.0.0.1"}, "/", False)
    with pytest.raises(ValueError):
        load.run({"default": "http://127.0.0.1:1"}, load.QUICK, Path("/nonexistent"), schedule="random", path="/")


@pytest.mark.fast
def test_csv_tail_keeps_partial_and_quoted_records(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    tail = load._CsvTail(path)
    assert tail.read() == []
    path.write_text("timeStamp,elapsed,success\n1,5,true\n2,7,\"multi\nline")
    assert tail.read() == [["1", "5", "true"]]
    with path.open("a") as stream:
        stream.write(" message\"\n3,9,false\n4,")
    assert tail.read() == [["2", "7", "multi\nline message"], ["3", "9", "false"]]
    assert tail.columns == {"timeStamp": 0, "elapsed": 1, "success": 2}


@pytest.mark.fast
def test_csv_tail_reads_a_field_longer_than_pythons_csv_limit_in_a_process_of_its_own(tmp_path: Path) -> None:
    # a failed sample's message can carry a whole answer; the live progress reads it in `python -m lab.load`,
    # a process that may import nothing else of the lab's (here: a fresh interpreter)
    path = tmp_path / "r.csv"
    path.write_text(f"timeStamp,elapsed,failureMessage\n1,5,\"{'x' * 300_000}\"\n2,7,\n")
    probe = ("import sys; from lab.load.progress import _CsvTail; rows = _CsvTail(__import__('pathlib').Path("
             "sys.argv[1])).read(); print([(r[0], len(r[2])) for r in rows])")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[('1', 300000), ('2', 0)]"


@pytest.mark.fast
def test_progress_lines() -> None:
    progress = {"schedule": "parallel", "elapsed_s": 151.0, "planned_s": 1200, "machines": {
        "default": {"state": "running", "elapsed_s": 151.0, "samples": 9000, "requests_per_s": 412.5, "errors": 3,
                    "error_rate": 0.001, "p95_ms": 38, "active_threads": 150},
        "tuned": {"state": "waiting", "elapsed_s": 0.0, "samples": 0, "requests_per_s": 0.0, "errors": 0,
                  "error_rate": 0.0, "p95_ms": None, "active_threads": 0}}}
    assert load.format_progress(progress).splitlines() == [
        "default  02:31  412.5 req/s  errors 3 (0.1%)  p95 38 ms  users 150", "tuned    --:--  waiting"]
    bar = load.progress_bar(progress, width=20)
    assert bar.startswith("[###.................]") and "02:31 / 20:00" in bar


def test_prepare_is_fast_when_done() -> None:
    started = time.monotonic()
    load.prepare()
    assert time.monotonic() - started < 5
    assert (load.jmeter_home() / "bin" / "ApacheJMeter-5.6.3.jar").is_file()


# ------------------------------------------------------------------------------------- real JMeter

def test_parallel_load_on_two_machines(processes, tmp_path: Path) -> None:
    ports = {"default": start_mock(processes, tmp_path / "mock-default"),
             "tuned": start_mock(processes, tmp_path / "mock-tuned")}
    profile = load.LoadProfile(users=4, ramp_s=4, duration_s=20)
    seen: list[dict] = []
    out = tmp_path / "run"
    result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()}, profile, out,
                      on_progress=seen.append, path="/data")

    assert not result.interrupted and result.schedule == "parallel" and result.profile == profile
    assert result.problems == []
    assert 20 <= result.ended_at - result.started_at < 60
    logged = (out / "jmeter.log").read_text()
    # the run's own lines, not a line per thread's start and end (3 a request in an open model)
    assert "Starting ThreadGroup" in logged and "Thread started" not in logged and "Thread finished" not in logged
    first_samples = {}
    for machine, port in ports.items():
        assert result.results[machine] == out / machine / "results.csv"
        header, rows = read_results(result.results[machine])
        assert tuple(header) == load.CSV_COLUMNS
        assert len(rows) > 100
        assert all(row["success"] == "true" and row["responseCode"] == "200" for row in rows)
        assert {row["URL"] for row in rows} == {f"http://127.0.0.1:{port}/data"}
        assert {row["label"] for row in rows} == {machine}
        assert {row["threadName"].split()[0] for row in rows} == {machine}
        assert max(int(row["grpThreads"]) for row in rows) == 4
        # keep-alive: each virtual user opens one connection and keeps it for the whole run
        closed = time_wait_connections(port)
        assert closed <= 2 * profile.users, closed
        stamps = [int(row["timeStamp"]) for row in rows]
        assert (max(stamps) - min(stamps)) / 1000 <= profile.duration_s + 1
        first_samples[machine] = min(stamps)
        assert result.dashboards[machine] == out / machine / "dashboard" / "index.html"
        assert result.dashboards[machine].is_file()
        assert_agrees_with_the_dashboard(result.results[machine], result.dashboards[machine])
    # JMeter's CPU and the host's, sampled through the run
    host = loadgen.over(loadgen.read(out / "loadgen.csv"), result.started_at, result.ended_at)
    assert host is not None and host["seconds"] >= 15 and 0 < host["loadgen_cores"] <= os.cpu_count()
    assert host["host_busy_cores"] > 0 and 0 <= host["host_idle_pct"] < 100
    # both machines were loaded at the same time
    assert abs(first_samples["default"] - first_samples["tuned"]) < 3000

    assert len(seen) >= 3
    final = seen[-1]
    assert final["schedule"] == "parallel" and final["planned_s"] == 20
    for machine in ports:
        numbers = [p["machines"][machine] for p in seen]
        samples = [n["samples"] for n in numbers]
        assert samples == sorted(samples) and samples[-1] == len(read_results(result.results[machine])[1])
        busy = [n for n in numbers if n["state"] == "running" and n["samples"]]
        assert busy, numbers
        assert all(n["requests_per_s"] > 0 and 0 < n["p95_ms"] < 1000 and 1 <= n["active_threads"] <= 4
                   for n in busy if n["requests_per_s"])
        assert all(n["errors"] == 0 and n["error_rate"] == 0 for n in numbers)
        assert numbers[-1]["state"] == "done" and 15 <= numbers[-1]["elapsed_s"] < 40
        assert f"{machine:<8} " in load.format_progress(final)
    assert not jmeter_processes(tmp_path)


def test_sequential_load_runs_one_machine_after_the_other(processes, tmp_path: Path) -> None:
    ports = {"default": start_mock(processes, tmp_path / "mock-default"),
             "tuned": start_mock(processes, tmp_path / "mock-tuned")}
    seen: list[dict] = []
    out = tmp_path / "run"
    pinned = placement.cpulist(placement.host_cpus()[-1:])
    result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()},
                      load.LoadProfile(users=2, ramp_s=2, duration_s=7, keep_alive=False), out, schedule="sequential",
                      on_progress=seen.append, path="/data", order=("tuned", "default"), cpus=pinned)
    # JMeter pinned to the CPUs asked for (the placement's, when it gives the load generator CPUs of its own):
    # the last CPU alone, not this process's affinity (so on a host of 2 CPUs or more, taskset did it)
    assert result.loadgen_cpus == pinned

    assert not result.interrupted and result.problems == []
    spans = {}
    for machine, port in ports.items():
        _, rows = read_results(result.results[machine])
        assert rows and all(row["success"] == "true" for row in rows)
        assert {row["URL"] for row in rows} == {f"http://127.0.0.1:{port}/data"}
        # keep_alive=False: a new connection for every request
        closed = time_wait_connections(port)
        assert closed >= 0.9 * len(rows), (closed, len(rows))
        stamps = [int(row["timeStamp"]) for row in rows]
        spans[machine] = (min(stamps), max(stamps))
        assert result.dashboards[machine].is_file()
    # in the order asked for (repeated trials alternate it): tuned, then default
    assert spans["tuned"][1] < spans["default"][0]
    assert any(p["machines"]["default"]["state"] == "waiting" and p["machines"]["tuned"]["samples"] for p in seen)
    assert seen[-1]["planned_s"] == 14
    log = (out / "jmeter.log").read_text()
    assert 0 <= log.index("==== tuned") < log.index("==== default")
    # one JMeter per machine, each one's CPU counted from its own rows
    rows = loadgen.read(out / "loadgen.csv")
    assert len({row["loadgen_pid"] for row in rows}) == 2
    whole = loadgen.over(rows, result.started_at, result.ended_at)
    assert whole is not None and 0 < whole["loadgen_cores"] <= os.cpu_count()
    assert not jmeter_processes(tmp_path)


def test_interrupt_keeps_results_and_dashboards(processes, tmp_path: Path) -> None:
    port = start_mock(processes, tmp_path / "mock")
    out = tmp_path / "run"

    def interrupt_later(progress: dict) -> None:
        if progress["machines"]["default"]["samples"] and progress["elapsed_s"] >= 6:
            raise KeyboardInterrupt

    started = time.monotonic()
    result = load.run({"default": f"http://127.0.0.1:{port}", "tuned": f"http://127.0.0.1:{port}"},
                      load.LoadProfile(users=3, ramp_s=1, duration_s=300), out, on_progress=interrupt_later,
                      path="/data", progress_interval_s=2)
    assert result.interrupted
    assert time.monotonic() - started < 45
    for machine in ("default", "tuned"):
        _, rows = read_results(result.results[machine])
        assert rows and all(row["success"] == "true" for row in rows)
        assert result.dashboards[machine].is_file()
    assert "Command: Shutdown received" in (out / "jmeter.log").read_text()
    assert not jmeter_processes(tmp_path)


def test_jmeter_killed_by_a_signal_is_not_a_complete_run(processes, tmp_path: Path) -> None:
    # The kernel's OOM killer ends JMeter with SIGKILL: what it measured is kept, and the run says it ended early.
    port = start_mock(processes, tmp_path / "mock")

    def kill_jmeter(progress: dict) -> None:
        if progress["machines"]["default"]["samples"] and progress["elapsed_s"] >= 4:
            for pid in jmeter_processes(tmp_path):
                os.kill(pid, signal.SIGKILL)

    result = load.run({"default": f"http://127.0.0.1:{port}"}, load.LoadProfile(users=2, ramp_s=1, duration_s=300),
                      tmp_path / "run", on_progress=kill_jmeter, path="/data", progress_interval_s=2)
    assert result.interrupted
    assert any(p.startswith("JMeter was killed by SIGKILL after ") and p.endswith("the run is incomplete")
               for p in result.problems), result.problems
    _, rows = read_results(result.results["default"])
    assert rows and result.dashboards["default"].is_file()


def test_sigterm_stops_the_command_line_cleanly(processes, tmp_path: Path) -> None:
    port = start_mock(processes, tmp_path / "mock")
    out = tmp_path / "run"
    runner = spawn(processes, "load", [sys.executable, "-m", "lab.load", "--target", f"default=http://127.0.0.1:{port}",
                                       "--users", "2", "--ramp-s", "1", "--duration-s", "300", "--path", "/data",
                                       "--out", str(out)], tmp_path / "cli", cwd=REPO)
    results = out / "default" / "results.csv"
    runner.wait_until(lambda: results.is_file() and len(results.read_text().splitlines()) > 20, 40, "samples")
    runner.popen.send_signal(signal.SIGTERM)
    assert runner.popen.wait(timeout=45) == 130, runner.text()
    assert (out / "default" / "dashboard" / "index.html").is_file()
    assert not (out / "tuned").exists()
    assert not jmeter_processes(tmp_path)


def test_refused_connections_are_errors(processes, tmp_path: Path) -> None:
    port = start_mock(processes, tmp_path / "mock")
    closed = free_port()                        # nothing listens there
    seen: list[dict] = []
    result = load.run({"default": f"http://127.0.0.1:{closed}", "tuned": f"http://127.0.0.1:{port}"},
                      load.LoadProfile(users=2, ramp_s=1, duration_s=6, think_ms=100), tmp_path / "run",
                      on_progress=seen.append, path="/data", progress_interval_s=2)
    assert not result.interrupted
    _, refused = read_results(result.results["default"])
    assert refused and all(row["success"] == "false" for row in refused)
    assert any("refused" in (row["responseMessage"] + row["responseCode"]).lower() for row in refused)
    _, served = read_results(result.results["tuned"])
    assert served and all(row["success"] == "true" for row in served)
    final = seen[-1]["machines"]
    assert final["default"]["errors"] == len(refused) and final["default"]["error_rate"] == 1.0
    assert final["tuned"]["errors"] == 0
    assert "errors" in load.format_progress(seen[-1])
    assert result.dashboards["default"].is_file()     # the dashboard shows the errors too
    assert not jmeter_processes(tmp_path)


def test_a_lost_threshold_stops_the_load_and_the_phases_still_to_come(processes, tmp_path: Path) -> None:
    # --stop-on-fail: default refuses every connection, so error_pct_max=1 is lost once the ramp is over (two
    # progress reports in a row); the load stops there, long before its 30 s, and tuned's phase never starts.
    from lab.load.abort import ThresholdWatch
    port = start_mock(processes, tmp_path / "mock")
    began = time.monotonic()
    result = load.run({"default": f"http://127.0.0.1:{free_port()}", "tuned": f"http://127.0.0.1:{port}"},
                      load.LoadProfile(users=2, ramp_s=1, duration_s=30, think_ms=100), tmp_path / "run",
                      schedule="sequential", path="/data", progress_interval_s=1,
                      stop_when=ThresholdWatch({"error_pct_max": 1}, ramp_s=1))
    assert time.monotonic() - began < 25, "the load ran to its end"
    assert result.lost is not None and (result.lost["threshold"], result.lost["machine"]) == ("error_pct_max", "default")
    assert "errors 100.00% > 1%" in result.lost["why"] and f"stopped early: {result.lost['why']}" in result.problems
    assert not result.interrupted and "tuned" not in result.results
    _, refused = read_results(result.results["default"])
    assert refused and all(row["success"] == "false" for row in refused)
    assert not jmeter_processes(tmp_path)


def _logged_at(log: Path, text: str) -> float:
    """When JMeter logged the first line holding text (its log's local time, as the JVM and this process share the
    host's zone), in seconds since the epoch."""
    line = next((line for line in log.read_text().splitlines() if text in line), None)
    assert line is not None, f"{log} never says {text!r}"
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_machine_past_its_knee_gets_no_more_arrivals_while_the_other_loads_on(processes, tmp_path: Path) -> None:
    # An open model on both machines at once: default refuses every connection, so its steps miss the SLO from the
    # first; once two have, its arrivals send nothing more (JMeter cannot stop one thread group: the plan's If
    # Controller reads the flag the lab makes), while tuned's go on to the end of their schedule. A warm-up takes
    # JMeter's start and the watch's Groovy compile, as in the lab's runs: in a CI run without one, on a saturated
    # host, 295 of tuned's requests came in its first 4 s step, 87 of them over 1 s, and ended its load too.
    port = start_mock(processes, tmp_path / "mock")
    steps = load.StepLoad(start_rps=20, step_rps=20, step_s=4, max_rps=80, warmup_s=4, connect_timeout_ms=1000,
                          response_timeout_ms=2000)
    result = load.run({"default": f"http://127.0.0.1:{free_port()}", "tuned": f"http://127.0.0.1:{port}"}, steps,
                      tmp_path / "run", schedule="parallel", path="/data", progress_interval_s=1, dashboards=False)
    out = JMeterFolder(tmp_path / "run")
    assert out.load_ended("default").is_file() and not out.load_ended("tuned").exists()
    assert list(result.ended_early) == ["default"] and not result.interrupted, result
    _, refused = read_results(result.results["default"])
    _, answered = read_results(result.results["tuned"])
    # the watch saw the flag soon after the lab made it (its script compiled before the load), and no request of
    # default's started after that (a poll's arrivals may have been on their way)
    assert refused and all(row["success"] == "false" for row in refused)
    seen = _logged_at(out.log, openplan.ENDED_LOG + "default")
    assert 0 <= seen - out.load_ended("default").stat().st_mtime < 2, seen
    assert max(int(row["timeStamp"]) for row in refused) / 1000 <= seen + 0.2
    assert len(refused) < sum(steps.arrivals()) / 2
    assert len(answered) == sum(steps.arrivals()) and all(row["success"] == "true" for row in answered)
    assert not jmeter_processes(tmp_path)


def test_jmeter_stopped_past_the_knee_keeps_every_request_it_sent_and_exits_cleanly(processes, tmp_path: Path) -> None:
    # Every request takes 1.2 s, over the SLO's 1 s: two steps miss, the lab stops JMeter with requests in flight.
    # Shutdown lets them end (none is cut), then StopTestNow ends JMeter (its open model never ends on Shutdown
    # alone): at once when a last sample ended with no other thread running, else at the grace's end. JMeter then
    # exits 0, not 1 (it checked its pool a few ms before the pool's idle threads had ended: "One or more test
    # threads won't exit").
    port = start_mock(processes, tmp_path / "mock", latency="fixed:1200")
    steps = load.StepLoad(start_rps=10, step_rps=10, step_s=2, max_rps=60, warmup_s=2, connect_timeout_ms=1000,
                          response_timeout_ms=3000)
    result = load.run({"default": f"http://127.0.0.1:{port}"}, steps, tmp_path / "run", schedule="parallel",
                      path="/data", progress_interval_s=1, dashboards=False)
    assert list(result.ended_early) == ["default"] and not result.interrupted and result.problems == [], result
    out = JMeterFolder(tmp_path / "run")
    shutdown, stop_now = (_logged_at(out.log, f"Command: {command} received") for command in ("Shutdown", "StopTestNow"))
    _, rows = read_results(result.results["default"])
    ends = [(int(row["timeStamp"]) + int(row["elapsed"])) / 1000 for row in rows]
    # requests were in flight when the lab said Shutdown, and each ended with its answer before StopTestNow
    assert any(int(row["timeStamp"]) / 1000 < shutdown < end for row, end in zip(rows, ends, strict=True))
    assert all(row["success"] == "true" and int(row["elapsed"]) >= 1200 for row in rows)
    assert max(ends) <= stop_now + 0.1
    assert not jmeter_processes(tmp_path)


def _progress(tmp_path: Path, csv_text: str, started: float):
    """A machine's progress over a results file holding csv_text, started at that monotonic time."""
    from lab.load.progress import _MachineProgress
    results = tmp_path / "results.csv"
    results.write_text(csv_text)
    machine = _MachineProgress("default", results)
    machine.start(started)
    return machine, results


@pytest.mark.fast
def test_stopping_jmeter_says_stop_test_now_once_its_samples_have_ended_else_at_the_graces_end(tmp_path, monkeypatch):
    # A stand-in for JMeter's shutdown port that, like 5.6's open model, ends on StopTestNow only.
    from lab.load import processes as stopping
    script = tmp_path / "jmeter.py"
    script.write_text("import socket\n"
                      "port = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                      "port.bind(('127.0.0.1', 0))\n"
                      "print(port.getsockname()[1], flush=True)\n"
                      "while (command := port.recv(64).decode()) != 'StopTestNow':\n"
                      "    print(command, flush=True)\n"
                      "print(command, flush=True)\n")

    def stopped(drained) -> list[str]:
        popen = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                                 start_new_session=True)
        assert popen.stdout is not None
        problems: list[str] = []
        stopping.stop_jmeter(popen, int(popen.stdout.readline()), problems, drained=drained)
        assert popen.wait(timeout=5) == 0 and problems == []
        return popen.stdout.read().split()

    asked: list[float] = []
    before = time.time() * 1000
    assert stopped(lambda since_ms: asked.append(since_ms) or len(asked) == 3) == ["Shutdown", "StopTestNow"]
    # asked until its samples had ended, each time about the moment Shutdown was sent
    assert len(asked) == 3 and before <= asked[0] == asked[-1] <= time.time() * 1000
    # samples that never end: StopTestNow once the grace is over
    monkeypatch.setattr(stopping, "SHUTDOWN_GRACE_S", 0.6)
    asked.clear()
    assert stopped(lambda since_ms: bool(asked.append(since_ms))) == ["Shutdown", "StopTestNow"]
    assert len(asked) >= 2
    # a results file it cannot read: the grace, as without it, and JMeter still stopped

    def unreadable(since_ms: float) -> bool:
        raise OSError("results.csv: Input/output error")
    assert stopped(unreadable) == ["Shutdown", "StopTestNow"]


@pytest.mark.fast
def test_a_load_has_drained_once_a_sample_ended_after_shutdown_while_jmeter_ran_no_other_thread(tmp_path) -> None:
    from lab.load.progress import drained
    machine, results = _progress(tmp_path, "timeStamp,elapsed,success,grpThreads,allThreads\n1000,50,true,3,4\n"
                                           "2000,30,true,1,2\n", 100.0)
    machine.poll(101.0)
    assert machine.alone_ms is None                 # another thread still ran (the lab's watch, another group)
    running = (machine.requests_per_s, machine.p95_ms)
    with results.open("a") as stream:
        stream.write("2100,40,true,1,1\n2050,20,true,2,2\n")
    assert drained([machine], None, 2140) and machine.alone_ms == 2140
    assert not drained([machine], None, 2141)   # alone, but before Shutdown: arrivals may have come since
    # its samples counted, its line's rate and p95 those it ran at, not the drain's
    assert machine.samples == 4 and (machine.requests_per_s, machine.p95_ms) == running == (2.0, 50)


@pytest.mark.fast
def test_an_open_models_load_is_over_once_its_samples_have_ended_and_its_machines_are_at_rest(tmp_path) -> None:
    # Past a knee a machine still serves requests whose clients gave up: the next load (a refinement's, the other
    # machine's, a tune's next configuration) must not begin on it.
    from lab.load.progress import drained
    machine, results = _progress(tmp_path, "timeStamp,elapsed,success,grpThreads,allThreads\n1000,50,true,3,4\n", 100.0)
    asked: list[list[str]] = []
    resting = [False]

    def at_rest(names: list[str]) -> bool:
        asked.append(names)
        return resting[0]
    assert not drained([machine], at_rest, 1040) and asked == []     # a sample still running: the machine not asked
    with results.open("a") as stream:
        stream.write("2100,40,true,1,1\n")
    assert not drained([machine], at_rest, 2140) and asked == [["default"]]   # its samples ended, the machine busy
    resting[0] = True
    assert drained([machine], at_rest, 2140) and drained([machine], None, 2140)


@pytest.mark.fast
def test_an_open_models_load_whose_every_arrival_was_answered_ends_at_once_not_after_its_drain(tmp_path) -> None:
    # Its last step met: the schedule's drain (10 s of timeouts) would run for requests that all ended; the load ends
    # as one past its capacity does, but is not said to have ended early (its whole schedule ran).
    from lab.load.openmodel import StepLoad, StepWatch
    from lab.load.progress import _MachineProgress, drained
    from lab.load.run import _reported
    steps = StepLoad(start_rps=2, step_rps=1, step_s=1, max_rps=3, warmup_s=0)
    header = "timeStamp,elapsed,success,grpThreads,allThreads\n"
    first_ms = int(time.time() * 1000) - 1000     # just sent: the timeouts not waited out
    rows = "".join(f"{first_ms + 100 * k},20,true,2,3\n" for k in range(sum(steps.arrivals())))
    machines = []
    for name in ("default", "tuned"):
        results = tmp_path / f"{name}.csv"
        results.write_text(header + (rows if name == "default" else rows.splitlines(keepends=True)[0]))
        machine = _MachineProgress(name, results, watch=StepWatch(steps, one_sample_each=True))
        machine.start(100.0)
        machines.append(machine)
    load = SimpleNamespace(report=lambda now: False, out=None)
    assert not _reported(load, machines, 100.0, 105.0)          # tuned still has arrivals to answer
    assert machines[0].answered and not machines[1].answered
    assert machines[0].watch.judged == {0: True, 1: True}      # judged at once, its timeouts not waited out
    assert not drained(machines, None, first_ms + 900)          # tuned's requests may be in flight
    machines[1].results.write_text(header + rows)
    assert _reported(load, machines, 100.0, 106.0)
    assert [m.ended_early_s for m in machines] == [None, None]  # the whole schedule ran: not ended past a knee
    assert drained(machines, None, 9_999_999_999)               # every sample in before Shutdown: nothing to wait for
    assert not drained(machines, lambda names: False, 9_999_999_999)   # a machine still serving: not yet


def test_the_labs_own_jmeter_is_at_hand(tmp_path: Path) -> None:
    # ./start.sh jmeter [ARGS]: JMeter as the lab assembled it, run from the user's folder.
    result = subprocess.run([str(REPO / "start.sh"), "jmeter", "--version"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert re.search(r"\|_____\|_\| \\_\\ 5\.6\.\d", result.stdout), result.stdout


@pytest.mark.fast
def test_the_machines_are_jmeter_properties(monkeypatch) -> None:
    from lab import cli
    from lab.machines import manifest
    wiring = manifest.Manifest(machine="tuned", address="10.213.2.2", home="/h", user="u", group="g",
                               service_manager="supervisord", service_path="/svc/camel/mock", ports={"httpd": 80},
                               processes=(), pcp_archive="a", evidence={})
    monkeypatch.setattr(manifest, "read_or_none", lambda name: wiring if name == "tuned" else None)
    assert cli.jmeter_properties() == {"tuned.host": "10.213.2.2", "tuned.port": "80", "tuned.path": "/svc/camel/mock",
                                       "tuned.url": "http://10.213.2.2/svc/camel/mock"}


def test_the_dashboard_describes_every_sample_not_the_last_20000(tmp_path: Path) -> None:
    # JMeter's default statistic_window keeps the last 20,000 samples for percentiles: a run whose first
    # 20,000 were slow would get a dashboard of its fast end. The lab's dashboards use them all.
    out = JMeterFolder(tmp_path)
    results = out.results("default")
    results.parent.mkdir(parents=True)
    with results.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(load.CSV_COLUMNS)
        start = int(time.time() * 1000) - 60_000
        for i in range(30_000):
            elapsed = 400 + i % 97 if i < 20_000 else 5 + i % 7       # slow first, fast at the end
            writer.writerow([start + i * 2, elapsed, "default", 200, "OK", "default 1-1", "text", "true", "", 100, 50,
                             1, 1, "http://127.0.0.1/data", elapsed, 0, 0])
    problems: list[str] = []
    dashboards = load_dashboards.generate(load.java_executable(), load_run.runtime_jar(),
                                          {"default": results}, load.QUICK, out, problems)
    assert problems == [] and dashboards["default"].is_file()
    assert_agrees_with_the_dashboard(results, dashboards["default"])
    total = json.loads((dashboards["default"].parent / "statistics.json").read_text())["Total"]
    assert total["medianResTime"] > 400          # the last 20,000 alone would say 8 ms


@pytest.mark.fast
def test_a_finished_machines_line_keeps_the_rate_it_ran_at_not_its_drain(tmp_path) -> None:
    from lab.load.progress import _MachineProgress
    machine, results = _progress(tmp_path, "timeStamp,elapsed,success,grpThreads\n", 100.0)

    def arrive(count: int, elapsed_ms: int) -> None:
        with results.open("a") as stream:
            stream.writelines(f"{1_700_000_000_000 + i},{elapsed_ms},true,20\n" for i in range(count))
    arrive(3500, 30)
    machine.poll(105.0)                     # 3,500 in 5 s
    arrive(10, 90)
    machine.finish(110.0)                   # the drain: 10 more in the 5 s its load ended in
    line = machine.snapshot(110.0)
    assert line["samples"] == 3510 and line["state"] == "done" and line["active_threads"] == 0
    assert line["requests_per_s"] == 700.0 and line["p95_ms"] == 30, line
    # a machine that ended before its first poll shows what it did, rather than nothing
    results.write_text("timeStamp,elapsed,success,grpThreads\n")
    short = _MachineProgress("tuned", results)
    short.start(100.0)
    arrive(40, 12)
    short.finish(102.0)
    assert short.snapshot(102.0)["requests_per_s"] == 20.0 and short.snapshot(102.0)["p95_ms"] == 12
