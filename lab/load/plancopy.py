"""The copy of a user's own plan (lab/load/userplan.py) that JMeter runs, kept in the run folder: every
HTTP sampler sent to its machine with its samples in that machine's results, every thread group bounded
by the run's duration, every file the plan writes kept in the run folder. The user's file is never
written."""
from __future__ import annotations

import copy
import re
import urllib.parse
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.load import openplan
from lab.load.jmeter import PLAN
from lab.load.userplan import (
    GROUPS,
    HTTP_SAMPLERS,
    OPEN_GROUP,
    READERS,
    WRITERS,
    HttpSampler,
    PlanReading,
    enabled,
    pairs,
    parse,
    prop,
    property_element,
)

# The run's copy -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where a machine answers, as the run's copy of the plan sends it."""
    protocol: str
    host: str
    port: int


@dataclass(frozen=True)
class Stepped:
    """capacity --plan: which Open Model Thread Group loads which machine, and the longest timeouts its samplers
    may keep (every request waiting is a JMeter thread in an open model)."""
    groups: dict[str, str]
    connect_timeout_ms: int
    response_timeout_ms: int


def write_copy(reading: PlanReading, chosen: dict[str, str], targets: dict[str, Target], duration_s: int,
               dest: Path, files: Path, stepped: Stepped | None = None) -> Path:
    """The copy of the plan JMeter runs, at dest: each HTTP sampler of a loaded machine (in targets) sent to it,
    its samples to ${__P(MACHINE.results)}; samplers of a machine not loaded now disabled, and thread groups
    left with none; every thread group bounded by duration_s, or (stepped) each loading Open Model Thread Group
    at its machine's steps, ended when the lab says, its timeouts capped; files the plan writes put in `files`,
    files it reads found beside the original."""
    root = parse(reading.data, reading.path)
    collector = _lab_collector()
    _rewrite(root[0], iter(reading.samplers), chosen, targets, collector, duration_s, files,
             reading.path.parent.resolve(), [], stepped)
    if stepped is not None:
        openplan.add_watch(root, list(targets))
    dest.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(dest, encoding="UTF-8", xml_declaration=True)
    return dest


def _lab_collector() -> ElementTree.Element:
    """The lab plan's results listener (its columns are the ones the analysis reads), one sampler's samples only."""
    element = copy.deepcopy(next(ElementTree.parse(PLAN).getroot().iter("ResultCollector")))
    for child in element.iter("subresults"):
        child.text = "false"                    # one row per sample the sampler made: a redirect is not another
    return element


def _rewrite(tree: ElementTree.Element, samplers: Iterator[HttpSampler], chosen: dict[str, str],
             targets: dict[str, Target], collector: ElementTree.Element, duration_s: int, files: Path,
             home: Path, written: list[str], stepped: Stepped | None = None) -> bool:
    """Rewrites this level in place, the samplers in the order read() found them; True if a loaded machine's
    sampler is in it."""
    loads = False
    for element, children in list(pairs(tree)):
        if not enabled(element):
            continue
        inner = False
        if element.tag in HTTP_SAMPLERS:
            machine = chosen[next(samplers).host]
            if machine in targets:
                _send(element, targets[machine])
                if stepped is not None:
                    _cap(element, "HTTPSampler.connect_timeout", stepped.connect_timeout_ms)
                    _cap(element, "HTTPSampler.response_timeout", stepped.response_timeout_ms)
                if children is None:            # JMX gives every element its hashTree; a hand-written one may not
                    children = ElementTree.Element("hashTree")
                    tree.insert(list(tree).index(element) + 1, children)
                mine = copy.deepcopy(collector)
                mine.set("testname", f"camel-tuning-lab: {machine} results")
                _set(mine, "filename", "${__P(" + machine + ".results)}")
                children.insert(0, ElementTree.Element("hashTree"))
                children.insert(0, mine)
                inner = True
            else:
                element.set("enabled", "false")
        elif element.tag in WRITERS and (named := prop(element, WRITERS[element.tag]).strip()):
            name = Path(named.replace("\\", "/")).name or "results"
            written.append(name)                # numbered: two listeners may name the same file in two folders
            _set(element, WRITERS[element.tag], str(files / f"{len(written)}-{name}"))
        elif element.tag in READERS and (named := prop(element, READERS[element.tag]).strip()) \
                and "${" not in named and not Path(named).is_absolute():
            _set(element, READERS[element.tag], str(home / named))
        if children is not None and element.tag not in HTTP_SAMPLERS:
            inner = _rewrite(children, samplers, chosen, targets, collector, duration_s, files, home, written,
                             stepped)
        if element.tag in GROUPS or element.tag == OPEN_GROUP:
            name = element.get("testname") or element.tag
            if not inner:
                element.set("enabled", "false")     # nothing of this run's machines to load
            elif stepped is not None and children is not None and name in stepped.groups:
                openplan.step(element, children, stepped.groups[name])
            else:
                _bound(element, duration_s)
        loads = loads or inner
    return loads


def _send(element: ElementTree.Element, target: Target) -> None:
    _set(element, "HTTPSampler.domain", target.host)
    _set(element, "HTTPSampler.port", str(target.port))
    _set(element, "HTTPSampler.protocol", target.protocol)
    path = prop(element, "HTTPSampler.path").strip()
    if re.match(r"https?://", path, re.I):                  # a whole URL: its path only, the host is set above
        url = urllib.parse.urlsplit(path)
        _set(element, "HTTPSampler.path", url.path + (f"?{url.query}" if url.query else ""))


def _bound(group: ElementTree.Element, duration_s: int) -> None:
    """The group stops at duration_s at the latest (its own scheduler's bound when shorter)."""
    own = prop(group, "ThreadGroup.duration").strip() if prop(group, "ThreadGroup.scheduler") == "true" else ""
    if not (own.isdigit() and 0 < int(own) <= duration_s):
        _set(group, "ThreadGroup.scheduler", "true", "boolProp")
        _set(group, "ThreadGroup.duration", str(duration_s))
        if not prop(group, "ThreadGroup.delay").strip().isdigit():
            _set(group, "ThreadGroup.delay", "0")


def _cap(sampler: ElementTree.Element, name: str, most_ms: int) -> None:
    """The sampler's timeout at most most_ms: its own when it is a number under it, else most_ms (which also
    overrides a longer one from HTTP Request Defaults, or none at all)."""
    own = prop(sampler, name).strip()
    if not (own.isdigit() and 0 < int(own) <= most_ms):
        _set(sampler, name, str(most_ms))


def _set(element: ElementTree.Element, name: str, value: str, tag: str = "stringProp") -> None:
    found = property_element(element, name)
    if found is None:
        found = ElementTree.SubElement(element, tag, {"name": name})
    found.text = value
