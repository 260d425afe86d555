"""Two runs side by side (lab/analysis/compare.py) → runs/compare/<A>-vs-<B>/index.html, in the report's
style (templates/compare.html.j2), and the few lines the terminal shows."""
from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

from lab.analysis.compare import compare
from lab.analysis.text import mib, pct, times
from lab.report.page import environment
from lab.runfolder import RUNS, RunFolder, comparison_page

TEMPLATE = "compare.html.j2"
HEADLINE_KEYS = ("capacity_rps", "throughput_rps", "p95_ms", "error_rate", "peak_memory_bytes")


def render(run_a: Path, run_b: Path, runs: Path = RUNS) -> tuple[dict, Path]:
    result = compare(run_a, run_b)
    path = comparison_page([run_a, run_b], runs)
    page = environment().get_template(TEMPLATE).render(
        result=result, now=time.time(),
        links={side: os.path.relpath(result[side]["report"], path.parent) if result[side]["report"] else None
               for side in ("a", "b")})
    RunFolder.write_text(path, page)
    return result, path


def _in_unit(value: float | None, unit: str) -> str:
    """A figure as its row's unit reads: bytes in MiB, a rate of errors in %, the rest as it is."""
    if value is None:
        return "-"
    if unit == "bytes":
        return mib(value)
    if unit == "%":
        return pct(value, 2)
    return f"{value:.4g}"


def lines(result: dict) -> list[str]:
    """The headline figures of both runs, B/A with its interval."""
    a, b = result["a"], result["b"]
    out = [f"A: {a['run_id']} ({a['trials']} trial{'s' if a['trials'] != 1 else ''}, verdict {a['verdict']})   "
           f"B: {b['run_id']} ({b['trials']} trial{'s' if b['trials'] != 1 else ''}, verdict {b['verdict']})"]
    for row in result["rows"]:
        if row["key"] not in HEADLINE_KEYS:
            continue
        interval = f" (95% interval {times(row['low'])}-{times(row['high'])})" if row["low"] is not None else ""
        shown = partial(_in_unit, unit=row["unit"])
        out.append(f"  {row['of']:<8} {row['key']:<18} A {shown(row['a']):>9}   B {shown(row['b']):>9}   "
                   f"B/A {times(row['b_over_a']) if row['b_over_a'] is not None else '-'}{interval}")
    if result["knobs"]:
        out.append(f"  {len(result['knobs'])} knob(s) differ between the runs: "
                   + ", ".join(f"{k['machine']}.{k['variable']}" for k in result["knobs"][:6])
                   + (" ..." if len(result["knobs"]) > 6 else ""))
    if result["comparable"]:
        out.append(f"  Note: {result['comparable']}.")
    return out
