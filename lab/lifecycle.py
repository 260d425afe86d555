"""The machines' life: up (install, build, create, provision, check), down, and which backend the lab
that is up came from, so status, run and down find it without --backend."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from lab import knobs, provision, status
from lab.errors import StepFailed
from lab.machines import MACHINES, choose
from lab.machines.protocol import Backend
from lab.paths import ANSIBLE_DIR, REPO
from lab.progress import info, step

CURRENT_BACKEND = REPO / ".cache" / "backend.json"
LOGS = REPO / ".cache" / "logs"


def remembered_backend() -> dict:
    """What `up` wrote about the lab that is up: {"backend": ..., "inventory": ...}, or {}."""
    try:
        remembered = json.loads(CURRENT_BACKEND.read_text())
    except (OSError, ValueError):
        return {}
    return remembered if isinstance(remembered, dict) and remembered.get("backend") else {}


def default_backend() -> tuple[str, Path | None, str]:
    """The backend of the lab that is up, else the best one this host has, and why."""
    remembered = remembered_backend()
    if remembered:
        inventory = remembered.get("inventory")
        return remembered["backend"], Path(inventory) if inventory else None, "the lab that is up uses it"
    name, why = choose.default_backend()
    return name, None, why


def check_knobs() -> None:
    """A misspelled knob would be ignored by Ansible: refuse it before anything changes."""
    unknown = knobs.unknown_knobs(ANSIBLE_DIR)
    if unknown:
        raise StepFailed("unknown knobs, nothing was changed:\n    " + knobs.describe(unknown).replace("\n", "\n    "))


def up(backend: Backend, inventory: Path | None) -> dict[str, dict]:
    """Both machines created and provisioned, each answering through HTTPD; returns their status."""
    check_knobs()
    print(f"Machines: {backend.emulation_note}", file=sys.stderr)
    with step("Building the service"):
        provision.build_service()
    with step(f"Creating the machines ({backend.name} backend)"):
        backend.up()
    CURRENT_BACKEND.parent.mkdir(parents=True, exist_ok=True)
    CURRENT_BACKEND.write_text(json.dumps({"backend": backend.name,
                                           "inventory": inventory and str(inventory.resolve())}))
    with step("Provisioning both machines with Ansible"):
        result = provision.run_playbook(backend.inventory, LOGS)
        if result.returncode != 0:
            raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}")
        # What this run changed: everything at first, only an edited knob later, nothing when all is in place.
        info("changed: " + ", ".join(f"{name} {result.changed.get(name, '?')}" for name in MACHINES)
             + f"; full log: {result.log}")
    with step("Checking each machine answers through HTTPD"):
        machines = {name: status.observe(backend, name) for name in MACHINES}
        broken = [f"{name}: {m['url']} -> {m.get('http_status')}" for name, m in machines.items()
                  if m.get("http_status") != 200]
        if broken:
            raise StepFailed("not answering: " + "; ".join(broken))
    print("\nBoth machines are up:", file=sys.stderr)
    for name, machine in machines.items():
        print(f"  {name:<8} {machine['url']}", file=sys.stderr)
    return machines


def down(backend: Backend) -> None:
    with step(f"Removing both machines ({backend.name} backend)"):
        backend.down()
    if remembered_backend().get("backend") == backend.name:   # the lab that was up is gone
        CURRENT_BACKEND.unlink(missing_ok=True)
