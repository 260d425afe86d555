"""The layers of lab/: its rooms (each top-level module, and each subpackage as one), the imports between them (lazy
ones inside functions included), the layers they stand on, and the imports that run back up.

    .venv/bin/python -m tools.layers            # the layers, then each import that runs back up, with its line

A room stands a layer above everything it imports. Rooms that import each other (directly or round a loop) cannot
all do so downwards: within each such loop the order that leaves the fewest imports running back up is taken (every
order is tried, up to LARGEST_LOOP rooms; a larger loop is ordered by Eades, Lin and Smyth's greedy heuristic, which
may leave a few more than the fewest, and says so), and those imports are the ones listed.
"""
from __future__ import annotations

import ast
import itertools
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lab"
LARGEST_LOOP = 8            # rooms in one loop whose orders are all tried


@dataclass(frozen=True)
class Import:
    source: str             # the importing room
    target: str             # the imported room
    where: str              # file:line of the first such import


def room_of(path: Path) -> str:
    """lab/x.py -> x.py; lab/pkg/... -> pkg/."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) == 1 else parts[0] + "/"


def _target(module: str, rooms: set[str]) -> str | None:
    parts = module.split(".")
    if parts[0] != "lab" or len(parts) < 2:
        return None
    return next((room for room in (parts[1] + "/", parts[1] + ".py") if room in rooms), None)


def imports(package: Path = PACKAGE) -> tuple[set[str], dict[tuple[str, str], Import]]:
    files = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    rooms = {room_of(p) for p in files}
    found: dict[tuple[str, str], Import] = {}
    for path in sorted(files):
        source = room_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for target in {t for t in (_target(n, rooms) for n in names) if t and t != source}:
                found.setdefault((source, target), Import(source, target, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return rooms, found


def _loops(rooms: set[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of rooms (Tarjan), each of more than one room."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        on.add(room)
        for other in graph[room]:
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in on:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            group = []
            while True:
                member = stack.pop()
                on.discard(member)
                group.append(member)
                if member == room:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(1000, 10 * len(rooms)))
    for room in sorted(rooms):
        if room not in index:
            visit(room)
    return groups


def _greedy(group: list[str], inner: list[tuple[str, str]]) -> list[str]:
    """Eades, Lin and Smyth (1993): rooms that import nothing left go to the bottom, those nothing left imports to
    the top, else the one importing the most more than it is imported goes to the top; bottom first."""
    left, bottom, top = set(group), [], []
    while left:
        live = [(a, b) for a, b in inner if a in left and b in left]
        sinks = sorted(r for r in left if not any(a == r for a, _ in live))
        sources = sorted(r for r in left if not any(b == r for _, b in live))
        if sinks:
            bottom.append(sinks[0])
            left.discard(sinks[0])
        elif sources:
            top.append(sources[0])
            left.discard(sources[0])
        else:
            room = max(sorted(left), key=lambda r: sum(a == r for a, _ in live) - sum(b == r for _, b in live))
            top.append(room)
            left.discard(room)
    return bottom + top[::-1]


def back_up(rooms: set[str], edges: set[tuple[str, str]]) -> tuple[set[tuple[str, str]], bool]:
    """The imports that must run back up (in each loop, those against the order that leaves the fewest), and whether
    a loop was too large to try every order of (the count then an upper bound of the fewest)."""
    found: set[tuple[str, str]] = set()
    guessed = False
    for group in _loops(rooms, edges):
        inner = [(a, b) for a, b in edges if a in group and b in group]
        orders = itertools.permutations(group) if len(group) <= LARGEST_LOOP else [_greedy(group, inner)]
        guessed |= len(group) > LARGEST_LOOP
        best = min((frozenset((a, b) for a, b in inner if order.index(a) < order.index(b))   # a below b: up
                    for order in orders), key=lambda ups: (len(ups), sorted(ups)))
        found |= best
    return found, guessed


def layers(rooms: set[str], edges: set[tuple[str, str]]) -> dict[str, int]:
    """Each room's layer (1: imports none of the others), the imports that run back up left out."""
    down = edges - back_up(rooms, edges)[0]
    layer: dict[str, int] = {}

    def of(room: str) -> int:
        if room not in layer:
            layer[room] = 1 + max((of(b) for a, b in down if a == room), default=0)
        return layer[room]

    for room in rooms:
        of(room)
    return layer


def main() -> int:
    rooms, found = imports()
    edges = set(found)
    layer = layers(rooms, edges)
    found_up, guessed = back_up(rooms, edges)
    ups = sorted(found_up)
    for number in range(max(layer.values()), 0, -1):
        print(f"layer {number:>2}: {', '.join(sorted(r for r in rooms if layer[r] == number))}")
    print(f"{max(layer.values())} layers, {len(edges)} imports between {len(rooms)} rooms, {len(ups)} running back up"
          + (" (a loop too large to try every order: at most that many)" if guessed else "") + ":")
    for a, b in ups:
        print(f"  {a} -> {b}  ({found[(a, b)].where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
