#!/usr/bin/env python3
"""The stored real runs the fast tests read (tests/fixtures/run-local-*/, each with its summary beside it as
NAME.summary.json): recorded on the local backend by the lab's own commands, trimmed to what the analysis reads,
their summaries written by the lab's analysis. Never edited by hand.

    .venv/bin/python -m tools.stored_runs record NAME [NAME ...]   brings the lab up as NAME needs it, runs NAME's
                                                                   command and stores what it wrote
    .venv/bin/python -m tools.stored_runs store NAME RUN_DIR        stores a run folder made with NAME's command
    .venv/bin/python -m tools.stored_runs summaries                every stored run's summary again, after a definition
                                                                   changed on purpose; prints which figures changed
    .venv/bin/python -m tools.stored_runs list                     the stored runs and the command of each

Trimmed: each PCP archive down to the metrics the analysis asked pmrep for (pmlogextract), the JMeter dashboards to
their first page, the report and the series (written again from the rest) left out. A trimmed run must give the
summary its untrimmed folder gave, but for the count of metrics its archives hold: else nothing is stored.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab.analysis import pcp, repeated  # noqa: E402
from lab.analysis.summary import summarize  # noqa: E402
from lab.runfolder import RunFolder  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
RUNS = REPO / "runs"
# A stored summary's own provenance, and the one figure trimming changes on purpose.
PROVENANCE = ("generated_at", "generator")
TRIMMED = "metrics_in_archive"
# What pmlogger writes first, before any metric it was told to log: kept, so that a trimmed archive begins when
# its run's did (pmrep's one-second steps, counted from the archive's start, then fall where they fell).
PRELUDE = ("pmcd.pmlogger", "pmcd.pid", "pmcd.seqnum")
# The run folder's own path, as a stored summary writes it: the copy a test reads lies elsewhere.
RUN_PATH = "RUN"


@dataclass(frozen=True)
class StoredRun:
    name: str
    argv: tuple[str, ...]       # ./start.sh's arguments
    shows: str                  # what a test reads it for
    up: tuple[str, ...] = ()    # ./start.sh up's, run first: the lab as the run needs it

    @property
    def folder(self) -> Path:
        return FIXTURES / f"run-local-{self.name}"

    @property
    def summary(self) -> Path:
        return FIXTURES / f"run-local-{self.name}.summary.json"


STORED = (
    StoredRun("tiny", ("run", "--users", "2", "--ramp", "2", "--duration", "15", "--think", "50",
                       "--schedule", "parallel"),
              "15 s of a closed load that never settles: whole-run figures, no ratio"),
    # On the whole 512 MiB (the vm model's 397 MiB left the tuned machine memory-bound: a settled run, not a valid one)
    StoredRun("settled", ("run", "--users", "4", "--ramp", "5", "--duration", "75", "--think", "100",
                          "--schedule", "parallel"),
              "a closed load that settles: steady-state figures and their ratio", ("--memory", "whole")),
    StoredRun("repeated", ("run", "--users", "4", "--ramp", "5", "--duration", "60", "--think", "100",
                           "--schedule", "parallel", "--repeat", "2"),
              "two trials, every ratio with its interval", ("--memory", "whole")),
    StoredRun("capacity", ("capacity", "--start-rate", "100", "--step-rate", "150", "--step-length", "5",
                           "--warmup", "15", "--resolution", "150", "--max-rate", "1300", "--schedule", "parallel"),
              "an open model stepped past each machine's knee: each capacity and their ratio", ("--memory", "vm")),
)


def by_name(name: str) -> StoredRun:
    for stored in STORED:
        if stored.name == name:
            return stored
    raise SystemExit(f"stored_runs: no stored run {name!r} (there are: {', '.join(s.name for s in STORED)})")


def _relocated(summary: Any, root: Path) -> Any:
    """The summary with the run folder's path written RUN (also inside longer strings)."""
    return json.loads(json.dumps(summary, default=str).replace(str(root), RUN_PATH))


def figures(root: Path) -> dict:
    """What the lab's analysis gives of a run folder now, as stored: a repeated run's trials each summarized first
    (and written into their folders: the run's own summary reads them), its paths written RUN."""
    folder = RunFolder(root)
    if repeated.is_repeated(root):
        for trial in folder.trials():
            trial.write_json(trial.summary_json, _relocated(summarize(trial.root, write=False, use_gcviewer=False),
                                                           root))
        return _relocated(repeated.summarize(root, write=False), root)
    return _relocated(summarize(root, write=False, use_gcviewer=False), root)


def comparable(summary: dict) -> dict:
    """A summary without its provenance and without the count of metrics its archives hold (trimming lowers it)."""
    text = re.sub(rf'"{TRIMMED}": \d+', f'"{TRIMMED}": 0', json.dumps(summary, sort_keys=True))
    return {key: value for key, value in json.loads(text).items() if key not in PROVENANCE}


@contextmanager
def metrics_read() -> Iterator[set[str]]:
    """Every metric the analysis asks pmrep for while in the block (those its derived metrics are made of too)."""
    seen: set[str] = set()
    original = pcp.pmrep_csv

    def recording(archive: str, metrics: list[str], *args: Any, **options: Any) -> Any:
        derived = options.get("derived") or {}
        seen.update(name for name in metrics if name not in derived)
        for expression in derived.values():
            seen.update(re.findall(r"[a-z_]\w*(?:\.\w+)+", expression))
        return original(archive, metrics, *args, **options)
    pcp.pmrep_csv = recording
    try:
        yield seen
    finally:
        pcp.pmrep_csv = original


# What the lab writes again from the rest of a run folder (its runfolder.py names them): never stored.
_written_again = shutil.ignore_patterns(RunFolder(RUNS).report_dir.name, RunFolder(RUNS).series_json.name,
                                       RunFolder(RUNS).jmeter.dashboard_scratch("default").name)


def _archives(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("pcp") if p.is_dir() and p.parent.parent.name == "machines")


def trim(source: Path, target: Path, metrics: set[str]) -> None:
    """A copy of the run folder at target, trimmed: PCP archives to these metrics, dashboards to their first page,
    no report, series or top summary (written again from the rest)."""
    extract = pcp._pcp_tool("pmlogextract")
    if not extract:
        raise SystemExit("stored_runs: pmlogextract not found (apt-get install pcp)")
    shutil.copytree(source, target, ignore=_written_again)
    RunFolder(target).summary_json.unlink(missing_ok=True)
    for dashboard in target.rglob("dashboard"):
        for path in dashboard.iterdir():
            if path.name != "index.html":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    config = target.parent / "pmlogextract.config"
    config.write_text("".join(f"{name}\n" for name in (*PRELUDE, *sorted(metrics))))
    for folder in _archives(target):
        archive = pcp.archive_of(folder)
        if not archive:
            continue
        bases = archive.split(",")
        trimmed = folder.parent / "pcp.trimmed"
        trimmed.mkdir()
        done = subprocess.run([extract, "-c", str(config), *bases, str(trimmed / Path(bases[0]).name)],
                              capture_output=True, text=True, env=pcp.pcp_env())
        if done.returncode != 0:
            raise SystemExit(f"stored_runs: pmlogextract on {folder}: {done.stderr.strip()[:500]}")
        for base in bases:
            for part in Path(base).parent.glob(Path(base).name + ".*"):
                part.unlink()
        for part in trimmed.iterdir():
            part.rename(folder / part.name)
        trimmed.rmdir()
    config.unlink()


def _changes(before: dict, after: dict) -> list[str]:
    old = json.dumps(comparable(before), indent=1, sort_keys=True).splitlines()
    new = json.dumps(comparable(after), indent=1, sort_keys=True).splitlines()
    return [line for line in difflib.unified_diff(old, new, "before", "after", n=2, lineterm="")]


def store(stored: StoredRun, run_dir: Path) -> None:
    """The run folder trimmed into the fixtures, once it gives the summary the untrimmed one gave."""
    with tempfile.TemporaryDirectory(prefix="stored-run-") as scratch:
        whole = Path(scratch) / stored.folder.name
        shutil.copytree(run_dir, whole, ignore=_written_again)
        with metrics_read() as metrics:
            untrimmed = figures(whole)
        trimmed = Path(scratch) / "trimmed" / stored.folder.name
        trimmed.parent.mkdir()
        trim(whole, trimmed, metrics)
        got = figures(trimmed)
        differ = _changes(untrimmed, got)
        if differ:
            raise SystemExit(f"stored_runs: {stored.name}: the trimmed folder gives other figures than the run did; "
                             "nothing stored:\n" + "\n".join(differ[:80]))
        shutil.rmtree(stored.folder, ignore_errors=True)
        shutil.copytree(trimmed, stored.folder)
    stored.summary.write_text(json.dumps(got, indent=2) + "\n")
    size = sum(p.stat().st_size for p in stored.folder.rglob("*") if p.is_file())
    print(f"stored_runs: {stored.name}: {run_dir} -> {_shown(stored.folder)} ({size / 2**20:.1f} MiB; "
          f"PCP trimmed to {len(metrics)} metrics) and {_shown(stored.summary)}")


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def record(stored: StoredRun) -> None:
    print(f"stored_runs: {stored.name}: ./start.sh up {' '.join(stored.up)}", flush=True)
    if subprocess.run([str(REPO / "start.sh"), "up", *stored.up], cwd=REPO).returncode != 0:
        raise SystemExit(f"stored_runs: {stored.name}: ./start.sh up {' '.join(stored.up)} failed; nothing stored")
    latest = (RUNS / "latest").resolve() if (RUNS / "latest").exists() else None
    print(f"stored_runs: {stored.name}: ./start.sh {' '.join(stored.argv)}", flush=True)
    done = subprocess.run([str(REPO / "start.sh"), *stored.argv], cwd=REPO)
    run_dir = (RUNS / "latest").resolve()
    if done.returncode != 0 or run_dir == latest:
        raise SystemExit(f"stored_runs: {stored.name}: ./start.sh {' '.join(stored.argv)} exited {done.returncode}; "
                         "nothing stored")
    store(stored, run_dir)


def summaries() -> int:
    """Every stored run's summary again, from a copy of its folder, written where a figure moved (with the diff printed,
    to be read); one whose figures are the same is left as it is."""
    for stored in STORED:
        if not stored.folder.is_dir():
            print(f"stored_runs: {stored.name}: not recorded yet (record {stored.name})")
            continue
        before = json.loads(stored.summary.read_text()) if stored.summary.is_file() else {}
        with tempfile.TemporaryDirectory(prefix="stored-run-") as scratch:
            copy = Path(scratch) / stored.folder.name
            shutil.copytree(stored.folder, copy)
            got = figures(copy)
            # a repeated run's trials too: as figures() wrote them into the copy, against those stored
            trials = [(trial.summary_json, RunFolder(stored.folder).trial(int(trial.root.name)).summary_json)
                      for trial in RunFolder(copy).trials()]
            differ = _changes(before, got) + [line for new, kept in trials for line in _changes(
                json.loads(kept.read_text()) if kept.is_file() else {}, json.loads(new.read_text()))]
            if differ:
                for new, kept in trials:
                    shutil.copy(new, kept)
                stored.summary.write_text(json.dumps(got, indent=2) + "\n")
        print(f"stored_runs: {stored.name}: " + ("\n".join(differ) if differ else "the same figures"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.stored_runs", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recorder = commands.add_parser("record", help="run each NAME's command on the lab that is up and store it")
    recorder.add_argument("names", nargs="+", metavar="NAME", choices=[s.name for s in STORED])
    storer = commands.add_parser("store", help="store a run folder you ran yourself with NAME's command")
    storer.add_argument("name", metavar="NAME", choices=[s.name for s in STORED])
    storer.add_argument("run_dir", type=Path)
    commands.add_parser("summaries", help="every stored run's summary again; prints what changed")
    commands.add_parser("list", help="the stored runs and the command of each")
    args = parser.parse_args(argv)
    if args.command == "record":
        for name in args.names:
            record(by_name(name))
    elif args.command == "store":
        store(by_name(args.name), args.run_dir.resolve())
    elif args.command == "summaries":
        return summaries()
    else:
        for stored in STORED:
            there = "stored" if stored.folder.is_dir() else "not recorded"
            print(f"{stored.name:<9} ./start.sh up {' '.join(stored.up)}; ./start.sh {' '.join(stored.argv)}\n"
                  f"          {stored.shows} ({there})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
