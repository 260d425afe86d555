"""A capacity run's chart (summary.json's machines' capacity steps): the latency-throughput curve of both
machines on one panel, the "hockey stick" (p99 against what each step answered, the SLO as a line), and
beside it what each step answered against what it offered (the diagonal until the machine falls off)."""
from __future__ import annotations

from lab.report.plotting import COLORS, EXTRA_COLORS, Chart, finish, new_figure


def hockey_stick(summary: dict) -> Chart:
    chart = Chart("chart-capacity", "Capacity", "Each point a step of arrivals: left, its p99 against the requests "
                  "answered without error per second (log scale; the dashed line is the SLO); right, answered "
                  "against offered (the dotted diagonal: every arrival answered; the dash-dotted line, when "
                  "measured and within twice the highest step, the load generator's ceiling on this host). A star "
                  "marks each machine's capacity; the warm-up and partial steps are left out.")
    fig, (curve, served) = new_figure(2, sharey=False)
    slo = None
    drawn = 0
    highest = 0.0
    for index, (machine, entry) in enumerate((summary.get("machines") or {}).items()):
        found = (entry or {}).get("capacity") or {}
        steps = sorted((s for s in found.get("steps") or [] if not s.get("partial") and not s.get("warmup")
                        and s.get("p99_ms") is not None), key=lambda s: s["rate_rps"])    # the finer ones in place
        if not steps:
            chart.missing.append(machine)
            continue
        slo = (found.get("slo") or {}).get("p99_ms") or slo
        color = COLORS.get(machine, EXTRA_COLORS[index % len(EXTRA_COLORS)])
        answered = [s["answered_rps"] for s in steps]
        curve.plot(answered, [max(1, s["p99_ms"]) for s in steps], marker="o", markersize=4, color=color,
                   label=machine)
        served.plot([s["rate_rps"] for s in steps], answered, marker="o", markersize=4, color=color, label=machine)
        best = next((s for s in steps if s["rate_rps"] == found.get("capacity_rps")), None)
        if best is not None:
            curve.plot([best["answered_rps"]], [max(1, best["p99_ms"])], marker="*", markersize=14, color=color,
                       linestyle="none", label=f"{machine} capacity {best['rate_rps']} req/s")
        highest = max(highest, *(s["rate_rps"] for s in steps))
        drawn += 1
    if not drawn:
        return chart
    if slo:
        curve.axhline(slo, color="#b00", linestyle="--", linewidth=1, label=f"SLO p99 {slo} ms")
    curve.set_yscale("log")
    curve.set_title("p99 against answered rate")
    curve.set_xlabel("answered without error, req/s")
    served.plot([0, highest], [0, highest], color="#888", linestyle=":", linewidth=1)
    ceiling = ((summary.get("capacity") or {}).get("generator") or {}).get("ceiling_rps")
    if ceiling and ceiling <= 2 * highest:          # farther, it would squeeze the steps into a corner
        served.axvline(ceiling, color="#555", linestyle="-.", linewidth=1,
                       label=f"load generator's ceiling {ceiling} req/s")
        served.legend(loc="upper left", fontsize="small")
    served.set_title("answered against offered")
    served.set_xlabel("offered (arrivals), req/s")
    served.set_ylabel("answered, req/s")
    chart.png = finish(fig, [curve, served], ylabel="p99, ms", clock_x=False)
    return chart
