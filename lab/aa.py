"""A/A: both machines with the default machine's knobs, so that repeated trials measure what this host cannot
tell apart, the noise floor. The tuned machine is provisioned with ansible/host_vars/default.yml as extra vars
(they win over its own host_vars: it differs from default by nothing but its place), loaded, and provisioned
back with its own knobs however the run ends. While it carries default's knobs the host says so
(HostLab.aa_file), and an A/B run refuses until `./start.sh up --only tuned` restores it."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import provision
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.machines import MACHINES
from lab.machines.protocol import Backend
from lab.paths import ANSIBLE_DIR, LOGS, REPO
from lab.progress import info, step

AS_DEFAULT = ANSIBLE_DIR / "host_vars" / "default.yml"
RESTORE = "./start.sh up --only tuned"


@contextmanager
def tuned_as_default(backend: Backend, host: HostLab) -> Iterator[dict]:
    """The tuned machine with the default one's knobs inside the block, its own back however the block ends;
    yields what run.json records."""
    with machines_with(backend, host) as give:
        give("tuned", AS_DEFAULT, "the default machine's knobs")
        yield {"mode": "aa", "tuned_knobs": str(AS_DEFAULT.relative_to(REPO))}


@contextmanager
def machines_with(backend: Backend, host: HostLab) -> Iterator[Callable[[str, Path, str], None]]:
    """Yields give(machine, extra vars, label), which provisions a machine with other knobs (an ablation walks
    both through configurations); every machine given some gets its own back however the block ends. From the
    first, the host remembers which machines may carry others' knobs, and how to restore them."""
    given: list[str] = []

    def give(machine: str, extra_vars: Path, label: str) -> None:
        if machine not in given:        # first: a run cut short from here on still says it must be restored
            given.append(machine)
            host.aa_begin((machine,))
        with step(f"Provisioning the {machine} machine with {label}"):
            _provision(backend, extra_vars, machine, restore_command(host.aa_machines()))

    try:
        yield give
    except BaseException:
        if given:
            try:                # the run's own error (a Ctrl-C, a failure) is what it reports, not the restore's
                _restore(backend, host, given)
            except Exception as error:  # noqa: BLE001
                info(f"the machines could not get their own knobs back ({error})")
        raise
    if given:
        _restore(backend, host, given)


def restore_command(machines: list[str]) -> str:
    """What gives these machines their own knobs back."""
    return RESTORE if machines == ["tuned"] else "./start.sh up"


def _restore(backend: Backend, host: HostLab, machines: list[str]) -> None:
    """Each machine given others provisioned with its own knobs, even when another's restore fails (the first
    failure is raised after)."""
    failed: StepFailed | None = None
    for machine in MACHINES:        # in the lab's order, whichever was given first
        if machine in machines:
            try:
                with step(f"Provisioning the {machine} machine back with its own knobs"):
                    _provision(backend, None, machine, restore_command(host.aa_machines()))
            except StepFailed as error:
                failed = failed or error
                continue
            host.aa_end(machine)
    if failed:
        raise failed


def _provision(backend: Backend, extra_vars: Path | None, machine: str, restore: str) -> None:
    result = provision.run_playbook(backend.inventory, LOGS, limit=machine, extra_vars=extra_vars)
    if result.returncode != 0:
        raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}. "
                         f"{restore} gives {'the tuned machine its' if restore == RESTORE else 'the machines their'} "
                         "own knobs back")


def refuse_if_pending(host: HostLab, a_a: bool = False) -> None:
    """An A/B run on a machine that still has other knobs than its own (the default one's, an ablation's) would
    compare something else than the two machines; an A/A run gives the tuned machine the default one's knobs anyway,
    but its noise floor needs the default machine as it is."""
    machines = [m for m in host.aa_machines() if not (a_a and m == "tuned")]
    if machines:
        everyone = host.aa_machines()
        who = (f"the {' and '.join(machines)} machines still carry other knobs than their own" if len(machines) > 1
               else f"the {machines[0]} machine still carries other knobs than its own")
        raise StepFailed(f"{who} from an A/A run or an ablation that did not finish "
                         f"({host.aa_file}): {restore_command(everyone)} restores them")
