"""python3 -m lab.load: load the lab's machines with JMeter, without the rest of the experiment."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from lab.load.jmeter import prepare
from lab.load.profile import FULL, QUICK, SCHEDULES, LoadError
from lab.load.progress import print_progress
from lab.load.run import run
from lab.machines import manifest
from lab.paths import REPO


def main(argv: list[str] | None = None) -> int:
    provisioned = manifest.read_or_none("default")
    parser = argparse.ArgumentParser(prog="python3 -m lab.load", description="Load the lab's machines with JMeter.")
    parser.add_argument("--target", action="append", default=[], metavar="MACHINE=URL", required=True,
                        help="e.g. default=http://10.213.1.2 (repeat for tuned)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / time.strftime("load-%Y%m%d-%H%M%S"))
    parser.add_argument("--schedule", choices=SCHEDULES, default="parallel")
    parser.add_argument("--path", default=provisioned.service_path if provisioned else None,
                        required=provisioned is None,
                        help="the request path (default: the service's, from the machines' manifest)")
    parser.add_argument("--quick", action="store_true", help=f"smoke profile {QUICK}")
    for name, default in dataclasses.asdict(FULL).items():
        kind = (lambda v: v.lower() in ("1", "true", "yes", "on")) if isinstance(default, bool) else int
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=f"default {default}")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    try:
        profile = dataclasses.replace(base, **{k: v for k, v in vars(args).items()
                                               if k in dataclasses.asdict(FULL) and v is not None})
        targets = dict(item.split("=", 1) for item in args.target)
        prepare()
        result = run(targets, profile, args.out, args.schedule, print_progress, path=args.path)
    except (LoadError, ValueError) as error:
        print(f"load: {error}", file=sys.stderr)
        return 1
    for machine, index in result.dashboards.items():
        print(f"{machine}: {result.results[machine]}  dashboard {index}")
    for problem in result.problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 130 if result.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
