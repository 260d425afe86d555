"""A tune's study: Optuna's TPE sampler over the knob space, kept in SQLite in the tune's folder (study.db), so that
a Ctrl-C loses nothing and --resume goes on. Each trial is one configuration: its capacity (maximised) and its
constraints, each a number that is positive when broken (Optuna's convention), with why kept beside it: a
configuration that breaks one is recorded with its reason, never dropped."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import Trial, TrialState

from lab.tune.space import Space, Value

STUDY_NAME = "tune"
# The constraints, in the order Optuna is told them: each positive when broken.
CONSTRAINTS = ("process_died", "memory_over", "page_ins_over", "no_figure")


@dataclass(frozen=True)
class Outcome:
    """What measuring one configuration gave: its capacity (None: none, and why in broken), each constraint's
    amount (positive: broken) and why it is broken, and the figures they were read from."""
    capacity_rps: float | None
    broken: dict[str, str] = field(default_factory=dict)        # constraint -> why
    amounts: dict[str, float] = field(default_factory=dict)     # constraint -> its amount (positive: broken)
    figures: dict = field(default_factory=dict)
    measured: bool = True                                       # False: set aside unmeasured (its budget)

    @property
    def feasible(self) -> bool:
        return not self.broken and self.capacity_rps is not None


@dataclass(frozen=True)
class Record:
    """One trial as the study keeps it."""
    number: int
    point: dict[str, Value]
    state: str                                  # COMPLETE, FAIL (interrupted), RUNNING
    capacity_rps: float | None
    feasible: bool
    broken: dict[str, str]
    figures: dict
    measured: bool
    chosen_by: str | None = None                # the verdict's step that queued it (None: the sampler)


def distributions(space: Space) -> dict[str, BaseDistribution]:
    found: dict[str, BaseDistribution] = {}
    for name, dim in space.dimensions.items():
        if dim.categorical:
            found[name] = CategoricalDistribution(list(dim.choices))
        else:
            assert dim.low is not None and dim.high is not None
            found[name] = IntDistribution(dim.low, dim.high, log=dim.log, step=dim.step)
    return found


class Study:
    """The tune's Optuna study in root/study.db."""

    def __init__(self, root: Path | None, space: Space, seed: int, startup_trials: int = 8):
        """root None: in memory (nothing kept, for a synthetic objective)."""
        self.path = root / "study.db" if root is not None else None
        self.space = space
        self._asked: dict[int, Trial] = {}
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(storage=f"sqlite:///{self.path}" if self.path else None,
                                         study_name=STUDY_NAME, direction="maximize", load_if_exists=True)
        # TPE reads each trial's constraints (Trial.set_constraint): a broken one ranks below every feasible one. A
        # resumed study's sampler is seeded past its trials: the same seed again would propose its first ones again.
        self.study.sampler = optuna.samplers.TPESampler(seed=seed + len(self.study.trials),
                                                        n_startup_trials=startup_trials, multivariate=True)

    def requeue_interrupted(self) -> list[int]:
        """Trials a Ctrl-C left running: each marked failed, its configuration asked again first."""
        left = [t for t in self.study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
        for trial in left:
            self.study.tell(trial.number, state=TrialState.FAIL)
            self.study.enqueue_trial(dict(trial.params), user_attrs={"requeued_from": trial.number})
        return [t.number for t in left]

    def measure_again(self, number: int, outcome: Outcome, why: str) -> bool:
        """An asked configuration whose measurement measured something else (the host stood still in its knee step):
        kept failed with why (the sampler learns nothing from it) and its values queued again first, once; False
        when it was itself such a repeat (then it is told as it came out)."""
        trial = self._asked[number]
        if "requeued_from" in trial.user_attrs:
            return False
        self._asked.pop(number)
        trial.set_user_attr("broken", {"measured_again": why})
        trial.set_user_attr("figures", outcome.figures)
        self.study.tell(trial, state=TrialState.FAIL)
        self.study.enqueue_trial(dict(trial.params), user_attrs={"requeued_from": number, "requeued_why": why})
        return True

    def enqueue(self, point: dict[str, Value], why: str) -> bool:
        """point queued ahead of the sampler's proposals, why kept with it; False (nothing queued) if a configuration
        with these values was already tried or queued (a failed one included: it is measured again only on resume)."""
        if any(t.system_attrs.get("fixed_params", t.params) == point for t in self.study.get_trials(deepcopy=False)):
            return False
        self.study.enqueue_trial(dict(point), user_attrs={"enqueued": why})
        return True

    def why_asked(self, number: int) -> str | None:
        """Why an asked configuration was chosen other than by the sampler: the verdict's step that queued it, or the
        configuration a Ctrl-C cut short that it measures again."""
        attrs = self._asked[number].user_attrs
        if "requeued_from" in attrs:
            return f"configuration {attrs['requeued_from']} again: {attrs.get('requeued_why') or 'it had been cut short'}"
        return str(attrs["enqueued"]) if attrs.get("enqueued") else None

    def ask(self) -> tuple[int, dict[str, Value]]:
        trial = self.study.ask(distributions(self.space))
        self._asked[trial.number] = trial
        return trial.number, dict(trial.params)

    def tell(self, number: int, outcome: Outcome) -> None:
        trial = self._asked.pop(number)
        for name in CONSTRAINTS:
            trial.set_constraint(name, outcome.amounts.get(name, 1.0 if name in outcome.broken else -1.0))
        for key, value in (("broken", outcome.broken), ("figures", outcome.figures), ("measured", outcome.measured),
                           ("capacity_rps", outcome.capacity_rps)):
            trial.set_user_attr(key, value)
        # The objective Optuna ranks by: a configuration without a figure ranks below every one with a figure.
        self.study.tell(trial, outcome.capacity_rps if outcome.capacity_rps is not None else 0.0)

    def records(self) -> list[Record]:
        found = []
        # a configuration queued by a knee's verdict and not yet asked for is not a configuration tried
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL,
                                                                   TrialState.RUNNING)):
            attrs = trial.user_attrs
            capacity = attrs.get("capacity_rps")
            broken = dict(attrs.get("broken") or {})
            found.append(Record(trial.number, dict(trial.params), trial.state.name, capacity,
                                trial.state == TrialState.COMPLETE and capacity is not None and not broken,
                                broken, dict(attrs.get("figures") or {}), bool(attrs.get("measured", True)),
                                attrs.get("enqueued")))
        return found

    def best(self) -> Record | None:
        """The feasible configuration with the highest capacity (the earliest of equals)."""
        feasible = [r for r in self.records() if r.feasible]
        return max(feasible, key=lambda r: (r.capacity_rps or 0, -r.number)) if feasible else None

    def importance(self) -> dict[str, float] | None:
        """Each dimension's importance to reaching the best capacities over the measured trials (PED-ANOVA: how far
        its distribution among the top tenth departs from its distribution over all; Optuna's own, needing no
        scikit-learn as fANOVA does), summing to 1; None with fewer than 4 measured trials or no spread."""
        completed = [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                     if t.user_attrs.get("measured", True)]
        values = {t.value for t in completed}
        if len(completed) < 4 or len(values) < 2:
            return None
        try:
            found = optuna.importance.get_param_importances(
                self.study, evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
                params=[name for name in self.space.dimensions
                        if all(name in t.params for t in completed)] or None)
        except (RuntimeError, ValueError):
            return None
        return {name: round(float(share), 4) for name, share in found.items() if math.isfinite(share)}
