"""The machines' life: up (install, build, create, provision, check), down, and which backend the lab
that is up came from (lab.hostlab keeps it, host-wide), so status, run and down find it without --backend."""
from __future__ import annotations

import sys
from pathlib import Path

from lab import knobs, provision, status
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.load import engines, jmeter
from lab.machines import MACHINES, choose
from lab.machines.protocol import Backend
from lab.paths import ANSIBLE_DIR, LOGS, REPO
from lab.progress import info, step


def default_backend(host: HostLab) -> tuple[str, Path | None, str]:
    """The backend of the lab that is up, else the best one this host has, and why."""
    owner = host.owner()
    if owner is not None:
        return owner.backend, owner.inventory, "the lab that is up uses it"
    name, why = choose.default_backend()
    return name, None, why


def check_knobs() -> None:
    """A misspelled knob would be ignored by Ansible: refuse it before anything changes."""
    unknown = knobs.unknown_knobs(ANSIBLE_DIR)
    if unknown:
        raise StepFailed("unknown knobs, nothing was changed:\n    " + knobs.describe(unknown).replace("\n", "\n    "))


def up(backend: Backend, inventory: Path | None, host: HostLab, only: str | None = None) -> dict[str, dict]:
    """Both machines created and provisioned (or only one of them), each answering through HTTPD;
    returns their status."""
    check_knobs()
    print(f"Machines: {backend.emulation_note}", file=sys.stderr)
    with step("Building the service"):
        provision.build_service()
    host.claim(backend.name, inventory)        # before anything exists: a half-made lab is this checkout's too
    with step(f"Creating the machines ({backend.name} backend)"):
        backend.up()
    if backend.engine_hosts and only is None:
        with step("Packing the lab's JMeter and its RMI key pair for the load generators"):
            info(f"{jmeter.bundle().relative_to(REPO)}; {engines.rmi_properties().parent.relative_to(REPO)}")
    with step(f"Provisioning {'the ' + only + ' machine' if only else 'both machines'} with Ansible"):
        result = provision.run_playbook(backend.inventory, LOGS, limit=only)
        if result.returncode != 0:
            raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}")
        if only in (None, "tuned"):
            host.aa_end()                       # the tuned machine has its own knobs again
        # What this run changed: everything at first, only an edited knob later, nothing when all is in place.
        hosts = [name for name in MACHINES if only in (None, name)] + list(backend.engine_hosts if only is None else ())
        info("changed: " + ", ".join(f"{name} {result.changed.get(name, '?')}" for name in hosts)
             + f"; full log: {result.log}")
    with step("Checking each machine answers through HTTPD"):
        machines = {name: status.observe(backend, name) for name in MACHINES if only in (None, name)}
        broken = [f"{name}: {m['url']} -> {m.get('http_status')}" for name, m in machines.items()
                  if m.get("http_status") != 200]
        if broken:
            raise StepFailed("not answering: " + "; ".join(broken))
    print(f"\n{'Both machines are' if only is None else f'The {only} machine is'} up:", file=sys.stderr)
    for name, machine in machines.items():
        print(f"  {name:<8} {machine['url']}", file=sys.stderr)
    return machines


def down(backend: Backend, host: HostLab) -> None:
    with step(f"Removing both machines ({backend.name} backend)"):
        backend.down()
    host.aa_end()
    host.release(backend.name)          # the lab that was up is gone
