"""JMeter's distributed mode, as the lab drives it: one or more remote engines (jmeter-server) generate
the load and send their samples back to a client JMeter on this host, which writes each machine's results
as a local run does. The engines and the client talk RMI over TLS with the lab's own key pairs, one for the client and
one for the engines (made here with keytool, never committed), so nobody else on the network can hand an engine a
plan, nor pose as one.

Where the engines run is the backend's business (lab/machines): on the local backend, one engine in a
load-generator namespace and cgroup of its own (lab/machines/local/loadgen.py)."""
from __future__ import annotations

import functools
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.load.jmeter import log_levels
from lab.load.profile import LoadError
from lab.machines.manifest import role_default
from lab.paths import REPO

SECRETS = REPO / ".cache" / "secrets" / "jmeter-rmi"
KEYSTORE = "rmi_keystore.p12"             # a side's own key pair
TRUSTSTORE = "rmi_truststore.p12"         # the other side's certificate
ENGINE_FOLDER = "engine"                  # under SECRETS: the engines' side
RMI_PROPERTIES = "rmi.properties"
KEY_ALIAS = "rmi"


@functools.cache
def engine_ports() -> tuple[int, int]:
    """Each engine's RMI registry and the engine object it hands out (fixed, so a firewall can allow them): the
    jmeter_engine role's, whose engines on other hosts listen on them too (read when first asked, not on import)."""
    return (int(role_default("jmeter_engine", "jmeter_engine_port")),
            int(role_default("jmeter_engine", "jmeter_engine_object_port")))
KEYTOOL_TIMEOUT_S = 120
PASSWORD_ENV = "LAB_RMI_KEYSTORE_PASSWORD"     # keytool reads the password from it (-storepass:env)


@dataclass(frozen=True)
class Engines:
    """The remote engines one load run uses, and how the client reaches them and they reach it."""
    hosts: tuple[str, ...]                  # each engine's "address:port" (its RMI registry)
    client_host: str                        # the address of this host the engines call back
    rmi_properties: Path                    # read by client and engines: RMI over TLS with the lab's keystore
    where: str                              # one sentence for run.json and the report
    pids: tuple[int, ...] = field(default=())   # engines running on this host: their CPU is sampled

    @property
    def folder(self) -> Path:
        """Where the client runs: the folder of the keystore its rmi.properties names without a folder."""
        return self.rmi_properties.parent

    def as_json(self) -> dict:
        # engines_sampled: whether their CPU is in jmeter/loadgen.csv (engines on this host), for the verdict
        return {"engines": list(self.hosts), "client": self.client_host, "where": self.where,
                "engines_sampled": bool(self.pids)}


def rmi_properties(folder: Path = SECRETS, keytool: str | None = None) -> Path:
    """The properties file that makes JMeter's RMI use TLS with the lab's keys, made once: two key pairs, the
    controller's (its client, in folder) and the engines' (in engine_folder()), each side's truststore holding the
    other side's certificate only. So an engine refuses any client but the controller, even one presenting the
    engines' own key (which every load-generator host holds), and the controller refuses any engine without the
    engines' key. PKCS12 files from keytool with one random password, readable by root only.

    The files are named without a folder, alike on both sides: each side of JMeter's RMI loads the keystore and
    truststore at the names (and with the password) the other side's socket factory carries, from its own working
    folder: the client runs in folder (Engines.folder), an engine in engine_folder() or the jmeter_engine role's
    home, each finding its own key and the other's certificate there."""
    properties = folder / RMI_PROPERTIES
    password = _password(properties) if all(path.is_file() for path in _made(folder)) else None
    if password is None:
        password = _new_keys(folder, keytool)
    text = "".join(f"server.rmi.ssl.{key}={value}\n" for key, value in (
        ("disable", "false"), ("keystore.type", "PKCS12"), ("keystore.file", KEYSTORE),
        ("keystore.password", password), ("keystore.alias", KEY_ALIAS), ("truststore.type", "PKCS12"),
        ("truststore.file", TRUSTSTORE), ("truststore.password", password)))
    text = "# JMeter's RMI over TLS for the lab's remote engines (lab/load/engines.py). Secret.\n" + text
    if not properties.is_file() or properties.read_text() != text:
        descriptor = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            stream.write(text)
    return properties


def engine_folder(properties: Path) -> Path:
    """Where an engine of this host runs: its key pair and the controller's certificate, as the role's home has them."""
    return properties.parent / ENGINE_FOLDER


def _made(folder: Path) -> list[Path]:
    return [side / name for side in (folder, folder / ENGINE_FOLDER) for name in (KEYSTORE, TRUSTSTORE)]


def _password(properties: Path) -> str | None:
    """The keystores' password as an earlier rmi_properties() wrote it, None if there is none."""
    try:
        found = re.search(r"^server\.rmi\.ssl\.keystore\.password=(\S+)$", properties.read_text(), re.M)
    except OSError:
        return None
    return found[1] if found else None


def _new_keys(folder: Path, keytool: str | None) -> str:
    """The controller's and the engines' key pairs, each side's truststore with the other's certificate (every file
    0600, the folders 0700), with a new random password, which it returns."""
    password = secrets.token_hex(16)
    tool = keytool or _keytool()
    for side in (folder, folder / ENGINE_FOLDER):
        side.mkdir(parents=True, exist_ok=True)
        os.chmod(side, 0o700)
        for name in (KEYSTORE, TRUSTSTORE):
            (side / name).unlink(missing_ok=True)
    for side, who in ((folder, "controller"), (folder / ENGINE_FOLDER, "engines")):
        _keytool_run(tool, password, "-genkeypair", "-alias", KEY_ALIAS, "-keyalg", "RSA", "-keysize", "2048",
                     "-validity", "3650", "-dname", f"CN=camel-tuning-lab JMeter RMI {who}",
                     "-keystore", str(side / KEYSTORE), "-keypass:env", PASSWORD_ENV)
    for side, other, alias in ((folder, folder / ENGINE_FOLDER, "engines"), (folder / ENGINE_FOLDER, folder,
                                                                             "controller")):
        certificate = side / f"{alias}.crt"
        _keytool_run(tool, password, "-exportcert", "-alias", KEY_ALIAS, "-keystore", str(other / KEYSTORE),
                     "-file", str(certificate))
        _keytool_run(tool, password, "-importcert", "-noprompt", "-alias", alias, "-file", str(certificate),
                     "-keystore", str(side / TRUSTSTORE))
        certificate.unlink()
    for path in _made(folder):
        os.chmod(path, 0o600)
    return password


def _keytool_run(keytool: str, password: str, *args: str) -> None:
    """keytool on a PKCS12 store, the password through its environment: a command line is every local user's to
    read (ps, /proc)."""
    command = [keytool, *args, "-storetype", "PKCS12", "-storepass:env", PASSWORD_ENV]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=KEYTOOL_TIMEOUT_S,
                              env={**os.environ, PASSWORD_ENV: password})
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LoadError(f"making JMeter's RMI keys failed ({keytool} {args[0]}): {error}") from error
    if done.returncode != 0:
        raise LoadError(f"making JMeter's RMI keys failed (keytool {args[0]}, exit {done.returncode}): "
                        f"{(done.stderr or done.stdout).strip()[:300]}")


def _keytool() -> str:
    from lab.load.jmeter import java_executable  # here, not at import: it asks for Java
    keytool = Path(os.path.realpath(java_executable())).with_name("keytool")
    if not keytool.is_file():
        raise LoadError(f"keytool not found beside {java_executable()} (it makes the RMI keystore): install a full "
                        "JRE (Debian: openjdk-17-jre-headless)")
    return str(keytool)


def engine_arguments(address: str, properties: Path, log: Path, port: int | None = None,
                     object_port: int | None = None) -> list[str]:
    """JMeter's arguments for an engine (jmeter-server) on address with the lab's TLS: its registry on port
    (default: the role's ports)."""
    port, object_port = port or engine_ports()[0], object_port or engine_ports()[1]
    return ["-s", "-j", str(log), *log_levels(), "-q", str(properties), f"-Jserver_port={port}",
            f"-Jserver.rmi.localport={object_port}", f"-Djava.rmi.server.hostname={address}"]


def client_arguments(engines: Engines) -> list[str]:
    """The client's arguments: run the plan on these engines, which call it back on client_host (on ports the
    system picks: JMeter opens several from client.rmi.localport when it is set)."""
    return ["-R", ",".join(engines.hosts), "-q", str(engines.rmi_properties),
            f"-Djava.rmi.server.hostname={engines.client_host}"]


def split_users(users: int, engines: int) -> int:
    """Each engine runs the whole plan, so each gets its share of a machine's users: the split must be even,
    or the machine would get more or fewer users than asked."""
    if engines < 1:
        raise ValueError(f"engines must be 1 or more, not {engines}")
    if users % engines:
        raise LoadError(f"{users} users per machine cannot be split evenly over {engines} remote engines: "
                        f"give --users a multiple of {engines}")
    return users // engines


def wait_until_listening(address: str, port: int, alive: Callable[[], bool], timeout_s: float,
                         what: str = "the JMeter engine") -> None:
    """Until a server (an engine) accepts connections on address:port; LoadError if it dies or takes too long."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise LoadError(f"{what} on {address} exited before it listened on port {port}")
        try:
            with socket.create_connection((address, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.5)
    raise LoadError(f"{what} on {address} did not listen on port {port} within {timeout_s:.0f} s")
