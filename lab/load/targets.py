"""Where the load goes: each machine's base URL checked (the lab only loads its own machines: loopback
or private addresses) and split into what the plan's properties need."""
from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass
from typing import cast

from lab.load.profile import LoadError
from lab.names import MACHINES


class TargetError(LoadError, ValueError):
    """A target the lab will not load: named as given, with what to do."""


@dataclass
class _Target:
    machine: str
    protocol: str
    host: str
    port: int
    path: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}{self.path}"


def _allowed_address(host: str) -> bool:
    """Loopback, or private (RFC 1918/ULA/link-local: the lab's namespaces and VM networks)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise TargetError(f"cannot resolve target host {host!r}: {error}") from error
    for info in infos:
        ip = cast(str, info[4][0])         # an IP family's address: (host, port, ...), the host a string
        address = ipaddress.ip_address(ip.split("%")[0])
        if not (address.is_loopback or address.is_private or address.is_link_local):
            return False
    return True


def _parse_targets(targets: dict[str, str], path: str, allow_any_host: bool) -> list[_Target]:
    if not targets:
        raise TargetError("no targets: give {machine: base URL}")
    unknown = set(targets) - set(MACHINES)
    if unknown:
        raise TargetError(f"unknown machine(s) {sorted(unknown)}: the plan has thread groups {list(MACHINES)}")
    if not path.startswith("/"):
        raise TargetError(f"path must start with '/': {path!r}")
    parsed = []
    for machine in MACHINES:                    # the plan's order, whatever the dict's
        if machine not in targets:
            continue
        split = urllib.parse.urlsplit(targets[machine])
        if split.scheme not in ("http", "https") or not split.hostname:
            raise TargetError(f"{machine}: not an http(s) base URL: {targets[machine]!r}")
        if not allow_any_host and not _allowed_address(split.hostname):
            raise TargetError(f"{machine}: {split.hostname} is not a loopback or private address: the lab loads only "
                              "its own machines, on loopback or a private network; give the machines' private "
                              "addresses (ansible_host in the inventory)")
        port = split.port or (443 if split.scheme == "https" else 80)
        machine_path = split.path if split.path not in ("", "/") else path   # a URL path wins
        if split.query:
            machine_path += "?" + split.query
        parsed.append(_Target(machine, split.scheme, split.hostname, port, machine_path))
    return parsed



def check_targets(targets: dict[str, str], path: str) -> None:
    """Refuses targets the lab will not load (TargetError), before anything starts."""
    _parse_targets(targets, path, allow_any_host=False)
