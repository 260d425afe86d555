"""What generates a run's load, for the length of one load: the remote engines the run asked for (--load-from
loadgen), or the backend's network of the load generator's own for this host's JMeter (lab/machines), or this
host's own; and before a capacity run's load, what that generator can send here (lab/load/ceiling.py)."""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

from lab.analysis import capacity
from lab.errors import LabError
from lab.load import StepLoad, ceiling
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.machines.protocol import Backend
from lab.progress import info, step
from lab.runfolder import RUNS, RunFolder

# A ceiling measured this recently by the same generator (its network and CPUs) with the same steps (or the same
# taken further) is still this host's: a later capacity run copies it, raw results included, rather than spending
# half a minute measuring it again (CI's lab tests measured it four times in 16 minutes, three of them with the same
# steps: at least 1,200 req/s each; then twice, the second with only its max rate lower, 22 s).
REUSE_S = 1800


@contextmanager
def load_generator(backend: Backend, targets: list[tuple[str, int]], mode: dict, folder: RunFolder
                   ) -> Iterator[Engines | ClientNetwork | None]:
    """The engines, or the network JMeter runs in, that reach targets (address, port) until the block ends; None:
    JMeter runs in this host's own network."""
    with ExitStack() as stack:
        if mode.get("load_from") == "loadgen":
            with step("Starting the load generator's JMeter engine"):
                sender: Engines | ClientNetwork | None = stack.enter_context(backend.engines(
                    targets, folder.jmeter.engine_log, folder.jmeter.engine_out))
        else:
            with step("Preparing the load generator's network"):
                sender = stack.enter_context(backend.client_network(targets))
        yield sender


def measure_ceiling(backend: Backend, targets: list[tuple[str, int]], profile: StepLoad, folder: RunFolder,
                    cpus: str | None, problems: list[str], measured_in: RunFolder | None = None,
                    runs: Path = RUNS) -> None:
    """What the load generator can send here, before the machines' load: the line a capacity run's steps are set
    against, into folder's jmeter/generator/. Where it cannot be measured the run goes on without it, saying why in
    problems. measured_in: a run of the same series (a tune's first configuration) that measured it already on this
    host: its measurement is copied in (raw results included) rather than taken again; as is, without one, the newest
    in runs/ taken by the same generator with the same steps in the last REUSE_S (recent())."""
    if measured_in is not None and capacity.ceiling_measured(measured_in.jmeter.generator):
        _copy(measured_in, folder, "a run of the same series", runs)
        return
    with backend.client_network(targets) as network:
        if network is None:
            problems.append(f"the load generator's ceiling was not measured: on the {backend.name} backend JMeter "
                            "sends from this host's own network, where the lab starts no target")
            return
        steps = ceiling.profile(profile.slo, profile.max_rps)
        if (taken := recent(runs, network.where, steps, cpus)) is not None:
            earlier, reached = taken
            further = f" taken further (to {reached} req/s)" if reached != steps.max_rps else ""
            _copy(earlier, folder, f"the same generator with the same steps{further}, within the {REUSE_S // 60} "
                  "minutes the lab keeps a ceiling", runs)
            return
        try:
            with step(f"Measuring the load generator's ceiling ({steps.describe()})"):
                ceiling.measure(network, folder.jmeter.generator, steps, cpus)
        except LabError as error:
            problems.append(f"the load generator's ceiling was not measured: {error}")
            return
    found = capacity.generator_ceiling(folder.jmeter.generator)
    if found is not None:
        info(f"the load generator's ceiling: {found['text']}")


def recent(runs: Path, where: str, steps: StepLoad, cpus: str | None, now: float | None = None
           ) -> tuple[RunFolder, int] | None:
    """The newest run folder in runs/ (a run's, or a trial's, a tune's configuration's in one) whose ceiling was
    measured in the last REUSE_S by the generator where says (its network, sysctls, CPU share) on cpus, with steps or
    the same steps taken further (a run with a higher max rate's: each step up to steps' last was judged as steps
    would judge it, and what lies above says "at least" no less), with the max rate its steps reached; None: none."""
    now = time.time() if now is None else now
    wanted, found = {"model": steps.model, **asdict(steps)}, []
    for record in (*runs.glob("*/jmeter/generator/target.json"), *runs.glob("*/*/*/jmeter/generator/target.json")):
        try:
            measured_at = record.stat().st_mtime        # written as its load began; a copy keeps it
        except OSError:
            continue
        target = _target(record)
        taken = target.get("profile")
        reaches = (isinstance(taken, dict) and isinstance(taken.get("max_rps"), int)
                   and taken["max_rps"] >= steps.max_rps and {**taken, "max_rps": steps.max_rps} == wanted)
        same = reaches and (target.get("where"), target.get("cpus")) == (where, cpus)
        folder = RunFolder(record.parents[2].resolve())      # runs/latest's too: the same folder
        if same and 0 <= now - measured_at <= REUSE_S and capacity.ceiling_measured(folder.jmeter.generator):
            found.append((measured_at, not (record.parent / "copied.json").exists(), folder, target["profile"]["max_rps"]))
    if not found:
        return None
    # a copy keeps its measurement's time: of one measurement, the run that took it
    _, _, folder, reached = max(found, key=lambda entry: entry[:2])
    return folder, reached


def _target(record: Path) -> dict:
    """A ceiling's target.json (where, on which CPUs, with which steps it was measured); {} when unreadable."""
    try:
        target = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return target if isinstance(target, dict) else {}


def _copy(source: RunFolder, folder: RunFolder, why: str, runs: Path) -> None:
    """source's measurement of the ceiling into folder, which says where it came from and why (copied.json; a copy
    of a copy keeps the first copy's: the run that measured it)."""
    shutil.copytree(source.jmeter.generator.root, folder.jmeter.generator.root, dirs_exist_ok=True)
    record = folder.jmeter.generator.root / "copied.json"
    if not record.is_file():
        RunFolder.write_json(record, {"from": _named(source, runs), "why": why})
    found = capacity.generator_ceiling(folder.jmeter.generator)
    info(f"the load generator's ceiling: {found['text'] if found else '?'} (measured in "
         f"{found.get('copied_from') if found else _named(source, runs)}, copied here)")


def _named(source: RunFolder, runs: Path) -> str:
    """A run folder as the lab names it: its path under runs/ (its run's id, and the trial or configuration within
    it), else its folder's name."""
    root, runs = source.root.resolve(), runs.resolve()
    return str(root.relative_to(runs)) if root.is_relative_to(runs) else root.name
