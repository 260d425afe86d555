"""Ctrl-C and SIGTERM end a run the same way: both arrive as KeyboardInterrupt, so every step that
cleans up on one cleans up on the other."""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (cleanup that must finish: they arrive after it).
    Held by the handlers, not by a signal mask: the kernel gives a process's signal to any of its threads that
    does not block it (numpy's OpenBLAS workers, the progress heartbeat), and Python then runs the handler in
    the main thread whatever the main thread's own mask says."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {number: signal.signal(number, lambda signum, frame: held.append(signum))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if held:            # as if it had arrived now: the handler it would have met (KeyboardInterrupt, Terminated)
            signal.raise_signal(held[0])
