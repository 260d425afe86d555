"""Where a load run's steady state begins: MSER-5 on its per-second throughput and mean latency.

MSER (White 1997, "An effective truncation heuristic for bias reduction in simulation output", Simulation 69(6))
drops the leading batches that most inflate the standard error of the mean of what remains. The truncation is
searched in the first half of the load only: over the last batches MSER is mostly noise and dips by chance (its known
end effect; Hoad, Robinson & Davies 2010). A minimum on that half's edge may lie beyond it: the load then settled
only if what remains shows no trend (a least-squares slope over its batch means that is both significant, |t| > 2,
and large, a change of more than 5% across it). Figures measured during the warm-up describe a different system
than the steady state, so they are cut. Checked by simulation (flat, autocorrelated, warm-up and drifting series):
a flat series of the quick run's length is called settled, a series rising throughout is not.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

BATCH_S = 5  # MSER-5: batch means of 5 one-second observations smooth the per-second noise
MIN_STEADY_S = 30  # shorter than this after truncation: too short to call steady
MIN_BATCHES = 4  # fewer batches leave MSER nothing to compare
TREND_T = 2.0  # |slope / its standard error| above this: the trend is not noise
TREND_CHANGE = 0.05  # and it changes the series by more than this share across what remains

RULE = (f"warm-up detected by MSER-{BATCH_S} (White 1997) on the per-second throughput and mean latency after the "
        f"ramp-up, searched in the first half of the load and leaving at least {MIN_STEADY_S} s; the steady state starts "
        "at the later of the two truncation points; a truncation on the search's edge with a trend in what remains "
        "(|t| > 2 and over 5%) means the run did not settle")


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


def _batch_means(values: Sequence[float], batch: int) -> np.ndarray:
    k = len(values) // batch
    return np.asarray(values[:k * batch], dtype=float).reshape(k, batch).mean(axis=1)


def _mser_minimum(means: np.ndarray, last: int) -> int:
    """The batch index d in 0 .. last where MSER(d) = sum((Y_j - mean)^2 over j >= d) / (k - d)^2 is smallest
    (the first on ties)."""
    k = len(means)
    scores = [float(np.sum((means[d:] - means[d:].mean()) ** 2)) / (k - d) ** 2 for d in range(last + 1)]
    return int(np.argmin(scores))


def trend(means: np.ndarray) -> tuple[bool, float]:
    """(whether the batch means still trend, their fitted change across them as a share of their mean)."""
    if len(means) < 3 or not means.mean():
        return False, 0.0
    x = np.arange(len(means), dtype=float)
    slope, intercept = np.polyfit(x, means, 1)
    change = float(abs(slope) * (len(means) - 1) / abs(means.mean()))
    residual = means - (intercept + slope * x)
    spread = float(np.sqrt(np.sum(residual ** 2) / (len(means) - 2) / np.sum((x - x.mean()) ** 2)))
    significant = abs(slope) > TREND_T * spread if spread > 0 else slope != 0
    return bool(significant and change > TREND_CHANGE), change


def mser_truncation(values: Sequence[float], batch: int = BATCH_S, keep: int = 2) -> int | None:
    """Index (in observations, a multiple of batch) where MSER-batch truncates, searched over the first half and
    leaving at least `keep` batches; None when the run did not settle (the minimum on that search's edge with a
    trend in what remains) or has fewer than 4 batches or than `keep`."""
    means = _batch_means(values, batch)
    if len(means) < max(MIN_BATCHES, keep):
        return None
    last = min(len(means) // 2, len(means) - keep)
    d = _mser_minimum(means, last)
    if d == last and trend(means[d:])[0]:
        return None
    return d * batch


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
    keep = math.ceil(MIN_STEADY_S / BATCH_S)  # batches a truncation must leave
    need = max(MIN_BATCHES * BATCH_S, MIN_STEADY_S)
    if n < need:
        return SteadyState(False, None, None, {name: None for name in series},
                           f"only {n} s of load after the ramp-up, fewer than {need} s")
    by_series: dict[str, float | None] = {}
    unsettled: list[str] = []
    for name, values in series.items():
        cut = None if values is None else mser_truncation(values, BATCH_S, keep)
        by_series[name] = None if cut is None else float(first + cut)
        if values is not None and cut is None:
            means = _batch_means(values, BATCH_S)
            last = min(len(means) // 2, len(means) - keep)
            unsettled.append(f"{name} had not settled: its warm-up lasts at least {last * BATCH_S} s of the {n} s "
                             f"of load after the ramp-up, and the rest still changes by {trend(means[last:])[1]:.0%}")
    if unsettled:
        return SteadyState(False, None, None, by_series, "; ".join(unsettled))
    start = max(v for v in by_series.values() if v is not None)
    remaining = first + n - start
    if remaining < MIN_STEADY_S:
        return SteadyState(False, None, None, by_series,
                           f"only {remaining:g} s remain after the warm-up, fewer than {MIN_STEADY_S} s")
    return SteadyState(True, start, round(max(0.0, start - earliest_s), 3), by_series, None)
