"""One machine's JMeter results: the samples of results.csv, and the load figures made from them.

Definitions (also shown in the report):
- a sample's time is its end (JMeter's timeStamp, the start, + elapsed): when the client saw the
  answer or the error. Times are epoch seconds (`*_at`) or seconds from the run's start (`*_s`).
- steady-state window of a machine: from where its warm-up ends (lab/analysis/steady.py: MSER-5 on
  its per-second throughput and latency, never before the ramp-up's end) to its last sample's end.
  Samples that *started* in it count for the steady figures.
- throughput = samples in the window / window length; error rate = failed / samples.
- percentiles: as JMeter's dashboard computes them (lab.numbers.percentile), over every
  sample, failed ones included. Beside the elapsed time: JMeter's Latency (time to the first byte of
  the answer) and Connect (time to open the connection, 0 when a kept-alive one is reused).
- the error-rate threshold is crossed in the first 10-second bucket (by sample end) whose error rate
  is above 1 %.
"""
from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from pathlib import Path

from lab.analysis import steady as steady_state
from lab.load import results
from lab.numbers import percentile

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
        self.latency: list[int | None] = []     # time to first byte (JMeter's Latency); None if not saved
        self.connect: list[int | None] = []     # time to connect (JMeter's Connect); None if not saved
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
        reader = results.reader(stream)         # whatever a field's length
        header = next(reader, None)
        if not header:
            return samples
        col = {name: i for i, name in enumerate(header)}
        need = ("timeStamp", "elapsed", "success")
        if any(name not in col for name in need):
            raise ValueError(f"{path}: not a JMeter CSV with a header (columns {header[:6]}…)")
        ts, el, su = col["timeStamp"], col["elapsed"], col["success"]
        rc, rm, fm = col.get("responseCode"), col.get("responseMessage"), col.get("failureMessage")
        gt, la, co = col.get("grpThreads"), col.get("Latency"), col.get("Connect")
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
            samples.latency.append(_milliseconds(row, la))
            samples.connect.append(_milliseconds(row, co))
    return samples


def _milliseconds(row: list[str], column: int | None) -> int | None:
    if column is None or column >= len(row) or not row[column].isdecimal():
        return None
    return int(row[column])


def _distribution(values: list) -> dict:
    """Percentiles, max and mean of the values that are there (None left out)."""
    ordered = sorted(v for v in values if v is not None)
    figures = {f"p{p}": percentile(ordered, p) for p in PERCENTILES}
    figures["max"] = ordered[-1] if ordered else None
    figures["mean"] = round(sum(ordered) / len(ordered), 3) if ordered else None
    return figures


def _stats(samples: Samples, indices: list[int], duration_s: float | None) -> dict:
    errors = sum(1 for i in indices if not samples.ok[i])
    per_second = (lambda count: round(count / duration_s, 3)) if duration_s and duration_s > 0 else (lambda _: None)
    return {"samples": len(indices), "errors": errors,
            "error_rate": round(errors / len(indices), 6) if indices else None,
            "throughput_rps": per_second(len(indices)), "good_throughput_rps": per_second(len(indices) - errors),
            "duration_s": round(duration_s, 3) if duration_s is not None else None,
            "latency_ms": _distribution([samples.elapsed[i] for i in indices]),
            "first_byte_ms": _distribution([samples.latency[i] for i in indices]),
            "connect_ms": _distribution([samples.connect[i] for i in indices])}


# Errors of the load generator's own: no local port left for a new connection (TIME_WAIT) is JMeter's
# host running out, not the machine refusing.
CLIENT_SIDE = ("BindException", "Cannot assign requested address")


def client_side(label: str) -> bool:
    """A failure the load generator made itself (an error_label)."""
    return any(mark in label for mark in CLIENT_SIDE)


# Failures grouped the way an engineer reads a breaking point (error_class), most specific first.
ERROR_CLASSES = (
    ("no local port (JMeter's)", CLIENT_SIDE),
    ("connect timeout", ("ConnectTimeoutException", "connect timed out")),
    ("connection refused", ("Connection refused", "HttpHostConnectException")),
    ("response timeout", ("SocketTimeoutException", "Read timed out")),
    ("connection reset", ("Connection reset", "NoHttpResponseException", "failed to respond")),
)


def error_class(label: str) -> str:
    """An error_label's class: a network failure by its kind, an HTTP one by its status (502, 503, 504, 5xx,
    4xx), else 'other'."""
    for name, marks in ERROR_CLASSES:
        if any(mark in label for mark in marks):
            return name
    code = label.split(" ", 1)[0]
    if code in ("502", "503", "504"):
        return code
    if len(code) == 3 and code.isdigit() and code[0] in "45":
        return f"{code[0]}xx"
    return "other"


def client_errors(load: dict) -> int:
    """How many of a load's failures (its errors_by_type) the load generator made itself."""
    return sum(int(e.get("count") or 0) for e in load.get("errors_by_type") or [] if client_side(str(e.get("error"))))


def error_label(code: str, message: str) -> str:
    """One failure's kind as a person reads it: JMeter's code and message without its prefixes."""
    code = code.strip()
    message = message.strip()
    for prefix in ("Non HTTP response code: ", "Non HTTP response message: "):
        code = code.replace(prefix, "")
        message = message.replace(prefix, "")
    if message and message != code:
        return f"{code} {message}".strip()
    return code or message or "failed"


def analyze_load(samples: Samples, t0: float, ramp_s: float, series: dict, steady: bool = True) -> dict:
    """Figures of one machine's samples; fills series with its per-second and per-10-s series. steady=False
    (an open model's steps, whose load changes by design): the window is the whole load, settled None."""
    n = len(samples)
    first_start = min(samples.start) / 1000.0
    last_end = max(samples.end(i) for i in range(n)) / 1000.0
    _fill_series(samples, t0, series)
    ramp_end = min(first_start + ramp_s, last_end)
    if steady:
        settled = steady_state.detect(series["seconds"], series["throughput_rps"], series["mean_ms"],
                                      earliest_s=ramp_end - t0, end_s=last_end - t0)
        steady_start = t0 + settled.start_s if settled.settled and settled.start_s is not None else ramp_end
        found = {"settled": settled.settled, "warmup_s": settled.warmup_s, "detection": settled.as_json(),
                 "basis": "from the end of the warm-up (" + settled.rule + ") to the last sample's end; "
                          "samples that started in it"}
    else:
        steady_start = first_start
        found = {"settled": None, "warmup_s": None, "detection": None,
                 "basis": "the whole load: its rate steps up by design, so no steady state is looked for"}
    window: dict = {"start_at": round(steady_start, 3), "end_at": round(last_end, 3),
                    "start_s": round(steady_start - t0, 3), "end_s": round(last_end - t0, 3),
                    "duration_s": round(last_end - steady_start, 3), "ramp_end_s": round(ramp_end - t0, 3), **found}
    if window["duration_s"] <= 0:
        window["note"] = "no steady state: the load ended before the ramp-up did"
    elif steady and not settled.settled:
        window["note"] = f"no steady state: {settled.reason}"
    steady_ms = steady_start * 1000.0
    in_window = [i for i in range(n) if samples.start[i] >= steady_ms]
    result: dict = {"load_start_s": round(first_start - t0, 3), "load_end_s": round(last_end - t0, 3),
                    "window": window}
    result["steady"] = _stats(samples, in_window, window["duration_s"])
    result["all"] = _stats(samples, list(range(n)), last_end - first_start)
    for key in ("samples", "errors", "error_rate", "throughput_rps", "good_throughput_rps"):
        result[key] = result["steady"][key]
    for key in ("latency_ms", "first_byte_ms", "connect_ms"):
        result[key] = result["steady"][key]
    result["skipped_rows"] = samples.skipped
    result["max_active_users"] = max(samples.threads) if samples.threads else None
    result.update(_errors(samples, t0))
    result["error_threshold"] = _error_threshold(series)
    return result


def _errors(samples: Samples, t0: float) -> dict:
    """The first error (when, from the run's t0, and what) and the most frequent kinds of error, over every sample."""
    failed = [i for i in range(len(samples)) if not samples.ok[i]]
    if not failed:
        return {"first_error_s": None, "first_error": None, "errors_by_type": []}
    first = min(failed, key=lambda i: (samples.end(i), samples.start[i]))
    at_s = round(samples.end(first) / 1000.0 - t0, 3)
    kinds = Counter(error_label(samples.code[i], samples.message[i]) for i in failed)
    return {"first_error_s": at_s,
            "first_error": {"at": samples.end(first) / 1000.0, "at_s": at_s,
                            "response_code": samples.code[first], "response_message": samples.message[first],
                            "failure_message": samples.failure[first][:500], "active_users": samples.threads[first],
                            "label": error_label(samples.code[first], samples.message[first])},
            "errors_by_type": [{"error": k, "count": v} for k, v in kinds.most_common(8)]}


def _error_threshold(series: dict) -> dict:
    """Where the error rate first crossed ERROR_RATE_THRESHOLD, from the 10-s buckets of series."""
    rows = [(start, count, rate) for start, count, rate in
            zip(series["buckets"], series["bucket_samples"], series["bucket_error_rate"], strict=True)
            if count >= THRESHOLD_MIN_SAMPLES]
    above = [(start, count, rate) for start, count, rate in rows if rate > ERROR_RATE_THRESHOLD]
    crossed = above[0] if above else None
    return {"threshold": ERROR_RATE_THRESHOLD, "bucket_s": THRESHOLD_BUCKET_S,
            "crossed_at_s": crossed[0] if crossed else None,
            "bucket_error_rate": round(crossed[2], 6) if crossed else None,
            "bucket_samples": crossed[1] if crossed else None,
            "buckets_above": len(above), "buckets": len(rows), "min_samples": THRESHOLD_MIN_SAMPLES}


def _fill_series(samples: Samples, t0: float, series: dict) -> None:
    """Per-second throughput, errors, users and mean latency; per-10-s latency percentiles and error
    rate. Buckets by sample end, from the run's start."""
    per_second: dict[int, int] = defaultdict(int)
    elapsed_per_second: dict[int, int] = defaultdict(int)
    errors_per_second: dict[int, int] = defaultdict(int)
    users: dict[int, int] = defaultdict(int)
    buckets: dict[int, list[int]] = defaultdict(list)
    bucket_errors: dict[int, int] = defaultdict(int)
    for i in range(len(samples)):
        end_s = samples.end(i) / 1000.0 - t0
        second = math.floor(end_s)
        per_second[second] += 1
        elapsed_per_second[second] += samples.elapsed[i]
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
    series["mean_ms"] = [round(elapsed_per_second[s] / per_second[s], 3) if per_second.get(s) else None
                         for s in seconds]
    bucket_keys = sorted(buckets)
    series["bucket_s"] = LATENCY_BUCKET_S
    series["buckets"] = [k * LATENCY_BUCKET_S for k in bucket_keys]
    series["bucket_samples"] = [len(buckets[k]) for k in bucket_keys]
    for p in (50, 95, 99):
        series[f"p{p}_ms"] = [percentile(sorted(buckets[k]), p) for k in bucket_keys]
    series["bucket_error_rate"] = [bucket_errors.get(k, 0) / len(buckets[k]) for k in bucket_keys]
