"""A GC pause and a GC log file as read: by the unified-log regex (lab/analysis/gclog.py) or by GCViewer
(lab/analysis/gcviewer.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

UNIT = {"B": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


@dataclass
class Pause:
    uptime_s: float            # when the pause started, seconds since the JVM started
    at: float | None           # the same on the wall clock (epoch seconds), when the log has `time`
    pause_ms: float
    kind: str                  # "Pause Young (Allocation Failure)" ...
    heap_before_bytes: int | None
    heap_after_bytes: int | None
    heap_total_bytes: int | None
    file: str

    @property
    def full(self) -> bool:
        return "Full" in self.kind


@dataclass
class LogFile:
    path: Path
    collector: str | None = None
    first_uptime_s: float | None = None
    last_uptime_s: float | None = None
    first_at: float | None = None               # wall clock of the first decorated line
    offset_s: float | None = None               # wall clock - uptime, for this JVM
    regex_pauses: list[Pause] = field(default_factory=list)
    lines: int = 0
    unparsed_decorations: bool = False
