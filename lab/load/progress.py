"""Progress while JMeter runs: the complete records appended to each machine's results CSV, turned
into a line per machine and a bar."""
from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.load.openmodel import StepWatch
from lab.load.results import csv_rows
from lab.names import clock
from lab.numbers import percentile


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
        rows = csv_rows(records.decode("utf-8", errors="replace"))
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
    p95_ms: float | None = None
    last_poll: float | None = None
    watch: StepWatch | None = None          # an open model's steps: whether the machine is past its capacity
    ended_early_s: float | None = None      # its load ended this long after it started: the SLO was missed
    alone_ms: int | None = None             # the end (epoch ms) of its last sample JMeter ran no other thread beside
    tail: _CsvTail = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.tail = _CsvTail(self.results)

    def start(self, now: float) -> None:
        self.state, self.started, self.last_poll = "running", now, now

    def poll(self, now: float, rate: bool = True) -> None:
        """The records appended since the last poll counted; rate False: its rate and p95 left as they were (the
        drain after Shutdown is not what it ran at)."""
        rows = self.tail.read()
        columns = self.tail.columns or {}
        elapsed_i, success_i, threads_i = columns.get("elapsed"), columns.get("success"), columns.get("grpThreads")
        start_i, all_i = columns.get("timeStamp"), columns.get("allThreads")
        interval = []
        for row in rows:
            self.samples += 1
            ok = not (success_i is not None and success_i < len(row) and row[success_i] != "true")
            self.errors += not ok
            if elapsed_i is not None and elapsed_i < len(row) and row[elapsed_i].isdigit():
                interval.append(int(row[elapsed_i]))
                if start_i is not None and start_i < len(row) and row[start_i].isdigit():
                    if self.watch is not None:
                        self.watch.add(int(row[start_i]), interval[-1], ok)
                    if all_i is not None and all_i < len(row) and row[all_i].isdigit() and int(row[all_i]) <= 1:
                        self.alone_ms = max(self.alone_ms or 0, int(row[start_i]) + interval[-1])
        if self.watch is not None:
            self.watch.update(time.time() * 1000)
        if rows and threads_i is not None and threads_i < len(rows[-1]) and rows[-1][threads_i].isdigit():
            self.active_threads = int(rows[-1][threads_i])
        if not rate:
            return
        span = now - (self.last_poll or now)
        self.requests_per_s = len(rows) / span if span > 0.05 else self.requests_per_s
        self.p95_ms = percentile(sorted(interval), 95)
        self.last_poll = now

    @property
    def broken(self) -> bool:
        return self.watch is not None and self.watch.broken

    @property
    def answered(self) -> bool:
        """Its open model's every arrival has its sample: its schedule has nothing more to send or to wait for."""
        return self.watch is not None and self.watch.answered

    def finish(self, now: float) -> None:
        """Its last records counted; its line keeps the rate and p95 it last ran at: the stretch since the last
        poll is its load's end, a drain and idle time (its rate there read 434 req/s for a machine that ran at 695)."""
        running, counted = (self.requests_per_s, self.p95_ms), self.samples
        self.poll(now)
        if counted:                         # else it ended before its first poll: what it did is all there is
            self.requests_per_s, self.p95_ms = running
        self.state, self.finished, self.active_threads = "done", now, 0

    def snapshot(self, now: float) -> dict:
        end = self.finished if self.finished is not None else now
        return {"state": self.state,
                "elapsed_s": round(end - self.started, 1) if self.started is not None else 0.0,
                "samples": self.samples, "requests_per_s": round(self.requests_per_s, 1),
                "errors": self.errors, "error_rate": self.errors / self.samples if self.samples else 0.0,
                "p95_ms": self.p95_ms, "active_threads": self.active_threads,
                "broken": self.broken, "capacity_rps": self.watch.capacity_rps if self.watch else None}


def drained(machines: list[_MachineProgress], at_rest: Callable[[list[str]], bool] | None, since_ms: float) -> bool:
    """Whether every sample running at since_ms (epoch ms) has ended: one that ended after it while JMeter ran no
    other thread (its allThreads 1). For an open model's plan: its watch thread counts until Shutdown, and no
    arrival starts after it. And then, when at_rest is given, whether the machines serve nothing more: past a knee a
    machine still serves requests whose clients gave up, and the next load (a refinement's, the other machine's, a
    tune's next configuration) must not begin on it (one that did missed its SLO from its first step)."""
    now = time.monotonic()
    for machine in machines:
        machine.poll(now, rate=False)
    # every arrival answered: nothing was in flight at since_ms, so no sample ends after it
    return (all(machine.answered for machine in machines)
            or any(machine.alone_ms is not None and machine.alone_ms >= since_ms for machine in machines)) and (
        at_rest is None or at_rest([machine.machine for machine in machines]))


# ------------------------------------------------------------------------------------------ progress

def format_progress(progress: dict) -> str:
    """One line per machine: `default  02:31  412.5 req/s  errors 3 (0.1%)  p95 38 ms  users 150`."""
    lines = []
    for machine, m in progress["machines"].items():
        if m["state"] == "waiting":
            lines.append(f"{machine:<8} --:--  waiting")
            continue
        p95 = f"{m['p95_ms']:.0f} ms" if m["p95_ms"] is not None else "- ms"
        state = "" if m["state"] == "running" else f"  ({m['state']})"
        lines.append(f"{machine:<8} {clock(m['elapsed_s'], fixed=True)}  {m['requests_per_s']:.1f} req/s  "
                     f"errors {m['errors']} ({m['error_rate'] * 100:.1f}%)  p95 {p95}  "
                     f"users {m['active_threads']}{state}")
    return "\n".join(lines)


def progress_bar(progress: dict, width: int = 30) -> str:
    """The whole run: `[#########.....................]  31%  07:10 / 23:00  parallel`."""
    planned = max(1.0, float(progress["planned_s"]))
    fraction = min(1.0, progress["elapsed_s"] / planned)
    filled = int(round(fraction * width))
    return (f"[{'#' * filled}{'.' * (width - filled)}] {fraction * 100:3.0f}%  "
            f"{clock(progress['elapsed_s'], fixed=True)} / {clock(planned, fixed=True)}  {progress['schedule']}")



def print_progress(progress: dict) -> None:
    """The bar and a line per machine, on stderr: what ./start.sh run shows every few seconds."""
    print(progress_bar(progress), file=sys.stderr)
    print(format_progress(progress), file=sys.stderr, flush=True)
