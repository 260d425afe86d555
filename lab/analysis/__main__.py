"""python3 -m lab.analysis RUN_DIR: (re)computes summary.json and series.json and prints what happened (of a
repeated run: its trials compared, each trial's own summary as it is)."""
from __future__ import annotations

import argparse
import sys

from lab import runfolder
from lab.analysis import repeated
from lab.analysis.headline import headline
from lab.analysis.summary import summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m lab.analysis", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=runfolder.existing)
    args = parser.parse_args(argv)
    if repeated.is_repeated(args.run_dir):
        print("\n".join(headline(repeated.summarize(args.run_dir))))
        print(f"written: {runfolder.RunFolder(args.run_dir).summary_json}")
        return 0
    summary = summarize(args.run_dir)
    for sentence in summary["what_happened"]:
        print(sentence)
    for problem in summary["problems"]:
        print(f"missing: {problem}", file=sys.stderr)
    folder = runfolder.RunFolder(args.run_dir)
    print(f"written: {folder.summary_json} and {folder.series_json.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
