"""Where the two machines come from. Every backend provisions with the same playbook; they differ
in how machines are created and destroyed, and how a command reaches a machine."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab.backends import local
from lab.paths import ANSIBLE_DIR, INVENTORIES, LOCAL_ROOT, REPO, VENV
from lab.progress import StepFailed

MACHINES = ("default", "tuned")
# lab_user and lab_group of the Ansible role "lab".
LOCAL_LAB_USER = "camellab"
# The lab's services on a machine (supervisord programs or systemd units of the same names).
SERVICES = ("camel-app", "httpd", "mock-service", "pmcd", "pmlogger")
LOGS = REPO / ".cache" / "logs"


@dataclass
class Pulled:
    """Files copied from a machine, and what went wrong if not all could be."""
    files: list[Path] = field(default_factory=list)
    problem: str | None = None


def _place(sources: list[Path], root: Path, destination: Path, transfer) -> list[Path]:
    """Copies or moves (transfer) the files among sources to destination, at their paths under root."""
    placed = []
    for source in sources:
        if source.is_file():
            target = destination / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            transfer(source, target)
            placed.append(target)
    return placed


def _role_default_lab_home() -> str:
    """lab_home as the lab role sets it, for machines whose inventory does not."""
    text = (ANSIBLE_DIR / "roles" / "lab" / "defaults" / "main.yml").read_text()
    return re.search(r"^lab_home:\s*(\S+)", text, re.M)[1]


class LocalBackend:
    """Each machine is a network namespace plus a cgroup on this host (lab/backends/local.py)."""

    name = "local"
    service_manager = "supervisord"
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

    def remove(self, name: str, glob: str) -> None:
        for path in self.home(name).glob(glob):
            path.unlink()

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination, keeping their paths."""
        home = self.home(name)
        sources = [source for glob in globs for source in sorted(home.glob(glob))]
        return Pulled(_place(sources, home, destination, shutil.copy2))

    def begin_measurement(self, name: str) -> None:
        local.reset_memory_peak(self.machines[name])

    def memory_events(self, name: str) -> dict:
        return local.memory_events(self.machines[name])


class SshBackend:
    """Real hosts named default and tuned in an Ansible inventory; commands go through Ansible."""

    name = "ssh"
    service_manager = "systemd"
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
        """systemd's states in supervisord's words, as the local backend reports them."""
        states = {}
        for service in SERVICES:
            state = self.run_in(name, ["systemctl", "is-active", service]).stdout.strip()
            states[service] = {"active": "RUNNING", "inactive": "STOPPED"}.get(state, state.upper() or "UNKNOWN")
        return states

    def machine_status(self, name: str) -> dict:
        return {"name": name, "address": self.address(name)}

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return self._module(name, "ansible.builtin.command", json.dumps({"argv": argv}), argv, timeout)

    def _shell(self, name: str, script: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return self._module(name, "ansible.builtin.shell", script, [script], timeout)

    def _module(self, name: str, module: str, args: str, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
               "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg")}
        try:
            result = subprocess.run([str(VENV / "bin" / "ansible"), name, "-i", str(self.inventory), "-m", module,
                                     "-a", args], capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"no answer from {name} within {timeout:.0f} s")
        try:
            task = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"][name]
            return subprocess.CompletedProcess(argv, task.get("rc", 1), task.get("stdout", ""),
                                               task.get("stderr", "") or task.get("msg", ""))
        except (ValueError, KeyError, IndexError):
            return subprocess.CompletedProcess(argv, 255, "", result.stderr or result.stdout)

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status a service under the machine's systemd."""
        return self.run_in(name, ["systemctl", action, service])

    def home(self, name: str) -> str:
        """The machine's lab_home (a path on the machine, not on this host)."""
        return self.hostvars[name].get("lab_home") or _role_default_lab_home()

    def remove(self, name: str, glob: str) -> None:
        result = self._shell(name, f"rm -f -- {self.home(name)}/{glob}")
        if result.returncode != 0:
            raise StepFailed(f"{name}: could not remove {glob}: {result.stderr.strip()}")

    def begin_measurement(self, name: str) -> None:
        pass  # a real machine's kernel counters need no reset: memory_events gives a baseline

    def memory_events(self, name: str) -> dict:
        """OOM kills so far, from the machine's kernel (the whole machine is the lab's)."""
        vmstat = self.run_in(name, ["cat", "/proc/vmstat"]).stdout
        kills = re.search(r"^oom_kill (\d+)$", vmstat, re.M)
        return {"oom_kills": int(kills[1]) if kills else None, "peak_memory_bytes": None}

    def journal(self, name: str, since: float, until: float) -> str:
        """What systemd logged about the lab's services during the run."""
        units = [arg for service in SERVICES for arg in ("-u", service)]
        return self.run_in(name, ["journalctl", "--no-pager", "-o", "short-unix", "--since", f"@{int(since)}",
                                  "--until", f"@{int(until) + 2}", *units], timeout=60).stdout

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination over SSH (ansible/fetch.yml)."""
        with tempfile.TemporaryDirectory(prefix="lab-fetch-") as scratch:
            settings = Path(scratch) / "fetch.json"
            settings.write_text(json.dumps({"lab_fetch_root": self.home(name), "lab_fetch_globs": globs,
                                            "lab_fetch_dest": str(Path(scratch) / "files")}))
            env = {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg")}
            result = subprocess.run([str(VENV / "bin" / "ansible-playbook"), "-i", str(self.inventory),
                                     str(ANSIBLE_DIR / "fetch.yml"), "--limit", name, "-e", f"@{settings}"],
                                    capture_output=True, text=True, env=env, timeout=1800)
            fetched = Path(scratch) / "files" / name
            return Pulled(_place(sorted(fetched.rglob("*")), fetched, destination, shutil.move),
                          problem=None if result.returncode == 0 else
                          f"ansible-playbook fetch.yml exit {result.returncode}: {_tail(result.stdout, 5)}")


class VagrantBackend(SshBackend):
    """Two VMs from the Vagrantfile, provisioned over SSH with the vagrant inventory."""

    name = "vagrant"

    @property
    def emulation_note(self) -> str:
        # The Vagrantfile sizes the VMs from the same variable, with the same default.
        memory_mb = os.environ.get("LAB_VAGRANT_MEMORY_MB", "512")
        return f"vagrant backend: two VMs with {memory_mb} MiB and 2 vCPUs each"

    def __init__(self) -> None:
        if not shutil.which("vagrant"):
            raise StepFailed("--backend vagrant: 'vagrant' not found; install Vagrant with VirtualBox or "
                             "vagrant-libvirt (Debian: apt-get install vagrant vagrant-libvirt)")
        super().__init__(INVENTORIES / "vagrant" / "hosts.yml")
        self._states: dict[str, str] = {}
        self._states_read_at = float("-inf")

    def _vagrant(self, *args: str, log: str | None = None, timeout: float = 3600) -> subprocess.CompletedProcess:
        result = subprocess.run(["vagrant", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if log:
            LOGS.mkdir(parents=True, exist_ok=True)
            (LOGS / log).write_text(result.stdout + result.stderr)
        return result

    def up(self) -> None:
        # Provisioning is the lab's own next step (the same playbook the Vagrantfile's provisioner runs).
        # One after the other: libvirt's parallel start races the network set-up of the first VM.
        self._states_read_at = float("-inf")
        result = self._vagrant("up", "--no-provision", "--no-parallel", log="vagrant-up.log")
        if result.returncode != 0:
            raise StepFailed(f"vagrant up failed (exit {result.returncode}): {_tail(result.stderr or result.stdout)}"
                             f"\n    full log: {LOGS / 'vagrant-up.log'}")

    def down(self) -> None:
        self._states_read_at = float("-inf")
        result = self._vagrant("destroy", "--force", log="vagrant-destroy.log")
        if result.returncode != 0:
            raise StepFailed(f"vagrant destroy failed (exit {result.returncode}): {_tail(result.stderr)}")

    def exists(self, name: str) -> bool:
        # One `vagrant status` (2-3 s) answers for both VMs: reused for a few seconds, as status asks per VM.
        if time.monotonic() - self._states_read_at > 10:
            self._states = vagrant_states(self._vagrant("status", "--machine-readable", timeout=120).stdout)
            self._states_read_at = time.monotonic()
        return self._states.get(name) == "running"


def vagrant_states(machine_readable: str) -> dict[str, str]:
    """`vagrant status --machine-readable` -> {machine: state}; lines are TIME,TARGET,TYPE,DATA."""
    states = {}
    for line in machine_readable.splitlines():
        fields = line.split(",", 3)
        if len(fields) == 4 and fields[2] == "state":
            states[fields[1]] = fields[3]
    return states


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def kvm_usable(cpuinfo: Path = Path("/proc/cpuinfo"), device: Path = Path("/dev/kvm")) -> bool:
    """Hardware virtualisation a guest kernel can use: /dev/kvm plus VT-x/AMD-V in the CPU flags
    (a /dev/kvm without them, as under some nested set-ups, only emulates and crawls)."""
    if not device.exists() or not os.access(device, os.R_OK | os.W_OK):
        return False
    try:
        flags = {flag for line in cpuinfo.read_text().splitlines() if line.startswith("flags")
                 for flag in line.split(":", 1)[1].split()}
    except OSError:
        return False
    return bool(flags & {"vmx", "svm"})


def _vagrant_plugins() -> str:
    try:
        return subprocess.run(["vagrant", "plugin", "list"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def default_backend(which=shutil.which, kvm=kvm_usable, plugins=_vagrant_plugins) -> tuple[str, str]:
    """The backend a bare ./start.sh uses, and why: Vagrant only where it has an accelerated provider."""
    if not which("vagrant"):
        return "local", "Vagrant is not installed"
    if which("VBoxManage"):
        return "vagrant", "Vagrant and VirtualBox are installed"
    if "vagrant-libvirt" not in plugins():
        return "local", "Vagrant is installed but neither VirtualBox nor vagrant-libvirt is"
    if not kvm():
        return "local", "Vagrant has libvirt but KVM is not usable here: no /dev/kvm with VT-x/AMD-V"
    return "vagrant", "Vagrant with libvirt and KVM is available"


def choose(name: str | None, inventory: Path | None):
    if name == "local":
        return LocalBackend()
    if name == "ssh":
        if inventory is None:
            raise StepFailed("--backend ssh needs --inventory PATH (see ansible/inventories/ssh/hosts.example.yml)")
        return SshBackend(inventory)
    if name == "vagrant":
        return VagrantBackend()
    raise StepFailed(f"unknown backend {name!r}: choose local, vagrant or ssh")
