"""The load a machine gets: a profile (users, ramp-up, duration, think time, timeouts, keep-alive), and
what a run of it returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.load.openmodel import StepLoad

SCHEDULES = ("parallel", "sequential")


class LoadError(LabError):
    """The load could not be prepared or run; the message says what to do."""


@dataclass
class LoadProfile:
    users: int = 150                    # virtual users per machine
    ramp_s: int = 150                   # ramp-up: users arrive evenly over this time (1 user/s here)
    duration_s: int = 1200              # whole run per machine, ramp-up included; JMeter stops by itself
    think_ms: int = 0                   # pause after each request, per user
    connect_timeout_ms: int = 30000     # = HTTPD Timeout/ProxyTimeout and Tomcat connectionTimeout (30 s)
    response_timeout_ms: int = 60000    # > the proxy's 30 s, so proxy errors surface before the client gives up
    keep_alive: bool = True             # as API clients do (the 2018 plan had it off: jmeter/scenarios/2018.yaml)

    def __post_init__(self) -> None:
        for name in ("users", "ramp_s", "duration_s", "think_ms", "connect_timeout_ms", "response_timeout_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LoadProfile.{name} must be an integer >= 0, not {value!r}")
        for name in ("users", "duration_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"LoadProfile.{name} must be 1 or more, not {getattr(self, name)!r}")

    model = "closed"

    def group_properties(self, machine: str, active: bool) -> dict[str, str]:
        """A machine's thread group: its users, none when it idles (the other's turn, sequential)."""
        return {f"{machine}.users": str(self.users) if active else "0"}

    def describe(self) -> str:
        return f"{self.users} users each, ramp {self.ramp_s} s, {self.duration_s} s"

    def most_samples(self) -> float:
        """An upper estimate of the requests one machine can answer in this profile."""
        rate = CEILING_RPS_PER_MACHINE if self.think_ms == 0 else min(CEILING_RPS_PER_MACHINE,
                                                                      self.users * 1000 / self.think_ms)
        return self.duration_s * rate

    def properties(self) -> dict[str, str]:
        """The plan's JMeter properties for this profile."""
        return {"users": str(self.users), "ramp_s": str(self.ramp_s), "duration_s": str(self.duration_s),
                "think_ms": str(self.think_ms), "connect_timeout_ms": str(self.connect_timeout_ms),
                "response_timeout_ms": str(self.response_timeout_ms),
                "keep_alive": "true" if self.keep_alive else "false"}


# What a run folder needs, estimated before a run starts: JMeter writes about 110 bytes per sample
# (measured: tests/fixtures/run-local-tiny), a machine here served at most about 800 req/s, so 2,000
# is a ceiling; PCP archives, GC logs, dashboards and the report add tens of MB.
RESULT_ROW_BYTES = 110
CEILING_RPS_PER_MACHINE = 2000
FIXED_RUN_BYTES = 100 * 1024 * 1024


def run_folder_bytes(profile: LoadProfile | StepLoad, machines: int = 2) -> int:
    """An upper estimate of the disk a run of this profile (or an open model's, lab.load.openmodel) fills."""
    return int(machines * profile.most_samples() * RESULT_ROW_BYTES) + FIXED_RUN_BYTES


FULL = LoadProfile()
# Smoke profile: 90 s of load per machine (+ ~4 s JMeter start and 5-15 s of dashboards): ~1m50 in all
# in parallel (measured against fast local mocks), twice the load time in sequential.
QUICK = LoadProfile(users=20, ramp_s=20, duration_s=90)


@dataclass
class LoadResult:
    results: dict[str, Path]            # machine -> results.csv (machines that ran)
    dashboards: dict[str, Path]         # machine -> dashboard/index.html (machines with samples)
    interrupted: bool
    started_at: float                   # time.time()
    ended_at: float
    schedule: str
    profile: LoadProfile | StepLoad
    problems: list[str] = field(default_factory=list)   # what went wrong without stopping the run
    log: Path | None = None             # out_dir/jmeter.log
    ended_early: dict[str, float] = field(default_factory=dict)     # machine -> s: an open model's SLO missed
    loadgen_cpus: str | None = None     # the CPUs JMeter could run on (a cpulist), as the kernel said
    lost: dict | None = None            # the threshold lost during the load, which stopped it (lab/load/abort.py)

