"""One lab per host. The local backend's namespaces, cgroups, /var/lib/camel-tuning-lab and the lab
account are global, and two labs loading one host's CPUs measure nothing; so the host records which
checkout's lab is up (and with which backend), and commands run one at a time.

    owner.json   {"checkout", "backend", "inventory", "inventory_sha256", "since"}: written by up, removed by
                 down; status, run and down from another checkout refuse while it names a checkout
                 that still exists, and every command but up an inventory edited since up.
    busy.lock    held (flock) by the up, run or down that is changing the machines; released by
                 the kernel when that process ends, however it ends.
    tuned-as-default.json   while an A/A run's tuned machine carries the default one's knobs
                 (lab/aa.py); removed once it has its own again (or by up, up --only tuned, down).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.paths import LOCAL_ROOT, REPO
from lab.runfolder import RunFolder

OWNER = LOCAL_ROOT / "owner.json"
BUSY = Path("/run/camel-tuning-lab.lock")
# Where an earlier version remembered the backend, per checkout: adopted once, then removed.
LEGACY = REPO / ".cache" / "backend.json"


def _owner_file() -> Path:
    """Root's labs are the host's; a user without root (Vagrant, SSH hosts) keeps theirs in their own state."""
    return OWNER if os.geteuid() == 0 else _user_state() / "owner.json"


def _busy_file() -> Path:
    return BUSY if os.geteuid() == 0 else _user_state() / "busy.lock"


def _user_state() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "camel-tuning-lab"


class NotOurs(LabError):
    """The lab on this host belongs to another checkout, or another command is changing it."""


@dataclass(frozen=True)
class Owner:
    checkout: Path
    backend: str
    inventory: Path | None
    since: str
    inventory_sha256: str | None = None     # inventory_fingerprint() at up

    def describe(self) -> str:
        return f"{self.backend} backend, up since {self.since}, from the checkout at {self.checkout}"


def inventory_fingerprint(inventory: Path) -> str:
    """What Ansible reads on an inventory's side: the file, and the group_vars/ and host_vars/ beside it; or a
    folder inventory's every file (its sources, group_vars/ and host_vars/ inside)."""
    if inventory.is_dir():
        root, read = inventory, sorted(path for path in inventory.rglob("*") if path.is_file())
    else:
        root = inventory.parent
        read = [inventory, *sorted(path for folder in ("group_vars", "host_vars")
                                   for path in (root / folder).rglob("*") if path.is_file())]
    digest = hashlib.sha256()
    for path in read:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def remove_if_empty(folder: Path) -> None:
    """Removes a folder that holds no file (empty subfolders included); keeps it otherwise."""
    if folder.is_dir() and not any(path.is_file() for path in folder.rglob("*")):
        shutil.rmtree(folder)


@dataclass(frozen=True)
class HostLab:
    owner_file: Path = field(default_factory=_owner_file)
    busy_file: Path = field(default_factory=_busy_file)
    checkout: Path = REPO
    legacy_file: Path = LEGACY

    def owner(self) -> Owner | None:
        """The lab that is up on this host, or None."""
        try:
            self._adopt_legacy()
        except OSError:         # an earlier version's record that cannot be moved: it stays where it was
            pass
        try:
            data = json.loads(self.owner_file.read_text())
            inventory = data.get("inventory")
            return Owner(Path(data["checkout"]), str(data["backend"]), Path(inventory) if inventory else None,
                         str(data.get("since", "?")), data.get("inventory_sha256"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise LabError(f"{self.owner_file} is unreadable ({error}): if no lab is up on this host, remove it") \
                from error

    def ours(self) -> Owner | None:
        """The lab that is up, if this checkout brought it up."""
        owner = self.owner()
        return owner if owner and owner.checkout == self.checkout else None

    def check(self, command: str, backend: str) -> None:
        """Refuses a command that would act on, or beside, another lab."""
        owner = self.owner()
        self._refuse_another_checkout(owner, command)
        if owner and command == "up" and owner.backend != backend:
            raise NotOurs(f"a lab is up on this host ({owner.describe()}): one lab per host, so "
                          f"`up --backend {backend}` waits until `./start.sh down --backend {owner.backend}`")

    def check_inventory(self, command: str, inventory: Path | None) -> None:
        """Refuses, for any command but up, an inventory other than the lab's or edited since up (the file, or the
        group_vars/ and host_vars/ beside it): every playbook run is root's and would do what the edit says."""
        owner = self.owner()
        if command == "up" or inventory is None or owner is None or owner.inventory is None:
            return
        if inventory.resolve() != owner.inventory:
            raise NotOurs(f"the lab that is up was provisioned with the inventory {owner.inventory}, not {inventory}")
        self._check_fingerprint(owner, f", then ./start.sh {command}")

    def check_inventory_unchanged(self, inventory: Path | None) -> None:
        """The same check before each of a long command's playbook runs (an ablation's, a tune's: hours after the
        command's own check), each one root's."""
        owner = self.owner()
        if inventory is not None and owner is not None and owner.inventory == inventory.resolve():
            self._check_fingerprint(owner, "")

    @staticmethod
    def _check_fingerprint(owner: Owner, then: str) -> None:
        assert owner.inventory is not None
        fix = f"`./start.sh up --inventory {owner.inventory}` provisions the machines with it{then}"
        try:
            now = inventory_fingerprint(owner.inventory)
        except OSError as error:
            raise LabError(f"the lab's inventory {owner.inventory} cannot be read ({error.strerror or error}): "
                           f"put it back, or {fix}") from error
        if owner.inventory_sha256 is None:      # an earlier version's record, or one up could not read
            raise LabError(f"the lab that is up recorded no fingerprint of its inventory {owner.inventory} (since "
                           f"{owner.since}): what it holds now cannot be told from what up provisioned; {fix}")
        if now != owner.inventory_sha256:
            raise LabError(f"{owner.inventory} (or the group_vars/ or host_vars/ beside it) was edited since up "
                           f"({owner.since}): {fix}")

    def check_checkout(self, command: str) -> None:
        """Refuses a command from another checkout than the one whose lab is up (standard library
        only: the bootstrap asks before it installs anything)."""
        self._refuse_another_checkout(self.owner(), command)

    def _refuse_another_checkout(self, owner: Owner | None, command: str) -> None:
        if owner is None or owner.checkout == self.checkout:
            return
        if not owner.checkout.exists():
            if command in ("up", "down"):
                return          # a checkout that was deleted cannot take its lab down: this one may
            raise NotOurs(f"the lab on this host ({owner.describe()}) belongs to a checkout that no longer exists: "
                          "`./start.sh down` here removes it")
        raise NotOurs(f"the lab on this host belongs to another checkout ({owner.describe()}); one lab per host: "
                      f"use that checkout (cd {owner.checkout} && ./start.sh {command}), or take it down there "
                      "first (./start.sh down)")

    @property
    def aa_file(self) -> Path:
        """Present while a machine carries other knobs than its own (an A/A run's tuned machine, an ablation's)."""
        return self.owner_file.parent / "tuned-as-default.json"

    def aa_pending(self) -> bool:
        return self.aa_file.is_file()

    def _aa_record(self) -> dict:
        return (RunFolder(self.aa_file.parent).read_json(self.aa_file, [], "knobs record") or {}) \
            if self.aa_file.is_file() else {}

    def aa_machines(self) -> list[str]:
        """The machines that may carry other knobs than their own (an earlier lab's record: the tuned one)."""
        return list(self._aa_record().get("machines") or ["tuned"]) if self.aa_pending() else []

    def aa_begin(self, machines: tuple[str, ...] = ("tuned",)) -> None:
        """From now on these machines may carry other knobs than their own (with those an earlier run left so)."""
        carrying = sorted({*self.aa_machines(), *machines})
        RunFolder.write_json(self.aa_file, {"since": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machines": carrying})

    def aa_end(self, machine: str | None = None) -> None:
        """None: every machine has its own knobs again; else that machine has (the others may still not)."""
        left = [m for m in self.aa_machines() if m != machine] if machine else []
        if left:
            RunFolder.write_json(self.aa_file, {**self._aa_record(), "machines": left})
        else:
            self.aa_file.unlink(missing_ok=True)

    def claim(self, backend: str, inventory: Path | None) -> None:
        """Records this checkout's lab as the one that is up."""
        try:            # an earlier version's record may name an inventory that is gone: nothing to compare
            fingerprint = inventory_fingerprint(inventory.resolve()) if inventory else None
        except OSError:
            fingerprint = None
        RunFolder.write_json(self.owner_file, {"checkout": str(self.checkout), "backend": backend,
                                               "inventory": str(inventory.resolve()) if inventory else None,
                                               "inventory_sha256": fingerprint,
                                               "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")})

    def release(self, backend: str) -> None:
        """After down: the host has no lab of that backend any more."""
        owner = self.owner()
        if owner is not None and owner.backend == backend:
            self.owner_file.unlink(missing_ok=True)
        remove_if_empty(self.owner_file.parent)

    @contextmanager
    def busy(self, command_line: str) -> Iterator[None]:
        """Holds the host's lab for one command that changes it; refuses while another one does."""
        self.busy_file.parent.mkdir(parents=True, exist_ok=True)
        with self.busy_file.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "another command"
                raise NotOurs(f"another ./start.sh is changing this host's lab ({holder}): wait for it to "
                              "finish (one lab, one command at a time)") from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"`{command_line}` in {self.checkout}, pid {os.getpid()}\n")
            lock.flush()
            try:
                yield
            finally:
                lock.seek(0)
                lock.truncate()
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _adopt_legacy(self) -> None:
        if not self.legacy_file.is_file():
            return
        try:
            legacy = json.loads(self.legacy_file.read_text())
        except (OSError, ValueError):
            legacy = None
        if isinstance(legacy, dict) and legacy.get("backend") and not self.owner_file.exists():
            inventory = legacy.get("inventory")
            self.claim(str(legacy["backend"]), Path(inventory) if inventory else None)
        self.legacy_file.unlink(missing_ok=True)
