"""A capacity run's figures (an open model's steps, lab/load/openmodel.py): each step's arrivals, answers,
latency and errors, whether it met the SLO, the machine's capacity and where it broke.

Definitions (also in summary.json's capacity "basis"):
- a request belongs to the step it arrived in. JMeter's open model makes exactly rate x step_s requests
  arrive in each step, so in the order of their starts (JMeter's timeStamp) the first rate_1 x step_s are
  the first step's, and so on: no clock is needed, however late the first request started. A step with
  fewer (the load ended in it) is partial: it missed the SLO if what it holds already misses it whatever
  the rest would have done (more than 1% of its planned requests slower than the p99 bound, or more
  errors than the bound allows of them: the rule that ended the load), else it is not judged;
- a step meets the SLO when its p99 (JMeter's percentile, failed requests included) and its error rate
  are within it; requests JMeter failed to send (no local port left) never reached the machine and are
  left out of both, but past the error bound they make the step not delivered;
- a step was delivered when its requests arrived at 90% of its rate or more, over the span of their
  starts (on a shared host JMeter falls behind). One that was not can still have missed the SLO (it
  missed at less than its rate, so it would at its rate) but never met it: it is not judged then.
  Without a knee, such a step makes the capacity a lower bound: the load generator's limit
  (generator_bound_rps);
- first, the warm-up (warmup_s at the start rate) warms the machine (its JIT, its pools): shown, never judged;
- capacity: the highest rate of a step that met the SLO before stop_after_misses consecutive steps
  missed it; the knee: the first of those steps. Then the last rate met again and finer steps (resolution_rps
  apart) up to the knee, ended by the first miss (lab/knee.py): the capacity the highest of them met before it, the
  knee that miss; when the rate met before misses again, the machine had not recovered and the coarse figures
  stand, with what PCP saw over both steps where it names a cause (why_not_recovered). A machine that met it at
  every step has a capacity of at least the last rate (reached_max), not a measured one.
"""
from __future__ import annotations

import bisect
import dataclasses
import json
import time
from collections import Counter
from collections.abc import Mapping
from typing import cast

from lab.analysis.jmeter import Samples, client_side, error_class, error_label, read_results
from lab.contract import CapacityComparison, Generator, MachineCapacity
from lab.load.openmodel import DELIVERED, Slo, StepLoad
from lab.numbers import percentile
from lab.runfolder import JMeterFolder

BASIS = ("each step: the rate x length requests that arrived in it (in the order of their starts), its rates over "
         "the span of those starts; p99 as JMeter computes it, failed requests included, the generator's own "
         f"port errors left out; a step the generator did not deliver (arrivals under {DELIVERED:.0%} of the rate, "
         "or its own errors past the bound) can miss the SLO but not meet it; the warm-up before the steps not "
         "judged; capacity: the highest rate that met the SLO before consecutive steps missed it, then the highest of "
         "the finer steps between it and the knee met before the first of them missed")


CEILING_BASIS = ("JMeter's open model, as a capacity run's, against HTTPD's static file in the load generator's own "
                 "network (jmeter/generator/): the highest rate whose requests arrived at 90% of it or more and met "
                 "the run's SLO before two steps in a row did not; on a host whose CPUs JMeter shares with that target, a lower bound of JMeter's own")


def step_load(profile: dict) -> StepLoad:
    """The StepLoad a run.json profile describes (ValueError if it is not one)."""
    if profile.get("model") != "open":
        raise ValueError("not an open-model profile")
    # its steps only (a plan of the user's own adds what maps it: capacity --plan); older: no warm-up
    steps = {field.name for field in dataclasses.fields(StepLoad) if field.init} - {"slo"}
    fields = {"warmup_s": 0, **{k: v for k, v in profile.items() if k in steps}}
    return StepLoad(**fields, slo=Slo(**(profile.get("slo") or {})))


def analyze(samples: Samples, load: StepLoad, t0: float, ended_past_knee: bool = False) -> dict:
    """The machine's steps, its capacity and knee, and a sentence on how it broke. ended_past_knee: the load's watch
    ended it once stop_after_misses steps in a row had missed by its clock (run.json's ended_early_s)."""
    arrived = sorted(range(len(samples)), key=lambda i: samples.start[i])
    steps = []
    first = 0
    for number, (rate, seconds, warmup) in enumerate(load.segments()):
        count = rate * seconds
        members = arrived[first:first + count]
        first += count
        if not members:
            break
        steps.append(_step(samples, members, number, rate, load, samples.start[members[0]] / 1000.0 - t0,
                           planned=count, seconds=seconds, warmup=warmup))
    return {"slo": {"p99_ms": load.slo.p99_ms, "error_pct": load.slo.error_pct, "text": load.slo.describe()},
            "step_s": load.step_s, "steps": steps, **_capacity(steps, load, ended_past_knee), "basis": BASIS}


def _step(samples: Samples, members: list[int], number: int, rate: int, load: StepLoad, start_s: float,
          planned: int, seconds: int, warmup: bool) -> dict:
    labels = {i: error_label(samples.code[i], samples.message[i]) for i in members if not samples.ok[i]}
    # What the load generator failed to send (no local port left) never reached the machine: the step is
    # judged on what did, and counts as not delivered when those failures alone break the error bound.
    client = {i for i, label in labels.items() if client_side(label)}
    sent = [i for i in members if i not in client] or members
    elapsed = sorted(samples.elapsed[i] for i in sent)
    failed = [i for i in sent if i in labels and i not in client]
    error_rate = len(failed) / len(sent)
    p99 = percentile(elapsed, 99)
    partial = len(members) < planned
    # Over the span of its arrivals as JMeter sent them: a load generator that fell behind shows here.
    starts = [samples.start[i] for i in members]
    span_s = (max(starts) - min(starts)) / 1000.0 if len(members) > 1 and max(starts) > min(starts) else seconds
    arrived_rps = len(members) / span_s
    delivered = (partial or arrived_rps >= DELIVERED * rate) and len(client) <= load.slo.error_pct / 100 * planned
    if warmup:                          # the machine warming up (its JIT, its pools): shown, never judged
        met = None
    elif partial:
        slow = len(elapsed) - bisect.bisect_right(elapsed, load.slo.p99_ms)
        met = False if load.slo.certainly_missed(slow, len(failed), planned) else None
    else:
        met = load.slo.met(p99, error_rate)
        if met and not delivered:       # met at less than its rate says nothing of the rate; a miss stands
            met = None
    kinds = Counter(labels.values())
    return {"step": number + 1, "rate_rps": rate, "start_s": round(start_s, 3), "partial": partial, "warmup": warmup,
            "arrived_rps": round(arrived_rps, 3), "span_s": round(span_s, 3), "delivered": delivered,
            "answered_rps": round((len(members) - len(failed) - len(client)) / span_s, 3),
            "samples": len(members), "errors": len(failed), "error_rate": round(error_rate, 6),
            "client_errors": len(client),
            "p50_ms": percentile(elapsed, 50), "p95_ms": percentile(elapsed, 95), "p99_ms": p99,
            "max_ms": elapsed[-1], "max_in_flight": max(samples.threads[i] for i in members),
            "errors_by_type": [{"error": k, "count": v} for k, v in kinds.most_common(3)],
            "errors_by_class": dict(Counter(error_class(label) for label in labels.values()).most_common()),
            "met": met}


def _capacity(steps: list[dict], load: StepLoad, ended_past_knee: bool = False) -> dict:
    judged = [s for s in steps if s["met"] is not None]
    misses: list[dict] = []
    knee = None
    for step in judged:
        misses = [] if step["met"] else [*misses, step]
        if len(misses) >= load.stop_after_misses:
            knee = misses[0]
            break
    # A machine that stalls holds the open model's threads and JMeter falls behind: the watch counts a step whose
    # arrivals fell under its rate as missed while the load runs, the analysis leaves it unjudged. Measured: a tune's
    # configuration met 1,300 req/s, certainly missed 1,450 (p99 7 s, 12% errors, arrivals at 1,110 req/s), the next
    # step got no arrivals, and the watch ended the load on that second miss: the first miss is the knee.
    if knee is None and ended_past_knee and misses and misses[-1] is judged[-1]:
        knee = misses[0]
    before = [s for s in judged if knee is None or s["step"] < knee["step"]]
    met = [s for s in before if s["met"]]
    capacity = met[-1] if met else None
    reached_max = knee is None and bool(judged) and judged[-1]["met"] and judged[-1]["rate_rps"] == load.rates()[-1]
    short = [s for s in steps if not s["delivered"] and not s["warmup"] and (knee is None or s["step"] < knee["step"])]
    generator_bound = short[0] if short and knee is None else None
    return {"capacity_rps": capacity["rate_rps"] if capacity else None,
            "capacity_answered_rps": capacity["answered_rps"] if capacity else None,
            "knee_rps": knee["rate_rps"] if knee else None, "reached_max": reached_max,
            "found": knee is not None, "broke": _broke(knee, load.slo) if knee else None,
            "generator_bound_rps": generator_bound["rate_rps"] if generator_bound else None,
            "note": _generator_note(generator_bound, capacity) if generator_bound
            else _note(capacity, knee, reached_max, judged, load) or _unjudged_note(short)}


def _generator_note(short: dict, capacity: dict | None) -> str:
    return (f"the load generator fell behind at {short['rate_rps']} req/s (requests arrived at "
            f"{short['arrived_rps']:.0f} req/s) and no step after it missed the SLO for certain: the capacity is at "
            f"least {capacity['rate_rps'] if capacity else 0} req/s, the generator's limit on this host, not the "
            "machine's (JMeter needs CPUs of its own: a host with 5 or more gets them)")


def _unjudged_note(short: list[dict]) -> str | None:
    """Steps below the knee that the load generator did not deliver: neither met nor missed."""
    if not short:
        return None
    rates = ", ".join(f"{s['rate_rps']} (arrived {s['arrived_rps']:.0f})" for s in short)
    return (f"the load generator fell behind at {rates} req/s: those steps met the SLO at less than their rate, "
            "so they are not judged, and the capacity lies between the last step met and the knee")


def _broke(knee: dict, slo: Slo) -> str:
    """How the first missed step missed: which part of the SLO, with its figures."""
    parts = []
    if knee["p99_ms"] is not None and knee["p99_ms"] > slo.p99_ms:
        parts.append(f"p99 {knee['p99_ms']:.0f} ms (SLO {slo.p99_ms} ms)")
    if knee["error_rate"] * 100 > slo.error_pct:
        kinds = ", ".join(f"{k['error']} x{k['count']}" for k in knee["errors_by_type"])
        parts.append(f"errors {knee['error_rate']:.1%} (SLO {slo.error_pct:g}%)" + (f": {kinds}" if kinds else ""))
    if knee.get("client_errors"):
        parts.append(f"and the load generator could not send {knee['client_errors']} (no local port left: "
                     "JMeter's limit, not the machine's)")
    return (f"at {knee['rate_rps']} req/s offered it answered {knee['answered_rps']:.0f} req/s; "
            + "; ".join(parts))


def _note(capacity: dict | None, knee: dict | None, reached_max: bool, judged: list[dict], load: StepLoad) -> str | None:
    if not judged:
        return "no step ran to its end: no capacity"
    if len(load.rates()) == 1:
        return (f"one burst of {load.rates()[0]} req/s for {load.step_s} s: it "
                f"{'met' if judged[0]['met'] else 'missed'} the SLO")
    if reached_max:
        return f"every step met the SLO up to the last ({load.rates()[-1]} req/s): the capacity is at least that"
    if knee is None:
        return (f"the load ended before {load.stop_after_misses} consecutive steps missed the SLO: "
                "the capacity is not settled")
    if capacity is None:
        return f"the first steps already missed the SLO: below {load.start_rps} req/s (start lower: --start-rate)"
    return None


def _recorded(folder: JMeterFolder, name: str) -> tuple[dict, StepLoad, Samples | None] | None:
    """A load the lab ran beside the machines' own (the ceiling's, a knee's finer steps): its record (folder/name,
    with the profile it ran and the thread group whose results it wrote), the steps, and its results (None when
    empty or missing); None when the record cannot be read (it did not run)."""
    try:
        record = json.loads((folder.root / name).read_text())
        load = step_load(record["profile"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    results = folder.results(record.get("group") or record.get("machine") or "default")
    return record, load, (read_results(results) or None) if results.is_file() else None


def with_refined(found: dict, folder: JMeterFolder, t0: float) -> dict:
    """A machine's coarse steps joined by the finer ones its knee search ran near the knee (lab/knee.py, in folder):
    its capacity the highest of them met before the first that missed, its knee that miss (else the coarse ones).
    Unchanged when there were none."""
    recorded = _recorded(folder, "steps.json")
    if recorded is None:
        return found
    record, load, samples = recorded
    between = [record.get("met_rps"), record.get("missed_rps")]
    if samples is None:
        return {**found, "refined": {"between": between, "steps": 0,
                                     "note": "its finer steps gave no results: the coarse steps' capacity stands"}}
    finer = analyze(samples, load, t0)["steps"]
    coarse = found.get("steps") or []
    met = next((s for s in coarse if s["rate_rps"] == found.get("capacity_rps")), None)
    knee = next((s for s in coarse if s["rate_rps"] == found.get("knee_rps")), None)
    for number, step in enumerate(finer, start=len(coarse) + 1):
        step.update(step=number, refined=True)
    # the first rate of the second climb, met before: the coarse step below the last met (finer steps recorded before
    # the lab climbed from it: the last met; before the lab rechecked at all: none)
    recheck_rps = load.lead_rps or record.get("met_rps")
    recheck = next((s for s in finer if not s["warmup"] and s["rate_rps"] == recheck_rps), None)
    refined = {"between": between, "steps": len(finer), "resolution_rps": load.resolution_rps, "recheck_rps": recheck_rps,
               "recovered": recheck["met"] if recheck else None}       # None: no recheck, or not judged
    if recheck is not None and recheck["met"] is False:     # missed now: still overloaded
        return {**found, "steps": coarse + finer,
                "refined": {**refined, "note": f"it had not recovered from the coarse steps' overload: at {recheck_rps} "
                                               "req/s, which it met before, it missed; the coarse steps' capacity stands"}}
    for step in finer:
        if step["met"] is None:             # not delivered, or cut short without a certain miss: neither
            continue
        if not step["met"]:
            knee = step
            break
        met = step
    if knee is not None and knee["rate_rps"] == between[0]:     # the rate met on the coarse climb missed on the second
        if met is None or met.get("refined") is not True:           # ... and nothing below it judged on the second
            return {**found, "steps": coarse + finer,
                    "refined": {**refined, "note": f"{between[0]} req/s, met on the coarse climb, missed on the second, "
                                                   "with no step below it judged: the coarse steps' capacity stands"}}
        refined["note"] = (f"{between[0]} req/s, met on the coarse climb, missed on the second: the capacity is "
                           f"{met['rate_rps']} req/s, met on both")
    return {**found, "steps": coarse + finer, "capacity_rps": met["rate_rps"] if met else None,
            "capacity_answered_rps": met["answered_rps"] if met else None,
            "knee_rps": knee["rate_rps"] if knee else None, "broke": _broke(knee, load.slo) if knee else None,
            "refined": refined}


def generator_ceiling(folder: JMeterFolder) -> Generator | None:
    """The load generator's ceiling from its own results (lab/load/ceiling.py), or None when it was not measured:
    the highest rate of its steps that arrived at the rate and met the SLO before stop_after_misses consecutive ones
    that did not (a lone step JMeter fell behind in, still warming up, is not its ceiling)."""
    recorded = _recorded(folder, "target.json")
    if recorded is None:
        return None
    target, load, samples = recorded
    if samples is None:
        return {"ceiling_rps": None, "reached_max": False, "steps": [], "where": target.get("where"),
                "text": "not measured: its load gave no results", "basis": CEILING_BASIS}
    found = analyze(samples, load, samples.start[0] / 1000.0)
    ceiling: int | None = None
    misses: list[dict] = []
    for step in found["steps"]:
        if step["warmup"]:
            continue
        if step["delivered"] and step["met"]:
            ceiling, misses = step["rate_rps"], []
            continue
        misses.append(step)
        if len(misses) >= load.stop_after_misses:
            break
    stopped = misses[0] if misses else None
    reached_max = stopped is None and ceiling == load.rates()[-1]
    if ceiling is None:
        text = f"under {load.start_rps} req/s"
    elif reached_max:
        text = f"at least {ceiling} req/s (every step up to the last met)"
    else:
        assert stopped is not None
        why = (f"its requests arrived at {stopped['arrived_rps']:.0f} req/s" if not stopped["delivered"]
               else f"its p99 was {stopped['p99_ms']:.0f} ms, errors {stopped['error_rate']:.1%}")
        text = f"{ceiling} req/s (at {stopped['rate_rps']} req/s {why})"
    measured_at = samples.start[0] / 1000.0
    result: Generator = {"ceiling_rps": ceiling, "reached_max": reached_max, "steps": found["steps"],
                         "where": target.get("where"),
                         "target": cast(str, target.get("url")),     # as lab/load/ceiling.py wrote it into target.json
                         "text": text, "basis": CEILING_BASIS, "measured_at": measured_at}
    try:        # copied from an earlier run (lab/generator.py): which, why, and when its first request was sent
        copied = json.loads((folder.root / "copied.json").read_text())
        source, why = str(copied["from"]), str(copied["why"])
    except (OSError, ValueError, KeyError, TypeError):
        return result
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(measured_at))
    return {**result, "copied_from": source,
            "copied": f"measured in run {source} (its first request {when}) and copied here: {why}"}


def ceiling_measured(folder: JMeterFolder) -> bool:
    """Whether folder holds a measurement of the generator's ceiling that another run of the same series may reuse: its
    load ran and gave results (a ceiling under the first step is a measurement too)."""
    found = generator_ceiling(folder)
    return found is not None and bool(found["steps"])


def compare(machines: Mapping[str, MachineCapacity | None]) -> CapacityComparison:
    """Both machines' capacities (each machine's as found, None where not a capacity run) and the tuned/default
    ratio, when both were measured."""
    default, tuned = machines.get("default"), machines.get("tuned")
    a, b = (m.get("capacity_rps") if m else None for m in (default, tuned))
    measured = all(m and m.get("found") for m in (default, tuned))
    return {"default_rps": a, "tuned_rps": b,
            "ratio": round(b / a, 4) if measured and a and b is not None else None,
            "note": None if measured else "no ratio: a machine's capacity was not found (see its note)"}
