"""The memory a local machine's cgroup gives the lab's processes: the memory model.

A 512 MB VM does not give its programs 512 MiB: its kernel keeps some, and its operating system (init,
journald, udevd, sshd) lives in the same RAM. The local backend's machines run only the lab's
processes (PCP included), so the ``vm`` model limits them to what such a VM leaves:

    Measured 2026-11-26 on this project's Vagrant box (tests/vagrant/build-box: Debian 12, kernel 6.1),
    booted with 512 MiB and 2 vCPUs under qemu, idle after boot, PCP's daemons stopped (on the local
    backend PCP runs inside the machine's cgroup, so it is the lab's share): MemTotal 457.2 MiB (the
    kernel keeps 54.8), MemAvailable 397.5 MiB, three readings 5 s apart within 0.5 MiB. With the
    distribution's PCP daemons running, MemAvailable was 384.5 MiB.

``vm`` is the default, with 1 GiB of swap per machine, as a VM of 2018 had (the write-up does not say how much:
twice the RAM, as RHEL 7 advised for a machine of 512 MB): without swap the tuned machine does not even start in
397 MiB (it held 406 MiB idle after up, its JVM's heap fixed at 192 MiB and 300 threads started), and with it
the tuned machine pays for its fixed heap in swap as a VM would. ``whole`` gives the lab's processes the
whole 512 MiB. This host may have no swap, so ``swap_mib`` makes the lab add a swap file of its own
(``swap.py``) and lets each machine's cgroup use that much of it; ``--swap 0`` runs without.

The model chosen at ``up`` is kept in the lab's state (``memory.json``) so that status and run report
the model the machines really have."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import StepFailed

VM_RAM_MIB = 512
VM_AVAILABLE_MIB = 397          # MemAvailable of the 512 MiB VM above, rounded down
VM_KERNEL_MIB = 55              # what its kernel keeps (512 - MemTotal 457.2): a JVM in it sizes its heap from the rest
MODELS = {"vm": VM_AVAILABLE_MIB, "whole": VM_RAM_MIB}
DEFAULT = "vm"
DEFAULT_SWAP_MIB = 1024     # per machine; vm without swap: the tuned machine (406 MiB idle after up) does not fit
MAX_SWAP_MIB = 8192


@dataclass(frozen=True)
class MemoryModel:
    name: str = DEFAULT
    swap_mib: int = DEFAULT_SWAP_MIB

    def __post_init__(self) -> None:
        if self.name not in MODELS:
            raise StepFailed(f"--memory {self.name}: not a memory model ({', '.join(MODELS)})")
        if not 0 <= self.swap_mib <= MAX_SWAP_MIB:
            raise StepFailed(f"--swap {self.swap_mib}: give MiB of swap per machine, 0 to {MAX_SWAP_MIB}")

    @property
    def limit_mib(self) -> int:
        return MODELS[self.name]

    def describe(self) -> str:
        memory = (f"{self.limit_mib} MiB, what a {VM_RAM_MIB} MB VM leaves its programs after its kernel and "
                  "operating system (measured on the lab's Vagrant box)" if self.name == "vm"
                  else f"the whole {VM_RAM_MIB} MiB, with no operating system beside them")
        swap = f"{self.swap_mib} MiB of swap" if self.swap_mib else "no swap"
        return f"memory model {self.name}: the lab's processes get {memory}; {swap}"

    def as_json(self) -> dict:
        return {**asdict(self), "limit_mib": self.limit_mib, "described": self.describe()}


def read(path: Path) -> MemoryModel | None:
    """The model the machines were created with, None before any up recorded one."""
    try:
        data = json.loads(path.read_text())
        return MemoryModel(str(data["name"]), int(data.get("swap_mib", 0)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, StepFailed) as error:
        raise StepFailed(f"{path} is unreadable ({error}): `./start.sh up --memory vm` records it again") from error


def write(path: Path, model: MemoryModel) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": model.name, "swap_mib": model.swap_mib}) + "\n")
