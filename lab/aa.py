"""A/A: both machines with the default machine's knobs, so that repeated trials measure what this host cannot
tell apart, the noise floor. The tuned machine is provisioned with ansible/host_vars/default.yml as extra vars
(they win over its own host_vars: it differs from default by nothing but its place), loaded, and provisioned
back with its own knobs however the run ends. While it carries default's knobs the host says so
(HostLab.aa_file), and an A/B run refuses until `./start.sh up --only tuned` restores it."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
    host.aa_begin(RESTORE)      # first: a run cut short from here on still says tuned must be restored
    try:
        with step("A/A: provisioning the tuned machine with the default machine's knobs"):
            _provision(backend, as_default=True)
        yield {"mode": "aa", "tuned_knobs": str(AS_DEFAULT.relative_to(REPO))}
    except BaseException:
        try:                    # the run's own error (a Ctrl-C, a failure) is what it reports, not the restore's
            _restore(backend, host)
        except Exception as error:  # noqa: BLE001
            info(f"A/A: the tuned machine could not get its own knobs back ({error})")
        raise
    _restore(backend, host)


def _restore(backend: Backend, host: HostLab) -> None:
    with step("A/A: provisioning the tuned machine back with its own knobs"):
        _provision(backend, as_default=False)
    host.aa_end()


def _provision(backend: Backend, as_default: bool) -> None:
    result = provision.run_playbook(backend.inventory, LOGS, limit="tuned", extra_vars=AS_DEFAULT if as_default else None)
    if result.returncode != 0:
        raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}. "
                         f"{RESTORE} gives the tuned machine its own knobs back")


def refuse_if_pending(host: HostLab) -> None:
    """An A/B run on a tuned machine that still has the default one's knobs would compare default with itself."""
    if host.aa_pending():
        raise StepFailed(f"the tuned machine still carries the default machine's knobs from an A/A run that did "
                         f"not finish ({host.aa_file}): {RESTORE} restores them")

