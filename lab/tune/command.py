"""./start.sh tune, from its options to where to look: everything checked before anything starts, the plan and its
duration printed, then the search (lab/tune/run.py), its result and its report."""
from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from lab import aa, experiment, interrupts, load, options, runfolder, scripted
from lab.ablation.folder import TUNED
from lab.errors import LabError, StepFailed
from lab.hostlab import HostLab
from lab.machines.protocol import Backend
from lab.paths import shown
from lab.progress import info
from lab.tune import options as tune_options
from lab.tune import space as knob_space
from lab.tune import validate
from lab.tune.folder import Plan, Tuning
from lab.tune.space import Space

# What a tune's measurements depend on: a resumed one must find them as they were.
INPUTS = (knob_space.SPACE_FILE, knob_space.knob_groups.HOST_VARS / "default.yml")


@dataclass(frozen=True)
class Prepared:
    plan: Plan
    space: Space
    resume: Tuning | None


def chosen_groups(space: Space, typed: str | None) -> tuple[str, ...]:
    return options.named_groups(typed, list(space.groups), knob_space.SPACE_FILE.name)


def inputs_sha256() -> str:
    digest = hashlib.sha256()
    for path in INPUTS:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def prepare(args: argparse.Namespace) -> Prepared:
    """The tune the options ask for (or the one --resume names), checked; nothing started yet."""
    space = knob_space.load()
    typed = getattr(args, "resume", None)
    if typed is not None:
        given = [option for option, name in (("--groups", "groups"), ("--trials", "trials"), ("--budget", "budget"),
                                              ("--seed", "seed"), ("--quick", "quick"),
                                              ("--validate", "validate"), ("--schedule", "schedule"))
                 if getattr(args, name, None) not in (None, False)]     # --quick: False when not typed
        if given:
            raise StepFailed(f"--resume continues a tune as it was planned: {', '.join(given)} cannot change it")
        tuning = Tuning.resume(typed)
        problems: list[str] = []
        record = tuning.record(problems)
        try:
            plan = Plan.from_json(record["plan"])
        except (KeyError, TypeError, ValueError) as error:
            raise StepFailed(f"--resume {typed}: {'; '.join(problems) or tuning.file}: no plan this lab wrote "
                             f"({type(error).__name__}: {error}); start a new tune") from None
        if record.get("inputs_sha256") != inputs_sha256():
            raise StepFailed(f"--resume {typed}: ansible/knob-space.yml or host_vars/default.yml changed since the "
                             "tune started; its configurations would mix two spaces (start a new tune)")
        tuning.check_backend(typed, getattr(args, "backend", None))
        return Prepared(plan, space, tuning)
    chosen = tune_options.checked(args)
    plan = Plan(chosen_groups(space, getattr(args, "groups", None)), chosen.steps, chosen.trials, chosen.budget_s,
                chosen.seed, chosen.validate, chosen.schedule)
    runfolder.check_free_space(load.run_folder_bytes(plan.steps))
    return Prepared(plan, space, None)


def run(backend: Backend, host: HostLab, prepared: Prepared) -> int:
    from lab.tune.run import result, search  # Optuna: only once there is something to search

    plan, space = prepared.plan, prepared.space
    for line in plan.describe(space.chosen(plan.groups)):
        print(line, file=sys.stderr)
    experiment.check_machines(backend)          # before the folder: a lab that is down leaves nothing behind
    aa.refuse_if_pending(host, a_a=True)        # the default machine as it is (the tuned one is given knobs anyway)
    tuning = prepared.resume or Tuning.create(plan, backend=backend.name, inputs_sha256=inputs_sha256())
    info(f"tune folder: {tuning.root}" + (" (resumed: measured configurations are kept)" if prepared.resume else ""))
    base = knob_space.base_knobs()
    validated = None
    try:
        with interrupts.sigterm_as_interrupt():
            # The tuned machine goes from the search's last configuration straight to the best one, measured there
            # first, then gets its own knobs back once for the 2018 tuning's run: one provisioning fewer.
            with aa.machines_with(backend, host) as give:
                study = search(backend, tuning, plan, space, base, give)
                found = result(study, tuning, space, plan, base)
                best = Path(found["best_file"]) if plan.validate and found["best_file"] else None
                if best:
                    validate.run(backend, tuning, plan, "found", best, give)
            if best:
                # a resumed tune whose last run was cut short while the tuned machine got its own knobs back
                aa.give_back(backend, host, [TUNED])
                validate.run(backend, tuning, plan, "own")
                validated = validate.outcome(tuning)
                tuning.update(validation=validated)
    except KeyboardInterrupt:
        print(f"\nInterrupted: what was measured is kept. ./start.sh tune --resume {tuning.root.name} continues it.",
              file=sys.stderr)
        return 130
    except LabError as error:
        raise StepFailed(f"{error}. What was measured is kept: ./start.sh tune --resume {tuning.root.name} "
                         "continues it") from error
    from lab.report import tune_page  # matplotlib: only once there is something to draw

    page = tune_page.render(tuning)
    scripted.result(tuning.file)
    print(f"\n{found['sentence']}", file=sys.stderr)
    if validated:
        print(validated["sentence"], file=sys.stderr)
    if found["best_file"]:
        print(f"Best configuration: {found['best_file']}\n  to give it to the tuned machine: ./start.sh up --knobs "
              f"{shown(Path(found['best_file']))}", file=sys.stderr)
    print(f"Tune folder: {tuning.root} (tune.json: every configuration, its capacity and constraints)\nReport: {page}",
          file=sys.stderr)
    return 0
