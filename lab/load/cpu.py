"""The load generator's side of the run, sampled while JMeter runs: the host's CPU time (/proc/stat)
and JMeter's own (/proc/<pid>/stat), as cumulative counters in jmeter/loadgen.csv. The verdict
(lab/analysis/verdict.py) reads them to tell a saturated host or load generator from a result."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path

COLUMNS = ("time", "host_busy_s", "host_idle_s", "host_cpus", "loadgen_pid", "loadgen_cpu_s")
SAMPLE_EVERY_S = 1.0
_TICK = os.sysconf("SC_CLK_TCK")


def host_times() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole host since boot, summed over its CPUs."""
    with open("/proc/stat") as stream:
        fields = [int(v) for v in stream.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is already inside user)
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK, (idle + iowait) / _TICK


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (all its threads), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            after_name = stream.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(after_name[11]) + int(after_name[12])) / _TICK     # fields 14 and 15 of proc(5)


class CpuSampler:
    """Appends a row to path at most every SAMPLE_EVERY_S; a row's counters are read together."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next_at = 0.0
        self.cpus = os.cpu_count() or 0
        if not path.is_file():
            with path.open("w", newline="") as stream:
                csv.writer(stream).writerow(COLUMNS)

    def sample(self, pids: tuple[int, ...], force: bool = False) -> None:
        """A row per process of the load generator (JMeter, and remote engines on this host), read together."""
        now = time.monotonic()
        if not force and now < self.next_at:
            return
        self.next_at = now + SAMPLE_EVERY_S
        busy, idle = host_times()
        stamp = f"{time.time():.3f}"
        with self.path.open("a", newline="") as stream:
            writer = csv.writer(stream)
            for pid in pids:
                own = process_cpu_s(pid)
                writer.writerow([stamp, f"{busy:.2f}", f"{idle:.2f}", self.cpus, pid,
                                 "" if own is None else f"{own:.2f}"])
