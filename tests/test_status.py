"""lab/status.py's batched reads inside a machine: one command for several URLs (on a VM each command is an SSH
round trip), its output split back per URL, as the local backend and Ansible's command module return it."""
from __future__ import annotations

import subprocess

import pytest

from conftest import local_connection_inventory
from lab import status

pytestmark = pytest.mark.fast


class OneShell:
    """A machine whose commands run here, with the given URLs' bodies served by a stand-in curl on PATH."""

    def __init__(self, tmp_path, strip_last_newline: bool) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        curl = self.bin / "curl"
        # the last argument is the URL: /fail exits 22 (curl -f on an HTTP error), others print their name
        curl.write_text('#!/bin/sh\nfor url; do :; done\ncase "$url" in *fail*) exit 22;; '
                        '*nl*) printf "%s\\n" "$url";; *) printf "%s" "$url";; esac\n')
        curl.chmod(0o755)
        self.strip = strip_last_newline
        self.calls = 0

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        self.calls += 1
        done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": f"{self.bin}:/usr/bin:/bin"})
        return subprocess.CompletedProcess(argv, done.returncode,
                                           done.stdout.rstrip("\r\n") if self.strip else done.stdout, done.stderr)


@pytest.mark.parametrize("strip", [False, True], ids=["local", "ansible-strips-the-last-newline"])
def test_several_urls_are_read_in_one_command(tmp_path, strip) -> None:
    machine = OneShell(tmp_path, strip)
    got = status._fetch_inside(machine, "tuned", "http://a/info", "http://b/fail", "http://c/nl", "http://d/last")
    assert got == ["http://a/info", None, "http://c/nl\n", "http://d/last"] and machine.calls == 1


def test_commands_reach_a_machine_through_ansible_and_come_back_as_json(tmp_path):
    # VMs and SSH hosts are read through ad-hoc Ansible with a JSON callback; here over a local connection, so the
    # venv's ansible-core, its collections and that callback are exercised without a machine. (With ansible-core
    # alone the JSON callback is missing and every read came back empty: every VM's configuration was "None".)
    from lab.machines.ssh import SshBackend
    answer = SshBackend(local_connection_inventory(tmp_path / "hosts.yml")).run_in("tuned", ["sh", "-c", "echo from the machine; echo oops >&2; exit 3"])
    assert (answer.returncode, answer.stdout, answer.stderr) == (3, "from the machine", "oops")


def test_both_machines_are_observed_at_once_and_reported_in_the_order_asked(monkeypatch) -> None:
    # On a VM each read is an SSH round trip of seconds: one machine's reads must not wait for the other's.
    import threading
    both = threading.Barrier(2, timeout=10)     # broken (an error) when one machine is observed after the other
    monkeypatch.setattr(status, "observe", lambda backend, name: both.wait() is not None and {"url": name})
    assert list(status.observe_all(object(), ["tuned", "default"]).items()) == [
        ("tuned", {"url": "tuned"}), ("default", {"url": "default"})]
    monkeypatch.setattr(status, "observe", lambda backend, name: {"url": name})
    assert status.observe_all(object(), iter(["tuned"])) == {"tuned": {"url": "tuned"}}     # up --only tuned
