"""The local backend: each machine is a network namespace plus a cgroup on this host, with its own
supervisord (the rest of this package creates and removes them)."""
from __future__ import annotations

import grp
import pwd
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from lab import placement
from lab.hostlab import remove_if_empty
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.machines import manifest
from lab.machines.local import loadgen, memory, swap
from lab.machines.local.cgroups import Cgroup, detect_cgroups
from lab.machines.local.lifecycle import down, memory_events, reset_memory_peak, status, supervisorctl, up
from lab.machines.local.machine import LocalBackendError, machines
from lab.machines.local.network import _enter_netns, run_in
from lab.machines.protocol import Pulled, copy_no_follow
from lab.names import MACHINES
from lab.paths import INVENTORIES, LOCAL_ROOT
from lab.progress import info


class LocalBackend:
    """Each machine is a network namespace plus a cgroup on this host (the rest of this package creates and removes them)."""

    name = "local"
    has_engines = True          # remote JMeter engines: one in a load-generator namespace (loadgen.py)
    engine_hosts: tuple[str, ...] = ()      # which is this backend's own, not the playbook's
    service_manager = "supervisord"
    inventory = INVENTORIES / "local" / "hosts.yml"

    def __init__(self, root: Path = LOCAL_ROOT) -> None:
        self.root = Path(root)
        # The memory model the machines were brought up with (up --memory/--swap), else the default one.
        self.memory = memory.read(self.memory_file) or memory.MemoryModel()
        # CPUs of their own when the host has enough (lab/placement.py), else the machines share them.
        where = placement.for_backend(self.name)
        self._cpusets = {name: where.cpus[name] for name in MACHINES} if where.dedicated else None
        self.machines = machines(self.root, self._cpusets, self.memory)
        self.loadgen = loadgen.loadgen_machine(self.root, where.cpus[placement.LOADGEN], pinned=where.dedicated)

    @property
    def memory_file(self) -> Path:
        return self.root / "memory.json"

    @property
    def swapfile(self) -> Path:
        return self.root / "swapfile"

    @property
    def emulation_note(self) -> str:
        return ("local backend: both machines share this host's kernel and cores; each is limited by a cgroup to "
                f"2 CPUs, which they compete for, and to its memory ({self.memory.describe()})")

    def use_memory(self, model: memory.MemoryModel) -> None:
        """The memory model the next up gives the machines (and records for status and run)."""
        self.memory = model
        self.machines = machines(self.root, self._cpusets, model)

    def check_memory(self, model: memory.MemoryModel) -> None:
        """Refuses, before anything changes, other swap for machines that are up: another swap file means swapping
        this one off, and their swapped pages would have to come back into memory they may not have."""
        before = memory.read(self.memory_file)
        if (before and before.swap_mib and model.swap_mib != before.swap_mib
                and any(m.netns_path.exists() for m in self.machines.values())):
            raise LocalBackendError(f"--swap {model.swap_mib}: the machines are up with {before.swap_mib} MiB of "
                                    "swap, which their processes may be using; other swap needs them stopped first: "
                                    f"./start.sh down, then ./start.sh up --swap {model.swap_mib}")

    def up(self) -> None:
        self.check_memory(self.memory)
        if self.memory.swap_mib:        # both machines' swap, which the kernel must have
            swap.ensure(self.swapfile, self.memory.swap_mib * len(self.machines))
        memory.write(self.memory_file, self.memory)
        for machine in self.machines.values():
            up(machine)
        if not self.memory.swap_mib:
            swap.remove(self.swapfile)

    def down(self) -> None:
        loadgen.remove(self.loadgen)
        for machine in self.machines.values():
            down(machine)
        swap.remove(self.swapfile)
        self.memory_file.unlink(missing_ok=True)
        known = [m for m in (manifest.read_or_none(name) for name in self.machines) if m]
        remove_account(known[0].user if known else str(manifest.role_default("lab", "lab_user")),
                       known[0].group if known else str(manifest.role_default("lab", "lab_group")))
        for name in self.machines:
            manifest.forget(name)
        remove_if_empty(LOCAL_ROOT)

    def address(self, name: str) -> str:
        return self.machines[name].address

    def exists(self, name: str) -> bool:
        return status(self.machines[name])["netns"]

    def processes(self, name: str) -> dict[str, str]:
        return status(self.machines[name])["programs"]

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return run_in(self.machines[name], argv, capture_output=True, text=True, timeout=timeout)

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status a process under the machine's supervisor."""
        return supervisorctl(self.machines[name], action, service)

    def home(self, name: str) -> Path:
        """The machine's lab_home, readable from this host: the evidence is collected from there."""
        return self.machines[name].root

    def remove(self, name: str, glob: str) -> None:
        for path in self.home(name).glob(glob):
            if path.is_symlink() or path.is_file():     # a folder with a file's name stays
                path.unlink()

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination, keeping their paths; a
        symbolic link is never followed (the service account owns folders there)."""
        home = self.home(name)
        copied, refused = [], []
        for source in sorted({source for glob in globs for source in home.glob(glob)}):
            relative = source.relative_to(home)
            target = destination / relative
            if copy_no_follow(home, relative, target):
                copied.append(target)
            elif source.is_symlink() or not source.is_dir():
                refused.append(str(relative))
        return Pulled(copied, problem=f"not copied, a link or not a plain file: {', '.join(refused)}" if refused else None)

    def begin_measurement(self, name: str) -> None:
        reset_memory_peak(self.machines[name])

    def pinned_cpus(self, name: str) -> str | None:
        cgroup = Cgroup(self.machines[name], detect_cgroups())
        return cgroup.cpuset() if cgroup.exists() else None

    def memory_events(self, name: str) -> dict:
        return memory_events(self.machines[name])


    @contextmanager
    def engines(self, targets: list[tuple[str, int]], log: Path, out: Path) -> Iterator[Engines]:
        """A JMeter engine in a load-generator namespace and cgroup of this host's, for one load run."""
        with loadgen.engine(self.loadgen, list(self.machines.values()), targets, log, out) as engines:
            yield engines

    def client_network(self, targets: list[tuple[str, int]]) -> AbstractContextManager[ClientNetwork]:
        """JMeter runs in the load-generator namespace, with its client ports widened there (loadgen.py)."""
        return loadgen.client(self.loadgen, list(self.machines.values()), targets)

    def network_prefix(self, name: str) -> list[str]:
        """A command run after this prefix is in the machine's network (its loopback), not in its cgroup."""
        return _enter_netns(self.machines[name])

    def journal(self, name: str, since: float, until: float) -> str:
        return ""  # supervisord's own log is collected with the evidence instead


def remove_account(user: str, group: str) -> None:
    """The account the playbook created on this host for the machines' processes, and its group: only if the
    account carries the lab's comment (the lab role refuses to take over any other), the group only as its own."""
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        return
    if account.pw_gecos != str(manifest.role_default("lab", "lab_user_comment")):
        info(f"the account {user} was not made by the lab (its comment is {account.pw_gecos!r}): left as it is")
        return
    subprocess.run(["userdel", user], check=True)
    try:
        own = grp.getgrnam(group).gr_gid == account.pw_gid
    except KeyError:
        return          # userdel removed it with the account (USERGROUPS_ENAB)
    if own:
        subprocess.run(["groupdel", group], check=True)
