"""GC logs → pause figures and a per-pause series, for the run summary and its report.

The figures come from GCViewer 1.36 (com.github.chewiebug:gcviewer on Maven Central, a maintained GC
log parser that reads JDK 17 unified logging for Serial and G1), run headless on each log file:

    java -jar gcviewer-1.36.jar gc.log events.csv -t CSV     # one row per GC event, then its heap after
    java -jar gcviewer-1.36.jar gc.log summary.csv           # GCViewer's own summary of the whole file

The jar is fetched once, pinned, with the repository's Maven wrapper into .cache/tools/ and reused.

A small regular expression over the unified-log lines complements it (and replaces it when Java or
the jar cannot be had): a pause is a line

    [<time>][<uptime>s][info][gc] GC(12) Pause Young (Normal) (G1 Evacuation Pause) 25M->10M(256M) 3.456ms

i.e. `GC(<n>) Pause <kind> <before>-><after>(<capacity>) <duration>ms` (-Xlog:gc and -Xlog:gc* both
write it; the `[gc,start]` line of gc* has no duration and is not a pause). The decorations `time`
(wall clock) and `uptime` (seconds since the JVM started), which the lab's machines write, place
each pause on the run's clock: wall = time - uptime + the pause's uptime. The regex also counts the
pauses so GCViewer's count is cross-checked on every file.

Rotated logs (gc.log, gc.log.0 … gc.log.4) are read each on its own, in the order of their first
timestamp. A JVM restart starts a new file (the JVM archives the previous one), so uptime never
goes backwards inside a file.
"""
from __future__ import annotations

import csv
import fcntl
import io
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from lab.numbers import number, percentile
from lab.paths import REPO

GCVIEWER_ARTIFACT = "com.github.chewiebug:gcviewer:1.36"
GCVIEWER_NAME = "GCViewer 1.36"
TOOLS_DIR = REPO / ".cache" / "tools"
GCVIEWER_JAR = TOOLS_DIR / "gcviewer-1.36.jar"
GCVIEWER_TIMEOUT_S = 300
# The goal that fetches it, at the version the service's build already uses (Spring Boot 2.7's): Maven checks every
# artifact against the project's trusted checksums (.mvn/maven.config), so an unpinned plugin would fail there the
# day a newer one is published.
MAVEN_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.3.0:copy"

# Decorations in brackets at the start of a unified-logging line, in any order.
_DECORATION = re.compile(r"\[([^\]]*)\]")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{4}|Z)?$")
_UPTIME = re.compile(r"^(\d+(?:\.\d+)?)(s|ms)$")
_PAUSE = re.compile(r"GC\((\d+)\)\s+(Pause\b.*?)\s+(\d+(?:\.\d+)?)([BKMG])->(\d+(?:\.\d+)?)([BKMG])"
                    r"\((\d+(?:\.\d+)?)([BKMG])\)\s+(\d+(?:\.\d+)?)ms\s*$")
_USING = re.compile(r"\bUsing (Serial|G1|Parallel|Shenandoah|The Z Garbage Collector|ZGC|Epsilon)\b")
_UNIT = {"B": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


@dataclass
class Pause:
    uptime_s: float            # when the pause started, seconds since the JVM started
    at: float | None           # the same on the wall clock (epoch seconds), when the log has `time`
    pause_ms: float
    kind: str                  # "Pause Young (Allocation Failure)" ...
    heap_before_bytes: int | None
    heap_after_bytes: int | None
    heap_total_bytes: int | None
    file: str

    @property
    def full(self) -> bool:
        return "Full" in self.kind


@dataclass
class LogFile:
    path: Path
    collector: str | None = None
    first_uptime_s: float | None = None
    last_uptime_s: float | None = None
    first_at: float | None = None               # wall clock of the first decorated line
    offset_s: float | None = None               # wall clock - uptime, for this JVM
    regex_pauses: list[Pause] = field(default_factory=list)
    lines: int = 0
    unparsed_decorations: bool = False


def _parse_time(text: str) -> float | None:
    for form in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(text.replace("Z", "+0000"), form).timestamp()
        except ValueError:
            continue
    return None


def _decorations(line: str) -> tuple[float | None, float | None, str]:
    """(wall-clock epoch, uptime s, rest of line) of a unified-logging line."""
    at = uptime = None
    position = 0
    while position < len(line) and line[position] == "[":
        match = _DECORATION.match(line, position)
        if not match:
            break
        value = match.group(1).strip()
        if at is None and _TIME.match(value):
            at = _parse_time(value)
        elif uptime is None and (found := _UPTIME.match(value)):
            uptime = float(found.group(1)) / (1000.0 if found.group(2) == "ms" else 1.0)
        position = match.end()
    return at, uptime, line[position:]


def read_log(path: Path) -> LogFile:
    """One unified GC log file, read with the documented regex."""
    log = LogFile(path)
    with path.open(errors="replace") as stream:
        for line in stream:
            log.lines += 1
            at, uptime, rest = _decorations(line.rstrip("\n"))
            if uptime is not None:
                if log.first_uptime_s is None:
                    log.first_uptime_s = uptime
                log.last_uptime_s = uptime
                if at is not None and log.offset_s is None:
                    log.offset_s = at - uptime
                    log.first_at = at
            if log.collector is None and (using := _USING.search(rest)):
                log.collector = "ZGC" if "Z Garbage" in using.group(1) else using.group(1)
            pause = _PAUSE.search(rest)
            if pause:
                duration = float(pause.group(9))
                end = uptime if uptime is not None else 0.0
                start = max(0.0, end - duration / 1000.0)
                log.regex_pauses.append(Pause(
                    uptime_s=start, at=(log.offset_s + start) if log.offset_s is not None else None,
                    pause_ms=duration, kind=pause.group(2).strip(),
                    heap_before_bytes=int(float(pause.group(3)) * _UNIT[pause.group(4)]),
                    heap_after_bytes=int(float(pause.group(5)) * _UNIT[pause.group(6)]),
                    heap_total_bytes=int(float(pause.group(7)) * _UNIT[pause.group(8)]),
                    file=path.name))
    return log


def log_files(gc_dir: Path) -> list[Path]:
    """gc.log and its rotations (gc.log.0 …), non-empty; analyze() orders them by first timestamp."""
    if not gc_dir.is_dir():
        return []
    files = [p for p in gc_dir.iterdir() if p.is_file() and re.fullmatch(r".*\.log(\.\d+)?", p.name)
             and p.stat().st_size > 0]
    return files


# ------------------------------------------------------------------------------------------ GCViewer

def java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def gcviewer_jar(fetch: bool = True) -> tuple[Path | None, str | None]:
    """The pinned GCViewer jar, fetched with the Maven wrapper if missing: (jar, None) or (None, why)."""
    if GCVIEWER_JAR.is_file():
        return GCVIEWER_JAR, None
    if not fetch:
        return None, f"{GCVIEWER_JAR} missing"
    mvnw = REPO / "mvnw"
    if not os.access(mvnw, os.X_OK):
        return None, f"{mvnw} missing: cannot fetch {GCVIEWER_ARTIFACT}"
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    with open(TOOLS_DIR / ".gcviewer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if GCVIEWER_JAR.is_file():
            return GCVIEWER_JAR, None
        command = [str(mvnw), "-q", "-B", "-ntp", MAVEN_COPY_GOAL, f"-Dartifact={GCVIEWER_ARTIFACT}",
                   f"-DoutputDirectory={TOOLS_DIR}"]
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"fetching {GCVIEWER_ARTIFACT} failed: {error}"
        if done.returncode != 0 or not GCVIEWER_JAR.is_file():
            tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            return None, f"fetching {GCVIEWER_ARTIFACT} with the Maven wrapper failed (exit {done.returncode}): {tail}"
    return GCVIEWER_JAR, None


def _run_gcviewer(java_bin: str, jar: Path, log: Path, out: Path, export_type: str | None) -> str | None:
    """Runs GCViewer; None when it worked, else why not. Its many parser warnings go to a log file."""
    command = [java_bin, "-Djava.awt.headless=true", "-Duser.language=en", "-Duser.country=US",
               "-jar", str(jar), str(log), str(out)]
    if export_type:
        command += ["-t", export_type]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GCVIEWER_TIMEOUT_S,
                              cwd=out.parent)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"GCViewer on {log.name}: {error}"
    if done.returncode != 0 or not out.is_file():
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[:300]
        return f"GCViewer on {log.name} exited {done.returncode}: {tail}"
    return None


def _number(text: str) -> float | None:
    return number(text.strip().replace(",", ""))


def _gcviewer_events(text: str, log: LogFile) -> list[Pause]:
    """GCViewer's CSV export: a row per event (start uptime, used before, total, pause, type), each
    followed by a NONE row at its end with the heap used after it."""
    pauses: list[Pause] = []
    rows = list(csv.reader(io.StringIO(text)))
    for index, row in enumerate(rows[1:], start=1):
        if len(row) < 5 or row[4].strip() == "NONE":
            continue
        start, used, total, pause = (_number(v) for v in row[:4])
        if start is None or pause is None:
            continue
        after = None
        if index + 1 < len(rows) and len(rows[index + 1]) >= 5 and rows[index + 1][4].strip() == "NONE":
            after = _number(rows[index + 1][1])
        pauses.append(Pause(
            uptime_s=start, at=(log.offset_s + start) if log.offset_s is not None else None,
            pause_ms=pause * 1000.0, kind=row[4].strip(),
            heap_before_bytes=int(used * 1024) if used is not None else None,
            heap_after_bytes=int(after * 1024) if after is not None else None,
            heap_total_bytes=int(total * 1024) if total is not None else None, file=log.path.name))
    return pauses


def _gcviewer_summary(text: str) -> dict:
    wanted = {"pauseCount": "pause_count", "accumPause": "pause_total_s", "maxPause": "pause_max_s",
              "throughput": "throughput_pct", "totalTime": "total_time_s", "fullGcPauseCount": "full_gc_count",
              "totalHeapAllocMax": "heap_max", "totalHeapUsedMax": "heap_used_max"}
    summary = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(";")]
        if len(parts) >= 2 and parts[0] in wanted:
            value = _number(parts[1])
            if value is not None and len(parts) >= 3 and parts[0].startswith("totalHeap"):
                value *= _UNIT.get(parts[2][:1].upper(), 1)
            summary[wanted[parts[0]]] = value
    return summary


# ------------------------------------------------------------------------------------------- analyse

def _collector_in_force(logs: list, window: tuple[float, float] | None) -> str | None:
    """The collector of the JVM that ran in the window (else the newest): the "Using …" line of the newest log
    begun before the window's end. The folder keeps earlier JVMs' logs, of other collectors when the machine's
    GC knobs changed (an A/A run, an ablation); a JVM's later rotated files have no such line (logs: by time)."""
    end = window[1] if window else None
    named = [log for log in logs if log.collector and (end is None or log.first_at is None or log.first_at < end)]
    return named[-1].collector if named else None


def analyze(gc_dir: Path, window: tuple[float, float] | None = None, use_gcviewer: bool = True) -> dict:
    """Pause figures of one machine's GC logs, over `window` (epoch start, end) when the logs carry
    wall-clock time, else over the whole logs. Returns a dict for summary.json, with "series" (one
    entry per pause: at, uptime_s, pause_ms, heap_after_bytes …) for the report's charts."""
    files = log_files(gc_dir)
    result: dict = {"files": [], "parser": None, "problems": []}
    if not files:
        result["problems"].append(f"no GC log in {gc_dir}")
        return result
    logs = [read_log(p) for p in files]
    logs.sort(key=lambda f: (f.first_at if f.first_at is not None else float("inf"), -_rotation(f.path)))
    result["collector"] = _collector_in_force(logs, window)

    pauses_by_file: dict[str, list[Pause]] = {}
    whole: dict[str, dict] = {}
    jar = java_bin = None
    if use_gcviewer:
        java_bin = java()
        jar, why = gcviewer_jar()
        if java_bin is None:
            why = "java not found"
        if why:
            result["problems"].append(f"GCViewer not used ({why}); pauses read with the unified-log regex")
    if jar and java_bin:
        with tempfile.TemporaryDirectory(prefix="gcviewer-") as scratch, ThreadPoolExecutor(4) as pool:
            jobs = {}
            for log in logs:
                events = Path(scratch) / f"{log.path.name}.events.csv"
                summary = Path(scratch) / f"{log.path.name}.summary.csv"
                jobs[log.path.name] = (
                    pool.submit(_run_gcviewer, java_bin, jar, log.path, events, "CSV"),
                    pool.submit(_run_gcviewer, java_bin, jar, log.path, summary, None), events, summary)
            for log in logs:
                events_job, summary_job, events, summary = jobs[log.path.name]
                failed = events_job.result()
                if failed:
                    result["problems"].append(failed + "; that file read with the unified-log regex")
                else:
                    pauses_by_file[log.path.name] = _gcviewer_events(events.read_text(errors="replace"), log)
                if not summary_job.result():
                    whole[log.path.name] = _gcviewer_summary(summary.read_text(errors="replace"))
    parsers = set()
    pauses: list[Pause] = []
    for log in logs:
        from_viewer = pauses_by_file.get(log.path.name)
        parsers.add(GCVIEWER_NAME if from_viewer is not None else "unified-log regex")
        chosen = from_viewer if from_viewer is not None else log.regex_pauses
        pauses.extend(chosen)
        entry = {"file": log.path.name, "lines": log.lines, "collector": log.collector,
                 "first_at": log.first_at, "uptime_span_s": [log.first_uptime_s, log.last_uptime_s],
                 "pauses": len(chosen), "regex_pauses": len(log.regex_pauses),
                 "gcviewer_summary": whole.get(log.path.name)}
        result["files"].append(entry)
        if from_viewer is not None and len(from_viewer) != len(log.regex_pauses):
            result["problems"].append(f"{log.path.name}: GCViewer found {len(from_viewer)} pauses, "
                                      f"the unified-log regex {len(log.regex_pauses)}")
    result["parser"] = " + ".join(sorted(parsers))
    if result["collector"] is None and any("G1" in p.kind for p in pauses):
        result["collector"] = "G1"          # the "Using G1" line was in a file rotated away

    timed = all(p.at is not None for p in pauses) and all(f.offset_s is not None for f in logs)
    if window and timed and window[1] > window[0]:
        start, end = window
        selected = [p for p in pauses if p.at is not None and start <= p.at < end]   # timed: each has one
        span = end - start
        result["scope"] = "load window"
        result["window"] = {"start_at": start, "end_at": end, "duration_s": round(span, 3)}
    else:
        selected = pauses
        # Whole logs: from each JVM's start to its last logged line.
        span = sum((f.last_uptime_s or 0.0) for f in logs if f.path.name == _newest_of_jvm(logs, f))
        result["scope"] = "whole log" if not window else "whole log (no wall-clock time in the log to cut the load window)"
        result["window"] = {"start_at": None, "end_at": None, "duration_s": round(span, 3)}
    total_s = sum(p.pause_ms for p in selected) / 1000.0
    result.update({
        "pause_count": len(selected),
        "full_gc_count": sum(1 for p in selected if p.full),
        "pause_total_s": round(total_s, 6),
        "pause_max_ms": round(max((p.pause_ms for p in selected), default=0.0), 3) if selected else None,
        "pause_mean_ms": round(total_s * 1000.0 / len(selected), 3) if selected else None,
        "pause_others_p99_ms": others_p99([p.pause_ms for p in selected]),
        "throughput_pct": round(100.0 * (1.0 - total_s / span), 3) if span > 0 else None,
        "time_in_gc_pct": round(100.0 * total_s / span, 3) if span > 0 else None,
        "heap_after_max_bytes": max((p.heap_after_bytes for p in selected if p.heap_after_bytes is not None),
                                    default=None),
        "heap_total_max_bytes": max((p.heap_total_bytes for p in selected if p.heap_total_bytes is not None),
                                    default=None),
    })
    counts: dict[str, int] = {}
    for p in selected:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    result["pauses_by_kind"] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    result["series"] = [{"at": p.at, "uptime_s": round(p.uptime_s, 6), "pause_ms": round(p.pause_ms, 4),
                         "kind": p.kind, "heap_before_bytes": p.heap_before_bytes,
                         "heap_after_bytes": p.heap_after_bytes, "heap_total_bytes": p.heap_total_bytes,
                         "file": p.file}
                        for p in sorted(pauses, key=lambda p: (p.at if p.at is not None else p.uptime_s))]
    return result


def others_p99(pauses_ms: list[float]) -> float | None:
    """The 99th percentile of every pause but the longest: what the longest is measured against (the longest
    itself would weigh in the percentile of fewer than about 200 pauses)."""
    others = sorted(pauses_ms)[:-1]
    return percentile(others, 99) if others else None


def _rotation(path: Path) -> int:
    """gc.log -> -1 (the current file), gc.log.3 -> 3."""
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else -1


def _newest_of_jvm(logs: list[LogFile], log: LogFile) -> str:
    """The file holding the last lines of log's JVM (same wall-clock offset, within a second)."""
    same = [f for f in logs if f.offset_s is None or log.offset_s is None or abs(f.offset_s - log.offset_s) < 1.0]
    return max(same, key=lambda f: f.last_uptime_s or 0.0).path.name
