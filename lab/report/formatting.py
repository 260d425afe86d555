"""How the page writes numbers, sizes, ratios, dates and file names: one small function each, registered
as the template's filters (FILTERS). They return plain text; the template escapes it."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import PurePath
from typing import Any

from lab.analysis.text import mib
from lab.analysis.trials import FEW_TRIALS
from lab.names import clock

DASH = "—"                              # a value that is missing


def num(value: Any, digits: int = 1) -> str:
    """1,234 for integers (and whole floats from 100 on), 12.3 otherwise; yes/no for booleans."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) >= 100):
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def measure(value: Any, row: dict) -> str:
    """A value of the comparison table, in the unit of its row."""
    unit = row["unit"]
    if value is None:
        return DASH
    if unit == "%" and row["key"].startswith("error_rate"):
        return f"{value * 100:.2f} %"
    if unit == "%":
        return f"{value:.2f} %"
    if unit == "bytes":
        return mib(value, 1, DASH)
    if unit == "ms":
        if isinstance(value, int) or value >= 10:
            return f"{value:,.0f} ms"
        return f"{value:,.2f} ms"
    if unit == "s":
        return f"{value:,.3f} s"
    if unit == "cores":
        return f"{value:.2f} cores"
    if unit == "req/s":
        return f"{value:,.1f} req/s"
    return num(value)


def ratio_text(row: dict) -> str:
    """tuned / default of a comparison row: 1.23×, n/a (one of them zero) or a dash (one missing)."""
    if row["ratio"] is None:
        if row.get("note"):
            return "no ratio"
        return "n/a" if row["default"] is not None and row["tuned"] is not None else DASH
    return f"{row['ratio']:.2f}×"


def ratio_class(row: dict) -> str:
    """The ratio cell's classes: good or bad when tuned differs from default (green where it is better)."""
    value = row["ratio"]
    if value is None or round(value, 2) == 1 or row.get("outlier"):     # one lone pause is not a pattern
        return "ratio"
    good = (value > 1) == (row["better"] == "higher")
    return "ratio good" if good else "ratio bad"


def interval(row: dict) -> str:
    """A repeated run's ratio with its 95% interval: 1.05× [0.98–1.12×]."""
    if row.get("low") is None or row.get("high") is None:
        return ratio_text(row)
    return f"{row['ratio']:.2f}× [{row['low']:.2f}–{row['high']:.2f}×]"


def interval_class(row: dict) -> str:
    """good or bad only when the interval leaves 1 out, from enough trials for it to mean 95%: otherwise the
    trials cannot tell the machines apart."""
    if row.get("low") is None or row.get("high") is None or row["low"] <= 1 <= row["high"] \
            or row.get("trials", 0) < FEW_TRIALS:
        return "ratio"
    return ratio_class(row)


def when(epoch: float | None) -> str:
    """Seconds since the epoch as a UTC date and time."""
    if epoch is None:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def setting(value: Any) -> str:
    """A configuration value as JSON writes it (true, 12, [..], {..}), strings bare."""
    if isinstance(value, (dict, list, bool, int, float)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def host(host: dict) -> str:
    """The host's CPUs, memory, kernel and OS, those it has."""
    parts = (f"{host['cpus']} CPUs" if host.get("cpus") else "",
             mib(host.get("memory_bytes"), 1, DASH) if host.get("memory_bytes") else "",
             f"kernel {host['kernel']}" if host.get("kernel") else "",
             host.get("os") or "")
    return ", ".join(part for part in parts if part) or DASH


def thousands(value: int) -> str:
    return f"{value:,}"


def basename(path: str) -> str:
    """A linked file's name, without its folder."""
    return PurePath(path).name


FILTERS: dict[str, Callable[..., str]] = {
    "clock": clock, "num": num, "mib": partial(mib, digits=1, missing=DASH), "measure": measure, "ratio_text": ratio_text, "ratio_class": ratio_class,
    "interval": interval, "interval_class": interval_class, "when": when, "setting": setting, "host": host, "thousands": thousands, "basename": basename,
}
