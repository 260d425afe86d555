"""A local machine's init: its own supervisord, inside the machine's namespace and cgroup; and the
machine's life: up, down, status and the kernel's memory counters."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from lab.machines.local.cgroups import Cgroup, CgroupLayout, _read, _write, detect_cgroups
from lab.machines.local.machine import MACHINE_ENV, MARKER, LocalBackendError, Machine, _ip, _require_root, _run, _tool
from lab.machines.local.network import _check_address_free, _launcher, _link, _netns_exists, _network_up, _pids_in_netns


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
        raise LocalBackendError(
            f"supervisord of {m.name} did not daemonize within {timeout:.0f} s: see {launch_log}") from None
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
    m.supervisor_socket.parent.mkdir(mode=0o700, exist_ok=True)
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
    m.supervisor_socket.unlink(missing_ok=True)
    with contextlib.suppress(OSError):         # another machine's socket is still there
        m.supervisor_socket.parent.rmdir()
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
            "swap_limit_bytes": cgroup.swap_limit_bytes() if exists else None,
            "cpu_quota": cgroup.cpu_quota() if exists else None,
            "cpus": cgroup.cpuset() if exists else None,
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
