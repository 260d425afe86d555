"""The embedded local backend: each lab machine emulated on this Linux host, without a hypervisor.

A machine is
  * a network namespace ``<prefix>-<name>`` with its own address 10.213.<index>.2/30, reached from the
    host (10.213.<index>.1) through a veth pair (host side ``<prefix>-<name>``, machine side ``eth0``);
    inside it ``net.ipv4.ip_unprivileged_port_start=0`` so an unprivileged HTTPD can bind :80;
  * a cgroup ``<prefix>/<name>`` limiting memory (no swap) and CPU, on cgroup v2 or on v1 (hybrid
    hosts included), found through /proc/self/mounts;
  * a supervisord of its own (Debian's ``supervisor`` package) running as root inside both, playing
    the machine's init: programs are added as ``<root>/supervisor/conf.d/<program>.conf`` and
    ``supervisorctl -c <root>/supervisor/supervisord.conf update``; they inherit netns and cgroup.

Processes enter a machine through a tiny launcher: ``sh`` writes its own pid into the machine's
``cgroup.procs`` (every hierarchy) and then execs ``nsenter --net=/run/netns/<netns>`` and the
command, so nothing the command starts can escape the cgroup. ``nsenter --net`` is used rather than
``ip netns exec`` on purpose: ``ip netns exec`` also unshares the mount namespace and remounts /sys,
which hides /sys/fs/cgroup from the process, so a JVM started that way finds no cgroup mounts and
sizes itself from the host's RAM ("No metrics available for this platform").

Needs root, ``ip`` (iproute2), ``nsenter``/``setpriv`` (util-linux) and ``supervisord``/``supervisorctl``
(supervisor). Standard library only.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.machines.local.memory import MemoryModel
from lab.names import MACHINES

NETNS_DIR = Path("/run/netns")
# supervisord's control sockets: an AF_UNIX path holds at most 107 bytes, which a machine root under a deep
# checkout (or pytest's temporary folders) passes; root-only, like /run/netns.
SOCKET_DIR = Path("/run/camel-tuning-lab")
CGROUP_ROOT = Path("/sys/fs/cgroup")
MOUNTS_FILE = Path("/proc/self/mounts")
MARKER = ".camel-tuning-lab-machine"
INSIDE_IFNAME = "eth0"
CPU_PERIOD_US = 100_000
# The environment supervisord (and so every program of the machine) starts with: a VM's init does
# not inherit the caller's shell environment.
MACHINE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class LocalBackendError(LabError):
    """A clear, one-line, actionable failure of the local backend."""


@dataclass(frozen=True)
class Machine:
    name: str
    index: int
    root: Path
    memory_mb: int = 512
    cpus: float = 2.0
    swap_mb: int = 0                        # swap its cgroup may use (the memory model's)
    prefix: str = "ctlab"
    cpuset: tuple[int, ...] = ()            # CPUs of its own (a cpuset), when the placement gives it some
    cpu_weight: int = 100                   # its share of contended CPUs against its siblings (cgroup v2's scale)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        for what, value in (("machine name", self.name), ("prefix", self.prefix)):
            if not _NAME.match(value):
                raise LocalBackendError(f"{what} {value!r} is not valid: use lower-case letters, digits and '-'")
        if len(self.netns) > 15:
            raise LocalBackendError(
                f"interface name {self.netns!r} is {len(self.netns)} characters, Linux allows 15: "
                f"use a shorter machine name or prefix")
        if not 1 <= self.index <= 254:
            raise LocalBackendError(f"machine index {self.index} must be within 1..254 (subnet 10.213.<index>.0/30)")
        if not self.root.is_absolute() or self.root == Path("/"):
            raise LocalBackendError(f"machine root {self.root} must be an absolute directory other than /")
        if not 1 <= self.cpu_weight <= 10_000:
            raise LocalBackendError(f"machine {self.name}: cpu_weight {self.cpu_weight} is not within 1..10000")
        if self.memory_mb <= 0 or self.cpus <= 0 or self.swap_mb < 0:
            raise LocalBackendError(f"machine {self.name}: memory_mb and cpus must be positive, swap_mb not negative")

    @property
    def host_address(self) -> str:
        return f"10.213.{self.index}.1"

    @property
    def address(self) -> str:
        return f"10.213.{self.index}.2"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.213.{self.index}.0/30")

    @property
    def netns(self) -> str:
        return f"{self.prefix}-{self.name}"

    @property
    def veth(self) -> str:
        return f"{self.prefix}-{self.name}"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def cgroup_name(self) -> str:
        return f"{self.prefix}/{self.name}"

    @property
    def supervisor_dir(self) -> Path:
        return self.root / "supervisor"

    @property
    def supervisord_conf(self) -> Path:
        return self.supervisor_dir / "supervisord.conf"

    @property
    def supervisor_include_dir(self) -> Path:
        return self.supervisor_dir / "conf.d"

    @property
    def supervisor_socket(self) -> Path:
        return SOCKET_DIR / f"{self.netns}.sock"

    @property
    def supervisord_pidfile(self) -> Path:
        return self.supervisor_dir / "supervisord.pid"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def memory_limit_bytes(self) -> int:
        return self.memory_mb * 1024 * 1024

    @property
    def swap_limit_bytes(self) -> int:
        return self.swap_mb * 1024 * 1024

    @property
    def cpu_quota_us(self) -> int:
        return int(round(self.cpus * CPU_PERIOD_US))

    @property
    def cpu_shares(self) -> int:
        """cpu_weight on cgroup v1's scale (cpu.shares: 1024 for v2's default 100)."""
        return max(2, self.cpu_weight * 1024 // 100)


def machines(root: Path, cpusets: dict[str, tuple[int, ...]] | None = None,
             memory: MemoryModel | None = None) -> dict[str, Machine]:
    """The lab's two machines, under ``root/machines/<name>``, each pinned to its CPUs in cpusets if any, with
    the memory model's limit and swap."""
    root, memory = Path(root), memory or MemoryModel()
    return {name: Machine(name, index, root / "machines" / name, memory_mb=memory.limit_mib, swap_mb=memory.swap_mib,
                          cpuset=tuple((cpusets or {}).get(name, ())))
            for index, name in enumerate(MACHINES, start=1)}



def _require_root() -> None:
    if os.geteuid() != 0:
        raise LocalBackendError(
            "the local backend needs root to create network namespaces and cgroups: run with sudo")


def _tool(name: str, package: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin")
    if not path:
        raise LocalBackendError(f"'{name}' not found: install the '{package}' package (apt-get install -y {package})")
    return path


def _ip() -> str:
    return _tool("ip", "iproute2")


def _run(argv: list[str], what: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().replace("\n", " | ")
        raise LocalBackendError(f"{what} failed ({shlex.join(argv)}): {detail}")
    return result

