"""Small numeric helpers every figure of the lab goes through (one definition each)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy


def number(value: object) -> float | None:
    """A finite float from a JSON value, else None (booleans are not numbers here)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


PERCENTILE_DEFINITION = ("as JMeter's dashboard computes them (Apache Commons Math's default estimate: rank "
                         "p(n+1)/100, interpolated between neighbours), over every sample, failed ones included")


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """The p-th percentile as JMeter's report generator computes it (commons-math3 Percentile, whose
    default estimate is numpy's "weibull": rank p(n+1)/100, interpolated, clamped to the ends), so the
    lab's figures and JMeter's dashboard agree on the same samples."""
    if not ordered:
        return None
    return round(float(numpy.percentile(ordered, p, method="weibull")), 3)


def ratio(tuned: object, default: object) -> float | None:
    """tuned / default, rounded; None when either is missing or default is zero."""
    a, b = number(tuned), number(default)
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 6)


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def finite(values: list) -> list[float]:
    """The numbers among values (None, strings and booleans dropped)."""
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
