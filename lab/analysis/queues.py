"""Where a machine's requests queued at its knee (a capacity run's first step past the SLO): each pool a request
passes, from the front to the back (HTTPD's workers, Tomcat's request threads, on the modern stack without virtual
threads the task pool its route runs on, the service's connections to the backend), its size from the machine's knobs against its peak in the knee step (PCP, lab/analysis/capacity.py's
at_knee). First the host's CPUs: busy over the knee step as the verdict's host-bound has it (on the local backend
JMeter and the other machine share them), they bound it whatever pools were full, for every stage then ran slower
and held its pool longer (a wider pool adds no CPU). Else the bound is the deepest pool that was full: requests
waited for it, and every pool in front of it filled behind them. With neither, the sentence gives the machine's
CPU and memory figures, or the backend's answers bound it.

    sizes(knobs, observed) -> Sizes
    where_queued(at_knee, sizes, cpus) -> dict   # {"stage", "knob", "sentence", "full", "sizes", "basis"}
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from lab.analysis.text import mib
from lab.analysis.verdict import HOST_IDLE_MIN_PCT
from lab.budget import ROUTE_POOL_KNOB, httpd_workers, route_pool, tomcat_threads  # the knobs the budget reads

FULL = 0.95                     # a pool whose peak reached this share of its size was full (PCP samples each second)
HOST_CPUS = "the host's CPUs"                               # the stage named when the host's CPUs bound the knee
BACKEND_POOL_KNOB = "camel_app_http_client_per_route"      # the knob the verdict names for the backend pool
POOL_PER_ROUTE_DEFAULT = 20     # camel-http's connections per route when camel_app_http_client_per_route is unset
BASIS = (f"at the knee step: the host's CPUs when they were idle under {HOST_IDLE_MIN_PCT:g}% over it (a host shared "
         "with JMeter: jmeter/loadgen.csv, as the verdict reads it; else PCP's kernel.all.cpu user and sys); else each pool's peak (PCP) against its size from the machine's knobs, full "
         f"at {FULL:.0%} of it or more (the backend pool: a call waiting for a connection), and the bound the deepest "
         "full pool as a request meets them: HTTPD's workers, Tomcat's threads, the route's task pool (the modern stack "
         "without virtual threads: the route's exchanges in flight against it), the backend pool")


@dataclass(frozen=True)
class Sizes:
    httpd_mpm: str
    httpd_workers: int
    tomcat_threads: int
    backend_pool: int
    route_pool: int | None = None       # None: no such pool (the classic stack, or virtual threads)


def sizes(knobs: dict, observed: dict | None) -> Sizes:
    """The machine's pools as its knobs set them (the backend pool and the route's as the live service reports them,
    where it did)."""
    mpm, workers = httpd_workers(knobs)
    live = (observed or {}).get("backend_pool_per_route")
    pool = live if isinstance(live, int) and live > 0 else \
        int(knobs.get(BACKEND_POOL_KNOB) or POOL_PER_ROUTE_DEFAULT)
    route = (observed or {}).get("route_pool")
    if not (isinstance(route, int) and route > 0):
        route = route_pool(knobs)
    return Sizes(mpm, workers, tomcat_threads(knobs), pool, route)


def where_queued(at_knee: dict, size: Sizes, cpus: float | None) -> dict:
    """The host's CPUs (cpus of them) if they were busy over the knee step, else the deepest pool that was full
    there, and a sentence that says so with each pool's figures."""
    def peak(key: str) -> float | None:
        value = at_knee.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    httpd, tomcat, waiting = peak("httpd_busy_peak"), peak("tomcat_busy_peak"), peak("pool_pending_peak")
    route = peak("route_inflight_peak")
    stages = [  # the deepest first
        ("the backend pool", waiting is not None and waiting > 0, BACKEND_POOL_KNOB,
         f"{waiting or 0:.0f} calls waited for one of its {size.backend_pool} backend connections"),
        *([("the route's task pool", route is not None and route >= FULL * size.route_pool, ROUTE_POOL_KNOB,
            f"the route {_of(route, size.route_pool)} in flight on Spring's task pool")] if size.route_pool else []),
        ("Tomcat's threads", tomcat is not None and tomcat >= FULL * size.tomcat_threads, "camel_app_tomcat_max_threads",
         f"Tomcat {_of(tomcat, size.tomcat_threads)} threads busy"),
        ("HTTPD's workers", httpd is not None and httpd >= FULL * size.httpd_workers,
         f"httpd_mpm_{size.httpd_mpm}_settings.MaxRequestWorkers",
         f"HTTPD {_of(httpd, size.httpd_workers)} workers busy ({size.httpd_mpm} MPM)"),
    ]
    full = [name for name, is_full, _, _ in stages if is_full]
    figures = "; ".join(text for _, _, _, text in reversed(stages))
    deepest = next(((name, knob) for name, is_full, knob, _ in stages if is_full), None)
    own, shared = _cores(peak("cpu_cores_peak")), at_knee.get("host") or {}
    # beside the host's mean, the machine's own over the same step (a one-second peak can pass the CPUs there are)
    own_mean = f"{_cores(mean)} on average" if (mean := peak("cpu_cores_mean")) is not None else f"{own} at most"
    host: float | None
    if shared.get("host_busy_cores") is not None and shared.get("host_cpus"):   # JMeter's host, shared: every CPU state
        host, cpus = float(shared["host_busy_cores"]), float(shared["host_cpus"])
        jmeter = f"JMeter {_cores(shared.get('loadgen_cores'))}"
    else:                                                           # PCP: user and sys of the machine's host
        host, jmeter = peak("host_cpu_cores_mean"), "JMeter's not known here"
    if host is not None and cpus and host >= (1 - HOST_IDLE_MIN_PCT / 100) * cpus:
        stage, deepest = HOST_CPUS, None
        sentence = (f"the host's {cpus:g} CPUs were busy: {host:.2f} cores on average over the step, this machine's "
                    f"processes {own_mean}, {jmeter} (on a shared host, with anything else running there); every "
                    f"stage ran slower behind them ({figures})")
    elif deepest is not None:
        stage, sentence = deepest[0], f"requests queued at {deepest[0]} (its size: {deepest[1]}): {figures}"
    else:
        stage = None
        sentence = (f"no pool was full ({figures}) and the host's CPUs were not ({_cores(host)} busy on average of "
                    f"{'?' if not cpus else f'{cpus:g}'}): its own CPU ({own} at most), its memory "
                    f"({mib(peak('memory_pss_peak_bytes'))} held at most) or the backend's answers bound it")
    return {"stage": stage, "knob": deepest[1] if deepest else None, "full": full, "sentence": sentence,
            "sizes": asdict(size), "basis": BASIS}


def _of(busy: float | None, size: int) -> str:
    return f"{'?' if busy is None else f'{busy:.0f}'} of {size}"


def _cores(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f} cores"
