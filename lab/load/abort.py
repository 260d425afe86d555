"""--stop-on-fail: the run's thresholds watched while JMeter loads, so that a run which has already lost one stops
instead of spending the rest of its duration (k6's abortOnFail). Judged on the progress JMeter's results give every
few seconds (lab/load/progress.py), for the thresholds such figures can lose:

- error_pct_max, p95_ms_max: over the limit once the ramp is over, in CONFIRM consecutive progress reports (the
  running error rate since the start, the p95 of the last interval), so one passing spike stops nothing;
- capacity_rps_min (a capacity run): the machine's load ended past its knee (its StepWatch) with a capacity below
  the limit, or none. The report's capacity, from every sample, is judged as found: it leaves out JMeter's own
  port errors, which the watch counts, so on a host out of client ports it can come out higher.

throughput_rps_min and ratio_min are judged on the whole run's figures only, at its end. A run stopped here keeps
what it measured, writes its report, and exits 3 like any run that broke a threshold (error_pct_max and p95_ms_max
are marked broken whatever the shortened load's figures say)."""
from __future__ import annotations

from lab.names import MACHINES

LIVE = ("error_pct_max", "p95_ms_max", "capacity_rps_min")
CONFIRM = 2


class ThresholdWatch:
    """Called with each progress report ({"elapsed_s", "machines": {m: snapshot}}): the first lost threshold once
    one is lost ({"threshold", "machine", "why"}); else None."""

    def __init__(self, limits: dict[str, float], ramp_s: float) -> None:
        self.ramp_s = ramp_s
        self.watched = [(name, machine, limit) for name, limit in limits.items()
                        if name.rpartition(".")[2] in LIVE
                        for machine in ([name.rpartition(".")[0]] if "." in name else MACHINES)]
        self.over: dict[tuple[str, str], int] = {}      # (threshold, machine) -> consecutive reports over it

    def __call__(self, progress: dict) -> dict | None:
        for name, machine, limit in self.watched:
            found = (progress.get("machines") or {}).get(machine)
            if not found or found.get("state") != "running" and not found.get("broken"):
                continue
            lost = self._lost(name, machine, found, limit)
            if lost:
                return {"threshold": name, "machine": machine,
                        "why": f"threshold {name} lost on {machine} after {found.get('elapsed_s', 0):.0f} s of its "
                               f"load: {lost}"}
        return None

    def _lost(self, name: str, machine: str, found: dict, limit: float) -> str | None:
        bare = name.rpartition(".")[2]
        if bare == "capacity_rps_min":
            if not found.get("broken"):
                return None
            capacity = found.get("capacity_rps")
            return (f"it passed its knee with a capacity of {capacity} req/s, below {limit:g}"
                    if capacity is not None and capacity < limit else
                    None if capacity is not None else "it missed the SLO from its first steps: no capacity")
        if float(found.get("elapsed_s") or 0) < self.ramp_s:
            return None
        value = found.get("error_rate", 0) * 100 if bare == "error_pct_max" else found.get("p95_ms")
        key = (name, machine)
        over = value is not None and value > limit
        self.over[key] = self.over.get(key, 0) + 1 if over else 0
        if self.over[key] < CONFIRM:
            return None
        shown = f"errors {value:.2f}% > {limit:g}%" if bare == "error_pct_max" else f"p95 {value:.0f} ms > {limit:g} ms"
        return f"{shown} in {CONFIRM} progress reports in a row"
