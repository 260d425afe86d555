"""The charts from each machine's GC log (parsed by GCViewer): the pauses and the heap after each.
A pause has the run's time (t) when the log has wall-clock times, else only the JVM's uptime: the
charts then use the uptime axis, without the run's marks."""
from __future__ import annotations

from typing import cast

from lab.analysis.text import MIB
from lab.report.plotting import COLORS, EXTRA_COLORS, Chart, ChartContext, finish, new_figure

UPTIME_AXIS = "JVM uptime (the log has no wall-clock time)"


def _x(pause: dict) -> float | None:
    return pause["t"] if pause.get("t") is not None else pause.get("uptime_s")


def _xs(pauses: list[dict]) -> list[float]:
    """The x of each pause _shown kept: each has one (its time in the run, or on the uptime axis its uptime, which
    every pause the lab writes has)."""
    return [cast(float, _x(p)) for p in pauses]


def _uptime_axis(ctx: ChartContext) -> bool:
    return any(p.get("t") is None for m in ctx.machines for p in (ctx.series_of(m, "gc") or []))


def _shown(ctx: ChartContext, machine: str, uptime_axis: bool) -> list[dict]:
    """The machine's pauses within the time axis (all of them on the uptime axis)."""
    pauses = ctx.series_of(machine, "gc") or []
    if uptime_axis or not ctx.xlim:
        return pauses
    low, high = ctx.xlim
    return [p for p in pauses if (x := _x(p)) is not None and low <= x <= high]


def gc(ctx: ChartContext) -> Chart:
    chart = Chart("chart-gc", "GC pauses", "Each stop-the-world pause from the machine's GC log (GCViewer), its "
                  "duration against the time it started; full collections as crosses.")
    uptime_axis = _uptime_axis(ctx)
    fig, axes = new_figure()
    ax = axes[0]
    for machine in ctx.machines:
        pauses = _shown(ctx, machine, uptime_axis)
        if not pauses:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        young = [p for p in pauses if "Full" not in p["kind"]]
        full = [p for p in pauses if "Full" in p["kind"]]
        ax.scatter(_xs(young), [p["pause_ms"] for p in young], s=9, color=color, alpha=0.6, label=machine)
        if full:
            ax.scatter(_xs(full), [p["pause_ms"] for p in full], s=40, marker="x", color=color,
                       label=f"{machine}: full GC")
    if len(chart.missing) == len(ctx.machines):
        return chart
    ax.set_title(chart.title)
    ax.set_yscale("log")
    ax.set_xlabel(UPTIME_AXIS if uptime_axis else ctx.time_axis)
    chart.png = finish(fig, axes, [] if uptime_axis else ctx.marks, "pause (ms)",
                       xlim=None if uptime_axis else ctx.xlim)
    if ctx.xlim and not uptime_axis:
        low, high = ctx.xlim
        outside = sum(1 for m in ctx.machines for p in (ctx.series_of(m, "gc") or [])
                      if (x := _x(p)) is not None and not low <= x <= high)
        if outside:
            chart.note = (f"{outside} pauses outside the run (the JVM started before it, e.g. at start-up) "
                          "are not drawn; the GC logs have them.")
    return chart


def heap(ctx: ChartContext) -> Chart:
    chart = Chart("chart-heap", "Heap after GC", "Heap in use after each pause, and the heap's size, from the GC log.")
    uptime_axis = _uptime_axis(ctx)
    fig, axes = new_figure()
    ax = axes[0]
    for machine in ctx.machines:
        pauses = [p for p in _shown(ctx, machine, uptime_axis) if p.get("heap_after_bytes") is not None]
        if not pauses:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        ax.plot(_xs(pauses), [p["heap_after_bytes"] / MIB for p in pauses], color=color,
                marker=".", markersize=3, linewidth=1, label=f"{machine}: after GC")
        sized = [p for p in pauses if p.get("heap_total_bytes")]
        ax.plot(_xs(sized), [p["heap_total_bytes"] / MIB for p in sized], color=color,
                linestyle="--", linewidth=0.9, label=f"{machine}: heap size")
    if len(chart.missing) == len(ctx.machines):
        return chart
    ax.set_title(chart.title)
    ax.set_xlabel(UPTIME_AXIS if uptime_axis else ctx.time_axis)
    chart.png = finish(fig, axes, [] if uptime_axis else ctx.marks, "MiB", xlim=None if uptime_axis else ctx.xlim)
    return chart
