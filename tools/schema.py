"""docs/schema/*.schema.json from lab/contract.py's TypedDicts, by pydantic (a test dependency only: the lab
itself reads and writes plain JSON).

    .venv/bin/python -m tools.schema            # writes the schemas
    .venv/bin/python -m tools.schema --check    # exits 1, naming each, when a written schema is not current

An object with declared keys admits no other key (additionalProperties false), so a key a writer adds
without declaring it fails tests/test_contract.py's validation of real files.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from lab import contract

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "docs" / "schema"

# file name -> (the type, what the file is)
FILES: dict[str, tuple[Any, str]] = {
    "summary": (contract.Summary, "summary.json of one run (or trial): the figures, the comparison, the verdict"),
    "summary-repeated": (contract.RepeatedSummary, "summary.json of a repeated run (--repeat N): trials and intervals"),
    "run": (contract.RunRecord, "run.json: what was run, where, and how it ended"),
    "ablation": (contract.AblationResult, "ablation.json: an ablation's plan, pairs and analysis"),
    "tune": (contract.TuneResult, "tune.json: a tune's plan, configurations, best and validation"),
}


def _closed(node: Any) -> None:
    """additionalProperties false on every object that declares its properties."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)


def schema(name: str) -> dict:
    kind, about = FILES[name]
    generated = TypeAdapter(kind).json_schema()
    _closed(generated)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://camel-tuning-lab/docs/schema/{name}.schema.json",
            "description": f"{about}. Generated from lab/contract.py by tools/schema.py: do not edit.",
            **generated}


def text(name: str) -> str:
    return json.dumps(schema(name), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print(f"tools/schema.py: unknown arguments {' '.join(argv)} (none, or --check)", file=sys.stderr)
        return 2
    stale = []
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        path = FOLDER / f"{name}.schema.json"
        wanted = text(name)
        if path.is_file() and path.read_text() == wanted:
            continue
        if check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(wanted)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"not current with lab/contract.py: {', '.join(stale)}; run .venv/bin/python -m tools.schema",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
