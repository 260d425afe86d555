"""The lab's load: JMeter (assembled from Maven Central by jmeter/pom.xml, jmeter.py) runs
jmeter/camel-tuning-lab.jmx against the machines (run.py) with a profile (profile.py) at targets
checked to be the lab's own (targets.py), showing progress from the results CSVs (progress.py);
JMeter's own report generator makes each machine's dashboard.

    python3 -m lab.load --target default=http://10.213.1.2 --target tuned=http://10.213.2.2 --quick
"""
from lab.load.jmeter import command_line as jmeter_command
from lab.load.jmeter import java_executable, java_version, jmeter_home, prepare
from lab.load.openmodel import FULL_STEPS, QUICK_STEPS, TUNE_STEPS, Slo, StepLoad
from lab.load.profile import FULL, QUICK, SCHEDULES, LoadError, LoadProfile, LoadResult, run_folder_bytes
from lab.load.progress import _CsvTail, format_progress, print_progress, progress_bar
from lab.load.run import CSV_COLUMNS, run
from lab.load.targets import TargetError, _parse_targets, check_targets
from lab.names import MACHINES

Profile = LoadProfile | StepLoad        # a closed model (users) or an open one (arrival rates, for capacity)

__all__ = ["CSV_COLUMNS", "FULL", "FULL_STEPS", "MACHINES", "QUICK", "QUICK_STEPS", "TUNE_STEPS", "SCHEDULES", "LoadError",
           "LoadProfile", "LoadResult", "Profile", "Slo", "StepLoad",
           "TargetError", "_CsvTail", "_parse_targets", "check_targets", "format_progress", "java_executable",
           "java_version", "jmeter_command", "jmeter_home", "prepare", "print_progress", "progress_bar",
           "run", "run_folder_bytes"]
