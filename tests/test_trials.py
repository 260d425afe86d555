"""The ratio's confidence interval over repeated trials (lab/analysis/trials.py), on known data."""
from __future__ import annotations

import itertools

import numpy
import pytest

from lab.analysis import trials

pytestmark = pytest.mark.fast


def exact_bootstrap(default: list[float], tuned: list[float], tail: float) -> tuple[float, float]:
    """Every one of the n^n equally likely resamples of n trials, enumerated: the interval the Monte Carlo
    bootstrap estimates."""
    n = len(default)
    ratios = [sum(tuned[i] for i in picks) / sum(default[i] for i in picks)
              for picks in itertools.product(range(n), repeat=n)]
    low, high = numpy.percentile(ratios, [tail, 100 - tail], method="inverted_cdf")   # a step distribution
    return float(low), float(high)


def test_three_trials_give_the_ratio_of_means_and_the_bootstrap_interval() -> None:
    default, tuned = [700.0, 760.0, 730.0], [780.0, 800.0, 840.0]
    got = trials.ratio_interval(default, tuned)
    assert got["ratio"] == pytest.approx(sum(tuned) / sum(default), abs=1e-6)
    assert got["points"] == pytest.approx([780 / 700, 800 / 760, 840 / 730], abs=1e-6)
    low, high = exact_bootstrap(default, tuned, 2.5)
    assert got["low"] == pytest.approx(low, abs=0.004) and got["high"] == pytest.approx(high, abs=0.004)
    assert got["low"] < got["ratio"] < got["high"] and got["trials"] == 3 and "narrower than a true 95%" in got["note"]
    assert trials.ratio_interval(default, tuned) == got          # seeded: the same trials, the same interval


def test_the_interval_covers_the_true_ratio_and_narrows_with_more_trials() -> None:
    rng = numpy.random.default_rng(7)
    default = list(750 * (1 + 0.03 * rng.standard_normal(30)))
    tuned = [d * 1.10 * (1 + 0.03 * e) for d, e in zip(default, rng.standard_normal(30), strict=True)]
    wide = trials.ratio_interval(default[:5], tuned[:5])
    narrow = trials.ratio_interval(default, tuned)
    assert narrow["low"] < 1.10 < narrow["high"] and "note" not in narrow
    assert narrow["high"] - narrow["low"] < wide["high"] - wide["low"]


def test_identical_trials_have_no_spread_and_one_trial_no_interval() -> None:
    same = trials.ratio_interval([500.0] * 4, [600.0] * 4)
    assert same["low"] == same["high"] == same["ratio"] == 1.2
    one = trials.ratio_interval([500.0], [550.0])
    assert one["ratio"] == 1.1 and one["low"] is None and one["high"] is None and "one trial" in one["note"]
    assert trials.ratio_interval([], [])["ratio"] is None
    with pytest.raises(ValueError, match="2 default and 1 tuned trials"):
        trials.ratio_interval([1.0, 2.0], [1.0])


def test_few_trials_give_a_narrower_interval_than_95_percent_as_the_note_says() -> None:
    # 300 simulated experiments whose true ratio is 1.10, each trial's figures 3% noisy: how often the interval
    # covers 1.10. The bootstrap cannot see beyond the trials it has, so with 3 it covers about 3 times in 4.
    rng = numpy.random.default_rng(11)

    def coverage(n: int) -> float:
        hits = 0
        for _ in range(300):
            default = 750 * (1 + 0.03 * rng.standard_normal(n))
            tuned = 1.10 * 750 * (1 + 0.03 * rng.standard_normal(n))
            got = trials.ratio_interval(list(default), list(tuned), resamples=2000)
            hits += got["low"] <= 1.10 <= got["high"]
        return hits / 300
    assert 0.65 <= coverage(3) <= 0.82
    assert coverage(10) >= 0.88
    assert "about 75% coverage" in trials.ratio_interval([1.0, 2.0, 3.0], [1.0, 2.0, 3.5])["note"]
    assert "note" not in trials.ratio_interval([1.0] * 5, [1.1] * 5)
