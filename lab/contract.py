"""The files a run publishes for scripts, as types: summary.json (one run's, or a repeated run's), run.json,
ablation.json and tune.json. These TypedDicts are the one description of their shape: docs/schema/*.schema.json
is generated from them (tools/schema.py), and tests/test_contract.py keeps it current and validates stored and
end-to-end files against it. run.json's writer, the verdict and one run's summary return their types, so mypy
checks what they build; a machine's figures and a repeated run's summary are built up key by key, held to theirs by
those tests. Their readers get them typed
(lab/runfolder.py: RunFolder.summary() and run_summary(), is_repeated() telling the two apart), so mypy checks each
key a reader indexes and the type of what it reads (a .get() of a key not declared here gives an `object`, never a
figure); they read with .get() where a partial file (a run cut short) may lack a part. A figure may be null where
it could not be measured; the run says why in `problems`.

Each file carries a version (`schema`); it goes up when a key a script may read changes meaning or goes
away, not when one is added. Deeper parts that change often (PCP's and GC's details, the prose's
inputs) stay open objects here: their keys are documented where they are computed.
"""
from __future__ import annotations

from typing import Any, Final, Literal, NotRequired

from typing_extensions import TypedDict

SUMMARY_SCHEMA: Final = 2   # 2: the verdict, the detected steady state, JMeter's percentiles
RUN_SCHEMA = 1
ABLATION_SCHEMA = 1
TUNE_SCHEMA = 1

Machines = dict[str, Any]       # machine name -> a value (default, tuned; a profile may name others)


class Slo(TypedDict):
    p99_ms: float
    error_pct: float
    text: NotRequired[str]


class Profile(TypedDict):
    """The load: a closed model (users, ramp_s, duration_s, think_ms) or an open model's steps."""
    model: NotRequired[str]                 # "closed" or "open"
    connect_timeout_ms: int
    response_timeout_ms: int
    keep_alive: bool
    users: NotRequired[int]
    ramp_s: NotRequired[int]
    duration_s: NotRequired[int]
    think_ms: NotRequired[int]
    plan: NotRequired[str]                  # a plan of the user's own (run --plan), as given
    plan_map: NotRequired[dict[str, str]]   # its hosts -> the machines
    plan_groups: NotRequired[dict[str, str]]    # capacity --plan: its open-model thread groups -> the machines
    plan_not_analysed: NotRequired[list[str]]   # its samplers that are not HTTP ("name (kind)")
    plan_properties: NotRequired[dict[str, str]]    # JMeter properties given to it (--property)
    start_rps: NotRequired[int]
    step_rps: NotRequired[int]
    step_s: NotRequired[int]
    max_rps: NotRequired[int]
    warmup_s: NotRequired[int]
    warmup_rps: NotRequired[int]
    warmup_steps: NotRequired[int]
    lead_rps: NotRequired[int]              # a refinement: its first judged step, below start_rps
    resolution_rps: NotRequired[int]
    stop_after_misses: NotRequired[int]
    stop_when_behind: NotRequired[bool]
    slo: NotRequired[Slo]


class Ended(TypedDict):
    how: str                                # completed, interrupted, failed
    during: NotRequired[str]
    error: NotRequired[str]


class Host(TypedDict):
    cpus: int | None
    memory_bytes: int
    kernel: str
    os: str
    python: str
    java: str | None                        # the first line of `java -version` of the Java JMeter runs on


class RunRecord(TypedDict):
    """run.json: what was run, where and how it ended (written whatever happened; lab/experiment.py)."""
    schema: NotRequired[int]                # absent in runs written before RUN_SCHEMA
    run_id: str
    backend: str
    backend_note: str | None
    machine_profile: dict[str, Any] | None
    memory_model: dict[str, Any] | None
    backend_emulated: bool
    schedule: str
    profile: Profile
    ended_early_s: dict[str, float]
    threshold_lost: Any
    loadgen_cpus: Any
    load_generator: dict[str, Any] | None
    limits: dict[str, Any] | None
    machines_loaded: list[str]
    planned_s: float
    started_at: float | None
    ended_at: float | None
    interrupted: bool
    ended: Ended
    problems: list[str]
    host: Host
    machine_homes: dict[str, str]
    versions: dict[str, str]
    placement: NotRequired[dict[str, Any] | None]
    order: NotRequired[list[str]]
    repeat: NotRequired[int]
    trials: NotRequired[list[dict[str, Any]]]
    uncounted_trials: NotRequired[int]
    # what the command that ran it set (its mode): lab/experiment.py's callers
    mode: NotRequired[str | None]
    tuned_knobs: NotRequired[str | None]
    given_knobs: NotRequired[dict[str, Any] | None]
    knobs_files: NotRequired[dict[str, Any]]
    configuration: NotRequired[Any]
    configurations: NotRequired[dict[str, list[Any]] | None]
    load_from: NotRequired[str | None]
    host_limits: NotRequired[bool]
    stop_on_fail: NotRequired[bool]
    thresholds: NotRequired[dict[str, Any] | None]
    ceiling_from: NotRequired[str | None]   # whose generator's ceiling it reuses: a tune's, later trials'
    validation: NotRequired[str]            # a tune's validation: found or own


class SummaryRun(TypedDict):
    """summary.json's `run`: run.json's facts the figures rest on, and the clock they are given on."""
    run_id: str
    backend: str | None
    backend_note: str | None
    backend_emulated: bool | None
    memory_model: dict[str, Any] | None
    machine_profile: dict[str, Any] | None
    schedule: str | None
    profile: Profile | dict[str, Any]
    started_at: float | None
    ended_at: float | None
    duration_s: float | None
    interrupted: bool | None
    ended: Ended | None
    host: Host | None
    versions: dict[str, str] | None
    placement: dict[str, Any] | None
    mode: str | None
    tuned_knobs: str | None
    given_knobs: dict[str, Any] | None
    configuration: Any
    configurations: dict[str, list[Any]] | None
    load_from: str | None
    load_generator: dict[str, Any] | None
    t0: float
    t0_basis: str


class Window(TypedDict, total=False):
    """The steady window the figures cover (an open model's: its whole load), from the run's t0."""
    start_s: float | None
    end_s: float | None
    start_at: float | None
    end_at: float | None
    duration_s: float | None
    ramp_end_s: float | None
    warmup_s: float | None
    settled: bool | None
    detection: Any
    basis: str
    note: str


class LoadFigures(TypedDict):
    """A machine's JMeter figures over its steady window (an open model's: over its whole load)."""
    samples: int
    errors: int
    error_rate: float
    throughput_rps: float
    good_throughput_rps: float
    latency_ms: dict[str, float | None]     # p50, p90, p95, p99, mean, max (JMeter's percentile)
    first_byte_ms: dict[str, float | None]
    connect_ms: dict[str, float | None]
    window: Window
    load_start_s: float
    load_end_s: float
    max_active_users: int
    skipped_rows: int
    all: dict[str, Any]
    steady: dict[str, Any]
    errors_by_type: list[dict[str, Any]]
    error_threshold: dict[str, Any]
    first_error: dict[str, Any] | None
    first_error_s: float | None


class Step(TypedDict):
    """One step of an open model: its rate, what arrived and was answered, its latency and errors, the SLO."""
    step: int
    rate_rps: int
    start_s: float
    partial: bool
    warmup: bool
    arrived_rps: float
    span_s: float
    delivered: bool
    answered_rps: float
    samples: int
    errors: int
    error_rate: float
    client_errors: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    max_in_flight: int
    errors_by_type: list[dict[str, Any]]
    errors_by_class: dict[str, int]
    met: bool | None                        # None: not judged (the warm-up, not delivered, cut short)
    refined: NotRequired[bool]


class MachineCapacity(TypedDict):
    """A machine's capacity at the SLO (lab/analysis/capacity.py states the definitions in `basis`)."""
    slo: Slo
    step_s: int
    steps: list[Step]
    capacity_rps: float | None
    capacity_answered_rps: float | None
    knee_rps: float | None
    reached_max: bool
    found: bool
    broke: str | None
    generator_bound_rps: float | None
    note: str | None
    basis: str
    at_knee: NotRequired[dict[str, Any] | None]
    at_capacity: NotRequired[dict[str, Any] | None]     # the step that gave the capacity: its CPU per request
    refined: NotRequired[dict[str, Any]]


class MachineFigures(TypedDict):
    """summary.json → machines → <name>."""
    missing: list[str]                      # inputs that were not there (each also in `problems`)
    load: LoadFigures | None
    capacity: NotRequired[MachineCapacity]
    gc: dict[str, Any] | None               # None: no GC log (said in `missing`)
    resources: dict[str, Any]
    events: dict[str, Any] | None           # None: no events.json
    memory: dict[str, Any]
    cpu: dict[str, Any]
    url: str | None                         # None (and the three below): status.json did not list the machine
    address: str | None
    processes: dict[str, str] | None
    observed: dict[str, Any] | None
    crash_files: list[Any]
    files: dict[str, Any]
    backend_max_concurrency: int | None


class ComparisonRow(TypedDict):
    """One compared figure: each machine's value and tuned / default."""
    key: str
    label: str
    unit: str
    default: float | None
    tuned: float | None
    ratio: float | None
    better: str                             # "higher" or "lower"
    note: NotRequired[str]
    outlier: NotRequired[bool]
    source: NotRequired[str]
    low: NotRequired[float | None]           # a repeated run's: the ratio's 95% interval over its trials
    high: NotRequired[float | None]
    trials: NotRequired[int]                # a repeated run's: the trials that gave both figures, of `of`
    of: NotRequired[int]
    points: NotRequired[list[Any]]


class Generator(TypedDict, total=False):
    ceiling_rps: float | None
    reached_max: bool
    steps: list[Any]
    where: str | None
    target: str
    text: str
    basis: str
    measured_at: float          # its first request (epoch s)
    copied_from: str            # copied from this run's measurement (lab/generator.py), when it was
    copied: str                 # that, said


class CapacityComparison(TypedDict):
    """A capacity run's answer: each machine's capacity and the ratio; the load generator's ceiling."""
    default_rps: float | None
    tuned_rps: float | None
    ratio: float | None
    note: str | None
    generator: NotRequired[Generator | None]
    low: NotRequired[float | None]           # a repeated run's: the ratio's 95% interval
    high: NotRequired[float | None]
    machines: NotRequired[dict[str, dict[str, Any]]]


class MachineVerdict(TypedDict):
    verdict: str
    findings: list[dict[str, Any]]
    checked: list[str]
    unchecked: list[str]


class Verdict(TypedDict):
    """Whether the comparison can be trusted, and what bound each machine (lab/analysis/verdict.py)."""
    valid: bool
    verdict: str                            # valid, host-bound, load-generator-bound, backend-bound, ...
    sentence: str
    kinds: list[str]
    placement: str | None
    machines: dict[str, MachineVerdict]
    thresholds: dict[str, float]
    basis: str


class KnobsDiffer(TypedDict):
    available: bool
    differ: list[dict[str, Any]]
    wiring: NotRequired[list[str]]          # variables that differ only by the machine's own name: not tuning
    same: int
    unrendered: NotRequired[int]            # values still holding a Jinja2 expression (absent: no knobs.json)


class Summary(TypedDict):
    """summary.json of one run (a capacity run's too, with `capacity`; a trial's, in trials/<k>/)."""
    schema: Literal[2]
    generated_at: float
    generator: str
    run: SummaryRun
    definitions: dict[str, str]
    machines: dict[str, MachineFigures]
    problems: list[str]
    comparison: list[ComparisonRow]
    limits: dict[str, Any] | None
    capacity: NotRequired[CapacityComparison]
    thresholds: NotRequired[list[dict[str, Any]]]
    verdict: Verdict
    claims: dict[str, Any] | None
    knobs: KnobsDiffer
    observed: dict[str, Machines]
    what_happened: list[Any]


class TrialsVerdict(TypedDict):
    valid: bool
    verdict: str
    sentence: str
    trials: dict[str, Verdict]


class RepeatedSummary(TypedDict):
    """summary.json of a repeated run (--repeat N): its trials and each ratio with its 95% interval."""
    schema: Literal[2]
    kind: Literal["repeated"]
    generated_at: float
    generator: str
    run: dict[str, Any]
    trials: list[dict[str, Any]]
    comparison: list[ComparisonRow]
    verdict: TrialsVerdict
    definitions: dict[str, str | None]
    problems: list[str]
    capacity: NotRequired[CapacityComparison]
    noise_floor: NotRequired[dict[str, Any]]
    thresholds: NotRequired[list[dict[str, Any]]]


class Record(TypedDict):
    """What an ablation's and a tune's record share (lab/runfolder.py's RecordFolder writes it at their start)."""
    schema: NotRequired[int]                # absent in records written before they were versioned
    started_at: float
    ended_at: NotRequired[float | None]
    plan: dict[str, Any]
    backend: str


class AblationResult(Record):
    """ablation.json: the plan, each pair of configurations measured, and what each knob group bought."""
    kind: Literal["ablation"]
    groups: dict[str, Any]
    knobs_sha256: str
    placement: dict[str, Any] | None
    pairs: NotRequired[list[list[str]]]     # two at once: each pair measured, the default machine's and the tuned one's
    analysis: NotRequired[dict[str, Any] | None]


class TuneResult(Record):
    """tune.json: the plan, every configuration measured or set aside and why, the best, its validation."""
    kind: Literal["tune"]
    inputs_sha256: str
    result: NotRequired[dict[str, Any] | None]
    validation: NotRequired[dict[str, Any] | None]
