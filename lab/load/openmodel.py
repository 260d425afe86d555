"""The capacity experiment's load: an open model (requests arrive at a rate, whether or not earlier ones
were answered), stepped up from a start rate by a step every step length, as JMeter 5.6's own Open Model
Thread Group runs it. The plan is the lab's closed-model plan with each machine's thread group swapped
for an Open Model Thread Group (lab/load/openplan.py), so both kinds of run send the same requests.

An open model is what a closed one hides: a closed user waits for its slow answer before it sends the
next request, so a slow server is offered less load (coordinated omission); arrivals at a rate keep
coming, queue, and show where the machine stops keeping up."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

# A step whose requests arrived at less than this share of its rate measured the load generator, not the machine.
DELIVERED = 0.9

# A group that loads nothing (the other machine's, in the sequential schedule): no arrival at all.
IDLE_SCHEDULE = "rate(0/s) random_arrivals(1 s) rate(0/s)"


@dataclass(frozen=True)
class Slo:
    """What a step must meet to count: its 99th percentile and its error rate. Defaults: a reply within
    a second for 99 requests in 100 is what an interactive service promises; one error in a thousand
    is where a retrying client still hides the failures from its user."""
    p99_ms: int = 1000
    error_pct: float = 0.1

    def __post_init__(self) -> None:
        if self.p99_ms < 1:
            raise ValueError(f"Slo.p99_ms must be 1 or more, not {self.p99_ms!r}")
        if not 0 <= self.error_pct <= 100:
            raise ValueError(f"Slo.error_pct must be between 0 and 100, not {self.error_pct!r}")

    def met(self, p99_ms: float | None, error_rate: float | None) -> bool:
        return p99_ms is not None and error_rate is not None and p99_ms <= self.p99_ms \
            and error_rate * 100 <= self.error_pct

    def certainly_missed(self, slow: int, errors: int, planned: float) -> bool:
        """Whatever a step's remaining requests do, it misses: more than 1 in 100 of its planned requests
        already slower than the p99 bound, or more errors than the bound allows of them. One rule for the
        watch that ends a load and for the analysis of a step the load did not finish."""
        return slow > 0.01 * planned or errors > self.error_pct / 100 * planned

    def describe(self) -> str:
        return f"p99 <= {self.p99_ms} ms and errors <= {self.error_pct:g}%"


@dataclass(frozen=True)
class StepLoad:
    """Arrival rates per machine: start_rps, start_rps + step_rps, ... up to max_rps, each for step_s.
    Timeouts are short on purpose: in an open model every request waiting is a JMeter thread, so the
    response timeout bounds how many a machine that stopped answering can pile up (rate x timeout)."""
    start_rps: int = 100
    step_rps: int = 100
    step_s: int = 15
    max_rps: int = 2000
    connect_timeout_ms: int = 5000
    response_timeout_ms: int = 5000
    keep_alive: bool = True
    slo: Slo = field(default_factory=Slo)
    stop_after_misses: int = 2          # consecutive steps that missed the SLO: that machine's load ends
    warmup_s: int = 30                  # first, start_rps this long warms the machine (JIT, pools): never judged
    resolution_rps: int = 25            # once a knee is found, finer steps between the last met and it, this apart
    warmup_rps: int = 0                 # the warm-up's rate (0: start_rps)
    warmup_steps: int = 1               # the warm-up climbs from warmup_rps towards the first step in this many segments
    lead_rps: int = 0                   # a judged step at this rate before start_rps (0: none): a refinement's climb
    # A step whose arrivals fell under DELIVERED of its rate counts as a miss while the load runs (the generator's
    # ceiling, which looks for exactly that). Not for a machine: such a step measured the generator, and the analysis
    # leaves it unjudged rather than calling it the machine's knee.
    stop_when_behind: bool = False
    model: str = field(default="open", init=False)

    def __post_init__(self) -> None:
        for name in ("start_rps", "step_rps", "step_s", "max_rps", "connect_timeout_ms", "response_timeout_ms",
                     "stop_after_misses", "warmup_s", "resolution_rps", "warmup_rps", "warmup_steps", "lead_rps"):
            value, least = getattr(self, name), 0 if name in ("warmup_s", "warmup_rps", "lead_rps") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"StepLoad.{name} must be an integer >= {least}, not {value!r}")
        if self.max_rps < self.start_rps:
            raise ValueError(f"StepLoad.max_rps must be at least start_rps ({self.start_rps}), not {self.max_rps}")
        if self.lead_rps >= self.start_rps:
            raise ValueError(f"StepLoad.lead_rps must be under start_rps ({self.start_rps}), not {self.lead_rps}")
        if self.warmup_s % self.warmup_steps:
            raise ValueError(f"StepLoad.warmup_s ({self.warmup_s}) must divide into its {self.warmup_steps} steps")

    def rates(self) -> list[int]:
        """The judged steps' rates."""
        return [self.lead_rps] * bool(self.lead_rps) + list(range(self.start_rps, self.max_rps + 1, self.step_rps))

    def refined(self, met_rps: int, missed_rps: int) -> StepLoad | None:
        """The second half of the knee search, a second climb: a warm-up climbing to the coarse step below the last
        rate that met the SLO (a quarter of it, a half, three quarters: not judged), that step again (the recheck:
        did the machine recover from the coarse overload?), the last rate met, then steps resolution_rps apart up to
        just below the first that missed (the coarse knee), each as long as a coarse step, ended by the first miss;
        None when the coarse steps were already that fine. The last rate met is reached from the step below, as the
        coarse steps reached it: measured, a default machine met 800 req/s climbing from 700 and missed it (p99 5-7 s)
        reached from a warm-up alone, three trials of three, with its 700 met (docs/capacity.md). Where the last rate
        met was the first step, there is no step below: the recheck is that rate."""
        if met_rps + self.resolution_rps >= missed_rps:
            return None
        last = met_rps + (missed_rps - 1 - met_rps) // self.resolution_rps * self.resolution_rps
        lead = met_rps - self.step_rps if met_rps - self.step_rps >= self.start_rps else 0
        climb = 3
        return replace(self, start_rps=met_rps, step_rps=self.resolution_rps, max_rps=last, lead_rps=lead,
                       warmup_s=climb * max(1, round(self.step_s / climb)), warmup_rps=max(1, (lead or met_rps) // 4),
                       warmup_steps=climb, stop_after_misses=1)

    def warmup_rates(self) -> list[int]:
        """The warm-up's rates, climbing evenly from warmup_rps towards the first step's (one rate: warmup_rps); never
        above the first step's (a --start-rate under the warm-up's first rate warms at it)."""
        target = self.rates()[0]
        first = min(self.warmup_rps or target, target)
        return [first + (target - first) * k // self.warmup_steps for k in range(self.warmup_steps)]

    def segments(self) -> list[tuple[int, int, bool]]:
        """The schedule in order: (rate, seconds, is the warm-up) for the warm-up's segments, if any, then each
        step."""
        seconds = self.warmup_s // self.warmup_steps
        warmup = [(rate, seconds, True) for rate in self.warmup_rates()] if self.warmup_s else []
        return warmup + [(rate, self.step_s, False) for rate in self.rates()]

    @property
    def drain_s(self) -> int:
        """A quiet end after the last step: what is still in flight finishes (JMeter interrupts, as
        errors, the requests of a schedule that has ended)."""
        return -(-(self.connect_timeout_ms + self.response_timeout_ms) // 1000)

    @property
    def duration_s(self) -> int:
        """The whole schedule per machine, when no step ends it early."""
        return self.warmup_s + len(self.rates()) * self.step_s + self.drain_s

    def arrivals(self) -> list[int]:
        """Each segment's requests (the warm-up's first): JMeter's schedule makes exactly rate x length arrive in
        it (its Poisson arrivals are placed within each period, not drawn without end)."""
        return [rate * seconds for rate, seconds, _ in self.segments()]

    @property
    def ramp_s(self) -> int:
        return 0                        # the steps are the ramp: no steady state is looked for

    def schedule(self) -> str:
        """The Open Model Thread Group's schedule: each rate held for a step (rate(r) ... rate(r)), random
        (Poisson) arrivals, as real clients arrive."""
        return " ".join([*(f"rate({r}/s) random_arrivals({seconds} s) rate({r}/s)" for r, seconds, _ in self.segments()),
                         f"pause({self.drain_s} s)"])

    def properties(self) -> dict[str, str]:
        return {"schedule": self.schedule(), "watch_s": str(self.duration_s),     # openplan.WATCH's length
                "connect_timeout_ms": str(self.connect_timeout_ms),
                "response_timeout_ms": str(self.response_timeout_ms), "think_ms": "0",
                "keep_alive": "true" if self.keep_alive else "false"}

    def group_properties(self, machine: str, active: bool) -> dict[str, str]:
        return {} if active else {f"{machine}.schedule": IDLE_SCHEDULE}

    def most_samples(self) -> float:
        return sum(self.arrivals())

    def describe(self) -> str:
        rates = self.warmup_rates()
        at = (f" climbing from {rates[0]} to {rates[-1]} req/s" if len(set(rates)) > 1
              else f" at {rates[0]} req/s" if rates[0] != self.rates()[0] else "")
        warmup = f" after a {self.warmup_s} s warm-up{at} (not judged)" if self.warmup_s else ""
        behind = f" or arrives under {DELIVERED:.0%} of its rate" if self.stop_when_behind else ""
        lead = f"{self.lead_rps}, then " if self.lead_rps else ""
        return (f"open model: {lead}{self.start_rps} to {self.max_rps} req/s by {self.step_rps} every {self.step_s} s"
                f"{warmup} until {self.stop_after_misses} step{'s miss' if self.stop_after_misses > 1 else ' misses'} "
                f"{self.slo.describe()}{behind}")

    def step_of(self, seconds_from_first: float) -> int | None:
        """The judged step (0-based) a request that arrived this long after the first judged step began is in."""
        index = int(seconds_from_first // self.step_s)
        return index if 0 <= index < len(self.rates()) and seconds_from_first >= 0 else None


# The quick steps warm up climbing (25, 50, 75 req/s, 5 s each) rather than at the first step's rate: a JVM just
# (re)started, as after up, a profile or a tune's configuration, given 100 req/s at once on the four-at-a-time backend
# queued 4-5 s from its first second and never recovered (its timed-out requests still held the backend): no capacity.
# 5 s a segment is enough: every capacity, ablation and tune run of the e2e tests warms a just restarted JVM so on that
# backend and finds its knee; the full steps (and a tune's) keep 10 s a segment.
QUICK_STEPS = StepLoad(start_rps=100, step_rps=150, step_s=10, max_rps=1600, warmup_s=15, resolution_rps=50,
                       warmup_rps=25, warmup_steps=3)
# The full steps climb too: measured, 100 req/s at once on JVMs cold after up failed 1,799 and 3,340 of the
# warm-up's requests (p99 9.1 s), and the tuned machine then missed its first judged step.
FULL_STEPS = StepLoad(warmup_rps=25, warmup_steps=3)
# A tune's configuration: the quick steps, up to what a found configuration may serve (2x the default machine's
# 700 req/s, and room above it); a configuration's run ends two steps past its knee, so a poor one costs little. Its
# warm-up 10 s a segment, as the full steps': every configuration's JVM has just restarted.
TUNE_STEPS = replace(QUICK_STEPS, max_rps=2500, warmup_s=30)


class StepWatch:
    """Watches one machine's results as they arrive and says when its load can end: stop_after_misses
    consecutive steps that missed the SLO. A step is judged once every request of it must have ended
    (its end, then the connect and response timeouts), or earlier when its misses are already certain:
    more slow or failed requests than the SLO allows even of the most arrivals the step could have had
    (its rate x length plus four standard deviations of Poisson arrivals). The warm-up is never judged. With
    stop_when_behind, a step whose arrivals in its time fell under DELIVERED of its rate is a miss too.

    A request belongs to the step it arrived in, with the steps' boundaries where the analysis puts them (by
    rank, lab/analysis/capacity.py): JMeter starts its schedule a little before its first request and catches
    up, so once the first segment is over the first judged step starts at the rank-th request (the warm-up's
    count) rather than a clock's guess, and each step a step length after it. No step is judged before then, a
    certain miss neither: by the clock, a step takes in the next one's first requests, slow past the knee, and sees
    a miss the analysis does not (measured: a first answer 0.8 s into JMeter's schedule put 51 slow requests into a
    step that had 2, and ended the load a step early). The report's capacity is computed afterwards from every
    sample; this only ends a load that has nothing more to show.

    one_sample_each: each arrival is one sample (the lab's own plan; a user's may run several samplers an arrival).
    Then once every arrival of the schedule has its sample (answered), nothing is in flight: the steps still waiting
    out the timeouts are judged at once, and a load whose last step met need not wait out its drain."""

    def __init__(self, load: StepLoad, one_sample_each: bool = False) -> None:
        self.load = load
        self.arrivals = sum(load.arrivals()) if one_sample_each else None     # JMeter's schedule sends exactly these
        self.first_start_ms: int | None = None
        self.origin_ms: float | None = None             # where the first judged step begins
        self.anchored = False                           # origin_ms from the requests' ranks, not the first start
        self.samples: list[tuple[int, int, bool]] = []  # (start, elapsed, ok) as they arrive
        self.judged: dict[int, bool] = {}               # judged step -> met the SLO

    def add(self, start_ms: int, elapsed_ms: int, ok: bool) -> None:
        if self.first_start_ms is None:                 # the first answer's request: the load's start, to
            self.first_start_ms = start_ms              # within one arrival (earlier ones count in step 0)
            self.origin_ms = start_ms + self.load.warmup_s * 1000
        self.samples.append((start_ms, elapsed_ms, ok))

    @property
    def answered(self) -> bool:
        """Whether every arrival of the schedule has its sample (answered, failed or timed out): none is in flight."""
        return self.arrivals is not None and len(self.samples) >= self.arrivals

    @property
    def _settle_ms(self) -> int:
        return self.load.connect_timeout_ms + self.load.response_timeout_ms + 1000

    def _anchor(self, now_ms: float) -> None:
        """Once the warm-up's requests (else the first step's) have all ended: the first judged step's start from
        their ranks (fewer answers than that by then: the clock's guess stands, the best there is)."""
        segments = self.load.segments()
        leading = [s for s in segments if s[2]] or segments[:1]
        count = sum(rate * seconds for rate, seconds, _ in leading)
        lasted_ms = sum(seconds for _, seconds, _ in leading) * 1000
        if self.anchored or self.first_start_ms is None or (
                now_ms < self.first_start_ms + lasted_ms + self._settle_ms and not self.answered):
            return
        if len(self.samples) <= count:
            self.anchored = True
            return
        boundary = sorted(start for start, _, _ in self.samples)[count]     # the next segment's first request
        self.origin_ms = boundary if leading[0][2] else boundary - self.load.step_s * 1000
        self.anchored = True

    def _counts(self) -> dict[int, list[int]]:
        """Per judged step: [samples, slower than the SLO, errors]."""
        counts: dict[int, list[int]] = {}
        assert self.origin_ms is not None
        for start, elapsed, ok in self.samples:
            step = self.load.step_of((start - self.origin_ms) / 1000.0)
            if step is None or step in self.judged:
                continue
            found = counts.setdefault(step, [0, 0, 0])
            found[0] += 1
            found[1] += elapsed > self.load.slo.p99_ms
            found[2] += not ok
        return counts

    def update(self, now_ms: float) -> None:
        if self.first_start_ms is None or self.origin_ms is None:
            return
        self._anchor(now_ms)
        if not self.anchored:
            return
        counts = self._counts()
        for step, rate in enumerate(self.load.rates()):
            if step in self.judged:
                continue
            end_ms = self.origin_ms + (step + 1) * self.load.step_s * 1000
            samples, slow, errors = counts.get(step, (0, 0, 0))
            expected = rate * self.load.step_s
            most = expected + 4 * expected ** 0.5
            if self.load.slo.certainly_missed(slow, errors, most):
                self.judged[step] = False
            elif self.answered or now_ms >= end_ms + self._settle_ms:
                behind = self.load.stop_when_behind and samples < DELIVERED * expected
                self.judged[step] = samples > 0 and not behind and not self.load.slo.certainly_missed(slow, errors,
                                                                                                      samples)
            else:
                break                                   # later steps wait for this one

    @property
    def broken(self) -> bool:
        return self.knee is not None

    @property
    def knee(self) -> int | None:
        """The first of stop_after_misses consecutive missed steps, once there are that many; else None."""
        run = 0
        for step in sorted(self.judged):
            run = run + 1 if not self.judged[step] else 0
            if run >= self.load.stop_after_misses:
                return step - run + 1
        return None

    @property
    def capacity_rps(self) -> int | None:
        """Once broken, the highest rate of a step met before the knee (the analysis of every sample can only
        find it lower: it also asks that the step was delivered); None before, or when none was met."""
        knee = self.knee
        if knee is None:
            return None
        met = [step for step, ok in self.judged.items() if ok and step < knee]
        return self.load.rates()[max(met)] if met else None
