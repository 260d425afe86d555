"""The verdict on a run (lab/analysis/verdict.py) from the figures of a summary and the load generator's CPU
counters (jmeter/loadgen.csv as lab/load/cpu.py writes it): each kind, its figures, and the run's sentence."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pytest

from lab.analysis import loadgen, verdict
from lab.load import cpu

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


def summary(placement: dict | None = None, **machines: dict) -> dict:
    return {"run": {"placement": placement or {"dedicated": False, "note": "shared: 2 CPUs"},
                    "ended": {"how": "completed"}},
            "machines": {"default": machines.get("default") or machine(), "tuned": machines.get("tuned") or machine()}}


def test_a_run_with_spare_cpu_and_memory_is_valid(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.6, jmeter_cores=0.3)
    judged = verdict.judge(summary(), csv_path)
    assert judged["valid"] and judged["verdict"] == "valid" and judged["kinds"] == []
    checked = judged["machines"]["default"]["checked"]
    assert "host CPUs 40% idle (shared)" in checked and "JMeter 0.30 cores of 2" in checked
    assert "backend 0.30 cores" in checked and "memory peak 59% of 512 MiB" in checked


def test_a_saturated_shared_host_makes_the_run_host_bound(tmp_path: Path) -> None:
    csv_path = write_loadgen(tmp_path / "loadgen.csv", 300, cpus=2, busy_share=0.985, jmeter_cores=0.35)
    judged = verdict.judge(summary(), csv_path)
    assert not judged["valid"] and judged["verdict"] == "host-bound"
    finding = judged["machines"]["tuned"]["findings"][0]
    assert finding["figures"]["host_idle_pct"] == pytest.approx(1.5) and finding["figures"]["host_cpus"] == 2
    assert "only 1.5% of them was idle" in judged["sentence"] and "not what the tuning bought" in judged["sentence"]
    # the same counters with CPUs of their own: the host's business is not the machines'
    dedicated = verdict.judge(summary({"dedicated": True, "note": "dedicated"}), csv_path)
    assert dedicated["verdict"] == "valid"


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
    stopped["run"]["ended"] = {"how": "interrupted", "during": "the load"}
    assert verdict.judge(stopped, csv_path)["verdict"] == "incomplete"


def test_without_figures_the_verdict_is_unknown_not_valid(tmp_path: Path) -> None:
    empty = {"run": {}, "machines": {"default": {}, "tuned": {}}}
    judged = verdict.judge(empty, tmp_path / "missing.csv")
    assert judged["verdict"] == "unknown" and not judged["valid"]


def test_the_sampler_writes_what_the_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "loadgen.csv"
    sampler = cpu.CpuSampler(path)
    started = time.time()
    sampler.sample(os.getpid(), force=True)
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:       # burn this process's CPU: it is the "load generator" here
        sum(range(10000))
    sampler.sample(os.getpid(), force=True)
    rows = loadgen.read(path)
    assert len(rows) == 2 and rows[0]["loadgen_pid"] == os.getpid()
    figures = loadgen.over(rows, started - 1, time.time() + 1)
    assert figures is not None and figures["host_cpus"] == os.cpu_count()
    assert 0.5 < figures["loadgen_cores"] <= 1.05 and figures["host_busy_cores"] >= 0.5 * figures["loadgen_cores"]
    assert cpu.process_cpu_s(2 ** 22 + 12345) is None      # a process that is gone
