"""`tune`'s options: what it searches, for how long, how each configuration is measured and validated;
checked before anything starts, a bad value named as the user typed it (the options all commands share:
lab/options.py)."""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from lab import load
from lab.errors import StepFailed
from lab.options import add_step_options, given, step_load


def parser() -> argparse.ArgumentParser:
    """`tune`'s options: what it searches, how long, and each configuration's capacity run."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--groups", default=argparse.SUPPRESS, metavar="NAME,NAME",
                         help="search only these groups of the knob space (ansible/knob-space.yml; the rest stay as "
                              "the default machine has them)")
    options.add_argument("--trials", type=int, default=argparse.SUPPRESS, metavar="N",
                         help="measure N configurations (one its memory budget sets aside unmeasured does not count)")
    options.add_argument("--budget", default=argparse.SUPPRESS, metavar="DURATION",
                         help=f"measure configurations for this long (90m, 2h, 5400s; default {TUNE_BUDGET}): each "
                              "starts only if one as long as the mean so far still fits")
    options.add_argument("--seed", type=int, default=argparse.SUPPRESS, metavar="N",
                         help="the sampler's seed (default 1): the same seed proposes the same first configurations")
    options.add_argument("--resume", default=argparse.SUPPRESS, metavar="TUNE",
                         help="continue an interrupted tune (its id in runs/, or its folder) as it was planned: "
                              "configurations it measured are kept, one cut short is measured again")
    options.add_argument("--validate", type=int, default=argparse.SUPPRESS, metavar="N",
                         help=f"then measure the best configuration against the default machine, and the tuned "
                              f"machine's own knobs against it too, each a capacity run with --repeat N (default "
                              f"{TUNE_VALIDATE}; --quick: 0; 0: none)")
    options.add_argument("--schedule", choices=load.SCHEDULES, default=argparse.SUPPRESS,
                         help="the validation's: load both machines at once, or one after the other (default: at "
                              "once only when each machine and JMeter have CPUs of their own); the search loads the "
                              "tuned machine alone")
    add_step_options(options, load.TUNE_STEPS, f"a smoke tune: {TUNE_QUICK_TRIALS} configurations, each measured by "
                                            + load.QUICK_STEPS.describe())
    return options


TUNE_BUDGET = "2h"
TUNE_QUICK_TRIALS = 2
TUNE_SEED = 1
TUNE_VALIDATE = 3               # trials of each validation run: the fewest that give an interval worth the name


@dataclass(frozen=True)
class Tune:
    """What `tune` will do, every part checked."""
    steps: load.StepLoad
    trials: int | None
    budget_s: int | None
    seed: int
    validate: int = 0               # trials of each validation run (0: none)
    schedule: str | None = None     # the validation's (None: the placement's)


def duration_s(typed: str, option: str) -> int:
    """90m, 2h, 5400s, or a number of seconds, as seconds; StepFailed naming what was typed."""
    found = re.fullmatch(r"\s*(\d+)\s*(s|m|min|h)?\s*", typed)
    if not found or int(found.group(1)) == 0:
        raise StepFailed(f"{option} {typed}: a duration such as 90m, 2h or 5400s")
    return int(found.group(1)) * {"s": 1, "m": 60, "min": 60, "h": 3600}[found.group(2) or "s"]


def checked(args: argparse.Namespace) -> Tune:
    """tune's options checked (all but --groups, which the knob space checks)."""
    trials, budget = given(args, "--trials"), given(args, "--budget")
    if trials is not None and budget is not None:
        raise StepFailed(f"--trials {trials} and --budget {budget}: one or the other")
    if trials is not None and int(trials) < 1:
        raise StepFailed(f"--trials {trials}: must be 1 or more")
    quick = bool(given(args, "--quick"))
    steps = step_load(args, load.QUICK_STEPS if quick else load.TUNE_STEPS)
    if trials is None and budget is None and quick:
        trials = TUNE_QUICK_TRIALS
    seed = given(args, "--seed")
    validate = given(args, "--validate")
    if validate is not None and int(validate) < 0:
        raise StepFailed(f"--validate {validate}: must be 0 (none) or more")
    validated = int(validate) if validate is not None else 0 if quick else TUNE_VALIDATE
    schedule = given(args, "--schedule")
    if schedule is not None and not validated:
        raise StepFailed(f"--schedule {schedule} is the validation's, and this tune validates nothing "
                         f"({'--validate 0' if validate is not None else '--quick'}): give --validate N too")
    return Tune(steps, int(trials) if trials is not None else None,
                None if trials is not None else duration_s(str(budget or TUNE_BUDGET), "--budget"),
                int(seed) if seed is not None else TUNE_SEED, validated, schedule)
