"""lab.placement: each machine and JMeter get CPUs of their own when the host has enough; otherwise all share
every CPU and the machines are loaded one after the other."""
from __future__ import annotations

import json
import os

import pytest

from lab import placement
from lab.names import MACHINES
from lab.placement import LOADGEN, Placement, cpulist, host_cpus, parse_cpulist, plan

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(("count", "default", "tuned", "loadgen"), [
    (5, (0, 1), (2, 3), (4,)),  # the smallest dedicated host: 2 per machine and 1 for JMeter
    (6, (0, 1), (2, 3), (4, 5)),
    (8, (0, 1), (2, 3), (4, 5, 6, 7)),
    (16, (0, 1), (2, 3), tuple(range(4, 16))),  # JMeter takes all that is left
])
def test_a_big_enough_host_gives_each_its_own_cpus(count: int, default: tuple, tuned: tuple, loadgen: tuple) -> None:
    placement = plan(range(count))
    assert placement.dedicated
    assert placement.schedule == "parallel"
    assert placement.cpus == {"default": default, "tuned": tuned, LOADGEN: loadgen}
    assert placement.host_cpus == tuple(range(count))
    assert placement.note.startswith("dedicated: default on CPUs 0-1, tuned on 2-3, JMeter on ")


def test_the_dedicated_note_names_the_cpus() -> None:
    assert plan(range(8)).note == "dedicated: default on CPUs 0-1, tuned on 2-3, JMeter on 4-7"


@pytest.mark.parametrize("count", [1, 2, 3, 4])  # 4: both machines fit, but nothing is left for JMeter
def test_a_small_host_shares_every_cpu_and_runs_one_machine_after_the_other(count: int) -> None:
    placement = plan(range(count))
    assert not placement.dedicated
    assert placement.schedule == "sequential"
    assert placement.cpus == {name: tuple(range(count)) for name in (*MACHINES, LOADGEN)}
    assert f"this host has {count} CPUs" in placement.note
    assert "needs 5 (2 per machine and 1 for JMeter)" in placement.note


def test_the_shared_note_says_why() -> None:
    assert plan([0, 1]).note == (
        "shared: this host has 2 CPUs, and a fair side-by-side run needs 5 (2 per machine and 1 for JMeter); "
        "the machines and JMeter share CPUs 0-1, so the schedule defaults to one machine after the other")


def test_a_non_contiguous_affinity_set_is_placed_by_its_own_cpus() -> None:
    placement = plan([0, 2, 4, 6, 8, 10])
    assert placement.dedicated
    assert placement.cpus == {"default": (0, 2), "tuned": (4, 6), LOADGEN: (8, 10)}
    assert placement.note == "dedicated: default on CPUs 0,2, tuned on 4,6, JMeter on 8,10"
    assert placement.as_json()["host_cpus"] == "0,2,4,6,8,10"


def test_duplicates_and_order_of_the_input_do_not_matter() -> None:
    assert plan([7, 3, 3, 1, 0, 2, 6, 5, 4, 7]) == plan(range(8))
    assert plan([1, 0, 1]).host_cpus == (0, 1)
    # Five distinct CPUs, seven entries: dedicated, as the distinct count decides.
    assert plan([4, 4, 3, 2, 1, 0, 0]).dedicated


def test_the_machines_take_cpus_in_the_order_given() -> None:
    placement = plan(range(6), machines=("tuned", "default"))
    assert placement.cpus["tuned"] == (0, 1)
    assert placement.cpus["default"] == (2, 3)


def test_the_thresholds_follow_the_arguments() -> None:
    assert plan(range(3), machines=("one",), per_machine=2, loadgen_min=1).dedicated
    assert not plan(range(6), per_machine=2, loadgen_min=3).dedicated
    assert plan(range(7), per_machine=2, loadgen_min=3).cpus[LOADGEN] == (4, 5, 6)


def test_no_cpus_is_an_error() -> None:
    with pytest.raises(ValueError):
        plan([])


@pytest.mark.parametrize("count", [2, 8])
def test_as_json_is_json_with_cpulists(count: int) -> None:
    placement = plan(range(count))
    data = placement.as_json()
    assert json.loads(json.dumps(data)) == data
    assert data["host_cpus"] == f"0-{count - 1}"
    assert data["schedule"] == placement.schedule
    assert data["dedicated"] is placement.dedicated
    assert data["note"] == placement.note
    for name, cpus in placement.cpus.items():
        assert data["cpus"][name] == cpulist(cpus)
    if count == 8:
        assert data["cpus"] == {"default": "0-1", "tuned": "2-3", LOADGEN: "4-7"}


def test_a_placement_is_frozen() -> None:
    placement = plan(range(8))
    assert isinstance(placement, Placement)
    with pytest.raises(AttributeError):
        placement.schedule = "sequential"  # type: ignore[misc]


@pytest.mark.parametrize(("cpus", "text"), [
    ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"),
    ([0], "0"),
    ([3, 4], "3-4"),
    ([0, 2, 4, 6, 8, 10], "0,2,4,6,8,10"),
    (list(range(64)), "0-63"),
    ([], ""),
])
def test_cpulist_round_trips(cpus: list[int], text: str) -> None:
    assert cpulist(cpus) == text
    assert parse_cpulist(text) == tuple(cpus)
    assert cpulist(parse_cpulist(text)) == text


def test_cpulist_sorts_and_merges() -> None:
    assert cpulist([8, 7, 5, 2, 1, 0, 1]) == "0-2,5,7-8"
    assert parse_cpulist("5, 0-2 ,1\n") == (0, 1, 2, 5)


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "-1", "1,,2", "0-2-4", "1.5", "٣"])
def test_a_bad_cpulist_is_an_error_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a cpulist") as error:
        parse_cpulist(text)
    assert repr(text) in str(error.value)


def test_host_cpus_is_this_process_affinity() -> None:
    assert host_cpus() == tuple(sorted(os.sched_getaffinity(0)))
    assert plan(host_cpus()).host_cpus == host_cpus()


def test_each_backend_gets_its_placement() -> None:
    # ssh: the machines are hosts of their own, so both are loaded at once from this host's JMeter
    remote = placement.for_backend("ssh", [0, 1])
    assert remote.dedicated and remote.schedule == "parallel" and remote.cpus == {placement.LOADGEN: (0, 1)}
    # local pins what plan() offers (cpusets, taskset): dedicated and at once on 8 CPUs, shared and one after
    # the other on 2; Vagrant does not pin its VMs: shared and sequential even where plan() could split
    assert placement.for_backend("local", range(8)) == plan(range(8))
    assert placement.for_backend("local", range(8)).dedicated
    for backend, cpus in (("local", [0, 1]), ("vagrant", [0, 1]), ("vagrant", list(range(8)))):
        shared = placement.for_backend(backend, cpus)
        assert not shared.dedicated and shared.schedule == "sequential"
        assert set(shared.cpus.values()) == {tuple(cpus)} and "shared" in shared.note


def test_a_placement_holds_only_where_the_machines_run_on_their_cpus():
    planned = placement.for_backend("local", range(8))
    assert placement.as_found(planned, {"default": "0-1", "tuned": "2-3"}) == planned
    moved = placement.as_found(planned, {"default": "0-1", "tuned": "4-5"})
    assert not moved.dedicated and moved.schedule == "sequential" and "tuned on 4-5 (planned: 2-3)" in moved.note
    assert moved.cpus[placement.LOADGEN] == tuple(range(8))          # JMeter is not pinned either
    ssh = placement.for_backend("ssh", range(2))                     # hosts of their own: nothing to check
    assert placement.as_found(ssh, {"default": None, "tuned": None}) == ssh
