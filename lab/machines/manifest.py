"""What a machine runs and where, as its provisioning wrote it: the one place the Python side learns
ports, the service path, the process names, the lab account and the evidence locations.

The lab role writes each machine's manifest (ansible/roles/lab/templates/manifest.json.j2) on the
machine ({{ lab_home }}/manifest.json) and here on the controller (.cache/manifests/<machine>.json);
before a machine was provisioned, the roles' defaults answer the few questions that need answering."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.errors import LabError
from lab.paths import ANSIBLE_DIR, REPO

MANIFESTS = REPO / ".cache" / "manifests"
SCHEMA = 1


class NotProvisioned(LabError):
    """A machine has no manifest: the playbook has not completed on it."""


@dataclass(frozen=True)
class Manifest:
    machine: str
    address: str
    home: str
    user: str
    group: str
    service_manager: str
    service_path: str
    ports: dict[str, int]
    processes: tuple[str, ...]
    pcp_archive: str                        # pmlogger's archive base, relative to home
    evidence: dict[str, list[str]]          # run-folder kind (pcp, gc, logs, crash) -> globs under home
    backend_url: str | None = None          # where the service calls the mock (absent from older manifests)
    app_path: str | None = None             # the service's own path, without HTTPD's proxied prefix (idem)
    tls_port: int | None = None             # TLS at HTTPD (httpd_tls_enabled): clients request https:// there
    tls_ca: str | None = None               # the lab's certificate authority that signed its certificate (controller)

    @property
    def client_port(self) -> int:
        """The port a client reaches HTTPD on: its TLS listener when it has one."""
        return self.tls_port or self.ports["httpd"]

    @property
    def base_url(self) -> str:
        """Where a client reaches HTTPD: over TLS when the machine has it (the write-up's way)."""
        if self.tls_port:
            return f"https://{self.address}{'' if self.tls_port == 443 else f':{self.tls_port}'}"
        port = self.ports["httpd"]
        return f"http://{self.address}{'' if port == 80 else f':{port}'}"

    @property
    def service_url(self) -> str:
        """The URL a client requests, through HTTPD."""
        return self.base_url + self.service_path

    def management_url(self, path: str) -> str:
        """The service's actuator (loopback only: reached from inside the machine)."""
        return f"http://127.0.0.1:{self.ports['app_management']}{path}"

    @property
    def server_status_url(self) -> str:
        """HTTPD's mod_status (loopback only)."""
        return f"http://127.0.0.1:{self.ports['httpd']}/server-status?auto"

    @property
    def pmcd(self) -> str:
        """pmcd as PCP's tools name it from inside the machine."""
        return f"127.0.0.1:{self.ports['pmcd']}"


def path_of(name: str, folder: Path = MANIFESTS) -> Path:
    return folder / f"{name}.json"


def read(name: str, folder: Path = MANIFESTS) -> Manifest:
    """The machine's manifest, or NotProvisioned saying what to do."""
    path = path_of(name, folder)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotProvisioned(f"machine {name} has no manifest ({path}): provision it with ./start.sh up") from None
    except (OSError, ValueError) as error:
        raise NotProvisioned(f"machine {name}: {path} is unreadable ({error}): run ./start.sh up again") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise NotProvisioned(f"machine {name}: {path} is not a schema-{SCHEMA} manifest: run ./start.sh up again")
    try:
        return Manifest(machine=data["machine"], address=data["address"], home=data["home"], user=data["user"],
                        group=data["group"], service_manager=data["service_manager"],
                        service_path=data["service_path"], ports={k: int(v) for k, v in data["ports"].items()},
                        processes=tuple(data["processes"]), pcp_archive=data["pcp_archive"],
                        evidence={k: list(v) for k, v in data["evidence"].items()},
                        backend_url=data.get("backend_url"), app_path=data.get("app_path"),
                        tls_port=int(data["tls"]["port"]) if data.get("tls") else None,
                        tls_ca=data["tls"]["ca"] if data.get("tls") else None)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise NotProvisioned(f"machine {name}: {path} lacks {error}: run ./start.sh up again") from None


def read_or_none(name: str, folder: Path = MANIFESTS) -> Manifest | None:
    try:
        return read(name, folder)
    except NotProvisioned:
        return None


def forget(name: str, folder: Path = MANIFESTS) -> None:
    """The machine is gone: so is what it ran."""
    path_of(name, folder).unlink(missing_ok=True)


def role_os_value(role: str, variable: str, family: str = "Debian") -> object:
    """A variable of a role's per-OS-family values (vars/<family>.yml), as the role uses on such a host."""
    values = yaml.safe_load((ANSIBLE_DIR / "roles" / role / "vars" / f"{family}.yml").read_text()) or {}
    if variable not in values:
        raise KeyError(f"{variable} is not in ansible/roles/{role}/vars/{family}.yml")
    return values[variable]


def role_default(role: str, variable: str) -> Any:
    """A variable as a role's defaults/main.yml sets it (untemplated), for machines not provisioned yet: a YAML
    value of the type the role gives it, which its caller knows."""
    defaults = yaml.safe_load((ANSIBLE_DIR / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    if variable not in defaults:
        raise KeyError(f"{variable} is not in ansible/roles/{role}/defaults/main.yml")
    return defaults[variable]
