"""./start.sh's command line: parses the options and hands each command to its module (lifecycle:
up and down; experiment: run; ablation: ablate; status)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lab import (
    experiment,
    given_knobs,
    lifecycle,
    limits,
    load,
    options,
    profiles,
    runfolder,
    scenario,
    scripted,
    status,
)
from lab.ablation import command as ablation_command
from lab.analysis import thresholds
from lab.analysis.compare import gate
from lab.errors import LabError, StepFailed
from lab.hostlab import HostLab
from lab.load import planload
from lab.machines import choose, manifest
from lab.machines.local.memory import DEFAULT, DEFAULT_SWAP_MIB, MODELS
from lab.machines.protocol import Backend
from lab.names import MACHINES
from lab.paths import callers
from lab.report import compare_page, lineup_page
from lab.tune import command as tune_command
from lab.tune import options as tune_options


def _inventory(text: str) -> Path:
    """--inventory as the user typed it, from the folder they ran ./start.sh in (start.sh moves into
    the repository and says where it came from in LAB_CALLER_DIR)."""
    path = callers(text)
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


def _machine_options(defaults: bool) -> argparse.ArgumentParser:
    """up's (and the bare ./start.sh's) say in what the machines are, beyond their knobs."""
    unset = None if defaults else argparse.SUPPRESS
    machine = argparse.ArgumentParser(add_help=False)
    machine.add_argument("--profile", default=unset, metavar="NAME|FILE|none",
                         help="a machine profile: variables both machines get alike, on top of their knobs (shipped: "
                              f"{', '.join(profiles.shipped())}: ansible/profiles/NAME.yml); kept until --profile none "
                              "or down. Bare ./start.sh --profile NAME also runs the shipped scenario NAME, if any")
    machine.add_argument("--knobs", default=unset, metavar="FILE|none",
                         help="a vars file of role variables the tuned machine (the --only machine) gets over its "
                              "host_vars, such as a tune's best.yml; kept until --knobs none or down")
    machine.add_argument("--memory", choices=sorted(MODELS), default=unset,
                         help="local backend: the memory each machine's processes get: vm, what a 512 MB VM leaves "
                              f"them ({MODELS['vm']} MiB, measured), or whole, all 512 MiB (default: as they are, "
                              f"else {DEFAULT})")
    machine.add_argument("--swap", type=int, dest="swap_mib", default=unset, metavar="MIB",
                         help="local backend: MiB of swap each machine may use (a swap file the lab adds to this host "
                              f"and removes at down; default: as they are, else {DEFAULT_SWAP_MIB}; 0: none)")
    return machine


def _json_option(defaults: bool) -> argparse.ArgumentParser:
    """For scripts: the command's result file on standard output (lab/scripted.py)."""
    scripting = argparse.ArgumentParser(add_help=False)
    scripting.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                           help="for scripts: once it ends, its result on standard output and nothing else there "
                                "(a run's summary.json, an ablation's ablation.json, a tune's tune.json)")
    return scripting


def _parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    scripting = _json_option(defaults=False)
    parser = argparse.ArgumentParser(
        prog="./start.sh", parents=[_common_options(defaults=True), options.load_options(defaults=True),
                                    _machine_options(defaults=True), _json_option(defaults=True)],
        description="camel-tuning-lab: a default and a tuned machine, side by side. "
                    "Without a command: up, then run.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    up_parser = commands.add_parser("up", parents=[common, _machine_options(defaults=False)],
                                    help="install, build, create and provision both machines")
    up_parser.add_argument("--only", choices=MACHINES, metavar="MACHINE",
                           help="provision this machine only (after changing its knobs; the other is left as it is)")
    up_parser.add_argument("--strict", action="store_true",
                           help="refuse a machine whose memory budget (an estimate from its knobs of what its "
                                "processes hold under full load, printed by every up) exceeds its memory model")
    commands.add_parser("run", parents=[common, options.load_options(defaults=False), scripting],
                        help="load both machines side by side, collect the evidence, write the report")
    commands.add_parser("capacity", parents=[common, options.capacity_options(), scripting],
                        help="each machine's capacity: arrivals stepped up until the SLO is missed, the report "
                             "with the latency-throughput curve and where each broke")
    commands.add_parser("ablate", parents=[common, options.load_options(defaults=False), options.ablate_options(),
                                           scripting],
                        help="which knob group bought what: the tuned machine walked from the default machine's "
                             "knobs to its own one group at a time (ansible/knob-groups.yml), each configuration "
                             f"measured with --repeat trials (default {options.ABLATION_REPEAT}) against the default "
                             "machine; prints the plan and its duration first")
    commands.add_parser("tune", parents=[common, tune_options.parser(), scripting],
                        help="search the knob space (ansible/knob-space.yml) on the tuned machine for the "
                             "configuration with the highest capacity at the SLO, within memory (Optuna's TPE; "
                             f"--budget, default {tune_options.TUNE_BUDGET}); prints the plan first, writes best.yml")
    compare_parser = commands.add_parser("compare", help="two saved runs side by side (a knob before and after): "
                                                         "./start.sh compare RUN_A RUN_B (run ids in runs/, or paths); "
                                                         "three or more capacity runs: every machine of each in one "
                                                         "table, over RUN_A's default machine")
    compare_parser.add_argument("run_a", metavar="RUN_A")
    compare_parser.add_argument("run_b", metavar="RUN_B")
    compare_parser.add_argument("more", metavar="RUN", nargs="*")
    compare_parser.add_argument("--fail-if-worse", type=float, metavar="PCT",
                                help="a gate with RUN_A as the baseline: exit 3 (and a JUnit file beside the page) "
                                     "when a machine's capacity or throughput, or its p95, is worse in RUN_B by "
                                     "more than PCT percent (with both runs repeated: its whole 95%% interval)")
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
    if args.command == "compare":                   # reads saved runs only: no machine, no backend
        if args.more:
            return run_line_up([args.run_a, args.run_b, *args.more], args.fail_if_worse)
        return run_compare(args.run_a, args.run_b, args.fail_if_worse)
    with scripted.stdout_for_result(bool(getattr(args, "json", False)) and args.command != "status"):
        return _command(args, argv, host or HostLab())


def _command(args: argparse.Namespace, argv: list[str], host: HostLab) -> int:
    """Every command that needs a backend: its options checked before anything starts, then the command."""
    try:
        # A bad option fails here, before anything starts.
        early = [option for option, name in (("--profile", "profile"), ("--memory", "memory"), ("--swap", "swap_mib"),
                                             ("--knobs", "knobs"))
                 if getattr(args, name, None) is not None]
        if early and args.command not in (None, "up"):
            raise StepFailed(f"{early[0]} sets what `up` gives the machines: ./start.sh up {early[0]} ... "
                             f"(then ./start.sh {args.command})")
        if getattr(args, "knobs", None) not in (None, given_knobs.NONE):
            given_knobs.check(args.knobs)
        early = [option for option in early if option != "--knobs"]     # one machine's: --only names which
        if early and getattr(args, "only", None):
            raise StepFailed(f"{early[0]} with --only {args.only}: both machines get it alike, so up gives it to both "
                             f"(./start.sh up {early[0]} ...)")
        if args.command is None and args.profile and not args.scenario and args.profile in scenario.shipped():
            args.scenario = args.profile            # ./start.sh --profile 2018: its machines and its load
        plan = options.experiment(args) if args.command in (None, "run", "capacity") else None
        prepared = ablation_command.prepare(args) if args.command == "ablate" else None
        tune_prepared = tune_command.prepare(args) if args.command == "tune" else None
        if args.backend is None:
            args.backend, args.inventory, why = lifecycle.default_backend(host)
            print(f"Backend: {args.backend} ({why}; --backend chooses another)", file=sys.stderr)
        host.check(args.command or "up", args.backend)
        host.check_inventory(args.command or "up", args.inventory)
        if plan is not None:
            # --limits: a closed model's only (options.experiment refuses it with an open one)
            runfolder.check_free_space(plan.repeat * (load.run_folder_bytes(plan.profile) + (
                2 * load.run_folder_bytes(limits.profile_for(plan.profile))
                if plan.host_limits and isinstance(plan.profile, load.LoadProfile) else 0)))
        backend = choose.choose(args.backend, args.inventory)
        setup = lifecycle.MachineSetup.of(args, plan.machines if plan and args.command is None else None, backend)
        setup.check(backend)
        if args.command == "status":
            return show_status(backend, args.json)
        with host.busy(" ".join(["./start.sh", *argv])):
            host.check(args.command or "up", args.backend)      # again: another command may have ended meanwhile
            host.check_inventory(args.command or "up", args.inventory)
            if prepared is not None:
                return ablation_command.run(backend, host, prepared)
            if tune_prepared is not None:
                return tune_command.run(backend, host, tune_prepared)
            return _change(args, backend, host, plan, setup)
    except LabError as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("start.sh: interrupted", file=sys.stderr)
        return 130


def _change(args: argparse.Namespace, backend: Backend, host: HostLab, plan: options.Experiment | None,
            setup: lifecycle.MachineSetup) -> int:
    """up, run, capacity, down, or the whole experiment: the commands that change the machines."""
    if args.command in (None, "up"):
        lifecycle.up(backend, args.inventory, host, only=getattr(args, "only", None), setup=setup,
                     strict=getattr(args, "strict", False))
        if args.command == "up":
            print("Next: ./start.sh run   (load both, write the report)    ./start.sh status   (what each machine "
                  "runs)    ./start.sh down   (remove everything)", file=sys.stderr)
            return 0
    if args.command in (None, "run", "capacity"):
        assert plan is not None
        if plan.scenario:
            lifecycle.check_machines(backend, plan.machines, plan.scenario)
            print(f"Scenario: {plan.scenario} ({plan.profile.describe()})", file=sys.stderr)
        if isinstance(plan.profile, planload.OWN_PLANS):
            print("\n".join(planload.shown(plan.profile)), file=sys.stderr)
        return experiment.run(backend, plan.profile, plan.schedule, plan.repeat, host=host, a_a=plan.a_a,
                              limits=plan.limits, load_from=plan.load_from, host_limits=plan.host_limits,
                              stop_on_fail=plan.stop_on_fail)
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
            properties.update({f"{name}.host": wiring.address, f"{name}.port": str(wiring.client_port),
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
    os.chdir(callers("."))
    os.execv(command[0], command)
    return 0    # not reached


def _saved_run(typed: str, which: str) -> Path:
    """A run folder as the user named it: a path (from where they ran ./start.sh), else an id in runs/."""
    for candidate in (callers(typed),
                      runfolder.RUNS / typed):
        if runfolder.RunFolder(candidate).run_json.is_file():
            return candidate.resolve()
    raise StepFailed(f"compare: {which} {typed!r} is not a run folder (none there, nor {runfolder.RUNS / typed})")


def run_compare(typed_a: str, typed_b: str, worse_pct: float | None = None) -> int:
    try:
        if worse_pct is not None and not worse_pct >= 0:
            raise StepFailed(f"compare: --fail-if-worse {worse_pct:g}: must be a percentage, 0 or more")
        run_a, run_b = _saved_run(typed_a, "RUN_A"), _saved_run(typed_b, "RUN_B")
        if run_a == run_b:
            raise StepFailed(f"compare: RUN_A and RUN_B are the same run ({run_a})")
        result, page = compare_page.render(run_a, run_b)
    except LabError as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    print("\n".join(compare_page.lines(result)), file=sys.stderr)
    print(f"Report: {page}", file=sys.stderr)
    if worse_pct is None:
        return 0
    results = gate(result, worse_pct)
    if not results:
        results = thresholds.unchecked({f"worse by at most {worse_pct:g}%": worse_pct},
                                       "neither run has a capacity, a throughput or a p95 to compare")
    return thresholds.announce(results, f"Fail if worse than RUN_A by more than {worse_pct:g}%", page.parent.name,
                               page.parent / "thresholds.xml")


def run_line_up(typed: list[str], worse_pct: float | None) -> int:
    try:
        if worse_pct is not None:
            raise StepFailed(f"compare: --fail-if-worse {worse_pct:g} gates RUN_B against RUN_A: give two runs, "
                             f"not {len(typed)}")
        runs = [_saved_run(one, f"RUN {number}") for number, one in enumerate(typed, start=1)]
        twice = next((one for number, one in enumerate(runs) if one in runs[:number]), None)
        if twice is not None:
            raise StepFailed(f"compare: {twice.name} is given twice")
        result, page = lineup_page.render(runs)
    except LabError as error:
        print(f"start.sh: {error}", file=sys.stderr)
        return 1
    print("\n".join(lineup_page.lines(result)), file=sys.stderr)
    print(f"Report: {page}", file=sys.stderr)
    return 0


def show_status(backend: Backend, as_json: bool) -> int:
    given = given_knobs.given()
    report = {"backend": backend.name, "note": backend.emulation_note,
              "machines": {name: {**observed, "given_knobs": given[name].as_json() if name in given else None}
                           for name, observed in status.observe_all(backend, MACHINES).items()}}
    print(json.dumps(report, indent=2) if as_json else status.describe(report))
    return 0
