"""The report's "Knobs that differ": the variables the roles got on each machine (knobs.json), set side by side.
A variable whose values differ only by the machine's own name (a home, a path, a node name) is where each machine
lives, not its tuning: listed apart (wiring), so that the table holds what a user would change.

    knobs_differ(knobs) -> KnobsDiffer
"""
from __future__ import annotations

import json
import re

from lab.contract import KnobsDiffer


def knobs_differ(knobs: dict | None) -> KnobsDiffer:
    """knobs.json's two machines set side by side: {differ: [{variable, default, tuned}], wiring: [variable],
    same, available, unrendered}."""
    if not knobs:
        return {"differ": [], "wiring": [], "same": 0, "available": False}
    default = knobs["default"] if isinstance(knobs.get("default"), dict) else {}
    tuned = knobs["tuned"] if isinstance(knobs.get("tuned"), dict) else {}
    differ, wiring, same = [], [], 0
    for variable in sorted(set(default) | set(tuned)):
        a, b = default.get(variable, "(unset)"), tuned.get(variable, "(unset)")
        a_text, b_text = (json.dumps(value, sort_keys=True, default=str) for value in (a, b))
        if a_text == b_text:
            same += 1
        elif named(a_text, "default") == named(b_text, "tuned"):
            wiring.append(variable)         # a home, a path, a node name: where each machine is, not its tuning
        else:
            differ.append({"variable": variable, "default": a, "tuned": b})
    # A run from before the lab rendered the roles' values kept them as written ("{{ camel_app_home }}/gc").
    unrendered = sum("{{" in json.dumps(row[m], default=str) for row in differ for m in ("default", "tuned"))
    return {"differ": differ, "wiring": wiring, "same": same, "available": bool(default or tuned),
            "unrendered": unrendered}


def named(text: str, machine: str) -> str:
    """A value with its machine's name as a whole word (a path's part, a node name) put as MACHINE."""
    return re.sub(rf"(?<![A-Za-z0-9_]){machine}(?![A-Za-z0-9_])", "MACHINE", text)
