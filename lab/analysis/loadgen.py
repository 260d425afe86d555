"""jmeter/loadgen.csv (lab/load/cpu.py) over a window: how busy the host's CPUs and JMeter were."""
from __future__ import annotations

import csv
from pathlib import Path

from lab.numbers import number


def read(path: Path) -> list[dict]:
    """The rows with their counters as numbers; unreadable rows are left out."""
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="") as stream:
        for row in csv.DictReader(stream):
            values = {key: number(row.get(key)) for key in ("time", "host_busy_s", "host_idle_s", "host_cpus",
                                                              "loadgen_pid", "loadgen_cpu_s")}
            if None not in (values["time"], values["host_busy_s"], values["host_idle_s"]):
                rows.append(values)
    return rows


def over(rows: list[dict], start_at: float, end_at: float) -> dict | None:
    """Mean host CPU use and JMeter's CPU between the first and last row inside [start_at, end_at]."""
    inside = [r for r in rows if start_at <= r["time"] <= end_at]
    if len(inside) < 2 or inside[-1]["time"] - inside[0]["time"] <= 0:
        return None
    first, last = inside[0], inside[-1]
    seconds = last["time"] - first["time"]
    busy = last["host_busy_s"] - first["host_busy_s"]
    idle = last["host_idle_s"] - first["host_idle_s"]
    # JMeter's CPU: the sum over each JMeter process's own rows (a sequential run has one per machine).
    jmeter = 0.0
    by_pid: dict[float, list[float]] = {}
    for row in inside:
        if row["loadgen_pid"] is not None and row["loadgen_cpu_s"] is not None:
            by_pid.setdefault(row["loadgen_pid"], []).append(row["loadgen_cpu_s"])
    for counters in by_pid.values():
        jmeter += counters[-1] - counters[0]
    return {"seconds": round(seconds, 3), "host_cpus": int(last["host_cpus"] or 0),
            "host_busy_cores": round(busy / seconds, 3),
            "host_idle_pct": round(100.0 * idle / (busy + idle), 2) if busy + idle > 0 else None,
            "loadgen_cores": round(jmeter / seconds, 3) if by_pid else None,
            "source": "jmeter/loadgen.csv: /proc/stat of the host JMeter ran on, and /proc/<pid>/stat of JMeter"}
