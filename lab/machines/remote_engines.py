"""The ssh and Vagrant backends' load generators: the hosts of the inventory's loadgen group, each with a
JMeter engine (jmeter-server) the jmeter_engine role provisioned, started fresh for one load run and
stopped after it by ansible/engines.yml, which writes where each listens (.cache/manifests/engines/)."""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import provision
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.interrupts import deferred
from lab.load.engines import RMI_PROPERTIES, SECRETS, Engines, rmi_properties
from lab.machines.manifest import MANIFESTS
from lab.machines.protocol import Pulled
from lab.paths import ENGINES_PLAYBOOK
from lab.progress import info

ENGINE_MANIFESTS = MANIFESTS / "engines"
GROUP = "loadgen"


def group_hosts(listing: dict, group: str = GROUP) -> tuple[str, ...]:
    """The hosts of a group in `ansible-inventory --list`'s answer, its child groups' included, in order."""
    found: list[str] = []
    pending = [group]
    while pending:
        entry = listing.get(pending.pop(0), {})
        found += [host for host in entry.get("hosts", []) if host not in found]
        pending += entry.get("children", [])
    return tuple(found)


def source_address(address: str) -> str:
    """This host's own address toward address (what the engines there call back), from the routing table."""
    try:
        route = subprocess.run(["ip", "-o", "route", "get", address], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise StepFailed(f"cannot tell this host's address toward the engine {address}: {error}") from error
    found = re.search(r"\bsrc (\S+)", route.stdout)
    if route.returncode != 0 or not found:
        raise StepFailed(f"cannot tell this host's address toward the engine {address} (ip route get: "
                         f"{(route.stderr or route.stdout).strip()}): set jmeter_engine_client_address in the inventory")
    return found[1]


def failures(output: str) -> list[str]:
    """What a failed playbook said went wrong: each failed host's message (ansible.cfg's YAML result format puts
    it on the indented lines after `fatal: [host]: FAILED! =>`), else Ansible's own error lines."""
    found: list[str] = []
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(("fatal:", "failed:")):
            host = re.match(r"\w+: \[([^\]]+)\]", line)
            found.append(f"{host[1] if host else line}: {_message(lines[index + 1:index + 60]) or line}")
    return found or [line.strip() for line in lines if line.startswith(("ERROR!", "[ERROR]"))][-3:]


def _message(result: list[str]) -> str | None:
    """The msg of a YAML-formatted result: its line and the more indented lines that continue it."""
    for index, line in enumerate(result):
        if line.strip().startswith("msg:"):
            indent = len(line) - len(line.lstrip())

            def continues(text: str, indent: int = indent) -> bool:
                return bool(text.strip()) and len(text) - len(text.lstrip()) > indent

            rest = [text.strip() for text in itertools.takewhile(continues, result[index + 1:])]
            return " ".join([line.strip()[4:].strip(), *rest]).strip("'\" ")
    return None


def _engine_playbook(inventory: Path, state: str, targets: list[tuple[str, int]], log_dir: Path) -> None:
    HostLab().check_inventory_unchanged(inventory)         # each run's engines, root's: the inventory up was given
    result = provision.run_playbook(inventory, log_dir, playbook=ENGINES_PLAYBOOK,
                                    variables={"jmeter_engine_state": state,
                                               "jmeter_engine_targets": [f"{host}:{port}" for host, port in targets]})
    if result.returncode != 0:
        said = " | ".join(failures(result.log.read_text(errors="replace")))
        raise StepFailed(f"ansible-playbook engines.yml ({state}) failed (exit {result.returncode}): {said[:2000]}"
                         f"\n    full log: {result.log}")


@contextmanager
def engines(inventory: Path, hosts: tuple[str, ...], targets: list[tuple[str, int]], log: Path,
            pull: Callable[[str, list[str], Path], Pulled]) -> Iterator[Engines]:
    """The loadgen group's engines running until the block ends; then stopped, and each one's log pulled
    beside log (<host>/...)."""
    if not hosts:
        raise StepFailed(f"--load-from loadgen: {inventory} has no {GROUP} group; name the hosts that run the "
                         "JMeter engines there (ansible/inventories/ssh/hosts.example.yml shows how)")
    if not (SECRETS / RMI_PROPERTIES).is_file():
        # A key pair made now would not be the one the engines were given: they would refuse this client.
        raise StepFailed(f"--load-from loadgen: {SECRETS / RMI_PROPERTIES} is missing, so the engines hold another key "
                         "pair: ./start.sh up gives them a new one")
    properties = rmi_properties()
    shutil.rmtree(ENGINE_MANIFESTS, ignore_errors=True)
    found: list[dict] = []
    try:
        _engine_playbook(inventory, "started", targets, log.parent)
        found = [json.loads((ENGINE_MANIFESTS / f"{host}.json").read_text()) for host in hosts]
        client = found[0]["client_address"] or source_address(found[0]["address"])
        yield Engines(hosts=tuple(f"{engine['address']}:{engine['port']}" for engine in found), client_host=client,
                      rmi_properties=properties,
                      where=f"{len(found)} JMeter engine{'s' if len(found) > 1 else ''} (jmeter-server) of the "
                            f"inventory's {GROUP} group: "
                            + ", ".join(f"{engine['host']} ({engine['address']})" for engine in found))
    finally:
        with deferred():            # a second Ctrl-C must not leave the engines running
            _stop(inventory, found, log, pull)


def _stop(inventory: Path, found: list[dict], log: Path, pull: Callable[[str, list[str], Path], Pulled]) -> None:
    """The engines stopped and their logs pulled; what fails here is said, never raised over the run's own error."""
    try:
        _engine_playbook(inventory, "stopped", [], log.parent)
    except StepFailed as error:
        info(f"the JMeter engines may still run: {error}")
    for engine in found:
        pulled = pull(engine["host"], [os.path.relpath(engine["log"], engine["home"])], log.parent / engine["host"])
        if pulled.problem or not pulled.files:
            info(f"the log of the engine on {engine['host']} was not copied: {pulled.problem or 'not found'}")
