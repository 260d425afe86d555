"""Sentences of the report's "what happened" (lab/analysis/prose.py) from hand-made figures."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.fast


def test_a_lone_long_gc_pause_is_put_in_context() -> None:
    from lab.analysis.prose import what_happened
    gc = {"time_in_gc_pct": 1.2, "collector": "G1", "pause_count": 240, "pause_total_s": 2.4, "pause_max_ms": 184.0,
          "pause_others_p99_ms": 24.6, "scope": "load window"}
    sentences = what_happened({"run": {}, "machines": {"tuned": {"gc": gc}}})
    assert any(s.endswith("Its longest pause (184 ms) stands alone: 7.5 times the 99th percentile of the others "
                          "(25 ms); one pause, not a pattern.") for s in sentences), sentences
    # a long pause among long ones is a pattern: no such sentence
    sentences = what_happened({"run": {}, "machines": {"tuned": {"gc": {**gc, "pause_others_p99_ms": 120.0}}}})
    assert not any("stands alone" in s for s in sentences)


def test_the_longest_pause_is_measured_against_the_others():
    # 40 pauses of 10..20 ms and one of 184 ms: with the longest inside, the 99th percentile of 41 pauses would be
    # the longest itself (rank 41.58 > 41), and nothing would ever stand alone.
    from lab.analysis.gclog import others_p99
    pauses = [10.0 + i / 4 for i in range(40)] + [184.0]
    assert others_p99(pauses) == max(pauses[:-1]) == 19.75
    assert others_p99([5.0]) is None


def test_a_lone_pause_is_not_a_red_ratio_in_the_comparison():
    # tuned's one 184 ms pause among 240 short ones against default's 25 ms: 7.4x longest, said as what it is
    from lab.analysis.summary import _comparison
    from lab.report.formatting import ratio_class
    lone = {"pause_count": 240, "pause_max_ms": 184.0, "pause_others_p99_ms": 24.6}
    rows = {r["key"]: r for r in _comparison({"default": {"gc": {"pause_count": 300, "pause_max_ms": 25.0,
                                                                  "pause_others_p99_ms": 20.0}},
                                               "tuned": {"gc": lone}})}
    row = rows["gc_max_ms"]
    assert row["ratio"] == pytest.approx(7.36) and row["outlier"] and ratio_class(row) == "ratio"
    assert row["note"].startswith("a lone pause on tuned: at least 5 times the 99th percentile")
    # longest pauses that are a pattern keep their colour
    patterned = {**lone, "pause_others_p99_ms": 120.0}
    row = {r["key"]: r for r in _comparison({"default": {"gc": {"pause_max_ms": 25.0}},
                                             "tuned": {"gc": patterned}})}["gc_max_ms"]
    assert not row.get("outlier") and ratio_class(row) == "ratio bad"


def test_memory_at_the_limit_reads_as_swapping_when_the_memory_model_gives_swap() -> None:
    from lab.analysis.prose import what_happened
    mib = 1024 * 1024
    tuned = {"memory": {"peak_bytes": 397 * mib, "source": "PCP"},
             "observed": {"jvm_memory_limit_bytes": 397 * mib}}
    without = " ".join(what_happened({"run": {}, "machines": {"tuned": tuned}}))
    assert "tuned peaked at 397 MiB of memory, 100% of its 397 MiB limit (PCP). That is at the limit: the kernel's " \
           "OOM killer was one allocation away." in without
    swapped = " ".join(what_happened({"run": {"memory_model": {"name": "vm", "swap_mib": 1024}},
                                      "machines": {"tuned": tuned}}))
    assert "(PCP). With 1024 MiB of swap beside it, past the limit it swaps before the kernel's OOM killer strikes." \
           in swapped and "one allocation away" not in swapped
    killed = {**tuned, "events": {"oom_kills": 2}}
    assert "the kernel's OOM killer still struck 2 times." in " ".join(
        what_happened({"run": {"memory_model": {"swap_mib": 1024}}, "machines": {"tuned": killed}}))


def test_a_default_machine_that_answered_nothing_well_is_said_so_never_a_traceback() -> None:
    from lab.analysis.prose import what_happened

    def load(good: float, errors: float) -> dict:
        return {"throughput_rps": 400.0, "good_throughput_rps": good, "error_rate": errors, "window": {"settled": True},
                "latency_ms": {"p95": 40.0}, "all": {"samples": 40_000}}
    sentences = what_happened({"run": {}, "machines": {"default": {"load": load(0.0, 1.0)},
                                                        "tuned": {"load": load(380.0, 0.05)}}})
    assert any(s.startswith("default answered no request without error in the steady state (380.0 vs 0.0 req/s); "
                            "in all tuned served 400.0 req/s with 5.0% errors, default 400.0 req/s with 100.0%")
               for s in sentences), sentences
    sentences = what_happened({"run": {}, "machines": {"default": {"load": load(200.0, 0.5)},
                                                        "tuned": {"load": load(380.0, 0.05)}}})
    assert any(s.startswith("tuned answered 1.90x the requests per second without error of default in the steady "
                            "state (380.0 vs 200.0 req/s)") for s in sentences), sentences
