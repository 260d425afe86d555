"""python3 -m lab.report RUN_DIR [--screenshot]: writes RUN_DIR/report/index.html (and report.png)."""
from __future__ import annotations

import argparse
import sys

from lab import runfolder
from lab.report.page import render
from lab.report.screenshot import screenshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m lab.report", description="Render a run's HTML report.")
    parser.add_argument("run_dir", type=runfolder.existing)
    parser.add_argument("--screenshot", action="store_true", help="also report/report.png via headless Chromium")
    args = parser.parse_args(argv)
    page = render(args.run_dir)
    print(page)
    if args.screenshot:
        shot = screenshot(page, page.parent / "report.png")
        print(shot.png)
        for error in shot.console_errors:
            print(f"console: {error}", file=sys.stderr)
        return 1 if shot.console_errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
