"""./start.sh: builds, provisions, inspects and removes the lab's two machines."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from lab import backend as backends
from lab import experiment, load, provision, status
from lab.backends.local import LocalBackendError
from lab.paths import REPO
from lab.progress import StepFailed, info, step

# Which backend the lab that is up came from, so status, run and down find it without --backend.
CURRENT_BACKEND = REPO / ".cache" / "backend.json"

def _common_options(defaults: bool) -> argparse.ArgumentParser:
    # Accepted before and after the command; only the top level sets defaults, or a command's
    # default would override what was given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--backend", choices=("local", "vagrant", "ssh"),
                        default=None if defaults else argparse.SUPPRESS,
                        help="where the machines come from (default: vagrant where it has VirtualBox or "
                             "KVM, else local, which needs no hypervisor)")
    common.add_argument("--inventory", type=Path, default=None if defaults else argparse.SUPPRESS,
                        help="Ansible inventory for --backend ssh")
    return common


def _load_options(defaults: bool) -> argparse.ArgumentParser:
    """The experiment's options, for `run` and for the bare ./start.sh (up, then run)."""
    unset = None if defaults else argparse.SUPPRESS
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--users", type=int, default=unset, help="users per machine (default 150)")
    options.add_argument("--ramp", type=int, default=unset, metavar="SECONDS", help="ramp-up (default 150 s)")
    options.add_argument("--duration", type=int, default=unset, metavar="SECONDS",
                         help="whole run per machine, ramp-up included (default 1200 s)")
    options.add_argument("--think", type=int, default=unset, metavar="MS", help="think time per request (default 0)")
    options.add_argument("--quick", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help=f"a smoke run: {load.QUICK.users} users, {load.QUICK.ramp_s} s ramp, "
                              f"{load.QUICK.duration_s} s")
    options.add_argument("--schedule", choices=load.SCHEDULES, default="parallel" if defaults else argparse.SUPPRESS,
                         help="load both machines at once (default), or one after the other on small hosts")
    return options


def _profile(args) -> load.LoadProfile:
    profile = load.QUICK if args.quick else load.FULL
    overrides = {field: value for field, value in (("users", args.users), ("ramp_s", args.ramp),
                                                   ("duration_s", args.duration), ("think_ms", args.think))
                 if value is not None}
    try:
        return replace(profile, **overrides)
    except ValueError as error:
        raise StepFailed(str(error)) from error


def _parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = argparse.ArgumentParser(
        prog="./start.sh", parents=[_common_options(defaults=True), _load_options(defaults=True)],
        description="camel-tuning-lab: a default and a tuned machine, side by side. "
                    "Without a command: up, then run.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("up", parents=[common], help="install, build, create and provision both machines")
    commands.add_parser("run", parents=[common, _load_options(defaults=False)],
                        help="load both machines side by side, collect the evidence, write the report")
    status_parser = commands.add_parser("status", parents=[common], help="what each machine really runs")
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser("down", parents=[common], help="stop and remove everything the lab created")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.backend is None:
            args.backend, args.inventory, why = _default_backend()
            print(f"Backend: {args.backend} ({why}; --backend chooses another)", file=sys.stderr)
        backend = backends.choose(args.backend, args.inventory)
        if args.command is None:  # the whole experiment
            return up(backend, args) or run(backend, args)
        return {"up": up, "run": run, "status": show_status, "down": down}[args.command](backend, args)
    except (StepFailed, LocalBackendError, load.LoadError) as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("start.sh: interrupted", file=sys.stderr)
        return 130


def _remembered_backend() -> dict:
    """What `up` wrote about the lab that is up: {"backend": ..., "inventory": ...}, or {}."""
    try:
        remembered = json.loads(CURRENT_BACKEND.read_text())
    except (OSError, ValueError):
        return {}
    return remembered if isinstance(remembered, dict) and remembered.get("backend") else {}


def _default_backend() -> tuple[str, Path | None, str]:
    """The backend of the lab that is up, else the best one this host has."""
    remembered = _remembered_backend()
    if remembered:
        inventory = remembered.get("inventory")
        return remembered["backend"], Path(inventory) if inventory else None, "the lab that is up uses it"
    name, why = backends.default_backend()
    return name, None, why


def up(backend, args) -> int:
    print(f"Machines: {backend.emulation_note}", file=sys.stderr)
    with step("Installing what the lab needs"):
        provision.install_dependencies()
    with step("Building the service"):
        provision.build_service()
    with step(f"Creating the machines ({backend.name} backend)"):
        backend.up()
    CURRENT_BACKEND.parent.mkdir(parents=True, exist_ok=True)
    CURRENT_BACKEND.write_text(json.dumps({"backend": backend.name,
                                           "inventory": args.inventory and str(args.inventory.resolve())}))
    with step("Provisioning both machines with Ansible"):
        result = provision.run_playbook(backend.inventory, REPO / ".cache" / "logs")
        if result.returncode != 0:
            raise StepFailed(f"ansible-playbook failed (exit {result.returncode}); full log: {result.log}")
        # What this run changed: everything at first, only an edited knob later, nothing when all is in place.
        info("changed: " + ", ".join(f"{name} {result.changed.get(name, '?')}" for name in backends.MACHINES)
             + f"; full log: {result.log}")
    with step("Checking each machine answers through HTTPD"):
        machines = {name: status.observe(backend, name) for name in backends.MACHINES}
        broken = [f"{name}: {m['url']} -> {m.get('http_status')}" for name, m in machines.items()
                  if m.get("http_status") != 200]
        if broken:
            raise StepFailed("not answering: " + "; ".join(broken))
    print("\nBoth machines are up:", file=sys.stderr)
    for name, machine in machines.items():
        print(f"  {name:<8} {machine['url']}", file=sys.stderr)
    print("Next: ./start.sh status   (what each machine runs)    ./start.sh down   (remove everything)",
          file=sys.stderr)
    return 0


def run(backend, args) -> int:
    return experiment.run(backend, _profile(args), args.schedule)


def show_status(backend, args) -> int:
    report = {"backend": backend.name, "note": backend.emulation_note,
              "machines": {name: status.observe(backend, name) for name in backends.MACHINES}}
    print(json.dumps(report, indent=2) if args.json else status.describe(report))
    return 0


def down(backend, args) -> int:
    with step(f"Removing both machines ({backend.name} backend)"):
        backend.down()
    if _remembered_backend().get("backend") == backend.name:   # the lab that was up is gone
        CURRENT_BACKEND.unlink(missing_ok=True)
    return 0
