"""The second half of a capacity run's knee search: once the coarse steps have found a machine's knee (two steps in
a row missed the SLO), a second climb: a warm-up climbing to the coarse step below the last rate that met it, that step
again (a machine that misses it now has not recovered from the coarse overload, and its coarse figures stand), the
last rate met, and finer steps (the profile's resolution_rps apart) up to the first that missed, one machine after
the other, ended by the first miss (StepLoad.refined). A capacity then costs the coarse steps up to the knee and a
few near it, not every fine step from the start.

The coarse steps' knee is the analysis's own (lab/analysis/capacity.py, from the results as written): the same rule
the report applies. Each machine's finer steps go to jmeter/refine/<machine>/ with steps.json (the steps it ran,
and the bracket they came from); the summary joins them to the machine's steps (capacity.with_refined)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace

from lab import load
from lab.analysis import capacity
from lab.analysis.jmeter import read_results
from lab.errors import LabError
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.load.profile import LoadResult
from lab.progress import info, step
from lab.runfolder import RunFolder


def brackets(folder: RunFolder, profile: load.StepLoad, machines: tuple[str, ...], t0: float,
             ended_early: dict[str, float] | None = None) -> dict[str, tuple[int, int]]:
    """Each machine whose coarse steps found a knee with room for finer steps: (last rate met, first missed)."""
    found: dict[str, tuple[int, int]] = {}
    for machine in machines:
        results = folder.jmeter.results(machine)
        samples = read_results(results) if results.is_file() else None
        if not samples:
            continue
        coarse = capacity.analyze(samples, profile, t0, machine in (ended_early or {}))
        met, missed = coarse.get("capacity_rps"), coarse.get("knee_rps")
        if coarse.get("found") and met is not None and missed is not None and profile.refined(met, missed):
            found[machine] = (met, missed)
    return found


def refine(folder: RunFolder, profile: load.StepLoad, coarse: LoadResult, urls: dict[str, str], path: str,
           engines: Engines | None, network: ClientNetwork | None, cpus: str | None, problems: list[str],
           at_rest: Callable[[list[str]], bool] | None = None) -> LoadResult:
    """After the coarse load (unless it was cut short), the finer steps of each machine in urls that has a bracket;
    the load's result, ended when they ended, interrupted when Ctrl-C (or SIGTERM) ended them (what they measured is
    kept, as the coarse load's is). What went wrong goes to problems and never fails the run: the coarse steps'
    capacity stands. at_rest: as load.run's, for each finer load's end."""
    if coarse.interrupted or coarse.lost:       # cut short, or a threshold lost (--stop-on-fail): nothing to refine
        return coarse
    if not _refine(folder, profile, urls, path, coarse.started_at, coarse.ended_early, engines, network, cpus,
                   problems, at_rest):
        return replace(coarse, ended_at=time.time(), interrupted=True)
    return replace(coarse, ended_at=time.time())


def _refine(folder: RunFolder, profile: load.StepLoad, urls: dict[str, str], path: str, t0: float,
            ended_early: dict[str, float], engines: Engines | None, network: ClientNetwork | None, cpus: str | None,
            problems: list[str], at_rest: Callable[[list[str]], bool] | None) -> bool:
    for machine, (met, missed) in brackets(folder, profile, tuple(urls), t0, ended_early).items():
        finer = profile.refined(met, missed)
        assert finer is not None
        out = folder.jmeter.refine(machine)
        out.root.mkdir(parents=True, exist_ok=True)
        RunFolder.write_json(out.root / "steps.json", {"machine": machine, "met_rps": met, "missed_rps": missed,
                                                       "profile": {"model": finer.model, **asdict(finer)}})
        try:
            with step(f"Refining {machine}'s knee between {met} and {missed} req/s ({finer.describe()})"):
                result = load.run({machine: urls[machine]}, finer, out.root, schedule="sequential",
                                  on_progress=load.print_progress, path=path, engines=engines, network=network,
                                  cpus=cpus, dashboards=False, at_rest=at_rest)
        except LabError as error:
            problems.append(f"{machine}: its knee was not refined ({error}); the coarse steps' capacity stands")
            continue
        problems.extend(f"{machine}, refining its knee: {problem}" for problem in result.problems)
        if result.interrupted:
            return False
        info(f"{machine}: refined between {met} and {missed} req/s")
    return True
