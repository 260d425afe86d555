"""Pass/fail: a run's thresholds (run.json's, from a scenario file or --threshold) checked against its
summary's comparison (a single run's figures, or a repeated run's means over the trials), and the result
as JUnit XML, which CI systems read.

A threshold is [machine.]name: limit. Without a machine it holds for each. ratio_min holds for tuned/default
of the run's headline figure: the capacity in a capacity run, else the throughput. capacity_rps_min reads
each machine's capacity as found, a lower bound included (it met the SLO at every step, or the load
generator was the limit): a lower bound over the limit passes. A figure the run does not have (a machine
without results, no capacity at all) breaks its threshold: it cannot be shown to pass."""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from lab import contract
from lab.names import MACHINES
from lab.runfolder import RunFolder

# threshold -> (the summary's comparison key, "max" or "min", scale from the summary's unit to the threshold's)
THRESHOLDS = {
    "error_pct_max": ("error_rate", "max", 100.0),
    "p95_ms_max": ("p95_ms", "max", 1.0),
    "p99_ms_max": ("p99_ms", "max", 1.0),
    "throughput_rps_min": ("throughput_rps", "min", 1.0),
    "capacity_rps_min": ("capacity_rps", "min", 1.0),
    "ratio_min": (None, "min", 1.0),            # tuned/default of the run's headline figure
}
UNITS = {"error_rate": "%", "p95_ms": " ms", "p99_ms": " ms", "throughput_rps": " req/s", "capacity_rps": " req/s"}


def check(summary: dict, thresholds: dict[str, float], lost: dict | None = None) -> list[dict]:
    """One result per threshold and machine: {threshold, machine, limit, value, passed, message}. lost: the
    threshold that stopped the load (--stop-on-fail, run.json's threshold_lost): broken, whatever the figures of
    the shortened load say."""
    rows = {row["key"]: row for row in summary.get("comparison") or []}
    headline = "capacity_rps" if "capacity_rps" in rows else "throughput_rps"
    results = []
    for name, limit in thresholds.items():
        machine, _, bare = name.rpartition(".")
        key, direction, scale = THRESHOLDS[bare]
        if key is None:
            value = (rows.get(headline) or {}).get("ratio")
            results.append(_result(name, None, limit, value, direction, f"tuned/default {headline}", "x"))
            continue
        for each in [machine] if machine else MACHINES:
            raw = _capacity(summary, each) if key == "capacity_rps" else (rows.get(key) or {}).get(each)
            value = raw * scale if isinstance(raw, (int, float)) else None
            results.append(_result(name, each, limit, value, direction, f"{each} {key}", UNITS.get(key, "")))
    for result in results:
        # error_pct_max and p95_ms_max were lost on the load's running figures, which its shortened whole need not
        # repeat; a capacity is the report's own figure, judged as found.
        if isinstance(lost, dict) and (lost.get("threshold"), lost.get("machine")) == (result["threshold"],
                                                                                      result["machine"]) \
                and str(lost.get("threshold")).rpartition(".")[2] != "capacity_rps_min":
            result.update(passed=False, message=f"BROKEN: {lost.get('why')}; the load stopped there (--stop-on-fail)")
    return results


def _capacity(summary: dict, machine: str) -> float | None:
    """The machine's capacity as found, a lower bound included: a single run's, or a repeated run's (the mean of
    its measured trials; with none measured, the smallest lower bound: repeated._capacity)."""
    if summary.get("kind") == "repeated":
        return (((summary.get("capacity") or {}).get("machines") or {}).get(machine) or {}).get("capacity_rps")
    return (((summary.get("machines") or {}).get(machine) or {}).get("capacity") or {}).get("capacity_rps")


def _result(name: str, machine: str | None, limit: float, value: float | None, direction: str, what: str,
            unit: str) -> dict:
    passed = value is not None and (value <= limit if direction == "max" else value >= limit)
    sign = "<=" if direction == "max" else ">="
    shown = "no figure" if value is None else f"{value:.4g}{unit}"
    return {"threshold": name, "machine": machine, "limit": limit, "value": value, "passed": passed,
            "message": f"{'passed' if passed else 'BROKEN'}: {name} ({what} {sign} {limit:g}{unit}): {shown}"}


def unchecked(thresholds: dict[str, float], why: str) -> list[dict]:
    """Thresholds a run could not be judged on (no summary): each broken, with why."""
    return [{"threshold": name, "machine": None, "limit": limit, "value": None, "passed": False,
             "message": f"BROKEN: {name}: not checked, {why}"} for name, limit in thresholds.items()]


def junit(results: list[dict], run_id: str, path: Path) -> Path:
    """The results as a JUnit XML test suite, one test case per threshold and machine."""
    suite = ET.Element("testsuite", {"name": "camel-tuning-lab thresholds", "tests": str(len(results)),
                                     "failures": str(sum(not r["passed"] for r in results)), "errors": "0"})
    for result in results:
        case = ET.SubElement(suite, "testcase", {"classname": f"camel-tuning-lab.{run_id}",
                                                 "name": result["threshold"] + (f" [{result['machine']}]"
                                                                                if result["machine"] else "")})
        if not result["passed"]:
            ET.SubElement(case, "failure", {"message": result["message"]}).text = result["message"]
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="UTF-8", xml_declaration=True)
    return path


def exit_code(folder: RunFolder, summary: contract.Summary | contract.RepeatedSummary | None) -> int:
    """A line per threshold and a JUnit file of them; 3 when one is broken (0 when none was set)."""
    results = summary.get("thresholds") if summary else None
    if not results:
        limits = (folder.read_json(folder.run_json, [], "run") or {}).get("thresholds") or {}
        if not limits:
            return 0
        results = unchecked(limits, "the run has no summary to check them on")
    return announce(results, "Thresholds", folder.run_id, folder.thresholds_xml)


def announce(results: list[dict], title: str, suite: str, path: Path) -> int:
    """The results as a JUnit file at path and a line each on the terminal under title; 3 when one is broken."""
    written = junit(results, suite, path)
    broken = [r for r in results if not r["passed"]]
    print(f"\n{title}: {len(results) - len(broken)} of {len(results)} passed (JUnit: {written})", file=sys.stderr)
    for result in results:
        print(f"  {result['message']}", file=sys.stderr)
    return 3 if broken else 0
