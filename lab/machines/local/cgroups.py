"""A local machine's cgroup, on cgroup v2 or v1 (hybrid hosts included), found through /proc/self/mounts."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab.machines.local.machine import CGROUP_ROOT, CPU_PERIOD_US, MOUNTS_FILE, LocalBackendError, Machine
from lab.placement import cpulist, host_cpus, parse_cpulist

_V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "cpuset")
_UNLIMITED_V1 = 1 << 62  # v1 reports "no limit" as a page-rounded LONG_MAX


@dataclass(frozen=True)
class CgroupLayout:
    """Where the cgroup controllers live. v2: one unified ``root``; v1: a mount point per controller."""
    version: int
    root: Path | None = None                                   # v2
    v1_mounts: dict[str, Path] = field(default_factory=dict)   # v1: controller -> mount point
    controllers: frozenset[str] = frozenset()                  # v2: what root/cgroup.controllers offers


def _unescape_mount(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), path)


def detect_cgroups(cgroup_root: Path | None = None, mounts_file: Path | None = None) -> CgroupLayout:
    """v2 if ``<cgroup_root>/cgroup.controllers`` exists, else v1 controllers from the mounts table.

    Both paths are injectable so tests can point them at fake trees.
    """
    cgroup_root = Path(cgroup_root or CGROUP_ROOT)
    mounts_file = Path(mounts_file or MOUNTS_FILE)
    if (cgroup_root / "cgroup.controllers").is_file():
        return _v2_layout(cgroup_root)
    v1: dict[str, Path] = {}
    unified: list[Path] = []
    try:
        lines = mounts_file.read_text().splitlines()
    except OSError as error:
        raise LocalBackendError(f"cannot read {mounts_file} to find the cgroup controllers: {error}") from error
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, fs_type, options = Path(_unescape_mount(fields[1])), fields[2], fields[3].split(",")
        if fs_type == "cgroup":
            for controller in options:
                v1.setdefault(controller, mount_point)
        elif fs_type == "cgroup2":
            unified.append(mount_point)
    if "memory" in v1:
        return CgroupLayout(version=1, v1_mounts={c: v1[c] for c in _V1_CONTROLLERS if c in v1})
    for mount_point in unified:  # a cgroup2 mounted somewhere unusual that does offer memory
        layout = _v2_layout(mount_point)
        if "memory" in layout.controllers:
            return layout
    raise LocalBackendError(
        "no cgroup memory controller available (neither cgroup v2 with 'memory' in "
        f"{cgroup_root}/cgroup.controllers nor a v1 'memory' mount in {mounts_file}): "
        "enable the memory cgroup (kernel parameter cgroup_enable=memory) or run on a host that has it")


def _v2_layout(root: Path) -> CgroupLayout:
    try:
        controllers = frozenset((root / "cgroup.controllers").read_text().split())
    except OSError:
        controllers = frozenset()
    return CgroupLayout(version=2, root=root, controllers=controllers)


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as sink:
            sink.write(value)
    except OSError as error:
        raise LocalBackendError(f"cannot write {value!r} to {path}: {error.strerror or error}") from error


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class Cgroup:
    """The machine's cgroup in every hierarchy that matters (v1: memory, cpu, cpuacct; v2: one dir)."""

    def __init__(self, machine: Machine, layout: CgroupLayout) -> None:
        self.machine = machine
        self.layout = layout

    # -- where
    def _v1_dirs(self) -> dict[str, Path]:
        """Its directory in each v1 hierarchy; the cpuset one only when pinned (or left by a pinned machine):
        a v1 cpuset takes no process before its CPUs are set."""
        dirs = {controller: mount / self.machine.cgroup_name for controller, mount in self.layout.v1_mounts.items()}
        if "cpuset" in dirs and not self.machine.cpuset and not dirs["cpuset"].is_dir():
            del dirs["cpuset"]
        return dirs

    @property
    def paths(self) -> list[Path]:
        """The machine's cgroup directories, one per distinct hierarchy."""
        if self.layout.version == 2:
            assert self.layout.root is not None     # v2: a layout with its unified root
            return [self.layout.root / self.machine.cgroup_name]
        unique: list[Path] = []
        for path in self._v1_dirs().values():
            if path not in unique:
                unique.append(path)
        return unique

    @property
    def memory_dir(self) -> Path:
        return self.paths[0] if self.layout.version == 2 else self._v1_dirs()["memory"]

    @property
    def cpu_dir(self) -> Path | None:
        if self.layout.version == 2:
            return self.paths[0] if "cpu" in self.layout.controllers else None
        return self._v1_dirs().get("cpu")

    @property
    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.paths]

    def exists(self) -> bool:
        return all(path.is_dir() for path in self.paths)

    # -- create and limit
    def create(self) -> None:
        """Make the directories and apply the limits; harmless when already done."""
        if self.layout.version == 2:
            self._create_v2()
        else:
            self._create_v1()

    def _create_v1(self) -> None:
        m = self.machine
        mount = self.layout.v1_mounts.get("cpuset")
        if m.cpuset:        # before any directory exists: a refused machine leaves no empty cpuset behind
            if mount is None:
                raise LocalBackendError(f"machine {m.name} is to run on CPUs {cpulist(m.cpuset)}, but this host "
                                        "mounts no v1 cpuset controller")
            self._check_cpus(_read(mount / "cpuset.effective_cpus") or _read(mount / "cpuset.cpus") or "")
        for path in self.paths:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise LocalBackendError(f"cannot create cgroup {path}: {error.strerror or error}") from error
        memory = self.memory_dir
        memsw = memory / "memory.memsw.limit_in_bytes"
        limit, with_swap = m.memory_limit_bytes, m.memory_limit_bytes + m.swap_limit_bytes
        if m.swap_mb and not memsw.exists():
            raise LocalBackendError(f"machine {m.name} is to have {m.swap_mb} MiB of swap, but this kernel does no "
                                    "swap accounting (no memory.memsw.limit_in_bytes: boot with swapaccount=1), so "
                                    "its cgroup could not be limited to it: ./start.sh up --swap 0")
        if (memory / "memory.swappiness").exists():
            # 60: the kernel's default, as in a VM with swap; 0: none. Before a lower limit, which may have to swap.
            _write(memory / "memory.swappiness", "60" if m.swap_mb else "0")
        # The kernel keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes: a raise of memsw comes first (and
        # lets a lowered memory limit swap).
        current_memsw = _read(memsw) if memsw.exists() else None
        if current_memsw is not None and int(current_memsw) < with_swap:
            _write(memsw, str(with_swap))
        _lower_v1(memory / "memory.limit_in_bytes", limit)
        if memsw.exists():
            _write(memsw, str(with_swap))
        cpu = self.cpu_dir
        if cpu is not None:
            _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", str(m.cpu_quota_us))
            _write(cpu / "cpu.shares", str(m.cpu_shares))
        if m.cpuset and mount is not None:
            # A new v1 cpuset has no CPUs and no memory nodes, and takes no process until it has both: the
            # prefix gets the root's (both machines fit in it), the leaf its own CPUs and the prefix's nodes.
            prefix, leaf = mount / m.prefix, mount / m.cgroup_name
            for name in ("cpuset.cpus", "cpuset.mems"):
                if not _read(prefix / name):
                    _write(prefix / name, _read(mount / name) or "")
            _write(leaf / "cpuset.cpus", cpulist(m.cpuset))
            if not _read(leaf / "cpuset.mems"):
                _write(leaf / "cpuset.mems", _read(prefix / "cpuset.mems") or "")

    def _check_cpus(self, offered: str) -> None:
        missing = sorted(set(self.machine.cpuset) - set(parse_cpulist(offered)))
        if missing:
            raise LocalBackendError(f"machine {self.machine.name} is to run on CPUs {cpulist(self.machine.cpuset)}, "
                                    f"but this host's cgroups offer {offered or 'none'}")

    def _create_v2(self) -> None:
        m, root = self.machine, self.layout.root
        assert root is not None                     # v2: a layout with its unified root
        if "memory" not in self.layout.controllers:
            raise LocalBackendError(
                f"cgroup v2 at {root} offers no memory controller (cgroup.controllers: "
                f"{' '.join(sorted(self.layout.controllers)) or 'empty'}): enable it in the parent cgroup")
        wanted: list[str] = [c for c in ("memory", "cpu") if c in self.layout.controllers]
        if m.cpuset:
            if "cpuset" not in self.layout.controllers:
                raise LocalBackendError(f"machine {m.name} is to run on CPUs {cpulist(m.cpuset)}, but cgroup v2 at "
                                        f"{root} offers no cpuset controller")
            self._check_cpus(_read(root / "cpuset.cpus.effective") or cpulist(host_cpus()))
            wanted.append("cpuset")
        parent = root / m.prefix
        leaf = root / m.cgroup_name
        for cgroup in (root, parent):
            if cgroup != root:
                try:
                    cgroup.mkdir(exist_ok=True)
                except OSError as error:
                    raise LocalBackendError(f"cannot create cgroup {cgroup}: {error.strerror or error}") from error
            enabled = set((_read(cgroup / "cgroup.subtree_control") or "").split())
            missing = [c for c in wanted if c not in enabled]
            if missing:
                try:
                    with open(cgroup / "cgroup.subtree_control", "w") as sink:
                        sink.write(" ".join(f"+{c}" for c in missing))
                except OSError as error:
                    hint = (" (processes live in that cgroup: cgroup v2 allows controllers only for cgroups "
                            "without processes; in a container, run it with its own cgroup namespace root free "
                            "or use a host)") if error.errno == 16 else ""
                    raise LocalBackendError(
                        f"cannot enable {' '.join(missing)} in {cgroup}/cgroup.subtree_control: "
                        f"{error.strerror or error}{hint}") from error
        try:
            leaf.mkdir(exist_ok=True)
        except OSError as error:
            raise LocalBackendError(f"cannot create cgroup {leaf}: {error.strerror or error}") from error
        try:  # absent when the kernel does no swap accounting: then there is nothing to forbid
            with open(leaf / "memory.swap.max", "w") as sink:
                sink.write(str(m.swap_limit_bytes))
        except OSError:
            if m.swap_mb:
                raise LocalBackendError(f"machine {m.name} is to have {m.swap_mb} MiB of swap, but {leaf} has no "
                                        "memory.swap.max (no swap accounting): ./start.sh up --swap 0") from None
        _write(leaf / "memory.max", str(m.memory_limit_bytes))      # after swap.max: a lower limit may swap
        if "cpu" in wanted:
            _write(leaf / "cpu.max", f"{m.cpu_quota_us} {CPU_PERIOD_US}")
            _write(leaf / "cpu.weight", str(m.cpu_weight))
        if m.cpuset:
            _write(leaf / "cpuset.cpus", cpulist(m.cpuset))

    # -- read
    def memory_limit_bytes(self) -> int | None:
        if self.layout.version == 2:
            value = _read(self.memory_dir / "memory.max")
            return int(value) if value and value != "max" else None
        value = _read(self.memory_dir / "memory.limit_in_bytes")
        return int(value) if value and int(value) < _UNLIMITED_V1 else None

    def swap_limit_bytes(self) -> int | None:
        """The swap the cgroup may use; None when unlimited or not accounted."""
        if self.layout.version == 2:
            value = _read(self.memory_dir / "memory.swap.max")
            return int(value) if value and value != "max" else None
        both, memory = _read(self.memory_dir / "memory.memsw.limit_in_bytes"), self.memory_limit_bytes()
        return int(both) - memory if both and int(both) < _UNLIMITED_V1 and memory is not None else None

    def cpu_quota(self) -> float | None:
        cpu = self.cpu_dir
        if cpu is None:
            return None
        if self.layout.version == 2:
            value = _read(cpu / "cpu.max")
            if not value:
                return None
            quota, _, period = value.partition(" ")
            return None if quota == "max" else int(quota) / int(period or CPU_PERIOD_US)
        quota_us, period_us = _read(cpu / "cpu.cfs_quota_us"), _read(cpu / "cpu.cfs_period_us")
        if not quota_us or not period_us or int(quota_us) < 0:
            return None
        return int(quota_us) / int(period_us)

    def cpuset(self) -> str | None:
        """The CPUs the machine may run on, as its cpuset says (None when it has none of its own)."""
        if self.layout.version == 2:
            return _read(self.paths[0] / "cpuset.cpus") or None
        path = self._v1_dirs().get("cpuset")
        return _read(path / "cpuset.cpus") if path is not None else None

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files:
            text = _read(procs)
            if text:
                found.update(int(pid) for pid in text.split())
        return found

    # -- remove
    def remove(self, timeout: float = 10.0) -> None:
        """rmdir the machine's cgroups (they must be empty of processes), then the prefix dir if unused."""
        for path in self.paths:
            deadline = time.monotonic() + timeout
            while path.exists():
                try:
                    path.rmdir()
                except FileNotFoundError:
                    break
                except OSError as error:
                    if time.monotonic() > deadline:
                        raise LocalBackendError(
                            f"cannot remove cgroup {path}: {error.strerror or error} "
                            f"(processes left: {sorted(self.pids())})") from error
                    time.sleep(0.05)
            try:
                path.parent.rmdir()  # the shared "<prefix>" dir, when no other machine uses it
            except OSError:
                pass


LOWER_STEP = 16 * 1024 * 1024


def _lower_v1(path: Path, limit: int) -> None:
    """A v1 memory limit, lowered in steps when the cgroup uses more: the kernel reclaims (or swaps) only so much
    per write before it answers EBUSY (a running machine given a smaller memory model)."""
    try:
        _write(path, str(limit))
        return
    except LocalBackendError:
        usage = _read(path.with_name("memory.usage_in_bytes"))
        if not usage:
            raise
    for target in range(int(usage) - LOWER_STEP, limit, -LOWER_STEP):
        for _ in range(3):
            try:
                _write(path, str(target))
                break
            except LocalBackendError:
                time.sleep(0.2)
    _write(path, str(limit))
