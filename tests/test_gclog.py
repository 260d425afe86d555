"""GC logs of several JVMs in one folder (lab/analysis/gclog.py): the collector named is the one that ran."""
from __future__ import annotations

from pathlib import Path

import pytest

from lab.analysis import gclog

pytestmark = pytest.mark.fast


def _log(path: Path, started: str, collector: str, pause: str) -> None:
    path.write_text(f"[{started}.000+0000][0.004s][info][gc] Using {collector}\n"
                    f"[{started}.200+0000][0.204s][info][gc] GC(0) {pause} 12M->3M(192M) 2.000ms\n"
                    f"[{started}.400+0000][0.404s][info][gc] GC(1) {pause} 13M->3M(192M) 1.000ms\n")


def test_the_collector_is_the_one_of_the_jvm_that_ran_in_the_window_not_an_earlier_ones(tmp_path: Path) -> None:
    # an ablation (or an A/A run) restarted the JVM with other GC knobs: the earlier JVM's file stays
    _log(tmp_path / "gc.log.1", "2026-11-26T09:06:40", "Serial", "Pause Young (Allocation Failure)")
    _log(tmp_path / "gc.log", "2026-11-26T09:24:56", "G1", "Pause Young (Normal) (G1 Evacuation Pause)")
    serial_era = gclog.analyze(tmp_path, (1795684000.0, 1795684001.0), use_gcviewer=False)
    g1_era = gclog.analyze(tmp_path, (1795685096.0, 1795685097.0), use_gcviewer=False)
    assert serial_era["collector"] == "Serial" and g1_era["collector"] == "G1"
    assert gclog.analyze(tmp_path, None, use_gcviewer=False)["collector"] == "G1"     # no window: the newest
