"""Figures as the terminal and the summary's sentences write them (the report's page has its own filters,
lab/report/formatting.py): a missing figure is "?"."""
from __future__ import annotations


def pct(value: float | None, digits: int = 1) -> str:
    return "?" if value is None else f"{value * 100:.{digits}f}%"


def ms(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f} ms"


MIB = 1 << 20


def mib(value: float | None, digits: int = 0, missing: str = "?") -> str:
    """A size in bytes as MiB: the one conversion the lab writes (the report's page: one decimal, a dash)."""
    return missing if value is None else f"{value / MIB:,.{digits}f} MiB"


def times(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def rate(value: float | None) -> str:
    return "? req/s" if value is None else f"{value:,.1f} req/s"
