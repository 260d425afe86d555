"""A repeated run's page (templates/trials.html.j2): the trials side by side, every ratio with its 95%
interval over them, and one chart of each trial's throughput and ratio."""
from __future__ import annotations

import math
import time
from pathlib import Path

from lab import contract
from lab.analysis import repeated
from lab.report.plotting import COLORS, Chart, finish, new_figure, style
from lab.runfolder import RunFolder

TEMPLATE = "trials.html.j2"


def trials_chart(summary: contract.RepeatedSummary) -> Chart:
    # A capacity run's trial rows hold each machine's capacity (repeated._trial_row), and its ratio is theirs.
    key, figure_name = ("capacity_rps", "capacity") if summary.get("capacity") else \
        ("throughput_rps", "steady-state throughput")
    trials = summary["trials"]
    numbers = [t["number"] for t in trials]
    # the machines the trials measured: both, or the one an ablation's configuration loaded (then no ratio)
    machines = [m for m in ("default", "tuned") if any(t.get(f"{m}_rps") is not None for t in trials)]
    chart = Chart("chart-trials", f"{figure_name.split()[-1].capitalize()} by trial",
                  f"Left: each machine's {figure_name} in each trial. Right: tuned ÷ default per trial, "
                  "the ratio over all trials (line) and its 95% interval (band)." if len(machines) > 1 else
                  f"The {' '.join(machines)} machine's {figure_name} in each trial (the only machine loaded).")
    if not machines:
        chart.missing = ["default", "tuned"]
        return chart
    row: dict = next((dict(r) for r in summary["comparison"] if r["key"] == key), {})
    with style():
        fig, (left, right) = new_figure(2, sharey=False)
        if len(machines) == 1:
            right.set_visible(False)
        for machine in machines:
            left.plot(numbers, [_plotted(t.get(f"{machine}_rps")) for t in trials], "o-", color=COLORS[machine],
                      label=machine)
        left.set_ylabel("req/s")
        left.set_ylim(bottom=0)
        right.plot(numbers, [_plotted(t.get("ratio")) for t in trials], "o", color="#333", label="trial")
        if row.get("ratio") is not None:
            right.axhline(row["ratio"], color="#1b7fbf", linewidth=1.5, label=f"all trials {row['ratio']:.2f}×")
        if row.get("low") is not None:
            right.axhspan(row["low"], row["high"], color="#1b7fbf", alpha=0.15, label="95% interval")
        right.axhline(1.0, color="#888", linestyle=":", linewidth=1)
        right.set_ylabel("tuned ÷ default")
        for ax in (left, right):
            ax.set_xlabel("trial")
            ax.set_xticks(numbers)
        chart.png = finish(fig, [left, right], clock_x=False)
    return chart


def _plotted(value: object) -> float:
    """A trial's figure as a point; none (a trial that gave no figure) as a gap."""
    return float(value) if isinstance(value, (int, float)) else math.nan


def render(folder: RunFolder, environment) -> Path:
    """Writes the repeated run's report/index.html from a fresh summary of its trials."""
    summary = repeated.summarize(folder.root)
    page = environment.get_template(TEMPLATE).render(summary=summary, charts=[trials_chart(summary)],
                                                     now=time.time())
    folder.write_text(folder.report_html, page)
    return folder.report_html
