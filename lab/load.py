"""The lab's load: JMeter runs jmeter/camel-tuning-lab.jmx against both machines and JMeter's own report
generator turns each machine's results into an HTML dashboard.

JMeter is assembled from Maven Central by jmeter-maven-plugin (jmeter/pom.xml, `prepare()`); this module
then drives `java -jar ApacheJMeter-5.6.3.jar` itself, which gives it the process: one JMeter for both
machines (parallel) or one per machine (sequential), progress from the results CSVs while it runs, and a
clean stop through JMeter's own shutdown port on Ctrl-C/SIGTERM. Standard library only.

    python3 -m lab.load --target default=http://127.0.0.1:8081 --target tuned=http://127.0.0.1:8082 --quick
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import fcntl
import hashlib
import io
import ipaddress
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parent.parent
JMETER_DIR = REPO / "jmeter"
POM = JMETER_DIR / "pom.xml"
PLAN = JMETER_DIR / "camel-tuning-lab.jmx"
TARGET = JMETER_DIR / "target"
PLUGIN_CONFIG = TARGET / "config.json"          # written by the plugin's configure goal
STAMP = TARGET / "lab-assembled.sha256"         # pom.xml hash of the assembled JMeter
PREPARE_LOG = TARGET / "prepare.log"
LOCK = JMETER_DIR / ".prepare.lock"
MVNW = REPO / "mvnw"
CONFIGURE_GOAL = "jmeter:configure@configuration"

MACHINES = ("default", "tuned")                 # the plan's thread groups
DEFAULT_PATH = "/svc/camel/mock"
SCHEDULES = ("parallel", "sequential")
# Like JMeter's own bin/jmeter script (which sets 1 GB and G1), a little smaller at the start.
JVM_ARGS = ["-Xms256m", "-Xmx1g", "-XX:MaxMetaspaceSize=256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=100"]
# Engine settings the lab relies on (also in the assembled bin/user.properties, see jmeter/pom.xml).
ENGINE_PROPERTIES = {
    "jmeter.save.saveservice.autoflush": "true",          # every sample reaches the CSV at once
    "jmeter.save.saveservice.output_format": "csv",
    "jmeter.save.saveservice.print_field_names": "true",
    "jmeter.save.saveservice.timestamp_format": "ms",
    "httpclient.reset_state_on_thread_group_iteration": "false",
    "jmeterengine.force.system.exit": "true",
    "summariser.interval": "10",
}
CSV_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
               "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency",
               "IdleTime", "Connect")

SHUTDOWN_GRACE_S = 10.0     # "Shutdown": threads finish their current sample
STOP_NOW_GRACE_S = 10.0     # "StopTestNow": in-flight samples are interrupted
KILL_GRACE_S = 5.0          # SIGTERM, then SIGKILL
DASHBOARD_TIMEOUT_S = 900.0


class LoadError(Exception):
    """The load could not be prepared or run; the message says what to do."""


@dataclass
class LoadProfile:
    users: int = 150                    # virtual users per machine
    ramp_s: int = 150                   # ramp-up: users arrive evenly over this time (1 user/s here)
    duration_s: int = 1200              # whole run per machine, ramp-up included; JMeter stops by itself
    think_ms: int = 0                   # pause after each request, per user
    connect_timeout_ms: int = 30000     # = HTTPD Timeout/ProxyTimeout and Tomcat connectionTimeout (30 s)
    response_timeout_ms: int = 60000    # > the proxy's 30 s, so proxy errors surface before the client gives up
    keep_alive: bool = True             # as the write-up's JMeter (HttpClient4, "Use KeepAlive")

    def __post_init__(self) -> None:
        for name in ("users", "ramp_s", "duration_s", "think_ms", "connect_timeout_ms", "response_timeout_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LoadProfile.{name} must be an integer >= 0, not {value!r}")
        if self.users < 1 or self.duration_s < 1:
            raise ValueError("LoadProfile needs users >= 1 and duration_s >= 1")

    def properties(self) -> dict[str, str]:
        """The plan's JMeter properties for this profile."""
        return {"users": str(self.users), "ramp_s": str(self.ramp_s), "duration_s": str(self.duration_s),
                "think_ms": str(self.think_ms), "connect_timeout_ms": str(self.connect_timeout_ms),
                "response_timeout_ms": str(self.response_timeout_ms),
                "keep_alive": "true" if self.keep_alive else "false"}


FULL = LoadProfile()
# Smoke profile: 90 s of load per machine (+ ~4 s JMeter start and 5-15 s of dashboards): ~1m50 in all
# in parallel (measured against fast local mocks), twice the load time in sequential.
QUICK = LoadProfile(users=20, ramp_s=20, duration_s=90)


@dataclass
class LoadResult:
    results: dict[str, Path]            # machine -> results.csv (machines that ran)
    dashboards: dict[str, Path]         # machine -> dashboard/index.html (machines with samples)
    interrupted: bool
    started_at: float                   # time.time()
    ended_at: float
    schedule: str
    profile: LoadProfile
    problems: list[str] = field(default_factory=list)   # what went wrong without stopping the run
    log: Path | None = None             # out_dir/jmeter.log


# --------------------------------------------------------------------------------------------- prepare

def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if not java:
        raise LoadError("java not found (JMeter needs Java 8 or later; Debian: apt-get install openjdk-17-jre-headless)")
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LoadError(f"{java} -version failed: {error}") from error
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version)
    if not found:
        raise LoadError(f"cannot tell the Java version of {java}: {version.strip()[:200]}")
    major = int(found.group(1)) if found.group(1) != "1" else int(found.group(2) or 0)
    if major < 8:
        raise LoadError(f"{java} is Java {major}; JMeter 5.6 needs Java 8 or later")
    return java


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def jmeter_home() -> Path | None:
    """The assembled JMeter's folder (…/jmeter with bin/ and lib/), if prepare() has run."""
    try:
        configurations = json.loads(PLUGIN_CONFIG.read_text())["configurations"]
        configuration = next(c for c in configurations if c.get("executionID") == "configuration")
        home = Path(configuration["jmeterDirectoryPath"])
        jar = home / "bin" / configuration["runtimeJarName"]
    except (OSError, ValueError, KeyError, StopIteration):
        return None
    return home if jar.is_file() else None


def _runtime_jar(home: Path) -> Path:
    jars = sorted((home / "bin").glob("ApacheJMeter*.jar"))
    if not jars:
        raise LoadError(f"no ApacheJMeter*.jar in {home / 'bin'}: run prepare() again")
    return jars[0]


def _assembled() -> bool:
    try:
        return jmeter_home() is not None and STAMP.read_text().strip() == _pom_hash()
    except OSError:
        return False


@contextmanager
def _prepare_lock() -> Iterator[None]:
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def prepare() -> None:
    """Assemble JMeter from Maven Central with the plugin (idempotent: ~0 s when already done).

    Needs Java and Maven Central (the wrapper downloads Maven 3.9 the first time, then the plugin
    downloads JMeter's jars: ~1.5 min on first run)."""
    java = _java()
    if _assembled():
        return
    with _prepare_lock():
        if _assembled():                       # another process did it while we waited
            return
        if not os.access(MVNW, os.X_OK):
            raise LoadError(f"{MVNW} missing or not executable (the repository's Maven wrapper)")
        shutil.rmtree(TARGET, ignore_errors=True)   # the plugin assembles into a new random folder each time
        TARGET.mkdir(parents=True)
        env = dict(os.environ)
        env.setdefault("JAVA_HOME", str(Path(os.path.realpath(java)).parent.parent))
        command = [str(MVNW), "-B", "-ntp", "-f", str(POM), CONFIGURE_GOAL]
        with PREPARE_LOG.open("w") as log:
            try:
                done = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=1800)
            except subprocess.TimeoutExpired:
                raise LoadError(f"assembling JMeter took over 30 min; see {PREPARE_LOG}") from None
        output = PREPARE_LOG.read_text(errors="replace")
        if done.returncode != 0 or jmeter_home() is None:
            hint = ""
            if re.search(r"could not (transfer|resolve|be resolved)|UnknownHost|Connection (refused|timed out)|"
                         r"Network is unreachable|unable to find valid certification path|Failed to fetch|"
                         r"Cannot access central", output, re.IGNORECASE):
                hint = (" Maven Central (https://repo.maven.apache.org) looks unreachable: JMeter is assembled "
                        "from it (and the Maven wrapper downloads Maven 3.9 from it on first use).")
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise LoadError(f"assembling JMeter failed (`{' '.join(command[1:])}`, exit {done.returncode}).{hint}\n"
                            f"Log: {PREPARE_LOG}\n{tail}")
        STAMP.write_text(_pom_hash() + "\n")


# ------------------------------------------------------------------------------------------- targets

@dataclass
class _Target:
    machine: str
    protocol: str
    host: str
    port: int
    path: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}{self.path}"


def _allowed_address(host: str) -> bool:
    """Loopback, or private (RFC 1918/ULA/link-local: the lab's namespaces and VM networks)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise ValueError(f"cannot resolve target host {host!r}: {error}") from error
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if not (address.is_loopback or address.is_private or address.is_link_local):
            return False
    return True


def _parse_targets(targets: dict[str, str], path: str, allow_any_host: bool) -> list[_Target]:
    if not targets:
        raise ValueError("no targets: give {machine: base URL}")
    unknown = set(targets) - set(MACHINES)
    if unknown:
        raise ValueError(f"unknown machine(s) {sorted(unknown)}: the plan has thread groups {list(MACHINES)}")
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/': {path!r}")
    parsed = []
    for machine in MACHINES:                    # the plan's order, whatever the dict's
        if machine not in targets:
            continue
        split = urllib.parse.urlsplit(targets[machine])
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"{machine}: not an http(s) base URL: {targets[machine]!r}")
        if not allow_any_host and not _allowed_address(split.hostname):
            raise ValueError(f"{machine}: {split.hostname} is not a loopback or private address; the lab only "
                             "loads its own machines (allow_any_host=True to override)")
        port = split.port or (443 if split.scheme == "https" else 80)
        machine_path = split.path if split.path not in ("", "/") else path   # a URL path wins
        if split.query:
            machine_path += "?" + split.query
        parsed.append(_Target(machine, split.scheme, split.hostname, port, machine_path))
    return parsed


# ---------------------------------------------------------------------------------------- CSV tailing

class _CsvTail:
    """Reads the complete records appended to a JMeter CSV since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        self.columns: dict[str, int] | None = None

    def read(self) -> list[list[str]]:
        try:
            with self.path.open("rb") as stream:
                stream.seek(self.offset)
                data = stream.read()
        except FileNotFoundError:
            return []
        if not data:
            return []
        self.offset += len(data)
        records, self.pending = _complete_records(self.pending + data)
        if not records:
            return []
        rows = list(csv.reader(io.StringIO(records.decode("utf-8", errors="replace"))))
        if self.columns is None and rows:
            header = rows.pop(0)
            self.columns = {name: index for index, name in enumerate(header)}
        return rows


def _complete_records(data: bytes) -> tuple[bytes, bytes]:
    """Split data into (complete CSV records, rest): a record ends at a newline outside quotes."""
    cut = 0
    quotes = 0
    start = 0
    while True:
        newline = data.find(b"\n", start)
        if newline < 0:
            break
        quotes += data.count(b'"', start, newline)
        if quotes % 2 == 0:
            cut = newline + 1
        start = newline + 1
    return data[:cut], data[cut:]


def _percentile(values: list[int], fraction: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass
class _MachineProgress:
    machine: str
    results: Path
    state: str = "waiting"                  # waiting | running | stopping | done
    started: float | None = None            # time.monotonic()
    finished: float | None = None
    samples: int = 0
    errors: int = 0
    active_threads: int = 0
    requests_per_s: float = 0.0
    p95_ms: int | None = None
    last_poll: float | None = None
    tail: _CsvTail = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.tail = _CsvTail(self.results)

    def start(self, now: float) -> None:
        self.state, self.started, self.last_poll = "running", now, now

    def poll(self, now: float) -> None:
        rows = self.tail.read()
        columns = self.tail.columns or {}
        elapsed_i, success_i, threads_i = columns.get("elapsed"), columns.get("success"), columns.get("grpThreads")
        interval = []
        for row in rows:
            self.samples += 1
            if success_i is not None and success_i < len(row) and row[success_i] != "true":
                self.errors += 1
            if elapsed_i is not None and elapsed_i < len(row) and row[elapsed_i].isdigit():
                interval.append(int(row[elapsed_i]))
        if rows and threads_i is not None and threads_i < len(rows[-1]) and rows[-1][threads_i].isdigit():
            self.active_threads = int(rows[-1][threads_i])
        span = now - (self.last_poll or now)
        self.requests_per_s = len(rows) / span if span > 0.05 else self.requests_per_s
        self.p95_ms = _percentile(interval, 0.95)
        self.last_poll = now

    def finish(self, now: float) -> None:
        self.poll(now)
        self.state, self.finished, self.active_threads = "done", now, 0

    def snapshot(self, now: float) -> dict:
        end = self.finished if self.finished is not None else now
        return {"state": self.state,
                "elapsed_s": round(end - self.started, 1) if self.started is not None else 0.0,
                "samples": self.samples, "requests_per_s": round(self.requests_per_s, 1),
                "errors": self.errors, "error_rate": self.errors / self.samples if self.samples else 0.0,
                "p95_ms": self.p95_ms, "active_threads": self.active_threads}


# ------------------------------------------------------------------------------------------ progress

def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def format_progress(progress: dict) -> str:
    """One line per machine: `default  02:31  412.5 req/s  errors 3 (0.1%)  p95 38 ms  users 150`."""
    lines = []
    for machine, m in progress["machines"].items():
        if m["state"] == "waiting":
            lines.append(f"{machine:<8} --:--  waiting")
            continue
        p95 = f"{m['p95_ms']} ms" if m["p95_ms"] is not None else "- ms"
        state = "" if m["state"] == "running" else f"  ({m['state']})"
        lines.append(f"{machine:<8} {_clock(m['elapsed_s'])}  {m['requests_per_s']:.1f} req/s  "
                     f"errors {m['errors']} ({m['error_rate'] * 100:.1f}%)  p95 {p95}  "
                     f"users {m['active_threads']}{state}")
    return "\n".join(lines)


def progress_bar(progress: dict, width: int = 30) -> str:
    """The whole run: `[#########.....................]  31%  07:10 / 23:00  parallel`."""
    planned = max(1.0, float(progress["planned_s"]))
    fraction = min(1.0, progress["elapsed_s"] / planned)
    filled = int(round(fraction * width))
    return (f"[{'#' * filled}{'.' * (width - filled)}] {fraction * 100:3.0f}%  "
            f"{_clock(progress['elapsed_s'])} / {_clock(planned)}  {progress['schedule']}")


# ----------------------------------------------------------------------------------------- JMeter run

def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send_command(port: int, command: str) -> None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(command.encode(), ("127.0.0.1", port))
    except OSError:
        pass


def _wait(popen: subprocess.Popen, seconds: float) -> bool:
    try:
        popen.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _stop_jmeter(popen: subprocess.Popen, udp_port: int, problems: list[str]) -> None:
    """JMeter's own shutdown (finish current samples), then StopTestNow, then SIGTERM, then SIGKILL."""
    try:
        if popen.poll() is None:
            _send_command(udp_port, "Shutdown")
            if _wait(popen, SHUTDOWN_GRACE_S):
                return
            _send_command(udp_port, "StopTestNow")
            if _wait(popen, STOP_NOW_GRACE_S):
                return
            problems.append("JMeter ignored Shutdown/StopTestNow; terminated")
    except KeyboardInterrupt:                   # a second Ctrl-C: no more patience
        problems.append("stopped JMeter forcibly (second interrupt)")
    _kill(popen)


def _kill(popen: subprocess.Popen) -> None:
    if popen.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(popen.pid, sig)           # own session: the group is JMeter's JVM only
        except (ProcessLookupError, PermissionError):
            pass
        if _wait(popen, grace):
            return


def _jmeter_command(java: str, jar: Path, log: Path, udp_port: int, profile: LoadProfile,
                    phase: list[_Target], path: str, out_dir: Path) -> list[str]:
    props = {**ENGINE_PROPERTIES, **profile.properties(), "path": path,
             "jmeterengine.nongui.port": str(udp_port), "jmeterengine.nongui.maxport": str(udp_port)}
    active = {t.machine: t for t in phase}
    for machine in MACHINES:
        target = active.get(machine)
        if target is None:                      # this group idles: 0 users, results nowhere
            props[f"{machine}.users"] = "0"
            props[f"{machine}.results"] = os.devnull
            continue
        props.update({f"{machine}.users": str(profile.users), f"{machine}.protocol": target.protocol,
                      f"{machine}.host": target.host, f"{machine}.port": str(target.port),
                      f"{machine}.path": target.path,
                      f"{machine}.results": str(out_dir / machine / "results.csv")})
    return [java, *JVM_ARGS, "-jar", str(jar), "-n", "-t", str(PLAN), "-j", str(log),
            *(f"-J{key}={value}" for key, value in props.items())]


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _granularity_ms(duration_s: int) -> int:
    """Dashboard graph granularity: fine for short runs, smoother for long ones."""
    return 1000 if duration_s <= 300 else 5000 if duration_s <= 1800 else 10000


def _trim_partial_record(csv_path: Path) -> None:
    """A killed JMeter may leave half a line; the report generator would choke on it."""
    data = csv_path.read_bytes()
    complete, rest = _complete_records(data)
    if rest:
        with csv_path.open("r+b") as stream:
            stream.truncate(len(complete))


def _has_samples(csv_path: Path) -> bool:
    try:
        with csv_path.open("rb") as stream:
            stream.readline()
            return bool(stream.readline().strip())
    except OSError:
        return False


def _generate_dashboards(java: str, jar: Path, results: dict[str, Path], profile: LoadProfile,
                         problems: list[str]) -> dict[str, Path]:
    """JMeter's report generator (`-g results.csv -o dashboard`), one per machine, concurrently."""
    running: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    dashboards: dict[str, Path] = {}
    try:
        for machine, csv_path in results.items():
            if not _has_samples(csv_path):
                problems.append(f"{machine}: no samples, no dashboard")
                continue
            _trim_partial_record(csv_path)
            folder = csv_path.parent / "dashboard"
            shutil.rmtree(folder, ignore_errors=True)
            log = csv_path.parent / "dashboard.log"
            scratch = csv_path.parent / "dashboard-tmp"     # the default (bin/temp) is shared: clashes
            shutil.rmtree(scratch, ignore_errors=True)
            command = [java, *JVM_ARGS, "-jar", str(jar), "-g", str(csv_path), "-o", str(folder), "-j", str(log),
                       f"-Jjmeter.reportgenerator.overall_granularity={_granularity_ms(profile.duration_s)}",
                       f"-Jjmeter.reportgenerator.report_title=camel-tuning-lab: {machine}",
                       f"-Jjmeter.reportgenerator.temp_dir={scratch}"]
            with (csv_path.parent / "dashboard.out").open("w") as out:
                popen = subprocess.Popen(command, cwd=jar.parent, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            running[machine] = (popen, folder, log)
        deadline = time.monotonic() + DASHBOARD_TIMEOUT_S
        for machine, (popen, folder, log) in running.items():
            if not _wait(popen, max(1.0, deadline - time.monotonic())):
                _kill(popen)
                problems.append(f"{machine}: dashboard generation timed out")
            elif popen.returncode == 0 and (folder / "index.html").is_file():
                dashboards[machine] = folder / "index.html"
            else:
                problems.append(f"{machine}: dashboard generation failed (exit {popen.returncode}); see {log}")
    except KeyboardInterrupt:
        problems.append("dashboard generation interrupted")
    finally:
        for machine, (popen, folder, _) in running.items():
            _kill(popen)
            shutil.rmtree(folder.parent / "dashboard-tmp", ignore_errors=True)
    return dashboards


def run(targets: dict[str, str], profile: LoadProfile, out_dir: Path, schedule: str = "parallel",
        on_progress: Callable[[dict], None] | None = None, *, path: str = DEFAULT_PATH,
        progress_interval_s: float = 5.0, allow_any_host: bool = False) -> LoadResult:
    """Load the machines with the plan, then build each machine's dashboard.

    targets: machine ("default"/"tuned") -> base URL (http://10.213.1.2); the request path is `path`
    (a target URL's own path, if any, wins). schedule "parallel": one JMeter loads all machines at once;
    "sequential": one machine after the other, each with the full profile. Ctrl-C or SIGTERM stops
    JMeter cleanly, keeps what it measured, still builds the dashboards and returns interrupted=True.
    Writes out_dir/<machine>/results.csv, out_dir/<machine>/dashboard/index.html, out_dir/jmeter.log."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    parsed = _parse_targets(targets, path, allow_any_host)
    prepare()
    java = _java()
    home = jmeter_home()
    if home is None:
        raise LoadError("JMeter is not assembled: prepare() failed")
    jar = _runtime_jar(home)

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for target in parsed:                       # a fresh run: JMeter would append to old results
        folder = out_dir / target.machine
        folder.mkdir(exist_ok=True)
        (folder / "results.csv").unlink(missing_ok=True)
        shutil.rmtree(folder / "dashboard", ignore_errors=True)
    log = out_dir / "jmeter.log"
    log.write_text("")
    phases = [parsed] if schedule == "parallel" else [[target] for target in parsed]
    progress = {t.machine: _MachineProgress(t.machine, out_dir / t.machine / "results.csv") for t in parsed}
    planned_s = profile.duration_s * len(phases)
    problems: list[str] = []
    interrupted = False
    started_at, started = time.time(), time.monotonic()

    def report(now: float) -> None:
        if on_progress is not None:
            on_progress({"schedule": schedule, "elapsed_s": round(now - started, 1), "planned_s": planned_s,
                         "machines": {m: p.snapshot(now) for m, p in progress.items()}})

    with _sigterm_as_interrupt():
        for phase in phases:
            try:
                _run_phase(java, jar, phase, profile, out_dir, log, len(phases) > 1, progress, report,
                           progress_interval_s, problems)
            except KeyboardInterrupt:
                interrupted = True
                break
        results = {m: p.results for m, p in progress.items() if p.results.is_file()}
        dashboards = _generate_dashboards(java, jar, results, profile, problems)
        if "dashboard generation interrupted" in problems:
            interrupted = True
    return LoadResult(results=results, dashboards=dashboards, interrupted=interrupted, started_at=started_at,
                      ended_at=time.time(), schedule=schedule, profile=profile, problems=problems, log=log)


def _run_phase(java: str, jar: Path, phase: list[_Target], profile: LoadProfile, out_dir: Path, log: Path,
               own_log: bool, progress: dict[str, _MachineProgress], report: Callable[[float], None],
               interval_s: float, problems: list[str]) -> None:
    """One JMeter process for the machines of this phase; KeyboardInterrupt after stopping it cleanly."""
    udp_port = _free_udp_port()
    phase_log = out_dir / phase[0].machine / "jmeter.log" if own_log else log
    command = _jmeter_command(java, jar, phase_log, udp_port, profile, phase, phase[0].path, out_dir)
    popen = None
    machines = [progress[t.machine] for t in phase]
    # Bounded whatever happens: the plan stops itself at duration_s; past that plus the longest sample
    # and a margin, the lab stops it.
    overrun_s = profile.duration_s + profile.response_timeout_ms / 1000 + 60
    try:
        with (out_dir / "jmeter.out").open("a") as out:
            popen = subprocess.Popen(command, cwd=jar.parent, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        now = time.monotonic()
        for machine in machines:
            machine.start(now)
        next_report = now + interval_s
        while popen.poll() is None:
            time.sleep(0.2)
            now = time.monotonic()
            if now - machines[0].started > overrun_s:
                problems.append(f"JMeter ran past duration_s + {overrun_s - profile.duration_s:.0f} s; stopped it")
                _stop_jmeter(popen, udp_port, problems)
                break
            if now >= next_report:
                for machine in machines:
                    machine.poll(now)
                report(now)
                next_report = now + interval_s
    except KeyboardInterrupt:
        if popen is not None:
            for machine in machines:
                machine.state = "stopping"
            _stop_jmeter(popen, udp_port, problems)
        _finish_phase(machines, popen, own_log, phase_log, log, problems)
        raise
    except BaseException:
        if popen is not None:
            _kill(popen)
        raise
    _finish_phase(machines, popen, own_log, phase_log, log, problems)
    if popen.returncode not in (0, None) and not any(m.samples for m in machines):
        raise LoadError(f"JMeter failed (exit {popen.returncode}) before any sample; see {phase_log} and "
                        f"{out_dir / 'jmeter.out'}")
    report(time.monotonic())


def _finish_phase(machines: list[_MachineProgress], popen: subprocess.Popen | None, own_log: bool,
                  phase_log: Path, log: Path, problems: list[str]) -> None:
    now = time.monotonic()
    for machine in machines:
        machine.finish(now)
    if popen is not None and popen.returncode not in (0, None, -signal.SIGTERM, -signal.SIGKILL):
        problems.append(f"JMeter exited with {popen.returncode}; see {phase_log}")
    if own_log and phase_log.is_file():
        with log.open("a") as whole:
            whole.write(f"==== {', '.join(m.machine for m in machines)} ({phase_log}) ====\n")
            whole.write(phase_log.read_text(errors="replace"))


# ------------------------------------------------------------------------------------------------ CLI

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m lab.load", description="Load the lab's machines with JMeter.")
    parser.add_argument("--target", action="append", default=[], metavar="MACHINE=URL", required=True,
                        help="e.g. default=http://10.213.1.2 (repeat for tuned)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / time.strftime("load-%Y%m%d-%H%M%S"))
    parser.add_argument("--schedule", choices=SCHEDULES, default="parallel")
    parser.add_argument("--path", default=DEFAULT_PATH)
    parser.add_argument("--quick", action="store_true", help=f"smoke profile {QUICK}")
    for name, default in dataclasses.asdict(FULL).items():
        kind = (lambda v: v.lower() in ("1", "true", "yes", "on")) if isinstance(default, bool) else int
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=f"default {default}")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    profile = dataclasses.replace(base, **{k: v for k, v in vars(args).items()
                                           if k in dataclasses.asdict(FULL) and v is not None})
    targets = dict(item.split("=", 1) for item in args.target)

    def show(progress: dict) -> None:
        print(progress_bar(progress), file=sys.stderr)
        print(format_progress(progress), file=sys.stderr, flush=True)
    try:
        prepare()
        result = run(targets, profile, args.out, args.schedule, show, path=args.path)
    except (LoadError, ValueError) as error:
        print(f"load: {error}", file=sys.stderr)
        return 1
    for machine, index in result.dashboards.items():
        print(f"{machine}: {result.results[machine]}  dashboard {index}")
    for problem in result.problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 130 if result.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
