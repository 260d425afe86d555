"""The host's limits (`run --limits`): what lab/limits.py loads, what it refuses before anything starts, and the
figures lab/analysis/limits.py makes of them, as far as the verdict and the report. The loads themselves run
for real in test_lab_local_e2e.py."""
from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy
import pytest
from test_verdict import SHARED, write_loadgen

from lab import limits, load
from lab.analysis.headline import headline
from lab.analysis.summary import summarize
from lab.errors import StepFailed
from lab.machines.manifest import Manifest
from lab.report import render
from lab.runfolder import RunFolder

pytestmark = pytest.mark.fast

T0 = float(int(time.time()) - 3600)      # read_results refuses samples from the future


def wiring(backend_url: str | None = "http://127.0.0.1:9090/data", app_path: str | None = "/camel/mock") -> Manifest:
    return Manifest(machine="default", address="10.213.1.2", home="/m", user="u", group="g",
                    service_manager="supervisord", service_path="/svc/camel/mock",
                    ports={"httpd": 80, "app_http": 8080, "mock": 9090}, processes=(), pcp_archive="a",
                    evidence={}, backend_url=backend_url, app_path=app_path)


def test_a_limits_load_is_the_runs_users_made_shorter() -> None:
    full = limits.profile_for(load.FULL)
    assert (full.users, full.think_ms, full.keep_alive) == (load.FULL.users, load.FULL.think_ms, load.FULL.keep_alive)
    assert (full.duration_s, full.ramp_s) == (limits.MAX_S, limits.RAMP_MAX_S)
    short = limits.profile_for(load.LoadProfile(users=4, ramp_s=2, duration_s=35))
    assert (short.duration_s, short.ramp_s) == (35, 2)


def test_each_limit_loads_the_machines_own_loopback_port() -> None:
    # HTTPD strips its proxied prefix (/svc): the service's own path is the rest
    assert limits.target(wiring(), "direct") == "http://127.0.0.1:8080/camel/mock"
    assert limits.target(wiring(), "mock") == "http://127.0.0.1:9090/data"
    with pytest.raises(StepFailed, match="does not say where its service calls the mock"):
        limits.target(wiring(backend_url=None), "mock")
    with pytest.raises(StepFailed, match="does not say the service's own path"):
        limits.check_wiring({"default": wiring(app_path=None)})


class Unreachable:
    name = "ssh"

    def network_prefix(self, name: str) -> None:
        return None


def test_limits_are_refused_where_they_cannot_be_measured() -> None:
    with pytest.raises(StepFailed, match="the ssh backend's machines listen on their own loopback"):
        limits.check(Unreachable(), load.QUICK)
    with pytest.raises(StepFailed, match="open model has no fixed concurrency"):
        limits.check(Unreachable(), load.QUICK_STEPS)


def write_steady(path: Path, rate: int, elapsed_ms: int, seed: int) -> None:
    """100 s of `rate` requests a second, each about elapsed_ms, as JMeter writes them."""
    rng = numpy.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(load.CSV_COLUMNS)
        for second in range(100):
            for i in range(rate):
                took = max(1, int(rng.normal(elapsed_ms, 2)))
                writer.writerow([int((T0 + second + i / rate) * 1000), took, path.parent.name, 200, "OK",
                                 "u 1-1", "text", "true", "", 100, 50, 4, 4, "http://x/", took, 0, 0])


def test_the_limits_say_what_httpd_costs_and_whether_the_backend_set_the_pace(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    # req/s: through HTTPD, the service without it, the mock alone
    rates = {"default": (50, 80, 54), "tuned": (50, 60, 200)}
    for seed, (machine, (through, direct, mock)) in enumerate(rates.items()):
        write_steady(folder.results(machine), through, 20, seed)
        write_steady(folder.jmeter.limits("direct").results(machine), direct, 12, seed + 10)
        write_steady(folder.jmeter.limits("mock").results(machine), mock, 8, seed + 20)
    folder.write_json(folder.run_json, {
        "run_id": "limits", "backend": "local", "schedule": "sequential",
        "profile": {"users": 4, "ramp_s": 5, "duration_s": 100}, "started_at": T0, "ended_at": T0 + 101,
        "ended": {"how": "completed"}, "placement": SHARED,
        "limits": {"profile": {"users": 4, "ramp_s": 5, "duration_s": 100}, "kinds": limits.KINDS}})
    write_loadgen(folder.jmeter.loadgen, 101, cpus=2, busy_share=0.5, jmeter_cores=0.2, start=T0)
    folder.jmeter.engine_log.parent.mkdir(parents=True)
    folder.jmeter.engine_log.write_text("the engine's log\n")
    summary = summarize(folder.root, use_gcviewer=False)

    # the limits' and the engine's folders beside the machines' are no machines
    assert set(summary["machines"]) == {"default", "tuned"} and set(summary["limits"]["machines"]) == {"default", "tuned"}
    default, tuned = summary["limits"]["machines"]["default"], summary["limits"]["machines"]["tuned"]
    assert default["direct"]["throughput_rps"] == pytest.approx(80, rel=0.03) and default["direct"]["settled"]
    assert default["httpd_cost"] == pytest.approx(1 - 50 / 80, abs=0.03)
    assert default["backend_share"] == pytest.approx(50 / 54, abs=0.03)
    assert tuned["httpd_cost"] == pytest.approx(1 - 50 / 60, abs=0.03)
    assert tuned["backend_share"] == pytest.approx(50 / 200, abs=0.03)
    assert any("HTTPD costs 38% of what the service serves alone" in s for s in default["sentences"])
    assert any("the backend set the pace" in s for s in default["sentences"])
    assert any("the backend did not set the pace" in s for s in tuned["sentences"])
    # The verdict: default served about what its backend alone could, so the backend bound it
    judged = summary["verdict"]["machines"]
    finding = next(f for f in judged["default"]["findings"] if f["kind"] == "backend-bound")
    assert finding["figures"]["mock_alone_rps"] == pytest.approx(54, rel=0.03)
    assert "25% of the mock alone" in judged["tuned"]["checked"]
    assert "  default: through HTTPD it reached 93% of the 54 req/s the mock served alone at the same users: the " \
           "backend set the pace." in headline(summary)
    page = render(folder.root).read_text()
    assert '<section id="limits"><h2>Limits on this host</h2>' in page and "HTTPD costs 38%" in page


def test_a_limit_is_not_compared_when_jmeter_set_its_pace_or_the_machines_shared_the_cpus(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    for seed, machine in enumerate(("default", "tuned")):
        write_steady(folder.results(machine), 50, 20, seed)
        write_steady(folder.jmeter.limits("direct").results(machine), 80, 12, seed + 10)
        write_steady(folder.jmeter.limits("mock").results(machine), 54, 8, seed + 20)
    # JMeter busy on both of its CPUs while it loaded the mocks alone
    write_loadgen(folder.jmeter.limits("mock").loadgen, 101, cpus=2, busy_share=0.99, jmeter_cores=1.95, start=T0)
    run = {"run_id": "paced", "backend": "local", "schedule": "sequential", "profile": {"users": 4, "ramp_s": 5},
           "started_at": T0, "ended_at": T0 + 101, "ended": {"how": "completed"}, "placement": SHARED,
           "limits": {"profile": {"users": 4, "ramp_s": 5, "duration_s": 100}, "kinds": limits.KINDS}}
    folder.write_json(folder.run_json, run)
    limit = summarize(folder.root, use_gcviewer=False)["limits"]["machines"]["default"]
    assert limit["mock"]["loadgen_bound"] and limit["backend_share"] is None and limit["httpd_cost"] is not None
    assert "default: the mock alone was paced by JMeter (1.95 cores of JMeter)" in " ".join(limit["sentences"])
    # both machines at once on shared CPUs, each limit alone: nothing is compared
    folder.write_json(folder.run_json, {**run, "schedule": "parallel"})
    found = summarize(folder.root, use_gcviewer=False)["limits"]
    assert not found["comparable"] and found["machines"]["tuned"]["httpd_cost"] is None
    assert found["machines"]["tuned"]["sentences"] == [
        "tuned: not compared with its limits: both machines were loaded at once on shared CPUs, each limit one "
        "machine at a time."]


def test_a_run_without_limits_has_none(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    write_steady(folder.results("default"), 50, 20, 1)
    folder.write_json(folder.run_json, {"run_id": "plain", "profile": {"ramp_s": 5}, "started_at": T0,
                                        "ended_at": T0 + 101})
    summary = summarize(folder.root, use_gcviewer=False)
    assert summary["limits"] is None and 'id="limits"' not in render(folder.root).read_text()
