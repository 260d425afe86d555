"""What generates the load and its ceiling, without a lab: the choice between engines and the backend's network,
a ceiling that cannot be measured said as such, never a figure, and one measured lately by the same generator with
the same steps copied, with its source, rather than measured again."""
from __future__ import annotations

import csv
import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path

import pytest

from lab import generator
from lab.analysis import capacity
from lab.load import Slo, StepLoad, ceiling
from lab.load.network import ClientNetwork
from lab.load.run import CSV_COLUMNS
from lab.runfolder import JMeterFolder, RunFolder

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


# ------------------------------------------------------------------------------- a recent ceiling, copied

NETWORK = ClientNetwork(prefix=("nsenter",), address="10.213.3.2", where="JMeter in ctlab-loadgen, its sysctls ...")


def _measure(measured: list[Path]):
    """ceiling.measure as it writes its folder: target.json, and a target that answered every request in 1 ms."""
    def measure(network: ClientNetwork, out: JMeterFolder, steps: StepLoad, cpus: str | None) -> None:
        measured.append(out.root)
        (out.root / "default").mkdir(parents=True)
        RunFolder.write_json(out.root / "target.json", {"url": "http://10.213.3.2:8099/ceiling.txt", "group": "default",
                                                        "where": network.where, "cpus": cpus,
                                                        "profile": {"model": steps.model, **asdict(steps)}})
        rows, at = [CSV_COLUMNS], time.time() * 1000
        for rate, seconds, _ in steps.segments():
            rows += [[int(at + k * 1000 / rate), 1, "default", "200", "OK", "default 1-1", "text", "true", "", 100, 50,
                      1, 1, "http://10.213.3.2:8099/ceiling.txt", 1, 0, 0] for k in range(rate * seconds)]
            at += seconds * 1000
        with out.results("default").open("w", newline="") as stream:
            csv.writer(stream).writerows(rows)
    return measure


def test_a_ceiling_measured_lately_by_the_same_generator_with_the_same_steps_is_copied_with_its_source(
        tmp_path, monkeypatch, capsys):
    measured: list[Path] = []
    monkeypatch.setattr(ceiling, "measure", _measure(measured))
    # a checkout that lies in a folder named runs itself: a run is named from the lab's runs/ folder
    runs, profile = tmp_path / "runs" / "camel-tuning-lab" / "runs", StepLoad(max_rps=600)
    first, second = RunFolder(runs / "20261206-064110"), RunFolder(runs / "20261206-064246" / "configs" / "0")
    problems: list[str] = []
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], profile, first, None, problems, runs=runs)
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], profile, second, None, problems, runs=runs)
    assert measured == [first.jmeter.generator.root] and problems == []
    # its raw results with it, and where it came from: in the folder, the summary's figure, the command's output
    copy, original = (capacity.generator_ceiling(f.jmeter.generator) for f in (second, first))
    assert (second.jmeter.generator.results("default").read_bytes()
            == first.jmeter.generator.results("default").read_bytes())
    assert copy["text"] == original["text"] == "at least 1200 req/s (every step up to the last met)"
    assert "copied_from" not in original and copy["copied_from"] == "20261206-064110"
    assert copy["measured_at"] == original["measured_at"]
    assert copy["copied"].startswith("measured in run 20261206-064110 (its first request ")
    assert "the same generator with the same steps, within the 30 minutes" in copy["copied"]
    assert ("the load generator's ceiling: at least 1200 req/s (every step up to the last met) (measured in "
            "20261206-064110, copied here)") in capsys.readouterr().err
    # a copy of it is not another measurement: a third run names the run that took it, as does a run of the same
    # series as the copy (a tune's later configuration)
    third = RunFolder(runs / "20261206-065021")
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], profile, third, None, problems, runs=runs)
    assert capacity.generator_ceiling(third.jmeter.generator)["copied_from"] == "20261206-064110"
    later = RunFolder(runs / "20261206-064246" / "configs" / "1")
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], profile, later, None, problems, second,
                              runs=runs)
    assert capacity.generator_ceiling(later.jmeter.generator)["copied"] == copy["copied"]
    assert len(measured) == 1


def test_a_ceiling_measured_lately_with_the_same_steps_taken_further_is_copied(tmp_path, monkeypatch, capsys):
    # a quick capacity run's ceiling (its steps to 2000 req/s) serves a later run whose steps end at 1200: each step
    # up to 1200 was judged as that run's own would be
    measured: list[Path] = []
    monkeypatch.setattr(ceiling, "measure", _measure(measured))
    runs = tmp_path / "runs"
    first, second = RunFolder(runs / "20261206-064110"), RunFolder(runs / "20261206-064246")
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], StepLoad(max_rps=1600), first, None, [],
                              runs=runs)
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], StepLoad(max_rps=600), second, None, [],
                              runs=runs)
    assert measured == [first.jmeter.generator.root]
    copy = capacity.generator_ceiling(second.jmeter.generator)
    assert copy["copied_from"] == "20261206-064110" and copy["text"] == "at least 2000 req/s (every step up to the last met)"
    assert "the same generator with the same steps taken further (to 2000 req/s), within the 30 minutes" in copy["copied"]
    assert ceiling.profile(Slo(), 600).max_rps == 1200 < 2000 == ceiling.profile(Slo(), 1600).max_rps


@pytest.mark.parametrize("differs", ["steps", "slo", "generator", "cpus", "age", "no results"])
def test_a_ceiling_is_measured_again_when_the_last_one_is_not_this_generators_these_steps_or_recent(
        tmp_path, monkeypatch, differs):
    measured: list[Path] = []
    monkeypatch.setattr(ceiling, "measure", _measure(measured))
    runs, profile = tmp_path / "runs", StepLoad(max_rps=600)
    first, second = RunFolder(runs / "20261206-064110"), RunFolder(runs / "20261206-064246")
    generator.measure_ceiling(_Backend(NETWORK), [("10.213.1.2", 80)], profile, first, None, [], runs=runs)
    target, network, cpus = first.jmeter.generator.root / "target.json", NETWORK, None
    if differs == "steps":
        profile = StepLoad(max_rps=1600)                        # the ceiling's steps then reach further
    elif differs == "slo":
        profile = StepLoad(max_rps=600, slo=Slo(p99_ms=250))
    elif differs == "generator":
        network = ClientNetwork(prefix=("nsenter",), address="10.213.3.2", where="JMeter in another namespace")
    elif differs == "cpus":
        cpus = "1"
    elif differs == "age":
        then = time.time() - generator.REUSE_S - 5
        os.utime(target, (then, then))
    else:
        first.jmeter.generator.results("default").unlink()
    generator.measure_ceiling(_Backend(network), [("10.213.1.2", 80)], profile, second, cpus, [], runs=runs)
    assert measured == [first.jmeter.generator.root, second.jmeter.generator.root]
    assert "copied_from" not in capacity.generator_ceiling(second.jmeter.generator)
    assert not (second.jmeter.generator.root / "copied.json").exists()
