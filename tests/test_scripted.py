"""--json (lab/scripted.py): a command's result alone on standard output, whatever its children print there."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO
from lab import cli

pytestmark = pytest.mark.fast

SCRIPT = """
import subprocess, sys
from pathlib import Path
from lab import scripted
with scripted.stdout_for_result(sys.argv[1] == "on"):
    print("a line of the command's own")
    subprocess.run(["echo", "a child's stray line"], check=True)
    if sys.argv[2] == "result":
        Path(sys.argv[3]).write_text('{"verdict": "valid"}')
        scripted.result(Path(sys.argv[3]))
"""


def _command(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=True)


def test_with_json_standard_output_holds_the_result_and_nothing_else(tmp_path):
    done = _command("on", "result", str(tmp_path / "summary.json"))
    assert json.loads(done.stdout) == {"verdict": "valid"}
    assert "a line of the command's own" in done.stderr and "a child's stray line" in done.stderr


def test_with_json_a_command_that_wrote_no_result_prints_nothing(tmp_path):
    done = _command("on", "none", str(tmp_path / "summary.json"))
    assert done.stdout == "" and "a child's stray line" in done.stderr


def test_without_json_standard_output_is_left_alone(tmp_path):
    done = _command("off", "result", str(tmp_path / "summary.json"))
    assert done.stdout.splitlines() == ["a line of the command's own", "a child's stray line"]


@pytest.mark.parametrize("argv", [["run", "--json"], ["capacity", "--quick", "--json"], ["ablate", "--json"],
                                  ["tune", "--json"], ["--json"]])
def test_the_commands_with_a_result_take_json(argv):
    assert cli._parser().parse_args(argv).json is True


def test_status_keeps_its_own_json_and_up_has_none(capsys):
    assert cli._parser().parse_args(["status", "--json"]).json is True
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["up", "--json"])
    assert "unrecognized arguments: --json" in capsys.readouterr().err
