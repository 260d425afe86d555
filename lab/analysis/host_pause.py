"""When the host JMeter runs on stood still: a stretch of wall-clock time in which its CPUs counted no time at all,
busy, idle or stolen (jmeter/loadgen.csv: /proc/stat beside the clock, lab/load/cpu.py). A virtual host its hypervisor
pauses does this: every process stops, JMeter's too, and when the host resumes an open model sends the arrivals it
missed at once, a burst no machine was offered in the step's schedule. Measured: runs/20261205-014008 trial 1, the
host still 1.0 s of 1.96 s at 358 s of the load, in the tuned machine's knee step (1,000 req/s: p99 4.5 s, the
requests' connect times 1-4 s; its JVM's wall clock jumped 0.96 s past its uptime there), a machine that met
1,700 and 1,800 req/s in the next two trials. A step's miss after such a pause measured the host, not the machine:
the knee it gives is not counted (lab/ablation/folder.py, lab/experiment.py) and the report says so."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from lab.names import clock
from lab.runfolder import RunFolder

# Less than this unaccounted is the sampling's own jitter (the clock and /proc/stat are read one after the other).
PAUSE_MIN_S = 0.25
BASIS = ("jmeter/loadgen.csv, sampled every second while JMeter loads: wall-clock time in which the host's CPUs "
         f"counted no time (busy, idle or stolen, /proc/stat over its CPUs), {PAUSE_MIN_S} s or more; over the step "
         "and the timeouts before it (a request that arrived before a pause can still be waiting in it)")


class Pause(TypedDict):
    at: float           # epoch seconds of the sample before it
    seconds: float      # the wall-clock time the host's CPUs did not count


class Paused(TypedDict):
    """The pauses over a step: their time in all, when (seconds from the run's start), what it means."""
    seconds: float
    at_s: list[float]
    sentence: str
    basis: str


def pauses(rows: list[dict]) -> list[Pause]:
    """Each stretch between two samples (loadgen.read's rows, in time order; one row per JMeter process, read together)
    in which the wall clock ran on at least PAUSE_MIN_S past the time the host's CPUs counted."""
    found: list[Pause] = []
    previous: dict | None = None
    for row in rows:
        if previous is not None and row["time"] == previous["time"]:
            continue
        cpus = row.get("host_cpus")
        if previous is not None and cpus:
            wall = row["time"] - previous["time"]
            counted = (row["host_busy_s"] + row["host_idle_s"] - previous["host_busy_s"] - previous["host_idle_s"]) / cpus
            if wall - counted >= PAUSE_MIN_S:
                found.append({"at": previous["time"], "seconds": round(wall - counted, 3)})
        previous = row
    return found


def over(found: list[Pause], start_at: float, end_at: float, t0: float) -> Paused | None:
    """The pauses that overlap [start_at, end_at] (epoch seconds), or None."""
    inside = [p for p in found if p["at"] <= end_at and p["at"] + p["seconds"] >= start_at]
    if not inside:
        return None
    seconds = round(sum(p["seconds"] for p in inside), 3)
    at_s = [round(p["at"] - t0, 1) for p in inside]
    when = ", ".join(clock(at) for at in at_s)
    return {"seconds": seconds, "at_s": at_s, "basis": BASIS,
            "sentence": f"the host stood still {seconds:.1f} s at {when} (its CPUs counted no time, JMeter's "
                        "included): the arrivals it missed came at once after it, so this step's figures measured "
                        "the host, not the machine"}


def why_not_counted(machine: str, capacity: Mapping[str, Any] | None) -> str | None:
    """Why a machine's capacity is no figure because the host paused in its knee step (None: it did not)."""
    paused = ((capacity or {}).get("at_knee") or {}).get("host_paused")
    if not paused:
        return None
    return (f"the host stood still {paused['seconds']:.1f} s in the {machine} machine's knee step (at "
            f"{', '.join(clock(at) for at in paused['at_s'])}): that miss measured the host, not the machine")


def trial_not_counted(trial: RunFolder) -> str | None:
    """Why a summarised trial of a repeated capacity run is not counted: the host stood still in a machine's knee
    step (None: it counts)."""
    summary = trial.run_summary()
    machines = summary["machines"] if summary else {}
    return next((why for name, figures in machines.items()
                 if (why := why_not_counted(name, figures.get("capacity")))), None)
