"""The verdict on a run (lab/analysis/verdict.py) from the figures of a summary and the load generator's CPU
counters (jmeter/loadgen.csv as lab/load/cpu.py writes it): each kind, its figures, and the run's sentence."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import numpy
import pytest

from lab import placement
from lab.analysis import loadgen, verdict
from lab.load import cpu
from lab.names import clock

pytestmark = pytest.mark.fast

MIB = 1048576


def write_loadgen(path: Path, seconds: int, cpus: int, busy_share: float, jmeter_cores: float,
                  start: float = 1000.0) -> Path:
    """Counters as lab/load/cpu.py writes them: cumulative busy/idle host seconds and JMeter's CPU seconds."""
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(cpu.COLUMNS)
        for second in range(seconds + 1):
            writer.writerow([start + second, 5000 + second * cpus * busy_share, 9000 + second * cpus * (1 - busy_share),
                             cpus, 4242, 10 + second * jmeter_cores])
    return path


def machine(start_at: float = 1030.0, end_at: float = 1200.0, settled: bool = True, backend_cores: float = 0.3,
            peak: float = 300 * MIB, limit: float = 512 * MIB) -> dict:
    window = {"start_at": start_at, "end_at": end_at, "start_s": start_at - 1000, "end_s": end_at - 1000,
              "duration_s": end_at - start_at, "settled": settled, "warmup_s": 10.0,
              "detection": {"reason": None if settled else "throughput had not settled"}}
    return {"load": {"window": window}, "resources": {"cpu_cores_mean_by_role": {"backend": backend_cores}},
            "memory": {"peak_bytes": peak}, "observed": {"jvm_memory_limit_bytes": limit}}


SHARED = placement.plan([0, 1]).as_json()


def summary(placed: dict | None = None, **machines: dict) -> dict:
    return {"run": {"placement": placed or SHARED, "ended": {"how": "completed"}, "schedule": "sequential"},
            "machines": {"default": machines.get("default") or machine(), "tuned": machines.get("tuned") or machine()}}


def test_a_run_with_spare_cpu_and_memory_is_valid(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    judged = verdict.judge(summary(), csv_path)
    assert judged["valid"] and judged["verdict"] == "valid" and judged["kinds"] == []
    checked = judged["machines"]["default"]["checked"]
    assert "host CPUs 40% idle (shared)" in checked and "JMeter 0.30 cores of 2" in checked
    assert "backend 0.30 cores" in checked and "memory peak 59% of 512 MiB" in checked


def test_a_run_of_the_tuned_machine_alone_is_judged_on_it_alone(tmp_path: Path) -> None:
    # an ablation's configuration loads only the tuned machine: the default one is not "unchecked"
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    alone = {"run": {**summary()["run"], "machines_loaded": ["tuned"]}, "machines": {"tuned": machine()}}
    judged = verdict.judge(alone, csv_path)
    assert judged["valid"] and list(judged["machines"]) == ["tuned"]
    assert judged["sentence"].startswith("Valid: the tuned machine settled") and "bound it" in judged["sentence"]
    judged = verdict.judge({**alone, "machines": {"tuned": machine(settled=False)}}, csv_path)
    assert judged["verdict"] == "not settled" and not judged["valid"]
    assert " ratio" not in judged["sentence"] and "its figures are of its warm-up" in judged["sentence"]
    # bound by the host and the backend: no ratio to speak of, and no other machine to share the CPUs with
    busy = write_loadgen(tmp_path / "busy.csv", 300, cpus=2, busy_share=0.985, jmeter_cores=0.35)
    parallel = {**alone, "run": {**alone["run"], "schedule": "parallel"}, "machines": {"tuned": machine(backend_cores=0.97)}}
    judged = verdict.judge(parallel, busy)
    assert judged["kinds"] == ["host-bound", "backend-bound"]
    sentences = [f["sentence"] for f in judged["machines"]["tuned"]["findings"]]
    assert sentences[0].startswith("tuned shared this host's 2 CPUs with JMeter, and only 1.5%")
    assert "its figures show how the host divided" in sentences[0]
    assert "its throughput understates what its knobs can buy" in sentences[1]
    assert not any(" ratio" in sentence for sentence in sentences)


def test_engines_on_other_hosts_whose_cpu_is_not_sampled_leave_the_verdict_unknown(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    remote = summary()
    remote["run"]["load_generator"] = {"engines": ["192.168.56.13:1099"], "engines_sampled": False}
    judged = verdict.judge(remote, csv_path)
    assert judged["verdict"] == "unknown" and not judged["valid"]
    assert "the CPU of the JMeter engines on other hosts" in judged["sentence"]
    # an engine on this host is sampled with the client: then the run can be valid
    remote["run"]["load_generator"]["engines_sampled"] = True
    assert verdict.judge(remote, csv_path)["verdict"] == "valid"


def test_a_saturated_shared_host_makes_the_run_host_bound(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.985, jmeter_cores=0.35)
    judged = verdict.judge(summary(), csv_path)
    assert not judged["valid"] and judged["verdict"] == "host-bound"
    finding = judged["machines"]["tuned"]["findings"][0]
    assert finding["figures"]["host_idle_pct"] == pytest.approx(1.5) and finding["figures"]["host_cpus"] == 2
    assert judged["sentence"].startswith("default shared this host's 2 CPUs with JMeter, and only 1.5% of them was idle")
    assert "not what the tuning bought" in judged["sentence"]
    # the same counters with CPUs of their own: the host's business is not the machines'
    dedicated = verdict.judge(summary(placement.plan(range(8)).as_json()), csv_path)
    assert dedicated["verdict"] == "valid"


def test_jmeter_is_judged_against_the_cpus_it_was_given(tmp_path: Path) -> None:
    # 8 CPUs, JMeter on 4 of them (4-7) using 3.7 cores: over 90% of its own, though under half the host's
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=8, busy_share=0.8, jmeter_cores=3.7)
    judged = verdict.judge(summary(placement.plan(range(8)).as_json()), csv_path)
    assert judged["verdict"] == "load-generator-bound"
    assert "JMeter used 3.70 of its 4 CPUs" in judged["sentence"]


def test_each_bound_is_found_with_its_figures(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.99, jmeter_cores=1.95)
    judged = verdict.judge(summary(tuned=machine(backend_cores=0.97, peak=500 * MIB)), csv_path)
    assert judged["kinds"] == ["host-bound", "load-generator-bound", "backend-bound", "memory-bound"]
    tuned = {f["kind"]: f for f in judged["machines"]["tuned"]["findings"]}
    assert tuned["load-generator-bound"]["figures"]["loadgen_cores"] == pytest.approx(1.95)
    assert tuned["backend-bound"]["figures"] == {"backend_cpu_cores": 0.97}
    assert "peaked at 98% of its 512 MiB memory limit" in tuned["memory-bound"]["sentence"]
    assert judged["machines"]["default"]["verdict"] == "host-bound"


def test_a_machine_that_did_not_settle_comes_first_and_an_unfinished_run_before_it(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.99, jmeter_cores=0.3)
    judged = verdict.judge(summary(default=machine(settled=False)), csv_path)
    assert judged["verdict"] == "not settled" and "default never reached a steady state" in judged["sentence"]
    stopped = summary()
    stopped["run"]["ended"] = {"how": "failed", "during": "the load"}
    judged = verdict.judge(stopped, csv_path)
    assert judged["verdict"] == "incomplete" and judged["sentence"].startswith("The run was stopped by an error during")


def test_without_figures_the_verdict_is_unknown_not_valid(tmp_path: Path) -> None:
    empty = {"run": {}, "machines": {"default": {}, "tuned": {}}}
    judged = verdict.judge(empty, tmp_path / "missing.csv")
    assert judged["verdict"] == "unknown" and not judged["valid"]
    # one machine without results, everything else fine: still not valid
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.5, jmeter_cores=0.3)
    judged = verdict.judge(summary(tuned={"memory": {"peak_bytes": 1.0}}), csv_path)
    assert judged["verdict"] == "unknown" and judged["sentence"] == "Not every check could be made (tuned: no JMeter " \
        "results)."
    # a run from before the lab sampled the host's CPU
    old = verdict.judge(summary(), tmp_path / "no-loadgen.csv")
    assert old["verdict"] == "unknown" and "the host's and JMeter's CPU" in old["sentence"]


def test_the_sampler_writes_what_the_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "loadgen.csv"
    sampler = cpu.CpuSampler(path)
    started = time.time()
    cpu_before, wall_before = time.process_time(), time.monotonic()
    sampler.sample((os.getpid(),), force=True)
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:       # burn this process's CPU: it is the "load generator" here
        sum(range(10000))
    sampler.sample((os.getpid(),), force=True)
    # what this process really had of the CPUs meanwhile (less than one core where other processes share them)
    cores = (time.process_time() - cpu_before) / (time.monotonic() - wall_before)
    rows = loadgen.read(path)
    assert len(rows) == 2 and rows[0]["loadgen_pid"] == os.getpid()
    figures = loadgen.over(rows, started - 1, time.time() + 1)
    assert figures is not None and figures["host_cpus"] == os.cpu_count()
    assert cores > 0.1 and figures["loadgen_cores"] == pytest.approx(cores, abs=0.15), (figures, cores)
    assert figures["host_busy_cores"] >= 0.5 * figures["loadgen_cores"]
    assert cpu.process_cpu_s(2 ** 22 + 12345) is None      # a process that is gone


def test_a_run_long_enough_to_settle_gets_its_ratio_and_a_valid_verdict(tmp_path: Path) -> None:
    # 150 s per machine, a 10 s ramp: default answers 20 requests a second in 40 ms after a 30 s warm-up in which it
    # is slower, tuned 25 a second in 30 ms from the start. Figures as lab/analysis computes them from the CSVs.
    from lab.analysis.summary import summarize
    from lab.load import CSV_COLUMNS
    from lab.runfolder import RunFolder
    folder = RunFolder(tmp_path / "run")
    t0 = 1_800_000_000.0
    rng = numpy.random.default_rng(3)
    for machine, rate, elapsed, warm in (("default", 20, 40, 30), ("tuned", 25, 30, 0)):
        path = folder.results(machine)
        path.parent.mkdir(parents=True)
        with path.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(CSV_COLUMNS)
            for second in range(150):
                slow = 10 <= second < 10 + warm
                for i in range((rate // 2) if slow else rate):
                    took = int(rng.normal(elapsed * (3 if slow else 1), 3))
                    stamp = int((t0 + second + i / rate) * 1000)
                    writer.writerow([stamp, took, machine, 200, "OK", f"{machine} 1-1", "text", "true", "", 100, 50,
                                     5, 5, "http://10.0.0.1/x", took, 0, 0])
    folder.write_json(folder.run_json, {"run_id": "settled", "backend": "local", "schedule": "sequential",
                                        "profile": {"users": 5, "ramp_s": 10, "duration_s": 150},
                                        "started_at": t0, "ended_at": t0 + 151, "ended": {"how": "completed"},
                                        "placement": SHARED})
    write_loadgen(folder.jmeter.loadgen, 151, cpus=2, busy_share=0.5, jmeter_cores=0.2, start=t0)
    figures = summarize(folder.root, use_gcviewer=False)
    default, tuned = (figures["machines"][m]["load"] for m in ("default", "tuned"))
    assert default["window"]["settled"] and tuned["window"]["settled"]
    # the warm-up (10..40 s) is cut; MSER may cut a little more, never past the first half of what follows the ramp
    assert 38 <= default["window"]["start_s"] <= 80 and tuned["window"]["start_s"] <= 80
    rows = {row["key"]: row for row in figures["comparison"]}
    assert rows["throughput_rps"]["ratio"] == pytest.approx(25 / 20, rel=0.02)
    assert rows["p50_ms"]["ratio"] == pytest.approx(30 / 40, rel=0.05)
    judged = figures["verdict"]
    # no PCP archive here: the backend and memory checks are not made, but nothing found bounds the run
    assert judged["machines"]["default"]["checked"][:2] == [
        f"steady from {clock(default['window']['start_s'])} ({default['window']['warmup_s']:.0f} s of warm-up after "
        f"the ramp-up) to {clock(default['window']['end_s'])}", "host CPUs 50% idle (shared)"]
    assert judged["verdict"] == "valid", judged



def test_a_capacity_run_whose_load_generator_fell_behind_says_so(tmp_path: Path) -> None:
    # default: JMeter delivered 100 and 200 req/s but only 330 of 400, and nothing after missed the SLO for certain;
    # tuned: it fell behind at 300 too, but 400 and 500 missed it plainly: a knee, the short step only not judged.
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    steps = [{"rate_rps": r, "delivered": d, "arrived_rps": a} for r, d, a in
             ((100, True, 101.0), (200, True, 199.0), (300, False, 250.0), (400, False, 330.0))]
    default = {**machine(), "capacity": {"steps": steps, "generator_bound_rps": 300}}
    tuned = {**machine(), "capacity": {"steps": steps, "generator_bound_rps": None}}
    judged = verdict.judge(summary(default=default, tuned=tuned), csv_path)
    assert judged["verdict"] == "load-generator-bound" and judged["machines"]["tuned"]["verdict"] == "valid"
    assert judged["sentence"].startswith("JMeter could not deliver 300 req/s to default (they arrived at 250 req/s)")
    assert "JMeter fell behind at 300, 400 req/s: those steps could miss the SLO but not meet it" in \
        judged["machines"]["tuned"]["checked"]


def test_a_machine_the_oom_killer_struck_says_so_not_one_burst_from_it(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    killed = {**machine(peak=497 * MIB), "events": {"oom_kills": 1}}
    judged = verdict.judge(summary(tuned=killed), csv_path)
    assert judged["verdict"] == "memory-bound" and judged["machines"]["tuned"]["findings"][0]["figures"]["oom_kills"] == 1
    assert judged["sentence"] == ("tuned peaked at 97% of its 512 MiB memory limit, and the kernel's OOM killer struck 1 "
                                  "time(s): its figures past that point are of a machine restarting its processes.")
    # killed below the 90% line (a peak the 1 s samples missed): still memory-bound
    assert verdict.judge(summary(tuned={**machine(peak=300 * MIB), "events": {"oom_kills": 2}}), csv_path)["verdict"] \
        == "memory-bound"
    # killed on a saturated shared host (the full profile here): the kills lead, the host's bound follows
    busy = write_loadgen(tmp_path / "busy.csv", 300, cpus=2, busy_share=0.95, jmeter_cores=0.2)
    judged = verdict.judge(summary(tuned={**machine(peak=503 * MIB), "events": {"oom_kills": 23}}), busy)
    assert judged["verdict"] == "memory-bound" and judged["kinds"] == ["host-bound", "memory-bound"]
    assert [f["kind"] for f in judged["machines"]["tuned"]["findings"]] == ["memory-bound", "host-bound"]
    assert judged["machines"]["tuned"]["verdict"] == "memory-bound" and judged["machines"]["default"]["verdict"] == \
        "host-bound"


def test_requests_that_failed_on_the_load_generator_itself_make_the_run_load_generator_bound(tmp_path: Path) -> None:
    # keep-alive off: past ~470 req/s the client runs out of ports; JMeter's label as error_label writes it
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    starved = machine()
    starved["load"].update({"all": {"samples": 90_000}, "errors_by_type": [
        {"error": "java.net.BindException Cannot assign requested address", "count": 1200},
        {"error": "503 Service Unavailable", "count": 40}]})
    judged = verdict.judge(summary(tuned=starved), csv_path)
    assert judged["verdict"] == "load-generator-bound" and judged["machines"]["default"]["verdict"] == "valid"
    finding = judged["machines"]["tuned"]["findings"][0]
    assert finding["figures"] == {"client_errors": 1200, "samples": 90_000}
    assert finding["sentence"].startswith("1,200 of the requests to tuned failed on the load generator itself")
    served = machine()
    served["load"]["errors_by_type"] = [{"error": "503 Service Unavailable", "count": 40}]     # the machine's own
    assert verdict.judge(summary(tuned=served), csv_path)["verdict"] == "valid"
    few = machine()             # a handful among many: said, not a bound
    few["load"].update({"all": {"samples": 90_000}, "errors_by_type": [
        {"error": "java.net.BindException Cannot assign requested address", "count": 3}]})
    judged = verdict.judge(summary(tuned=few), csv_path)
    assert judged["verdict"] == "valid" and "3 requests failed on JMeter itself (under 0.1%)" in \
        judged["machines"]["tuned"]["checked"]


def test_a_machine_at_its_limit_with_swap_is_said_to_swap_not_to_be_one_burst_from_the_oom_killer(tmp_path: Path):
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    at_limit = summary(tuned=machine(peak=397 * MIB, limit=397 * MIB))
    without = verdict.judge(at_limit, csv_path)["machines"]["tuned"]["findings"][0]["sentence"]
    assert "one burst from the OOM killer" in without
    at_limit["run"]["memory_model"] = {"name": "vm", "swap_mib": 1024, "limit_mib": 397}
    judged = verdict.judge(at_limit, csv_path)
    assert judged["verdict"] == "memory-bound"
    sentence = judged["machines"]["tuned"]["findings"][0]["sentence"]
    assert "peaked at 100% of its 397 MiB memory limit: past it the machine swaps" in sentence
    assert "1024 MiB of swap" in sentence and "OOM killer" not in sentence


def test_a_backend_that_queues_the_services_calls_is_found_whatever_its_cpu(tmp_path: Path):
    # The 2018 backend answers one request at a time: 0.05 cores, yet 20 of the service's calls waited on it.
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    queued = machine(backend_cores=0.05)
    queued["backend_max_concurrency"], queued["resources"]["pool_leased_max"] = 1, 20.0
    judged = verdict.judge(summary(default=queued), csv_path)
    finding = judged["machines"]["default"]["findings"][0]
    assert judged["verdict"] == "backend-bound" and finding["kind"] == "backend-bound"
    assert finding["figures"] == {"backend_max_concurrency": 1, "backend_calls_in_flight_max": 20}
    assert "answers 1 request(s) at a time" in finding["sentence"] and "up to 20" in finding["sentence"]
    # no limit (0), or no more calls than it answers at once: not bound, and the CPU check is said
    for slots, leased in ((0, 20.0), (4, 4.0)):
        free = machine(backend_cores=0.05)
        free["backend_max_concurrency"], free["resources"]["pool_leased_max"] = slots, leased
        judged = verdict.judge(summary(default=free), csv_path)["machines"]["default"]
        assert judged["verdict"] == "valid" and "backend 0.05 cores" in judged["checked"]


def test_calls_queued_in_the_services_client_pool_make_the_machine_backend_bound(tmp_path: Path):
    # as measured at 150 users: 20 connections to the mock in use, up to 129 calls waiting for one (Camel's default
    # pool), at about 45% host idle: no other bound, yet both machines served about 830 req/s = 20 / 24 ms
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.55, jmeter_cores=0.1)
    queued = machine()
    queued["resources"].update(pool_pending_max=129.0, pool_leased_max=20.0)
    judged = verdict.judge(summary(tuned=queued), csv_path)
    assert judged["verdict"] == "backend-bound" and judged["kinds"] == ["backend-bound"]
    finding = judged["machines"]["tuned"]["findings"][0]
    assert finding["figures"] == {"pool_leased_max": 20, "pool_pending_max": 129}
    assert finding["sentence"] == ("tuned's calls to the backend queued in the service's HTTP client pool: up to 129 "
                                   "waited for one of the 20 connections in use (PCP: the pool's peaks), so the pool "
                                   "set the pace and the ratio understates what the tuning can buy; its size is the "
                                   "knob camel_app_http_client_per_route.")
    # a few calls waiting now and then: checked, not a bound
    queued["resources"].update(pool_pending_max=3.0)
    judged = verdict.judge(summary(tuned=queued), csv_path)
    assert judged["valid"]
    assert "backend connections: 20 in use at most, 3 calls waiting" in judged["machines"]["tuned"]["checked"]


def test_a_machine_reading_its_pages_back_is_memory_bound_and_cold_pages_in_swap_are_only_listed(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    # As measured on 2026-11-26 (397 MiB, 1 GiB of swap, 20 users): the tuned machine held 137 MiB in swap and read
    # back 2.4 pages a second; the default one had next to nothing in swap.
    resting = machine(peak=338 * MIB, limit=397 * MIB)
    resting["memory"].update(swap_peak_bytes=137 * MIB, major_faults_per_s=2.4)
    judged = verdict.judge(summary(tuned=resting), csv_path)
    assert judged["verdict"] == "valid", judged["sentence"]
    assert "137 MiB in swap at the peak, 2.4 page-ins a second over the load" in judged["machines"]["tuned"]["checked"]
    thrashing = machine(peak=330 * MIB, limit=397 * MIB)
    thrashing["memory"].update(swap_peak_bytes=300 * MIB, major_faults_per_s=verdict.PAGE_INS_MAX)
    judged = verdict.judge(summary(tuned=thrashing), csv_path)
    assert judged["verdict"] == "memory-bound" and judged["machines"]["default"]["verdict"] == "valid"
    finding = judged["machines"]["tuned"]["findings"][0]
    assert finding["figures"] == {"major_faults_per_s": verdict.PAGE_INS_MAX, "swap_peak_bytes": 300 * MIB}
    assert "tuned read back 50 pages a second over the load" in finding["sentence"]
    assert "300 MiB in swap at the peak" in finding["sentence"]
    assert not any("page-ins" in line for line in judged["machines"]["tuned"]["checked"])
