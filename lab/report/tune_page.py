"""A tune's page (templates/tune.html.j2): the lead sentence, the validation of its best configuration (if any), each
configuration's capacity against the trials with the best so far, each knob's importance, and every configuration tried with its knobs, its constraints and why one broke,
with a link to its own capacity report."""
from __future__ import annotations

import time
from pathlib import Path

from lab.report.page import environment
from lab.report.plotting import Chart, finish, new_figure, style
from lab.runfolder import RunFolder
from lab.tune import validate
from lab.tune.folder import MEMORY_SHARE_MAX, Tuning

TEMPLATE = "tune.html.j2"


def progress(result: dict) -> Chart:
    chart = Chart("chart-tune", "Capacity of each configuration, in the order tried",
                  "Left: each configuration's capacity at the SLO (green: within every constraint; red: a constraint "
                  "broken, its capacity still shown; grey at 0: set aside by its memory budget, or no figure), and the "
                  "best within the constraints so far (line). Right: each knob's importance to reaching the best "
                  "capacities (PED-ANOVA over the configurations measured).")
    rows = [r for r in result.get("configurations") or [] if r.get("state") == "COMPLETE"]
    if not rows:
        return chart
    with style():
        fig, (left, right) = new_figure(2, sharey=False)
        for row in rows:
            value = row.get("capacity_rps")
            colour = "#2e8b57" if row.get("feasible") else ("#c0392b" if value is not None else "#999")
            left.scatter([row["number"]], [value or 0], color=colour, s=28, zorder=3)
        best = result.get("best_so_far") or []
        xs = [row["number"] for row, b in zip(rows, best) if b is not None]
        left.step(xs, [b for b in best if b is not None], where="post", color="#1b7fbf", linewidth=1.5)
        left.set_xlabel("configuration")
        left.set_ylabel("capacity (req/s)")
        importance = result.get("importance") or {}
        names = sorted(importance, key=lambda n: importance[n])
        right.barh(range(len(names)), [importance[n] for n in names], color="#1b7fbf")
        right.set_yticks(range(len(names)), names, fontsize=8)
        right.set_xlabel("importance (share)")
        chart.png = finish(fig, [left, right], clock_x=False)
    return chart


def render(tuning: Tuning) -> Path:
    """Writes the tune's report/index.html from its tune.json."""
    record = tuning.record()
    result = record.get("result") or {}
    folder = RunFolder(tuning.root)
    reports = {}
    for row in result.get("configurations") or []:
        config = tuning.config_folder(row["number"])
        if config.report_html.is_file():
            reports[row["number"]] = folder.relative(config.report_html)
    validation = record.get("validation")
    validation_reports = {}
    for name in (validation or {}).get("runs") or {}:
        run = RunFolder(tuning.root / "validation" / name)
        if run.report_html.is_file():
            validation_reports[name] = folder.relative(run.report_html)
    page = environment().get_template(TEMPLATE).render(record=record, result=result, reports=reports,
                                                       validation=validation, validation_reports=validation_reports,
                                                       validation_runs=validate.RUNS,
                                                       charts=[progress(result)], now=time.time(),
                                                       memory_share_max=MEMORY_SHARE_MAX,
                                                       tune_id=tuning.root.name)
    folder.write_text(folder.report_html, page)
    return folder.report_html
