"""What generates a run's load, for the length of one load: the remote engines the run asked for (--load-from
loadgen), or the backend's network of the load generator's own for this host's JMeter (lab/machines), or this
host's own; and before a capacity run's load, what that generator can send here (lab/load/ceiling.py)."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from lab.analysis import capacity
from lab.errors import LabError
from lab.load import StepLoad, ceiling
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.machines.protocol import Backend
from lab.progress import info, step
from lab.runfolder import RunFolder


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
                    cpus: str | None, problems: list[str], measured_in: RunFolder | None = None) -> None:
    """What the load generator can send here, before the machines' load: the line a capacity run's steps are set
    against, into folder's jmeter/generator/. Where it cannot be measured the run goes on without it, saying why in
    problems. measured_in: a run of the same series (a tune's first configuration) that measured it already on this
    host: its measurement is copied in (raw results included) rather than taken again."""
    if measured_in is not None and capacity.ceiling_measured(measured_in.jmeter.generator):
        shutil.copytree(measured_in.jmeter.generator.root, folder.jmeter.generator.root, dirs_exist_ok=True)
        found = capacity.generator_ceiling(folder.jmeter.generator)
        info(f"the load generator's ceiling: {found['text'] if found else '?'} (measured in {measured_in.root.name}, "
             "copied here)")
        return
    with backend.client_network(targets) as network:
        if network is None:
            problems.append(f"the load generator's ceiling was not measured: on the {backend.name} backend JMeter "
                            "sends from this host's own network, where the lab starts no target")
            return
        steps = ceiling.profile(profile.slo, profile.max_rps)
        try:
            with step(f"Measuring the load generator's ceiling ({steps.describe()})"):
                ceiling.measure(network, folder.jmeter.generator, steps, cpus)
        except LabError as error:
            problems.append(f"the load generator's ceiling was not measured: {error}")
            return
    found = capacity.generator_ceiling(folder.jmeter.generator)
    if found is not None:
        info(f"the load generator's ceiling: {found['text']}")
