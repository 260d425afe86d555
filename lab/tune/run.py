"""./start.sh tune's search: Optuna asks for a configuration (a point of the knob space), the tuned machine is
provisioned with it, its capacity is measured (an open model's stepped arrivals, the knee search of `capacity`, the
tuned machine alone), and the study is told the capacity and the constraints: no process death (the OOM killer
included), the memory held (PSS and swap) at most MEMORY_SHARE_MAX of the memory model, page-ins below the verdict's
threshold, a capacity figure at all. A configuration whose memory budget does not fit the model (lab/budget.py),
or that puts a choice on a stack without it (APR on the modern stack), is set aside unmeasured, and one whose
provisioning fails is recorded with the error; neither is dropped. The folder: lab/tune/folder.py."""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict

import yaml

from lab import aa, budget, experiment, load, runfolder
from lab.ablation.folder import CAPACITY, TUNED, figure, machine_figures, unusable
from lab.analysis import host_pause
from lab.analysis.queues import BACKEND_POOL_KNOB
from lab.analysis.text import MIB
from lab.analysis.verdict import PAGE_INS_MAX
from lab.errors import LabError, StepFailed
from lab.machines.local.memory import VM_RAM_MIB
from lab.machines.protocol import Backend
from lab.paths import shown
from lab.progress import info
from lab.runfolder import RunFolder
from lab.tune import guide
from lab.tune.folder import BEST_FILE, MEMORY_SHARE_MAX, Plan, Tuning, duration_text, point_text
from lab.tune.space import Space
from lab.tune.study import Outcome, Record, Study

SET_ASIDE_MAX = 20             # configurations set aside in a row, before the search ends


def outcome_of(folder: RunFolder, limit_mib: float | None, seconds: float) -> Outcome:
    """What a configuration's capacity run gave: its figure and each constraint, read from its summary."""
    trial = (folder.trials() or [folder])[-1]
    measured = machine_figures(trial, TUNED)
    value, why = figure(trial, CAPACITY, TUNED)
    found = measured.get("capacity") if measured else None
    lower_bound = None
    if value is None and found and isinstance(found.get("capacity_rps"), (int, float)) and (
            found.get("generator_bound_rps") is not None or found.get("reached_max")):
        # beyond what was sent: the last rate met is a lower bound, which still ranks the configuration (said so)
        value, lower_bound = float(found.get("capacity_rps") or 0), why
    events = (measured.get("events") if measured else None) or {}
    memory = (measured.get("memory") if measured else None) or {}
    held = (memory.get("budget") or {}).get("held_peak_mib")
    if not isinstance(held, (int, float)) and isinstance(memory.get("peak_bytes"), (int, float)):
        held = memory["peak_bytes"] / MIB
    page_ins = memory.get("major_faults_per_s")
    kills, exits = int(events.get("oom_kills") or 0), list(events.get("process_exits") or [])
    broken: dict[str, str] = {}
    amounts: dict[str, float] = {}
    if kills or exits:
        broken["process_died"] = (f"{kills} OOM kill{'s' if kills != 1 else ''}" if kills else "") + \
            (f"{'; ' if kills else ''}process exits: {', '.join(map(str, exits))[:200]}" if exits else "")
        amounts["process_died"] = float(kills + len(exits))
    if isinstance(held, (int, float)) and limit_mib:
        share = held / limit_mib
        amounts["memory_over"] = round(share - MEMORY_SHARE_MAX, 4)
        if share > MEMORY_SHARE_MAX:
            broken["memory_over"] = (f"its processes held {held:.0f} MiB at their peak (PSS and swap), {share:.0%} of "
                                     f"the {limit_mib:.0f} MiB model (at most {MEMORY_SHARE_MAX:.0%})")
    if isinstance(page_ins, (int, float)):
        amounts["page_ins_over"] = round(page_ins - PAGE_INS_MAX, 3)
        if page_ins >= PAGE_INS_MAX:
            broken["page_ins_over"] = f"{page_ins:.0f} page-ins a second over the load (at most {PAGE_INS_MAX:g})"
    if value is None:
        broken["no_figure"] = why or "no capacity"
    at_knee = (found.get("at_knee") if found else None) or {}
    queued = at_knee.get("queued") or {}                    # where requests waited at its knee, and the knob sizing it
    figures = {"seconds": round(seconds, 1), "held_peak_mib": None if held is None else round(held, 1),
               "limit_mib": limit_mib, "major_faults_per_s": page_ins, "oom_kills": kills,
               "generator_bound_rps": found.get("generator_bound_rps") if found else None, "lower_bound": lower_bound,
               "knee_rps": found.get("knee_rps") if found else None, "queued_at": queued.get("stage"),
               "knee_knob": queued.get("knob"),
               "cpu_per_request": (((found.get("at_capacity") if found else None) or {}).get("cpu_per_request")
                                   or {}).get("sentence"),
               "knee_waiting": at_knee.get("pool_pending_peak") if queued.get("knob") == BACKEND_POOL_KNOB else None,
               "at_knee": queued.get("sentence"),
               # its knee measured the host, not the configuration: measured again (Study.measure_again)
               "host_paused": host_pause.why_not_counted(TUNED, found),
               "folder": str(folder.root)}
    return Outcome(value, broken, amounts, figures)


def search(backend: Backend, tuning: Tuning, plan: Plan, space: Space, base: dict, give: aa.Give) -> Study:
    """Configurations measured until the plan's trials or budget are spent, each given to the tuned machine by give
    (aa.machines_with's); the study as it then stands."""
    study = Study(tuning.root, space.chosen(plan.groups), plan.seed)
    requeued = study.requeue_interrupted()
    if requeued:
        info(f"configuration{'s' if len(requeued) > 1 else ''} {', '.join(map(str, requeued))} had been cut short: "
             "measured again first")
    model = getattr(backend, "memory", None)
    limit, swap, sees = budget.machine_memory(backend.name, model.as_json() if model else None,
                                              getattr(backend, "memory_mb", VM_RAM_MIB))
    chosen_space = space.chosen(plan.groups)
    failed_in_a_row = 0
    while (ahead := _next_allowed(study, plan)) is not None:
        number, point = study.ask()
        knobs = chosen_space.knobs(point, base)
        path = tuning.write_knobs(number, point, knobs)
        why = study.why_asked(number)
        info(f"configuration {number} ({ahead}{'; ' + why if why else ''}): {point_text(point)}")
        impossible = chosen_space.impossible(point, knobs)
        if impossible is not None:
            study.tell(number, Outcome(None, {"no_figure": f"{impossible}: set aside unmeasured"},
                                       figures={"seconds": 0}, measured=False))
            info(f"  set aside: {impossible}")
            continue
        estimated = budget.estimate(TUNED, knobs, limit, swap, sees)
        if estimated is not None and estimated.over_mib is not None and limit:
            _set_aside(study, number, estimated, limit)
            continue
        started = time.monotonic()
        folder = tuning.config_folder(number)
        try:
            give({TUNED: path}, f"configuration {number}")
            runfolder.check_free_space(load.run_folder_bytes(plan.steps), tuning.root.parent)
            ended = experiment.measure(backend, plan.steps, 1, folder,
                                       {"mode": "tune", "configuration": point, "thresholds": {},
                                        # the generator's ceiling is the host's, not the configuration's: once
                                        "ceiling_from": tuning.ceiling_measured_in(),
                                        "tuned_knobs": str(path), "knobs_files": {TUNED: str(path)}},
                                       machines=(TUNED,), unusable=unusable(CAPACITY, (TUNED,)), extra=0)
        except LabError as error:
            failed_in_a_row += 1
            study.tell(number, Outcome(None, {"no_figure": f"it could not be measured: {error}"[:500]},
                                       figures={"seconds": round(time.monotonic() - started, 1)}))
            info(f"  not measured: {error}")
            if failed_in_a_row >= 2:
                raise StepFailed(f"two configurations in a row could not be measured (the last: {error})") from error
            continue
        if ended["how"] == "interrupted":
            raise KeyboardInterrupt
        failed_in_a_row = 0
        outcome = outcome_of(folder, limit, time.monotonic() - started)
        if ended["how"] != "completed" and "no_figure" not in outcome.broken:
            outcome = Outcome(None, {**outcome.broken, "no_figure": f"the run {ended['how']}"}, outcome.amounts,
                              outcome.figures)
        if (paused := outcome.figures.get("host_paused")) and study.measure_again(number, outcome, paused):
            info(f"  measured again next: {paused}")
            continue
        study.tell(number, outcome)
        info("  " + _said(outcome, study.best()))
        step = guide.next_step(chosen_space, number, point, outcome.figures, outcome.feasible)
        if step is not None and study.enqueue(step.point, step.why):
            info(f"  next, as its knee's verdict points: {step.dimension} {step.before} -> {step.after}")
    return study


def _set_aside(study: Study, number: int, estimated: budget.Budget, limit: float) -> None:
    """A configuration whose memory budget exceeds the machine's model: told to the study, never measured."""
    study.tell(number, Outcome(None, {"memory_over": f"its memory budget is {estimated.total_mib:.0f} MiB, "
                                                     f"{estimated.over_mib:.0f} MiB over the {limit:.0f} "
                                                     "MiB model: set aside unmeasured"},
                               {"memory_over": round(estimated.total_mib / limit - MEMORY_SHARE_MAX, 4)},
                               {"budget_mib": round(estimated.total_mib, 1), "seconds": 0},
                               measured=False))
    info(f"  set aside: its memory budget ({estimated.total_mib:.0f} MiB) exceeds the {limit:.0f} MiB model")


def _next_allowed(study: Study, plan: Plan) -> str | None:
    """Whether another configuration fits the plan, said as where it stands ("3 of 20", "41 min of 2 h spent"); None
    when the trials or the budget are spent (a configuration is started only if the mean one so far still fits).
    A configuration set aside (by its memory budget, or a choice its stack lacks) costs nothing and counts for neither,
    but SET_ASIDE_MAX of them in a row end the search: the space's ranges then lie mostly past the machine's memory."""
    records = study.records()
    done = [r for r in records if r.state == "COMPLETE"]
    measured = [r for r in done if r.measured]
    aside = len(done) - max((i + 1 for i, r in enumerate(done) if r.measured), default=0)
    if aside >= SET_ASIDE_MAX:
        info(f"{aside} configurations in a row were set aside (their memory budget, or choices their stack lacks): "
             "the search ends (narrow the ranges of ansible/knob-space.yml that weigh most, or give the machine more "
             "memory)")
        return None
    if plan.trials is not None:
        return f"{len(measured) + 1} of {plan.trials}" if len(measured) < plan.trials else None
    spent = sum(float(r.figures.get("seconds") or 0) for r in records)
    durations = [float(r.figures.get("seconds") or 0) for r in measured]
    expected = sum(durations) / len(durations) if durations else plan.trial_s() / 2
    if spent + expected > (plan.budget_s or 0):
        return None
    return f"{duration_text(spent)} of {duration_text(plan.budget_s or 0)} spent"


def _said(outcome: Outcome, best: Record | None) -> str:
    found = ("no capacity" if outcome.capacity_rps is None else f"capacity {outcome.capacity_rps:.0f} req/s")
    broken = f"; broken: {'; '.join(outcome.broken.values())}" if outcome.broken else ""
    lead = (f"; best so far {best.capacity_rps:.0f} req/s (configuration {best.number})"
            if best is not None and best.capacity_rps is not None else "; no configuration meets the constraints yet")
    knee = outcome.figures.get("at_knee")
    cost = outcome.figures.get("cpu_per_request")
    return found + broken + lead + (f"\n      at its knee ({outcome.figures.get('knee_rps'):.0f} req/s): {knee}"
                                    if knee and isinstance(outcome.figures.get("knee_rps"), (int, float)) else "") + \
        (f"\n      at its capacity, CPU {cost}" if cost else "")


def result(study: Study, tuning: Tuning, space: Space, plan: Plan, base: dict) -> dict:
    """tune.json's result and best.yml: every configuration, the best one, each knob's importance."""
    records = study.records()
    best = study.best()
    chosen = space.chosen(plan.groups)
    if best is not None:
        knobs = chosen.knobs(best.point, base)
        RunFolder(tuning.root).write_text(
            tuning.root / BEST_FILE,
            f"# The best configuration of tune {tuning.root.name}: capacity {best.capacity_rps:.0f} req/s at the SLO "
            f"(configuration {best.number}).\n# {point_text(best.point)}\n# A whole host_vars file: ./start.sh up --knobs "
            f"{shown(tuning.root / BEST_FILE)} gives it to the tuned machine\n" + yaml.safe_dump(knobs, sort_keys=False))
    importance = study.importance()
    measured = [r for r in records if r.state == "COMPLETE"]
    best_so_far, running = [], -math.inf
    for record in measured:
        if record.feasible and record.capacity_rps is not None:
            running = max(running, record.capacity_rps)
        best_so_far.append(None if running == -math.inf else running)
    found = {"configurations": [asdict(r) for r in records],
             "best": asdict(best) if best is not None else None,
             "best_file": str(tuning.root / BEST_FILE) if best is not None else None,
             "importance": importance, "best_so_far": best_so_far,
             "feasible": sum(r.feasible for r in measured), "measured": sum(r.measured for r in measured),
             "set_aside": sum(not r.measured for r in measured),
             "sentence": _sentence(best, importance, len(measured)), "bound_at_knee": _bound_at_knee(measured)}
    tuning.update(result=found, ended_at=time.time())
    return found


def _bound_at_knee(measured: list[Record]) -> dict[str, int]:
    """What bound the measured configurations at their knees (figures["queued_at"]: the host's CPUs, else the
    deepest full pool): how many at each, and at none."""
    found = Counter(r.figures.get("queued_at") or "no pool full" for r in measured
                    if r.measured and r.figures.get("at_knee"))
    return dict(found.most_common())


def _sentence(best: Record | None, importance: dict[str, float] | None, count: int) -> str:
    if best is None or best.capacity_rps is None:
        return (f"No configuration of the {count} tried met the constraints with a capacity: see each one's reason "
                "in tune.json")
    lead = ""
    if importance:
        name = max(importance, key=lambda n: importance[n])
        lead = f"; the knob that mattered most: {name} ({importance[name]:.0%} of the importance)"
    return (f"The best of {count} configurations served {best.capacity_rps:.0f} req/s at the SLO (configuration "
            f"{best.number}: {point_text(best.point)}){lead}")
