"""What every part of the lab names the same way, at the bottom of its imports (standard library only, so the
bootstrap that runs before the venv exists can use it too): the two machines, and how a time is written."""
from __future__ import annotations

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
