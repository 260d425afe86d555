"""The charts from each machine's PCP archive: CPU, load average, memory, and the service's own metrics
(Tomcat threads, HTTP client pool, HTTPD workers). On the local backend host-wide metrics are the host's,
so CPU and memory come from the machine's own processes there."""
from __future__ import annotations

import re

from lab.analysis.text import MIB
from lab.report.plotting import XY, Chart, ChartContext, Line, combined, side_by_side, xy


def cpu(ctx: ChartContext) -> Chart:
    if ctx.local:
        about = ("CPU used by the machine's own processes (utime + stime of the processes whose command line "
                 "has machines/<name>/), in cores, from its PCP archive.")
    else:
        about = "CPU used by the machine (kernel.all.cpu.user + sys), in cores, from its PCP archive."

    def cores(machine: str) -> XY | None:
        if ctx.series_of(machine, "pcp", "proc_cpu_cores"):
            return xy(ctx.series_of(machine, "pcp", "proc_t"), ctx.series_of(machine, "pcp", "proc_cpu_cores"))
        if not ctx.local and ctx.series_of(machine, "pcp", "host_cpu_cores"):
            return xy(ctx.series_of(machine, "pcp", "t"), ctx.series_of(machine, "pcp", "host_cpu_cores"))
        return None

    return combined(ctx, Chart("chart-cpu", "CPU", about), cores, "cores")


def load_average(ctx: ChartContext) -> Chart:
    chart = Chart("chart-load", "Load average", "kernel.all.load, 1 minute, from each machine's PCP archive."
                  + (" On the local backend both archives record the same host: this is the host's load, shared "
                     "by both machines and the load generator." if ctx.local else ""))
    return combined(ctx, chart, lambda m: xy(ctx.series_of(m, "pcp", "t"), ctx.series_of(m, "pcp", "load1"))
                    if ctx.series_of(m, "pcp", "load1") else None, "load (1 min)")


def memory(ctx: ChartContext) -> Chart:
    if any(ctx.series_of(m, "pcp", "proc_pss_bytes") for m in ctx.machines):
        about = ("Memory of the machine's own processes: the sum of their proportional set sizes "
                 "(smaps.pss), which splits a page shared by several processes among them, so it is "
                 "counted once. From each machine's PCP archive.")
    elif ctx.local:
        about = ("Resident memory of the machine's own processes (sum of memory.rss), from its PCP archive. "
                 "Pages shared between processes count once per process, so the sum overstates the machine's "
                 "use.")
    else:
        about = "Memory in use on the machine (mem.util.used), from its PCP archive."

    def used(machine: str) -> XY | None:
        if ctx.series_of(machine, "pcp", "proc_pss_bytes"):
            xs, ys = xy(ctx.series_of(machine, "pcp", "proc_t"), ctx.series_of(machine, "pcp", "proc_pss_bytes"))
        elif ctx.series_of(machine, "pcp", "proc_rss_bytes"):
            xs, ys = xy(ctx.series_of(machine, "pcp", "proc_t"), ctx.series_of(machine, "pcp", "proc_rss_bytes"))
        elif not ctx.local and ctx.series_of(machine, "pcp", "mem_used_bytes"):
            xs, ys = xy(ctx.series_of(machine, "pcp", "t"), ctx.series_of(machine, "pcp", "mem_used_bytes"))
        else:
            return None
        return xs, [y / MIB for y in ys]

    return combined(ctx, Chart("chart-memory", "Memory", about), used, "MiB")


def swap(ctx: ChartContext) -> Chart:
    chart = Chart("chart-swap", "Swap and page-ins",
                  "The machine's own processes: their pages in swap (MiB, summed memory.vmswap) and the pages they "
                  "read back a second (summed psinfo.maj_flt: from swap, or files the kernel evicted). Pages "
                  "resting in swap cost nothing; page-ins are what a machine short of memory pays. From each "
                  "machine's PCP archive.")

    def lines(machine: str) -> list[Line] | None:
        times = ctx.series_of(machine, "pcp", "proc_t")
        swapped = ctx.series_of(machine, "pcp", "proc_swap_bytes")
        faults = ctx.series_of(machine, "pcp", "proc_major_faults_per_s")
        if not times or not swapped or not faults:
            return None
        xs, ys = xy(times, swapped)
        return [(xs, [y / MIB for y in ys], "MiB in swap"), (*xy(times, faults), "page-ins a second")]

    return side_by_side(ctx, chart, lines, "MiB · page-ins/s")


def tomcat(ctx: ChartContext) -> Chart:
    chart = Chart("chart-tomcat", "Tomcat busy threads", "openmetrics.app.tomcat_threads_busy_threads per connector "
                  "(the service's Prometheus metrics, recorded by PCP's openmetrics agent).")

    def busy(machine: str) -> list[Line] | None:
        connectors = ctx.series_of(machine, "pcp", "tomcat_busy")
        times = ctx.series_of(machine, "pcp", "app_t")
        if not connectors or not times:
            return None
        return [(*xy(times, values), label.replace("name:", "")) for label, values in sorted(connectors.items())]

    return side_by_side(ctx, chart, busy, "threads", integer_y=True)


def pool(ctx: ChartContext) -> Chart:
    chart = Chart("chart-pool", "HTTP client pool", "The service's connection pool to the backend: connections "
                  "leased and available (httpcomponents_httpclient_pool_total_connections) and requests waiting "
                  "for one (…_total_pending).")

    def connections(machine: str) -> list[Line] | None:
        times = ctx.series_of(machine, "pcp", "app_t")
        if not times:
            return None
        lines: list[Line] = []
        for label, values in sorted((ctx.series_of(machine, "pcp", "pool_connections") or {}).items()):
            state = re.search(r"state:(\w+)", label)
            lines.append((*xy(times, values), state.group(1) if state else label))
        for _label, values in sorted((ctx.series_of(machine, "pcp", "pool_pending") or {}).items()):
            lines.append((*xy(times, values), "pending"))
        return lines or None

    return side_by_side(ctx, chart, connections, "connections", integer_y=True)


def apache(ctx: ChartContext) -> Chart:
    chart = Chart("chart-apache", "HTTPD busy workers", "apache.busy_servers (mod_status, via PCP's apache agent).")

    def workers(machine: str) -> XY | None:
        busy = ctx.series_of(machine, "pcp", "apache_busy")
        times = ctx.series_of(machine, "pcp", "app_t")
        if not busy or not times:
            return None
        return xy(times, next(iter(busy.values())))

    return combined(ctx, chart, workers, "workers")
