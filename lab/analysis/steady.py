"""Where a load run's steady state begins: MSER-5 on its per-second throughput and mean latency.

MSER (White 1997, "An effective truncation heuristic for bias reduction in simulation output", Simulation 69(6))
drops the leading batches that most inflate the standard error of the mean of what remains; a minimum in the second
half of the run means the run is too short for its warm-up to be told apart (Franklin & White 2008; Hoad, Robinson &
Davies 2010). Figures measured during the warm-up describe a different system than the steady state, so they are cut.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

BATCH_S = 5  # MSER-5: batch means of 5 one-second observations smooth the per-second noise
MIN_STEADY_S = 30  # shorter than this after truncation: too short to call steady
MIN_BATCHES = 4  # fewer batches leave MSER nothing to compare

RULE = (f"warm-up detected by MSER-{BATCH_S} (White 1997) on the per-second throughput and mean latency after the "
        "ramp-up: the steady state starts where the later of the two truncation points lies; only truncations leaving "
        f"at least {MIN_STEADY_S} s are searched, and a minimum in the second half of the load, or on that edge, means "
        "the run did not settle")


@dataclass(frozen=True)
class SteadyState:
    settled: bool  # False: the run is too short for its warm-up to be told apart
    start_s: float | None  # where the steady state begins (seconds from the run's start), None if not settled
    warmup_s: float | None  # start_s - earliest_s (the warm-up excluded beyond the ramp-up)
    by_series: dict[str, float | None]  # "throughput"/"latency" -> that series' own truncation point (s)
    reason: str | None  # one sentence when not settled, naming the figures
    rule: str = RULE  # the rule in one sentence, for the report

    def as_json(self) -> dict:
        """Plain JSON types, for the run's summary file."""
        return asdict(self)


def _mser_minimum(values: Sequence[float], batch: int, min_tail: int) -> tuple[int, int, int] | None:
    """(d*, k, last): the batch index where MSER is smallest (first on ties) among d = 0..last = k - min_tail, and
    the number of batches k; None if k < 4 or no truncation leaves min_tail batches."""
    k = len(values) // batch
    if k < MIN_BATCHES or k - min_tail < 0:
        return None
    means = np.asarray(values[:k * batch], dtype=float).reshape(k, batch).mean(axis=1)
    scores = [float(np.sum((means[d:] - means[d:].mean()) ** 2)) / (k - d) ** 2 for d in range(k - min_tail + 1)]
    return int(np.argmin(scores)), k, k - min_tail


def _settled(d_star: int, k: int, last: int) -> bool:
    """White's rule: a minimum in the second half means the run is too short; and a minimum on the edge of a search
    shortened below White's k - 2 may lie beyond it, so it is no minimum either."""
    return d_star <= k / 2 and not (d_star == last < k - 2)


def mser_truncation(values: Sequence[float], batch: int = BATCH_S, min_tail: int = 2) -> int | None:
    """Index (in observations, a multiple of batch) where MSER-batch truncates; None if the minimum lies in the
    second half of the batches (not settled) or there are fewer than 4 batches (nothing to tell apart).

    min_tail: the fewest batches a truncation may leave; 2 is White's definition (d = 0 .. k-2). MSER over the last
    few batches is mostly noise and often dips below every earlier value (its known end effect), so detect() searches
    only truncations that leave MIN_STEADY_S, the least it would accept anyway; a minimum on that edge is not settled."""
    found = _mser_minimum(values, batch, min_tail)
    if found is None or not _settled(*found):
        return None
    return found[0] * batch


def _filled(latency: Sequence[float | None]) -> list[float] | None:
    """None (no request completed that second) -> the previous value (the first value for leading gaps); None if
    there is no value at all, so latency is left out rather than invented."""
    known = [v for v in latency if v is not None]
    if not known:
        return None
    out, last = [], known[0]
    for value in latency:
        last = last if value is None else value
        out.append(float(last))
    return out


def detect(seconds: Sequence[int], throughput: Sequence[float], latency: Sequence[float | None],
           earliest_s: float, end_s: float) -> SteadyState:
    """The steady state of one machine's run: after the ramp-up (earliest_s), before the last partial second
    (floor(end_s)), from the later of the throughput and latency MSER-5 truncation points."""
    if not len(seconds) == len(throughput) == len(latency):
        raise ValueError(f"series of different lengths: {len(seconds)}, {len(throughput)}, {len(latency)}")
    lo, hi = math.ceil(earliest_s), math.floor(end_s)
    kept = [i for i, s in enumerate(seconds) if lo <= s < hi]
    n = len(kept)
    first = seconds[kept[0]] if kept else lo
    series: dict[str, list[float] | None] = {
        "throughput": [float(throughput[i]) for i in kept],
        "latency": _filled([latency[i] for i in kept]),
    }
    tail = math.ceil(MIN_STEADY_S / BATCH_S)  # batches: truncations leaving less are not searched
    need = max(MIN_BATCHES, tail) * BATCH_S
    if n < need:
        return SteadyState(False, None, None, {name: None for name in series},
                           f"only {n} s of load after the ramp-up, fewer than {need} s")
    by_series: dict[str, float | None] = {}
    unsettled: list[str] = []
    for name, values in series.items():
        cut = None if values is None else mser_truncation(values, BATCH_S, tail)
        by_series[name] = None if cut is None else float(first + cut)
        found = None if values is None or cut is not None else _mser_minimum(values, BATCH_S, tail)
        if found is not None:
            d_star, k, last = found
            edge = f", the latest point that leaves {MIN_STEADY_S} s" if d_star == last and d_star <= k / 2 else ""
            unsettled.append(f"{name} had not settled: MSER-{BATCH_S}'s minimum lies at {d_star * BATCH_S} s "
                             f"of {n} s of load after the ramp-up{edge}")
    if unsettled:
        return SteadyState(False, None, None, by_series, "; ".join(unsettled))
    start = max(v for v in by_series.values() if v is not None)
    remaining = first + n - start
    if remaining < MIN_STEADY_S:  # a safeguard: the search above leaves at least MIN_STEADY_S
        return SteadyState(False, None, None, by_series,
                           f"only {remaining:g} s remain after the warm-up, fewer than {MIN_STEADY_S} s")
    return SteadyState(True, start, round(max(0.0, start - earliest_s), 3), by_series, None)
