"""An ablation's page (templates/ablation.html.j2): the waterfall from the default machine's knobs to the
tuned machine's, each knob group's share of the gain with its interval, the leave-one-out losses beside
it, each configuration's cost, and a link to every configuration's own report."""
from __future__ import annotations

import time
from pathlib import Path

from lab.ablation.analysis import config_of
from lab.ablation.folder import Ablation, key
from lab.ablation.run import AT_ONCE
from lab.report.page import environment
from lab.report.plotting import Chart, finish, new_figure, style
from lab.runfolder import RunFolder

TEMPLATE = "ablation.html.j2"


def waterfall(result: dict) -> Chart:
    chart = Chart("chart-waterfall", "From the default machine's knobs to the tuned machine's",
                  f"Left: the tuned machine's {(result.get('measure') or {}).get('short', 'throughput')} in each "
                  "configuration on the forward path, from the default configuration's (grey), each bar a knob group's gain (green up, "
                  "red down) with its 95% interval. Right: what removing each group from the tuned machine loses "
                  "(leave-one-out), with its interval; where the two disagree the groups interact.")
    rows = result.get("path") or []
    if not rows:
        return chart
    with style():
        fig, (left, right) = new_figure(2, sharey=False)
        names = ["default", *(r["group"] for r in rows)]
        level = result["default"]
        left.bar([0], [level], color="#999", width=0.6)
        for x, row in enumerate(rows, start=1):
            gain = row["gain"]
            low, high = row["gain_interval"]
            left.bar([x], [gain], bottom=[level], width=0.6, color="#2e8b57" if gain >= 0 else "#c0392b")
            left.errorbar([x], [level + gain], yerr=[[gain - low], [high - gain]], color="#333", capsize=3,
                          linewidth=1)
            level += gain
        left.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        unit = result.get("unit") or ""
        left.set_ylabel(f"tuned machine ({unit})")
        bottom = min(result["default"], *(r["mean"] for r in rows))
        left.set_ylim(bottom=max(0.0, bottom - 0.15 * abs(result["tuned"] - bottom) - 0.05 * abs(bottom)))
        losses = [r["loo_loss"] for r in rows]
        right.barh(range(len(rows)), losses, color=["#c0392b" if r["interacts"] else "#1b7fbf" for r in rows])
        right.errorbar(losses, range(len(rows)),
                       xerr=[[loss - r["loo_interval"][0] for loss, r in zip(losses, rows)],
                             [r["loo_interval"][1] - loss for loss, r in zip(losses, rows)]],
                       fmt="none", color="#333", capsize=3, linewidth=1)
        right.axvline(0, color="#888", linewidth=1)
        right.set_yticks(range(len(rows)), [r["group"] for r in rows], fontsize=8)
        right.invert_yaxis()
        right.set_xlabel(f"lost when left out of the tuned machine ({unit})")
        chart.png = finish(fig, [left, right], clock_x=False)
    return chart


def _shared(dedicated: dict[Path, bool | None], record: dict) -> bool:
    """Whether some measurement ran where the machines shared CPUs: as each run folder was placed (a resumed
    ablation may have been elsewhere), else as the ablation was when it started."""
    known = [value for value in dedicated.values() if value is not None]
    return False in known if known else not (record.get("placement") or {}).get("dedicated")


def render(ablation: Ablation) -> Path:
    """Writes the ablation's report/index.html from its ablation.json."""
    record = ablation.record()
    result = record.get("analysis") or {}
    folder = RunFolder(ablation.root)
    configs, uncounted, dedicated = [], {}, {}
    for name, figures in (result.get("configurations") or {}).items():
        config = config_of(name)
        sources = ablation.sources(config)
        verdicts: list[dict] = [dict(summary.get("verdict") or {}) if (summary := source.folder.summary()) else {}
                                for source in sources]
        for source in sources:      # a pair's half holds two configurations' trials: counted once
            run = source.folder.read_json(source.folder.run_json, [], "run") or {}
            uncounted[source.folder.root] = run.get("uncounted_trials") or 0
            dedicated[source.folder.root] = (run.get("placement") or {}).get("dedicated")
        reports = [(key(config) if len(sources) == 1 and source.machine == "tuned" else
                    f"{source.folder.root.name} ({source.machine})", folder.relative(source.folder.report_html))
                   for source in sources if source.folder.report_html.is_file()]
        configs.append({"name": key(config), "size": len(config), "figures": figures,
                        "costs": (result.get("costs") or {}).get(name) or {},
                        "verdict": "; ".join(dict.fromkeys(v["verdict"] for v in verdicts if v.get("verdict"))) or None,
                        "valid": False if any(v.get("valid") is False for v in verdicts) else
                        (True if verdicts and all(v.get("valid") for v in verdicts) else None),
                        "reports": reports})
    configs.sort(key=lambda c: (c["size"], c["name"]))
    invalid = [c["name"] for c in configs if c["valid"] is False]
    page = environment().get_template(TEMPLATE).render(record=record, result=result, configs=configs, invalid=invalid,
                                                       uncounted=sum(uncounted.values()), charts=[waterfall(result)], now=time.time(),
                                                       at_once=(record.get("plan") or {}).get("schedule") == AT_ONCE,
                                                       # as each measurement was placed (a resume may be elsewhere)
                                                       shared=_shared(dedicated, record),
                                                       ablation_id=ablation.root.name)
    folder.write_text(folder.report_html, page)
    return folder.report_html
