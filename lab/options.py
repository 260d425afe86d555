"""The experiment's options, for `run`, `capacity` and the bare ./start.sh: the load (users, or an open
model's arrival steps and SLO), a scenario file that sets it (lab/scenario.py), the schedule, trials and
thresholds. Everything is checked here, before anything starts; a bad value is named as the user typed it.
On the command line an option wins over the scenario file."""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lab import load, scenario
from lab.analysis import steady
from lab.errors import StepFailed
from lab.load import planload, userplan
from lab.load.abort import LIVE

# Where the load comes from: JMeter on this host, or remote engines it drives (lab/load/engines.py).
LOAD_FROM = ("here", "loadgen")
# Thresholds on a figure over the whole load: refused for a capacity run (see experiment()).
WHOLE_LOAD = ("error_pct_max", "p95_ms_max", "p99_ms_max", "throughput_rps_min")


def _shared(options: argparse.ArgumentParser, defaults: bool) -> None:
    unset = None if defaults else argparse.SUPPRESS
    options.add_argument("--scenario", default=unset, metavar="FILE|NAME",
                         help="a scenario file (YAML: the load, SLO, schedule, trials and thresholds), or a shipped "
                              f"one's name ({', '.join(scenario.shipped())}: jmeter/scenarios/NAME.yaml); options "
                              "given here override it")
    options.add_argument("--threshold", action="append", default=unset, metavar="NAME=VALUE",
                         help="a pass/fail threshold, [default.|tuned.]NAME=VALUE (error_pct_max, p95_ms_max, "
                              "p99_ms_max, throughput_rps_min, capacity_rps_min, ratio_min); a broken one exits 3 "
                              "and thresholds.xml (JUnit) says which. Repeatable")
    options.add_argument("--stop-on-fail", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help="stop the load as soon as a threshold is lost (error_pct_max and p95_ms_max over their "
                              "limit in two progress reports in a row after the ramp; capacity_rps_min once a machine's "
                              "knee is below it); the run keeps what it measured, writes its report and exits 3")
    options.add_argument("--schedule", choices=load.SCHEDULES, default=unset,
                         help="load both machines at once, or one after the other (default: at once only when "
                              "each machine and JMeter have CPUs of their own)")
    options.add_argument("--repeat", type=int, default=unset, metavar="N",
                         help="N trials, each ratio with its 95%% interval over them (default 1; in the sequential "
                              "schedule the machines' order alternates)")
    options.add_argument("--load-from", choices=LOAD_FROM, default=unset,
                         help="where the load comes from: JMeter on this host (here, the default), or JMeter's "
                              "remote engines (loadgen: jmeter-server driven from here over RMI with TLS; on the "
                              "local backend one engine in a load-generator namespace and cgroup of its own)")


def load_options(defaults: bool) -> argparse.ArgumentParser:
    """`run`'s options (defaults=True: the bare ./start.sh's, which is up then run)."""
    unset = None if defaults else argparse.SUPPRESS
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--users", type=int, default=unset, help="users per machine (default 150)")
    options.add_argument("--ramp", type=int, default=unset, metavar="SECONDS", help="ramp-up (default 150 s)")
    options.add_argument("--duration", type=int, default=unset, metavar="SECONDS",
                         help="whole run per machine, ramp-up included (default 1200 s)")
    options.add_argument("--think", type=int, default=unset, metavar="MS", help="think time per request (default 0)")
    options.add_argument("--quick", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help=f"a smoke run: {load.QUICK.describe()}")
    add_plan_options(options, unset, "run unchanged against both machines (a copy in the run folder sends its HTTP "
                     "samplers to them); its users and ramp-up are the plan's, --duration bounds it (needed when it "
                     "loops forever)")
    options.add_argument("--limits", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help="after both machines' load, the host's limits at the same users: the service without "
                              "HTTPD and the mock alone (at most 2 min each, so the report can say what HTTPD "
                              "costs and whether the backend set the pace; local backend)")
    options.add_argument("--aa", action="store_true", default=False if defaults else argparse.SUPPRESS,
                         help="A/A: the tuned machine gets the default one's knobs for this run (restored after), so "
                              "--repeat N measures the noise floor: the smallest difference this host can tell")
    _shared(options, defaults)
    return options


def add_plan_options(options: argparse.ArgumentParser, unset: Any, how: str) -> None:
    """A plan of the user's own: the file, the properties it is given, and which machine each of its hosts means."""
    options.add_argument("--plan", default=unset, metavar="FILE.jmx",
                         help=f"your own JMeter plan instead of the lab's, {how}")
    options.add_argument("--property", action="append", default=unset, metavar="NAME=VALUE",
                         help="a JMeter property for --plan, as JMeter's -JNAME=VALUE gives it (its users, a host "
                              "name it reads with ${__P(NAME)}). Repeatable")
    options.add_argument("--map", default=unset, metavar="HOST=MACHINE,...",
                         help="which machine each host of --plan's samplers means (default: as the plan's thread "
                              "group or host names say, when they name default and tuned unambiguously)")


def capacity_options() -> argparse.ArgumentParser:
    """`capacity`'s options: an open model's steps and the SLO they must meet."""
    options = argparse.ArgumentParser(add_help=False)
    add_step_options(options, load.FULL_STEPS, "a smoke run: " + load.QUICK_STEPS.describe())
    add_plan_options(options, argparse.SUPPRESS, "with an Open Model Thread Group per machine: its arrivals at the "
                     "steps' rates instead of its schedule (a copy in the run folder sends its HTTP samplers to the "
                     "machines)")
    _shared(options, defaults=False)
    return options


def add_step_options(options: argparse.ArgumentParser, steps: load.StepLoad, quick: str) -> None:
    """An open model's steps and the SLO they must meet, with steps' values as the defaults said."""
    slo, unset = steps.slo, argparse.SUPPRESS
    options.add_argument("--start-rate", type=int, default=unset, metavar="RPS",
                         help=f"first step's arrivals per second (default {steps.start_rps})")
    options.add_argument("--step-rate", type=int, default=unset, metavar="RPS",
                         help=f"added at each step (default {steps.step_rps})")
    options.add_argument("--step-length", type=int, default=unset, metavar="SECONDS",
                         help=f"each step (default {steps.step_s} s)")
    options.add_argument("--warmup", type=int, default=unset, metavar="SECONDS",
                         help=f"first, this long, each machine warms up climbing from a quarter of the start rate "
                              f"to three quarters, not judged (default {steps.warmup_s} s; --quick "
                              f"{load.QUICK_STEPS.warmup_s} s; 0: none)")
    options.add_argument("--resolution", type=int, default=unset, metavar="RPS",
                         help=f"once a knee is found, finer steps this far apart between the last rate met and it, "
                              f"until one misses (default {steps.resolution_rps}; --quick "
                              f"{load.QUICK_STEPS.resolution_rps}; --step-rate or more: none)")
    options.add_argument("--max-rate", type=int, default=unset, metavar="RPS",
                         help=f"the last step at most (default {steps.max_rps})")
    options.add_argument("--stop-after-misses", type=int, default=unset, metavar="N",
                         help=f"a machine's load ends after N steps in a row missed the SLO; its knee is the first "
                              f"of them (default {steps.stop_after_misses})")
    options.add_argument("--slo-p99", type=int, default=unset, metavar="MS",
                         help=f"a step's p99 at most (default {slo.p99_ms} ms)")
    options.add_argument("--slo-errors", type=float, default=unset, metavar="PERCENT",
                         help=f"a step's errors at most (default {slo.error_pct:g}%%)")
    options.add_argument("--quick", action="store_true", default=unset, help=quick.replace("%", "%%"))


def named_groups(typed: str | None, known: list[str], source: str) -> tuple[str, ...]:
    """--groups as typed (comma separated), checked against the groups source declares, in source's order;
    every group when not typed."""
    if typed is None:
        return tuple(known)
    names = [name.strip() for name in typed.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise StepFailed(f"--groups {typed}: {', '.join(unknown) or 'no group named'}: the groups are "
                         f"{', '.join(known)} ({source})")
    return tuple(name for name in known if name in names)


def ablate_options() -> argparse.ArgumentParser:
    """`ablate`'s own options, on top of run's load options."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--groups", default=argparse.SUPPRESS, metavar="NAME,NAME",
                         help="ablate only these knob groups (ansible/knob-groups.yml; the others stay as the "
                              "default machine has them): a shorter path")
    options.add_argument("--resume", default=argparse.SUPPRESS, metavar="ABLATION",
                         help="continue an interrupted ablation (its id in runs/, or its folder) as it was planned: "
                              "configurations it measured are kept")
    return options


# Trials per configuration of an ablation, unless --repeat says otherwise: its intervals need several.
ABLATION_REPEAT = 3


def ablation(args: argparse.Namespace) -> Experiment:
    """The load each configuration of an ablation gets: run's options, without what makes no sense there."""
    for option in ("--aa", "--threshold", "--stop-on-fail", "--load-from", "--limits", "--plan", "--map"):
        if given(args, option):
            raise StepFailed(f"{option} does not apply to ./start.sh ablate")
    if given(args, "--resume") is not None:
        typed = [option for option in ("--users", "--ramp", "--duration", "--think", "--quick", "--scenario",
                                       "--schedule", "--repeat", "--groups") if given(args, option)]
        if typed:
            raise StepFailed(f"--resume continues an ablation as it was planned: {', '.join(typed)} cannot change it")
    chosen = experiment(args)
    source = f"--scenario {chosen.scenario}" if chosen.scenario else "its options"
    if chosen.limits:
        raise StepFailed(f"{source}: thresholds do not apply to ./start.sh ablate")
    if given(args, "--repeat") is None and chosen.repeat == 1:
        chosen = replace(chosen, repeat=ABLATION_REPEAT)
    if chosen.repeat < 2:
        raise StepFailed(f"--repeat {chosen.repeat}: an ablation needs 2 trials or more per configuration, for the "
                         "intervals of each group's share")
    if isinstance(chosen.profile, load.StepLoad):       # an open model: each trial's figure is a capacity
        return chosen
    settle = chosen.profile.duration_s - chosen.profile.ramp_s
    if settle < steady.MIN_STEADY_S:
        raise StepFailed(f"--duration {chosen.profile.duration_s} with --ramp {chosen.profile.ramp_s}: {settle} s after "
                         f"the ramp-up, and a trial's figure needs a steady state of {steady.MIN_STEADY_S} s at least")
    return chosen


@dataclass(frozen=True)
class Experiment:
    """What `run` or `capacity` will do, every part checked."""
    profile: load.Profile
    schedule: str | None
    repeat: int
    limits: dict[str, float]
    a_a: bool
    scenario: str | None = None
    load_from: str = "here"
    host_limits: bool = False
    stop_on_fail: bool = False
    machines: dict = dataclasses.field(default_factory=dict)    # what its scenario asks of the machines (profile, memory)


# option, LoadProfile field, smallest value
_USER_OPTIONS = (("--users", "users", 1), ("--ramp", "ramp_s", 0), ("--duration", "duration_s", 1),
                 ("--think", "think_ms", 0))
# option, StepLoad field, smallest value
_STEP_OPTIONS = (("--start-rate", "start_rps", 1), ("--step-rate", "step_rps", 1), ("--step-length", "step_s", 1),
                 ("--max-rate", "max_rps", 1), ("--stop-after-misses", "stop_after_misses", 1),
                 ("--warmup", "warmup_s", 0), ("--resolution", "resolution_rps", 1))


def given(args: argparse.Namespace, option: str) -> Any:
    """The option's value, of the type its parser gives it (type=, action=), or None when not given."""
    return getattr(args, option[2:].replace("-", "_"), None)


def experiment(args: argparse.Namespace) -> Experiment:
    """The experiment the options (and the scenario file they name) ask for."""
    own = given(args, "--plan") is not None
    if own:
        _check_plan_options(args)
    for option in ("--map", "--property"):
        if not own and given(args, option) is not None:
            typed = args.map if option == "--map" else " --property ".join(args.property)
            raise StepFailed(f"{option} {typed}: is for a plan of yours: give --plan FILE.jmx too")
    chosen = _scenario(args)
    if chosen and given(args, "--quick"):
        raise StepFailed(f"--quick and --scenario {args.scenario}: choose one")
    model = chosen.profile.model if chosen else ("open" if args.command == "capacity" else "closed")
    if args.command == "capacity" and model != "open":
        raise StepFailed(f"{chosen.source if chosen else '?'}: model closed: ./start.sh capacity runs an open model "
                         "(model: open); ./start.sh run runs this one")
    repeat = given(args, "--repeat")
    if repeat is not None and repeat < 1:
        raise StepFailed(f"--repeat {repeat}: must be 1 or more")
    base = chosen.profile if chosen else None
    if model == "open":
        wrong = next((option for option, _, _ in _USER_OPTIONS if given(args, option) is not None), None)
        if wrong:
            raise StepFailed(f"{wrong} does not apply to an open model: its load is arrival rates (--start-rate, "
                             "--step-rate, --step-length, --max-rate)")
        steps = step_load(args, base if isinstance(base, load.StepLoad) else None)
        profile: load.Profile = _own_open_plan(args, steps) if own else steps
    else:
        profile = _own_plan(args) if own else _profile(args, base if isinstance(base, load.LoadProfile) else None)
    if model == "open" and given(args, "--limits"):
        raise StepFailed("--limits: an open model has no fixed number of users to measure the host's limits at")
    typed = _thresholds(args)
    limits = {**(chosen.thresholds if chosen else {}), **typed}
    closed_only = [name for name in limits if model == "closed" and name.rpartition(".")[2] == "capacity_rps_min"]
    if closed_only:
        raise StepFailed(f"threshold {closed_only[0]}{_from(chosen, closed_only[0], typed)}: a capacity is measured "
                         "by ./start.sh capacity (an open model); this run has none, so the threshold could only fail")
    # A capacity run loads each machine past its knee on purpose: a figure over its whole load breaks by design.
    whole_load = [name for name in limits if model == "open" and name.rpartition(".")[2] in WHOLE_LOAD]
    if whole_load:
        raise StepFailed(f"threshold {whole_load[0]}{_from(chosen, whole_load[0], typed)}: a capacity run steps past "
                         "each machine's knee on purpose, so a figure over its whole load breaks by design; the SLO "
                         "(--slo-p99, --slo-errors) is what each step must meet, and capacity_rps_min and ratio_min "
                         "gate the run")
    repeat_source = f"--repeat {repeat}"
    if not repeat and chosen and chosen.repeat:
        repeat_source = f"repeat: {chosen.repeat} (in {chosen.source})"
    repeat = repeat or (chosen.repeat if chosen else None) or 1
    if given(args, "--stop-on-fail"):
        _check_stop_on_fail(limits, repeat, repeat_source)
    return Experiment(profile=profile, schedule=given(args, "--schedule") or (chosen.schedule if chosen else None),
                      repeat=repeat, limits=limits, stop_on_fail=bool(given(args, "--stop-on-fail")),
                      a_a=bool(given(args, "--aa")), scenario=chosen.source if chosen else None,
                      load_from=given(args, "--load-from") or "here", host_limits=bool(given(args, "--limits")),
                      machines=dict(chosen.machines) if chosen else {})


# What a plan of the user's own decides itself, or the lab cannot yet do with one.
_NOT_WITH_PLAN = ("--users", "--ramp", "--think", "--quick", "--scenario", "--limits")


def _check_plan_options(args: argparse.Namespace) -> None:
    """run --plan, capacity --plan: the options a plan of the user's own decides itself, or the lab cannot yet run it
    with (capacity's --quick is its steps, not the plan's)."""
    wrong = next((option for option in _NOT_WITH_PLAN if given(args, option)
                  and not (option == "--quick" and args.command == "capacity")), None)
    if wrong:
        raise StepFailed(f"{wrong} with --plan {args.plan}: the plan sets its own users, ramp-up and think time"
                         if wrong in ("--users", "--ramp", "--think", "--quick", "--scenario") else
                         f"{wrong} with --plan {args.plan}: the host's limits load the service and the mock directly, "
                         "where your plan's paths do not go (run it without)")
    if (given(args, "--load-from") or "here") != "here":
        raise StepFailed(f"--load-from {args.load_from} with --plan {args.plan}: a plan of yours runs in JMeter on "
                         "this host")


def _own_plan(args: argparse.Namespace) -> planload.OwnPlan:
    """run --plan's load: the user's plan read, its hosts mapped to the machines, bounded by --duration."""
    reading, chosen, properties = _read_plan(args)
    duration = given(args, "--duration")
    if duration is not None and duration < 1:
        raise StepFailed(f"--duration {duration}: must be 1 or more")
    return planload.profile(reading, chosen, duration, properties)


def _own_open_plan(args: argparse.Namespace, steps: load.StepLoad) -> planload.OwnOpenPlan:
    """capacity --plan's load: the user's plan read, its hosts mapped to the machines, its open-model groups at the
    steps' rates."""
    reading, chosen, properties = _read_plan(args)
    return planload.open_profile(reading, chosen, steps, properties)


def _read_plan(args: argparse.Namespace) -> tuple[userplan.PlanReading, dict[str, str], dict[str, str]]:
    """--plan read with the --property given to it, and its hosts mapped to the machines (--map, else its names)."""
    properties = _plan_properties(given(args, "--property") or [])
    reading = userplan.read(Path(args.plan), properties)
    return reading, userplan.mapping(reading, given(args, "--map")), properties


def _plan_properties(typed: list[str]) -> dict[str, str]:
    properties = {}
    for text in typed:
        name, equals, value = text.partition("=")
        if not equals or not name.strip():
            raise StepFailed(f"--property {text}: use NAME=VALUE, for example --property users=150")
        properties[name.strip()] = value
    return properties


def _check_stop_on_fail(limits: dict[str, float], repeat: int, repeat_source: str) -> None:
    if repeat > 1:
        raise StepFailed(f"--stop-on-fail with {repeat_source}: a repeated run's thresholds are judged on the "
                         "trials' means, which no single trial can lose")
    if not any(name.rpartition(".")[2] in LIVE for name in limits):
        raise StepFailed("--stop-on-fail: none of the run's thresholds can be lost during the load (it watches "
                         f"{', '.join(LIVE)}; give one with --threshold or in the scenario file)")


def _from(chosen: scenario.Scenario | None, name: str, typed: dict[str, float]) -> str:
    """Where a threshold was given, when it was not on the command line (typed): ' (in FILE)'."""
    return f" (in {chosen.source})" if chosen and name in chosen.thresholds and name not in typed else ""


def _scenario(args: argparse.Namespace) -> scenario.Scenario | None:
    typed = given(args, "--scenario")
    if typed is None:
        return None
    return scenario.load(scenario.find(str(typed)), str(typed))


def _thresholds(args: argparse.Namespace) -> dict[str, float]:
    limits = {}
    for text in given(args, "--threshold") or []:
        name, equals, value = str(text).partition("=")
        if not equals:
            raise StepFailed(f"--threshold {text}: use NAME=VALUE, for example tuned.p95_ms_max=500")
        try:
            number = float(value)
        except ValueError:
            raise StepFailed(f"--threshold {text}: {value!r} is not a number") from None
        limits[name.strip()] = scenario.threshold_value(f"--threshold {text}", name.strip(), number)
    return limits


def _profile(args: argparse.Namespace, base: load.LoadProfile | None) -> load.LoadProfile:
    """The closed model's profile; a bad value is named as the user typed it."""
    profile = base or (load.QUICK if given(args, "--quick") else load.FULL)
    overrides = {}
    for option, field, smallest in _USER_OPTIONS:
        value = given(args, option)
        if value is None:
            continue
        if value < smallest:
            raise StepFailed(f"{option} {value}: must be {smallest} or more")
        overrides[field] = value
    chosen = replace(profile, **overrides)
    if chosen.ramp_s > chosen.duration_s:
        raise StepFailed(f"--ramp {chosen.ramp_s} is longer than --duration {chosen.duration_s}: the ramp-up is "
                         "part of the run")
    return chosen


def step_load(args: argparse.Namespace, base: load.StepLoad | None) -> load.StepLoad:
    """The open model's steps and SLO; a bad value is named as the user typed it."""
    steps = base or (load.QUICK_STEPS if given(args, "--quick") else load.FULL_STEPS)
    overrides: dict = {}
    for option, field, smallest in _STEP_OPTIONS:
        value = given(args, option)
        if value is not None and value < smallest:
            raise StepFailed(f"{option} {value}: must be {smallest} or more")
        if value is not None:
            overrides[field] = value
    p99, errors = given(args, "--slo-p99"), given(args, "--slo-errors")
    if p99 is not None and p99 < 1:
        raise StepFailed(f"--slo-p99 {p99}: must be 1 ms or more")
    if errors is not None and not 0 <= errors <= 100:
        raise StepFailed(f"--slo-errors {errors:g}: must be a percentage, 0 to 100")
    start, most = overrides.get("start_rps", steps.start_rps), overrides.get("max_rps", steps.max_rps)
    if most < start:
        raise StepFailed(f"--max-rate {most} is below --start-rate {start}")
    slo = load.Slo(p99_ms=p99 if p99 is not None else steps.slo.p99_ms,
                   error_pct=errors if errors is not None else steps.slo.error_pct)
    if "warmup_s" in overrides:         # a climbing warm-up keeps as many of its segments as the length divides into
        overrides["warmup_steps"] = max(n for n in range(1, steps.warmup_steps + 1) if overrides["warmup_s"] % n == 0)
    if "start_rps" in overrides and steps.warmup_rps:   # and climbs from a quarter of the first step, as a refinement's
        overrides["warmup_rps"] = max(1, start // 4)
    return replace(steps, **overrides, slo=slo)
