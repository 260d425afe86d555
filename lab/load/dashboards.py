"""Each machine's dashboard, made by JMeter's own report generator from its results.csv after the load,
with statistics over every sample."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from lab.load.jmeter import as_properties, launch
from lab.load.openmodel import StepLoad
from lab.load.processes import kill, wait
from lab.load.profile import LoadProfile
from lab.load.progress import _complete_records
from lab.runfolder import JMeterFolder

# The dashboards' statistics over every sample: JMeter's default (20,000) keeps only the last samples
# for percentiles, so a long run's dashboard would describe its last seconds. -1: no window.
DASHBOARD_PROPERTIES = {"jmeter.reportgenerator.statistic_window": "-1"}
DASHBOARD_TIMEOUT_S = 900.0


def _granularity_ms(duration_s: int) -> int:
    """Dashboard graph granularity: fine for short runs, smoother for long ones."""
    return 1000 if duration_s <= 300 else 5000 if duration_s <= 1800 else 10000


def _trim_partial_record(csv_path: Path) -> None:
    """A killed JMeter may leave half a line; the report generator would choke on it."""
    data = csv_path.read_bytes()
    complete, rest = _complete_records(data)
    if rest:
        with csv_path.open("r+b") as stream:
            stream.truncate(len(complete))


def _has_samples(csv_path: Path) -> bool:
    try:
        with csv_path.open("rb") as stream:
            stream.readline()
            return bool(stream.readline().strip())
    except OSError:
        return False


def generate(java: str, jar: Path, results: dict[str, Path], profile: LoadProfile | StepLoad,
             out: JMeterFolder, problems: list[str]) -> dict[str, Path]:
    """JMeter's report generator (`-g results.csv -o dashboard`), one per machine, concurrently."""
    running: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    dashboards: dict[str, Path] = {}
    try:
        for machine, csv_path in results.items():
            if not _has_samples(csv_path):
                problems.append(f"{machine}: no samples, no dashboard")
                continue
            _trim_partial_record(csv_path)
            folder = out.dashboard_dir(machine)
            shutil.rmtree(folder, ignore_errors=True)
            log = out.dashboard_log(machine)
            scratch = out.dashboard_scratch(machine)
            shutil.rmtree(scratch, ignore_errors=True)
            command = launch(java, jar, "-g", str(csv_path), "-o", str(folder), "-j", str(log), *as_properties({
                **DASHBOARD_PROPERTIES,
                "jmeter.reportgenerator.overall_granularity": str(_granularity_ms(profile.duration_s)),
                "jmeter.reportgenerator.report_title": f"camel-tuning-lab: {machine}",
                "jmeter.reportgenerator.temp_dir": str(scratch)}))
            with out.dashboard_out(machine).open("w") as stream:
                popen = subprocess.Popen(command, cwd=jar.parent, stdout=stream, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            running[machine] = (popen, folder, log)
        deadline = time.monotonic() + DASHBOARD_TIMEOUT_S
        for machine, (popen, folder, log) in running.items():
            if not wait(popen, max(1.0, deadline - time.monotonic())):
                kill(popen)
                problems.append(f"{machine}: dashboard generation timed out")
            elif popen.returncode == 0 and (folder / "index.html").is_file():
                dashboards[machine] = folder / "index.html"
            else:
                problems.append(f"{machine}: dashboard generation failed (exit {popen.returncode}); see {log}")
    except KeyboardInterrupt:
        problems.append("dashboard generation interrupted")
    finally:
        for machine, (popen, _, _) in running.items():
            kill(popen)
            shutil.rmtree(out.dashboard_scratch(machine), ignore_errors=True)
    return dashboards
