"""What every part of the lab names the same way, at the bottom of its imports (standard library only, so the
bootstrap that runs before the venv exists can use it too): the two machines, how a time is written, and how
something is done on each machine at once."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# The two machines of every backend, in this order everywhere (inventories, thread groups, reports).
MACHINES = ("default", "tuned")


def clock(seconds: float | None, fixed: bool = False) -> str:
    """Seconds as m:ss (or h:mm:ss); fixed: mm:ss, never negative (progress lines keep their width)."""
    if seconds is None:
        return "?"
    if fixed:
        seconds = max(0.0, seconds)
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    hours, rest = divmod(total, 3600)
    if hours:
        return f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{sign}{rest // 60:02d}:{rest % 60:02d}" if fixed else f"{sign}{rest // 60}:{rest % 60:02d}"


def at_once(work: Callable[[str], T], names: Iterable[str]) -> list[T]:
    """work(name) for each machine named, all at once, the results in the order named: what is done on a machine
    mostly waits on another process (an SSH round trip of seconds on a VM, a JVM, PCP's tools), so one machine's
    never waits for the other's. The first error raised is raised here, once every machine's work has ended."""
    names = list(names)
    if len(names) < 2:
        return [work(name) for name in names]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return list(pool.map(work, names))
