"""The verdict's next step in a tune: a configuration whose capacity run found its requests queued at a full pool at
its knee (the backend pool, Tomcat's threads, HTTPD's workers: lab/analysis/queues.py names the knob that sizes it)
is followed, ahead of the sampler's own proposals, by the same configuration with that pool widened: to the calls
in flight at the knee where they are known (the backend pool: its connections and the calls that waited for one),
else to twice its size, within the dimension's range and on its grid. So the search climbs the chain of bottlenecks
as an engineer reading the verdicts would (the pool, then Tomcat's threads behind it, then HTTPD's workers), while
the sampler explores the rest of the space. A knee at the host's CPUs, or at no full pool, names no knob: nothing is
queued, for no pool's size would help there. Nor after a configuration that broke a constraint: a wider pool holds
more memory, not less."""
from __future__ import annotations

import math
from dataclasses import dataclass

from lab.tune.space import Space, Value


@dataclass(frozen=True)
class Step:
    """The configuration to measure next: point with one dimension widened, and why."""
    point: dict[str, Value]
    dimension: str
    before: int
    after: int
    why: str


def next_step(space: Space, number: int, point: dict[str, Value], figures: dict, feasible: bool) -> Step | None:
    """After configuration number (its point, and its outcome's figures: knee_knob, knee_waiting, queued_at), the
    configuration its knee's verdict points to, or None (no full pool, a knob the space does not search, the
    dimension already at its top, or a constraint broken)."""
    knob = figures.get("knee_knob")
    if not feasible or not isinstance(knob, str):
        return None
    name = space.dimension_setting(knob)
    before = point.get(name) if name else None
    if name is None or not isinstance(before, int) or isinstance(before, bool):
        return None
    waiting = figures.get("knee_waiting")
    wanted = max(2 * before, before + math.ceil(waiting) if isinstance(waiting, (int, float)) else 0)
    after = space.dimensions[name].nearest_at_least(wanted)
    if after <= before:
        return None
    in_flight = (f", {waiting:.0f} calls waiting beside its {before}" if isinstance(waiting, (int, float))
                 and waiting > 0 else "")
    why = (f"configuration {number}'s knee: requests queued at {figures.get('queued_at') or knob} ({knob}"
           f"{in_flight}): {name} {before} -> {after}")
    return Step({**point, name: after}, name, before, after, why)
