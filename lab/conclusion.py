"""How a run ends on the terminal, whatever ended it: its report made from whatever the run folder holds, the
headline, where to look (the run folder, each trial's report, JMeter's dashboards), the result for --json, and the
exit code (0, 130 interrupted, 1 failed; 3 when a threshold broke).

    conclude(folder, ended, dashboards) -> int
"""
from __future__ import annotations

import sys
from pathlib import Path

from lab import report, scripted
from lab.analysis import thresholds
from lab.analysis.headline import headline
from lab.progress import info, step
from lab.runfolder import RunFolder


def make_report(run: RunFolder) -> Path | None:
    """summary.json and report/index.html; a failure is reported, the run folder stays."""
    try:
        return report.render(run.root)
    except Exception as error:  # noqa: BLE001  (the evidence is kept whatever the report's trouble)
        info(f"the report could not be made: {type(error).__name__}: {error}")
        return None


def conclude(folder: RunFolder, ended: dict, dashboards: dict[str, Path]) -> int:
    """The report of whatever the run folder holds, and where to look. ended: run.json's (how, during, error)."""
    if ended["how"] != "completed":
        info(f"the run was {ended['how']} during {ended['during']}"
             + (f": {ended['error']}" if "error" in ended else "") + "; what it measured is kept")
    with step("Summarising and writing the report"):
        page = make_report(folder)
    summary = folder.summary()
    scripted.result(folder.summary_json)
    if summary:
        try:
            print("\n" + "\n".join(headline(summary)), file=sys.stderr)
        except Exception as error:  # noqa: BLE001  (the paths below matter more than the headline)
            info(f"no headline: {type(error).__name__}: {error}")
    print(f"\nRun folder: {folder.root}", file=sys.stderr)
    for trial in folder.trials():
        if trial.report_html.is_file():
            print(f"  Trial {trial.root.name}: {trial.report_html}", file=sys.stderr)
    for name, dashboard in dashboards.items():
        print(f"  JMeter dashboard ({name}): {dashboard}", file=sys.stderr)
    if page:
        print(f"Report: {page}", file=sys.stderr)
    print("\nBoth machines are still up and hold their memory: ./start.sh run measures again, "
          "./start.sh down removes them.", file=sys.stderr)
    code = {"completed": 0, "interrupted": 130}.get(ended["how"], 1)
    return thresholds.exit_code(folder, summary) if code == 0 else code
