"""What generates the load and its ceiling, without a lab: the choice between engines and the backend's network,
and a ceiling that cannot be measured said as such, never a figure."""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import pytest

from lab import generator
from lab.load import Slo, StepLoad, ceiling
from lab.load.network import ClientNetwork
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast


class _Backend:
    name = "ssh"

    def __init__(self, network: ClientNetwork | None) -> None:
        self.network, self.asked = network, []

    def client_network(self, targets):
        self.asked.append(("network", targets))
        return nullcontext(self.network)

    @contextmanager
    def engines(self, targets, log, out):
        self.asked.append(("engines", targets))
        yield "engines"


def test_the_load_comes_from_the_engines_asked_for_else_from_the_backends_network(tmp_path):
    folder = RunFolder(tmp_path / "run")
    network = ClientNetwork(prefix=("nsenter",), address="10.213.3.2", where="in ctlab-loadgen")
    backend = _Backend(network)
    with generator.load_generator(backend, [("10.213.1.2", 80)], {"load_from": "here"}, folder) as sender:
        assert sender is network
    with generator.load_generator(backend, [("10.213.1.2", 80)], {"load_from": "loadgen"}, folder) as sender:
        assert sender == "engines"
    assert backend.asked == [("network", [("10.213.1.2", 80)]), ("engines", [("10.213.1.2", 80)])]


def test_a_backend_without_a_network_of_its_own_gets_no_ceiling_and_the_run_says_why(tmp_path):
    folder = RunFolder(tmp_path / "run")
    problems: list[str] = []
    generator.measure_ceiling(_Backend(None), [("10.213.1.2", 80)], StepLoad(), folder, None, problems)
    assert problems == ["the load generator's ceiling was not measured: on the ssh backend JMeter sends from this "
                        "host's own network, where the lab starts no target"]
    assert not folder.jmeter.generator.root.exists()


def test_the_ceiling_is_judged_by_the_capacity_runs_own_slo():
    slo = Slo(p99_ms=250, error_pct=1.0)
    steps = ceiling.profile(slo)
    # ended by two steps in a row that missed or fell behind (a lone one is JMeter warming up)
    assert steps.slo == slo and steps.stop_after_misses == 2 and steps.stop_when_behind
    assert steps.warmup_s > 0               # JMeter starts cold: its first seconds are not judged
    assert steps.rates()[0] == ceiling.STEPS.start_rps and steps.duration_s < 60     # a minute at most


@pytest.mark.parametrize(("reach", "last"), [(600, 1200), (800, 1200), (801, 1600), (100, 800), (1600, 2000),
                                             (2500, 3200), (10_000, 3200)])
def test_the_ceilings_steps_end_one_step_past_what_the_run_sends(reach, last):
    # a ceiling above the run's last step changes no step's judgement: measuring it costs time and says nothing more
    steps = ceiling.profile(Slo(), reach)
    assert steps.rates()[-1] == last and steps.start_rps == ceiling.STEPS.start_rps, steps.rates()
    assert steps.stop_after_misses == ceiling.STEPS.stop_after_misses and steps.stop_when_behind
    assert ceiling.profile(Slo()).rates() == ceiling.STEPS.rates()        # no reach: every step
