"""Where a machine's requests queued at its knee: its pools' sizes from its knobs against their peaks in the knee
step, the deepest full one named with its knob, and no pool blamed when none was full (the figures of four
configurations of this project's first two-hour tune, 2026-11-29)."""
from __future__ import annotations

import pytest

from lab.analysis import cpu_cost, queues

pytestmark = pytest.mark.fast

PREFORK_80 = {"httpd_mpm": "prefork", "httpd_mpm_prefork_settings": {"MaxRequestWorkers": 80},
              "camel_app_tomcat_max_threads": 183, "camel_app_http_client_per_route": 45}


def _knee(httpd: float | None, tomcat: float | None, waiting: float | None, host_cpu: float | None = 1.5) -> dict:
    return {"httpd_busy_peak": httpd, "tomcat_busy_peak": tomcat, "pool_pending_peak": waiting,
            "cpu_cores_peak": 0.887, "memory_pss_peak_bytes": 284 * 2**20, "host_cpu_cores_mean": host_cpu}


def test_the_sizes_come_from_the_knobs_and_the_defaults_where_they_are_unset() -> None:
    assert queues.sizes({}, None) == queues.Sizes("prefork", 150, 200, 20)          # the role's, Tomcat's, camel-http's
    assert queues.sizes(PREFORK_80, None) == queues.Sizes("prefork", 80, 183, 45)
    worker = {"httpd_mpm": "worker", "httpd_mpm_worker_settings": {"MaxRequestWorkers": 230},
              "httpd_mpm_prefork_settings": {"MaxRequestWorkers": 80}}
    assert queues.sizes(worker, {"backend_pool_per_route": 35}).httpd_workers == 230
    # the pool as the live service reports it wins over the knob (it is what served)
    assert queues.sizes(PREFORK_80, {"backend_pool_per_route": 35}).backend_pool == 35


def test_the_deepest_full_pool_is_where_requests_waited() -> None:
    size = queues.Sizes("worker", 230, 74, 35)
    # everything full: the backend pool is the bound, HTTPD and Tomcat filled behind it
    found = queues.where_queued(_knee(225, 74, 39), size, 2)
    assert found["stage"] == "the backend pool" and found["knob"] == "camel_app_http_client_per_route"
    assert found["full"] == ["the backend pool", "Tomcat's threads", "HTTPD's workers"]
    assert found["sentence"] == ("requests queued at the backend pool (its size: camel_app_http_client_per_route): "
                                 "HTTPD 225 of 230 workers busy (worker MPM); Tomcat 74 of 74 threads busy; "
                                 "39 calls waited for one of its 35 backend connections")
    # HTTPD full in front of a Tomcat with threads to spare: HTTPD's workers, its MPM's own knob
    found = queues.where_queued(_knee(50, 42, 0), queues.Sizes("worker", 50, 59, 356), 2)
    assert (found["stage"], found["knob"]) == ("HTTPD's workers", "httpd_mpm_worker_settings.MaxRequestWorkers")
    # Tomcat full, no call waiting for the backend: Tomcat's threads
    assert queues.where_queued(_knee(150, 199, 0), queues.Sizes("prefork", 150, 200, 20), 2)["stage"] == \
        "Tomcat's threads"


def test_the_modern_stacks_route_pool_is_a_stage_between_tomcat_and_the_backend_where_it_exists() -> None:
    modern = {"camel_app_stack": "modern"}
    # without virtual threads platform-http runs the route on Spring's task pool: 8 unless its knob says otherwise
    assert queues.sizes(modern, None).route_pool == 8
    assert queues.sizes({**modern, "camel_app_route_pool_size": 64}, None).route_pool == 64
    assert queues.sizes({**modern, "camel_app_route_pool_size": 64}, {"route_pool": 12}).route_pool == 12   # live
    # virtual threads, or the classic stack (the route on Tomcat's thread): no such pool, no such stage
    assert queues.sizes({**modern, "camel_app_virtual_threads": True}, None).route_pool is None
    assert queues.sizes({}, None).route_pool is None
    # the figures of a quick run here (2026-12-05): the route 8 in flight, Tomcat 2 of 200 busy, no backend wait
    found = queues.where_queued({**_knee(20, 2, 0), "route_inflight_peak": 8.0}, queues.sizes(modern, None), 2)
    assert (found["stage"], found["knob"], found["full"]) == ("the route's task pool", "camel_app_route_pool_size",
                                                              ["the route's task pool"])
    assert "Tomcat 2 of 200 threads busy; the route 8 of 8 in flight on Spring's task pool; 0 calls waited" in \
        found["sentence"]
    # the backend pool deeper still, when calls waited for it
    found = queues.where_queued({**_knee(20, 2, 3), "route_inflight_peak": 8.0}, queues.sizes(modern, None), 2)
    assert found["stage"] == "the backend pool" and found["full"] == ["the backend pool", "the route's task pool"]


def test_no_pool_is_blamed_when_none_was_full() -> None:
    found = queues.where_queued(_knee(65, 33, 0), queues.sizes(PREFORK_80, None), 2)
    assert found["stage"] is None and found["knob"] is None and found["full"] == []
    assert found["sentence"].startswith("no pool was full (HTTPD 65 of 80 workers busy (prefork MPM); Tomcat 33 of "
                                        "183 threads busy; 0 calls waited for one of its 45 backend connections)")
    assert found["sentence"].endswith("and the host's CPUs were not (1.50 cores busy on average of 2): its own CPU "
                                      "(0.89 cores at most), its memory (284 MiB held at most) or the backend's answers "
                                      "bound it")
    # the host's CPUs busy over the knee step (idle under the verdict's 10%): the CPUs, which JMeter shares on the
    # local backend, whatever pools were full behind them (CI's tune of 2026-11-29: 1.79 of 2 busy with 39 calls
    # waiting for the backend pool); CPUs PCP did not record are not blamed
    found = queues.where_queued(_knee(65, 33, 0, host_cpu=1.81), queues.sizes(PREFORK_80, None), 2)
    assert (found["stage"], found["knob"], found["full"]) == ("the host's CPUs", None, [])
    assert found["sentence"].startswith("the host's 2 CPUs were busy: 1.81 cores on average over the step, this "
                                        "machine's processes 0.89 cores at most")
    behind = queues.where_queued(_knee(225, 74, 39, host_cpu=1.98), queues.Sizes("worker", 230, 74, 35), 2)
    assert behind["stage"] == "the host's CPUs" and behind["full"] == ["the backend pool", "Tomcat's threads",
                                                                       "HTTPD's workers"]
    assert "every stage ran slower behind them (HTTPD 225 of 230 workers busy (worker MPM);" in behind["sentence"]
    assert queues.where_queued(_knee(65, 33, 0, host_cpu=1.79), queues.sizes(PREFORK_80, None), 2)["stage"] is None
    # a host shared with JMeter: its CPUs as the verdict reads them (jmeter/loadgen.csv: every CPU state, softirq
    # too, where PCP's user and sys said 1.79), JMeter's share named
    shared = {**_knee(225, 74, 39, host_cpu=1.79), "host": {"host_busy_cores": 1.983, "host_cpus": 2,
                                                           "loadgen_cores": 0.902}}
    found = queues.where_queued(shared, queues.Sizes("worker", 230, 74, 35), 2)
    assert found["stage"] == "the host's CPUs" and "1.98 cores on average over the step, this machine's processes " \
        "0.89 cores at most, JMeter 0.90 cores" in found["sentence"]
    # its own mean over the step where PCP gave one, beside the host's: a peak of one-second rates can pass the host's
    # 2 CPUs (2.03 in a run of 2026-12-04)
    jittered = {**shared, "cpu_cores_peak": 2.03, "cpu_cores_mean": 1.1}
    found = queues.where_queued(jittered, queues.Sizes("worker", 230, 74, 35), 2)
    assert "this machine's processes 1.10 cores on average, JMeter 0.90 cores" in found["sentence"]
    assert "2.03" not in found["sentence"]
    assert queues.where_queued(_knee(80, 33, 0, host_cpu=None), queues.sizes(PREFORK_80, None), 2)["stage"] == \
        "HTTPD's workers"
    # a peak just under 95% of its size is not full; at it, it is; a peak PCP did not record is never full
    assert queues.where_queued(_knee(75, 33, 0), queues.sizes(PREFORK_80, None), 2)["stage"] is None
    assert queues.where_queued(_knee(76, 33, 0), queues.sizes(PREFORK_80, None), 2)["stage"] == "HTTPD's workers"
    assert queues.where_queued(_knee(None, None, None), queues.sizes(PREFORK_80, None), 2)["full"] == []


# The tuned machine keeping up at 1,252 req/s (AJP, Tomcat 120 threads, pool 356, event MPM 200 workers;
# runs/20261204-231359 trial 1, 385-405 s into its load): PCP's per-role CPU and jmeter/loadgen.csv's host and JMeter.
MEASURED = {"answered_rps": 1252.0, "cpu_cores_mean_by_role": {"service": 0.529, "httpd": 0.220, "backend": 0.177, "pcp": 0.001},
            "host": {"host_busy_cores": 1.534, "host_cpus": 2, "loadgen_cores": 0.441}, "host_cpu_cores_mean": 1.6}


def test_a_requests_cpu_is_each_roles_and_where_the_machine_was_loaded_alone_jmeters_and_the_hosts() -> None:
    cost = cpu_cost.per_request(MEASURED, alone=True, cpus=2)
    assert cost is not None
    assert cost["ms_by_role"] == {"service": 0.423, "httpd": 0.176, "backend": 0.141, "pcp": 0.001}
    assert cost["machine_ms"] == pytest.approx(0.741) and cost["jmeter_ms"] == 0.352 and cost["host_ms"] == 1.225
    assert cost["host_ceiling_rps"] == 1633          # 2 CPUs / 1.225 ms
    assert cost["sentence"] == ("per request answered: the JVM 0.42 ms, JMeter 0.35 ms, HTTPD 0.18 ms, the mock "
                                "backend 0.14 ms; the host's CPUs 1.23 ms in all (the kernel's share included): at "
                                "this cost its 2 CPUs serve at most about 1,633 req/s")
    # another machine loaded beside it over the step: JMeter's and the host's CPU are not this machine's
    shared = cpu_cost.per_request(MEASURED, alone=False, cpus=2)
    assert shared is not None and shared["host_ms"] is None and shared["jmeter_ms"] is None
    assert shared["host_ceiling_rps"] is None and shared["ms_by_role"] == cost["ms_by_role"]
    assert shared["sentence"].endswith("; JMeter's and the host's not given: another machine was loaded beside it")
    # a host of its own (JMeter elsewhere): the host's CPU from PCP, and its own CPUs
    own = cpu_cost.per_request({**MEASURED, "host": None, "answered_rps": 1000.0}, alone=True, cpus=4)
    assert own is not None and own["host_ms"] == 1.6 and own["jmeter_ms"] is None and own["host_ceiling_rps"] == 2500
    # nothing answered, or nothing measured: no cost
    assert cpu_cost.per_request({**MEASURED, "answered_rps": 0.0}, alone=True, cpus=2) is None
    assert cpu_cost.per_request({"answered_rps": 900.0}, alone=False, cpus=2) is None
