"""Which knob group bought what: ablation analysis (Fawcett & Hoos, "Analysing differences between algorithm
configurations through ablation", Journal of Heuristics 2016) over measured configurations.

A configuration is the set of knob groups (lab/ablation/groups.py) the tuned machine carries on top of the
default machine's knobs; a measurement is a figure per trial (higher is better: the tuned machine's steady-state
throughput in each trial, or a capacity). From the default configuration (no group) to the tuned
one (every group):
- the forward path: greedily, at each step the group whose addition gains most (only groups whose needs
  are met), so the first steps are the groups that matter;
- leave-one-out: the tuned configuration without each group (and the groups that need it), its loss.
A group's share is its step's gain over the whole gain, with a 95% bootstrap interval (each
configuration's trials resampled on their own). Where a group's forward gain and its leave-one-out loss
disagree beyond their intervals, the groups interact, and the result says so.

Where two configurations can be measured at once (one on each machine), the analysis says ahead which it is
about to read: prefetch(configs) before each batch, so that the measurer can pair them."""
from __future__ import annotations

from collections.abc import Callable

import numpy

from lab.ablation.groups import Group, valid
from lab.analysis.trials import CONFIDENCE, RESAMPLES, SEED, few_trials_note, percentile_interval, resampled_means

Config = frozenset[str]
Measure = Callable[[Config], list[float]]
Prefetch = Callable[[list[Config]], None]


def nothing_ahead(_configs: list[Config]) -> None:
    """One configuration at a time: nothing to measure ahead."""


def dependents(groups: dict[str, Group], name: str) -> set[str]:
    """The groups that need name, directly or not: they leave with it."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for group in groups.values():
            if group.name not in found and ({name} | found) & set(group.needs):
                found.add(group.name)
                changed = True
    return found


def forward_path(groups: dict[str, Group], measure: Measure, prefetch: Prefetch = nothing_ahead) -> list[dict]:
    """The greedy path from no group to every group: each step's group, its configuration's mean and what
    the other candidates of that step measured (prefetch is told each step's candidates first)."""
    applied: Config = frozenset()
    steps = []
    while len(applied) < len(groups):
        candidates = [name for name in groups if name not in applied and valid(groups, applied | {name})]
        if not candidates:
            raise ValueError(f"no group can be added to {sorted(applied)}: their needs are never met")
        prefetch([applied | {name} for name in candidates])
        means = {name: float(numpy.mean(measure(applied | {name}))) for name in candidates}
        best = max(candidates, key=lambda name: (means[name], -candidates.index(name)))
        applied = applied | {best}
        steps.append({"group": best, "config": sorted(applied), "mean": means[best], "candidates": means})
    return steps


def leave_one_out(groups: dict[str, Group]) -> dict[str, Config]:
    """Each group's leave-one-out configuration: every group but it and those that need it."""
    everything = frozenset(groups)
    return {name: everything - {name} - dependents(groups, name) for name in groups}


def wanted(groups: dict[str, Group]) -> list[Config]:
    """The configurations known to be needed before the path is walked, in the order they are read: the default
    (the baseline), the tuned one, then leave-one-out's."""
    found = [frozenset(), frozenset(groups)]
    return found + [config for config in leave_one_out(groups).values() if config not in found]


def analyze(groups: dict[str, Group], measure: Measure, unit: str, resamples: int = RESAMPLES,
            prefetch: Prefetch = nothing_ahead) -> dict:
    """The path, each group's share of the gain and its leave-one-out loss, with 95% intervals, and a
    sentence. measure(config) -> the figure of each trial of that configuration (measured once each), in unit.
    prefetch(configs): told which configurations are read next, before they are."""
    cache: dict[Config, list[float]] = {}

    def measured(config: Config) -> list[float]:
        if config not in cache:
            cache[config] = list(measure(config))
            if not cache[config]:
                raise ValueError(f"no measurement for {sorted(config)}")
        return cache[config]

    none: Config = frozenset()
    everything = frozenset(groups)
    prefetch([none])
    measured(none)      # the baseline first: every later step is read against it, so it is on show from the start
    path = forward_path(groups, measured, prefetch)
    loo = leave_one_out(groups)
    rng = numpy.random.default_rng(SEED)
    # in a fixed order: the same measurements always give the same intervals (a set's order varies by run)
    configs = sorted({none, everything, *(frozenset(s["config"]) for s in path), *loo.values()}, key=sorted)
    prefetch(configs)
    draws = {config: resampled_means(measured(config), rng, resamples) for config in configs}
    total = draws[everything] - draws[none]
    whole = _interval(total)
    rows = _rows(groups, path, loo, draws, measured, total, whole)
    default_mean, tuned_mean = float(numpy.mean(measured(none))), float(numpy.mean(measured(everything)))
    return {"default": round(default_mean, 6), "tuned": round(tuned_mean, 6),
            "gain": round(tuned_mean - default_mean, 6), "gain_interval": whole, "path": rows,
            "configurations": {config_name(c): v for c, v in cache.items()},
            "unit": unit, "sentence": sentence(rows, whole, unit),
            "interval_note": few_trials_note(min(len(measured(config)) for config in configs)),
            "interacting": [r["group"] for r in rows if r["interacts"]],
            "basis": f"forward greedy path and leave-one-out (Fawcett & Hoos 2016); 95% intervals by a percentile "
                     f"bootstrap, each configuration's trials resampled on their own, {resamples:,} resamples"}


def _interval(samples: numpy.ndarray) -> tuple[float, float]:
    low, high = percentile_interval(samples, CONFIDENCE)
    return round(low, 6), round(high, 6)


def _rows(groups: dict[str, Group], path: list[dict], loo: dict[str, Config], draws: dict[Config, numpy.ndarray],
          measured: Measure, total: numpy.ndarray, whole: tuple[float, float]) -> list[dict]:
    """Each step of the path: its group's gain and share of the whole gain (total: its resampled draws, whole: their
    interval), its leave-one-out loss, each with its interval; whether it is measurable, whether it interacts."""
    none: Config = frozenset()
    everything = frozenset(groups)
    shares_told = not whole[0] <= 0 <= whole[1]     # a share of a gain that may be 0 is no share at all
    previous = none
    rows = []
    for step in path:
        config = frozenset(step["config"])
        gain = draws[config] - draws[previous]
        share = numpy.divide(gain, total, out=numpy.full_like(gain, numpy.nan), where=total != 0)
        loss = draws[everything] - draws[loo[step["group"]]]
        row = {"group": step["group"], "about": groups[step["group"]].about, "config": step["config"],
               "mean": round(float(numpy.mean(measured(config))), 6),
               "gain": round(float(numpy.mean(measured(config)) - numpy.mean(measured(previous))), 6),
               "gain_interval": _interval(gain), "share": _finite_mean(share) if shares_told else None,
               "share_interval": _interval(share[numpy.isfinite(share)])
               if shares_told and numpy.isfinite(share).any() else None,
               "loo_config": sorted(loo[step["group"]]),
               "loo_loss": round(float(numpy.mean(measured(everything)) - numpy.mean(measured(loo[step["group"]]))), 6),
               "loo_interval": _interval(loss)}
        row["measurable"] = not (row["gain_interval"][0] <= 0 <= row["gain_interval"][1])
        row["interacts"] = bool(row["gain_interval"][1] < row["loo_interval"][0]
                                or row["loo_interval"][1] < row["gain_interval"][0])
        rows.append(row)
        previous = config
    return rows


def config_name(config: Config) -> str:
    """A configuration as the result names it: its groups, comma separated ("(default)": none)."""
    return ",".join(sorted(config)) or "(default)"


def config_of(name: str) -> Config:
    """The configuration config_name named."""
    return frozenset() if name == "(default)" else frozenset(name.split(","))


def _finite_mean(values: numpy.ndarray) -> float | None:
    finite = values[numpy.isfinite(values)]
    return round(float(finite.mean()), 6) if len(finite) else None


def amount(value: float, unit: str) -> str:
    """A signed figure in its unit: a tenth where it is large (req/s), three decimals where it is small."""
    return f"{value:+,.1f} {unit}" if abs(value) >= 10 else f"{value:+.3f} {unit}"


def sentence(rows: list[dict], gain_interval: tuple[float, float] | None = None, unit: str = "") -> str:
    """One sentence from the data: the groups that explain most of the gain, those the tuned machine cannot do
    without (its leave-one-out loss excludes 0) though their step said otherwise, and those that changed nothing.
    A whole gain whose interval holds 0 has no shares to give: said instead."""
    needed = [r for r in rows if r["loo_interval"][0] > 0]
    if gain_interval is not None and gain_interval[0] <= 0 <= gain_interval[1]:
        spread = ("the default and the tuned configuration measured the same in every trial"
                  if gain_interval[0] == gain_interval[1] == 0 else
                  f"95% interval {amount(gain_interval[0], unit)} to {amount(gain_interval[1], unit)}")
        said = (f"The tuned machine's gain over the default machine's knobs is not measurable here ({spread}): no "
                "group's share of it can be told")
        # the tuning may still hold together: a group the tuned machine cannot do without is worth saying
        if needed:
            said += "; yet " + _names([_without(r, unit) + (
                f", far from what it gained alone on the path ({amount(r['gain'], unit)}): it matters with the "
                "other groups" if r["interacts"] else "") for r in needed])
        return said + "."
    ranked = sorted((r for r in rows if r["measurable"] and r["share"] is not None), key=lambda r: -r["share"])
    leading, explained = [], 0.0
    for row in ranked:
        leading.append(row)
        explained += row["share"]
        if explained >= 0.8:
            break
    parts = []
    if leading:
        low = sum(r["share_interval"][0] for r in leading if r["share_interval"])
        high = sum(r["share_interval"][1] for r in leading if r["share_interval"])
        parts.append(f"{_names([r['group'] for r in leading])} explain{'s' if len(leading) == 1 else ''} "
                     f"{explained:.0%} of the gain (intervals summed: {low:.0%} to {high:.0%})")
    # a step lost in the noise of the path, yet a measurable loss when left out of the tuned machine
    unseen = [r for r in needed if not r["measurable"] and not r["interacts"]]
    if unseen:
        parts.append(_names([_without(r, unit) for r in unseen])
                     + (", though its step on the path was not measurable" if len(unseen) == 1
                        else ", though none of their steps on the path was measurable"))
    nothing = [r["group"] for r in rows if not r["measurable"] and not r["interacts"] and r not in needed]
    if nothing:
        parts.append(f"{_names(nothing)} changed nothing measurable")
    interacting = [r for r in rows if r["interacts"]]
    if interacting:
        parts.append(f"{_names([r['group'] for r in interacting])} interact{'s' if len(interacting) == 1 else ''} "
                     "with other groups: " + _names([_without(r, unit) for r in interacting])
                     + (", far from what it gained alone on the path" if len(interacting) == 1
                        else ", far from what each gained alone on the path"))
    return ("; ".join(parts) + ".") if parts else "No group changed anything measurable."


def _without(row: dict, unit: str) -> str:
    """What the tuned machine measured without the row's group (its leave-one-out loss), signed, with its interval."""
    return (f"without {row['group']} the tuned machine changes by {amount(-row['loo_loss'], unit)} (95% interval "
            f"{amount(-row['loo_interval'][1], unit)} to {amount(-row['loo_interval'][0], unit)})")


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
