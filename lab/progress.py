"""Visible progress: each step says what it does and how long it took; a long command says where it is; a step
that has printed nothing for a while says it is still working, so silence never passes for a hang."""
from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.names import clock

HEARTBEAT_S = 8.0           # a step silent this long prints where it is (the tests allow 10 s between lines)


class _Watched:
    """sys.stderr, with the time and text of the last line written through it (the heartbeat reads them)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.at = time.monotonic()
        self.last = ""
        self.ended_line = True              # the last write ended its line (a terminal's redraw does not)
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            written = self.inner.write(text)
            shown = [line.strip() for line in _ANSI.sub("", text).replace("\r", "\n").splitlines() if line.strip()]
            if shown:
                self.at = time.monotonic()
                # what the step is at: not a step's own title or end
                said = [line for line in shown if not line.startswith(("==>", "done in", "FAILED after"))]
                self.last = said[-1] if said else self.last
            if text:
                self.ended_line = text.endswith("\n")
            return written

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def beat(self, line: str) -> None:
        """The heartbeat's line, in one write, on a line of its own; it is not what the step is at."""
        with self.lock:
            self.inner.write(("" if self.ended_line else "\n") + line + "\n")
            self.inner.flush()
            self.at, self.ended_line = time.monotonic(), True

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


_STEPS: list[tuple[str, float]] = []   # the steps running, innermost last: (title, started)


@contextmanager
def _heartbeat() -> Iterator[None]:
    """While a step runs: after HEARTBEAT_S without a line, one saying how long the innermost step has run and the
    last thing it said. One watch for nested steps (one line at a time)."""
    if isinstance(sys.stderr, _Watched):
        yield
        return
    watched = sys.stderr = _Watched(sys.stderr)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.5):
            if _STEPS and time.monotonic() - watched.at >= HEARTBEAT_S:
                title, started = _STEPS[-1]
                watched.beat(f"    ... still working ({_clock(time.monotonic() - started)}): "
                             f"{(watched.last or title)[:100]}")

    thread = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        if sys.stderr is watched:           # first: a second Ctrl-C during the join must not leave it wrapped
            sys.stderr = watched.inner
        stop.set()
        thread.join(timeout=2)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


@contextmanager
def step(title: str) -> Iterator[None]:
    print(f"==> {title} ...", file=sys.stderr, flush=True)
    if isinstance(sys.stderr, _Watched):    # an inner step: what the outer one was at is not what it is at
        sys.stderr.last = ""
    started = time.monotonic()
    _STEPS.append((title, started))
    try:
        with _heartbeat():
            yield
    except BaseException:
        print(f"    FAILED after {time.monotonic() - started:.1f} s: {title}", file=sys.stderr, flush=True)
        raise
    finally:
        _STEPS.remove((title, started))
    print(f"    done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def info(message: str) -> None:
    print(f"    {message}", file=sys.stderr, flush=True)


# Maven's lines that say where a build is: "[INFO] --- compiler:3.13.0:compile (default-compile) @ app ---"
_MAVEN_STEP = re.compile(r"^\[INFO\] --- (?:[\w.-]+:)?([\w.-]+):[\w.-]+:([\w.-]+) \S* ?@ ([\w.-]+) ---")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PIPE_EVERY_S = 5.0          # not a terminal (a log, CI): a progress line this often at most


# ...and the lines where a plugin says what it starts: "[INFO] Populating JMeter directory..."
_MAVEN_DOING = re.compile(r"^\[INFO\] ([A-Z][^\[\]]{3,70}\.\.\.)\s*$")


def maven_step(line: str) -> str | None:
    """Where a Maven build is, from one of its lines: 'compile @ app (compiler)' from a step line, a plugin's
    'Populating JMeter directory...'; None for any other line."""
    line = _ANSI.sub("", line)
    step = _MAVEN_STEP.match(line)
    if step:
        return f"{step[2]} @ {step[3]} ({step[1]})"
    doing = _MAVEN_DOING.match(line)
    return doing[1] if doing else None


def run_logged(command: list[str], log: Path, what: str, timeout_s: float,
               describe: Callable[[str], str | None] = maven_step, **popen) -> subprocess.CompletedProcess:
    """Runs a long, chatty command with its whole output in `log` and one line of progress on the terminal:
    the elapsed time and where it is (describe() picks that from its lines), redrawn in place every second on a
    terminal, every PIPE_EVERY_S in a pipe, silent stretches included; no terminal codes ever reach a pipe or the
    log. Past timeout_s, or on any exception (Ctrl-C, SIGTERM), the command is killed: TimeoutExpired then."""
    tty = sys.stderr.isatty()
    lines: queue.Queue[str | None] = queue.Queue()
    started = time.monotonic()
    shown_at, where = -PIPE_EVERY_S, "starting"
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", **popen)
        reader = threading.Thread(target=_read_lines, args=(process, lines), daemon=True)
        reader.start()
        try:
            while True:
                try:
                    line = lines.get(timeout=1.0)
                except queue.Empty:
                    line = ""
                if line is None:                        # the command closed its output: it is ending
                    break
                if line:
                    sink.write(_ANSI.sub("", line))
                    where = describe(line) or where
                now = time.monotonic()
                if now - started > timeout_s:
                    raise subprocess.TimeoutExpired(command, timeout_s)
                if (tty and now - shown_at >= 1.0) or now - shown_at >= PIPE_EVERY_S:
                    text = f"    {what}: {where} ({clock(now - started)})"
                    print(f"\r\x1b[2K{text}" if tty else text, end="" if tty else "\n", file=sys.stderr, flush=True)
                    shown_at = now
            process.wait(timeout=max(1.0, timeout_s - (time.monotonic() - started)))
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            if tty:
                print("\r\x1b[2K", end="", file=sys.stderr, flush=True)
    return subprocess.CompletedProcess(command, process.returncode)


def _read_lines(process: subprocess.Popen, lines: queue.Queue) -> None:
    """The command's output, line by line, then None: read apart so that silence does not stop the clock."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)
