"""A run folder → run_dir/report/index.html: one self-contained page comparing the two machines.

    render(run_dir) -> Path                       # summary.json/series.json are made first if missing
    screenshot(html, png) -> Screenshot           # headless Chromium: a PNG and the page's console errors
    python3 -m lab.report runs/<run-id> [--screenshot]

The page works offline: no script, no web font, no request to any host. The charts are PNG images
made with matplotlib and embedded as data: URIs; links to the run's own files are relative
(../jmeter/default/dashboard/index.html …), so the run folder can be moved or zipped whole.

The run folder (written by `./start.sh run`; any part may be missing, the report says which):

    run.json  status.json  knobs.json
    jmeter/<machine>/results.csv, jmeter/<machine>/dashboard/index.html
    machines/<machine>/pcp/<machine>.{0,index,meta}   machines/<machine>/gc/gc.log*
    machines/<machine>/logs/…  machines/<machine>/crash/…  machines/<machine>/events.json
"""
from __future__ import annotations

import base64
import html as _html
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    from . import summary as summary_mod
except ImportError:                     # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from lab import summary as summary_mod   # type: ignore

COLORS = {"default": "#d95f02", "tuned": "#1b7fbf"}
EXTRA_COLORS = ["#7570b3", "#66a61e", "#e7298a", "#a6761d"]
NO_DATA = "no data"
SMOOTH_FROM_S = 120                     # throughput gets a 10-s moving average from this run length on


def escape(text) -> str:
    return _html.escape("" if text is None else str(text), quote=True)


# ------------------------------------------------------------------------------------------- format

def _num(value, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) >= 100):
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _bytes(value) -> str:
    if value is None:
        return "—"
    return f"{value / 1048576:,.1f} MiB"


def _figure(row: dict, value) -> str:
    unit = row["unit"]
    if value is None:
        return "—"
    if unit == "%" and row["key"].startswith("error_rate"):
        return f"{value * 100:.2f} %"
    if unit == "%":
        return f"{value:.2f} %"
    if unit == "bytes":
        return _bytes(value)
    if unit == "ms":
        if isinstance(value, int) or value >= 10:
            return f"{value:,.0f} ms"
        return f"{value:,.2f} ms"
    if unit == "s":
        return f"{value:,.3f} s"
    if unit == "cores":
        return f"{value:.2f} cores"
    if unit == "req/s":
        return f"{value:,.1f} req/s"
    return _num(value)


def _ratio_cell(row: dict) -> str:
    ratio = row["ratio"]
    if ratio is None:
        why = "n/a" if row["default"] is not None and row["tuned"] is not None else "—"
        return f'<td class="ratio">{why}</td>'
    css = ""
    if round(ratio, 2) != 1:
        good = (ratio > 1) == (row["better"] == "higher")
        css = " good" if good else " bad"
    return f'<td class="ratio{css}">{ratio:.2f}×</td>'


def _when(epoch) -> str:
    if epoch is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def _value(value) -> str:
    """A configuration value as JSON writes it (true, null, [..]), strings bare."""
    if isinstance(value, (dict, list, bool, int, float)):
        return escape(json.dumps(value, sort_keys=True))
    if value is None:
        return '<span class="muted">null</span>'
    if value == "":
        return '<span class="muted">""</span>'
    return escape(value)


# ------------------------------------------------------------------------------------------- charts

class Charts:
    """matplotlib (Agg) figures → base64 PNG."""

    def __init__(self) -> None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
        self.plt = plt
        self.clock = FuncFormatter(lambda x, _pos: summary_mod.clock(x))
        plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.grid": True, "grid.alpha": 0.3,
                             "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100,
                             "svg.fonttype": "none"})

    def figure(self, panels: int = 1):
        fig, axes = self.plt.subplots(1, panels, figsize=(13, 3.6), sharey=panels > 1, squeeze=False)
        return fig, list(axes[0])

    def finish(self, fig, axes, marks: list[tuple[float, str]] = (), ylabel: str = "", clock_x: bool = True,
               xlim: tuple[float, float] | None = None, integer_y: bool = False) -> str:
        from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, MultipleLocator, NullFormatter
        for ax in axes:
            if xlim:
                ax.set_xlim(*xlim)
            if clock_x:
                low, high = ax.get_xlim()
                step = next((s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)
                             if (high - low) / s <= 12), 14400)
                ax.xaxis.set_major_locator(MultipleLocator(step))
                ax.xaxis.set_major_formatter(self.clock)
            if integer_y:
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.set_ylim(0, max(1, ax.get_ylim()[1]))
            if ax.get_yscale() == "log":            # 0.1, 1, 10, 100 rather than 10^-1 … and no minor labels
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
                ax.yaxis.set_minor_formatter(NullFormatter())
            for x, label in marks:
                ax.axvline(x, color="#888", linestyle=":", linewidth=1)
                ax.annotate(label, (x, 0), xycoords=("data", "axes fraction"), fontsize=7, color="#666",
                            xytext=(3, 3), textcoords="offset points")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="best", fontsize=8, framealpha=0.8, edgecolor="none")
        if ylabel:
            axes[0].set_ylabel(ylabel)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        self.plt.close(fig)
        return base64.b64encode(buffer.getvalue()).decode()


def _moving_average(values: list, width: int) -> list[float]:
    """Centred moving average (the window shrinks at both ends)."""
    numbers = [v if v is not None else 0 for v in values]
    half = width // 2
    out = []
    for i in range(len(numbers)):
        window = numbers[max(0, i - half): i + half + 1]
        out.append(sum(window) / len(window))
    return out


def _xy(times: list, values: list) -> tuple[list, list]:
    pairs = [(t, v) for t, v in zip(times, values) if t is not None and isinstance(v, (int, float))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@dataclass
class Chart:
    id: str
    title: str
    about: str
    png: str | None = None
    missing: list[str] = field(default_factory=list)      # machines without data for it
    note: str | None = None


def _charts(summary: dict, series: dict) -> list[Chart]:
    machines = [m for m in summary["machines"]]
    data = series.get("machines", {})
    charts_module = Charts()
    marks = []
    for machine in machines:
        load = (summary["machines"][machine] or {}).get("load")
        if load and load["window"]["duration_s"] > 0:
            marks.append((load["window"]["start_s"], "end of ramp-up" if not marks else ""))
            break
    # One time axis for every chart: the run (0 = its start) and every machine's load.
    ends = [summary["run"].get("duration_s")] + [(e.get("load") or {}).get("load_end_s") for e in summary["machines"].values()]
    starts = [0.0] + [(e.get("load") or {}).get("load_start_s") for e in summary["machines"].values()]
    ends = [x for x in ends if isinstance(x, (int, float))]
    starts = [x for x in starts if isinstance(x, (int, float))]
    xlim = None
    if ends and max(ends) > min(starts):
        pad = (max(ends) - min(starts)) * 0.01
        xlim = (min(starts) - pad, max(ends) + pad)
    local = summary["run"].get("backend") == "local"
    charts: list[Chart] = []

    def series_of(machine: str, *keys):
        node = data.get(machine) or {}
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                return None
        return node

    def combined(chart: Chart, get, ylabel: str, kind: str = "line", logy: bool = False,
                 integer_y: bool = False) -> None:
        fig, axes = charts_module.figure()
        ax = axes[0]
        drawn = 0
        for machine in machines:
            got = get(machine)
            if not got or not got[0]:
                chart.missing.append(machine)
                continue
            xs, ys, label = got if len(got) == 3 else (*got, machine)
            color = COLORS.get(machine, EXTRA_COLORS[drawn % len(EXTRA_COLORS)])
            width = 2.4 if drawn == 0 else 1.2      # the first drawn wider: identical lines stay visible
            if kind == "scatter":
                ax.scatter(xs, ys, s=10, color=color, label=label, alpha=0.7)
            elif kind == "step":
                ax.step(xs, ys, where="post", color=color, label=label, linewidth=width)
            else:
                ax.plot(xs, ys, color=color, label=label, linewidth=width)
            drawn += 1
        if drawn:
            if logy:
                ax.set_yscale("log")
            ax.set_title(chart.title)
            ax.set_xlabel("time since the run's start")
            chart.png = charts_module.finish(fig, axes, marks, ylabel, xlim=xlim, integer_y=integer_y)
        else:
            charts_module.plt.close(fig)

    def side_by_side(chart: Chart, get, ylabel: str, logy: bool = False, integer_y: bool = False,
                     markers: bool = False) -> None:
        """One panel per machine; get(machine) -> [(xs, ys, label), …]."""
        present = {m: get(m) for m in machines}
        present = {m: lines for m, lines in present.items() if lines and any(l[0] for l in lines)}
        chart.missing += [m for m in machines if m not in present]
        if not present:
            return
        fig, axes = charts_module.figure(len(machines) if len(machines) > 1 else 1)
        for ax, machine in zip(axes, machines):
            ax.set_title(f"{machine}: {chart.title}")
            ax.set_xlabel("time since the run's start")
            if machine not in present:
                ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes, color="#999", fontsize=14)
                continue
            for index, (xs, ys, label) in enumerate(present[machine]):
                ax.plot(xs, ys, label=label, linewidth=1.3, marker="o" if markers else None, markersize=3,
                        color=EXTRA_COLORS[index % len(EXTRA_COLORS)] if len(present[machine]) > 1
                        else COLORS.get(machine, EXTRA_COLORS[0]))
            if logy:
                ax.set_yscale("log")
        chart.png = charts_module.finish(fig, axes, marks, ylabel, xlim=xlim, integer_y=integer_y)

    # --- JMeter
    chart = Chart("chart-throughput", "Throughput", "Requests completed per second, from each machine's JMeter "
                  f"results (runs of {SMOOTH_FROM_S} s and more: thin, with a centred 10-s average, thick).")

    fig, axes = charts_module.figure()
    ax = axes[0]
    for machine in machines:
        load = series_of(machine, "load")
        if not load:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        if len(load["seconds"]) >= SMOOTH_FROM_S:
            ax.plot(load["seconds"], load["throughput_rps"], color=color, alpha=0.25, linewidth=0.6)
            ax.plot(load["seconds"], _moving_average(load["throughput_rps"], 10), color=color, linewidth=1.6,
                    label=f"{machine} (10-s average)")
        else:
            ax.plot(load["seconds"], load["throughput_rps"], color=color, linewidth=1.4, label=machine)
    if len(chart.missing) < len(machines):
        ax.set_title(chart.title)
        ax.set_xlabel("time since the run's start")
        ax.set_ylim(bottom=0)
        chart.png = charts_module.finish(fig, axes, marks, "requests/s", xlim=xlim)
    else:
        charts_module.plt.close(fig)
    charts.append(chart)

    chart = Chart("chart-latency", "Latency percentiles", "p50, p95 and p99 of the response time per 10-s bucket "
                  "(by sample end), failed samples included.")

    def latency(machine):
        load = series_of(machine, "load")
        if not load:
            return None
        middle = [b + load.get("bucket_s", 10) / 2 for b in load["buckets"]]
        return [_xy(middle, load[f"p{p}_ms"]) + (f"p{p}",) for p in (50, 95, 99)]
    highest = [v for m in machines for v in (series_of(m, "load", "p99_ms") or []) if v]
    lowest = [v for m in machines for v in (series_of(m, "load", "p50_ms") or []) if v]
    side_by_side(chart, latency, "ms", logy=bool(highest and lowest and max(highest) / max(1, min(lowest)) > 50),
                 markers=max((len(series_of(m, "load", "buckets") or []) for m in machines), default=0) < 30)
    charts.append(chart)

    chart = Chart("chart-errors", "Errors", "Failed requests per second (by sample end).")
    combined(chart, lambda m: (series_of(m, "load", "seconds"), series_of(m, "load", "errors_per_s"))
             if series_of(m, "load") else None, "errors/s", kind="step", integer_y=True)
    charts.append(chart)

    chart = Chart("chart-users", "Active users", "JMeter threads running in each machine's thread group.")
    combined(chart, lambda m: _xy(series_of(m, "load", "seconds"), series_of(m, "load", "active_users"))
             if series_of(m, "load") else None, "users", kind="step", integer_y=True)
    charts.append(chart)

    # --- PCP
    if local:
        about = ("CPU used by the machine's own processes (proc.psinfo.utime + stime of the processes whose command "
                 "line has machines/<name>/), in cores, from its PCP archive.")
    else:
        about = "CPU used by the machine (kernel.all.cpu.user + sys), in cores, from its PCP archive."
    chart = Chart("chart-cpu", "CPU", about)

    def cpu(machine):
        if series_of(machine, "pcp", "proc_cpu_cores"):
            return _xy(series_of(machine, "pcp", "proc_t"), series_of(machine, "pcp", "proc_cpu_cores"))
        if not local and series_of(machine, "pcp", "host_cpu_cores"):
            return _xy(series_of(machine, "pcp", "t"), series_of(machine, "pcp", "host_cpu_cores"))
        return None
    combined(chart, cpu, "cores")
    charts.append(chart)

    chart = Chart("chart-load", "Load average", "kernel.all.load, 1 minute, from each machine's PCP archive."
                  + (" On the local backend both archives record the same host: this is the host's load, shared "
                     "by both machines and the load generator." if local else ""))
    combined(chart, lambda m: _xy(series_of(m, "pcp", "t"), series_of(m, "pcp", "load1"))
             if series_of(m, "pcp", "load1") else None, "load (1 min)")
    charts.append(chart)

    if any(series_of(m, "pcp", "proc_pss_bytes") for m in machines):
        about = ("Memory of the machine's own processes: the sum of their proportional set sizes "
                 "(proc.smaps.pss), which splits a page shared by several processes among them, so it is "
                 "counted once. From each machine's PCP archive.")
    elif local:
        about = ("Resident memory of the machine's own processes (sum of proc.memory.rss), from its PCP archive. "
                 "Pages shared between processes count once per process, so the sum overstates the machine's "
                 "use.")
    else:
        about = "Memory in use on the machine (mem.util.used), from its PCP archive."
    chart = Chart("chart-memory", "Memory", about)

    def memory(machine):
        if series_of(machine, "pcp", "proc_pss_bytes"):
            xs, ys = _xy(series_of(machine, "pcp", "proc_t"), series_of(machine, "pcp", "proc_pss_bytes"))
        elif series_of(machine, "pcp", "proc_rss_bytes"):
            xs, ys = _xy(series_of(machine, "pcp", "proc_t"), series_of(machine, "pcp", "proc_rss_bytes"))
        elif not local and series_of(machine, "pcp", "mem_used_bytes"):
            xs, ys = _xy(series_of(machine, "pcp", "t"), series_of(machine, "pcp", "mem_used_bytes"))
        else:
            return None
        return xs, [y / 1048576 for y in ys]
    combined(chart, memory, "MiB")
    charts.append(chart)

    chart = Chart("chart-tomcat", "Tomcat busy threads", "openmetrics.app.tomcat_threads_busy_threads per connector "
                  "(the service's Prometheus metrics, recorded by PCP's openmetrics agent).")

    def tomcat(machine):
        node = series_of(machine, "pcp", "tomcat_busy")
        times = series_of(machine, "pcp", "app_t")
        if not node or not times:
            return None
        return [_xy(times, values) + (label.replace("name:", ""),) for label, values in sorted(node.items())]
    side_by_side(chart, tomcat, "threads", integer_y=True)
    charts.append(chart)

    chart = Chart("chart-pool", "HTTP client pool", "The service's connection pool to the backend: connections "
                  "leased and available (httpcomponents_httpclient_pool_total_connections) and requests waiting "
                  "for one (…_total_pending).")

    def pool(machine):
        times = series_of(machine, "pcp", "app_t")
        if not times:
            return None
        lines = []
        for label, values in sorted((series_of(machine, "pcp", "pool_connections") or {}).items()):
            state = re.search(r"state:(\w+)", label)
            lines.append(_xy(times, values) + (state.group(1) if state else label,))
        for label, values in sorted((series_of(machine, "pcp", "pool_pending") or {}).items()):
            lines.append(_xy(times, values) + ("pending",))
        return lines or None
    side_by_side(chart, pool, "connections", integer_y=True)
    charts.append(chart)

    chart = Chart("chart-apache", "HTTPD busy workers", "apache.busy_servers (mod_status, via PCP's apache agent).")
    combined(chart, lambda m: _xy(series_of(m, "pcp", "app_t"), next(iter(series_of(m, "pcp", "apache_busy").values())))
             if series_of(m, "pcp", "apache_busy") and series_of(m, "pcp", "app_t") else None, "workers")
    charts.append(chart)

    # --- GC
    uptime_axis = any(p.get("t") is None for m in machines for p in (series_of(m, "gc") or []))
    chart = Chart("chart-gc", "GC pauses", "Each stop-the-world pause from the machine's GC log (GCViewer), its "
                  "duration against the time it started; full collections as crosses.")

    def gc_x(p):
        return p["t"] if p.get("t") is not None else p.get("uptime_s")
    fig, axes = charts_module.figure()
    ax = axes[0]
    drawn = 0
    def shown(pauses: list[dict]) -> list[dict]:
        if uptime_axis or not xlim:
            return pauses
        return [p for p in pauses if gc_x(p) is not None and xlim[0] <= gc_x(p) <= xlim[1]]
    for machine in machines:
        pauses = shown(series_of(machine, "gc") or [])
        if not pauses:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        young = [p for p in pauses if "Full" not in p["kind"]]
        full = [p for p in pauses if "Full" in p["kind"]]
        ax.scatter([gc_x(p) for p in young], [p["pause_ms"] for p in young], s=9, color=color, alpha=0.6,
                   label=machine)
        if full:
            ax.scatter([gc_x(p) for p in full], [p["pause_ms"] for p in full], s=40, marker="x", color=color,
                       label=f"{machine}: full GC")
        drawn += 1
    if drawn:
        ax.set_title(chart.title)
        ax.set_yscale("log")
        ax.set_xlabel("JVM uptime (the log has no wall-clock time)" if uptime_axis else "time since the run's start")
        chart.png = charts_module.finish(fig, axes, [] if uptime_axis else marks, "pause (ms)",
                                         xlim=None if uptime_axis else xlim)
        if xlim and not uptime_axis:
            outside = sum(1 for m in machines for p in (series_of(m, "gc") or [])
                          if gc_x(p) is not None and not xlim[0] <= gc_x(p) <= xlim[1])
            if outside:
                chart.note = (f"{outside} pauses outside the run (the JVM started before it, e.g. at start-up) "
                              "are not drawn; the GC logs have them.")
    else:
        charts_module.plt.close(fig)
    charts.append(chart)

    chart = Chart("chart-heap", "Heap after GC", "Heap in use after each pause, and the heap's size, from the GC log.")
    fig, axes = charts_module.figure()
    ax = axes[0]
    drawn = 0
    for machine in machines:
        pauses = [p for p in shown(series_of(machine, "gc") or []) if p.get("heap_after_bytes") is not None]
        if not pauses:
            chart.missing.append(machine)
            continue
        color = COLORS.get(machine, EXTRA_COLORS[0])
        ax.plot([gc_x(p) for p in pauses], [p["heap_after_bytes"] / 1048576 for p in pauses], color=color,
                marker=".", markersize=3, linewidth=1, label=f"{machine}: after GC")
        sized = [p for p in pauses if p.get("heap_total_bytes")]
        ax.plot([gc_x(p) for p in sized], [p["heap_total_bytes"] / 1048576 for p in sized], color=color,
                linestyle="--", linewidth=0.9, label=f"{machine}: heap size")
        drawn += 1
    if drawn:
        ax.set_title(chart.title)
        ax.set_xlabel("JVM uptime (the log has no wall-clock time)" if uptime_axis else "time since the run's start")
        chart.png = charts_module.finish(fig, axes, [] if uptime_axis else marks, "MiB",
                                         xlim=None if uptime_axis else xlim)
    else:
        charts_module.plt.close(fig)
    charts.append(chart)
    return charts


# ---------------------------------------------------------------------------------------------- HTML

CSS = """
:root { --default: #d95f02; --tuned: #1b7fbf; --muted: #666; --line: #ddd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #222;
       margin: 0 auto; max-width: 1360px; padding: 16px 24px 48px; background: #fff; }
h1 { font-size: 24px; margin: 4px 0 2px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #eee; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.subtitle { color: var(--muted); margin: 0 0 12px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 3px 16px; margin: 8px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
.banner { border-left: 4px solid #e6a700; background: #fff8e1; padding: 8px 12px; margin: 10px 0; }
.banner.bad { border-color: #c62828; background: #fdecea; }
.banner.ok { border-color: #2e7d32; background: #edf7ee; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.ratio { text-align: right; font-weight: 600; white-space: nowrap; }
td.good { color: #2e7d32; } td.bad { color: #c62828; }
td.code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; max-width: 560px;
          overflow-wrap: anywhere; }
.m-default { color: var(--default); font-weight: 600; } .m-tuned { color: var(--tuned); font-weight: 600; }
.muted { color: var(--muted); }
.nodata { color: #8a6d00; background: #fff8e1; padding: 6px 10px; display: inline-block; margin: 4px 0; }
ul.happened li { margin: 3px 0; }
figure { margin: 14px 0 22px; } figure img { width: 100%; max-width: 1300px; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 13px; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
pre { background: #f6f8fa; padding: 8px 12px; overflow-x: auto; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 24px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
"""


def _machine(name: str) -> str:
    return f'<span class="m-{escape(name)}">{escape(name)}</span>'


def _header(summary: dict) -> str:
    run = summary["run"]
    profile = run.get("profile") or {}
    host = run.get("host") or {}
    interrupted = run.get("interrupted")
    parts = [f'<header id="header"><h1>camel-tuning-lab run <code>{escape(run.get("run_id"))}</code></h1>',
             '<p class="subtitle">default vs tuned: the same service, loaded side by side (or one after the '
             'other); only the knobs below differ.</p>']
    backend = run.get("backend")
    note = run.get("backend_note")
    if backend == "local":
        parts.append(
            '<div class="banner"><strong>Local backend: not two separate computers.</strong> Both machines are '
            'network namespaces with cgroup limits on one host: they share its kernel, page cache and '
            f'{escape(host.get("cpus") or "?")} cores, with the load generator too. Host-wide figures (load '
            'average, kernel CPU, mem.util) are the host\'s; per-machine CPU and memory are summed over each '
            'machine\'s own processes.'
            + (f'<br><span class="muted">{escape(note)}</span>' if note else "") + "</div>")
    elif note:
        parts.append(f'<div class="banner ok">{escape(note)}</div>')
    if interrupted:
        parts.append('<div class="banner bad"><strong>This run was interrupted</strong>: the figures cover what '
                     'was measured until then.</div>')
    facts = [
        ("backend", escape(backend or "—")),
        ("schedule", escape(run.get("schedule") or "—")),
        ("users per machine", _num(profile.get("users"))),
        ("ramp-up", f'{_num(profile.get("ramp_s"))} s' if profile.get("ramp_s") is not None else "—"),
        ("duration", f'{summary_mod.clock(profile.get("duration_s"))} per machine'
         if profile.get("duration_s") is not None else "—"),
        ("think time", f'{_num(profile.get("think_ms"))} ms' if profile.get("think_ms") is not None else "—"),
        ("timeouts", f'connect {_num(profile.get("connect_timeout_ms"))} ms, response '
                     f'{_num(profile.get("response_timeout_ms"))} ms' if profile else "—"),
        ("keep-alive", _num(profile.get("keep_alive")) if profile.get("keep_alive") is not None else "—"),
        ("started", _when(run.get("started_at"))),
        ("ended", _when(run.get("ended_at")) + (f' ({summary_mod.clock(run["duration_s"])})'
                                                 if run.get("duration_s") is not None else "")),
        ("interrupted", "<strong>interrupted</strong>" if interrupted else
         ("not interrupted" if interrupted is not None else "—")),
        ("host", escape(", ".join(x for x in (
            f'{host["cpus"]} CPUs' if host.get("cpus") else "",
            _bytes(host.get("memory_bytes")) if host.get("memory_bytes") else "",
            f'kernel {host["kernel"]}' if host.get("kernel") else "", host.get("os") or "") if x) or "—")),
    ]
    versions = run.get("versions") or {}
    if isinstance(versions, dict) and versions:
        facts.append(("versions", escape(", ".join(f"{k} {v}" for k, v in versions.items()))))
    parts.append('<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    problems = summary.get("problems") or []
    if problems:
        parts.append('<div class="banner"><strong>Missing or unreadable data</strong> (the sections concerned say '
                     '"no data"):<ul>' + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul></div>")
    parts.append("</header>")
    return "\n".join(parts)


def _what_happened(summary: dict) -> str:
    sentences = summary.get("what_happened") or []
    body = ("<ul class=\"happened\">" + "".join(f"<li>{escape(s)}</li>" for s in sentences) + "</ul>") if sentences \
        else f'<p class="nodata">{NO_DATA}: nothing was measured.</p>'
    return f'<section id="what-happened"><h2>What happened</h2>{body}</section>'


def _comparison(summary: dict) -> str:
    rows = summary.get("comparison") or []
    machines = summary["machines"]
    head = ('<section id="comparison"><h2>default vs tuned</h2>')
    if not any(r["default"] is not None or r["tuned"] is not None for r in rows):
        return head + f'<p class="nodata">{NO_DATA}: neither machine has figures.</p></section>'
    table = ['<table><tr><th>figure</th><th class="num">' + _machine("default") + '</th><th class="num">'
             + _machine("tuned") + '</th><th class="num">tuned / default</th><th>better</th></tr>']
    for row in rows:
        if row.get("source"):
            row = dict(row, label=f'{row["label"]} ({row["source"]})')
        table.append(f'<tr><td>{escape(row["label"])}</td><td class="num">{_figure(row, row["default"])}</td>'
                     f'<td class="num">{_figure(row, row["tuned"])}</td>{_ratio_cell(row)}'
                     f'<td class="muted">{escape(row["better"])}</td></tr>')
    table.append("</table>")
    notes = []
    for machine in ("default", "tuned"):
        entry = machines.get(machine) or {}
        load = entry.get("load")
        if load:
            w = load["window"]
            notes.append(f'{_machine(machine)}: steady state {summary_mod.clock(w["start_s"])}–'
                         f'{summary_mod.clock(w["end_s"])} ({w["duration_s"]:.0f} s, {load["samples"]:,} of '
                         f'{load["all"]["samples"]:,} requests)')
        else:
            notes.append(f'{_machine(machine)}: {NO_DATA} (no JMeter results)')
        gc = entry.get("gc")
        if gc:
            notes.append(f'{_machine(machine)} GC: {escape(gc.get("collector") or "?")}, {escape(gc.get("scope"))}, '
                         f'parsed by {escape(gc.get("parser"))}')
        memory = entry.get("memory") or {}
        if memory.get("source"):
            notes.append(f'{_machine(machine)} peak memory: {escape(memory["source"])}')
    definitions = summary.get("definitions") or {}
    notes.append("percentiles: " + escape(definitions.get("percentile", "")) + "; ratio: tuned ÷ default, green "
                 "where tuned is better")
    return head + "".join(table) + '<p class="muted">' + "<br>".join(notes) + "</p></section>"


def _knobs(summary: dict) -> str:
    knobs = summary.get("knobs") or {}
    out = ['<section id="knobs"><h2>Knobs that differ</h2>']
    if not knobs.get("available"):
        out.append(f'<p class="nodata">{NO_DATA}: knobs.json missing.</p>')
    elif not knobs["differ"]:
        out.append(f'<p>None: the {knobs.get("same", 0)} variables are the same on both machines.</p>')
    else:
        out.append('<table><tr><th>variable (Ansible host_vars)</th><th>' + _machine("default") + "</th><th>"
                   + _machine("tuned") + "</th></tr>")
        for row in knobs["differ"]:
            out.append(f'<tr><td><code>{escape(row["variable"])}</code></td><td class="code">{_value(row["default"])}'
                       f'</td><td class="code">{_value(row["tuned"])}</td></tr>')
        same = knobs.get("same", 0)
        out.append("</table>" + (f'<p class="muted">{same} other variable{"s are" if same != 1 else " is"} the same on '
                                 "both.</p>" if same else '<p class="muted">knobs.json has no variable that is the same '
                                 "on both.</p>"))
    out.append("</section>")
    observed = summary.get("observed") or {}
    out.append('<section id="observed"><h2>Observed configuration</h2>'
               '<p class="muted">What each machine really ran, seen from its live processes before the load '
               '(status.json).</p>')
    if not observed:
        out.append(f'<p class="nodata">{NO_DATA}: status.json missing or without observations.</p>')
    else:
        out.append('<table><tr><th>observed</th><th>' + _machine("default") + "</th><th>" + _machine("tuned")
                   + "</th></tr>")
        for key, values in observed.items():
            cells = []
            for machine in ("default", "tuned"):
                value = values.get(machine)
                cells.append(f'<td class="code">{_bytes(value) if key.endswith("_bytes") and value else _value(value)}'
                             "</td>")
            out.append(f"<tr><td><code>{escape(key)}</code></td>{''.join(cells)}</tr>")
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out)


def _charts_html(charts: list[Chart]) -> str:
    out = ['<section id="charts"><h2>Over time</h2>']
    for chart in charts:
        out.append(f'<figure id="{chart.id}"><h3>{escape(chart.title)}</h3>')
        if chart.png:
            out.append(f'<img alt="{escape(chart.title)}" src="data:image/png;base64,{chart.png}">')
            if chart.missing:
                out.append(f'<p class="nodata">{NO_DATA} for {escape(", ".join(chart.missing))}.</p>')
        else:
            out.append(f'<p class="nodata">{NO_DATA}'
                       + (f' for {escape(", ".join(chart.missing))}' if chart.missing else "") + ".</p>")
        caption = chart.about + (f" {chart.note}" if chart.note else "")
        out.append(f"<figcaption>{escape(caption)}</figcaption></figure>")
    out.append("</section>")
    return "\n".join(out)


def _link(run_dir: Path, relative: str, label: str | None = None) -> str:
    return f'<a href="../{escape(relative)}">{escape(label or relative)}</a>'


def _links(summary: dict, run_dir: Path) -> str:
    out = ['<section id="links"><h2>Files and tools</h2><div class="cols"><div>']
    out.append("<h3>JMeter dashboards</h3><ul>")
    for machine, entry in summary["machines"].items():
        dashboard = (entry.get("files") or {}).get("dashboard")
        out.append(f"<li>{_machine(machine)}: " + (_link(run_dir, dashboard) if dashboard else
                                                   f'<span class="nodata">{NO_DATA}</span>') + "</li>")
    out.append("</ul><h3>The run</h3><ul>")
    for name in ("run.json", "status.json", "knobs.json", "summary.json", "series.json", "jmeter/jmeter.log"):
        if (run_dir / name).is_file():
            out.append(f"<li>{_link(run_dir, name)}</li>")
    out.append("</ul>")
    for machine, entry in summary["machines"].items():
        files = entry.get("files") or {}
        items = []
        if files.get("results"):
            items.append(("JMeter results", [files["results"]]))
        for key, label in (("gc_logs", "GC logs"), ("logs", "logs"), ("crash", "crash files")):
            if files.get(key):
                items.append((label, files[key]))
        if files.get("events"):
            items.append(("events", [files["events"]]))
        archive_files = sorted(str(p.relative_to(run_dir)) for p in (run_dir / "machines" / machine / "pcp").glob("*")
                               if p.is_file()) if (run_dir / "machines" / machine / "pcp").is_dir() else []
        if archive_files:
            items.append(("PCP archive", archive_files))
        out.append(f"<h3>{_machine(machine)}</h3>")
        if not items:
            out.append(f'<p class="nodata">{NO_DATA}: no files for this machine.</p>')
            continue
        out.append("<ul>" + "".join(f"<li>{escape(label)}: " + ", ".join(_link(run_dir, f, Path(f).name) for f in paths)
                                    + "</li>" for label, paths in items) + "</ul>")
    out.append("</div><div><h3>Open the PCP archives</h3>")
    archives = {m: (e.get("files") or {}).get("archive") or [] for m, e in summary["machines"].items()}
    if not any(archives.values()):
        out.append(f'<p class="nodata">{NO_DATA}: no PCP archive.</p>')
    else:
        lines = ["# from the run folder: cd " + str(run_dir)]
        for machine, bases in archives.items():
            for base in bases:
                lines += [f"pmchart -a {base}                       # charts (Debian package pcp-gui)",
                          f"pmrep -a {base} -t 1s kernel.all.load",
                          f"pmrep -a {base} -t 1s -o csv mem.util.used kernel.all.cpu.user",
                          f"pminfo -a {base} openmetrics apache      # what the archive holds"]
        if archives.get("default") and archives.get("tuned"):
            lines.append(f"pmdiff {archives['default'][0]} {archives['tuned'][0]}   # which metrics differ most")
        out.append("<pre>" + escape("\n".join(lines)) + "</pre>")
        out.append('<p class="muted">PCP\'s tools read the archive by its base name (without .0/.index/.meta). '
                   'For pmrep and the other Python tools on Debian set '
                   '<code>PCP_PYTHON_PROG=/usr/bin/python3</code> if another python3 comes first on PATH.</p>')
    out.append("<h3>Figures</h3><pre>" + escape(f"python3 -m lab.summary {run_dir}\npython3 -m lab.report {run_dir}")
               + "</pre></div></div></section>")
    return "\n".join(out)


def _stale(run_dir: Path) -> bool:
    """summary.json/series.json missing, of another schema, or older than a file of the run."""
    outputs = [run_dir / "summary.json", run_dir / "series.json"]
    if not all(p.is_file() for p in outputs):
        return True
    try:
        if json.loads(outputs[0].read_text()).get("schema") != summary_mod.SCHEMA:
            return True
    except (OSError, ValueError):
        return True
    made = min(p.stat().st_mtime for p in outputs)
    for path in run_dir.rglob("*"):
        if path.is_file() and path not in outputs and "report" not in path.relative_to(run_dir).parts[:1] \
                and path.stat().st_mtime > made:
            return True
    return False


def render(run_dir: Path, refresh: bool = False) -> Path:
    """Writes run_dir/report/index.html and returns its path. summary.json and series.json are (re)made
    first when missing or older than the run's files (or with refresh)."""
    run_dir = Path(run_dir)
    if refresh or _stale(run_dir):
        summary = summary_mod.summarize(run_dir)
    else:
        summary = json.loads((run_dir / "summary.json").read_text())
    series = json.loads((run_dir / "series.json").read_text())
    charts = _charts(summary, series)
    title = f"camel-tuning-lab run {summary['run'].get('run_id')}"
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        _header(summary), _what_happened(summary), _comparison(summary), _knobs(summary), _charts_html(charts),
        _links(summary, run_dir),
        f'<footer>Generated by lab/report.py on {_when(time.time())} from the files of this run folder '
        f'(summary.json: {_when(summary.get("generated_at"))}). Every figure is computed from the raw files '
        "linked above.</footer>",
        "</body></html>"])
    out = run_dir / "report" / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_suffix(".tmp")
    scratch.write_text(page)
    scratch.replace(out)
    return out


# ---------------------------------------------------------------------------------------- Chromium

@dataclass
class Screenshot:
    png: Path
    console_errors: list[str]           # JavaScript errors, failed loads… (empty for a sound page)
    log: str                            # Chromium's stderr
    returncode: int
    truncated: bool = False             # the page is taller than the window: its bottom is cut


CONSOLE_ERROR = re.compile(r"Uncaught|ERROR:CONSOLE|:CONSOLE\(\d+\)\].*(?:Error|error)|Failed to load resource|"
                           r"net::ERR_|Refused to load|Not allowed to load")


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 16000, timeout: float = 120.0) -> Screenshot:
    """Opens html in headless Chromium (Debian package `chromium`), writes png (the page, its blank bottom
    trimmed) and returns the console errors Chromium logged. Raises RuntimeError without Chromium."""
    browser = chromium()
    if not browser:
        raise RuntimeError("Chromium not found (Debian: apt-get install chromium)")
    html, png = Path(html).resolve(), Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                   "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
                   f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
                   html.as_uri()]
        png.unlink(missing_ok=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"Chromium took over {timeout:.0f} s on {html}") from error
    log = done.stderr
    if not png.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot (exit {done.returncode}): {log.strip()[-800:]}")
    errors = [line.strip() for line in log.splitlines() if CONSOLE_ERROR.search(line)]
    truncated = _trim(png)
    return Screenshot(png, errors, log, done.returncode, truncated)


def _trim(png: Path, margin: int = 24) -> bool:
    """Cuts the blank bottom of a tall screenshot; True when the page filled the whole window."""
    try:
        from PIL import Image, ImageChops
    except ImportError:
        return False
    with Image.open(png) as image:
        rgb = image.convert("RGB")
        background = Image.new("RGB", rgb.size, rgb.getpixel((rgb.width - 1, rgb.height - 1)))
        box = ImageChops.difference(rgb, background).getbbox()
        if not box:
            return False
        bottom = min(rgb.height, box[3] + margin)
        if bottom < rgb.height:
            rgb.crop((0, 0, rgb.width, bottom)).save(png)
            return False
        return True


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python3 -m lab.report", description="Render a run's HTML report.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--screenshot", action="store_true", help="also report/report.png via headless Chromium")
    args = parser.parse_args(argv)
    page = render(args.run_dir)
    print(page)
    if args.screenshot:
        shot = screenshot(page, page.parent / "report.png")
        print(shot.png)
        for error in shot.console_errors:
            print(f"console: {error}", file=sys.stderr)
        return 1 if shot.console_errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
