"""A machine's memory figures for summary.json: its peak with the source it came from, and what it paid for
being short of memory (its pages in swap, the pages it read back), from the PCP figures of lab/analysis/pcp.py
and the machine's events.json."""
from __future__ import annotations

from lab.numbers import number

EVENTS_SOURCE = "events.json peak_memory_bytes (the machine's memory peak)"


def figures(resources: dict, events: dict | None, backend: str | None) -> dict:
    """{"peak_bytes", "source", "events_peak_bytes", "pcp_peak_bytes", "pcp_source"}, and "swap_peak_bytes",
    "major_faults_per_s" and "paging_source" when PCP recorded them."""
    peak = number((events or {}).get("peak_memory_bytes"))
    family = resources.get("process_metrics") or "proc"
    if resources.get("proc_pss_max_bytes") is not None:
        pcp_peak = {"peak_bytes": resources["proc_pss_max_bytes"],
                    "source": f"PCP: peak of the summed {family}.smaps.pss (proportional set size) of the machine's "
                              "processes"}
    elif resources.get("proc_rss_max_bytes") is not None:
        pcp_peak = {"peak_bytes": resources["proc_rss_max_bytes"],
                    "source": f"PCP: peak of the summed {family}.memory.rss of the machine's processes"}
    elif resources.get("mem_used_max_bytes") is not None and backend != "local":
        pcp_peak = {"peak_bytes": resources["mem_used_max_bytes"], "source": "PCP: peak mem.util.used"}
    else:
        pcp_peak = {"peak_bytes": None, "source": None}
    memory = {"peak_bytes": peak, "source": EVENTS_SOURCE} if peak is not None else dict(pcp_peak)
    memory.update(events_peak_bytes=peak, pcp_peak_bytes=pcp_peak["peak_bytes"], pcp_source=pcp_peak["source"])
    if resources.get("proc_swap_max_bytes") is not None or resources.get("proc_major_faults_per_s_mean") is not None:
        memory.update(swap_peak_bytes=resources.get("proc_swap_max_bytes"),
                      major_faults_per_s=resources.get("proc_major_faults_per_s_mean"),
                      paging_source=f"PCP: peak of the summed {family}.memory.vmswap, and the mean over the load of "
                                    f"the summed {family}.psinfo.maj_flt rate, of the machine's processes")
    return memory
