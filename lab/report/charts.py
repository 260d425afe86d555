"""The page's charts over time, one function each, in page order (CHARTS): JMeter's here, PCP's in
charts_pcp.py, the GC log's in charts_gc.py. Each takes the ChartContext and returns its Chart, with
the machines that have no data for it.

    charts(summary, series) -> list[Chart]
"""
from __future__ import annotations

from collections.abc import Callable

from lab.report.charts_gc import gc, heap
from lab.report.charts_pcp import apache, cpu, load_average, memory, pool, swap, tomcat
from lab.report.plotting import (
    COLORS,
    EXTRA_COLORS,
    Chart,
    ChartContext,
    Line,
    combined,
    finish,
    moving_average,
    new_figure,
    side_by_side,
    style,
    xy,
)

SMOOTH_FROM_S = 120                     # throughput gets a 10-s moving average from this run length on


def throughput(ctx: ChartContext) -> Chart:
    chart = Chart("chart-throughput", "Throughput", "Requests completed per second, from each machine's JMeter "
                  f"results (runs of {SMOOTH_FROM_S} s and more: thin, with a centred 10-s average, thick).")
    fig, axes = new_figure()
    ax = axes[0]
    for machine in ctx.machines:
        series = ctx.series_of(machine, "load")
        if not series:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        seconds, rps = series["seconds"], series["throughput_rps"]
        if len(seconds) >= SMOOTH_FROM_S:
            ax.plot(seconds, rps, color=color, alpha=0.25, linewidth=0.6)
            ax.plot(seconds, moving_average(rps, 10), color=color, linewidth=1.6, label=f"{machine} (10-s average)")
        else:
            ax.plot(seconds, rps, color=color, linewidth=1.4, label=machine)
    if len(chart.missing) < len(ctx.machines):
        ax.set_title(chart.title)
        ax.set_xlabel(ctx.time_axis)
        ax.set_ylim(bottom=0)
        chart.png = finish(fig, axes, ctx.marks, "requests/s", xlim=ctx.xlim)
    return chart


def latency(ctx: ChartContext) -> Chart:
    chart = Chart("chart-latency", "Latency percentiles", "p50, p95 and p99 of the response time per 10-s bucket "
                  "(by sample end), failed samples included.")

    def percentiles(machine: str) -> list[Line] | None:
        series = ctx.series_of(machine, "load")
        if not series:
            return None
        middle = [b + series.get("bucket_s", 10) / 2 for b in series["buckets"]]
        return [(*xy(middle, series.get(f"p{p}_ms")), f"p{p}") for p in (50, 95, 99)]

    highest = [v for m in ctx.machines for v in (ctx.series_of(m, "load", "p99_ms") or []) if v]
    lowest = [v for m in ctx.machines for v in (ctx.series_of(m, "load", "p50_ms") or []) if v]
    spread = bool(highest and lowest and max(highest) / max(1, min(lowest)) > 50)       # a log axis from 50×
    buckets = max((len(ctx.series_of(m, "load", "buckets") or []) for m in ctx.machines), default=0)
    return side_by_side(ctx, chart, percentiles, "ms", logy=spread, markers=buckets < 30)


def errors(ctx: ChartContext) -> Chart:
    chart = Chart("chart-errors", "Errors", "Failed requests per second (by sample end).")
    return combined(ctx, chart, lambda m: (ctx.series_of(m, "load", "seconds"), ctx.series_of(m, "load", "errors_per_s"))
                    if ctx.series_of(m, "load") else None, "errors/s", kind="step", integer_y=True)


def users(ctx: ChartContext) -> Chart:
    chart = Chart("chart-users", "Active users", "JMeter threads running in each machine's thread group.")
    return combined(ctx, chart, lambda m: xy(ctx.series_of(m, "load", "seconds"), ctx.series_of(m, "load", "active_users"))
                    if ctx.series_of(m, "load") else None, "users", kind="step", integer_y=True)


CHARTS: list[Callable[[ChartContext], Chart]] = [
    throughput, latency, errors, users,                 # JMeter
    cpu, load_average, memory, swap, tomcat, pool, apache,      # PCP
    gc, heap,                                           # GC log
]


def charts(summary: dict, series: dict) -> list[Chart]:
    """Every chart of the page, from summary.json and series.json."""
    ctx = ChartContext.of(summary, series)
    with style():
        return [make(ctx) for make in CHARTS]
