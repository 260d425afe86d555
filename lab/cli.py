"""./start.sh's command line: parses the options and hands each command to its module (lifecycle:
up and down; experiment: run; status)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from lab import experiment, lifecycle, load, runfolder, status
from lab.errors import LabError, StepFailed
from lab.hostlab import HostLab
from lab.machines import MACHINES, choose, manifest
from lab.machines.protocol import Backend


def _inventory(text: str) -> Path:
    """--inventory as the user typed it, from the folder they ran ./start.sh in (start.sh moves into
    the repository and says where it came from in LAB_CALLER_DIR)."""
    path = Path(os.environ.get("LAB_CALLER_DIR") or os.getcwd()) / Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such inventory file ({path})")
    return path.resolve()


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    # Accepted before and after the command; only the top level sets defaults, or a command's
    # default would override what was given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--backend", choices=("local", "vagrant", "ssh"),
                        default=None if defaults else argparse.SUPPRESS,
                        help="where the machines come from (default: vagrant where it has VirtualBox or "
                             "KVM, else local, which needs no hypervisor)")
    common.add_argument("--inventory", type=_inventory, default=None if defaults else argparse.SUPPRESS,
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
    options.add_argument("--schedule", choices=load.SCHEDULES, default=unset,
                         help="load both machines at once, or one after the other (default: at once only when "
                              "each machine and JMeter have CPUs of their own)")
    options.add_argument("--aa", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help="A/A: the tuned machine gets the default one's knobs for this run (restored after), so "
                              "--repeat N measures the noise floor: the smallest difference this host can tell")
    options.add_argument("--repeat", type=int, default=unset, metavar="N",
                         help="N trials, each ratio with its 95%% interval over them (default 1; in the sequential "
                              "schedule the machines' order alternates)")
    return options


def _capacity_options() -> argparse.ArgumentParser:
    """The capacity experiment's options: an open model's steps and the SLO they must meet."""
    steps, slo = load.FULL_STEPS, load.FULL_STEPS.slo
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--start-rate", type=int, metavar="RPS", help=f"first step's arrivals per second "
                                                                         f"(default {steps.start_rps})")
    options.add_argument("--step-rate", type=int, metavar="RPS", help=f"added at each step (default {steps.step_rps})")
    options.add_argument("--step-length", type=int, metavar="SECONDS", help=f"each step (default {steps.step_s} s)")
    options.add_argument("--max-rate", type=int, metavar="RPS", help=f"the last step at most (default {steps.max_rps})")
    options.add_argument("--slo-p99", type=int, metavar="MS", help=f"a step's p99 at most (default {slo.p99_ms} ms)")
    options.add_argument("--slo-errors", type=float, metavar="PERCENT",
                         help=f"a step's errors at most (default {slo.error_pct:g}%%)")
    options.add_argument("--quick", action="store_true", help=f"a smoke run: {load.QUICK_STEPS.describe()}")
    options.add_argument("--schedule", choices=load.SCHEDULES, help="both machines at once, or one after the other "
                                                                    "(default: as for run)")
    options.add_argument("--repeat", type=int, metavar="N", help="N trials (default 1)")
    return options


# option, StepLoad field, smallest value
_STEP_OPTIONS = (("--start-rate", "start_rps", 1), ("--step-rate", "step_rps", 1), ("--step-length", "step_s", 1),
                 ("--max-rate", "max_rps", 1))


def _steps(args: argparse.Namespace) -> load.StepLoad:
    """The capacity run's steps the options ask for; a bad value is named as the user typed it."""
    steps = load.QUICK_STEPS if args.quick else load.FULL_STEPS
    overrides: dict = {}
    for option, field, smallest in _STEP_OPTIONS:
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None and value < smallest:
            raise StepFailed(f"{option} {value}: must be {smallest} or more")
        if value is not None:
            overrides[field] = value
    if args.slo_p99 is not None and args.slo_p99 < 1:
        raise StepFailed(f"--slo-p99 {args.slo_p99}: must be 1 ms or more")
    if args.slo_errors is not None and not 0 <= args.slo_errors <= 100:
        raise StepFailed(f"--slo-errors {args.slo_errors:g}: must be a percentage, 0 to 100")
    if args.repeat is not None and args.repeat < 1:
        raise StepFailed(f"--repeat {args.repeat}: must be 1 or more")
    slo = load.Slo(p99_ms=args.slo_p99 if args.slo_p99 is not None else steps.slo.p99_ms,
                   error_pct=args.slo_errors if args.slo_errors is not None else steps.slo.error_pct)
    start, most = overrides.get("start_rps", steps.start_rps), overrides.get("max_rps", steps.max_rps)
    if most < start:
        raise StepFailed(f"--max-rate {most} is below --start-rate {start}")
    return replace(steps, **overrides, slo=slo)


# option, LoadProfile field, smallest value
_PROFILE_OPTIONS = (("--users", "users", 1), ("--ramp", "ramp_s", 0), ("--duration", "duration_s", 1),
                    ("--think", "think_ms", 0))


def _profile(args: argparse.Namespace) -> load.LoadProfile:
    """The load profile the options ask for; a bad value is named as the user typed it."""
    profile = load.QUICK if args.quick else load.FULL
    overrides = {}
    for option, field, smallest in _PROFILE_OPTIONS:
        value = getattr(args, option[2:])
        if value is None:
            continue
        if value < smallest:
            raise StepFailed(f"{option} {value}: must be {smallest} or more")
        overrides[field] = value
    if args.repeat is not None and args.repeat < 1:
        raise StepFailed(f"--repeat {args.repeat}: must be 1 or more")
    chosen = replace(profile, **overrides)
    if chosen.ramp_s > chosen.duration_s:
        raise StepFailed(f"--ramp {chosen.ramp_s} is longer than --duration {chosen.duration_s}: the ramp-up is "
                         "part of the run")
    return chosen


def _parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = argparse.ArgumentParser(
        prog="./start.sh", parents=[_common_options(defaults=True), _load_options(defaults=True)],
        description="camel-tuning-lab: a default and a tuned machine, side by side. "
                    "Without a command: up, then run.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    up_parser = commands.add_parser("up", parents=[common], help="install, build, create and provision both machines")
    up_parser.add_argument("--only", choices=MACHINES, metavar="MACHINE",
                           help="provision this machine only (after changing its knobs; the other is left as it is)")
    commands.add_parser("run", parents=[common, _load_options(defaults=False)],
                        help="load both machines side by side, collect the evidence, write the report")
    commands.add_parser("capacity", parents=[common, _capacity_options()],
                        help="each machine's capacity: arrivals stepped up until the SLO is missed, the report "
                             "with the latency-throughput curve and where each broke")
    status_parser = commands.add_parser("status", parents=[common], help="what each machine really runs")
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser("down", parents=[common], help="stop and remove everything the lab created")
    commands.add_parser("jmeter", help="the lab's own JMeter: ./start.sh jmeter [JMETER ARGUMENTS] (its GUI "
                                       "without any; -n -t PLAN.jmx for a plan of yours); the machines are the "
                                       "properties default.host, default.port, default.path, default.url, tuned.…")
    return parser


def main(argv: list[str] | None = None, host: HostLab | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["jmeter"]:                      # everything after it is JMeter's
        return run_jmeter(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "jmeter":                    # options before it: JMeter's arguments would be argparse's
        print("start.sh: put jmeter first: ./start.sh jmeter [JMETER ARGUMENTS]", file=sys.stderr)
        return 2
    host = host or HostLab()
    try:
        # A bad option fails here, before anything starts.
        profile = _profile(args) if args.command in (None, "run") else _steps(args) if args.command == "capacity" \
            else None
        if args.backend is None:
            args.backend, args.inventory, why = lifecycle.default_backend(host)
            print(f"Backend: {args.backend} ({why}; --backend chooses another)", file=sys.stderr)
        host.check(args.command or "up", args.backend)
        if profile is not None:
            runfolder.check_free_space(load.run_folder_bytes(profile) * (args.repeat or 1))
        backend = choose.choose(args.backend, args.inventory)
        if args.command == "status":
            return show_status(backend, args.json)
        with host.busy(" ".join(["./start.sh", *argv])):
            host.check(args.command or "up", args.backend)      # again: another command may have ended meanwhile
            return _change(args, backend, host, profile)
    except LabError as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("start.sh: interrupted", file=sys.stderr)
        return 130


def _change(args: argparse.Namespace, backend: Backend, host: HostLab, profile: load.Profile | None) -> int:
    """up, run, capacity, down, or the whole experiment: the commands that change the machines."""
    if args.command in (None, "up"):
        lifecycle.up(backend, args.inventory, host, only=getattr(args, "only", None))
        if args.command == "up":
            print("Next: ./start.sh run   (load both, write the report)    ./start.sh status   (what each machine "
                  "runs)    ./start.sh down   (remove everything)", file=sys.stderr)
            return 0
    if args.command in (None, "run", "capacity"):
        assert profile is not None
        return experiment.run(backend, profile, args.schedule, args.repeat or 1, host=host,
                              a_a=getattr(args, "aa", False))
    if args.command == "down":
        lifecycle.down(backend, host)
        return 0
    raise StepFailed(f"{args.command}: not a command that changes the machines")


def jmeter_properties() -> dict[str, str]:
    """Each provisioned machine as JMeter properties: <machine>.host, .port, .path, .url."""
    properties = {}
    for name in MACHINES:
        wiring = manifest.read_or_none(name)
        if wiring is not None:
            properties.update({f"{name}.host": wiring.address, f"{name}.port": str(wiring.ports["httpd"]),
                               f"{name}.path": wiring.service_path, f"{name}.url": wiring.service_url})
    return properties


def run_jmeter(args: list[str]) -> int:
    """./start.sh jmeter [ARGS]: the lab's JMeter, in the folder the user ran ./start.sh from."""
    try:
        command = load.jmeter_command(args, jmeter_properties())
    except LabError as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    # JMeter replaces this process: Ctrl-C and SIGTERM reach it directly, for its own clean stop.
    os.chdir(os.environ.get("LAB_CALLER_DIR") or os.getcwd())
    os.execv(command[0], command)
    return 0    # not reached


def show_status(backend: Backend, as_json: bool) -> int:
    report = {"backend": backend.name, "note": backend.emulation_note,
              "machines": {name: status.observe(backend, name) for name in MACHINES}}
    print(json.dumps(report, indent=2) if as_json else status.describe(report))
    return 0
