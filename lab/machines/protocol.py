"""What every backend offers the rest of the lab: the two machines, created and removed, reached by
command, their files pulled. Every backend provisions with the same playbook; they differ in how
machines are created and destroyed, and how a command reaches a machine."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tarfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from lab.load.engines import Engines
from lab.load.network import ClientNetwork


@dataclass
class Pulled:
    """Files copied from a machine, and what went wrong if not all could be."""
    files: list[Path] = field(default_factory=list)
    problem: str | None = None


class Backend(Protocol):
    name: str                   # local, ssh or vagrant
    service_manager: str        # supervisord or systemd: how the machines' processes are supervised
    inventory: Path             # the Ansible inventory the playbook runs with

    @property
    def emulation_note(self) -> str:
        """One sentence on what these machines are (shared host, VMs, real hosts)."""
        ...

    def up(self) -> None:
        """Creates the machines (idempotent); provisioning is the playbook's job."""
        ...

    def down(self) -> None:
        """Removes everything up created."""
        ...

    def address(self, name: str) -> str: ...

    def exists(self, name: str) -> bool: ...

    def processes(self, name: str) -> dict[str, str]:
        """The lab's processes on the machine and their states, in supervisord's words (RUNNING …)."""
        ...

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess: ...

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status one of the machine's processes."""
        ...

    def home(self, name: str) -> Path | str:
        """The machine's lab_home (on the machine; on the local backend also readable from this host)."""
        ...

    def remove(self, name: str, glob: str) -> None:
        """Deletes the files matching glob under the machine's lab_home."""
        ...

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination, keeping their paths."""
        ...

    def begin_measurement(self, name: str) -> None: ...

    def pinned_cpus(self, name: str) -> str | None:
        """The CPUs the lab pinned the machine to (a cpulist), None where it pins none (ssh and Vagrant
        machines, or a local machine that shares the host's CPUs)."""
        ...

    def memory_events(self, name: str) -> dict:
        """{"oom_kills": int | None, "peak_memory_bytes": int | None} so far."""
        ...

    def journal(self, name: str, since: float, until: float) -> str:
        """What the service manager logged about the lab's processes (systemd machines; else "")."""
        ...

    @property
    def has_engines(self) -> bool:
        """Whether engines() gives remote JMeter engines (--load-from loadgen)."""
        ...

    engine_hosts: tuple[str, ...]   # the inventory's load generators, which site.yml provisions (local: none)

    def engines(self, targets: list[tuple[str, int]], log: Path, out: Path) -> AbstractContextManager[Engines]:
        """Remote JMeter engines that reach targets (address, port), for the length of one load run; an
        engine running on this host writes its log and output to log and out."""
        ...

    def client_network(self, targets: list[tuple[str, int]]) -> AbstractContextManager[ClientNetwork | None]:
        """A network of the load generator's own that reaches targets (address, port), for the length of one load
        run, where this host's JMeter runs with the socket settings a load generator needs; None: this host's."""
        ...

    def network_prefix(self, name: str) -> list[str] | None:
        """A command prefix that runs a process of this host in the machine's network, where its loopback ports
        are (the host's limits, lab/limits.py); None where this host cannot enter it."""
        ...


def copy_no_follow(root: Path, relative: Path, target: Path) -> bool:
    """Copies root/relative to target (mode 0600) as root may copy from folders another account owns:
    no symbolic link followed anywhere below root, nothing but a plain file read. False if it met
    anything else (which the other account could have put there to make root read another file)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        for part in relative.parts[:-1]:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
        handle = os.open(relative.name, flags | os.O_NONBLOCK, dir_fd=folder)
    except OSError:     # ELOOP (a link), ENOTDIR, ENOENT (gone since the glob)
        return False
    finally:
        os.close(folder)
    with os.fdopen(handle, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as copy:
            shutil.copyfileobj(source, copy)
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    return True


def unpack_plain_files(archive: Path, destination: Path) -> tuple[list[Path], list[str]]:
    """The plain files of a tar archive (ansible/fetch.yml's) written under destination at their paths,
    mode 0600, their times kept; anything else (a link, a device, a path leaving destination) is not
    written and is returned by name. (files written, names refused)"""
    written: list[Path] = []
    refused: list[str] = []
    with tarfile.open(archive) as packed:
        for member in packed:
            relative = PurePosixPath(member.name)
            if not member.isreg() or relative.is_absolute() or ".." in relative.parts:
                refused.append(member.name)
                continue
            target = destination.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = packed.extractfile(member)
            assert source is not None               # a regular file's: extractfile gives None for the others
            with source, open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as copy:
                shutil.copyfileobj(source, copy)
            os.utime(target, (member.mtime, member.mtime))
            written.append(target)
    return written, refused
