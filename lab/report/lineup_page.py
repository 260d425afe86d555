"""Several capacity runs' configurations in one table (lab/analysis/lineup.py) → runs/compare/<A>-vs-<B>-vs-<C>/
index.html, in the report's style (templates/lineup.html.j2), with lineup.json beside it (the figures the page
shows), and the lines the terminal shows."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from lab.analysis.lineup import LineUp, line_up
from lab.analysis.text import mib, times
from lab.report.page import environment
from lab.runfolder import RUNS, RunFolder, comparison_page

TEMPLATE = "lineup.html.j2"


def render(runs: list[Path], runs_dir: Path = RUNS) -> tuple[LineUp, Path]:
    result = line_up(runs)
    path = comparison_page(runs, runs_dir)
    reports = {run["run_id"]: RunFolder(Path(run["path"])).report_html for run in result["runs"]}
    page = environment().get_template(TEMPLATE).render(
        result=result, now=time.time(),
        links={run_id: os.path.relpath(report, path.parent) if report.is_file() else None
               for run_id, report in reports.items()})
    RunFolder.write_text(path, page)
    RunFolder.write_text(path.parent / "lineup.json", json.dumps(result, indent=2) + "\n")
    return result, path


def lines(result: LineUp) -> list[str]:
    """Each configuration, the best capacity first: capacity [interval], over the baseline, memory, CPU, verdicts."""
    out = [f"{len(result['configurations'])} configurations from {len(result['runs'])} runs; "
           f"baseline {result['baseline']}"]
    for c in result["configurations"]:
        capacity, versus = c["capacity"], c["versus_baseline"]
        shown = f"{capacity['mean']:,.0f} req/s" if capacity["mean"] is not None else "no capacity"
        if capacity["low"] is not None:
            shown += f" [{capacity['low']:,.0f}, {capacity['high']:,.0f}]"
        ratio = times(versus["ratio"]) if versus["ratio"] is not None else "-"
        if versus["low"] is not None and versus["high"] is not None:
            ratio += f" [{times(versus['low'])}, {times(versus['high'])}]"
        cpu = f"{c['cpu_ms_per_request']:.2f} ms/req" if c["cpu_ms_per_request"] is not None else "? ms/req"
        out.append(f"  {shown:<24} {ratio:<22} knee {mib(c['memory_at_knee_bytes'])} of {mib(c['memory_limit_bytes'])}"
                   f"  {cpu}  {c['label']} ({c['id']}; {c['bound']})")
    out += [f"  Note: {note}." for note in result["notes"]]
    return out
