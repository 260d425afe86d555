"""A tune's plan and its folder, runs/<id>/: tune.json (the plan, then the result), study.db (Optuna's study, SQLite: a
Ctrl-C loses nothing, --resume goes on), knobs/<n>.yml (each configuration's extra vars), configs/<n>/ (each one's
capacity run), best.yml (the best configuration, a host_vars file). Nothing here needs Optuna: every command but tune
starts without it."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from lab import contract, load
from lab.analysis import capacity
from lab.analysis.verdict import PAGE_INS_MAX
from lab.runfolder import RecordFolder, RunFolder
from lab.tune.space import Space, Value

TUNE_JSON = "tune.json"
BEST_FILE = "best.yml"
MEMORY_SHARE_MAX = 0.90         # of the memory model: the constraint, room for what a longer load would grow
PROVISION_S = 40                # a playbook run that changes the tuned machine's knobs (ablation: 35 s; a native build 63)
TRIAL_OVERHEAD_S = 15           # PCP's logger, the evidence, the summary and the report of one capacity run


@dataclass(frozen=True)
class Plan:
    groups: tuple[str, ...]
    steps: load.StepLoad
    trials: int | None              # at most this many configurations ...
    budget_s: int | None            # ... or within this long (the sum of the configurations' own durations)
    seed: int
    validate: int = 0               # then the best one against the default machine and the 2018 tuning: trials each
    schedule: str | None = None     # the validation's (None: the placement's)

    def as_json(self) -> dict:
        return {"groups": list(self.groups), "steps": asdict(self.steps), "trials": self.trials,
                "budget_s": self.budget_s, "seed": self.seed, "validate": self.validate, "schedule": self.schedule,
                "load": self.steps.describe()}

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        plan = cls(tuple(data["groups"]), capacity.step_load(data["steps"]), data.get("trials"), data.get("budget_s"),
                   int(data["seed"]), int(data.get("validate") or 0),      # a tune planned before validation: none
                   data.get("schedule"))
        if plan.schedule not in (None, *load.SCHEDULES):
            raise ValueError(f"schedule {plan.schedule!r} is none of {', '.join(load.SCHEDULES)}")
        return plan

    def trial_s(self) -> float:
        """A configuration's cost at most: its provisioning, every step to the highest rate, the run's overhead."""
        return PROVISION_S + self.steps.duration_s + TRIAL_OVERHEAD_S

    def validation_s(self) -> float:
        """The validation's cost at most: two runs of validate trials, both machines each (one after the other unless
        the schedule loads both at once), every step."""
        loads = 1 if self.schedule == "parallel" else 2
        return 2 * (PROVISION_S + self.validate * loads * (self.steps.duration_s + TRIAL_OVERHEAD_S))

    def describe(self, space: Space) -> list[str]:
        dims = space.dimensions
        most = self.trials if self.trials is not None else None
        within = (f"{most} configuration{'s' if most != 1 else ''}" if most is not None else
                  f"as many configurations as {duration_text(self.budget_s or 0)} holds")
        each = self.trial_s()
        lines = [f"Tune of {len(dims)} knob{'s' if len(dims) != 1 else ''} in {len(space.groups)} group"
                 f"{'s' if len(space.groups) != 1 else ''} ({', '.join(space.groups)}) on the tuned machine, from the "
                 "default machine's knobs:"]
        lines += [f"  {dim.describe()}" for dim in dims.values()]
        lines += [f"  {within}, chosen by Optuna's TPE (seed {self.seed}; the first ones at random), each measured "
                  f"alone by {self.steps.describe()}",
                  f"  objective: capacity at the SLO; constraints: no process death, memory held at most "
                  f"{MEMORY_SHARE_MAX:.0%} of the model, page-ins below {PAGE_INS_MAX:g}/s; a configuration whose "
                  "memory budget does not fit, or with a choice its stack lacks, is set aside unmeasured",
                  f"  each configuration {duration_text(each)} at most (provisioning {PROVISION_S} s, the steps to "
                  f"{self.steps.max_rps} req/s); " + (f"about {duration_text(most * each)} at most" if most is not None
                                                      else f"about {max(1, int((self.budget_s or 0) // each))} "
                                                           "configurations at least")
                  + "; an interrupted tune continues with --resume"]
        if self.validate:
            lines.append(f"  then the best configuration validated: the default machine against the tuned one given it, "
                         f"and against the tuned machine's own knobs, each a capacity run of {self.validate} trial"
                         f"{'s' if self.validate != 1 else ''} (both machines"
                         f"{', at once' if self.schedule == 'parallel' else ', one after the other' if self.schedule else ''}"
                         f"; {duration_text(self.validation_s())} at most; --validate 0 skips it)")
        return lines


def duration_text(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{max(minutes, 1) if seconds > 0 else 0} min"


class Tuning(RecordFolder):
    """A tune's folder."""
    FILE = TUNE_JSON
    KIND = "tune"
    SCHEMA = contract.TUNE_SCHEMA

    @classmethod
    def create(cls, plan: Plan, runs: Path | None = None, **facts) -> Tuning:
        return cls.start({"plan": plan.as_json(), **facts}, runs)

    def config_folder(self, number: int) -> RunFolder:
        return RunFolder(self.root / "configs" / str(number))

    def ceiling_measured_in(self) -> str | None:
        """The first configuration's run whose load generator's ceiling was measured (None: none yet); one that
        tried and could not is passed over, so the next configuration measures it again."""
        configs = self.root / "configs"
        numbers = sorted(int(p.name) for p in configs.iterdir() if p.name.isdecimal()) if configs.is_dir() else []
        return next((str(folder.root) for n in numbers
                     if capacity.ceiling_measured((folder := self.config_folder(n)).jmeter.generator)),
                    None)

    def write_knobs(self, number: int, point: dict[str, Value], chosen: dict) -> Path:
        path = self.root / "knobs" / f"{number}.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        RunFolder(self.root).write_text(path, f"# configuration {number} of this tune: {point_text(point)}\n"
                                              "# the tuned machine's knobs (site.yml loads them over its host_vars)\n"
                                              + yaml.safe_dump(chosen, sort_keys=False))
        return path


def point_text(point: dict[str, Value]) -> str:
    return ", ".join(f"{name} {value}" for name, value in point.items())
