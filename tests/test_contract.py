"""The published contract: docs/schema/*.schema.json is what lab/contract.py says (tools/schema.py wrote it from
there), the stored fixtures and what the writers write now hold to it, and it refuses what a script could not
rely on: a key nobody declared, a figure of the wrong type, a file of another version."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from lab import contract
from lab.analysis import repeated
from lab.analysis.summary import summarize
from lab.runfolder import RunFolder
from published import errors, published_under, violations
from tools import schema

pytestmark = pytest.mark.fast

FIXTURES = REPO / "tests" / "fixtures"
STORED_RUN = FIXTURES / "run-local-tiny"


def test_the_published_schemas_are_current_with_the_contract() -> None:
    for name in schema.FILES:
        path = schema.FOLDER / f"{name}.schema.json"
        assert path.is_file() and path.read_text() == schema.text(name), \
            f"{path} is not what lab/contract.py says: run .venv/bin/python -m tools.schema"
    assert schema.main(["--check"]) == 0


def test_the_stored_fixtures_hold_to_their_schemas() -> None:
    stored = [*published_under(FIXTURES), FIXTURES / "run-local-tiny.summary.json"]
    assert {p.name for p in stored} >= {"run.json", "run-local-tiny.summary.json"}
    assert violations(stored) == [] == errors("summary", json.loads(stored[-1].read_text()))


def test_what_the_writers_write_now_holds_to_its_schema(tmp_path: Path) -> None:
    # one run's summary, then the same run as the two trials of a repeated run: both summaries as written
    single = tmp_path / "single"
    shutil.copytree(STORED_RUN, single)
    summarize(single, use_gcviewer=False)
    run = tmp_path / "repeated"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({**json.loads((STORED_RUN / "run.json").read_text()), "repeat": 2}))
    for number in (1, 2):
        shutil.copytree(single, RunFolder(run).trial(number).root)
    assert repeated.summarize(run)["kind"] == "repeated"
    files = published_under(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files if p.name == "summary.json"] == [
        "repeated/summary.json", "repeated/trials/1/summary.json", "repeated/trials/2/summary.json",
        "single/summary.json"]
    assert violations(files) == []


def test_a_run_that_lost_a_machine_and_its_status_still_writes_what_the_schema_says(tmp_path: Path) -> None:
    # the tuned machine died before anything was collected (no results, GC log, PCP archive or events), and the
    # machines' status and knobs were never recorded
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    shutil.rmtree(run / "machines" / "tuned")
    shutil.rmtree(run / "jmeter" / "tuned")
    (run / "status.json").unlink()
    (run / "knobs.json").unlink()
    summary = summarize(run, use_gcviewer=False)
    tuned = summary["machines"]["tuned"]
    assert tuned["load"] is None and tuned["gc"] is None and tuned["events"] is None and tuned["url"] is None
    assert summary["knobs"]["available"] is False
    assert violations([run / "summary.json", run / "run.json"]) == []


@pytest.mark.parametrize(("change", "expected"), [
    (lambda s: s["machines"]["tuned"].update(throughput=1.0), r"machines/tuned: Additional properties .*'throughput'"),
    (lambda s: s["machines"]["default"]["load"].update(throughput_rps="fast"), r"throughput_rps: 'fast' is not of type"),
    (lambda s: s["verdict"].pop("valid"), r"verdict: 'valid' is a required property"),
    (lambda s: s.update(schema=1), r"schema: 2 was expected"),
    (lambda s: s["comparison"][0].update(ratio=None, tuned="n/a"), r"comparison/0/tuned: 'n/a' is not"),
])
def test_a_summary_a_script_could_not_rely_on_is_refused(change, expected) -> None:
    import re
    summary = json.loads((FIXTURES / "run-local-tiny.summary.json").read_text())
    change(summary)
    found = errors("summary", summary)
    assert any(re.search(expected, problem) for problem in found), found


def test_each_published_file_carries_its_version() -> None:
    # written by the writers: run.json (lab/experiment.py), the records (RecordFolder.start), the summary
    from lab.ablation.folder import Ablation
    from lab.tune.folder import Tuning
    assert (Ablation.SCHEMA, Tuning.SCHEMA) == (contract.ABLATION_SCHEMA, contract.TUNE_SCHEMA)
    assert json.loads((STORED_RUN / "run.json").read_text())["schema"] == contract.RUN_SCHEMA
    for name in ("summary", "summary-repeated"):
        assert schema.schema(name)["properties"]["schema"] == {"const": contract.SUMMARY_SCHEMA, "title": "Schema",
                                                                "type": "integer"}


def test_a_reader_that_names_a_key_the_contract_lacks_is_a_type_error(tmp_path: Path) -> None:
    # Readers get summaries typed (RunFolder.run_summary()), so mypy, which `make lint` runs on lab/, refuses a key
    # the contract does not declare where a reader indexes it, and a value used as what it is not (a .get of an
    # undeclared key is an object, no figure), as it would in lab/ itself.
    reader = tmp_path / "reader.py"
    reader.write_text(
        "from pathlib import Path\n\nfrom lab.runfolder import RunFolder\n\n\n"
        "def capacity(run: Path) -> float | None:\n"
        "    summary = RunFolder(run).run_summary()\n"
        "    found = summary['machines']['tuned'].get('capacity') if summary else None\n"
        "    return found['capacity_rps'] if found else None\n\n\n"
        "def misspelt(run: Path) -> float | None:\n"
        "    summary = RunFolder(run).run_summary()\n"
        "    found = summary['machines']['tuned'].get('capacity') if summary else None\n"
        "    return found['capacity_rsp'] if found else None\n\n\n"
        "def not_a_figure(run: Path) -> float | None:\n"
        "    summary = RunFolder(run).run_summary()\n"
        "    figures = summary['machines']['tuned'] if summary else None\n"
        "    return figures.get('capacty') if figures else None\n")
    found = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports", "silent",
                            str(reader)], cwd=REPO, capture_output=True, text=True)
    assert found.returncode == 1, found.stdout
    assert [line.split(": ", 1)[1] for line in found.stdout.splitlines() if ": error:" in line] == [
        'error: TypedDict "MachineCapacity" has no key "capacity_rsp"  [typeddict-item]',
        'error: Incompatible return value type (got "object", expected "float | None")  [return-value]'], \
        found.stdout
