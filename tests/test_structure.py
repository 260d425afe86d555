"""The lab's structure holds: a stored real run gives the figures it gave before the restructuring,
wiring values live in the manifest only, modules stay small and no helper is defined twice."""
from __future__ import annotations

import ast
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.fast

LAB = REPO / "lab"
# A 15-second run of both machines on the local backend (2 users each, 50 ms think time), as
# `./start.sh run` collected it: results, PCP archives, GC logs, logs, events, run/status/knobs.
STORED_RUN = REPO / "tests" / "fixtures" / "run-local-tiny"
# Its summary (GC logs parsed by the regex; the run folder's own path written RUN): as the code before
# the restructuring computed it, then regenerated when a definition changed on purpose (JMeter's
# percentiles, the detected steady state, the verdict), each time with its diff read: by
# `.venv/bin/python -m tools.stored_runs summaries`, with the other stored runs (tests/test_stored_runs.py).
STORED_SUMMARY = REPO / "tests" / "fixtures" / "run-local-tiny.summary.json"
# Values the roles set and the manifest carries: never written again in lab/.
WIRING = [r"\b8081\b", r"\b44321\b", r"\b9090\b", r"/svc/camel/mock", r"\bcamellab\b"]
MANIFEST_READER = LAB / "machines" / "manifest.py"
# The run folder's file names: written as string literals in runfolder.py only.
RUN_FOLDER_FILES = ["run.json", "status.json", "knobs.json", "summary.json", "series.json", "results.csv",
                    "jmeter.log", "jmeter.out", "events.json", "dashboard.log", "dashboard.out", "dashboard-tmp"]
RUN_FOLDER_LAYOUT = LAB / "runfolder.py"


@pytest.fixture()
def stored_run(tmp_path: Path) -> Path:
    copy = tmp_path / STORED_RUN.name
    shutil.copytree(STORED_RUN, copy)
    return copy


def _without_provenance(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key not in ("generated_at", "generator")}


def test_the_stored_run_gives_the_same_summary(stored_run: Path) -> None:
    from lab.analysis.summary import summarize
    expected = json.loads(STORED_SUMMARY.read_text())
    # Paths inside the run folder are stored as RUN/…: the copy lies elsewhere.
    got = json.loads(json.dumps(summarize(stored_run, write=False, use_gcviewer=False), default=str)
                     .replace(str(stored_run), "RUN"))
    assert _without_provenance(got) == _without_provenance(expected)
    # The figures are real: both machines loaded, archives and GC logs read.
    for machine in ("default", "tuned"):
        entry = got["machines"][machine]
        assert entry["load"]["all"]["samples"] > 200
        assert entry["resources"]["proc_pss_max_bytes"] > 0
        assert entry["gc"]["pause_count"] >= 1


def test_a_corrupt_results_row_is_left_out_and_said(stored_run: Path) -> None:
    # A corrupt digit in a timestamp made the per-second series span centuries: a MemoryError.
    from lab.analysis.summary import summarize
    results = stored_run / "jmeter" / "default" / "results.csv"
    before = summarize(stored_run, write=False, use_gcviewer=False)["machines"]["default"]["load"]
    good = results.read_text().splitlines()[1].split(",")
    a_year_early = str(int(good[0]) - 365 * 86_400_000)       # plausible on its own: outside this run
    broken = [",".join(["99999999999999999", *good[1:]]), ",".join([good[0], "999999999999", *good[2:]]),
              ",".join([a_year_early, *good[1:]]), ",".join(["１２３", *good[1:]])]
    results.write_text(results.read_text() + "\n".join(broken) + "\n")
    summary = summarize(stored_run, write=False, use_gcviewer=False)
    after = summary["machines"]["default"]["load"]
    assert (after["skipped_rows"], after["samples"], after["throughput_rps"]) == \
        (before["skipped_rows"] + 4, before["samples"], before["throughput_rps"])
    assert "default: 4 rows of results.csv could not be read (broken, or a time no run could have) and were left " \
           "out of every figure." in summary["what_happened"]


def test_the_stored_run_renders_with_every_section(stored_run: Path) -> None:
    from lab import report
    html = report.render(stored_run).read_text()
    for section in ("header", "what-happened", "comparison", "knobs", "observed", "charts", "links"):
        assert f'id="{section}"' in html, section
    assert html.count("data:image/png;base64,") >= 10
    assert html.count("share this host") == 1, "the local backend's caveat, said once"
    assert "<script" not in html and "http://" not in html.split("<body>", 1)[1].split("id=\"observed\"")[0]


def _python_files() -> list[Path]:
    return sorted(path for path in LAB.rglob("*.py") if "__pycache__" not in path.parts)


def test_wiring_values_live_in_the_manifest_only() -> None:
    found = []
    for path in _python_files():
        if path == MANIFEST_READER:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for pattern in WIRING:
                if re.search(pattern, line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "wiring values outside the manifest:\n" + "\n".join(found)


def _string_literals(path: Path) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _layout_literals(path: Path) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line}: {value!r}" for line, value in _string_literals(path)
            if any(re.search(rf"(^|[/{{]){re.escape(name)}$", value) for name in RUN_FOLDER_FILES)]


def test_the_run_folder_layout_lives_in_runfolder_only() -> None:
    found = [hit for path in _python_files() if path != RUN_FOLDER_LAYOUT for hit in _layout_literals(path)]
    assert not found, "run folder paths outside lab/runfolder.py:\n" + "\n".join(found)
    assert _layout_literals(RUN_FOLDER_LAYOUT), "the check sees the layout where it does live"


def test_the_wiring_check_would_see_a_literal(tmp_path: Path) -> None:
    line = 'URL = "http://127.0.0.1:8081/actuator/info"'
    assert any(re.search(pattern, line) for pattern in WIRING)


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in _python_files() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function's code as an AST dump, its docstring left out."""
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) \
        and isinstance(getattr(node.body[0], "value", None), ast.Constant) else node.body
    return "\n".join(ast.dump(statement) for statement in body)


def test_no_helper_is_defined_twice() -> None:
    """Two functions with the same code (whatever their names) are one helper written twice."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                code = _body(node)
                if len(code) > 300:         # a one-liner may legitimately recur
                    where[code].append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    twice = [places for places in where.values() if len(places) > 1]
    assert not twice, twice


def test_the_twice_check_would_see_a_copy() -> None:
    source = "def a(x):\n    y = [i * 2 for i in range(x) if i % 3]\n    return sum(y) / max(1, len(y)) + x ** 2 - 17\n"
    first, second = (ast.parse(text).body[0] for text in (source, source.replace("def a", "def b")))
    assert _body(first) == _body(second) and len(_body(first)) > 300


def test_a_run_ends_with_a_headline_from_its_summary() -> None:
    from lab.analysis.headline import headline
    summary = json.loads(STORED_SUMMARY.read_text())
    # 15 s of load is too short to settle: whole-run figures, no ratio, and the verdict says why
    lines = headline(summary)
    default, tuned = (summary["machines"][m]["load"] for m in ("default", "tuned"))
    assert lines[0] == "Result (parallel, 2 users per machine, 0:15 of load; whole run: no steady state):"
    assert lines[1].split() == ["default", f"{default['all']['throughput_rps']:.1f}", "req/s", "0", "errors", "(0.00%)",
                                "p95", f"{default['all']['latency_ms']['p95']:.0f}", "ms"]
    assert lines[2].split()[:2] == ["tuned", f"{tuned['all']['throughput_rps']:.1f}"]
    assert lines[3] == "  No ratio: default and tuned did not reach a steady state."
    assert lines[4].startswith("  Verdict: not settled. default never reached a steady state (only 12 s of load")
    # settled: the steady figures and their ratio
    for load in (default, tuned):
        load["window"]["settled"] = True
    lines = headline(summary)
    assert lines[0].endswith("; steady state):")
    assert lines[3] == f"  tuned/default throughput: {tuned['throughput_rps'] / default['throughput_rps']:.2f}x"
    interrupted = {**summary, "run": {**summary["run"], "ended": {"how": "interrupted", "during": "the load",
                                                                  "error": "JMeter was killed by SIGKILL"}}}
    assert "  The run was interrupted during the load: JMeter was killed by SIGKILL; the figures cover what it " \
           "measured." in headline(interrupted)


def test_with_errors_the_headline_compares_what_was_answered_well() -> None:
    # A machine answering 503 fast while its JVM restarts looks busier than one that serves: not here.
    from lab.analysis.headline import headline
    summary = json.loads(STORED_SUMMARY.read_text())
    for machine in ("default", "tuned"):
        summary["machines"][machine]["load"]["window"]["settled"] = True
    default = summary["machines"]["default"]["load"]
    default.update(throughput_rps=600.0, good_throughput_rps=150.0, error_rate=0.75, errors=27000)
    summary["machines"]["tuned"]["load"].update(throughput_rps=300.0, good_throughput_rps=300.0, error_rate=0.0,
                                                errors=0)
    assert "  tuned/default requests answered without error, per second: 2.00x (300.0 req/s vs 150.0 req/s)" \
        in headline(summary)


@pytest.mark.parametrize("name, content, problem", [
    ("machines/default/events.json", {"process_exits": "boom", "oom_kills": "x", "peak_memory_bytes": [1]},
     "default: events: machines/default/events.json: oom_kills, peak_memory_bytes, process_exits not as the lab "
     "writes them (left out)"),
    ("machines/default/events.json", {"process_exits": ["not an exit"], "oom_kills": 0},
     "process_exits not as the lab writes them (left out)"),
    ("status.json", {"machines": ["default"]}, "status: status.json's machines is a list, not a mapping (left out)"),
    ("status.json", {"machines": {"default": {"observed": "G1"}}},
     "status: status.json's machines.default is not as the lab writes it (left out)"),
])
def test_an_input_of_an_unexpected_shape_is_left_out_and_said_not_a_traceback(stored_run: Path, name, content,
                                                                              problem) -> None:
    from lab.analysis.summary import summarize
    (stored_run / name).write_text(json.dumps(content))
    summary = summarize(stored_run, write=False, use_gcviewer=False)
    assert any(problem in p for p in summary["problems"]), summary["problems"]
    assert summary["machines"]["default"]["load"]["samples"] > 0          # the rest is still summarised


def test_every_module_and_test_file_is_named_in_its_folders_readme() -> None:
    # A newcomer reads a folder's README to find a file: one it does not name is one they do not find.
    for folder, files in ((LAB, [p for p in LAB.rglob("*.py") if p.name != "__init__.py"]),
                          (REPO / "tests", sorted((REPO / "tests").glob("test_*.py")))):
        readme = (folder / "README.md").read_text()
        unnamed = sorted(str(p.relative_to(folder)) for p in files if f"{p.name}`" not in readme
                         and f"{p.name} " not in readme and f"{p.name})" not in readme)
        assert unnamed == [], f"{folder / 'README.md'} does not name {unnamed}"


def test_few_imports_run_back_up_the_layers_of_lab() -> None:
    # Shared names and formatters stand at the bottom (lab/names.py, lab/numbers.py), each command's own analysis
    # in its package: an import that runs back up ties the layers into a loop, and what it drags in with it (the
    # bootstrap needing numpy, a results reader pulling the analysis into the live load).
    from tools import layers
    rooms, found = layers.imports()
    up, guessed = layers.back_up(rooms, set(found))
    assert not guessed and len(up) <= 4, [found[pair].where for pair in sorted(up)]
    assert {"names.py", "numbers.py"} <= {room for room, layer in layers.layers(rooms, set(found)).items() if layer == 1}
    # a loop is found and its import named: two rooms that import each other
    assert layers.back_up({"a.py", "b/"}, {("a.py", "b/"), ("b/", "a.py")})[0] in ({("a.py", "b/")}, {("b/", "a.py")})
