#!/usr/bin/env python3
"""Benchmark the mock service's raw throughput (a benchmark, not a test).

Starts the mock with `fixed:0` latency pinned to one core, drives it with wrk
pinned to another core, and prints one result line (or JSON with --json).

    python bench.py [--duration 10] [--connections 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
LATENCY = "fixed:0"
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mock exited early with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"mock not healthy at {url} after {timeout:.0f} s")


def parse_duration_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        raise ValueError(f"unrecognised wrk duration {text!r}")
    return float(m.group(1)) * _UNITS_MS[m.group(2)]


def parse_wrk(out: str) -> dict[str, float | int]:
    """Pull the figures we report out of wrk's human-readable output."""
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    total = re.search(r"^\s+(\d+) requests in", out, re.M)
    if not (rps and p99 and total):
        raise ValueError("could not parse wrk output:\n" + out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock_err = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    return {
        "requests_per_sec": float(rps.group(1)),
        "p99_ms": parse_duration_ms(p99.group(1)),
        "requests": int(total.group(1)),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(int(g) for g in sock_err.groups()) if sock_err else 0,
    }


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=int, default=10, help="seconds of load (default 10)")
    ap.add_argument("--connections", type=int, default=50, help="wrk connections (default 50)")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    ap.add_argument("--server-cpu", default="0", help="CPU the mock is pinned to (default 0)")
    ap.add_argument("--wrk-cpu", default="1", help="CPU wrk is pinned to (default 1)")
    ap.add_argument("--payload-bytes", type=int, default=5120, help="payload size (default 5120)")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs the mock")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if args.duration < 1 or args.connections < 1 or args.threads < 1:
        ap.error("--duration, --connections and --threads must be >= 1")
    if args.connections < args.threads:
        ap.error("--connections must be >= --threads (wrk's rule)")

    for tool, pkg in (("wrk", "wrk"), ("taskset", "util-linux")):
        if shutil.which(tool) is None:
            print(f"bench: error: {tool} not found; install it: apt-get install {pkg}",
                  file=sys.stderr)
            return 2

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = ["taskset", "-c", args.server_cpu, args.python, "-m", "mock_service",
           "--port", str(port), "--latency", LATENCY, "--error-rate", "0",
           "--payload-bytes", str(args.payload_bytes)]
    proc = subprocess.Popen(cmd, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            wait_healthy(f"{base}/health", proc)
        except RuntimeError as exc:
            stop(proc)
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            print(f"bench: error: {exc}" + (f": {err}" if err else ""), file=sys.stderr)
            return 1
        wrk = ["taskset", "-c", args.wrk_cpu, "wrk", f"-t{args.threads}",
               f"-c{args.connections}", f"-d{args.duration}s", "--latency", f"{base}/data"]
        done = subprocess.run(wrk, capture_output=True, text=True,
                              timeout=args.duration + 60)
        if done.returncode != 0:
            print(f"bench: error: wrk failed ({done.returncode}): {done.stderr.strip()}",
                  file=sys.stderr)
            return 1
        result = parse_wrk(done.stdout)
    finally:
        stop(proc)

    result.update(latency=LATENCY, cores=1, connections=args.connections,
                  duration_s=args.duration, threads=args.threads,
                  payload_bytes=args.payload_bytes)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        line = (f"mock-service: {result['requests_per_sec']:.0f} req/s at {LATENCY} on 1 core "
                f"(wrk {args.connections} connections, {args.duration} s, "
                f"p99 {result['p99_ms']:.2f} ms)")
        if result["non_2xx"] or result["socket_errors"]:
            line += (f" WARNING: {result['non_2xx']} non-2xx, "
                     f"{result['socket_errors']} socket errors")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
