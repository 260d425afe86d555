"""The files a run publishes, checked against their JSON Schemas (docs/schema/, generated from lab/contract.py).

    violations(paths) -> list[str]      # "<file>: <where>: <what>" for each file that breaks its schema
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schema"
# a file's name -> its schema's (summary.json: by its kind)
NAMES = {"run.json": "run", "ablation.json": "ablation", "tune.json": "tune", "summary.json": "summary"}


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_of(path: Path, data: object) -> str | None:
    """The schema a published file answers to (None: not a published file)."""
    name = NAMES.get(path.name)
    if name == "summary" and isinstance(data, dict) and data.get("kind") == "repeated":
        return "summary-repeated"
    return name


def errors(name: str, data: object) -> list[str]:
    """Each place data breaks the named schema: of an anyOf (a figure or null), the reason found deepest in the
    data, not "not valid under any of"."""
    found = []
    for error in validator(name).iter_errors(data):
        while error.context:
            error = max(error.context, key=lambda e: len(e.absolute_path))
        found.append(f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message[:300]}")
    return found


def violations(paths: Iterable[Path]) -> list[str]:
    problems = []
    for path in paths:
        data = json.loads(path.read_text())
        name = schema_of(path, data)
        if name is not None:
            problems.extend(f"{path}: {problem}" for problem in errors(name, data))
    return problems


def published_under(root: Path, since: float = 0.0) -> list[Path]:
    """The published files under root written at `since` (epoch seconds) or later."""
    return sorted(path for name in NAMES for path in root.rglob(name) if path.stat().st_mtime >= since)
