"""What each machine really runs, observed from the live processes, not read from configuration."""
from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable

from lab.machines import manifest
from lab.machines.protocol import Backend
from lab.names import at_once

# Micrometer 1.9 (the classic stack) ends a label set with a comma, 1.16 (the modern stack) does not.
REQUESTS_SERVED = re.compile(r'^tomcat_global_request_seconds_count\{name="([^"]+)",?\} ([0-9.E+]+)$', re.M)


# A service at rest: no Tomcat thread busy on its connectors and no Camel exchange in flight (one whose client gave up
# still holds a thread, and the backend, until it ends).
THREADS_BUSY = re.compile(r'^tomcat_threads_busy_threads\{name="([^"]+)",?\} ([0-9.E+-]+)$', re.M)
IN_FLIGHT = re.compile(r'^camel_exchanges_inflight\{[^}]*\} ([0-9.E+-]+)$', re.M)


# GETs loopback URLs from inside the machine in one command (on a VM each command is an SSH round trip):
# each body, then a line with curl's exit status.
_FETCH_EACH = 'for url in "$@"; do curl -sf -m 10 "$url"; status=$?; echo; echo "@@lab-fetched $status"; done'
_FETCHED = re.compile(r"\n@@lab-fetched (\d+)(?:\n|\Z)")      # Ansible strips the last newline


def _fetch_inside(backend: Backend, name: str, *urls: str) -> list[str | None]:
    """GET loopback URLs from inside the machine (management and server-status are loopback-only): each body,
    or None where it failed."""
    result = backend.run_in(name, ["sh", "-c", _FETCH_EACH, "sh", *urls])
    parts = _FETCHED.split(result.stdout)      # body, status, body, status, …, ""
    bodies = [body if status == "0" else None for body, status in zip(parts[0::2], parts[1::2], strict=False)]
    return (bodies + [None] * len(urls))[:len(urls)]


def _requests_per_connector(metrics: str | None) -> dict[str, float]:
    return {connector: float(count) for connector, count in REQUESTS_SERVED.findall(metrics or "")}


# Straight to the machine: a proxy from the environment must not answer for it.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, cafile: str | None = None) -> int | None:
    """A URL's status code; over TLS, the certificate checked against cafile (the lab's certificate authority)."""
    try:
        opener = _DIRECT if cafile is None else urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cafile)))
        with opener.open(url, timeout=15) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def at_rest(backend: Backend, names: Iterable[str]) -> bool:
    """Whether every machine named serves nothing now, from its service's own metrics: no Tomcat thread busy, no
    Camel exchange in flight. False when a machine's metrics cannot be read or name no connector (so a caller that
    waits for rest waits as long as it would have without asking). All at once, as observe_all."""
    def resting(name: str) -> bool:
        wiring = manifest.read(name)
        [metrics] = _fetch_inside(backend, name, wiring.management_url("/actuator/prometheus"))
        own = f"-{wiring.ports.get('app_management')}"      # the scrape's own thread, should its connector be counted
        busy = [float(value) for connector, value in THREADS_BUSY.findall(metrics or "") if not connector.endswith(own)]
        return bool(busy) and not any(busy) and not any(float(value) for value in IN_FLIGHT.findall(metrics or ""))
    return all(at_once(resting, names))


def observe_all(backend: Backend, names: Iterable[str]) -> dict[str, dict]:
    """observe() for each machine named, all at once: on a VM each read is an SSH round trip of seconds."""
    names = list(names)
    return dict(zip(names, at_once(lambda name: observe(backend, name), names), strict=True))


def observe(backend: Backend, name: str) -> dict:
    """One machine: its URL, process states, and the configuration its processes show."""
    address = backend.address(name)
    wiring = manifest.read_or_none(name)
    url = wiring.service_url if wiring else None
    machine: dict = {"url": url, "address": address, "processes": {}, "observed": {}}
    if not backend.exists(name):
        machine["state"] = "absent"
        return machine
    machine["processes"] = backend.processes(name)
    if wiring is None:
        machine["state"] = "not provisioned"
        return machine

    observed = machine["observed"]
    prometheus = wiring.management_url("/actuator/prometheus")
    server_status, metrics_before = _fetch_inside(backend, name, wiring.server_status_url, prometheus)
    mpm = re.search(r"^ServerMPM: (\w+)", server_status or "", re.M)
    observed["httpd_mpm"] = mpm[1] if mpm else None

    # Which Tomcat connector served a request sent through HTTPD tells how HTTPD proxies.
    before = _requests_per_connector(metrics_before)
    machine["http_status"] = _get(wiring.service_url, wiring.tls_ca)
    metrics_after, info_text = _fetch_inside(backend, name, prometheus, wiring.management_url("/actuator/info"))
    after = _requests_per_connector(metrics_after)
    served = [connector for connector, count in after.items() if count > before.get(connector, 0)]
    observed["proxy_protocol"] = ("ajp" if served[0].startswith("ajp-") else "http") if served else None

    info = json.loads(info_text or "{}")
    # Which build serves, from its running libraries (app/README.md, "Two stacks, one service").
    stack = info.get("stack", {})
    observed["stack"] = stack.get("name")
    observed["stack_versions"] = (f"Spring Boot {stack.get('springBoot')}, Camel {stack.get('camel')}, "
                                  f"Tomcat {stack.get('tomcat')}, Java {stack.get('java')}") if stack else None
    observed["virtual_threads"] = stack.get("virtualThreads")
    # The modern stack without virtual threads runs the route on a pool of Spring's (lab/analysis/queues.py)
    route = stack.get("routeExecutor") or {}
    observed["route_pool"] = route.get("corePoolSize") if not route.get("virtualThreads") else None
    connectors = info.get("tomcat", {}).get("connectors", [])
    ajp = [c["protocol"] for c in connectors if ".ajp." in c.get("protocol", "")]
    observed["tomcat_ajp_protocol"] = ajp[0].rsplit(".", 1)[1] if ajp else None
    observed["tomcat_native"] = info.get("tomcat", {}).get("nativeLibrary")
    jvm = info.get("jvm", {})
    observed["gc"] = jvm.get("gc")
    observed["heap_max_bytes"] = jvm.get("heapMaxBytes")
    observed["jvm_memory_limit_bytes"] = jvm.get("memoryLimitBytes")
    # C1 only where the machines run under software emulation (group_vars/lab_machines.yml), else HotSpot's tiers
    arguments = jvm.get("inputArguments")
    observed["jit"] = None if arguments is None else (
        "C1 only" if "-XX:TieredStopAtLevel=1" in arguments else "tiered")
    observed["async_logging"] = info.get("logging", {}).get("async")
    pool = info.get("backend", {})
    observed["backend_pool_per_route"] = pool.get("connectionsPerRoute")
    observed["backend_pool_total"] = pool.get("maxTotalConnections")
    machine["state"] = "up" if machine["http_status"] == 200 else "degraded"
    return machine


def describe(report: dict) -> str:
    """The human-readable form of the status report."""
    lines = [f"backend: {report['backend']}  ({report['note']})"]
    for name, machine in report["machines"].items():
        lines.append(f"\n{name}: {machine['state']}  {machine['url']}  (HTTP {machine.get('http_status')})")
        if machine.get("given_knobs"):
            lines.append(f"  knobs: its host_vars, then {machine['given_knobs']['source']} (up --knobs)")
        for process, state in machine["processes"].items():
            lines.append(f"  {process:<14} {state}")
        for key, value in machine["observed"].items():
            lines.append(f"  {key:<24} {value}")
    return "\n".join(lines)
