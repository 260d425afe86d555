"""The write-up's claim answered from a run's figures (lab/analysis/claims.py): each machine stopped answering or
held, when, with which errors and what was recorded beside it, and the conclusion for each of the four cases."""
from __future__ import annotations

import pytest

from lab.analysis import claims

pytestmark = pytest.mark.fast

MIB = 2**20


def machine(stop_at_s: float | None, start_s: float = 0.0, length_s: int = 1200) -> tuple[dict, dict]:
    """A machine's summary entry and load series: 10-s windows of 8,000 requests, failing from stop_at_s on."""
    buckets = [start_s + 10 * k for k in range(length_s // 10)]
    rates = [0.8 if stop_at_s is not None and at - start_s >= stop_at_s else 0.001 for at in buckets]
    failed = sum(int(8000 * r) for r in rates)
    entry = {"load": {"load_start_s": start_s, "load_end_s": start_s + length_s,
                      "all": {"samples": 8000 * len(buckets), "error_rate": failed / (8000 * len(buckets))},
                      "errors_by_type": [{"error": "503 Service Unavailable", "count": failed}] if failed else [],
                      "error_threshold": {"crossed_at_s": stop_at_s}},
             "memory": {"peak_bytes": 400 * MIB}, "observed": {"jvm_memory_limit_bytes": 512 * MIB},
             "gc": {"time_in_gc_pct": 3.3}}
    return entry, {"load": {"buckets": buckets, "bucket_samples": [8000] * len(buckets), "bucket_error_rate": rates}}


def answer(default: tuple[dict, dict], tuned: tuple[dict, dict]) -> dict:
    summary = {"machines": {"default": default[0], "tuned": tuned[0]}}
    return claims.answer(summary, {"machines": {"default": default[1], "tuned": tuned[1]}})


def test_the_claim_holds_when_default_stops_and_tuned_does_not() -> None:
    found = answer(machine(610.0), machine(None, start_s=1200.0))
    assert found["machines"]["default"]["stopped_after_s"] == 610.0
    assert found["conclusion"] == ("The claim holds in this run: default stopped answering after 10:10 (the write-up: "
                                   "about 10:00) and tuned did not.")
    assert found["machines"]["tuned"]["sentence"] == (
        "tuned did not stop answering: 0.10% of its 960,000 requests failed over 20:00 of load, never 50% in a 10-s "
        "window; memory peaked at 78% of its 512 MiB limit, 3.3% of its time in GC pauses.")


def test_a_tuned_machine_killed_by_the_oom_killer_is_the_opposite_of_the_claim() -> None:
    # As measured here at the full profile (sequential: tuned's load starts at 20:00 of the run)
    tuned = machine(320.0, start_s=1200.0)
    tuned[0]["events"] = {"oom_kills": 23, "process_exits": [
        {"process": "camel-app", "at_s": 1528.0 + 40 * k, "reason": "terminated by SIGKILL; not expected"}
        for k in range(23)]}
    tuned[0]["memory"]["peak_bytes"] = 503 * MIB
    found = answer(machine(None), tuned)
    assert found["machines"]["tuned"]["stopped_after_s"] == 320.0
    assert found["machines"]["tuned"]["sentence"].startswith(
        "tuned stopped answering in the 10-s window from 5:20 of its load (50% or more of its requests failed; over "
        "the whole load ")
    assert found["machines"]["tuned"]["sentence"].endswith(
        "503 Service Unavailable (563,456); camel-app died 23 times, first at 5:28 (terminated by SIGKILL; not "
        "expected), the kernel's OOM killer struck 23 times, memory peaked at 98% of its 512 MiB limit, 3.3% of its "
        "time in GC pauses.")
    assert found["conclusion"] == "The opposite of the claim: tuned stopped answering after 5:20 and default did not."


def test_neither_or_both_stopping_is_said_as_such() -> None:
    held = answer(machine(None), machine(None))
    assert held["conclusion"] == "Not reproduced: neither machine stopped answering in this run."
    short = answer(machine(None, length_s=90), machine(None, length_s=90))
    assert short["conclusion"] == ("Not answered by this run: neither machine stopped answering, but the shorter load "
                                   "lasted 1:30, under the 10:00 after which the write-up's default machine stopped "
                                   "(the full profile lasts 20:00).")
    both = answer(machine(700.0), machine(900.0))
    assert both["conclusion"] == ("Both stopped answering: default after 11:40, tuned after 15:00; the claim is that "
                                  "only default does.")


def test_a_run_that_cannot_answer_it_has_no_claim_section() -> None:
    assert claims.answer({"machines": {"default": machine(None)[0]}}, {"machines": {}}) is None
    assert claims.answer({"capacity": {"ratio": 1.0}, "machines": {"default": machine(None)[0],
                                                                   "tuned": machine(None)[0]}}, {}) is None
