"""GCViewer 1.36 (com.github.chewiebug:gcviewer on Maven Central, a maintained GC log parser that reads JDK 17
unified logging for Serial and G1), run headless on each GC log file for lab/analysis/gclog.py:

    java -jar gcviewer-1.36.jar gc.log events.csv -t CSV     # one row per GC event, then its heap after
    java -jar gcviewer-1.36.jar gc.log summary.csv           # GCViewer's own summary of the whole file

The jar is fetched once, pinned, with the repository's Maven wrapper into .cache/tools/ and reused. What it writes
for a log is kept in .cache/gcviewer/, keyed by the log's bytes: a rotated log never changes, and every summary of a
lab reads its machines' earlier JVMs' logs again (an ablation's or a tune's each configuration the ones before's),
two JVM starts a file, 1.4 s each here."""
from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lab.analysis.gcpause import UNIT, LogFile, Pause
from lab.numbers import number
from lab.paths import REPO

ARTIFACT = "com.github.chewiebug:gcviewer:1.36"
NAME = "GCViewer 1.36"
TOOLS_DIR = REPO / ".cache" / "tools"
JAR = TOOLS_DIR / "gcviewer-1.36.jar"
TIMEOUT_S = 300
CACHE_DIR = REPO / ".cache" / "gcviewer"
CACHE_DAYS = 30             # an output not read for this long is removed (a log's bytes seldom come back)
# The goal that fetches it, at the version the service's build already uses (Spring Boot 2.7's): Maven checks every
# artifact against the project's trusted checksums (.mvn/maven.config), so an unpinned plugin would fail there the
# day a newer one is published.
MAVEN_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.3.0:copy"


def java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def jar(fetch: bool = True) -> tuple[Path | None, str | None]:
    """The pinned GCViewer jar, fetched with the Maven wrapper if missing: (jar, None) or (None, why)."""
    if JAR.is_file():
        return JAR, None
    if not fetch:
        return None, f"{JAR} missing"
    mvnw = REPO / "mvnw"
    if not os.access(mvnw, os.X_OK):
        return None, f"{mvnw} missing: cannot fetch {ARTIFACT}"
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    with open(TOOLS_DIR / ".gcviewer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if JAR.is_file():
            return JAR, None
        command = [str(mvnw), "-q", "-B", "-ntp", MAVEN_COPY_GOAL, f"-Dartifact={ARTIFACT}",
                   f"-DoutputDirectory={TOOLS_DIR}"]
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"fetching {ARTIFACT} failed: {error}"
        if done.returncode != 0 or not JAR.is_file():
            tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            return None, f"fetching {ARTIFACT} with the Maven wrapper failed (exit {done.returncode}): {tail}"
    return JAR, None


def run(java_bin: str, jar: Path, log: Path, out: Path, export_type: str | None) -> str | None:
    """Runs GCViewer; None when it worked, else why not. Its many parser warnings go to a log file."""
    command = [java_bin, "-Djava.awt.headless=true", "-Duser.language=en", "-Duser.country=US",
               "-jar", str(jar), str(log), str(out)]
    if export_type:
        command += ["-t", export_type]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              cwd=out.parent)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"GCViewer on {log.name}: {error}"
    if done.returncode != 0 or not out.is_file():
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[:300]
        return f"GCViewer on {log.name} exited {done.returncode}: {tail}"
    return None


def kept_run(java_bin: str, jar: Path, log: Path, out: Path, export_type: str | None) -> str | None:
    """run(), unless GCViewer already wrote its output for these exact bytes (with this jar and export): then that
    output, copied to out. The figures are GCViewer's either way; only the JVM is spared."""
    try:
        key = hashlib.sha256(f"{jar.name}\0{export_type or 'summary'}\0".encode() + log.read_bytes()).hexdigest()
    except OSError:
        return run(java_bin, jar, log, out, export_type)
    kept = CACHE_DIR / f"{key}.csv"
    try:
        shutil.copyfile(kept, out)
        os.utime(kept)                              # read: kept another CACHE_DAYS
        return None
    except OSError:
        pass
    failed = run(java_bin, jar, log, out, export_type)
    if failed is None:
        try:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            scratch = kept.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}")
            shutil.copyfile(out, scratch)
            os.replace(scratch, kept)               # whole or not at all, whoever else writes it
            _forget_old()
        except OSError:
            pass                                    # a cache that cannot be written: the next summary runs it again
    return failed


def _forget_old() -> None:
    old = time.time() - CACHE_DAYS * 86400
    for path in CACHE_DIR.glob("*.csv"):
        try:
            if path.stat().st_mtime < old:
                path.unlink()
        except OSError:
            pass


def _number(text: str) -> float | None:
    return number(text.strip().replace(",", ""))


def events(text: str, log: LogFile) -> list[Pause]:
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


def summary(text: str) -> dict:
    wanted = {"pauseCount": "pause_count", "accumPause": "pause_total_s", "maxPause": "pause_max_s",
              "throughput": "throughput_pct", "totalTime": "total_time_s", "fullGcPauseCount": "full_gc_count",
              "totalHeapAllocMax": "heap_max", "totalHeapUsedMax": "heap_used_max"}
    summary = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(";")]
        if len(parts) >= 2 and parts[0] in wanted:
            value = _number(parts[1])
            if value is not None and len(parts) >= 3 and parts[0].startswith("totalHeap"):
                value *= UNIT.get(parts[2][:1].upper(), 1)
            summary[wanted[parts[0]]] = value
    return summary


def read_all(logs: list[LogFile], result: dict) -> tuple[dict[str, list[Pause]], dict[str, dict]]:
    """GCViewer's pauses of each log (file name -> pauses) and its summary of each; a log it could not read is
    left out (the unified-log regex reads it), and why is in result's problems."""
    pauses_by_file: dict[str, list[Pause]] = {}
    whole: dict[str, dict] = {}
    java_bin = java()
    found, why = jar()
    if java_bin is None:
        why = "java not found"
    if why:
        result["problems"].append(f"GCViewer not used ({why}); pauses read with the unified-log regex")
    if not (found and java_bin):
        return pauses_by_file, whole
    with tempfile.TemporaryDirectory(prefix="gcviewer-") as scratch, ThreadPoolExecutor(4) as pool:
        jobs = {}
        for log in logs:
            events_csv = Path(scratch) / f"{log.path.name}.events.csv"
            summary_csv = Path(scratch) / f"{log.path.name}.summary.csv"
            jobs[log.path.name] = (
                pool.submit(kept_run, java_bin, found, log.path, events_csv, "CSV"),
                pool.submit(kept_run, java_bin, found, log.path, summary_csv, None), events_csv, summary_csv)
        for log in logs:
            events_job, summary_job, events_csv, summary_csv = jobs[log.path.name]
            failed = events_job.result()
            if failed:
                result["problems"].append(failed + "; that file read with the unified-log regex")
            else:
                pauses_by_file[log.path.name] = events(events_csv.read_text(errors="replace"), log)
            if not summary_job.result():
                whole[log.path.name] = summary(summary_csv.read_text(errors="replace"))
    return pauses_by_file, whole
