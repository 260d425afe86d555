"""./start.sh ablate, from its options to where to look: everything checked before anything starts, the
plan and its estimated duration printed, then the ablation (lab/ablation/run.py) and its report."""
from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass, replace

from lab import experiment, load, options, placement, runfolder, scripted
from lab.ablation import groups as knob_groups
from lab.ablation.folder import MEASURES, Ablation
from lab.ablation.groups import Group
from lab.ablation.run import AT_ONCE, Plan, ablate, chosen_groups, describe, reanalyse
from lab.errors import LabError, StepFailed
from lab.hostlab import HostLab
from lab.machines.protocol import Backend
from lab.progress import info


@dataclass(frozen=True)
class Prepared:
    plan: Plan
    every: dict[str, Group]
    resume: Ablation | None


def prepare(args: argparse.Namespace) -> Prepared:
    """The ablation the options ask for (or the one --resume names), checked; nothing started yet."""
    every = knob_groups.load()
    typed = getattr(args, "resume", None)
    if typed is not None:
        options.ablation(args)                          # refuses options that would change the plan
        ablation = Ablation.resume(typed)
        problems: list[str] = []
        record = ablation.record(problems)
        if not isinstance(record.get("plan"), dict):
            raise StepFailed(f"--resume {typed}: {'; '.join(problems) or f'{ablation.file} holds no plan'}: it cannot "
                             "be continued (start a new ablation)")
        if record["plan"].get("figure") not in MEASURES:
            raise StepFailed(f"--resume {typed}: the ablation was measured by an earlier lab (each figure tuned ÷ "
                             "default, both machines loaded); its measurements cannot be mixed with the tuned "
                             "machine's throughput alone (start a new ablation)")
        try:
            plan = Plan.from_json(record["plan"])
        except (KeyError, TypeError, ValueError) as error:
            raise StepFailed(f"--resume {typed}: {ablation.file}: its plan is not one this lab wrote ({type(error).__name__}: "
                             f"{error}): it cannot be continued (start a new ablation)") from None
        stored = {name: (tuple(spec.get("variables") or ()), tuple(spec.get("needs") or ()))
                  for name, spec in (record.get("groups") or {}).items()}
        changed = [name for name in plan.groups
                   if name not in every or (every[name].variables, every[name].needs) != stored.get(name)]
        if changed:
            raise StepFailed(f"--resume {typed}: the knob group(s) {', '.join(changed)} changed in "
                             f"{knob_groups.GROUPS_FILE.name} since the ablation started; its measurements would "
                             "mix two definitions (start a new ablation)")
        if record.get("knobs_sha256") != knobs_sha256():
            raise StepFailed(f"--resume {typed}: ansible/host_vars/default.yml or tuned.yml changed since the ablation "
                             "started; its measurements would mix two tunings (start a new ablation)")
        ablation.check_backend(typed, getattr(args, "backend", None))
        return Prepared(plan, every, ablation)
    chosen = options.ablation(args)
    plan = Plan(chosen_groups(every, getattr(args, "groups", None)), chosen.profile, chosen.repeat, chosen.schedule)
    # room for one configuration now (each is checked again before it starts)
    runfolder.check_free_space(load.run_folder_bytes(plan.profile) * plan.repeat)
    return Prepared(plan, every, None)


def knobs_sha256() -> str:
    """Both machines' knobs, as files: an ablation resumes only on the tuning it started with."""
    digest = hashlib.sha256()
    for path in (knob_groups.HOST_VARS / "default.yml", knob_groups.HOST_VARS / "tuned.yml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run(backend: Backend, host: HostLab, prepared: Prepared) -> int:
    from lab.report import ablation_page  # matplotlib: only once there is something to draw

    plan, every = prepared.plan, prepared.every
    groups = {name: every[name] for name in plan.groups}
    finished = prepared.resume is not None and (prepared.resume.record().get("analysis") or None)
    if finished:
        ablation = prepared.resume
        assert ablation is not None         # finished: a resumed one
        info(f"{ablation.root} is a finished ablation: analysed again from its trials, its report written again")
        result = reanalyse(ablation, plan, every)
    else:
        where = placement.placed_on(backend)
        if prepared.resume is None:
            plan = replace(plan, schedule=plan.schedule or (AT_ONCE if where.dedicated else "sequential"))
        for line in describe(plan, groups):
            print(line, file=sys.stderr)
        if plan.at_once and not where.dedicated:
            info(f"placement: {where.note}; --schedule {AT_ONCE} measures two configurations at once anyway: each "
                 "figure then includes the other machine's load on the same CPUs, and the report says so")
        experiment.check_machines(backend)      # before the folder: a lab that is down leaves nothing behind
        ablation = prepared.resume or Ablation.create(plan.as_json(), groups, backend=backend.name,
                                                      knobs_sha256=knobs_sha256(), placement=where.as_json())
        info(f"ablation folder: {ablation.root}" + (" (resumed: measured configurations are kept)"
                                                     if prepared.resume else ""))
        try:
            result = ablate(backend, host, ablation, plan, every)
        except KeyboardInterrupt:
            print(f"\nInterrupted: what was measured is kept. ./start.sh ablate --resume {ablation.root.name} "
                  "continues it.", file=sys.stderr)
            return 130
        except LabError as error:
            raise StepFailed(f"{error}. What was measured is kept: ./start.sh ablate --resume {ablation.root.name} "
                             "continues it") from error
    page = ablation_page.render(ablation)
    scripted.result(ablation.file)
    print(f"\n{result['sentence']}", file=sys.stderr)
    print(f"\nAblation folder: {ablation.root}\nReport: {page}", file=sys.stderr)
    return 0
