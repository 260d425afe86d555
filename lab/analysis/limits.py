"""The host's limits beside each machine (`run --limits`, lab/limits.py; raw files in jmeter/limits/<kind>/):
each limit's steady throughput and p95, what HTTPD costs (1 - through HTTPD / the service without it), and how
close each machine came to its backend (through HTTPD / the mock alone). All three loads had the same users on
the same host and CPUs. A limit is compared with the machine's own load only when both were one machine at a
time (the sequential schedule, or CPUs of their own), and only when JMeter did not set its pace (over 90% of its
CPUs, or requests failing on JMeter itself)."""
from __future__ import annotations

from lab.analysis import loadgen
from lab.analysis.jmeter import analyze_load, client_errors, read_results
from lab.analysis.verdict import BACKEND_NEAR, LOADGEN_BUSY_MAX
from lab.numbers import number
from lab.placement import LOADGEN, parse_cpulist
from lab.runfolder import RunFolder

BASIS = ("each load's steady window (the same rule as the run's), over JMeter's results in jmeter/limits/<kind>/: "
         "the service on its own HTTP port without HTTPD, and the mock backend alone, each at the run's users")


def _figures(load: dict) -> dict:
    latency = load.get("latency_ms") or {}
    client = client_errors(load)
    return {"throughput_rps": load.get("throughput_rps"), "p95_ms": latency.get("p95"),
            "error_rate": load.get("error_rate"), "samples": load.get("samples"),
            "settled": (load.get("window") or {}).get("settled"), "client_errors": client}


def _measured(folder: RunFolder, kind: str, machine: str, ramp_s: float, cpus: int,
              problems: list[str]) -> dict | None:
    out = folder.jmeter.limits(kind)
    path = out.results(machine)
    if not path.is_file():
        return None
    try:
        samples = read_results(path)
    except (OSError, ValueError) as error:
        problems.append(f"{machine}: limits, {kind}: results.csv unreadable ({error})")
        return None
    if not len(samples):
        return None
    load = analyze_load(samples, min(samples.start) / 1000.0, ramp_s, {})
    figures = _figures(load)
    window = load["window"]
    used = loadgen.over(loadgen.read(out.loadgen), window["start_at"], window["end_at"]) \
        if window["duration_s"] > 0 else None
    figures["loadgen_cores"] = used["loadgen_cores"] if used else None
    figures["loadgen_bound"] = bool(figures["client_errors"]) or (
        figures["loadgen_cores"] is not None and figures["loadgen_cores"] > LOADGEN_BUSY_MAX * cpus)
    return figures


def _share(part: dict | None, whole: dict | None) -> float | None:
    """part's throughput over whole's, both settled and neither paced by JMeter; None otherwise."""
    if not part or not whole or not part.get("settled") or not whole.get("settled") \
            or part.get("loadgen_bound") or whole.get("loadgen_bound"):
        return None
    a, b = number(part.get("throughput_rps")), number(whole.get("throughput_rps"))
    return a / b if a is not None and b else None


def analyze(folder: RunFolder, run: dict, machines: dict, problems: list[str]) -> dict | None:
    """{"machines": {name: {"httpd", "direct", "mock", "httpd_cost", "backend_share", "sentences"}}, ...};
    None when the run measured no limits."""
    asked = run.get("limits")
    if not isinstance(asked, dict):
        return None
    profile = asked["profile"] if isinstance(asked.get("profile"), dict) else {}
    ramp_s = number(profile.get("ramp_s")) or 0.0
    placement = run["placement"] if isinstance(run.get("placement"), dict) else {}
    cpus = len(parse_cpulist(((placement.get("cpus") or {}).get(LOADGEN)) or "")) or int(
        number((run.get("host") or {}).get("cpus")) or 1)
    # The machine's own load at one machine at a time, as the limits were: else the two do not compare
    comparable = run.get("schedule") == "sequential" or bool(placement.get("dedicated"))
    result: dict = {"profile": profile, "kinds": asked.get("kinds"), "basis": BASIS, "comparable": comparable,
                    "machines": {}}
    for name, entry in machines.items():
        through = _figures(entry["load"]) if entry.get("load") else None
        direct = _measured(folder, "direct", name, ramp_s, cpus, problems)
        mock = _measured(folder, "mock", name, ramp_s, cpus, problems)
        through_direct = _share(through, direct) if comparable else None
        through_mock = _share(through, mock) if comparable else None
        figures: dict = {"httpd": through, "direct": direct, "mock": mock,
                         "httpd_cost": None if through_direct is None else round(1.0 - through_direct, 4),
                         "backend_share": None if through_mock is None else round(through_mock, 4)}
        figures["sentences"] = _sentences(name, figures, comparable)
        result["machines"][name] = figures
    return result


def _sentences(name: str, figures: dict, comparable: bool) -> list[str]:
    httpd, direct, mock = figures["httpd"], figures["direct"], figures["mock"]
    if not comparable:
        return [f"{name}: not compared with its limits: both machines were loaded at once on shared CPUs, each limit "
                "one machine at a time."]
    said = []
    for limit, what in ((direct, "the service alone"), (mock, "the mock alone")):
        if limit and limit.get("loadgen_bound"):
            said.append(f"{name}: {what} was paced by JMeter (" + (
                f"{limit['client_errors']:,} requests failed on JMeter itself" if limit["client_errors"] else
                f"{limit['loadgen_cores']:.2f} cores of JMeter") + "): it is JMeter's limit, not the host's.")
    cost, share = figures["httpd_cost"], figures["backend_share"]
    if cost is not None:
        how = (f"HTTPD costs {cost:.0%} of what the service serves alone" if cost >= 0 else
               f"it served {-cost:.0%} more through HTTPD than alone")
        said.append(f"{name}: {httpd['throughput_rps']:.0f} req/s through HTTPD, {direct['throughput_rps']:.0f} req/s "
                    f"from the service without it: {how}.")
    elif direct is not None and not direct.get("loadgen_bound"):
        said.append(f"{name}: no HTTPD cost: the service alone or through HTTPD did not settle.")
    if share is not None:
        bound = ("the backend set the pace" if share >= BACKEND_NEAR else "the backend did not set the pace")
        said.append(f"{name}: through HTTPD it reached {share:.0%} of the {mock['throughput_rps']:.0f} req/s the mock "
                    f"served alone at the same users: {bound}.")
    elif mock is not None and not mock.get("loadgen_bound"):
        said.append(f"{name}: no backend share: the mock alone or through HTTPD did not settle.")
    return said
