"""Unit tests of the latency-spec parser and its sampling."""

from __future__ import annotations

import math
import random

import pytest

from mock_service.config import LATENCY_FORM, LatencySpec, parse_latency


@pytest.mark.parametrize(
    "text, kind, a, b",
    [
        ("fixed:0", "fixed", 0.0, 0.0),
        ("fixed:300", "fixed", 300.0, 0.0),
        ("fixed:2.5", "fixed", 2.5, 0.0),
        (" FIXED:10 ", "fixed", 10.0, 0.0),
        ("uniform:10,50", "uniform", 10.0, 50.0),
        ("uniform:5,5", "uniform", 5.0, 5.0),
        ("lognormal:20,0.5", "lognormal", 20.0, 0.5),
        ("lognormal:1.5,0", "lognormal", 1.5, 0.0),
    ],
)
def test_parse_valid(text: str, kind: str, a: float, b: float) -> None:
    spec = parse_latency(text)
    assert (spec.kind, spec.a, spec.b) == (kind, a, b)
    assert str(spec) == text.strip()


@pytest.mark.parametrize(
    "text",
    [
        "banana", "", "fixed", "fixed:", "fixed:abc", "fixed:-1", "fixed:1,2",
        "fixed:nan", "fixed:inf", "uniform:10", "uniform:50,10", "uniform:-1,5",
        "uniform:1,2,3", "lognormal:20", "lognormal:0,0.5", "lognormal:-5,0.5",
        "lognormal:20,-1", "lognormal:20,99", "normal:20,5", "fixed:99999999",
    ],
)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_latency(text)
    assert repr(text.strip()) in str(exc.value) or repr(text) in str(exc.value)


def test_invalid_message_names_accepted_form() -> None:
    with pytest.raises(ValueError, match="fixed:MS") as exc:
        parse_latency("banana")
    assert LATENCY_FORM in str(exc.value)


def test_fixed_zero_means_no_sleep() -> None:
    assert parse_latency("fixed:0").is_zero
    assert not parse_latency("fixed:1").is_zero
    assert not parse_latency("uniform:0,0").is_zero  # only fixed:0 skips the await


def test_sample_fixed_and_uniform() -> None:
    rng = random.Random(1)
    assert all(parse_latency("fixed:7").sample_ms(rng) == 7.0 for _ in range(10))
    spec = parse_latency("uniform:10,50")
    samples = [spec.sample_ms(rng) for _ in range(2000)]
    assert min(samples) >= 10 and max(samples) <= 50
    assert min(samples) < 12 and max(samples) > 48  # really spans the range


def test_sample_lognormal_median_and_tail() -> None:
    """The default's documented shape: median 20 ms, p99 about 64 ms."""
    rng = random.Random(3)
    spec = parse_latency("lognormal:20,0.5")
    s = sorted(spec.sample_ms(rng) for _ in range(20000))
    median, p99 = s[len(s) // 2], s[int(len(s) * 0.99)]
    assert 19 < median < 21
    expected_p99 = 20 * math.exp(0.5 * 2.3263)  # z(0.99) = 2.3263
    assert abs(p99 - expected_p99) / expected_p99 < 0.08
    assert s[0] > 0


def test_spec_is_value_object() -> None:
    assert parse_latency("fixed:5") == LatencySpec("fixed", 5.0, text="fixed:5")
