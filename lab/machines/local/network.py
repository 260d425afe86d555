"""A local machine's network: its namespace, the veth pair to the host, addresses; and entering it
(the launcher that puts a command into the machine's cgroup and namespace, as root or its user)."""
from __future__ import annotations

import ipaddress
import json
import os
import pwd
import shlex
import subprocess
from pathlib import Path

from lab.machines.local.cgroups import Cgroup, CgroupLayout, detect_cgroups
from lab.machines.local.machine import (
    INSIDE_IFNAME,
    LocalBackendError,
    Machine,
    _ip,
    _require_root,
    _run,
    _tool,
)


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

