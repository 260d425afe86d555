"""The host JMeter runs on standing still (lab/analysis/host_pause.py): found in jmeter/loadgen.csv's clock beside
its CPU counters, placed over a step, and a knee step it fell in not counted."""
from __future__ import annotations

import pytest

from lab.analysis import host_pause

pytestmark = pytest.mark.fast

T0 = 1_796_434_852.0


def _rows(seconds: range, paused: dict[int, float] | None = None, pids: tuple[int, ...] = (4242,)) -> list[dict]:
    """loadgen.read's rows a second apart on 2 CPUs (their counters 2 CPU-seconds a second), one per JMeter process;
    paused: after the sample at that second, the wall clock ran on this long while the counters did not."""
    rows, shift = [], 0.0
    for s in seconds:
        for pid in pids:
            rows.append({"time": T0 + s + shift, "host_busy_s": 1000 + 1.3 * s, "host_idle_s": 500 + 0.7 * s,
                         "host_cpus": 2, "loadgen_pid": pid, "loadgen_cpu_s": 0.5 * s})
        shift += (paused or {}).get(s, 0.0)
    return rows


def test_a_stretch_the_hosts_cpus_did_not_count_is_a_pause_where_and_as_long_as_it_was():
    found = host_pause.pauses(_rows(range(0, 20), {7: 1.0}, pids=(4242, 4343)))
    assert found == [{"at": T0 + 7, "seconds": pytest.approx(1.0, abs=0.01)}]     # one, though two rows a sample


def test_the_samplings_own_jitter_and_a_host_that_ran_on_are_no_pause():
    assert host_pause.pauses(_rows(range(0, 20), {7: host_pause.PAUSE_MIN_S - 0.05})) == []
    assert host_pause.pauses(_rows(range(0, 20))) == []
    assert host_pause.pauses([]) == []


def test_a_pause_counts_over_a_step_it_overlaps_and_not_over_one_it_missed():
    found = host_pause.pauses(_rows(range(0, 60), {34: 1.2}))
    paused = host_pause.over(found, T0 + 25, T0 + 40, T0)
    assert paused is not None and paused["seconds"] == pytest.approx(1.2, abs=0.01) and paused["at_s"] == [34.0]
    assert "stood still 1.2 s at 0:34" in paused["sentence"] and "not the machine" in paused["sentence"]
    assert host_pause.over(found, T0 + 36.5, T0 + 50, T0) is None         # it ended before this one began
    assert host_pause.over(found, T0 + 10, T0 + 33.9, T0) is None         # this one ended before it


def test_a_knee_step_the_host_paused_in_is_no_figure_and_says_whose_and_when():
    paused = host_pause.over(host_pause.pauses(_rows(range(0, 60), {34: 1.2})), T0 + 25, T0 + 40, T0)
    why = host_pause.why_not_counted("tuned", {"capacity_rps": 975, "at_knee": {"host_paused": paused}})
    assert why is not None and "1.2 s in the tuned machine's knee step (at 0:34)" in why
    assert host_pause.why_not_counted("tuned", {"capacity_rps": 975, "at_knee": {"host_paused": None}}) is None
    assert host_pause.why_not_counted("tuned", None) is None
