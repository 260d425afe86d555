"""MSER-5 steady-state detection: a flat run settles at once, a warm-up is cut, a run that never settles says so."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from lab.analysis.steady import RULE, detect, mser_truncation

pytestmark = pytest.mark.fast

RAMP_S = 20


def run(throughput: np.ndarray, latency: list[float | None] | np.ndarray, ramp_s: int = RAMP_S):
    """The ramp-up's seconds (ignored by detection, made wild on purpose) then the given load, then a partial second."""
    rng = np.random.default_rng(99)
    n = ramp_s + len(throughput) + 1
    tp = list(rng.uniform(0, 2000, ramp_s)) + list(throughput) + [1.0]
    lat = list(rng.uniform(0, 2000, ramp_s)) + list(latency) + [5000.0]
    return detect(list(range(n)), tp, lat, float(ramp_s), n - 0.5)


def flat(seed: int, n: int = 300, mean: float = 750.0, sd: float = 20.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, sd, n)


def test_a_flat_noisy_series_settles_right_after_the_ramp():
    result = run(flat(1), flat(2, mean=50, sd=3))
    assert result.settled and result.reason is None
    assert RAMP_S <= result.start_s <= RAMP_S + 15
    assert result.warmup_s == result.start_s - RAMP_S
    assert result.rule == RULE and "MSER-5" in RULE
    json.dumps(result.as_json())


def warm_up(seed: int) -> np.ndarray:
    """Throughput rising linearly from 300 to 750 over the first 60 s after the ramp, then flat to 300 s."""
    tp = flat(seed)
    tp[:60] = np.linspace(300, 750, 60) + np.random.default_rng(seed + 1).normal(0, 20, 60)
    return tp


def test_a_linear_warm_up_is_cut():
    result = run(warm_up(0), flat(5, mean=50, sd=3))
    assert result.settled
    assert RAMP_S + 45 <= result.start_s <= RAMP_S + 80
    assert result.start_s == result.by_series["throughput"]


def test_a_linear_warm_up_is_cut_near_its_end_in_most_runs():
    # MSER sometimes cuts a few batches more than the warm-up, where the noise happens to lower the tail's error:
    # over 200 seeds, about 90 % start within 45..80 s of the ramp's end and the median is 60 s (the warm-up's end).
    starts = [run(warm_up(seed), flat(500 + seed, mean=50, sd=3)).start_s for seed in range(0, 400, 2)]
    cuts = np.array([s - RAMP_S for s in starts if s is not None])
    assert len(cuts) >= 180
    assert np.median(cuts) == 60
    assert np.mean((cuts >= 45) & (cuts <= 80)) >= 0.8
    assert cuts.min() >= 45


def test_the_later_truncation_governs_here_latency():
    lat = flat(7, mean=50, sd=3)
    lat[:80] = np.linspace(400, 50, 80) + np.random.default_rng(8).normal(0, 3, 80)
    result = run(flat(6), lat)
    assert result.settled
    assert result.by_series["latency"] > result.by_series["throughput"]
    assert result.start_s == result.by_series["latency"]
    assert RAMP_S + 50 <= result.start_s <= RAMP_S + 100


def test_a_series_rising_for_the_whole_run_does_not_settle():
    tp = np.linspace(100, 900, 300) + np.random.default_rng(9).normal(0, 20, 300)
    result = run(tp, flat(10, mean=50, sd=3))
    assert not result.settled and result.start_s is None and result.warmup_s is None
    assert result.by_series["throughput"] is None
    # the second half rises from about 500 to 900 req/s: a change of about 57% of its mean (700)
    assert re.fullmatch(r"throughput had not settled: its warm-up lasts at least 150 s of the 300 s of load after "
                        r"the ramp-up, and the rest still changes by 5\d%", result.reason), result.reason


def test_a_run_too_short_for_its_warm_up_does_not_settle():
    # 30 s of warm-up in 40 s: more than half, and the last half still rises
    tp = np.concatenate([np.linspace(300, 750, 30), flat(11, n=10)])
    result = run(tp, flat(12, n=40, mean=50, sd=3))
    assert not result.settled and result.start_s is None
    assert result.reason.startswith("throughput had not settled: its warm-up lasts at least 10 s of the 40 s")


def test_fewer_than_four_batches_is_not_settled():
    result = run(flat(13, n=19), flat(14, n=19, mean=50, sd=3))
    assert not result.settled
    assert result.reason == "only 19 s of load after the ramp-up, fewer than 30 s"
    assert result.by_series == {"throughput": None, "latency": None}


def test_mser_truncation_by_hand():
    # batch=1, k=6, Y = [10, 0, 0, 0, 0, 0], searched over d = 0..3 (the first half):
    #   d=0: mean 10/6, sum of squares = 100 - 6 * (10/6)^2 = 83.33, / 6^2 = 2.31
    #   d=1..3: the tail is all zeros, MSER = 0  -> argmin (smallest d on ties) is d* = 1: settled at 1
    assert mser_truncation([10, 0, 0, 0, 0, 0], batch=1) == 1
    # batch=2: means [5, 0, 0] are fewer than 4 batches
    assert mser_truncation([10, 0, 0, 0, 0, 0], batch=2) is None
    assert mser_truncation([1.0] * 19) is None
    # Y = [0, 1, 2, 3, 4, 5, 6, 7]: MSER(d) = var of an arithmetic run / (k-d)^2 falls all the way to the half's
    # edge (d = 4, tail [4, 5, 6, 7]): and that tail still rises by 3 / 5.5 = 55%, exactly on its line: not settled
    assert mser_truncation([0, 1, 2, 3, 4, 5, 6, 7], batch=1) is None
    # the same edge with a flat tail: settled there
    assert mser_truncation([0, 1, 2, 3, 4, 4, 4, 4], batch=1) == 4
    # leftover observations at the end are dropped: 23 values are 4 batches of 5
    assert mser_truncation([100.0] * 5 + [0.0] * 15 + [1e9] * 3) == 5


def test_flat_runs_of_the_quick_runs_length_settle():
    # The quick run leaves about 69 s after its ramp-up; with White's full search (d up to k-2) the MSER of the last
    # batches of pure noise dips below every earlier value in about one such run in five.
    for n in (35, 69, 300):
        settled = sum(run(flat(seed, n=n), flat(1000 + seed, n=n, mean=50, sd=3)).settled for seed in range(200))
        assert settled >= 196, (n, settled)


def test_rising_runs_never_settle():
    for seed in range(50):
        tp = np.linspace(100, 900, 300) + np.random.default_rng(seed).normal(0, 20, 300)
        assert not run(tp, flat(seed, mean=50, sd=3)).settled


def test_latency_all_none_uses_throughput_only():
    result = run(flat(15), [None] * 300)
    assert result.settled
    assert result.by_series["latency"] is None and result.by_series["throughput"] is not None
    assert result.start_s == result.by_series["throughput"]


def test_latency_gaps_take_the_previous_value():
    lat: list[float | None] = list(flat(17, mean=50, sd=3))
    for i in range(0, 300, 7):
        lat[i] = None
    lat[0] = None
    result = run(flat(16), lat)
    assert result.settled and result.by_series["latency"] is not None


def test_lengths_must_match():
    with pytest.raises(ValueError):
        detect([0, 1], [1.0], [None, None], 0.0, 2.0)
