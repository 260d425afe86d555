"""The run folder's layout and its JSON files: the contract between the experiment that writes a run
and the analysis and report that read it. Every path of a run folder is named here, nowhere else.

    runs/<run-id>/
      run.json  status.json  knobs.json             written by ./start.sh run
      summary.json  series.json                     written by lab.analysis
      report/index.html                             written by lab.report
      jmeter/jmeter.log  jmeter/loadgen.csv  jmeter/<machine>/results.csv  jmeter/<machine>/dashboard/index.html
      machines/<machine>/{pcp,gc,logs,crash}/…  machines/<machine>/events.json

    runs/<run-id>/ of a repeated run (--repeat N): run.json, status.json, knobs.json, summary.json
    (the trials compared, lab/analysis/repeated.py) and report/index.html, and each trial a run folder
    of the layout above in trials/<k>/.
"""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self, cast

from typing_extensions import TypeIs

from lab import contract
from lab.errors import LabError, StepFailed
from lab.paths import REPO, callers

RUNS = REPO / "runs"
# What a run collects from each machine, one folder each under machines/<machine>/.
EVIDENCE_KINDS = ("pcp", "gc", "logs", "crash")


def is_repeated(summary: contract.Summary | contract.RepeatedSummary) -> TypeIs[contract.RepeatedSummary]:
    """Whether a summary is a repeated run's (its trials compared) rather than one run's."""
    return summary.get("kind") == "repeated"


@dataclass(frozen=True)
class JMeterFolder:
    """jmeter/ of a run folder (or any folder lab.load writes to): JMeter's log, output and, per
    machine, its results CSV and the report generator's dashboard."""
    root: Path
    ENGINE: ClassVar[str] = "engine"        # a remote engine's own files, beside the machines' folders
    LIMITS: ClassVar[str] = "limits"        # the host's limits, laid out as this folder is
    GENERATOR: ClassVar[str] = "generator"  # the load generator's ceiling (lab/load/ceiling.py), idem
    REFINE: ClassVar[str] = "refine"        # each machine's finer steps near its knee (lab/knee.py), idem
    PLAN_FILES: ClassVar[str] = "plan-files"    # what a user's own plan's listeners wrote (lab/load/plancopy.py)
    NOT_MACHINES: ClassVar[tuple[str, ...]] = (ENGINE, LIMITS, GENERATOR, REFINE, PLAN_FILES)

    @property
    def log(self) -> Path:
        return self.root / "jmeter.log"

    @property
    def out(self) -> Path:
        """JMeter's standard output and error."""
        return self.root / "jmeter.out"

    @property
    def loadgen(self) -> Path:
        """The host's and JMeter's CPU counters during the load (lab/load/cpu.py)."""
        return self.root / "loadgen.csv"

    @property
    def open_plan(self) -> Path:
        """A capacity run's plan: the lab's plan with open-model thread groups (lab/load/openmodel.py)."""
        return self.root / "open-model.jmx"

    @property
    def own_plan(self) -> Path:
        """A user's own plan (./start.sh run --plan), copied as given."""
        return self.root / "own-plan.jmx"

    def own_plan_run(self, machines: list[str]) -> Path:
        """The copy of that plan JMeter ran for these machines (lab/load/plancopy.py)."""
        return self.root / f"own-plan-{'-'.join(machines)}.jmx"

    @property
    def plan_files(self) -> Path:
        return self.root / self.PLAN_FILES

    @property
    def engine_log(self) -> Path:
        """The log of the remote engine that generated the load, when it ran on this host (lab/load/engines.py).
        Engines on other hosts (lab/machines/remote_engines.py) leave theirs beside it, in <host>/ under the
        engine's lab home, with the logs of the playbook that started and stopped them (ansible-*.log)."""
        return self.root / self.ENGINE / "engine.log"

    @property
    def engine_out(self) -> Path:
        """That engine's standard output and error."""
        return self.root / self.ENGINE / "engine.out"

    @property
    def generator(self) -> JMeterFolder:
        """The load generator's ceiling, measured before a capacity run's load (lab/load/ceiling.py), laid out as a
        run's jmeter/ is, with target.json: what it loaded, how."""
        return JMeterFolder(self.root / self.GENERATOR)

    def refine(self, machine: str) -> JMeterFolder:
        """A machine's finer steps between its last step met and its knee (lab/knee.py), laid out as a run's jmeter/
        is, with steps.json: the steps it ran and the bracket they came from."""
        return JMeterFolder(self.root / self.REFINE / machine)

    def limits(self, kind: str) -> JMeterFolder:
        """One of the host's limits (lab/limits.py: the service without HTTPD, the mock alone), laid out as a
        run's jmeter/ is."""
        return JMeterFolder(self.root / self.LIMITS / kind)

    def machine_dir(self, machine: str) -> Path:
        return self.root / machine

    def results(self, machine: str) -> Path:
        return self.machine_dir(machine) / "results.csv"

    def load_ended(self, machine: str) -> Path:
        """Made when a machine's open-model load ends before the other's (past its knee): its thread group's
        arrivals then send nothing (lab/load/openplan.py's If Controller and watch)."""
        return self.machine_dir(machine) / "load-ended"

    def phase_log(self, machine: str) -> Path:
        """The log of a sequential run's phase for this machine (merged into log afterwards)."""
        return self.machine_dir(machine) / "jmeter.log"

    def dashboard_dir(self, machine: str) -> Path:
        return self.machine_dir(machine) / "dashboard"

    def dashboard(self, machine: str) -> Path:
        return self.dashboard_dir(machine) / "index.html"

    def dashboard_log(self, machine: str) -> Path:
        return self.machine_dir(machine) / "dashboard.log"

    def dashboard_out(self, machine: str) -> Path:
        return self.machine_dir(machine) / "dashboard.out"

    def dashboard_scratch(self, machine: str) -> Path:
        """The report generator's temporary folder (its default, bin/temp, is shared: runs would clash)."""
        return self.machine_dir(machine) / "dashboard-tmp"


@dataclass(frozen=True)
class RunFolder:
    root: Path

    # ------------------------------------------------------------------ files of the whole run
    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def status_json(self) -> Path:
        return self.root / "status.json"

    @property
    def knobs_json(self) -> Path:
        return self.root / "knobs.json"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def series_json(self) -> Path:
        return self.root / "series.json"

    @property
    def thresholds_xml(self) -> Path:
        """The run's thresholds as JUnit XML, for CI systems."""
        return self.root / "thresholds.xml"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_html(self) -> Path:
        return self.report_dir / "index.html"

    @property
    def jmeter(self) -> JMeterFolder:
        return JMeterFolder(self.root / "jmeter")

    @property
    def jmeter_log(self) -> Path:
        return self.jmeter.log

    @property
    def is_trial(self) -> bool:
        """A trial of a repeated run (trials/<k>/), judged as part of its run, not alone."""
        return self.root.parent.name == "trials" and self.root.name.isdecimal()

    @property
    def run_id(self) -> str:
        """The run's name: its folder's, a trial's with its run's (20261123-174537-trial-2)."""
        if self.is_trial:
            return f"{self.root.parent.parent.name}-trial-{self.root.name}"
        return self.root.name

    @property
    def trials_dir(self) -> Path:
        return self.root / "trials"

    def trial(self, number: int) -> RunFolder:
        """Trial `number` (from 1) of a repeated run: a run folder of its own."""
        return RunFolder(self.trials_dir / str(number))

    def trials(self) -> list[RunFolder]:
        """The trials of a repeated run, in order (none for a single run)."""
        if not self.trials_dir.is_dir():
            return []
        numbers = sorted(int(p.name) for p in self.trials_dir.iterdir() if p.is_dir() and p.name.isdecimal())
        return [self.trial(number) for number in numbers]

    # ---------------------------------------------------------------------- files of a machine
    def results(self, machine: str) -> Path:
        return self.jmeter.results(machine)

    def dashboard(self, machine: str) -> Path:
        return self.jmeter.dashboard(machine)

    def machine_dir(self, machine: str) -> Path:
        return self.root / "machines" / machine

    def evidence(self, machine: str, kind: str) -> Path:
        """machines/<machine>/<kind>/ for kind in EVIDENCE_KINDS."""
        if kind not in EVIDENCE_KINDS:
            raise ValueError(f"unknown evidence kind {kind!r}: one of {EVIDENCE_KINDS}")
        return self.machine_dir(machine) / kind

    def events_json(self, machine: str) -> Path:
        return self.machine_dir(machine) / "events.json"

    # ------------------------------------------------------------------------------- helpers
    def relative(self, path: Path) -> str:
        """A path as the report links it: relative to the run folder where it lies inside it."""
        try:
            return str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)

    def machines_found(self) -> set[str]:
        """Machines with a folder under jmeter/ (not the engine's or the limits') or machines/."""
        found: set[str] = set()
        for folder in (self.jmeter.root, self.root / "machines"):
            if folder.is_dir():
                found.update(p.name for p in folder.iterdir() if p.is_dir())
        return found - set(JMeterFolder.NOT_MACHINES)

    @staticmethod
    def write_text(path: Path, text: str) -> None:
        """Writes text atomically and durably: a reader (a browser, the report) never sees half a file, and a
        crash or power cut right after leaves the old file or the new one, never an empty one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(path.name + ".tmp")
        try:
            with scratch.open("w") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            scratch.replace(path)
            folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(folder)        # the rename itself
            finally:
                os.close(folder)
        except OSError as error:
            scratch.unlink(missing_ok=True)
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise LabError(f"{path} could not be written: the disk is full ({error.strerror}). What the run had "
                               f"collected stays in {path.parent}; free some space (old runs are in runs/) and run "
                               "again") from error
            raise

    @classmethod
    def write_json(cls, path: Path, data: object, compact: bool = False) -> None:
        """Writes data as JSON, atomically; a number that is not finite (no figure) is written as null, JSON
        having no NaN."""
        data = _finite(data)
        text = json.dumps(data, separators=(",", ":"), default=str, allow_nan=False) if compact \
            else json.dumps(data, indent=2, default=str, allow_nan=False)
        cls.write_text(path, text + "\n")

    def read_json(self, path: Path, problems: list[str], what: str) -> dict | None:
        """A JSON object from the run folder, or None with the reason appended to problems."""
        if not path.is_file():
            problems.append(f"{what}: {self.relative(path)} missing")
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            problems.append(f"{what}: {self.relative(path)} unreadable ({error})")
            return None
        if not isinstance(data, dict):
            problems.append(f"{what}: {self.relative(path)} is not a JSON object")
            return None
        return data

    def summary(self, problems: list[str] | None = None) -> contract.Summary | contract.RepeatedSummary | None:
        """summary.json as its type (lab/contract.py: a repeated run's has kind "repeated"), or None when it is
        missing or unreadable (why, appended to problems). Its shape is held to the type by the analysis's tests."""
        found = self.read_json(self.summary_json, [] if problems is None else problems, "summary")
        return cast("contract.Summary | contract.RepeatedSummary | None", found)

    def run_summary(self, problems: list[str] | None = None) -> contract.Summary | None:
        """summary.json of one run (or of one trial), None when missing, unreadable or a repeated run's."""
        found = self.summary(problems)
        return None if found is None or is_repeated(found) else found

    @classmethod
    def create(cls, runs: Path = RUNS) -> RunFolder:
        """A new, empty run folder named after the time, with runs/latest pointing at it."""
        run_id = time.strftime("%Y%m%d-%H%M%S")
        root = runs / run_id
        root.mkdir(parents=True)
        latest = runs / "latest"
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_id)
        return cls(root)


def comparison_page(compared: list[Path], runs: Path = RUNS) -> Path:
    """Where ./start.sh compare writes runs side by side: runs/compare/<A>-vs-<B>[-vs-<C>...]/index.html."""
    return runs / "compare" / "-vs-".join(Path(run).name for run in compared) / "index.html"


def check_free_space(needed_bytes: int, runs: Path = RUNS) -> None:
    """Refuses to start a run the disk cannot hold (a full disk mid-run loses the run)."""
    folder = next(path for path in (runs, *runs.parents) if path.exists())
    free = shutil.disk_usage(folder).free
    if free < needed_bytes:
        raise LabError(f"{runs} has {free / 2**20:,.0f} MiB free; this run needs about {needed_bytes / 2**20:,.0f} MiB "
                       "(JMeter's results, PCP archives, logs): free some space (old runs are in runs/), or "
                       "shorten the run (--duration)")


class RecordFolder:
    """A folder of runs/ kept by one JSON record (an ablation's, a tune's): made with its record, found again for
    --resume (by its folder from where the user ran ./start.sh, else by its id in runs/), read and updated."""
    FILE: ClassVar[str]
    KIND: ClassVar[str]
    SCHEMA: ClassVar[int]           # the record's version (lab/contract.py)

    def __init__(self, root: Path):
        self.root = root
        self.file = root / self.FILE

    @classmethod
    def start(cls, record: dict, runs: Path | None = None) -> Self:
        made = cls(RunFolder.create(runs or RUNS).root)
        RunFolder.write_json(made.file, {"schema": cls.SCHEMA, "kind": cls.KIND, "started_at": time.time(), **record})
        return made

    @classmethod
    def resume(cls, typed: str, runs: Path | None = None) -> Self:
        runs = runs or RUNS
        for root in (callers(typed), runs / typed):
            if (root / cls.FILE).is_file():
                return cls(root.resolve())
        raise StepFailed(f"--resume {typed}: no {cls.KIND} there (no {cls.FILE} in {typed} nor in {runs / typed})")

    def record(self, problems: list[str] | None = None) -> dict:
        """The record ({} if it cannot be read; why, appended to problems)."""
        return RunFolder(self.root).read_json(self.file, [] if problems is None else problems, self.KIND) or {}

    def update(self, **fields) -> None:
        RunFolder.write_json(self.file, {**self.record(), **fields})

    def check_backend(self, typed: str, backend: str | None) -> None:
        """A resumed one goes on with the backend whose machines it measured."""
        recorded = self.record().get("backend")
        if backend and recorded and backend != recorded:
            raise StepFailed(f"--resume {typed} --backend {backend}: the {self.KIND} measured the {recorded} "
                             "backend's machines")


def existing(text: str) -> Path:
    """A run folder named on a command line (argparse type=): it must exist."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such run folder (runs are under {RUNS}; runs/latest is the last one)")
    return path


def _finite(data: object) -> object:
    """data with every float that is not finite replaced by None (numpy's floats are floats)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data
