"""The local backend's load-generator machine: a network namespace and cgroup of its own (``<prefix>-loadgen``,
10.213.3.2), pinned to the placement's load-generator CPUs, where this host's JMeter runs for the length of one
load run (client()), with a load generator's socket settings in that namespace only, never on the host: every
client port, closing connections' ports reused, a backlog for the ceiling's target (lab/load/ceiling.py). Or
where a JMeter engine (jmeter-server) runs (engine(), --load-from loadgen): the path a remote engine on another
host takes, exercised on this host.

It is a namespace and a cgroup only (no supervisord: nothing runs there between runs). The load generator
reaches the machines through this host: each namespace has a route to the other's /30 via its host side, and
the host forwards IPv4 between those veths only (net.ipv4.conf.<veth>.forwarding, a per-interface switch, put
back as it was after the run; the host-wide ip_forward is left as it is)."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.interrupts import deferred
from lab.load import ceiling
from lab.load.engines import (
    Engines,
    engine_arguments,
    engine_folder,
    engine_ports,
    rmi_properties,
    wait_until_listening,
)
from lab.load.jmeter import java_executable, launch, runtime_jar
from lab.load.network import ClientNetwork
from lab.load.processes import kill
from lab.load.profile import LoadError
from lab.machines.local.cgroups import Cgroup, detect_cgroups
from lab.machines.local.lifecycle import _kill_all, down
from lab.machines.local.machine import MACHINE_ENV, LocalBackendError, Machine, _ip, _require_root, _run
from lab.machines.local.network import _check_address_free, _enter_netns, _launcher, _network_up
from lab.placement import cpulist

NAME = "loadgen"
INDEX = 3                   # 10.213.3.0/30, after the machines' 1 and 2
# JMeter's heap may grow to 1 GiB (lab.load.jmeter.jvm_args()), plus the JVM's own and a thread's stack per request
# in flight: measured, at 1,536 MiB the OOM killer ended JMeter twice in one tune (a machine stalled past its knee,
# 3,800 threads in flight at 1,600 req/s, 1.4 GiB resident); the host's memory is not the machines', this is cheap.
MEMORY_MB = 3072
# Ten times a machine's share of CPUs they contend for: an open model's arrivals are only as punctual as JMeter's
# scheduler, so on a shared host JMeter gets what it needs first and the machines divide the rest (the verdict
# says when that made them host-bound).
CPU_WEIGHT = 1000
ENGINE_START_S = 90.0       # a JVM start on a busy two-core host
STOP_GRACE_S = 10.0
# Per-namespace sysctls (net.*): with keep-alive off, or an open model's thread per arrival, every request is a new
# connection whose port stays in TIME_WAIT for 60 s: 28k ports of the default range cap a generator near 470 req/s.
CLIENT_SYSCTLS = {"net.ipv4.ip_local_port_range": "1024 65535", "net.ipv4.tcp_tw_reuse": "1",
                  "net.core.somaxconn": "4096", "net.ipv4.tcp_max_syn_backlog": "4096"}


def client_sysctls() -> dict[str, str]:
    """CLIENT_SYSCTLS, and the ports the namespace's own listeners take (the JMeter engine's RMI registry and
    objects, the ceiling's target) kept out of that range: a client connection that had taken one as its local port
    left the engine unable to listen ("Could not bind to /10.213.3.2 using port 1100", a CI run of 2026-12-04)."""
    listeners = sorted({*engine_ports(), ceiling.PORT})
    return {**CLIENT_SYSCTLS, "net.ipv4.ip_local_reserved_ports": ",".join(str(port) for port in listeners)}


def loadgen_machine(root: Path, cpus: tuple[int, ...], pinned: bool) -> Machine:
    """The load generator's namespace and cgroup: as many CPUs as it is given, pinned to them when they are its own."""
    return Machine(NAME, INDEX, root / NAME, memory_mb=MEMORY_MB, cpus=float(len(cpus)),
                   cpuset=cpus if pinned else (), cpu_weight=CPU_WEIGHT)


def _forwarding(veth: str, value: str | None = None) -> str | None:
    """A veth's IPv4 forwarding switch ("0"/"1"), set to value when given; what it was before."""
    path = Path(f"/proc/sys/net/ipv4/conf/{veth}/forwarding")
    try:
        before = path.read_text().strip()
        if value is not None and value != before:
            path.write_text(value)
        return before
    except OSError as error:
        if value == "1":
            raise LocalBackendError(f"cannot let this host forward between the lab's namespaces ({path}): "
                                    f"{error.strerror or error}") from error
        return None


def bring_up(loadgen: Machine) -> Cgroup:
    """The namespace, its veth and the cgroup; whatever a cut-short run left in the cgroup is killed."""
    _require_root()
    cgroup = Cgroup(loadgen, detect_cgroups())
    _check_address_free(loadgen)
    _network_up(loadgen)
    _run(_enter_netns(loadgen) + ["sh", "-c", " && ".join(f"echo '{value}' > /proc/sys/{name.replace('.', '/')}"
                                                          for name, value in client_sysctls().items())],
         f"widening the client ports of {loadgen.netns}")
    cgroup.create()
    left = _kill_all(cgroup.pids, timeout=10)
    if left:
        raise LocalBackendError(f"processes {sorted(left)} of the load generator survived SIGKILL: check them")
    return cgroup


def connect(loadgen: Machine, machines: list[Machine], before: dict[str, str | None]) -> None:
    """Routes between the load generator and each machine through this host, forwarding on their veths only;
    each veth's forwarding switch as it was goes into before, as soon as it is changed, for disconnect()."""
    ip = _ip()
    for veth in (loadgen.veth, *(machine.veth for machine in machines)):
        before[veth] = _forwarding(veth, "1")
    for machine in machines:
        _run([ip, "-n", loadgen.netns, "route", "replace", str(machine.network), "via", loadgen.host_address],
             f"routing {loadgen.netns} to {machine.name}")
        _run([ip, "-n", machine.netns, "route", "replace", str(loadgen.network), "via", machine.host_address],
             f"routing {machine.netns} to {loadgen.netns}")


def disconnect(loadgen: Machine, machines: list[Machine], before: dict[str, str | None]) -> None:
    """Undoes connect(): the machines' routes to the load generator, each veth's forwarding as it was."""
    ip = _ip()
    for machine in machines:
        if machine.netns_path.exists():
            _run([ip, "-n", machine.netns, "route", "del", str(loadgen.network)], "removing a route", check=False)
    for veth, value in before.items():
        if value is not None:
            _forwarding(veth, value)


def check_reachable(loadgen: Machine, cgroup: Cgroup, targets: list[tuple[str, int]]) -> None:
    """Each target answers a TCP connection from inside the load generator's namespace; else a clear error."""
    probe = ("import socket,sys\nfor a in sys.argv[1:]:\n h,p=a.rsplit(':',1)\n"
             " try: socket.create_connection((h,int(p)),timeout=5).close()\n"
             " except OSError as e: print(a,e); sys.exit(1)\n")
    done = subprocess.run(_launcher(loadgen, cgroup, [sys.executable, "-c", probe, *(f"{h}:{p}" for h, p in targets)]),
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise LocalBackendError(f"the load generator ({loadgen.netns}, {loadgen.address}) cannot reach "
                                f"{done.stdout.strip() or done.stderr.strip()}: this host must forward between the "
                                "lab's namespaces (a firewall's FORWARD chain may drop it: iptables -S FORWARD)")


def _where(loadgen: Machine, what: str) -> str:
    return (f"{what} in namespace {loadgen.netns} ({loadgen.address}), cgroup {loadgen.cgroup_name}"
            + (f" pinned to CPUs {cpulist(loadgen.cpuset)}" if loadgen.cpuset else " on the host's CPUs")
            + f" with {loadgen.cpu_weight // 100}x a machine's share of them"
            + ", its sysctls " + ", ".join(f"{name}={value}" for name, value in client_sysctls().items()))


@contextmanager
def client(loadgen: Machine, machines: list[Machine], targets: list[tuple[str, int]]) -> Iterator[ClientNetwork]:
    """The load-generator machine up and connected to the machines until the block ends: the prefix that runs a
    command of this host's in it (its namespace and cgroup)."""
    cgroup = bring_up(loadgen)
    before: dict[str, str | None] = {}
    try:
        connect(loadgen, machines, before)
        check_reachable(loadgen, cgroup, targets)
        yield ClientNetwork(prefix=tuple(_launcher(loadgen, cgroup, [])), address=loadgen.address,
                            where=_where(loadgen, "JMeter on this host"),
                            sysctls=client_sysctls())
    finally:
        with deferred():                        # a second Ctrl-C must not leave the host forwarding
            disconnect(loadgen, machines, before)


@contextmanager
def engine(loadgen: Machine, machines: list[Machine], targets: list[tuple[str, int]], log: Path, out: Path
           ) -> Iterator[Engines]:
    """The load-generator machine up and connected, a JMeter engine running in it until the block ends."""
    with client(loadgen, machines, targets) as network:
        properties = rmi_properties()
        java, jar = java_executable(), runtime_jar()
        log.parent.mkdir(parents=True, exist_ok=True)
        command = launch(java, jar, *engine_arguments(loadgen.address, properties, log))
        with out.open("w") as sink:
            # In the engines' keys' folder, where it finds the files rmi.properties names (lab/load/engines.py)
            popen = subprocess.Popen([*network.prefix, *command], cwd=engine_folder(properties), stdin=subprocess.DEVNULL,
                                     stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(MACHINE_ENV))
        try:
            try:
                wait_until_listening(loadgen.address, engine_ports()[0], lambda: popen.poll() is None, ENGINE_START_S)
            except LoadError as error:
                raise LoadError(f"{error}; its output: {out}, its log: {log}") from None
            yield Engines(hosts=(f"{loadgen.address}:{engine_ports()[0]}",), client_host=loadgen.host_address,
                          rmi_properties=properties, pids=(popen.pid,),
                          where=_where(loadgen, "one JMeter engine (jmeter-server)"))
        finally:
            with deferred():                    # a second Ctrl-C must not leave the engine running
                kill(popen, STOP_GRACE_S)


def remove(loadgen: Machine) -> None:
    """Takes the load-generator machine down (the machines' routes to it go with their own namespaces)."""
    if loadgen.netns_path.exists() or Cgroup(loadgen, detect_cgroups()).exists():
        down(loadgen)
