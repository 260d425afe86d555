"""A machine's memory budget, from its knobs alone: what its processes will hold under full load (in memory or
swapped out) against what its memory model gives them, so that `up` warns before a configuration cannot fit and
the report sets the estimate beside what PCP then measured.

The estimate is a sum of parts, each from the knobs that size it: the service's JVM (its heap's maximum, what
every JVM of this service holds beside it, its collector's own structures, a share per thread at the proxied
connector's maximum), HTTPD at its MPM's maximum, and the machine's other processes (the mock backend, PCP, the
machine's supervisor). The coefficients were fitted on this project's stored runs, whose PCP archives give each
process's PSS and swap (lab/analysis/pcp.py: pss_max_bytes_by_role, proc_held_max_bytes) and whose
openmetrics give the JVM's areas; tests/test_budget.py holds the estimate to stored runs' peaks (runs/):

    JVM beside the heap, from jvm_memory_used_bytes and PSS: metaspace 57 MiB, compressed class space 7, code
        cache 27, the rest (libjvm, CDS, malloc) about 22: 113 MiB in all, on either collector;
    per thread: the default machine's service held 262 MiB with 187 threads and a 99 MiB heap (Serial), the
        tuned one's 415 MiB (PSS and swap) with 361 threads and a 192 MiB heap (G1): 0.25 MiB a thread, with
        G1's remembered sets and card tables about a tenth of the heap (Serial's a few percent);
    HTTPD: prefork's 150 children 41 MiB at their peak (0.27 MiB each, shared pages counted once by PSS); the
        worker MPM's 10 processes of 30 threads 31 MiB (2.9 MiB a process);
    the mock backend 26 MiB, PCP's daemons 27 MiB, the machine's supervisor 21 MiB at most."""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from lab.machines.local.memory import VM_AVAILABLE_MIB, VM_KERNEL_MIB, VM_RAM_MIB

HEAP_SHARE_DEFAULT = 25.0           # % of the memory the JVM sees: its MaxRAMPercentage default
JVM_BESIDE_HEAP_MIB = 113.0         # metaspace, class space, code cache, libjvm, CDS, malloc
THREAD_MIB = 0.25                   # a thread's stack as touched, and its share of the JVM's per-thread data
JVM_OWN_THREADS = 50                # GC, JIT, Camel, Spring, the management port's connector
TOMCAT_MAX_THREADS = 200            # Tomcat's default maxThreads
SPRING_MIN_SPARE = 10               # Spring Boot's default min-spare threads: the unproxied connector's, idle
ROUTE_POOL_KNOB = "camel_app_route_pool_size"   # the modern stack's: Spring's task pool platform-http runs the route on
ROUTE_POOL_DEFAULT = 8              # Spring Boot's spring.task.execution.pool.core-size (its queue is unbounded: no more)
GC_SHARE = {"G1": 0.10, "Z": 0.15}  # the collector's own structures, as a share of the heap; others 3%
OTHER_GC_SHARE = 0.03
PREFORK_CHILD_MIB = 0.27
THREADED_PROCESS_MIB = 2.9
HTTPD_PARENT_MIB = 2.0
OTHERS_MIB = {"the mock backend": 26.0, "PCP's daemons": 27.0, "the machine's supervisor": 21.0}
# The knobs the estimate reads (tools/memory-peaks keeps these of each stored run).
KNOBS_READ = ("camel_app_java_options", "camel_app_tomcat_max_threads", "camel_app_ajp_enabled", "httpd_mpm",
              "httpd_mpm_prefork_settings", "httpd_mpm_worker_settings", "httpd_mpm_event_settings", "camel_app_stack")
BASIS = ("an estimate under full load, from the machine's knobs (lab/budget.py): the service's JVM (heap maximum, "
         "113 MiB beside it, its collector's structures, 0.25 MiB a thread at the proxied connector's maximum), "
         "HTTPD at its MPM's maximum, the mock backend, PCP and the supervisor; fitted on stored runs' PCP peaks "
         "of PSS plus swap")


@dataclass(frozen=True)
class Part:
    """One share of the budget: what holds it, how much, the knobs that size it and how it was reckoned."""
    what: str
    mib: float
    knobs: tuple[str, ...]
    detail: str


@dataclass(frozen=True)
class Budget:
    machine: str
    parts: tuple[Part, ...]
    limit_mib: float | None             # what the memory model gives the machine's processes (None: not known)
    swap_mib: int | None                # None: not known (a VM's, a host's)

    @property
    def total_mib(self) -> float:
        return sum(part.mib for part in self.parts)

    @property
    def over_mib(self) -> float | None:
        """How far past the model the estimate goes (None: no model, or it fits)."""
        if self.limit_mib is None or self.total_mib <= self.limit_mib:
            return None
        return self.total_mib - self.limit_mib

    def warning(self) -> str | None:
        """What goes wrong when it does not fit, naming the knobs that weigh most; None when it fits."""
        over = self.over_mib
        if over is None:
            return None
        heaviest: dict[tuple[str, ...], Part] = {}     # each knob once, by the heaviest part it sizes
        for part in sorted((p for p in self.parts if p.knobs), key=lambda p: p.mib, reverse=True):
            heaviest.setdefault(part.knobs, part)
        knobs = "; ".join(f"{', '.join(p.knobs)} ({p.what}: {p.mib:.0f} MiB, {p.detail})"
                          for p in list(heaviest.values())[:3])
        fate = (f"past it the machine swaps (its model gives {self.swap_mib} MiB of swap) and pages in under load"
                if self.swap_mib else "with no swap, the kernel's OOM killer ends a process" if self.swap_mib == 0
                else "past it the machine swaps, or its kernel's OOM killer ends a process")
        return (f"{self.machine}: its processes would hold about {self.total_mib:.0f} MiB under full load, "
                f"{over:.0f} MiB more than the {self.limit_mib:.0f} MiB its memory model gives them: {fate}. "
                f"The knobs that weigh most: {knobs}")

    def describe(self) -> str:
        room = ("" if self.limit_mib is None else
                f" of {self.limit_mib:.0f} MiB" + (f", {self.over_mib:.0f} MiB over" if self.over_mib
                                                    else f", {self.limit_mib - self.total_mib:.0f} MiB to spare"))
        parts = ", ".join(f"{p.what} {p.mib:.0f}" for p in self.parts)
        return f"{self.machine}: about {self.total_mib:.0f} MiB under full load{room} ({parts})"

    def as_json(self) -> dict:
        return {"machine": self.machine, "total_mib": round(self.total_mib, 1), "limit_mib": self.limit_mib,
                "over_mib": None if self.over_mib is None else round(self.over_mib, 1), "swap_mib": self.swap_mib,
                "parts": [{**asdict(p), "mib": round(p.mib, 1), "knobs": list(p.knobs)} for p in self.parts],
                "warning": self.warning(), "basis": BASIS}


def machine_memory(backend: str | None, model: dict | None, vm_ram_mib: float = VM_RAM_MIB
                   ) -> tuple[float | None, int | None, float | None]:
    """What a machine's processes get (MiB; None where the lab cannot know it: a real host), its swap (None:
    unknown) and the memory its JVM sizes an ergonomic heap from. model: the local backend's memory model
    (MemoryModel.as_json(), as run.json keeps it); vm_ram_mib: a Vagrant VM's RAM."""
    if model and model.get("limit_mib"):        # the local backend: the cgroup's limit, which the JVM reads
        return float(model["limit_mib"]), int(model.get("swap_mib") or 0), float(model["limit_mib"])
    if backend == "vagrant":                    # a VM of that RAM: its kernel and OS keep what the box measured
        return vm_ram_mib - (VM_RAM_MIB - VM_AVAILABLE_MIB), None, vm_ram_mib - VM_KERNEL_MIB
    return None, None, None


def estimate(machine: str, knobs: dict, limit_mib: float | None, swap_mib: int | None = 0,
             jvm_sees_mib: float | None = None) -> Budget | None:
    """The budget of a machine with these knobs (as knobs.json holds them) under a memory model's limit; None when
    the JVM's heap is left to its ergonomics and what it sizes it from is not known (a real host's memory).
    jvm_sees_mib: the memory the JVM sizes an ergonomic heap from (the cgroup's limit; a VM's RAM), by default
    the limit."""
    options = [str(o) for o in knobs.get("camel_app_java_options") or []]
    sees = jvm_sees_mib if jvm_sees_mib is not None else limit_mib
    if sees is None and _option(options, "-Xmx", "-XX:MaxHeapSize=") is None:
        return None
    parts = [*_jvm(options, knobs, sees), _httpd(knobs)]
    parts += [Part(what, mib, (), "measured") for what, mib in OTHERS_MIB.items()]
    return Budget(machine, tuple(parts), limit_mib, swap_mib)


def _size_mib(text: str) -> float | None:
    """A JVM size (192m, 1g, 524288k, 201326592) in MiB."""
    found = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    if not found:
        return None
    scale = {"": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024}[found.group(2).lower()]
    return int(found.group(1)) * scale


def _option(options: list[str], *prefixes: str) -> str | None:
    """The value of the last option with one of these prefixes (the JVM takes the last)."""
    found = None
    for option in options:
        for prefix in prefixes:
            if option.startswith(prefix):
                found = option[len(prefix):]
    return found


def _jvm(options: list[str], knobs: dict, sees_mib: float | None) -> list[Part]:
    heap = _size_mib(_option(options, "-Xmx", "-XX:MaxHeapSize=") or "")
    if heap is not None:
        heap_detail = f"-Xmx{heap:.0f}m"
    else:
        share = float(_option(options, "-XX:MaxRAMPercentage=") or HEAP_SHARE_DEFAULT)
        heap = share / 100 * (sees_mib or 0)      # estimate() sees to it that sees_mib is known here
        heap_detail = f"ergonomics: {share:g}% of the {sees_mib or 0:.0f} MiB the JVM sees"
    collector = next((name for flag, name in (("-XX:+UseG1GC", "G1"), ("-XX:+UseZGC", "Z"),
                                              ("-XX:+UseParallelGC", "Parallel"), ("-XX:+UseSerialGC", "Serial"))
                      if flag in options), "Serial")      # ergonomics' choice on 2 CPUs and under 1792 MiB
    gc_share = GC_SHARE.get(collector, OTHER_GC_SHARE)
    proxied = tomcat_threads(knobs)
    ajp = bool(knobs.get("camel_app_ajp_enabled"))
    modern = knobs.get("camel_app_stack", "classic") != "classic"
    virtual = modern and bool(knobs.get("camel_app_virtual_threads"))
    # On virtual threads the connectors and the route run on a few carriers (one per CPU): no platform thread each.
    route = route_pool(knobs) or 0
    threads = JVM_OWN_THREADS + route + (0 if virtual else int(proxied) + (SPRING_MIN_SPARE if ajp else 0))
    stack = _size_mib(_option(options, "-Xss", "-XX:ThreadStackSize=") or "")
    per_thread = THREAD_MIB if stack is None else min(THREAD_MIB, stack)
    # The coefficients come from the classic stack's runs (Java 17, Boot 2.7): on the modern one they are a guess.
    fitted = "; fitted on the classic stack, not this one" if modern else ""
    on = "the connectors and the route on virtual threads" if virtual else \
        f"{proxied} on the proxied connector" + (f", {route} the route's" if route else "")
    return [Part("the JVM's heap", heap, ("camel_app_java_options",), heap_detail),
            Part("the JVM beside its heap", JVM_BESIDE_HEAP_MIB + gc_share * heap, ("camel_app_java_options",),
                 f"metaspace, code cache, libraries; {collector}'s structures {gc_share:.0%} of the heap{fitted}"),
            Part("the JVM's threads", threads * per_thread, ("camel_app_tomcat_max_threads",),
                 f"{threads} threads ({on}) x {per_thread:.2f} MiB")]


def route_pool(knobs: dict) -> int | None:
    """The threads of the pool the modern stack runs its route on (Spring's task pool), None where the route runs on
    the request's own thread (the classic stack) or on virtual threads."""
    if knobs.get("camel_app_stack", "classic") == "classic" or knobs.get("camel_app_virtual_threads"):
        return None
    return int(knobs.get(ROUTE_POOL_KNOB) or ROUTE_POOL_DEFAULT)


def tomcat_threads(knobs: dict) -> int:
    """The request threads of the connector HTTPD proxies to (its knob, else Tomcat's default)."""
    return int(knobs.get("camel_app_tomcat_max_threads") or TOMCAT_MAX_THREADS)


def httpd_workers(knobs: dict) -> tuple[str, int]:
    """HTTPD's MPM and its MaxRequestWorkers (the role's default 150 where its settings leave it out)."""
    mpm = str(knobs.get("httpd_mpm") or "prefork")
    return mpm, int((knobs.get(f"httpd_mpm_{mpm}_settings") or {}).get("MaxRequestWorkers") or 150)


def _httpd(knobs: dict) -> Part:
    mpm, workers = httpd_workers(knobs)
    settings = knobs.get(f"httpd_mpm_{mpm}_settings") or {}
    if mpm == "prefork":
        return Part("HTTPD", HTTPD_PARENT_MIB + workers * PREFORK_CHILD_MIB, ("httpd_mpm", f"httpd_mpm_{mpm}_settings"),
                    f"prefork, {workers} children")
    per_child = int(settings.get("ThreadsPerChild") or 25)
    processes = min(int(settings.get("ServerLimit") or 16), math.ceil(workers / per_child))
    return Part("HTTPD", HTTPD_PARENT_MIB + processes * THREADED_PROCESS_MIB, ("httpd_mpm", f"httpd_mpm_{mpm}_settings"),
                f"{mpm}, {processes} processes of {per_child} threads")
