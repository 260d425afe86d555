"""A run folder → report/index.html, from templates/report.html.j2 (its style: templates/report.css,
inlined). summary.json and series.json are (re)made first when missing, stale or of another schema."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from lab.analysis.summary import SCHEMA, summarize
from lab.report import trials_page
from lab.report.charts import charts
from lab.report.charts_capacity import hockey_stick
from lab.report.formatting import FILTERS
from lab.report.plotting import NO_DATA, style
from lab.runfolder import RunFolder

TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"
# The machine's files the page links, by the summary's "files" key: its label and whether the key holds a list.
MACHINE_FILES = (("results", "JMeter results", False), ("gc_logs", "GC logs", True), ("logs", "logs", True),
                 ("crash", "crash files", True), ("events", "events", False))


@dataclass(frozen=True)
class Files:
    """What the links section lists, as paths relative to the run folder."""
    dashboards: list[tuple[str, str | None]]                    # machine, its JMeter dashboard
    run: list[str]                                              # the run's own files that exist
    machines: list[tuple[str, list[tuple[str, list[str]]]]]     # machine, [(label, paths)]
    archives: dict[str, list[str]]                              # machine, its PCP archives' base names


def _blank(value: Any) -> Any:
    """None prints as nothing (a missing value the template did not replace with a dash)."""
    return "" if value is None else value


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, finalize=_blank)
    env.filters.update(FILTERS)
    env.globals["no_data"] = NO_DATA
    return env


def _files(folder: RunFolder, summary: dict) -> Files:
    entries = {machine: (entry or {}).get("files") or {} for machine, entry in summary["machines"].items()}
    dashboards = [(machine, files.get("dashboard")) for machine, files in entries.items()]
    run = [folder.relative(path) for path in (folder.run_json, folder.status_json, folder.knobs_json,
                                              folder.summary_json, folder.series_json, folder.jmeter_log)
           if path.is_file()]
    machines = []
    for machine, files in entries.items():
        groups = [(label, files[key] if many else [files[key]]) for key, label, many in MACHINE_FILES if files.get(key)]
        pcp = folder.evidence(machine, "pcp")
        archive = sorted(folder.relative(p) for p in pcp.glob("*") if p.is_file()) if pcp.is_dir() else []
        if archive:
            groups.append(("PCP archive", archive))
        machines.append((machine, groups))
    archives = {machine: files.get("archive") or [] for machine, files in entries.items()}
    return Files(dashboards, run, machines, archives)


def _stale(folder: RunFolder) -> bool:
    """summary.json/series.json missing, of another schema, or older than a file of the run."""
    outputs = [folder.summary_json, folder.series_json]
    if not all(p.is_file() for p in outputs):
        return True
    try:
        if json.loads(outputs[0].read_text()).get("schema") != SCHEMA:
            return True
    except (OSError, ValueError, AttributeError):
        return True
    made = min(p.stat().st_mtime for p in outputs)
    for path in folder.root.rglob("*"):
        if path.is_file() and path not in outputs and not path.is_relative_to(folder.report_dir) \
                and path.stat().st_mtime > made:
            return True
    return False


def render(run_dir: Path, refresh: bool = False) -> Path:
    """Writes run_dir/report/index.html and returns its path. summary.json and series.json are (re)made
    first when missing or older than the run's files (or with refresh)."""
    folder = RunFolder(Path(run_dir))
    if folder.trials():                     # a repeated run: its trials compared (each has its own report)
        return trials_page.render(folder, environment())
    if refresh or _stale(folder):
        summary: dict = dict(summarize(folder.root))    # the page reads it as it reads summary.json: a dict
    else:
        summary = json.loads(folder.summary_json.read_text())
    series = json.loads(folder.series_json.read_text())
    with style():
        capacity_chart = hockey_stick(summary) if summary.get("capacity") else None
    page = environment().get_template(TEMPLATE).render(
        summary=summary, charts=charts(summary, series), capacity_chart=capacity_chart,
        files=_files(folder, summary), run_dir=str(folder.root), now=time.time())
    folder.write_text(folder.report_html, page)
    return folder.report_html
