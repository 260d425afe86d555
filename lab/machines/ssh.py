"""The ssh backend: real hosts named default and tuned in an Ansible inventory; commands and file
transfers go through Ansible (ansible/fetch.yml), services are systemd units."""
from __future__ import annotations

import json
import os
import posixpath
import re
import subprocess
import tempfile
from contextlib import AbstractContextManager, nullcontext
from glob import escape as fnmatch_escape
from pathlib import Path

from lab.errors import StepFailed
from lab.load.engines import Engines
from lab.load.network import ClientNetwork
from lab.machines import manifest, remote_engines
from lab.machines.protocol import Pulled, unpack_plain_files
from lab.names import MACHINES
from lab.paths import ANSIBLE_DIR, INVENTORIES, VENV


class SshBackend:
    """Real hosts named default and tuned in an Ansible inventory; commands go through Ansible."""

    name = "ssh"
    service_manager = "systemd"

    @property
    def emulation_note(self) -> str:    # a property: VagrantBackend's says more
        return "ssh backend: two real hosts"

    def __init__(self, inventory: Path) -> None:
        if not inventory.exists():
            raise StepFailed(f"--inventory {inventory}: no such file (start from "
                             f"{INVENTORIES / 'ssh' / 'hosts.example.yml'})")
        self.inventory = inventory
        listing = self._listing()
        self.hostvars = listing.get("_meta", {}).get("hostvars", {})
        self.engine_hosts = remote_engines.group_hosts(listing)
        missing = [m for m in MACHINES if m not in self.hostvars]
        if missing:
            raise StepFailed(f"{inventory}: the inventory must define hosts named {', '.join(MACHINES)} "
                             f"(missing: {', '.join(missing)})")

    @property
    def has_engines(self) -> bool:
        """Whether the inventory names load generators (its loadgen group)."""
        return bool(self.engine_hosts)

    def _listing(self) -> dict:
        result = subprocess.run([str(VENV / "bin" / "ansible-inventory"), "-i", str(self.inventory), "--list"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise StepFailed(f"{self.inventory}: ansible-inventory failed: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def up(self) -> None:
        pass  # the hosts exist already

    def down(self) -> None:
        raise StepFailed("the ssh backend does not remove real hosts; stop the services there yourself")

    def address(self, name: str) -> str:
        return self.hostvars[name].get("ansible_host", name)

    def exists(self, name: str) -> bool:
        return True

    def processes(self, name: str) -> dict[str, str]:
        """systemd's states in supervisord's words, as the local backend reports them (one command: on a VM
        each is an SSH round trip)."""
        services = self._processes(name)
        if not services:
            return {}
        answer = self.run_in(name, ["systemctl", "is-active", *services]).stdout.splitlines()   # a line per unit
        answer += [""] * (len(services) - len(answer))
        return {service: {"active": "RUNNING", "inactive": "STOPPED"}.get(state.strip(), state.strip().upper()
                                                                          or "UNKNOWN")
                for service, state in zip(services, answer, strict=False)}

    def run_in(self, name: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return self._module(name, "ansible.builtin.command", json.dumps({"argv": argv}), argv, timeout)

    def _module(self, name: str, module: str, args: str, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        # no other callback than json: one the user's environment enables would print beside its document
        env = {**{key: value for key, value in os.environ.items() if key != "ANSIBLE_CALLBACKS_ENABLED"},
               "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
               "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg")}
        try:
            result = subprocess.run([str(VENV / "bin" / "ansible"), name, "-i", str(self.inventory), "-m", module,
                                     "-a", args], capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"no answer from {name} within {timeout:.0f} s")
        try:
            task = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"][name]
            return subprocess.CompletedProcess(argv, task.get("rc", 1), task.get("stdout", ""),
                                               task.get("stderr", "") or task.get("msg", ""))
        except (ValueError, KeyError, IndexError):
            return subprocess.CompletedProcess(argv, 255, "", result.stderr or result.stdout)

    def control(self, name: str, action: str, service: str) -> subprocess.CompletedProcess:
        """start/stop/status a service under the machine's systemd."""
        return self.run_in(name, ["systemctl", action, service])

    def home(self, name: str) -> str:
        """The machine's lab_home (a path on the machine, not on this host)."""
        known = manifest.read_or_none(name)
        if known:
            return known.home
        return self.hostvars[name].get("lab_home") or str(manifest.role_default("lab", "lab_home"))

    def _processes(self, name: str) -> tuple[str, ...]:
        known = manifest.read_or_none(name)
        return known.processes if known else ()

    def remove(self, name: str, glob: str) -> None:
        """As root, so by an argument vector, never a shell: a file's name comes from the machine, where the
        service account names its dumps. find matches the glob at its own depth under lab_home (which exists, where
        a folder of the glob may not yet) and never follows a link."""
        folder, pattern = posixpath.split(glob)
        if not pattern or any(magic in folder for magic in "*?["):
            raise ValueError(f"remove: {glob!r} must be a folder under lab_home and a file name pattern")
        home = str(self.home(name))
        depth = str(len([part for part in folder.split("/") if part]) + 1)
        result = self.run_in(name, ["find", "-P", home, "-mindepth", depth, "-maxdepth", depth, "-path",
                                    posixpath.join(fnmatch_escape(home), folder, pattern),
                                    "(", "-type", "f", "-o", "-type", "l", ")", "-delete"])
        if result.returncode != 0:
            raise StepFailed(f"{name}: could not remove {glob}: {result.stderr.strip()}")

    def begin_measurement(self, name: str) -> None:
        pass  # a real machine's kernel counters need no reset: memory_events gives a baseline

    def pinned_cpus(self, name: str) -> str | None:
        return None  # hosts (or VMs) of their own: the lab pins nothing there

    def memory_events(self, name: str) -> dict:
        """OOM kills so far, from the machine's kernel (the whole machine is the lab's)."""
        vmstat = self.run_in(name, ["cat", "/proc/vmstat"]).stdout
        kills = re.search(r"^oom_kill (\d+)$", vmstat, re.M)
        return {"oom_kills": int(kills[1]) if kills else None, "peak_memory_bytes": None}

    def engines(self, targets: list[tuple[str, int]], log: Path, out: Path) -> AbstractContextManager[Engines]:
        """The JMeter engines of the inventory's loadgen group (lab/machines/remote_engines.py); their logs are
        pulled beside log."""
        return remote_engines.engines(self.inventory, self.engine_hosts, targets, log, self.pull)

    def client_network(self, targets: list[tuple[str, int]]) -> AbstractContextManager[ClientNetwork | None]:
        return nullcontext(None)    # JMeter sends from this host's own network: the lab changes nothing of it

    def network_prefix(self, name: str) -> list[str] | None:
        return None     # the machine's loopback is reached from inside it only

    def journal(self, name: str, since: float, until: float) -> str:
        """What systemd logged about the lab's services during the run."""
        units = [arg for service in self._processes(name) for arg in ("-u", service)]
        return self.run_in(name, ["journalctl", "--no-pager", "-o", "short-unix", "--since", f"@{int(since)}",
                                  "--until", f"@{int(until) + 2}", *units], timeout=60).stdout

    def pull(self, name: str, globs: list[str], destination: Path) -> Pulled:
        """Copies the files matching globs (under lab_home) to destination over SSH (ansible/fetch.yml: one
        archive, packed as the service account); only plain files are written, a link is refused."""
        known = manifest.read_or_none(name)
        user = known.user if known else str(manifest.role_default("lab", "lab_user"))
        with tempfile.TemporaryDirectory(prefix="lab-fetch-") as scratch:
            settings = Path(scratch) / "fetch.json"
            settings.write_text(json.dumps({"lab_fetch_root": self.home(name), "lab_fetch_globs": globs,
                                            "lab_fetch_user": user, "lab_fetch_dest": str(Path(scratch) / "files")}))
            env = {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg")}
            result = subprocess.run([str(VENV / "bin" / "ansible-playbook"), "-i", str(self.inventory),
                                     str(ANSIBLE_DIR / "fetch.yml"), "--limit", name, "-e", f"@{settings}"],
                                    capture_output=True, text=True, env=env, timeout=1800)
            archive = Path(scratch) / "files" / f"{name}.tar"
            if result.returncode != 0 or not archive.is_file():
                return Pulled([], problem=f"ansible-playbook fetch.yml exit {result.returncode}: "
                                          f"{_tail(result.stdout, 5)}")
            files, refused = unpack_plain_files(archive, destination)
            return Pulled(files, problem=f"not copied, a link or not a plain file: {', '.join(refused)}"
                          if refused else None)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
