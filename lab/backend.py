"""Where the two machines come from. Every backend provisions with the same playbook; they differ
in how machines are created and destroyed, and how a command reaches a machine."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from lab.backends import local
from lab.paths import INVENTORIES, LOCAL_ROOT, VENV
from lab.progress import StepFailed

MACHINES = ("default", "tuned")
# lab_user and lab_group of the Ansible role "lab".
LOCAL_LAB_USER = "camellab"


class LocalBackend:
    """Each machine is a network namespace plus a cgroup on this host (lab/backends/local.py)."""

    name = "local"
    inventory = INVENTORIES / "local" / "hosts.yml"
    emulation_note = ("local backend: both machines share this host's kernel and cores; each is limited to "
                      "512 MiB and 2 CPUs by a cgroup, but they compete for the same physical CPUs")

    def __init__(self, root: Path = LOCAL_ROOT) -> None:
        self.machines = local.machines(root)

    def up(self) -> None:
        for machine in self.machines.values():
            local.up(machine)

    def down(self) -> None:
        for machine in self.machines.values():
            local.down(machine)
        # The account the playbook created on this host for the machines' processes.
        if subprocess.run(["id", LOCAL_LAB_USER], capture_output=True).returncode == 0:
            subprocess.run(["userdel", LOCAL_LAB_USER], check=True)
        if subprocess.run(["getent", "group", LOCAL_LAB_USER], capture_output=True).returncode == 0:
            subprocess.run(["groupdel", LOCAL_LAB_USER], check=True)
        if LOCAL_ROOT.is_dir() and not any(path.is_file() for path in LOCAL_ROOT.rglob("*")):
            shutil.rmtree(LOCAL_ROOT)

    def address(self, name: str) -> str:
        return self.machines[name].address

    def exists(self, name: str) -> bool:
        return local.status(self.machines[name])["netns"]

    def processes(self, name: str) -> dict[str, str]:
        return local.status(self.machines[name])["programs"]

    def machine_status(self, name: str) -> dict:
        return local.status(self.machines[name])

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return local.run_in(self.machines[name], argv, capture_output=True, text=True, timeout=timeout)

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status a process under the machine's supervisor."""
        return local.supervisorctl(self.machines[name], action, service)

    def home(self, name: str) -> Path:
        """The machine's lab_home, readable from this host: the evidence is collected from there."""
        return self.machines[name].root

    def begin_measurement(self, name: str) -> None:
        local.reset_memory_peak(self.machines[name])

    def memory_events(self, name: str) -> dict:
        return local.memory_events(self.machines[name])


class SshBackend:
    """Real hosts named default and tuned in an Ansible inventory; commands go through Ansible."""

    name = "ssh"
    emulation_note = "ssh backend: two real hosts"

    def __init__(self, inventory: Path) -> None:
        if not inventory.is_file():
            raise StepFailed(f"--inventory {inventory}: no such file (start from "
                             f"{INVENTORIES / 'ssh' / 'hosts.example.yml'})")
        self.inventory = inventory
        self.hostvars = self._hostvars()
        missing = [m for m in MACHINES if m not in self.hostvars]
        if missing:
            raise StepFailed(f"{inventory}: the inventory must define hosts named {', '.join(MACHINES)} "
                             f"(missing: {', '.join(missing)})")

    def _hostvars(self) -> dict:
        result = subprocess.run([str(VENV / "bin" / "ansible-inventory"), "-i", str(self.inventory), "--list"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise StepFailed(f"{self.inventory}: ansible-inventory failed: {result.stderr.strip()}")
        return json.loads(result.stdout).get("_meta", {}).get("hostvars", {})

    def up(self) -> None:
        pass  # the hosts exist already

    def down(self) -> None:
        raise StepFailed("the ssh backend does not remove real hosts; stop the services there yourself")

    def address(self, name: str) -> str:
        return self.hostvars[name].get("ansible_host", name)

    def exists(self, name: str) -> bool:
        return True

    def processes(self, name: str) -> dict[str, str]:
        states = {}
        for service in ("httpd", "camel-app", "mock-service"):
            result = self.run_in(name, ["systemctl", "is-active", service])
            states[service] = result.stdout.strip() or "unknown"
        return states

    def machine_status(self, name: str) -> dict:
        return {"name": name, "address": self.address(name)}

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"}
        result = subprocess.run([str(VENV / "bin" / "ansible"), name, "-i", str(self.inventory), "-m",
                                 "ansible.builtin.command", "-a", " ".join(argv)],
                                capture_output=True, text=True, timeout=timeout, env=env)
        try:
            task = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"][name]
            return subprocess.CompletedProcess(argv, task.get("rc", 1), task.get("stdout", ""), task.get("stderr", ""))
        except (ValueError, KeyError, IndexError):
            return subprocess.CompletedProcess(argv, 255, "", result.stderr or result.stdout)


def choose(name: str, inventory: Path | None):
    if name == "local":
        return LocalBackend()
    if name == "ssh":
        if inventory is None:
            raise StepFailed("--backend ssh needs --inventory PATH (see ansible/inventories/ssh/hosts.example.yml)")
        return SshBackend(inventory)
    if name == "vagrant":
        if not shutil.which("vagrant"):
            raise StepFailed("--backend vagrant: 'vagrant' not found; install Vagrant with VirtualBox or libvirt")
        raise StepFailed("--backend vagrant is not available yet in this version of the lab; use --backend local")
    raise StepFailed(f"unknown backend {name!r}: choose local, vagrant or ssh")
