"""A/A: both machines with the default machine's knobs, so that repeated trials measure what this host cannot
tell apart, the noise floor. The tuned machine is provisioned with ansible/host_vars/default.yml as the knobs it is
given (site.yml loads them over its own host_vars: it differs from default by nothing but its place), loaded, and provisioned
back with its own knobs however the run ends. While it carries default's knobs the host says so
(HostLab.aa_file), and an A/B run refuses until `./start.sh up --only tuned` restores it."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import provision
from lab.errors import StepFailed
from lab.hostlab import HostLab
from lab.machines.protocol import Backend
from lab.names import MACHINES
from lab.paths import ANSIBLE_DIR, LOGS, REPO
from lab.progress import info, step

AS_DEFAULT = ANSIBLE_DIR / "host_vars" / "default.yml"
RESTORE = "./start.sh up --only tuned"


@contextmanager
def tuned_as_default(backend: Backend, host: HostLab) -> Iterator[dict]:
    """The tuned machine with the default one's knobs inside the block, its own back however the block ends;
    yields what run.json records."""
    with machines_with(backend, host) as give:
        give({"tuned": AS_DEFAULT}, "the default machine's knobs")
        yield {"mode": "aa", "tuned_knobs": str(AS_DEFAULT.relative_to(REPO))}


Give = Callable[[dict[str, Path], str], None]


@contextmanager
def machines_with(backend: Backend, host: HostLab) -> Iterator[Give]:
    """Yields give({machine: knobs file}, label), which provisions those machines with other knobs in one playbook
    run (an ablation walks both through configurations); every machine given some gets its own back however the
    block ends, all in one run. From the first, the host remembers which machines may carry others' knobs, and how
    to restore them."""
    given: list[str] = []

    def give(files: dict[str, Path], label: str) -> None:
        first = [machine for machine in files if machine not in given]
        if first:                       # a run cut short from here on still says they must be restored
            given.extend(first)
            host.aa_begin(tuple(first))
        with step(f"Provisioning the {_named(files)} with {label}"):
            _provision(backend, host, files, list(files), restore_command(host.aa_machines()))

    try:
        yield give
    except BaseException:
        if given:
            try:                # the run's own error (a Ctrl-C, a failure) is what it reports, not the restore's
                _restore(backend, host, given)
            except Exception as error:  # noqa: BLE001
                info(f"the {_named(given)} could not get {'its' if len(given) == 1 else 'their'} own knobs back "
                     f"({error})")
        raise
    if given:
        _restore(backend, host, given)


def give_back(backend: Backend, host: HostLab, machines: Iterable[str]) -> None:
    """Those of these machines the host says may still carry others' knobs (a run cut short while it gave them
    back) provisioned with their own, before a run that needs them as they are."""
    pending = [machine for machine in machines if machine in host.aa_machines()]
    if pending:
        _restore(backend, host, pending)


def restore_command(machines: list[str]) -> str:
    """What gives these machines their own knobs back."""
    return RESTORE if machines == ["tuned"] else "./start.sh up"


def _named(machines: Iterable[str]) -> str:
    names = [machine for machine in MACHINES if machine in machines]     # in the lab's order
    return f"{names[0]} machine" if len(names) == 1 else f"{' and '.join(names)} machines"


def _restore(backend: Backend, host: HostLab, machines: list[str]) -> None:
    """The machines given others provisioned with their own knobs in one run; each whose provisioning did not fail
    is no longer named by the host, even when another's failed (which is raised after)."""
    with step(f"Provisioning the {_named(machines)} back with {'its' if len(machines) == 1 else 'their'} own knobs"):
        try:
            _provision(backend, host, None, machines, restore_command(host.aa_machines()))
        except PlaybookFailed as error:
            for machine in error.restored:
                host.aa_end(machine)
            raise
    for machine in machines:
        host.aa_end(machine)


class PlaybookFailed(StepFailed):
    def __init__(self, message: str, restored: list[str]) -> None:
        super().__init__(message)
        self.restored = restored        # the machines whose part of the run ended without a failure


def _provision(backend: Backend, host: HostLab, files: dict[str, Path] | None, machines: list[str],
               restore: str) -> None:
    """One playbook run for these machines, which `up` provisioned: what knobs change only (knobs_only), so
    every configuration runs on the same base, the one `up` made; with the inventory up was given, as it was."""
    host.check_inventory_unchanged(backend.inventory)
    ordered = [machine for machine in MACHINES if machine in machines]
    result = provision.run_playbook(backend.inventory, LOGS, limit=",".join(ordered), given=files,
                                    knobs_only=True)
    if result.returncode != 0:
        # a machine the recap shows without failures got what it was given; any other may be in between
        whole = [machine for machine in ordered if machine in result.changed and not result.failed.get(machine)]
        raise PlaybookFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}. "
                             f"{restore} gives {'the tuned machine its' if restore == RESTORE else 'the machines their'} "
                             "own knobs back", whole)


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
