"""One machine's JMeter results: the samples of results.csv, and the load figures made from them.

Definitions (also shown in the report):
- a sample's time is its end (JMeter's timeStamp, the start, + elapsed): when the client saw the
  answer or the error. Times are epoch seconds (`*_at`) or seconds from the run's start (`*_s`).
- steady-state window of a machine: from its first sample's start + the profile's ramp-up, to its
  last sample's end. Samples that *started* in it count for the steady figures.
- throughput = samples in the window / window length; error rate = failed / samples.
- percentiles: nearest rank, over every sample, failed ones included (as JMeter's dashboard).
- the error-rate threshold is crossed in the first 10-second bucket (by sample end) whose error rate
  is above 1 %.
"""
from __future__ import annotations

import csv
import math
import time
from collections import Counter, defaultdict
from pathlib import Path

from lab.analysis.numbers import percentile

PERCENTILES = (50, 90, 95, 99)
ERROR_RATE_THRESHOLD = 0.01
THRESHOLD_BUCKET_S = 10                 # = LATENCY_BUCKET_S: the threshold is read on the latency buckets
THRESHOLD_MIN_SAMPLES = 10              # a bucket with fewer requests says too little to count
LATENCY_BUCKET_S = THRESHOLD_BUCKET_S
# A row JMeter could have written: started during the run (run.json's times, RUN_MARGIN_MS either
# side), else after 2000 and not in the future; no sample longer than a day. A corrupt digit otherwise
# makes the per-second series span years (and exhaust memory).
RUN_MARGIN_MS = 300_000
EARLIEST_START_MS = 946_684_800_000
LONGEST_SAMPLE_MS = 86_400_000


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


def read_results(path: Path, window_ms: tuple[float, float] | None = None) -> Samples:
    """JMeter's default CSV (header line; timeStamp in ms). Broken or partial rows are skipped, and so
    are rows that started outside window_ms (the run's own time, when run.json gives it)."""
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
        earliest, latest = window_ms or (EARLIEST_START_MS, (time.time() + 86_400) * 1000)
        for row in reader:
            if len(row) < width or not row[ts].isdecimal() or not row[el].removeprefix("-").isdecimal() \
                    or row[su] not in ("true", "false") \
                    or not earliest <= int(row[ts]) <= latest or int(row[el]) > LONGEST_SAMPLE_MS:
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

