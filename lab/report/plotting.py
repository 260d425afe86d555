"""What every chart of the page is built from: the Chart it becomes, the ChartContext it reads (the run's
summary and series, one time axis for all), the matplotlib figure helper (Agg, no pyplot, no window) and
the two shapes most charts take: one panel for all machines (combined) or one panel each (side_by_side)."""
from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import matplotlib
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, MultipleLocator, NullFormatter
from matplotlib.typing import RcKeyType

from lab.names import clock

COLORS = {"default": "#d95f02", "tuned": "#1b7fbf"}
EXTRA_COLORS = ["#7570b3", "#66a61e", "#e7298a", "#a6761d"]
NO_DATA = "no data"
TIME_AXIS = "time since the run's start"
OWN_TIME_AXIS = "time since each machine's load began"      # a sequential run's charts: machines overlaid
STYLE: dict[RcKeyType, Any] = {"font.size": 9, "axes.titlesize": 10, "axes.grid": True, "grid.alpha": 0.3,
                               "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100,
                               "svg.fonttype": "none"}
CLOCK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)   # seconds between x ticks

Mark = tuple[float, str]                # a vertical line on the time axis and its label
XY = tuple[list, list]                  # x values, y values
Line = tuple[list, list, str]           # x values, y values, legend label


@dataclass
class Chart:
    id: str
    title: str
    about: str
    png: str | None = None                                 # base64 PNG, None when no machine has data
    missing: list[str] = field(default_factory=list)      # machines without data for it
    note: str | None = None

    @property
    def src(self) -> Markup:
        """The PNG as a data: URI for <img src>: base64's letters need no escaping."""
        return Markup(f"data:image/png;base64,{self.png}")

    @property
    def caption(self) -> str:
        return self.about + (f" {self.note}" if self.note else "")


@dataclass(frozen=True)
class ChartContext:
    """What the charts share: the summary, the series per machine, and one time axis for every chart: the run's,
    or, in a sequential run, each machine's own from when its load began (the machines then overlaid, each with its
    own ramp-up and steady marks, rather than the second one's load drawn after the first one's marks)."""
    summary: dict
    series: dict                        # series.json's "machines" (a sequential run's: each on its own time)
    machines: list[str]
    xlim: tuple[float, float] | None    # the run (0 = its start) and every machine's load, padded by 1 %
    marks: list[Mark]                   # the end of the ramp-up, and of the warm-up after it
    local: bool                         # the local backend: host-wide metrics are the host's
    time_axis: str = TIME_AXIS

    @classmethod
    def of(cls, summary: dict, series: dict) -> ChartContext:
        machines = list(summary["machines"])
        loads = {name: (entry or {}).get("load") or {} for name, entry in summary["machines"].items()}
        offsets = _own_starts(summary["run"].get("schedule"), loads)
        marks: list[Mark] = []
        for name, load in loads.items():
            window, shift = load.get("window") or {}, offsets.get(name, 0.0)
            if window.get("duration_s", 0) > 0:
                ramp_end = window.get("ramp_end_s", window["start_s"])
                marks.append((ramp_end - shift, "end of ramp-up"))
                if window.get("settled") and window["start_s"] - ramp_end >= 1:
                    marks.append((window["start_s"] - shift, f"{name}: steady from"))
        given_ends = ([] if offsets else [summary["run"].get("duration_s")]) + \
            [_minus(load.get("load_end_s"), offsets.get(name, 0.0)) for name, load in loads.items()]
        given_starts = [0.0] + [_minus(load.get("load_start_s"), offsets.get(name, 0.0)) for name, load in loads.items()]
        ends = [x for x in given_ends if isinstance(x, (int, float))]
        starts = [x for x in given_starts if isinstance(x, (int, float))]
        xlim = None
        if ends and max(ends) > min(starts):
            pad = (max(ends) - min(starts)) * 0.01
            xlim = (min(starts) - pad, max(ends) + pad)
        machine_series = {name: _shifted(found, offsets.get(name, 0.0))
                          for name, found in (series.get("machines") or {}).items()}
        return cls(summary, machine_series, machines, xlim, _merged(marks), summary["run"].get("backend") == "local",
                   OWN_TIME_AXIS if offsets else TIME_AXIS)

    def marks_of(self, machine: str) -> list[Mark]:
        """The marks of one machine's panel: its own (without its name) and those all machines share."""
        return [(x, label.split(": ", 1)[-1]) for x, label in self.marks
                if ": " not in label or label.startswith(f"{machine}: ")]

    def series_of(self, machine: str, *keys: str) -> Any:
        """series[machine][key][key]…, None where a level is missing."""
        node: Any = self.series.get(machine) or {}
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                return None
        return node


def _minus(value: Any, shift: float) -> float | None:
    return value - shift if isinstance(value, (int, float)) else None


def _own_starts(schedule: str | None, loads: dict[str, dict]) -> dict[str, float]:
    """A sequential run of several machines: each one's load start (its time 0 on the charts); else none."""
    starts = {name: load["load_start_s"] for name, load in loads.items()
              if isinstance(load.get("load_start_s"), (int, float))}
    return starts if schedule == "sequential" and len(starts) > 1 else {}


def _shifted(found: dict, shift: float) -> dict:
    """A machine's series with every time (load seconds and buckets, PCP's three clocks, GC pauses) shift earlier."""
    if not shift or not isinstance(found, dict):
        return found
    out = dict(found)
    for part, keys in (("load", ("seconds", "buckets")), ("pcp", ("t", "proc_t", "app_t"))):
        if isinstance(found.get(part), dict):
            out[part] = {**found[part], **{key: [_minus(t, shift) for t in found[part][key]]
                                           for key in keys if isinstance(found[part].get(key), list)}}
    if isinstance(found.get("gc"), list):
        out["gc"] = [{**pause, "t": _minus(pause.get("t"), shift)} if isinstance(pause, dict) else pause
                     for pause in found["gc"]]
    return out


def _merged(marks: list[Mark]) -> list[Mark]:
    """One mark where the machines' fall within a second of each other (its label without a machine's name)."""
    kept: list[Mark] = []
    for x, label in sorted(marks):
        general = label.split(": ", 1)[-1]
        same = next((i for i, (y, other) in enumerate(kept) if abs(x - y) < 1 and other.split(": ", 1)[-1] == general),
                    None)
        if same is None:
            kept.append((x, label))
        else:
            kept[same] = (kept[same][0], general)
    return kept


# ------------------------------------------------------------------------------------- matplotlib

@contextmanager
def style() -> Iterator[None]:
    """The charts' look, for the figures made inside (matplotlib's global settings are left alone)."""
    with matplotlib.rc_context(STYLE):
        yield


def new_figure(panels: int = 1, sharey: bool = True) -> tuple[Figure, list[Axes]]:
    """A wide figure of panels side by side, sharing their y axis unless told not to."""
    fig = Figure(figsize=(13, 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, sharey=sharey and panels > 1, squeeze=False)
    return fig, list(axes[0])


def finish(fig: Figure, axes: Sequence[Axes], marks: Sequence[Mark] = (), ylabel: str = "", clock_x: bool = True,
           xlim: tuple[float, float] | None = None, integer_y: bool = False,
           panel_marks: Sequence[Sequence[Mark]] | None = None) -> str:
    """Axes, ticks, marks (panel_marks: each panel its own) and legends; the figure as a base64 PNG."""
    for index, ax in enumerate(axes):
        if xlim:
            ax.set_xlim(*xlim)
        if clock_x:
            low, high = ax.get_xlim()
            step = next((s for s in CLOCK_STEPS if (high - low) / s <= 12), 14400)
            ax.xaxis.set_major_locator(MultipleLocator(step))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: clock(x)))
        if integer_y:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, max(1, ax.get_ylim()[1]))
        if ax.get_yscale() == "log":            # 0.1, 1, 10, 100 rather than 10^-1 … and no minor labels
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        for number, (x, label) in enumerate(panel_marks[index] if panel_marks is not None else marks):
            ax.axvline(x, color="#888", linestyle=":", linewidth=1)
            ax.annotate(label, (x, 0), xycoords=("data", "axes fraction"), fontsize=7, color="#666",
                        xytext=(3, 3 + 10 * (number % 2)), textcoords="offset points")    # neighbours' labels apart
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8, framealpha=0.8, edgecolor="none")
    if ylabel:
        axes[0].set_ylabel(ylabel)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode()


# ------------------------------------------------------------------------------------------ data

def xy(times: list | None, values: list | None) -> XY:
    """The points with both a time and a number."""
    pairs = [(t, v) for t, v in zip(times or [], values or []) if t is not None and isinstance(v, (int, float))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def moving_average(values: list, width: int) -> list[float]:
    """Centred moving average (the window shrinks at both ends)."""
    numbers = [v if v is not None else 0 for v in values]
    half = width // 2
    out = []
    for i in range(len(numbers)):
        window = numbers[max(0, i - half): i + half + 1]
        out.append(sum(window) / len(window))
    return out


# ---------------------------------------------------------------------------------------- shapes

def combined(ctx: ChartContext, chart: Chart, get: Callable[[str], XY | None], ylabel: str,
             kind: Literal["line", "step"] = "line", integer_y: bool = False) -> Chart:
    """One panel, one line per machine; get(machine) -> (xs, ys), None or empty without data."""
    fig, axes = new_figure()
    ax = axes[0]
    drawn = 0
    for machine in ctx.machines:
        got = get(machine)
        if not got or not got[0]:
            chart.missing.append(machine)
            continue
        xs, ys = got
        color = COLORS.get(machine, EXTRA_COLORS[drawn % len(EXTRA_COLORS)])
        width = 2.4 if drawn == 0 else 1.2      # the first drawn wider: identical lines stay visible
        if kind == "step":
            ax.step(xs, ys, where="post", color=color, label=machine, linewidth=width)
        else:
            ax.plot(xs, ys, color=color, label=machine, linewidth=width)
        drawn += 1
    if drawn:
        ax.set_title(chart.title)
        ax.set_xlabel(ctx.time_axis)
        chart.png = finish(fig, axes, ctx.marks, ylabel, xlim=ctx.xlim, integer_y=integer_y)
    return chart


def side_by_side(ctx: ChartContext, chart: Chart, get: Callable[[str], list[Line] | None], ylabel: str,
                 logy: bool = False, integer_y: bool = False, markers: bool = False) -> Chart:
    """One panel per machine; get(machine) -> [(xs, ys, label), …], None or empty without data."""
    lines_of = {m: get(m) for m in ctx.machines}
    present = {m: lines for m, lines in lines_of.items() if lines and any(line[0] for line in lines)}
    chart.missing += [m for m in ctx.machines if m not in present]
    if not present:
        return chart
    fig, axes = new_figure(max(1, len(ctx.machines)))
    for ax, machine in zip(axes, ctx.machines):
        ax.set_title(f"{machine}: {chart.title}")
        ax.set_xlabel(ctx.time_axis)
        if machine not in present:
            ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes, color="#999", fontsize=14)
            continue
        lines = present[machine]
        for index, (xs, ys, label) in enumerate(lines):
            color = EXTRA_COLORS[index % len(EXTRA_COLORS)] if len(lines) > 1 else COLORS.get(machine, EXTRA_COLORS[0])
            ax.plot(xs, ys, label=label, linewidth=1.3, marker="o" if markers else None, markersize=3, color=color)
        if logy:
            ax.set_yscale("log")
    chart.png = finish(fig, axes, ctx.marks, ylabel, xlim=ctx.xlim, integer_y=integer_y,
                       panel_marks=[ctx.marks_of(machine) for machine in ctx.machines])
    return chart
