"""GC logs → pause figures and a per-pause series, for the run summary and its report.

The pauses come from GCViewer (lab/analysis/gcviewer.py) where it reads a file, and from a small regular
expression over the unified-log lines, which complements it (and replaces it when Java or the jar cannot
be had): a pause is a line

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

import re
from datetime import datetime
from pathlib import Path

from lab.analysis import gcviewer
from lab.analysis.gcpause import UNIT, LogFile, Pause
from lab.numbers import percentile

# Decorations in brackets at the start of a unified-logging line, in any order.
_DECORATION = re.compile(r"\[([^\]]*)\]")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{4}|Z)?$")
_UPTIME = re.compile(r"^(\d+(?:\.\d+)?)(s|ms)$")
_PAUSE = re.compile(r"GC\((\d+)\)\s+(Pause\b.*?)\s+(\d+(?:\.\d+)?)([BKMG])->(\d+(?:\.\d+)?)([BKMG])"
                    r"\((\d+(?:\.\d+)?)([BKMG])\)\s+(\d+(?:\.\d+)?)ms\s*$")
_USING = re.compile(r"\bUsing (Serial|G1|Parallel|Shenandoah|The Z Garbage Collector|ZGC|Epsilon)\b")


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
                    heap_before_bytes=int(float(pause.group(3)) * UNIT[pause.group(4)]),
                    heap_after_bytes=int(float(pause.group(5)) * UNIT[pause.group(6)]),
                    heap_total_bytes=int(float(pause.group(7)) * UNIT[pause.group(8)]),
                    file=path.name))
    return log


def log_files(gc_dir: Path) -> list[Path]:
    """gc.log and its rotations (gc.log.0 …), non-empty; analyze() orders them by first timestamp."""
    if not gc_dir.is_dir():
        return []
    files = [p for p in gc_dir.iterdir() if p.is_file() and re.fullmatch(r".*\.log(\.\d+)?", p.name)
             and p.stat().st_size > 0]
    return files


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

    pauses_by_file, whole = gcviewer.read_all(logs, result) if use_gcviewer else ({}, {})
    pauses = _pauses_of(logs, pauses_by_file, whole, result)
    if result["collector"] is None and any("G1" in p.kind for p in pauses):
        result["collector"] = "G1"          # the "Using G1" line was in a file rotated away
    _pause_figures(pauses, logs, window, result)
    return result


def _pauses_of(logs: list[LogFile], pauses_by_file: dict[str, list[Pause]], whole: dict[str, dict],
               result: dict) -> list[Pause]:
    """Every log's pauses, GCViewer's where it read the file, else the regex's; each file's entry in result."""
    parsers = set()
    pauses: list[Pause] = []
    for log in logs:
        from_viewer = pauses_by_file.get(log.path.name)
        parsers.add(gcviewer.NAME if from_viewer is not None else "unified-log regex")
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
    return pauses


def _pause_figures(pauses: list[Pause], logs: list[LogFile], window: tuple[float, float] | None,
                   result: dict) -> None:
    """The pauses' figures over the load window when the logs carry wall-clock time, else over the whole logs,
    and every pause for the charts."""
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
