"""The capacity experiment's plan: the lab's closed-model plan (jmeter/camel-tuning-lab.jmx) with each machine's
thread group swapped for JMeter 5.6's Open Model Thread Group, so both kinds of run send the same requests, and a
machine's arrivals ended on the lab's word when another machine still loads (JMeter stops only a whole test)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from lab.load.openmodel import IDLE_SCHEDULE
from lab.load.profile import LoadError

# JMeter cannot stop one thread group: a machine past its knee while another still loads gets no more requests
# from arrivals once the file its property <machine>.load_ended names exists (the lab makes it). So its arrivals
# neither pile up as JMeter threads (rate x timeout of them, each with its stack) nor take the shared CPUs from the
# machine still measured. A watch thread reads the files every WATCH_MS and sets <machine>.load_on; each arrival
# reads that property only (a function evaluated per arrival, Groovy's or JEXL's, was measured to slow JMeter's
# requests several-fold at a few hundred a second). The watch's Groovy loads and compiles on its first run, 1.8 s of
# CPU on an idle host and 6 s in a CI run: during the warm-up, which is never judged and ends long before a step
# can end a machine's load. Not in a setUp thread group before the load: JMeter's open model counts its schedule
# from the test's start, so every second of setUp came as one burst of arrivals (in that CI run, 140 at once into
# a 20 req/s first step). It logs what it ends.
LOAD_ON = "${{__P({machine}.load_on,true)}}"
WATCH = "the lab's watch: ends a machine's arrivals"
ENDED_LOG = "arrivals end for "
WATCH_MS = 200
WATCH_SCRIPT = """// Arrivals end for a machine whose load_ended file exists (lab/load/openplan.py); never a sample.
SampleResult.setIgnore()
for (machine in [{machines}]) {{
    def flag = props.getProperty(machine + '.load_ended')
    if (flag && props.getProperty(machine + '.load_on') != 'false' && new File(flag).exists()) {{
        props.setProperty(machine + '.load_on', 'false')
        log.info("{ended}" + machine)
    }}
}}
Thread.sleep({ms})
"""
SAMPLERS = ("HTTPSamplerProxy",)


def _props(element: ET.Element, kind: str, values: dict[str, str]) -> None:
    for name, value in values.items():
        ET.SubElement(element, kind, {"name": name}).text = value


def _watch(machines: list[str]) -> tuple[ET.Element, ET.Element]:
    """The watch's thread group (one thread, for the schedule's length) and its hashTree (a JSR223 sampler whose
    compiled script is cached, its results ignored)."""
    group = ET.Element("ThreadGroup", {"guiclass": "ThreadGroupGui", "testclass": "ThreadGroup", "testname": WATCH})
    _props(group, "stringProp", {"TestPlan.comments": "Sets <machine>.load_on to false once the lab made the file "
                                                      "<machine>.load_ended names.",
                                 "ThreadGroup.on_sample_error": "continue"})
    loop = ET.SubElement(group, "elementProp", {"name": "ThreadGroup.main_controller", "elementType": "LoopController",
                                                "guiclass": "LoopControlPanel", "testclass": "LoopController",
                                                "testname": "Loop Controller"})
    _props(loop, "stringProp", {"LoopController.loops": "-1"})
    _props(loop, "boolProp", {"LoopController.continue_forever": "false"})
    _props(group, "stringProp", {"ThreadGroup.num_threads": "1", "ThreadGroup.ramp_time": "0",
                                 "ThreadGroup.duration": "${__P(watch_s,1)}", "ThreadGroup.delay": "0"})
    _props(group, "boolProp", {"ThreadGroup.delayedStart": "false", "ThreadGroup.scheduler": "true",
                               "ThreadGroup.same_user_on_next_iteration": "true"})
    tree = ET.Element("hashTree")
    sampler = ET.SubElement(tree, "JSR223Sampler", {"guiclass": "TestBeanGUI", "testclass": "JSR223Sampler",
                                                    "testname": WATCH})
    script = WATCH_SCRIPT.format(machines=", ".join(f"'{m}'" for m in machines), ms=WATCH_MS, ended=ENDED_LOG)
    _props(sampler, "stringProp", {"scriptLanguage": "groovy", "parameters": "", "filename": "", "cacheKey": "true",
                                   "script": script})
    ET.SubElement(tree, "hashTree")
    return group, tree


def _end_when_told(tree: ET.Element, machine: str, tags: tuple[str, ...] | None = SAMPLERS) -> None:
    """The thread group's samplers (each followed by its own hashTree; tags None: all it holds) moved under an If
    Controller on its flag."""
    if tree.tag != "hashTree":
        raise LoadError(f"the plan's thread group {machine!r} has no hashTree after it")
    children = list(tree)
    moved = [i for i, child in enumerate(children) if child.tag != "hashTree" and (tags is None or child.tag in tags)]
    if not moved:
        return
    controller = ET.Element("IfController", {"guiclass": "IfControllerPanel", "testclass": "IfController",
                                             "testname": f"{machine}: until its load ends"})
    _props(controller, "stringProp", {"IfController.condition": LOAD_ON.format(machine=machine)})
    _props(controller, "boolProp", {"IfController.evaluateAll": "false", "IfController.useExpression": "true"})
    inner = ET.Element("hashTree")
    for i in moved:
        inner.append(children[i])
        if i + 1 < len(children) and children[i + 1].tag == "hashTree":
            inner.append(children[i + 1])
    for element in inner:
        tree.remove(element)
    tree.insert(moved[0], controller)
    tree.insert(moved[0] + 1, inner)


def schedule_of(machine: str) -> str:
    """An open-model group's schedule: the property <machine>.schedule, else schedule, else none at all."""
    return f"${{__P({machine}.schedule,${{__P(schedule,{IDLE_SCHEDULE})}})}}"


def step(group: ET.Element, tree: ET.Element, machine: str) -> None:
    """A user's Open Model Thread Group (./start.sh capacity --plan) made the lab's for this machine: its schedule
    the machine's steps, everything it holds under the If Controller that ends its arrivals when told (its config
    elements, timers and listeners keep their scope: all they applied to moves with them)."""
    schedule = next((child for child in group if child.get("name") == "OpenModelThreadGroup.schedule"), None)
    if schedule is None:
        schedule = ET.SubElement(group, "stringProp", {"name": "OpenModelThreadGroup.schedule"})
    schedule.text = schedule_of(machine)
    _end_when_told(tree, machine, tags=None)


def add_watch(root: ET.Element, machines: list[str]) -> None:
    """The watch that ends a machine's arrivals (WATCH), beside the plan's thread groups."""
    parent = next(p for p in root.iter() if any(child.tag == "OpenModelThreadGroup" for child in p))
    parent.extend(_watch(machines))


def open_plan(closed_plan: Path, destination: Path) -> Path:
    """The closed-model plan with each ThreadGroup replaced by an Open Model Thread Group whose schedule
    is the property <machine>.schedule (else schedule), its samplers under an If Controller that ends its
    load when told (LOAD_ON), and the watch that tells it (WATCH); samplers and result files stay as they are."""
    try:
        tree = ET.parse(closed_plan)
    except (OSError, ET.ParseError) as error:
        raise LoadError(f"cannot read the plan {closed_plan}: {error}") from error
    groups = 0
    for parent in tree.iter():
        for index, child in enumerate(list(parent)):
            if child.tag != "ThreadGroup":
                continue
            machine = child.get("testname", "")
            group = ET.Element("OpenModelThreadGroup", {"guiclass": "OpenModelThreadGroupGui",
                                                        "testclass": "OpenModelThreadGroup", "testname": machine})
            ET.SubElement(group, "stringProp", {"name": "TestPlan.comments"}).text = (
                f"Arrivals at the rates of {machine}.schedule (the lab's capacity experiment).")
            ET.SubElement(group, "elementProp", {"name": "ThreadGroup.main_controller",
                                                 "elementType": "OpenModelThreadGroupController"})
            ET.SubElement(group, "stringProp", {"name": "ThreadGroup.on_sample_error"}).text = "continue"
            ET.SubElement(group, "stringProp", {"name": "OpenModelThreadGroup.schedule"}).text = schedule_of(machine)
            ET.SubElement(group, "stringProp", {"name": "OpenModelThreadGroup.random_seed"}).text = ""
            parent.remove(child)
            parent.insert(index, group)
            _end_when_told(parent[index + 1], machine)
            groups += 1
    if not groups:
        raise LoadError(f"{closed_plan} has no ThreadGroup to turn into an open model")
    root = tree.getroot()
    add_watch(root, [child.get("testname", "") for child in root.iter("OpenModelThreadGroup")])
    destination.parent.mkdir(parents=True, exist_ok=True)
    tree.write(destination, encoding="UTF-8", xml_declaration=True)
    return destination
