"""What a request cost the CPUs where a capacity run's machine last kept up (the step that gave its capacity: at the
knee, an overload's own costs swell it, JMeter's waiting threads above all): each of the machine's roles' mean CPU
over the step (PCP's per-process user and system time) divided by the requests it answered a second there; and
where nothing else was loaded beside it over the step (it was loaded alone, or one machine after the other), JMeter's
CPU and the whole host's too (jmeter/loadgen.csv, or PCP's host CPU where the machine had a host of its own). Read
beside a knee at the host's CPUs: those CPUs divided by the host's cost of a request are the most it could serve of
this machine and its load together, whatever the pools; the roles' shares say where cutting CPU would pay.

    per_request(step, alone, cpus) -> dict | None
"""
from __future__ import annotations

ROLES = {"service": "the JVM", "httpd": "HTTPD", "backend": "the mock backend", "pcp": "PCP", "other": "other"}
BASIS = ("the step that gave the capacity: each role's processes' mean CPU cores (PCP, hotproc.psinfo.utime and "
         "stime), JMeter's and the host's (jmeter/loadgen.csv: /proc/stat and JMeter's /proc/<pid>/stat; PCP's kernel.all.cpu on a host "
         "of the machine's own), each divided by the requests the machine answered a second over the step")


def per_request(step: dict, alone: bool, cpus: float | None) -> dict | None:
    """CPU milliseconds per request a step answered (its figures, as step_state.at_capacity gives them, with the host's
    over it): by role, the machine's in all, and JMeter's and the host's where alone (else None: another machine's
    load shared them); None without requests answered."""
    answered_rps = step.get("answered_rps")
    if not isinstance(answered_rps, (int, float)) or answered_rps <= 0:
        return None

    def ms(cores: object) -> float | None:
        return round(1000.0 * cores / answered_rps, 3) if isinstance(cores, (int, float)) else None

    roles = {role: ms(cores) for role, cores in (step.get("cpu_cores_mean_by_role") or {}).items()}
    by_role = {role: value for role, value in roles.items() if value is not None}
    host = step.get("host") or {}
    host_ms = jmeter_ms = None
    if alone:
        if host.get("host_busy_cores") is not None:             # JMeter's host, shared with the machine
            host_ms, jmeter_ms = ms(host["host_busy_cores"]), ms(host.get("loadgen_cores"))
            cpus = host.get("host_cpus") or cpus
        else:                       # no JMeter row over it (a host of its own): PCP's CPU of the whole host
            host_ms = ms(step.get("host_cpu_cores_mean"))
    if not by_role and not host_ms:
        return None
    ceiling = round(1000.0 * cpus / host_ms) if host_ms and cpus else None
    parts = sorted([*((ROLES.get(r, r), v) for r, v in by_role.items()),
                    *([("JMeter", jmeter_ms)] if jmeter_ms else [])], key=lambda part: -part[1])
    sentence = "per request answered: " + ", ".join(f"{name} {value:.2f} ms" for name, value in parts if value >= 0.005)
    if host_ms:
        sentence += (f"; the host's CPUs {host_ms:.2f} ms in all (the kernel's share included)"
                     + (f": at this cost its {cpus:g} CPUs serve at most about {ceiling:,} req/s" if ceiling else ""))
    elif not alone:
        sentence += "; JMeter's and the host's not given: another machine was loaded beside it"
    return {"answered_rps": round(float(answered_rps), 3), "ms_by_role": by_role,
            "machine_ms": round(sum(by_role.values()), 3) if by_role else None, "jmeter_ms": jmeter_ms,
            "host_ms": host_ms, "host_cpus": cpus, "host_ceiling_rps": ceiling, "sentence": sentence, "basis": BASIS}
