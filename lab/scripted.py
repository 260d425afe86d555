"""--json, for scripts: the command's result file on standard output once it ends (a run's or a capacity run's
summary.json, an ablation's ablation.json, a tune's tune.json), and nothing else there. While the command runs,
whatever would reach standard output (a child process's stray line) goes to standard error with the progress.

    with scripted.stdout_for_result(enabled): ...   the command, whose end calls scripted.result(path)
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_result: list[Path] = []


def result(path: Path) -> None:
    """The file the command's result is in, once written: what --json prints."""
    _result[:] = [path]


@contextmanager
def stdout_for_result(enabled: bool) -> Iterator[None]:
    """Standard output (file descriptor 1, which children inherit) held for the result while the command runs;
    then the result, if the command wrote one (a command that failed before it prints nothing there: its exit
    code and standard error say why)."""
    if not enabled:
        yield
        return
    _result.clear()
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)
        if _result and _result[0].is_file():
            text = _result[0].read_text()
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
