"""A JMeter plan of the user's own (./start.sh run --plan FILE.jmx), written for other machines: read
without running it (its thread groups, its HTTP samplers and where they go, the files its listeners
write), its hosts mapped to the lab's machines, and the load it makes (the profile the analysis reads).
The copy JMeter runs instead is lab/load/plancopy.py's."""
from __future__ import annotations

import re
import urllib.parse
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lab.load.profile import LoadError
from lab.names import MACHINES

GROUPS = ("ThreadGroup", "SetupThreadGroup", "PostThreadGroup")
# JMeter 5.5's open model: arrivals at the rates of its schedule, each running the group's samplers once. Its
# schedule is what ./start.sh capacity --plan steps (the lab's rates instead, one group per machine).
OPEN_GROUP = "OpenModelThreadGroup"
HTTP_SAMPLERS = ("HTTPSamplerProxy", "HTTPSampler", "HTTPSampler2")
# Elements that write a file the plan names (its author's paths): kept in the run folder instead.
WRITERS = {"ResultCollector": "filename", "ResultSaver": "FileSaver.filename"}
# Elements that read a file the plan names: a relative name is the plan's folder's, as JMeter resolves it.
READERS = {"CSVDataSet": "filename"}
DEFAULT_PORTS = {"http": 80, "https": 443}


class PlanError(LoadError):
    """A plan the lab will not run: named as the user gave it, with what to do."""


@dataclass(frozen=True)
class HttpSampler:
    name: str
    group: str
    protocol: str
    host: str
    port: int
    path: str
    keep_alive: bool = True
    response_timeout_ms: int | None = None      # None: JMeter waits as long as it takes


@dataclass(frozen=True)
class Group:
    name: str
    users: int
    ramp_s: int                 # its start delay and ramp-up: when its last user has started
    duration_s: int | None      # its scheduler's bound; None: it ends when its loops do, or never
    forever: bool               # loops forever with no scheduler: only the lab's --duration ends it
    schedule: str | None = None     # an Open Model Thread Group's schedule, as written; None: a closed group

    @property
    def open(self) -> bool:
        return self.schedule is not None


@dataclass(frozen=True)
class PlanReading:
    path: Path
    groups: tuple[Group, ...]
    samplers: tuple[HttpSampler, ...]
    not_analysed: tuple[str, ...] = ()      # non-HTTP samplers ("name (kind)"): they run, nothing is attributed
    writes: tuple[str, ...] = ()            # files its listeners would write, as the plan names them
    data: bytes = field(default=b"", repr=False)    # the file's bytes as read: the copy is made of these, not of
                                                    # what the file holds by then

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(sampler.host for sampler in self.samplers))


# Reading ------------------------------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\{([^${}]*)\}")
_PROPERTY = re.compile(r"__(P|property)\((.*)\)", re.S)


def resolve(text: str, variables: dict[str, str], properties: dict[str, str] | None = None) -> str:
    """A JMeter value as the plan and the properties given to it (--property) decide it: its variables, a
    property's value, else its default; what stays unknown stays as written (${...})."""
    for _ in range(20):
        replaced = _REFERENCE.sub(lambda found: _value(found.group(1), variables, properties or {}), text)
        if replaced == text:
            break
        text = replaced
    return text


def _value(inner: str, variables: dict[str, str], properties: dict[str, str]) -> str:
    function = _PROPERTY.fullmatch(inner.strip())
    if function:
        arguments = [part.strip() for part in re.split(r"(?<!\\),", function.group(2))]
        if arguments[0] in properties:
            return properties[arguments[0]]
        default_at = 1 if function.group(1) == "P" else 2
        if len(arguments) > default_at and arguments[default_at]:
            return arguments[default_at]
    elif inner in variables:
        return variables[inner]
    return "${" + inner + "}"


def property_element(element: ElementTree.Element, name: str) -> ElementTree.Element | None:
    """The element's JMeter property of that name (a stringProp, intProp, longProp or boolProp), if it has one."""
    return next((child for child in element if child.get("name") == name
                 and child.tag in ("stringProp", "intProp", "longProp", "boolProp")), None)


def prop(element: ElementTree.Element, name: str) -> str:
    found = property_element(element, name)
    return (found.text or "") if found is not None else ""


def _arguments(element: ElementTree.Element) -> dict[str, str]:
    """A User Defined Variables list (the test plan's, or an Arguments element's)."""
    return {prop(argument, "Argument.name"): prop(argument, "Argument.value")
            for argument in element.iter("elementProp") if argument.get("elementType") == "Argument"}


def pairs(tree: ElementTree.Element) -> Iterator[tuple[ElementTree.Element, ElementTree.Element | None]]:
    """A hashTree's elements, each with the hashTree of its children (JMX lists them in turn)."""
    children = list(tree)
    for index, element in enumerate(children):
        if element.tag == "hashTree":
            continue
        following = children[index + 1] if index + 1 < len(children) else None
        yield element, following if following is not None and following.tag == "hashTree" else None


def enabled(element: ElementTree.Element) -> bool:
    return element.get("enabled", "true") != "false"


def parse(data: bytes, path: Path) -> ElementTree.Element:
    """The plan's XML root, from its bytes as read once (path: where they came from, for the messages); PlanError
    when it is not a JMeter plan."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise PlanError(f"--plan {path}: not a JMeter plan ({error})") from error
    if root.tag != "jmeterTestPlan" or root.find("hashTree/TestPlan") is None:
        raise PlanError(f"--plan {path}: not a JMeter plan (no jmeterTestPlan with a TestPlan: save it from JMeter "
                        "as a .jmx)")
    return root


@dataclass
class _Scope:
    variables: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)     # HTTP Request Defaults: domain, port, protocol, path
    group: str = ""
    properties: dict[str, str] = field(default_factory=dict)   # given to the plan (--property)

    def resolve(self, text: str) -> str:
        return resolve(text, self.variables, self.properties)


@dataclass
class _Found:
    groups: list[Group] = field(default_factory=list)
    samplers: list[HttpSampler] = field(default_factory=list)
    not_analysed: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def read(path: Path, properties: dict[str, str] | None = None) -> PlanReading:
    """What the plan does, read from it with the properties it is given; PlanError for a plan the lab cannot
    run, naming what is wrong."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise PlanError(f"--plan {path}: no such file") from error
    except OSError as error:
        raise PlanError(f"--plan {path}: unreadable ({error.strerror or error})") from error
    found = _Found()
    _walk(parse(data, path)[0], _Scope(properties=dict(properties or {})), found, path)
    if not found.samplers:
        raise PlanError(f"--plan {path}: no HTTP sampler (enabled, in a thread group): the lab loads its machines "
                        f"over HTTP{'; it has ' + ', '.join(found.not_analysed) if found.not_analysed else ''}")
    return PlanReading(path, tuple(found.groups), tuple(found.samplers), tuple(found.not_analysed),
                       tuple(found.writes), data)


def _walk(tree: ElementTree.Element, scope: _Scope, found: _Found, path: Path) -> None:
    level = [(element, children) for element, children in pairs(tree) if enabled(element)]
    scope = _Scope(dict(scope.variables), dict(scope.defaults), scope.group, scope.properties)
    for element, _ in level:                    # config elements apply to their whole level
        if element.tag in ("TestPlan", "Arguments"):        # User Defined Variables
            scope.variables.update(_arguments(element))
        elif element.tag == "ConfigTestElement" and element.get("guiclass") == "HttpDefaultsGui":
            for key in ("domain", "port", "protocol", "path", "response_timeout"):
                if value := prop(element, f"HTTPSampler.{key}").strip():
                    scope.defaults[key] = value
    for element, children in level:
        inner = scope
        if element.tag in GROUPS or element.tag == OPEN_GROUP:
            found.groups.append(_group(element, scope, path))
            inner = _Scope(scope.variables, scope.defaults, found.groups[-1].name, scope.properties)
        elif element.tag in HTTP_SAMPLERS:
            found.samplers.append(_sampler(element, scope, path))
        elif element.tag.endswith(("Sampler", "SamplerProxy")) or element.get("testclass", "").endswith("Sampler"):
            found.not_analysed.append(f"{element.get('testname') or element.tag} ({element.tag})")
        elif element.tag in WRITERS and (written := prop(element, WRITERS[element.tag]).strip()):
            found.writes.append(written)
        if children is not None:
            _walk(children, inner, found, path)


def _number(text: str, what: str, path: Path, scope: _Scope) -> int:
    value = scope.resolve(text.strip())
    try:
        return int(value)
    except ValueError:
        raise PlanError(f"--plan {path}: {what} is {text!r}, which the plan does not make a number (a property "
                        "without a default, or a function): give the property (--property NAME=VALUE) or the plan a "
                        "number") from None


def _group(element: ElementTree.Element, scope: _Scope, path: Path) -> Group:
    name = element.get("testname") or element.tag
    if element.tag == OPEN_GROUP:
        return Group(name, 0, 0, None, False, schedule=prop(element, "OpenModelThreadGroup.schedule").strip())
    what = f"thread group {name!r}"
    users = _number(prop(element, "ThreadGroup.num_threads") or "1", f"{what}'s number of threads", path, scope)
    ramp = _number(prop(element, "ThreadGroup.ramp_time") or "0", f"{what}'s ramp-up", path, scope)
    scheduler = prop(element, "ThreadGroup.scheduler") == "true"
    delay = _number(prop(element, "ThreadGroup.delay") or "0", f"{what}'s delay", path, scope) if scheduler else 0
    duration = _number(prop(element, "ThreadGroup.duration") or "0", f"{what}'s duration", path, scope) \
        if scheduler else 0
    controller = next((child for child in element if child.get("name") == "ThreadGroup.main_controller"), None)
    loops = scope.resolve(prop(controller, "LoopController.loops")).strip() if controller is not None else "1"
    forever = loops in ("-1", "") and not duration
    return Group(name, users, delay + ramp, delay + duration if duration else None, forever)


def _sampler(element: ElementTree.Element, scope: _Scope, path: Path) -> HttpSampler:
    name = element.get("testname") or element.tag
    values = {key: scope.resolve(prop(element, f"HTTPSampler.{key}").strip() or scope.defaults.get(key, ""))
              for key in ("domain", "port", "protocol", "path")}
    if not values["domain"] and re.match(r"https?://", values["path"], re.I):     # a whole URL in the path
        url = urllib.parse.urlsplit(values["path"])
        values.update(domain=url.hostname or "", protocol=url.scheme, port=str(url.port or ""),
                      path=url.path + (f"?{url.query}" if url.query else ""))
    protocol = (values["protocol"] or "http").lower()
    where = f"HTTP sampler {name!r}" + (f" in thread group {scope.group!r}" if scope.group else "")
    if protocol not in DEFAULT_PORTS:
        raise PlanError(f"--plan {path}: {where} uses protocol {values['protocol']!r}: the lab's machines answer "
                        "http or https")
    host = values["domain"]
    if not host or "${" in host:
        raise PlanError(f"--plan {path}: {where} goes to {host or 'no host'!r}, which the plan does not name (a "
                        "variable set at run time, a property without a default, or no server name and no HTTP "
                        "Request Defaults): give the property (--property NAME=HOST) or the plan a host name")
    host = host.lower()                         # a host name is case-insensitive: one host, however written
    port = values["port"] or str(DEFAULT_PORTS[protocol])
    if not port.isdigit():
        raise PlanError(f"--plan {path}: {where} has port {values['port']!r}, which the plan does not make a number")
    timeout = scope.resolve(prop(element, "HTTPSampler.response_timeout").strip()
                            or scope.defaults.get("response_timeout", ""))
    return HttpSampler(name, scope.group, protocol, host, int(port), values["path"] or "/",
                       keep_alive=scope.resolve(prop(element, "HTTPSampler.use_keepalive")) == "true",
                       response_timeout_ms=int(timeout) if timeout.isdigit() and int(timeout) else None)


# Mapping ------------------------------------------------------------------------------------------------

def mapping(reading: PlanReading, typed: str | None) -> dict[str, str]:
    """Each host the plan's samplers go to -> the machine it means: as --map says (HOST=MACHINE,...), else as
    the plan says unambiguously (a thread group or a host named after a machine); both machines must be
    loaded, and a host that is no machine's is refused, naming its samplers."""
    hosts = reading.hosts
    chosen = _typed_map(typed, hosts, reading.path) if typed else _named_map(reading)
    unmapped = [host for host in hosts if host not in chosen]
    if unmapped:
        samplers = [sampler.name for sampler in reading.samplers if sampler.host == unmapped[0]]
        how = f"--map {typed} does not map" if typed else "neither --map nor the plan's own names map"
        raise PlanError(f"--plan {reading.path}: {', '.join(samplers)} would hit {unmapped[0]}, which {how} to a "
                        f"machine, and the lab loads only its own machines: give --map {_suggestion(hosts)}")
    missing = [machine for machine in MACHINES if machine not in chosen.values()]
    if missing:
        raise PlanError(f"--plan {reading.path}: no host of the plan goes to the {missing[0]} machine "
                        f"({', '.join(f'{h} -> {m}' for h, m in chosen.items())}): the lab compares both machines, "
                        f"so the plan must load each; give --map {_suggestion(hosts)}")
    return chosen


def _suggestion(hosts: tuple[str, ...]) -> str:
    return ",".join(f"{host}={machine}" for host, machine in zip(hosts, (*MACHINES, *MACHINES), strict=False))


def _typed_map(typed: str, hosts: tuple[str, ...], path: Path) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for part in (part.strip() for part in typed.split(",") if part.strip()):
        host, equals, machine = part.partition("=")
        if not equals or not host.strip():
            raise PlanError(f"--map {typed}: {part!r} is not HOST=MACHINE (e.g. --map {_suggestion(hosts)})")
        host, machine = host.strip().lower(), machine.strip()
        if machine not in MACHINES:
            raise PlanError(f"--map {typed}: {machine!r} is not a machine: the machines are {', '.join(MACHINES)}")
        if host not in hosts:
            raise PlanError(f"--map {typed}: no HTTP sampler of {path} goes to {host!r}; its hosts are "
                            f"{', '.join(hosts)}")
        chosen[host] = machine
    return chosen


def _named_map(reading: PlanReading) -> dict[str, str]:
    """host -> machine where the plan's own names say it and nothing contradicts: every sampler of a host in
    thread groups named after one machine, or the host's name holding one machine's name."""
    chosen: dict[str, str] = {}
    for host in reading.hosts:
        said = {machine for sampler in reading.samplers if sampler.host == host
                for machine in (_named(sampler.group), _named(host)) if machine}
        if len(said) == 1:
            chosen[host] = said.pop()
    if len(set(chosen.values())) != len(chosen):        # two hosts for one machine: the names do not decide
        return {}
    return chosen


def _named(name: str) -> str | None:
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    named = [machine for machine in MACHINES if machine in words]
    return named[0] if len(named) == 1 else None
