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


# The actuator's Prometheus text as the classic stack writes it (Micrometer 1.9: a comma ends each label set)
AT_REST = ('# HELP tomcat_threads_busy_threads\n'
           'tomcat_threads_busy_threads{name="ajp-apr-127.0.0.1-8009",} 0.0\n'
           'tomcat_threads_busy_threads{name="http-nio-127.0.0.1-8080",} 0.0\n'
           'camel_exchanges_inflight{camelContext="camel-1",routeId="mock",serviceName="MicrometerRoutePolicyService",} 0.0\n')


class Metrics:
    """A machine whose actuator answers with the given Prometheus text (None: curl fails), read as _fetch_inside does."""

    def __init__(self, bodies: dict[str, str | None]) -> None:
        self.bodies, self.asked = bodies, []

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        self.asked.append((name, argv[-1]))
        body = self.bodies[name]
        return subprocess.CompletedProcess(argv, 0, f"{body or ''}\n@@lab-fetched {0 if body is not None else 22}")


@pytest.mark.parametrize(("default", "rest"), [
    (AT_REST, True),
    (AT_REST.replace('8080",} 0.0', '8080",} 3.0'), False),                     # a Tomcat thread still busy
    (AT_REST.replace('MicrometerRoutePolicyService",} 0.0', 'MicrometerRoutePolicyService",} 1.0'), False),  # in flight
    (AT_REST.replace('8080",} 0.0', '8080"} 0.0').replace(",} 0.0", "} 0.0"), True),  # the modern stack's labels
    (AT_REST + 'tomcat_threads_busy_threads{name="http-nio-8081",} 1.0\n', True),  # the scrape's own, not counted
    (None, False),                                                               # metrics not read
    ("# nothing\n", False),                                                      # no connector named
], ids=["at-rest", "busy", "in-flight", "modern-labels", "management-own", "unread", "no-connector"])
def test_a_machine_is_at_rest_when_no_tomcat_thread_is_busy_and_no_exchange_is_in_flight(monkeypatch, default, rest):
    from lab.machines import manifest
    wiring = manifest.Manifest(machine="default", address="10.213.1.2", home="/h", user="u", group="g",
                               service_manager="supervisord", service_path="/svc/camel/mock",
                               ports={"httpd": 80, "app_management": 8081}, processes=(),
                               pcp_archive="pcp/archives/current", evidence={})
    monkeypatch.setattr(manifest, "read", lambda name: wiring)
    machines = Metrics({"default": default, "tuned": AT_REST})
    assert status.at_rest(machines, ["tuned", "default"]) is rest
    assert sorted(machines.asked) == [("default", "http://127.0.0.1:8081/actuator/prometheus"),
                                      ("tuned", "http://127.0.0.1:8081/actuator/prometheus")]
