"""tune's pure parts: the knob space checked against the roles' argument specs, a point of it as the tuned machine's
extra vars (within the memory budget's reading of them), and the study on a synthetic objective with constraints:
it finds the known optimum's region, records every broken configuration with its reason, never calls one the best,
and goes on after an interruption with the configuration that was cut short."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab import budget
from lab.errors import StepFailed
from lab.runfolder import RunFolder
from lab.tune import guide
from lab.tune import space as knob_space
from lab.tune.run import outcome_of
from lab.tune.study import CONSTRAINTS, Outcome, Study

pytestmark = pytest.mark.fast


def test_the_shipped_space_loads_and_every_dimension_sets_a_declared_variable():
    space = knob_space.load()
    assert set(space.groups) == {"backend_client", "tomcat", "httpd", "proxy", "jvm", "logging", "stack"}
    assert space.dimensions["backend_pool"].variables == ("camel_app_http_client_per_route",
                                                          "camel_app_http_client_max_total")
    assert "camel_app_java_options" in space.variables()
    assert space.chosen(("jvm",)).dimensions.keys() == {"jvm_collector", "jvm_heap_mib", "jvm_thread_stack_kib"}


def test_a_point_is_the_default_machines_knobs_with_each_dimension_applied():
    space = knob_space.load()
    base = knob_space.base_knobs()
    assert base["httpd_mpm"] == "prefork" and base["camel_app_java_options"] == []
    point = {"backend_pool": 200, "tomcat_threads": 120, "tomcat_accept_count": 300, "httpd_mpm": "event",
             "httpd_workers": 200, "proxy_protocol": "ajp", "jvm_collector": "serial", "jvm_heap_mib": 160,
             "jvm_thread_stack_kib": "512", "logback": "async"}
    chosen = space.knobs(point, base)
    assert chosen["camel_app_http_client_per_route"] == chosen["camel_app_http_client_max_total"] == 200
    assert chosen["httpd_mpm"] == "event" and chosen["httpd_mpm_event_settings"]["MaxRequestWorkers"] == 200
    assert chosen["httpd_mpm_event_settings"]["ThreadsPerChild"] == 25      # merged over the role's dict
    assert chosen["httpd_mpm_prefork_settings"]["MaxRequestWorkers"] == 200
    assert chosen["camel_app_java_options"] == ["-XX:+UseSerialGC", "-Xmx160m", "-Xss512k"]
    assert chosen["camel_app_ajp_enabled"] is True and chosen["httpd_ajp_secret"] == "{{ lab_ajp_secret }}"
    assert chosen["camel_app_logback_async_discarding_threshold"] == 0
    assert base["camel_app_java_options"] == [] and base["httpd_mpm"] == "prefork"     # base left as it was
    # the memory budget reads the point's knobs: the heap, the threads' stacks, the MPM's workers
    estimated = budget.estimate("tuned", chosen, 397.0)
    assert estimated is not None
    parts = {part.what: part for part in estimated.parts}
    assert parts["the JVM's heap"].mib == 160
    smaller = budget.estimate("tuned", space.knobs({**point, "jvm_heap_mib": 96}, base), 397.0)
    assert smaller is not None and estimated.total_mib - smaller.total_mib >= 64
    with pytest.raises(StepFailed, match=r"jvm_heap_mib = 100 is not in the knob space \(jvm_heap_mib: 64..256 by 16"):
        space.knobs({**point, "jvm_heap_mib": 100}, base)


def _write(tmp_path: Path, dimensions: dict, groups: dict | None = None) -> Path:
    path = tmp_path / "knob-space.yml"
    path.write_text(yaml.safe_dump({"groups": groups or {"g": {"about": "a group"}}, "dimensions": dimensions}))
    return path


@pytest.mark.parametrize(("dimension", "error"), [
    ({"group": "g", "int": [1, 10], "variables": ["camel_app_no_such_knob"]},
     r"dimensions.d.variables: 'camel_app_no_such_knob' is not a variable any role declares"),
    ({"group": "nope", "int": [1, 10], "variables": ["camel_app_tomcat_max_threads"]},
     r"dimensions.d.group: 'nope' is not one of the groups \(g\)"),
    ({"group": "g", "int": [10, 1], "variables": ["camel_app_tomcat_max_threads"]},
     r"dimensions.d.int: \[low, high\]"),
    ({"group": "g", "int": [1, 10], "step": 4, "variables": ["camel_app_tomcat_max_threads"]},
     r"dimensions.d.step: a positive integer that divides high - low"),
    ({"group": "g", "int": [1, 10]}, r"dimensions.d: its value goes nowhere"),
    ({"group": "g", "choices": {"a": {"variables": {"httpd_mpm": "worker"}}}}, r"two choices at least"),
    ({"group": "g", "choices": {"a": {}, "b": {"variables": {"httpd_nope": 1}}}},
     r"choices.b.variables: 'httpd_nope' is not a variable any role declares"),
    ({"group": "g", "choices": {"a": {}, "b": {"jvm_options": ["Xmx64m"]}}}, r"jvm_options: a list of JVM options"),
    ({"group": "g", "int": [1, 10], "choices": {"a": {}, "b": {}}}, r"either int: \[low, high\] or choices"),
    ({"group": "g", "range": [1, 10]}, r"dimensions.d: range: not a dimension's field"),
    ({"group": "g", "choices": {"a": {}, "b": {"stacks": ["legacy"]}}},
     r"choices.b.stacks: \['legacy'\]: a list of the stacks it exists on, of classic, modern \(camel_app_stack's"),
])
def test_a_wrong_space_is_refused_naming_the_file_and_the_dimension(tmp_path, dimension, error):
    path = _write(tmp_path, {"d": dimension})
    with pytest.raises(StepFailed, match=error) as refused:
        knob_space.load(path)
    assert str(path) in str(refused.value)


def test_a_choice_on_a_stack_without_it_is_impossible_whichever_dimension_or_the_base_gives_the_stack():
    space = knob_space.load()
    base = knob_space.base_knobs()

    def why(point: dict, over: dict | None = None) -> str | None:
        return space.impossible(point, space.knobs(point, {**base, **(over or {})}))
    apr = {"proxy_protocol": "ajp_apr"}
    assert why({**apr, "stack": "classic"}) is None and why(apr) is None          # classic: the role's default
    for modern in ("modern", "modern_pool_200", "modern_virtual_threads"):
        assert why({**apr, "stack": modern}) == ("proxy_protocol ajp_apr exists on the classic stack only, and this "
                                                 "configuration runs the modern one")
        assert why({"proxy_protocol": "ajp", "stack": modern}) is None           # AJP over NIO: both stacks
    assert why(apr, {"camel_app_stack": "modern"}) is not None                  # the stack not searched, but modern


def test_a_group_without_a_dimension_is_refused(tmp_path):
    path = _write(tmp_path, {"d": {"group": "g", "int": [1, 10], "variables": ["camel_app_tomcat_max_threads"]}},
                  {"g": {"about": ""}, "empty": {"about": ""}})
    with pytest.raises(StepFailed, match="groups empty: no dimension belongs to them"):
        knob_space.load(path)


def _synthetic(point: dict) -> Outcome:
    """A machine whose capacity grows with its backend pool up to 150 and its Tomcat threads up to 100, and which
    breaks its memory past a 192 MiB heap (at a higher capacity than any that fits: the trap a search must avoid)."""
    pool, threads, heap = point["backend_pool"], point["tomcat_threads"], point["jvm_heap_mib"]
    capacity = 300 + 6 * min(pool, 150) + 2 * min(threads, 100) + heap
    if heap > 192:
        over = heap - 192
        return Outcome(capacity + 500, {"memory_over": f"the memory peak was {over} MiB past 90% of the model"},
                       {"memory_over": float(over)}, {"peak_mib": 360 + over})
    return Outcome(float(capacity), figures={"peak_mib": 300})


def _space():
    return knob_space.load().chosen(("backend_client", "tomcat", "jvm"))


def test_the_study_finds_the_optimum_region_and_records_each_broken_configuration_with_its_reason():
    study = Study(None, _space(), seed=7)       # in memory: the search, not SQLite (the resume test keeps it there)
    for _ in range(40):
        number, point = study.ask()
        study.tell(number, _synthetic(point))
    records = study.records()
    assert len(records) == 40 and all(r.state == "COMPLETE" for r in records)
    broken = [r for r in records if not r.feasible]
    assert broken, "the sampler never tried a heap past 192 MiB: the constraint was not exercised"
    for record in broken:
        assert record.point["jvm_heap_mib"] > 192
        assert record.broken == {"memory_over": f"the memory peak was {record.point['jvm_heap_mib'] - 192} MiB "
                                                "past 90% of the model"}
        assert record.capacity_rps is not None and record.figures["peak_mib"] > 360
    best = study.best()
    assert best is not None and best.feasible and best.point["jvm_heap_mib"] <= 192
    # higher capacities were measured, but only on broken configurations
    assert max(r.capacity_rps or 0 for r in broken) > (best.capacity_rps or 0)
    # the optimum: pool >= 150, threads >= 100, heap 192 gives 300 + 900 + 200 + 192 = 1592
    assert best.capacity_rps is not None and best.capacity_rps >= 0.9 * 1592
    assert best.point["backend_pool"] >= 100
    importance = study.importance()
    assert importance is not None and set(importance) <= set(_space().dimensions)
    assert max(importance, key=lambda name: importance[name]) in {"backend_pool", "jvm_heap_mib"}


def test_a_configuration_set_aside_unmeasured_is_recorded_as_such_and_not_the_best(tmp_path):
    study = Study(tmp_path, _space(), seed=1)
    number, point = study.ask()
    study.tell(number, Outcome(None, {"memory_over": "its memory budget is 122 MiB over the model"},
                               {"memory_over": 122.0}, measured=False))
    (record,) = study.records()
    assert not record.feasible and not record.measured and record.capacity_rps is None
    assert record.broken == {"memory_over": "its memory budget is 122 MiB over the model"}
    assert study.best() is None and study.importance() is None
    assert CONSTRAINTS[1] == "memory_over"


def test_a_configuration_whose_knee_the_host_stood_still_in_is_measured_again_once_and_kept_with_why(tmp_path):
    study = Study(tmp_path, _space(), seed=3)
    number, point = study.ask()
    why = "the host stood still 1.0 s in the tuned machine's knee step (at 5:57): that miss measured the host"
    assert study.measure_again(number, Outcome(975.0, {}, {}, {"host_paused": why}), why)
    again, same = study.ask()
    assert same == point and again == number + 1 and study.why_asked(again) == f"configuration {number} again: {why}"
    # the repeat itself is told as it comes out, however it comes out: no third measurement
    assert not study.measure_again(again, Outcome(950.0, {}, {}, {"host_paused": why}), why)
    study.tell(again, Outcome(1700.0, figures={"peak_mib": 300}))
    records = {r.number: r for r in study.records()}
    assert records[number].state == "FAIL" and records[number].broken == {"measured_again": why}
    assert records[number].figures == {"host_paused": why} and not records[number].feasible
    assert records[again].state == "COMPLETE" and study.best() == records[again]


def test_an_interrupted_configuration_is_measured_again_first_when_the_study_resumes(tmp_path):
    first = Study(tmp_path, _space(), seed=3)
    earlier = []
    for _ in range(2):
        number, point = first.ask()
        earlier.append(point)
        first.tell(number, _synthetic(point))
    cut, cut_point = first.ask()            # a Ctrl-C while it was measured: never told
    del first
    again = Study(tmp_path, _space(), seed=3)
    assert again.requeue_interrupted() == [cut]
    number, point = again.ask()
    assert number == cut + 1 and point == cut_point
    again.tell(number, _synthetic(point))
    states = {r.number: r.state for r in again.records()}
    assert states == {0: "COMPLETE", 1: "COMPLETE", cut: "FAIL", number: "COMPLETE"}
    assert again.requeue_interrupted() == []
    # then new ones: a resumed sampler seeded as the first would propose the first configurations again
    _, following = again.ask()
    assert following not in [*earlier, cut_point]


def _summarised(tmp_path: Path, tuned: dict) -> RunFolder:
    folder = RunFolder(tmp_path / "configs" / "0")
    folder.root.mkdir(parents=True)
    RunFolder.write_json(folder.summary_json, {"machines": {"tuned": tuned}})
    return folder


def test_a_configurations_outcome_is_read_from_its_summary_with_each_constraint_and_why(tmp_path):
    folder = _summarised(tmp_path, {
        "load": {"all": {"samples": 9000}},
        "capacity": {"found": True, "capacity_rps": 850, "generator_bound_rps": None},
        "events": {"oom_kills": 2, "process_exits": []},
        "memory": {"budget": {"held_peak_mib": 380.0}, "peak_bytes": 300 * 2**20, "major_faults_per_s": 75.0}})
    outcome = outcome_of(folder, 397.0, 190.0)
    assert outcome.capacity_rps == 850 and not outcome.feasible
    assert outcome.broken == {
        "process_died": "2 OOM kills",
        "memory_over": "its processes held 380 MiB at their peak (PSS and swap), 96% of the 397 MiB model (at most 90%)",
        "page_ins_over": "75 page-ins a second over the load (at most 50)"}
    assert outcome.amounts == {"process_died": 2.0, "memory_over": pytest.approx(380 / 397 - 0.9, abs=1e-4),
                               "page_ins_over": 25.0}
    assert outcome.figures["held_peak_mib"] == 380.0 and outcome.figures["seconds"] == 190.0
    # within every constraint: each amount at or below 0 (Optuna's feasible), the PSS peak read where no swap is known
    fits = outcome_of(_summarised(tmp_path / "b", {
        "load": {"all": {"samples": 9000}}, "capacity": {"found": True, "capacity_rps": 700},
        "events": {"oom_kills": 0, "process_exits": []},
        "memory": {"peak_bytes": 300 * 2**20, "major_faults_per_s": 0.2}}), 397.0, 100.0)
    assert fits.feasible and fits.broken == {} and all(amount <= 0 for amount in fits.amounts.values())


def test_a_capacity_past_the_generator_or_the_last_step_is_a_lower_bound_and_no_steps_no_figure(tmp_path):
    bound = outcome_of(_summarised(tmp_path, {
        "load": {"all": {"samples": 9000}},
        "capacity": {"found": False, "capacity_rps": 2200, "generator_bound_rps": 2350}}), 397.0, 100.0)
    assert bound.capacity_rps == 2200 and bound.feasible
    assert "the load generator fell behind at 2350 req/s" in bound.figures["lower_bound"]
    nothing = outcome_of(_summarised(tmp_path / "b", {"load": {"all": {"samples": 0}}}), 397.0, 100.0)
    assert nothing.capacity_rps is None and not nothing.feasible
    assert nothing.broken == {"no_figure": "the tuned machine was sent no request"}


@pytest.mark.parametrize(("figures", "feasible", "expected"), [
    # the backend pool: widened to the calls in flight at the knee (its 20 and the 129 that waited)
    ({"knee_knob": "camel_app_http_client_per_route", "knee_waiting": 129, "queued_at": "the backend pool"}, True,
     ("backend_pool", 20, 149, "configuration 4's knee: requests queued at the backend pool "
                               "(camel_app_http_client_per_route, 129 calls waiting beside its 20): backend_pool 20 -> 149")),
    # a few waiting: twice its size at least
    ({"knee_knob": "camel_app_http_client_per_route", "knee_waiting": 3}, True, ("backend_pool", 20, 40, None)),
    # Tomcat's threads: twice (nothing said of what waited behind them)
    ({"knee_knob": "camel_app_tomcat_max_threads", "queued_at": "Tomcat's threads"}, True,
     ("tomcat_threads", 59, 118, "configuration 4's knee: requests queued at Tomcat's threads "
                                 "(camel_app_tomcat_max_threads): tomcat_threads 59 -> 118")),
    # HTTPD's workers, a key of the MPM's settings: on the dimension's grid (by 10), at most its top (250)
    ({"knee_knob": "httpd_mpm_event_settings.MaxRequestWorkers"}, True, ("httpd_workers", 130, 250, None)),
    # the host's CPUs, or no full pool: no knob, nothing queued
    ({"knee_knob": None, "queued_at": "the host's CPUs"}, True, None),
    # a constraint broken: a wider pool would hold more memory
    ({"knee_knob": "camel_app_tomcat_max_threads"}, False, None),
    # a knob no dimension of the space sets
    ({"knee_knob": "httpd_mpm_event_settings.ThreadsPerChild"}, True, None),
])
def test_a_knees_full_pool_queues_the_same_configuration_with_that_pool_widened(figures, feasible, expected):
    space = knob_space.load().chosen(("backend_client", "tomcat", "httpd"))
    point = {"backend_pool": 20, "tomcat_threads": 59, "tomcat_accept_count": 397, "httpd_mpm": "event",
             "httpd_workers": 130}
    step = guide.next_step(space, 4, point, figures, feasible)
    if expected is None:
        assert step is None
        return
    dimension, before, after, why = expected
    assert step is not None and (step.dimension, step.before, step.after) == (dimension, before, after)
    assert step.point == {**point, dimension: after}
    assert why is None or step.why == why


def test_a_dimension_at_its_top_or_outside_the_chosen_groups_queues_nothing():
    space = knob_space.load()
    top = {"backend_pool": 400, "tomcat_threads": 59}
    assert guide.next_step(space.chosen(("backend_client", "tomcat")), 0, top,
                           {"knee_knob": "camel_app_http_client_per_route", "knee_waiting": 50}, True) is None
    assert guide.next_step(space.chosen(("backend_client",)), 0, {"backend_pool": 40},
                           {"knee_knob": "camel_app_tomcat_max_threads"}, True) is None
    assert space.dimensions["backend_pool"].nearest_at_least(300) == 300
    assert space.dimensions["httpd_workers"].nearest_at_least(131) == 140
    assert space.dimensions["httpd_workers"].nearest_at_least(7) == 50


def _chained(point: dict) -> Outcome:
    """A machine whose requests pass three pools, each serving at most so many req/s (the backend pool 5 per
    connection, Tomcat's threads 8 per thread, HTTPD's workers 9 per worker): its capacity is the narrowest's, and its
    knee names that pool's knob (with the calls waiting for the backend pool), as the capacity run's verdict does."""
    limits = {"camel_app_http_client_per_route": 5 * point["backend_pool"],
              "camel_app_tomcat_max_threads": 8 * point["tomcat_threads"],
              "httpd_mpm_worker_settings.MaxRequestWorkers": 9 * point["httpd_workers"]}
    knob = min(limits, key=lambda k: limits[k])
    capacity = min(limits.values(), default=0)
    return Outcome(float(min(capacity, 1800)), figures={
        "knee_knob": knob if capacity < 1800 else None, "queued_at": knob,
        "knee_waiting": point["backend_pool"] if knob == "camel_app_http_client_per_route" else None})


def test_the_verdicts_steps_climb_the_chain_of_full_pools_to_the_top_sooner_than_the_sampler_alone():
    space = knob_space.load().chosen(("backend_client", "tomcat", "httpd"))
    fixed = {"httpd_mpm": "worker"}

    def search(guided: bool) -> tuple[int | None, Study]:
        study = Study(None, space, seed=3, startup_trials=4)
        for _ in range(12):
            number, point = study.ask()
            outcome = _chained({**point, **fixed})
            study.tell(number, outcome)
            step = guide.next_step(space, number, point, outcome.figures, outcome.feasible) if guided else None
            if step is not None:
                study.enqueue(step.point, step.why)
        reached = next((r.number for r in study.records() if (r.capacity_rps or 0) >= 1800), None)
        return reached, study

    reached, study = search(True)
    alone, _ = search(False)
    assert reached is not None and (alone is None or reached < alone), (reached, alone)
    chosen = [r for r in study.records() if r.chosen_by]
    assert chosen and all(r.chosen_by.startswith("configuration ") for r in chosen)
    # a configuration already tried is never queued again
    first = study.records()[0]
    assert not study.enqueue(first.point, "again")
