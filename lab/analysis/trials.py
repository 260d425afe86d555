"""Repeated trials: a ratio between the machines with its 95% confidence interval, by a paired
percentile bootstrap over the trials (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993,
ch. 13). Paired: a trial loads both machines under the same host conditions, so trials are resampled
whole, keeping each trial's default and tuned figures together."""
from __future__ import annotations

import numpy

from lab.numbers import mean

RESAMPLES = 10_000
CONFIDENCE = 0.95
SEED = 20180101             # fixed: the same trials give the same interval
METHOD = f"paired percentile bootstrap over the trials, {RESAMPLES:,} resamples"
# Below this many trials the bootstrap's interval is too narrow to be called 95% (simulated here: it covers the
# true ratio in about 3 runs of 4 at 3 trials, 9 of 10 at 5): the report says so and colours no ratio.
FEW_TRIALS = 5


def ratio_interval(default: list[float], tuned: list[float], confidence: float = CONFIDENCE,
                   resamples: int = RESAMPLES) -> dict:
    """mean(tuned) / mean(default) over the trials, with its bootstrap interval (None with one trial)."""
    if len(default) != len(tuned):
        raise ValueError(f"{len(default)} default and {len(tuned)} tuned trials: they must pair up")
    pairs = [(d, t) for d, t in zip(default, tuned, strict=True) if d is not None and t is not None]
    result: dict = {"trials": len(pairs), "confidence": confidence, "low": None, "high": None,
                    "ratio": None, "points": [round(t / d, 6) if d else None for d, t in pairs],
                    "method": METHOD}
    if not pairs or sum(d for d, _ in pairs) == 0:
        result["note"] = "no trial with figures for both machines"
        return result
    d, t = (numpy.array(column, dtype=float) for column in zip(*pairs, strict=True))
    result["ratio"] = round(float(t.mean() / d.mean()), 6)
    if len(pairs) < 2:
        result["note"] = "one trial: no interval (--repeat N gives one)"
        return result
    picks = numpy.random.default_rng(SEED).integers(0, len(pairs), size=(resamples, len(pairs)))
    sums = d[picks].sum(axis=1)
    low, high = percentile_interval(t[picks].sum(axis=1)[sums > 0] / sums[sums > 0], confidence)
    result.update(low=round(low, 6), high=round(high, 6))
    if few_trials_note(len(pairs)):
        result["note"] = few_trials_note(len(pairs))
    return result


def resampled_means(values, rng: numpy.random.Generator, resamples: int = RESAMPLES) -> numpy.ndarray:
    """The mean of each of `resamples` bootstrap resamples (with replacement, same size) of values."""
    data = numpy.asarray(values, dtype=float)
    return data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)


def percentile_interval(draws: numpy.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile bootstrap interval of a statistic's resampled draws."""
    tail = (1 - confidence) / 2 * 100
    low, high = numpy.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def few_trials_note(trials: int) -> str | None:
    """What an interval from this many trials is worth, when it is less than its name says."""
    if not 2 <= trials < FEW_TRIALS:
        return None
    return (f"{trials} trials: the interval is narrower than a true 95% one (about {'75' if trials <= 3 else '85'}% "
            f"coverage); {FEW_TRIALS} or more make it honest")


def unpaired_interval(before: list[float], after: list[float], confidence: float = CONFIDENCE,
                      resamples: int = RESAMPLES) -> dict:
    """mean(after) / mean(before) for two independent sets of trials (two runs: nothing pairs their trials),
    with a percentile bootstrap interval resampling each set on its own (None unless both have 2 or more)."""
    a = numpy.array([v for v in before if v is not None], dtype=float)
    b = numpy.array([v for v in after if v is not None], dtype=float)
    result: dict = {"trials": [len(a), len(b)], "confidence": confidence, "low": None, "high": None, "ratio": None,
                    "method": f"percentile bootstrap, each run's trials resampled on their own, {resamples:,} resamples"}
    if not len(a) or not len(b) or a.mean() == 0:
        result["note"] = "no figure in one of the runs" if not len(a) or not len(b) else "0 in the first run"
        return result
    result["ratio"] = round(float(b.mean() / a.mean()), 6)
    if len(a) < 2 or len(b) < 2:
        result["note"] = "a run of one trial: no interval (--repeat N gives one)"
        return result
    rng = numpy.random.default_rng(SEED)
    means_a, means_b = resampled_means(a, rng, resamples), resampled_means(b, rng, resamples)
    low, high = percentile_interval(means_b[means_a > 0] / means_a[means_a > 0], confidence)
    result.update(low=round(low, 6), high=round(high, 6))
    note = few_trials_note(min(len(a), len(b)))
    if note:
        result["note"] = note
    return result


def mean_interval(values: list[float | None], confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> dict:
    """One machine's figure over the trials (a capacity): its mean, with a percentile bootstrap interval of the
    mean (None with fewer than 2 trials)."""
    data = [float(v) for v in values if v is not None]
    result: dict = {"mean": mean(data), "low": None, "high": None,
                    "trials": len(data), "confidence": confidence,
                    "method": f"percentile bootstrap of the mean over the trials, {resamples:,} resamples"}
    if len(data) < 2:
        result["note"] = "one trial: no interval (--repeat N gives one)" if data else "no trial with the figure"
        return result
    low, high = percentile_interval(resampled_means(data, numpy.random.default_rng(SEED), resamples), confidence)
    result.update(low=round(low, 6), high=round(high, 6))
    if few_trials_note(len(data)):
        result["note"] = few_trials_note(len(data))
    return result
