"""The ssh backend's own commands on a machine (lab/machines/ssh.py), through ad-hoc Ansible over a local
connection: the same modules and callback as over SSH, without a machine."""
from __future__ import annotations

import glob
import shutil
from pathlib import Path

import pytest

from conftest import local_connection_inventory
from lab.errors import StepFailed
from lab.machines.ssh import SshBackend

pytestmark = pytest.mark.fast


@pytest.fixture()
def machine(tmp_path, monkeypatch) -> tuple[SshBackend, Path]:
    home = tmp_path / "home"
    (home / "app" / "dumps").mkdir(parents=True)
    (home / "pcp").mkdir()
    monkeypatch.setattr(SshBackend, "home", lambda self, name: str(home))
    monkeypatch.chdir(tmp_path)             # where a command smuggled in a file name would write
    return SshBackend(local_connection_inventory(tmp_path / "hosts.yml")), home


def test_a_crash_files_name_never_runs_as_a_command_when_it_is_removed(machine, tmp_path):
    backend, home = machine
    dumps = home / "app" / "dumps"
    # names the service account could give its files: each carries a command a shell would run as root
    names = ["java_pid1;touch pwned;.hprof", "hs_err_pid2$(touch pwned2).log", "java_pid3`touch pwned3`.hprof",
             "x*.hprof"]
    for name in names:
        (dumps / name).write_text("dump")
    (dumps / "xy.hprof").write_text("another dump")       # matched by x*.hprof as a pattern: not by its name
    for name in names:
        backend.remove("tuned", glob.escape(f"app/dumps/{name}"))
    assert sorted(p.name for p in dumps.iterdir()) == ["xy.hprof"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("pwned")]


def test_a_glob_removes_the_files_it_matches_in_its_folder_only(machine):
    backend, home = machine
    for name in ("archive.0", "archive.index", "archive.meta", "other.0"):
        (home / "pcp" / name).write_text("x")
    (home / "pcp" / "archive.dir").mkdir()                # a folder with a file's name stays
    (home / "pcp" / "archive.link").symlink_to(home / "pcp" / "other.0")   # the link goes, not what it names
    (home / "pcp" / "deeper").mkdir()
    (home / "pcp" / "deeper" / "archive.1").write_text("x")
    backend.remove("tuned", "pcp/archive.*")
    assert sorted(p.name for p in (home / "pcp").iterdir()) == ["archive.dir", "deeper", "other.0"]
    assert (home / "pcp" / "deeper" / "archive.1").exists()
    backend.remove("tuned", "no-such-folder/archive.*")   # nothing there: nothing to remove
    with pytest.raises(ValueError, match="must be a folder under lab_home and a file name pattern"):
        backend.remove("tuned", "pcp/*/archive.0")
    # find's own error is the step's: a machine without its lab_home
    shutil.rmtree(home)
    with pytest.raises(StepFailed, match=r"tuned: could not remove pcp/archive\.\*: find: .*No such file or directory"):
        backend.remove("tuned", "pcp/archive.*")


def test_a_callback_enabled_in_the_users_environment_does_not_garble_what_the_lab_reads(machine, monkeypatch):
    # profile_tasks (or any callback the user turns on) prints beside the json callback's document: the lab's own
    # reads then parsed nothing, and status showed every VM's configuration as None
    backend, _ = machine
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.profile_tasks")
    result = backend.run_in("tuned", ["echo", "the machine's answer"])
    assert (result.returncode, result.stdout) == (0, "the machine's answer"), result


def test_a_read_runs_with_ansibles_own_strategy_one_python_for_its_one_command(machine):
    # Mitogen runs site.yml's provisioning plays only: for one command its start on a machine costs more than it
    # saves. A read's command is the child of the module's own Python (AnsiballZ), not of Mitogen's interpreter.
    backend, _ = machine
    result = backend.run_in("tuned", ["sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline"])
    assert result.returncode == 0 and "AnsiballZ_command" in result.stdout, result
