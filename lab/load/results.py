"""JMeter's results CSV as the lab reads it, live (lab/load/progress.py) and afterwards (lab/analysis/jmeter.py): a
failed sample's message can carry a whole answer, which Python's default field limit (128 KiB) would stop the
reading at; the limit is the process's, raised here, where every reader of these files takes its rows."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

csv.field_size_limit(2**31 - 1)


def reader(lines: Iterable[str]) -> Iterator[list[str]]:
    """The rows of an open results file (opened with newline="")."""
    return csv.reader(lines)


def csv_rows(text: str) -> list[list[str]]:
    """The complete records of a piece of a results file, as rows, whatever a field's length."""
    return list(reader(io.StringIO(text)))
