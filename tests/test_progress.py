"""A long command's progress (lab/progress.py run_logged): its whole output in a log, one condensed line at a time
on the terminal, no terminal codes in a pipe, its exit status and a time limit kept."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import progress

pytestmark = pytest.mark.fast

# A stand-in for Maven: step lines, noise, a colour code, then an exit status of its own.
FAKE_MAVEN = r"""
import sys, time
print("\x1b[1m[INFO] Scanning for projects...\x1b[0m")
print("[INFO] --- resources:3.3.1:resources (default-resources) @ camel-tuning-lab-service ---", flush=True)
time.sleep(0.3)
print("[INFO] Copying 3 resources", flush=True)
print("[INFO] --- compiler:3.13.0:compile (default-compile) @ camel-tuning-lab-service ---", flush=True)
time.sleep(0.3)
print("[INFO] BUILD SUCCESS", flush=True)
sys.exit(int(sys.argv[1]))
"""


def test_a_long_command_shows_where_it_is_and_keeps_its_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PIPE_EVERY_S", 0.0)         # every line: what a terminal would see redrawn
    log = tmp_path / "build.log"
    done = progress.run_logged([sys.executable, "-c", FAKE_MAVEN, "0"], log, "Maven", 60)
    assert done.returncode == 0
    printed = capsys.readouterr().err
    assert "    Maven: compile @ camel-tuning-lab-service (compiler) (0:0" in printed
    assert "    Maven: resources @ camel-tuning-lab-service (resources) (0:0" in printed
    assert "\x1b" not in printed and "\x1b" not in log.read_text()           # a pipe and a log get no codes
    assert "[INFO] Copying 3 resources" in log.read_text() and "Copying" not in printed


def test_in_a_pipe_progress_is_rare_and_the_exit_status_is_kept(tmp_path, capsys):
    done = progress.run_logged([sys.executable, "-c", FAKE_MAVEN, "3"], tmp_path / "build.log", "Maven", 60)
    assert done.returncode == 3
    assert len(capsys.readouterr().err.splitlines()) == 1             # within PIPE_EVERY_S: the first line only


def test_a_silent_command_still_shows_the_clock_and_is_stopped_at_its_limit(tmp_path, capsys, monkeypatch):
    # Maven downloading without a word (-ntp): the clock goes on, and the time limit holds.
    monkeypatch.setattr(progress, "PIPE_EVERY_S", 1.0)
    pid_file = tmp_path / "pid"
    silent = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        progress.run_logged([sys.executable, "-c", silent], tmp_path / "silent.log", "Maven", 3.0)
    assert time.monotonic() - started < 10
    assert len(capsys.readouterr().err.splitlines()) >= 2                    # 0:00, then 0:01, 0:02 …
    assert not Path(f"/proc/{pid_file.read_text()}").exists()               # killed, not left running


def test_on_a_terminal_the_line_is_redrawn_in_place(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    progress.run_logged([sys.executable, "-c", FAKE_MAVEN, "0"], tmp_path / "build.log", "Maven", 60)
    printed = capsys.readouterr().err
    assert "\r\x1b[2K    Maven: " in printed and printed.endswith("\r\x1b[2K") and "\n" not in printed


def test_maven_step_lines_are_read_and_others_are_not():
    assert progress.maven_step("[INFO] --- jmeter:3.8.0:configure (configuration) @ camel-tuning-lab-jmeter ---") == \
        "configure @ camel-tuning-lab-jmeter (jmeter)"
    assert progress.maven_step("[INFO] Populating JMeter directory...") == "Populating JMeter directory..."
    assert progress.maven_step("[INFO] Building camel-tuning-lab-service 1.0") is None
    assert progress.maven_step("[INFO] Copying 3 resources") is None


def test_a_silent_step_says_it_is_still_working_and_a_talking_one_does_not(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.4)
    stderr = sys.stderr
    with progress.step("Provisioning"):
        progress.info("TASK [pcp : Install PCP]")
        time.sleep(1.8)                                    # a long task: nothing printed meanwhile
    silent = capsys.readouterr().err.splitlines()
    beats = [line for line in silent if "still working" in line]
    # each beat says how long the step has run and the last thing it said, never an earlier beat
    assert len(beats) >= 2, silent
    assert all(re.fullmatch(r"    \.\.\. still working \(0:0\d\): TASK \[pcp : Install PCP\]", line) for line in beats), beats
    assert silent[-1].startswith("    done in ")
    assert sys.stderr is stderr                            # the watch ends with the step

    monkeypatch.setattr(progress, "HEARTBEAT_S", 1.0)
    with progress.step("Loading"):
        for _ in range(10):
            progress.info("default 00:01 830 req/s")
            time.sleep(0.2)
    assert "still working" not in capsys.readouterr().err


def test_a_step_inside_a_step_keeps_one_heartbeat_that_names_the_inner_one(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.4)
    with progress.step("Outer"):
        progress.info("TASK [outer's task]")
        with progress.step("Inner"):
            time.sleep(1.0)
    printed = capsys.readouterr().err.splitlines()
    beats = [line for line in printed if "still working" in line]
    # one watch: two beats in 1 s at most (0.4 s apart, checked every 0.5 s), each naming the inner step, not what
    # the outer one said before it
    assert 1 <= len(beats) <= 2 and all(line.endswith("): Inner") for line in beats), printed


def test_a_step_that_fails_gives_stderr_back_and_a_beat_never_joins_an_unfinished_line(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.4)
    stderr = sys.stderr
    with pytest.raises(RuntimeError), progress.step("Building"):
        print("\r    Maven: compile (0:01)", end="", file=sys.stderr, flush=True)     # a terminal's redraw
        time.sleep(0.7)
        raise RuntimeError("the build failed")
    assert sys.stderr is stderr
    printed = capsys.readouterr().err
    assert "(0:01)\n    ... still working (0:00): Maven: compile (0:01)\n" in printed, printed
    assert printed.rstrip().endswith("FAILED after 0.7 s: Building")


def test_ctrl_c_deferred_by_the_main_thread_waits_while_other_threads_run(monkeypatch):
    # The heartbeat is a second thread, and numpy's OpenBLAS starts its own: the kernel may give Ctrl-C to any of
    # them, and Python runs the handler in the main thread; inside a block that defers it (cleanup that must
    # finish) it must come after the block, as a KeyboardInterrupt.
    import os
    import signal

    import numpy  # noqa: F401  (its worker threads, as in the lab's process)

    from lab.interrupts import deferred
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    # Python's own handler, even when this test inherited Ctrl-C ignored (a job started in the background by sh)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    finished = False
    with pytest.raises(KeyboardInterrupt), progress.step("Loading"):
        time.sleep(0.5)                                    # the heartbeat thread is running
        with deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            finished = True
    signal.signal(signal.SIGINT, previous)
    assert finished
