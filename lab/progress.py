"""Visible progress: each step says what it does and how long it took."""
from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def step(title: str) -> Iterator[None]:
    print(f"==> {title} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        yield
    except BaseException:
        print(f"    FAILED after {time.monotonic() - started:.1f} s: {title}", file=sys.stderr, flush=True)
        raise
    print(f"    done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def info(message: str) -> None:
    print(f"    {message}", file=sys.stderr, flush=True)
