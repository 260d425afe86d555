"""A run folder's JSON inputs as the summary reads them: a part of another shape than the lab writes is left
out and said in the summary's problems, never a traceback."""
from __future__ import annotations

from lab.runfolder import RunFolder


def status_shape(status: dict | None, problems: list[str]) -> dict | None:
    """status.json as the lab writes it ({machines: {name: {observed: {...}, ...}}}); a part of another shape is
    left out and said, not a traceback."""
    if status is None:
        return None
    machines = status.get("machines")
    if not isinstance(machines, dict):
        problems.append(f"status: status.json's machines is a {type(machines).__name__}, not a mapping (left out)")
        return {**status, "machines": {}}
    kept = {}
    for name, state in machines.items():
        if not isinstance(state, dict) or not isinstance(state.get("observed", {}), dict):
            problems.append(f"status: status.json's machines.{name} is not as the lab writes it (left out)")
            continue
        kept[name] = state
    return {**status, "machines": kept}


# events.json's fields and the types the summary reads them as
EVENT_TYPES: dict[str, type | tuple[type, ...]] = {"process_exits": list, "oom_kills": int,
                                                   "peak_memory_bytes": (int, float), "missing": list}


def read_events(folder: RunFolder, machine: str) -> tuple[dict | None, str | None]:
    problems: list[str] = []
    events = folder.read_json(folder.events_json(machine), problems, "events")
    if events is not None:
        wrong = [key for key, kind in EVENT_TYPES.items() if events.get(key) is not None
                 and (not isinstance(events[key], kind) or isinstance(events[key], bool))]
        exits = events.get("process_exits")
        if isinstance(exits, list) and not all(isinstance(e, dict) for e in exits):
            wrong.append("process_exits")
        if wrong:
            problems.append(f"events: {folder.relative(folder.events_json(machine))}: {', '.join(sorted(set(wrong)))} "
                            "not as the lab writes them (left out)")
            events = {key: value for key, value in events.items() if key not in wrong}
    return events, (problems[0] if problems else None)
