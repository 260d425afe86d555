"""The machines' life: up (install, build, create, provision, check), down, and which backend the lab
that is up came from (lab.hostlab keeps it, host-wide), so status, run and down find it without --backend."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from lab import budget, given_knobs, knobs, profiles, provision, status
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.load import engines, jmeter
from lab.machines import choose
from lab.machines.local.memory import VM_RAM_MIB, MemoryModel
from lab.machines.protocol import Backend
from lab.names import MACHINES
from lab.paths import ANSIBLE_DIR, LOGS, REPO
from lab.progress import info, step


def default_backend(host: HostLab) -> tuple[str, Path | None, str]:
    """The backend of the lab that is up, else the best one this host has, and why."""
    owner = host.owner()
    if owner is not None:
        return owner.backend, owner.inventory, "the lab that is up uses it"
    name, why = choose.default_backend()
    return name, None, why


def check_knobs() -> None:
    """A misspelled knob would be ignored by Ansible: refuse it before anything changes."""
    unknown = knobs.unknown_knobs(ANSIBLE_DIR)
    if unknown:
        raise StepFailed("unknown knobs, nothing was changed:\n    " + knobs.describe(unknown).replace("\n", "\n    "))


def up(backend: Backend, inventory: Path | None, host: HostLab, only: str | None = None,
       setup: MachineSetup | None = None, strict: bool = False) -> dict[str, dict]:
    """Both machines created and provisioned (or only one of them), each answering through HTTPD, with the
    setup's profile and memory model; returns their status. strict: a machine whose memory budget exceeds its
    model is refused, before anything changes."""
    check_knobs()
    setup = setup or MachineSetup()
    check_budgets(backend, setup, [name for name in MACHINES if only in (None, name)], strict)
    setup.apply(backend)
    print(f"Machines: {backend.emulation_note}", file=sys.stderr)
    with step("Building the service"):
        provision.build_service()
    host.claim(backend.name, inventory)        # before anything exists: a half-made lab is this checkout's too
    with step(f"Creating the machines ({backend.name} backend)"):
        backend.up()
    if backend.engine_hosts and only is None:
        with step("Packing the lab's JMeter and the engines' RMI keys for the load generators"):
            info(f"{jmeter.bundle().relative_to(REPO)}; {engines.rmi_properties().parent.relative_to(REPO)}")
    with step(f"Provisioning {'the ' + only + ' machine' if only else 'both machines'} with Ansible"):
        result = provision.run_playbook(backend.inventory, LOGS, limit=only)
        if result.returncode != 0:
            raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}")
        host.aa_end(only)                       # the machines provisioned have their own knobs again
        # What this run changed: everything at first, only an edited knob later, nothing when all is in place.
        hosts = [name for name in MACHINES if only in (None, name)] + list(backend.engine_hosts if only is None else ())
        info("changed: " + ", ".join(f"{name} {result.changed.get(name, '?')}" for name in hosts)
             + f"; full log: {result.log}")
    with step("Checking each machine answers through HTTPD"):
        machines = status.observe_all(backend, (name for name in MACHINES if only in (None, name)))
        broken = [f"{name}: {m['url']} -> {m.get('http_status')}" for name, m in machines.items()
                  if m.get("http_status") != 200]
        if broken:
            raise StepFailed("not answering: " + "; ".join(broken))
    print(f"\n{'Both machines are' if only is None else f'The {only} machine is'} up:", file=sys.stderr)
    for name, machine in machines.items():
        print(f"  {name:<8} {machine['url']}", file=sys.stderr)
    return machines


def check_budgets(backend: Backend, setup: MachineSetup, machines: list[str], strict: bool) -> list[budget.Budget]:
    """Each machine's memory budget from the knobs it is about to get, printed; one that does not fit its model
    is warned of, or refused with strict."""
    profile = setup.profile_file()
    model = setup.model(backend).as_json() if hasattr(backend, "use_memory") else None
    limit, swap, sees = budget.machine_memory(backend.name, model, getattr(backend, "memory_mb", VM_RAM_MIB))
    try:
        rendered = knobs.rendered(backend.inventory, ANSIBLE_DIR, machines, knobs.KNOB_PREFIXES,
                                  extra_vars=setup.knobs_files() or None, profile=profile)
    except Exception as error:  # noqa: BLE001  (Ansible's own errors are many; the playbook will say them again)
        why = f"the knobs could not be read from {backend.inventory}: {type(error).__name__}: {error}"
        if strict:
            raise StepFailed(f"--strict: no memory budget, nothing was changed: {why}") from error
        info(f"memory budget: {why}")
        return []
    budgets = [b for name in machines if (b := budget.estimate(name, rendered[name], limit, swap, sees))]
    unknown = [name for name in machines if name not in {b.machine for b in budgets}]
    info("memory budget under full load (lab/budget.py):")
    for line in [b.describe() for b in budgets] + [f"{name}: not known (its JVM sizes its heap from the host's "
                                                   "memory; -Xmx in camel_app_java_options makes it known)"
                                                   for name in unknown]:
        info(f"  {line}")
    over = [warning for b in budgets if (warning := b.warning())]
    if over and strict:
        raise StepFailed("--strict: nothing was changed:\n    " + "\n    ".join(over))
    for warning in over:
        print(f"Warning: {warning} (up --strict refuses it)", file=sys.stderr)
    return budgets


def down(backend: Backend, host: HostLab) -> None:
    with step(f"Removing both machines ({backend.name} backend)"):
        backend.down()
    host.aa_end()
    profiles.forget()
    given_knobs.forget()
    host.release(backend.name)          # the lab that was up is gone


@dataclass(frozen=True)
class MachineSetup:
    """What up gives the machines beyond their host_vars: a machine profile (lab/profiles.py), a knobs file for one
    machine (lab/given_knobs.py) and, on the local backend, a memory model (lab/machines/local/memory.py). None: as
    they are now."""
    profile: str | None = None
    memory: str | None = None
    swap_mib: int | None = None
    knobs: str | None = None                    # --knobs FILE|none, as typed ...
    knobs_machine: str = given_knobs.DEFAULT_MACHINE    # ... for this machine (up --only names another)

    @classmethod
    def of(cls, args: argparse.Namespace, wanted: dict | None, backend: Backend) -> MachineSetup:
        """The options given, else what the scenario asks (wanted: its machines: field); a scenario's memory model
        is the local backend's only (VMs and hosts have the memory they have)."""
        wanted = {name: value for name, value in (wanted or {}).items()
                  if name == "profile" or hasattr(backend, "use_memory")}
        given = {name: getattr(args, name, None) for name in ("profile", "memory", "swap_mib")}
        return cls(**{name: value if value is not None else wanted.get(name) for name, value in given.items()},
                   knobs=getattr(args, "knobs", None),
                   knobs_machine=getattr(args, "only", None) or given_knobs.DEFAULT_MACHINE)

    def check(self, backend: Backend) -> None:
        """Refuses what this backend cannot give, before anything starts."""
        if (self.memory is not None or self.swap_mib is not None) and not hasattr(backend, "use_memory"):
            raise StepFailed(f"--memory/--swap model the local backend's machines; the {backend.name} backend's "
                             "machines have the memory their host or VM has (LAB_VAGRANT_MEMORY_MB for Vagrant)")
        if self.profile is not None and self.profile != profiles.NONE:
            profiles.find(self.profile)
        if hasattr(backend, "use_memory"):
            model = self.model(backend)
            if hasattr(backend, "check_memory"):
                backend.check_memory(model)

    def model(self, backend: Backend) -> MemoryModel:
        current = getattr(backend, "memory", MemoryModel())
        return MemoryModel(self.memory or current.name, current.swap_mib if self.swap_mib is None else self.swap_mib)

    def profile_file(self) -> Path | None:
        """The machine profile's vars file the machines are about to get: the one given, else the active one."""
        if self.profile == profiles.NONE:
            return None
        chosen = profiles.find(self.profile) if self.profile is not None else profiles.active()
        return chosen.file if chosen else None

    def knobs_files(self) -> dict[str, Path]:
        """The knobs file each machine is about to be given over its host_vars: the one --knobs names, else the
        ones up --knobs gave before."""
        if self.knobs is None:
            return given_knobs.files()
        files = given_knobs.files(besides=self.knobs_machine)
        if self.knobs != given_knobs.NONE:
            files[self.knobs_machine] = given_knobs.check(self.knobs)
        return files

    def apply(self, backend: Backend) -> None:
        if self.profile is not None:
            profiles.choose(self.profile)
        if self.knobs is not None:
            given_knobs.give(self.knobs_machine, self.knobs)
        if hasattr(backend, "use_memory"):
            backend.use_memory(self.model(backend))
        profile = profiles.active()
        info(f"machine profile: {profile.describe() if profile else 'none'}")
        for machine, item in given_knobs.given().items():
            info(f"the {machine} machine's knobs: its host_vars, then {item.describe()}; up --only {machine} "
                 f"--knobs {given_knobs.NONE} returns it to its host_vars alone")


def check_machines(backend: Backend, wanted: dict, source: str) -> None:
    """Refuses a run whose scenario asks for machines other than those that are up."""
    have = profiles.active()
    memory = getattr(backend, "memory", None)
    wrong = []
    if "profile" in wanted and (have.name if have else profiles.NONE) != wanted["profile"]:
        wrong.append(f"the profile {wanted['profile']}, they have {have.name if have else 'none'}")
    if memory is not None and "memory" in wanted and memory.name != wanted["memory"]:
        wrong.append(f"the memory model {wanted['memory']}, they have {memory.name}")
    if memory is not None and "swap_mib" in wanted and memory.swap_mib != wanted["swap_mib"]:
        wrong.append(f"{wanted['swap_mib']} MiB of swap, they have {memory.swap_mib}")
    if wrong:
        # In the order up's help gives them, whatever order the scenario wrote them in.
        fix = " ".join(f"--{name.replace('_mib', '')} {wanted[name]}" for name in ("profile", "memory", "swap_mib")
                       if name in wanted)
        raise StepFailed(f"{source} asks for machines with {'; '.join(wrong)}: ./start.sh up {fix} first (or "
                         f"./start.sh --scenario {source}, which brings them up so and runs it)")
