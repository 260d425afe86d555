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
from lab.machines.protocol import Backend
from lab.paths import ANSIBLE_DIR, LOGS, REPO
from lab.progress import info, step

AS_DEFAULT = ANSIBLE_DIR / "host_vars" / "default.yml"
RESTORE = "./start.sh up --only tuned"


@contextmanager
def tuned_as_default(backend: Backend, host: HostLab) -> Iterator[dict]:
    """The tuned machine with the default one's knobs inside the block; yields what run.json records."""
    with tuned_with(backend, host, AS_DEFAULT, "the default machine's knobs"):
        yield {"mode": "aa", "tuned_knobs": str(AS_DEFAULT.relative_to(REPO))}


@contextmanager
def tuned_with(backend: Backend, host: HostLab, knobs_file: Path | None,
               what: str = "") -> Iterator[Callable[[Path, str], None]]:
    """The tuned machine provisioned with knobs_file as extra vars inside the block (None: as it is, until
    told), and back with its own knobs however the block ends once it was given others. Yields a function
    that gives it other extra vars meanwhile (an ablation walks through configurations); from the first of
    them the host remembers that tuned may carry others' knobs."""
    given = False

    def give(extra_vars: Path, label: str) -> None:
        nonlocal given
        if not given:
            host.aa_begin(RESTORE)      # first: a run cut short from here on still says tuned must be restored
            given = True
        with step(f"Provisioning the tuned machine with {label}"):
            _provision(backend, extra_vars)

    try:
        if knobs_file is not None:
            give(knobs_file, what)
        yield give
    except BaseException:
        if given:
            try:                # the run's own error (a Ctrl-C, a failure) is what it reports, not the restore's
                _restore(backend, host)
            except Exception as error:  # noqa: BLE001
                info(f"the tuned machine could not get its own knobs back ({error})")
        raise
    if given:
        _restore(backend, host)


def _restore(backend: Backend, host: HostLab) -> None:
    with step("Provisioning the tuned machine back with its own knobs"):
        _provision(backend, None)
    host.aa_end()


def _provision(backend: Backend, extra_vars: Path | None) -> None:
    result = provision.run_playbook(backend.inventory, LOGS, limit="tuned", extra_vars=extra_vars)
    if result.returncode != 0:
        raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}. "
                         f"{RESTORE} gives the tuned machine its own knobs back")


def refuse_if_pending(host: HostLab) -> None:
    """An A/B run on a tuned machine that still has other knobs (the default one's, an ablation's) would compare
    default with something else than the tuned machine."""
    if host.aa_pending():
        raise StepFailed(f"the tuned machine still carries other knobs than its own from an A/A run or an ablation "
                         f"that did not finish ({host.aa_file}): {RESTORE} restores them")

