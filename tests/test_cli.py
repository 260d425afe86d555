"""./start.sh's command line refuses bad input before anything starts, naming what the user typed."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from lab import lifecycle
from lab.errors import StepFailed

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("args, message", [
    (["run", "--users", "-5"], "--users -5: must be 1 or more"),
    (["run", "--duration", "0"], "--duration 0: must be 1 or more"),
    (["run", "--quick", "--ramp", "200"], "--ramp 200 is longer than --duration 90: the ramp-up is part of the run"),
    (["--think", "-1"], "--think -1: must be 0 or more"),
])
def test_a_bad_load_option_is_named_before_anything_starts(args: list[str], message: str) -> None:
    # --backend ssh with an inventory that does not exist: had the options passed, it would fail there.
    result = subprocess.run([str(REPO / "start.sh"), *args, "--backend", "ssh", "--inventory", "/nonexistent.yml"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"start.sh: {message}", result.stderr
    assert "==> " not in result.stderr.replace("==> Installing what the lab needs", "")   # nothing else began


def test_up_refuses_a_misspelled_knob_before_anything_changes(tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "ansible"
    shutil.copytree(REPO / "ansible", copy)
    tuned = copy / "host_vars" / "tuned.yml"
    tuned.write_text(tuned.read_text().replace("camel_app_logback_async: true", "camel_app_logback_asynch: true"))
    monkeypatch.setattr(lifecycle, "ANSIBLE_DIR", copy)
    with pytest.raises(StepFailed, match=r"camel_app_logback_asynch is not a variable of any role "
                                         r"\(did you mean camel_app_logback_async\?\)"):
        lifecycle.check_knobs()


def test_the_shipped_knobs_pass() -> None:
    lifecycle.check_knobs()
