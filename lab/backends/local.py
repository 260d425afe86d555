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
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

NETNS_DIR = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
MOUNTS_FILE = Path("/proc/self/mounts")
MARKER = ".camel-tuning-lab-machine"
INSIDE_IFNAME = "eth0"
CPU_PERIOD_US = 100_000
# The environment supervisord (and so every program of the machine) starts with: a VM's init does
# not inherit the caller's shell environment.
MACHINE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_V1_CONTROLLERS = ("memory", "cpu", "cpuacct")
_UNLIMITED_V1 = 1 << 62  # v1 reports "no limit" as a page-rounded LONG_MAX


class LocalBackendError(Exception):
    """A clear, one-line, actionable failure of the local backend."""


@dataclass(frozen=True)
class Machine:
    name: str
    index: int
    root: Path
    memory_mb: int = 512
    cpus: float = 2.0
    prefix: str = "ctlab"

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
        if self.memory_mb <= 0 or self.cpus <= 0:
            raise LocalBackendError(f"machine {self.name}: memory_mb and cpus must be positive")

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
        return self.supervisor_dir / "supervisor.sock"

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
    def cpu_quota_us(self) -> int:
        return int(round(self.cpus * CPU_PERIOD_US))


def machines(root: Path) -> dict[str, Machine]:
    """The lab's two machines, under ``root/machines/<name>``."""
    root = Path(root)
    return {name: Machine(name, index, root / "machines" / name) for name, index in (("default", 1), ("tuned", 2))}


# --------------------------------------------------------------------------------------------- cgroups

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
        return {controller: mount / self.machine.cgroup_name for controller, mount in self.layout.v1_mounts.items()}

    @property
    def paths(self) -> list[Path]:
        """The machine's cgroup directories, one per distinct hierarchy."""
        if self.layout.version == 2:
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
        for path in self.paths:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise LocalBackendError(f"cannot create cgroup {path}: {error.strerror or error}") from error
        memory = self.memory_dir
        memsw = memory / "memory.memsw.limit_in_bytes"
        limit = str(m.memory_limit_bytes)
        # The kernel keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes: raise memsw first.
        current_memsw = _read(memsw) if memsw.exists() else None
        if current_memsw is not None and int(current_memsw) < m.memory_limit_bytes:
            _write(memsw, limit)
        _write(memory / "memory.limit_in_bytes", limit)
        if memsw.exists():
            _write(memsw, limit)
        if (memory / "memory.swappiness").exists():
            _write(memory / "memory.swappiness", "0")
        cpu = self.cpu_dir
        if cpu is not None:
            _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", str(m.cpu_quota_us))

    def _create_v2(self) -> None:
        m, root = self.machine, self.layout.root
        if "memory" not in self.layout.controllers:
            raise LocalBackendError(
                f"cgroup v2 at {root} offers no memory controller (cgroup.controllers: "
                f"{' '.join(sorted(self.layout.controllers)) or 'empty'}): enable it in the parent cgroup")
        wanted = [c for c in ("memory", "cpu") if c in self.layout.controllers]
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
        _write(leaf / "memory.max", str(m.memory_limit_bytes))
        try:  # absent when the kernel does no swap accounting: then there is nothing to forbid
            with open(leaf / "memory.swap.max", "w") as sink:
                sink.write("0")
        except OSError:
            pass
        if "cpu" in wanted:
            _write(leaf / "cpu.max", f"{m.cpu_quota_us} {CPU_PERIOD_US}")

    # -- read
    def memory_limit_bytes(self) -> int | None:
        if self.layout.version == 2:
            value = _read(self.memory_dir / "memory.max")
            return int(value) if value and value != "max" else None
        value = _read(self.memory_dir / "memory.limit_in_bytes")
        return int(value) if value and int(value) < _UNLIMITED_V1 else None

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
        quota, period = _read(cpu / "cpu.cfs_quota_us"), _read(cpu / "cpu.cfs_period_us")
        if not quota or not period or int(quota) < 0:
            return None
        return int(quota) / int(period)

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


# ---------------------------------------------------------------------------------------------- checks

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


# --------------------------------------------------------------------------------------------- network

def _netns_exists(m: Machine) -> bool:
    return m.netns_path.exists()


def _links(netns: str | None = None) -> list[dict]:
    argv = [_ip(), "-j", "-d"] + (["-n", netns] if netns else []) + ["link", "show"]
    result = _run(argv, "listing links", check=False)
    return json.loads(result.stdout or "[]") if result.returncode == 0 else []


def _link(name: str, netns: str | None = None) -> dict | None:
    return next((link for link in _links(netns) if link.get("ifname") == name), None)


def _check_address_free(m: Machine) -> None:
    result = _run([_ip(), "-j", "-4", "addr", "show"], "listing addresses")
    for link in json.loads(result.stdout or "[]"):
        if link.get("ifname") == m.veth:
            continue
        for info in link.get("addr_info", []):
            network = ipaddress.IPv4Interface(f"{info['local']}/{info.get('prefixlen', 32)}").network
            if network.overlaps(m.network):
                raise LocalBackendError(
                    f"address {info['local']}/{info.get('prefixlen')} on interface {link.get('ifname')} overlaps "
                    f"machine {m.name}'s subnet {m.network}: remove it or give the machine another index")


def _network_up(m: Machine) -> None:
    ip = _ip()
    created_netns = False
    if not _netns_exists(m):
        _run([ip, "netns", "add", m.netns], f"creating network namespace {m.netns}")
        created_netns = True
    host_link = _link(m.veth)
    if host_link is not None:
        kind = host_link.get("linkinfo", {}).get("info_kind")
        if kind != "veth":
            raise LocalBackendError(
                f"interface {m.veth} already exists and is not a veth ({kind or 'no kind'}): "
                f"remove it (ip link del {m.veth}) or use another machine name/prefix")
        if created_netns or _link(INSIDE_IFNAME, m.netns) is None:
            # Its peer lives in some other (orphaned) namespace: start the pair afresh.
            _run([ip, "link", "del", m.veth], f"removing stale veth {m.veth}")
            host_link = None
    if host_link is None:
        _run([ip, "link", "add", m.veth, "type", "veth", "peer", "name", INSIDE_IFNAME, "netns", m.netns],
             f"creating veth pair {m.veth} <-> {m.netns}:{INSIDE_IFNAME}")
    prefixlen = m.network.prefixlen
    _run([ip, "addr", "replace", f"{m.host_address}/{prefixlen}", "dev", m.veth], f"addressing {m.veth}")
    _run([ip, "link", "set", m.veth, "up"], f"bringing {m.veth} up")
    _run([ip, "-n", m.netns, "addr", "replace", f"{m.address}/{prefixlen}", "dev", INSIDE_IFNAME],
         f"addressing {m.netns}:{INSIDE_IFNAME}")
    _run([ip, "-n", m.netns, "link", "set", INSIDE_IFNAME, "up"], f"bringing {m.netns}:{INSIDE_IFNAME} up")
    _run([ip, "-n", m.netns, "link", "set", "lo", "up"], f"bringing {m.netns}:lo up")
    # A per-netns sysctl: /proc/sys/net shows the namespace of whoever opens it.
    _run(_enter_netns(m) + ["sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start"],
         f"setting net.ipv4.ip_unprivileged_port_start=0 in {m.netns}")


def _enter_netns(m: Machine) -> list[str]:
    return [_tool("nsenter", "util-linux"), f"--net={m.netns_path}", "--"]


def _netns_inode(m: Machine) -> int | None:
    try:
        return m.netns_path.stat().st_ino
    except OSError:
        return None


def _pids_in_netns(m: Machine) -> set[int]:
    inode = _netns_inode(m)
    if inode is None:
        return set()
    wanted, found = f"net:[{inode}]", set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "net") == wanted:
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


# ------------------------------------------------------------------------------------- entering a machine

def _launcher(m: Machine, cgroup: Cgroup, argv: list[str], user: str | int | None = None,
              group: str | int | None = None) -> list[str]:
    """argv run inside the machine: join every cgroup hierarchy, then the netns, then drop to user."""
    joins = " && ".join(f"echo $$ > {shlex.quote(str(procs))}" for procs in cgroup.procs_files)
    script = f'{joins} || exit 125; exec "$@"'
    drop: list[str] = []
    if user is not None:
        drop = _setpriv(user, group)
    return ["sh", "-c", script, f"{m.prefix}-enter"] + _enter_netns(m) + drop + list(argv)


def _setpriv(user: str | int, group: str | int | None) -> list[str]:
    try:
        entry = pwd.getpwnam(user) if isinstance(user, str) and not user.isdigit() else pwd.getpwuid(int(user))
    except KeyError as error:
        raise LocalBackendError(f"user {user!r} does not exist: create it (useradd --system {user})") from error
    gid = group if group is not None else entry.pw_gid
    return [_tool("setpriv", "util-linux"), f"--reuid={entry.pw_uid}", f"--regid={gid}", "--init-groups", "--"]


def _require_up(m: Machine, cgroup: Cgroup) -> None:
    if not _netns_exists(m) or not cgroup.exists():
        raise LocalBackendError(f"machine {m.name} is not up (no netns {m.netns} or cgroup {m.cgroup_name}): "
                                f"run up() first")


def run_in(m: Machine, argv: list[str], *, user: str | int | None = None, group: str | int | None = None,
           cgroups: CgroupLayout | None = None, **subprocess_kwargs) -> subprocess.CompletedProcess:
    """Run argv inside the machine's netns and cgroup (as root, or as ``user`` via setpriv).

    Extra keyword arguments go to subprocess.run (capture_output, text, timeout, env, ...).
    """
    _require_root()
    cgroup = Cgroup(m, cgroups or detect_cgroups())
    _require_up(m, cgroup)
    return subprocess.run(_launcher(m, cgroup, argv, user, group), **subprocess_kwargs)


# -------------------------------------------------------------------------------------------- supervisor

def supervisord_conf_text(m: Machine) -> str:
    s = m.supervisor_dir
    return (
        "; Written by lab.backends.local: this machine's init. Programs go in conf.d/*.conf.\n"
        "[unix_http_server]\n"
        f"file={m.supervisor_socket}\n"
        "chmod=0700\n\n"
        "[supervisord]\n"
        f"logfile={m.log_dir / 'supervisord.log'}\n"
        f"pidfile={m.supervisord_pidfile}\n"
        f"childlogdir={m.log_dir}\n"
        "nodaemon=false\n"
        "user=root\n"
        f"identifier={m.netns}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        "[supervisorctl]\n"
        f"serverurl=unix://{m.supervisor_socket}\n\n"
        "[include]\n"
        f"files = {s / 'conf.d'}/*.conf\n")


def supervisorctl(m: Machine, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``supervisorctl -c <machine conf> args...``; output captured as text, never raises on exit status."""
    _require_root()
    return subprocess.run([_tool("supervisorctl", "supervisor"), "-c", str(m.supervisord_conf), *args],
                          capture_output=True, text=True, timeout=timeout)


def _supervisord_pid(m: Machine) -> int | None:
    """The pid of this machine's running supervisord, from its pidfile, checked against /proc."""
    text = _read(m.supervisord_pidfile)
    if not text or not text.isdigit():
        return None
    pid = int(text)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if any(b"supervisord" in part for part in cmdline) and str(m.supervisord_conf).encode() in cmdline:
        return pid
    return None


def _start_supervisord(m: Machine, cgroup: Cgroup, timeout: float = 20.0) -> int:
    supervisord = _tool("supervisord", "supervisor")
    _tool("supervisorctl", "supervisor")
    m.supervisord_pidfile.unlink(missing_ok=True)
    launch_log = m.log_dir / "supervisord.launch.log"
    with launch_log.open("w") as sink:
        # Own session: not in the caller's process group, survives the caller.
        launcher = subprocess.Popen(_launcher(m, cgroup, [supervisord, "-c", str(m.supervisord_conf)]),
                                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd="/", env=dict(MACHINE_ENV), close_fds=True)
    try:
        code = launcher.wait(timeout=timeout)  # supervisord daemonizes: the launcher returns at once
    except subprocess.TimeoutExpired:
        launcher.kill()
        raise LocalBackendError(f"supervisord of {m.name} did not daemonize within {timeout:.0f} s: see {launch_log}")
    if code != 0:
        tail = launch_log.read_text(errors="replace").strip().splitlines()[-3:]
        raise LocalBackendError(f"supervisord of {m.name} failed to start (exit {code}): {' | '.join(tail)}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _supervisord_pid(m)
        if pid is not None and supervisorctl(m, "pid", timeout=10).returncode == 0:
            return pid
        time.sleep(0.1)
    raise LocalBackendError(f"supervisord of {m.name} did not answer within {timeout:.0f} s: "
                            f"see {m.log_dir / 'supervisord.log'}")


# --------------------------------------------------------------------------------------------- lifecycle

def _prepare_dirs(m: Machine) -> None:
    if m.root.exists() and not (m.root / MARKER).exists() and any(m.root.iterdir()):
        raise LocalBackendError(f"{m.root} exists and is not a machine directory (no {MARKER}): "
                                f"empty it or choose another root")
    m.root.mkdir(parents=True, exist_ok=True)
    marker = m.root / MARKER
    if not marker.exists():
        marker.write_text(json.dumps({"name": m.name, "index": m.index, "prefix": m.prefix}) + "\n")
    for directory in (m.supervisor_dir, m.supervisor_include_dir, m.log_dir):
        directory.mkdir(exist_ok=True)
    text = supervisord_conf_text(m)
    if _read(m.supervisord_conf) != text.strip():
        m.supervisord_conf.write_text(text)


def up(m: Machine, *, cgroups: CgroupLayout | None = None) -> None:
    """Bring the machine up: netns, veth, addresses, cgroup with limits, dirs, supervisord. Idempotent."""
    _require_root()
    _ip()
    _tool("nsenter", "util-linux")
    _tool("supervisord", "supervisor")
    _tool("supervisorctl", "supervisor")
    cgroup = Cgroup(m, cgroups or detect_cgroups())
    _check_address_free(m)
    _prepare_dirs(m)
    _network_up(m)
    cgroup.create()
    if _supervisord_pid(m) is None:
        _start_supervisord(m, cgroup)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill_all(pids_now, timeout: float) -> set[int]:
    """SIGKILL whatever pids_now() returns until it returns nothing alive; the survivors, if any."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid for pid in pids_now() if pid != os.getpid() and _alive(pid)}
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def down(m: Machine, *, cgroups: CgroupLayout | None = None, stop_timeout: float = 30.0) -> None:
    """Stop everything the machine runs and remove netns, veth, cgroups and its root dir. Idempotent."""
    _require_root()
    ip = _ip()
    cgroup = Cgroup(m, cgroups or detect_cgroups())
    pid = _supervisord_pid(m)
    if pid is not None:
        if m.supervisor_socket.exists():
            try:
                supervisorctl(m, "shutdown", timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                pass
        else:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + stop_timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    left = _kill_all(lambda: cgroup.pids() | _pids_in_netns(m), timeout=10)
    if left:
        raise LocalBackendError(f"processes {sorted(left)} of machine {m.name} survived SIGKILL: check them (ps -p ...)")
    cgroup.remove()
    if _link(m.veth) is not None:
        _run([ip, "link", "del", m.veth], f"removing veth {m.veth}")
    if _netns_exists(m):
        _run([ip, "netns", "del", m.netns], f"removing network namespace {m.netns}")
    if m.root.exists():
        if (m.root / MARKER).exists():
            shutil.rmtree(m.root)
        elif not any(m.root.iterdir()):
            m.root.rmdir()
        else:
            raise LocalBackendError(f"not removing {m.root}: it has no {MARKER}, so up() did not make it")


def status(m: Machine, *, cgroups: CgroupLayout | None = None) -> dict:
    """What exists of the machine, as JSON-able data (reads only)."""
    layout = cgroups or detect_cgroups()
    cgroup = Cgroup(m, layout)
    pid = _supervisord_pid(m)
    programs: dict[str, str] = {}
    if pid is not None and os.geteuid() == 0:
        result = supervisorctl(m, "status", timeout=30)
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and not line.startswith(("unix://", "error")):
                programs[parts[0]] = parts[1]
    exists = cgroup.exists()
    return {
        "name": m.name,
        "address": m.address,
        "host_address": m.host_address,
        "netns": _netns_exists(m),
        "cgroup": {
            "version": layout.version,
            "paths": [str(path) for path in cgroup.paths if path.is_dir()],
            "memory_limit_bytes": cgroup.memory_limit_bytes() if exists else None,
            "cpu_quota": cgroup.cpu_quota() if exists else None,
        },
        "supervisord": {"running": pid is not None, "pid": pid},
        "programs": programs,
    }


def _memory_file(m: Machine, v1_name: str, v2_name: str, cgroups: CgroupLayout | None) -> Path:
    layout = cgroups or detect_cgroups()
    return Cgroup(m, layout).memory_dir / (v1_name if layout.version == 1 else v2_name)


def reset_memory_peak(m: Machine, *, cgroups: CgroupLayout | None = None) -> bool:
    """Restarts the machine's peak-memory counter (v1 always; v2 from Linux 6.12). False if it can't."""
    try:
        _write(_memory_file(m, "memory.max_usage_in_bytes", "memory.peak", cgroups), "0")
        return True
    except (OSError, LocalBackendError):
        return False


def memory_events(m: Machine, *, cgroups: CgroupLayout | None = None) -> dict:
    """The kernel's own account of the machine's memory: peak usage and OOM kills so far."""
    peak = _read(_memory_file(m, "memory.max_usage_in_bytes", "memory.peak", cgroups))
    counters = _read(_memory_file(m, "memory.oom_control", "memory.events", cgroups)) or ""
    oom = re.search(r"^oom_kill (\d+)$", counters, re.M)
    return {"peak_memory_bytes": int(peak) if peak and peak.strip().isdigit() else None,
            "oom_kills": int(oom[1]) if oom else None}
