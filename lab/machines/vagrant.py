"""The vagrant backend: two VMs from the Vagrantfile, provisioned over SSH with the vagrant inventory;
and which backend a bare ./start.sh picks on this host."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from lab.errors import StepFailed
from lab.machines.ssh import SshBackend, _tail
from lab.paths import INVENTORIES, LOGS, REPO


class VagrantBackend(SshBackend):
    """Two VMs from the Vagrantfile, provisioned over SSH with the vagrant inventory."""

    name = "vagrant"

    @property
    def memory_mb(self) -> int:
        """Each VM's RAM: the Vagrantfile sizes the VMs from the same variable, with the same default."""
        return int(os.environ.get("LAB_VAGRANT_MEMORY_MB", "512"))

    @property
    def emulation_note(self) -> str:
        note = f"vagrant backend: two VMs with {self.memory_mb} MiB and 2 vCPUs each"
        if self.engine_hosts:
            note += ", and a load generator's VM (LAB_VAGRANT_LOADGEN)"
        if self.emulated:
            # Every instruction emulated: figures many times slower than on hardware, and not its proportions.
            note += (", under QEMU's software emulation (no KVM): the figures are far below what the same "
                     "VMs do on hardware, and the ratio is the emulator's as much as the tuning's")
        return note

    @property
    def emulated(self) -> bool:
        """libvirt's qemu driver (the Vagrantfile's LAB_LIBVIRT_DRIVER): every instruction emulated in software."""
        return os.environ.get("LAB_LIBVIRT_DRIVER") == "qemu"

    def __init__(self) -> None:
        if not shutil.which("vagrant"):
            raise StepFailed("--backend vagrant: 'vagrant' not found; install Vagrant with VirtualBox or "
                             "vagrant-libvirt (Debian: apt-get install vagrant vagrant-libvirt)")
        super().__init__(vagrant_inventory())
        self._states: dict[str, str] = {}
        self._states_read_at = float("-inf")
        # Both machines are observed at once (lab/status.py): one `vagrant status` for both, never two at a time
        # (two at once in the VM test, one came back without the states, and a running VM was taken for absent).
        self._states_lock = threading.Lock()

    def _vagrant(self, *args: str, log: str | None = None, timeout: float = 3600) -> subprocess.CompletedProcess:
        result = subprocess.run(["vagrant", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if log:
            LOGS.mkdir(parents=True, exist_ok=True)
            (LOGS / log).write_text(result.stdout + result.stderr)
        return result

    def up(self) -> None:
        # Provisioning is the lab's own next step (the same playbook the Vagrantfile's provisioner runs), once both
        # VMs are up: they boot at once where the provider can (libvirt: it locks its box upload and network creation).
        self._states_read_at = float("-inf")
        result = self._vagrant("up", "--no-provision", log="vagrant-up.log")
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
        with self._states_lock:
            if time.monotonic() - self._states_read_at > 10:
                self._states = vagrant_states(self._vagrant("status", "--machine-readable", timeout=120).stdout)
                self._states_read_at = time.monotonic()
            return self._states.get(name) == "running"


def vagrant_inventory(vagrant_dir: Path = REPO / ".vagrant") -> Path:
    """The Vagrantfile's VMs as an inventory: the two machines, and with LAB_VAGRANT_LOADGEN=1, or once Vagrant
    created it, the load generator's VM too (the Vagrantfile decides the same way)."""
    if os.environ.get("LAB_VAGRANT_LOADGEN") == "1" or any((vagrant_dir / "machines" / "loadgen1").glob("*/id")):
        return INVENTORIES / "vagrant-loadgen"
    return INVENTORIES / "vagrant" / "hosts.yml"


def vagrant_states(machine_readable: str) -> dict[str, str]:
    """`vagrant status --machine-readable` -> {machine: state}; lines are TIME,TARGET,TYPE,DATA."""
    states = {}
    for line in machine_readable.splitlines():
        fields = line.split(",", 3)
        if len(fields) == 4 and fields[2] == "state":
            states[fields[1]] = fields[3]
    return states


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
