"""tools/tiers.py: `make test` tier by tier, and the report that ends the CI log."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.fast


@pytest.fixture
def tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("tiers", REPO / "tools" / "tiers.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "tiers", module)     # its dataclasses look their module up there
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path / "ci")
    monkeypatch.setattr(module, "JUNIT", tmp_path / "ci" / "junit")
    monkeypatch.setattr(module, "SUREFIRE", tmp_path / "surefire")
    monkeypatch.setattr(module, "VM_LOG", tmp_path / "vm" / "run.log")
    monkeypatch.setattr(module, "HOST_RECORD", tmp_path / "host" / "tiers-last.json")
    return module


def test_the_tiers_run_in_order_stop_at_the_first_failure_and_still_report(tiers, tmp_path, capsys):
    ran = tmp_path / "ran"
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)),
            tiers.Tier("fast", 1, (f"echo fast >> {ran}; sleep 1.2; exit 3",)),
            tiers.Tier("vm", 100, (f"echo vm >> {ran}",)))
    assert tiers.run(plan, make=("sh", "-c")) == 3
    assert ran.read_text().split() == ["build", "fast"]
    recorded = json.loads((tmp_path / "ci" / "tiers.json").read_text())
    assert [(t["name"], t["status"]) for t in recorded] == [("build", 0), ("fast", 3), ("vm", None)]
    out = capsys.readouterr().out
    assert "  build " in out and "of   100 s" in out
    assert "  fast " in out and "OVER by" in out and "FAILED" in out
    assert "  vm                 NOT RUN: an earlier tier failed" in out
    assert json.loads((tmp_path / "host" / "tiers-last.json").read_text()).keys() == {"build"}    # passed tiers only


def test_the_report_lists_the_slowest_tests_from_every_junit_file_and_the_vm_tests_steps(tiers, tmp_path, capsys):
    junit = tmp_path / "ci" / "junit"
    junit.mkdir(parents=True)
    cases = "".join(f'<testcase classname="tests.test_x" name="t{n}" time="{n}.5"/>' for n in range(30))
    (junit / "integration.xml").write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    (tmp_path / "surefire").mkdir()
    (tmp_path / "surefire" / "TEST-RouteTest.xml").write_text(
        '<testsuite name="RouteTest"><testcase classname="RouteTest" name="slowest" time="99.0"/></testsuite>')
    (junit / "broken.xml").write_text("<testsuite")          # cut short: skipped, not fatal
    (tmp_path / "vm").mkdir()
    (tmp_path / "vm" / "run.log").write_text("run: [0s] build or reuse the box\nnoise\nrun: [12s] vagrant up\n"
                                             "run: [912s] all checks passed\n")
    tiers.report()
    out = capsys.readouterr().out.splitlines()
    slowest = [line for line in out if line.startswith("  ") and " s  " in line and "::" in line]
    assert len(slowest) == 25
    assert slowest[0].split() == ["99.0", "s", "RouteTest::slowest"]
    assert slowest[1].split() == ["29.5", "s", "tests.test_x::t29"] and slowest[-1].split()[2] == "tests.test_x::t6"
    assert "      12 s  build or reuse the box" in out and "     900 s  vagrant up" in out


def test_every_tiers_targets_are_the_makefiles(tiers):
    # make -n names a target the Makefile lacks ("No rule to make target") without running any recipe.
    for tier in (*tiers.TIERS, *tiers.BACKGROUND):
        dry = subprocess.run(["make", "-n", "--no-print-directory", *tier.targets], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
        assert dry.returncode == 0, (tier.name, dry.stderr)
    names = [tier.name for tier in tiers.TIERS]
    assert all(names.index(job.after) < names.index(job.before) for job in tiers.BACKGROUND)


def test_background_work_runs_beside_the_tiers_between_and_the_tier_that_needs_it_waits(tiers, tmp_path, capsys):
    ran = tmp_path / "ran"
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)), tiers.Tier("fast", 100, (f"echo fast >> {ran}",)),
            tiers.Tier("vm", 100, (f"echo vm >> {ran}",)))
    box = tiers.Background("the box", (f"sleep 1.5; echo box >> {ran}",), after="build", before="vm", log="box.log")
    assert tiers.run(plan, make=("sh", "-c"), background=(box,)) == 0
    # the fast tier ran while the box was still building; the VM tier only once it was built
    assert ran.read_text().split() == ["build", "fast", "box", "vm"]
    out = capsys.readouterr().out
    assert "tiers: waiting for the box (started " in out
    assert re.search(r"^  beside them: the box: [12] s in the background, passed \(log: .*box\.log\)$", out, re.M)
    # its time is its own, not how long the tier that needed it came after it
    quick = tiers.Background("the box", ("true",), after="build", before="vm", log="box.log")
    slow_fast = (plan[0], tiers.Tier("fast", 100, ("sleep 2.5",)), plan[2])
    assert tiers.run(slow_fast, make=("sh", "-c"), background=(quick,)) == 0
    out = capsys.readouterr().out
    assert "beside them: the box: 0 s in the background, passed" in out and "waiting for" not in out
    # a background job that fails is said; the tier that needed it still runs (the VM test builds its box itself)
    failing = tiers.Background("the box", ("echo broken; exit 4",), after="build", before="vm", log="box.log")
    assert tiers.run(plan, make=("sh", "-c"), background=(failing,)) == 0 and ran.read_text().split()[-1] == "vm"
    assert "beside them: the box: 0 s in the background, exit 4" in capsys.readouterr().out
    assert (tmp_path / "ci" / "box.log").read_text() == "broken\n"


def test_background_work_is_stopped_when_the_tier_it_was_for_will_not_run(tiers, tmp_path, capsys):
    ran = tmp_path / "ran"
    box = tiers.Background("the box", (f"sleep 30; echo box >> {ran}",), after="build", before="vm", log="box.log")
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)), tiers.Tier("fast", 100, ("exit 2",)),
            tiers.Tier("vm", 100, (f"echo vm >> {ran}",)))
    began = time.monotonic()
    assert tiers.run(plan, make=("sh", "-c"), background=(box,)) == 2
    assert time.monotonic() - began < 10 and ran.read_text().split() == ["build"]
    assert "beside them: the box: 0 s in the background, stopped unfinished" in capsys.readouterr().out
    # not started at all when the tier it follows fails
    plan = (tiers.Tier("build", 100, ("exit 5",)), *plan[1:])
    assert tiers.run(plan, make=("sh", "-c"), background=(box,)) == 5
    assert json.loads((tmp_path / "ci" / "background.json").read_text()) == []


def test_under_cis_limit_a_tier_that_took_longer_here_than_is_left_is_not_started_and_said_so(tiers, tmp_path, capsys):
    ran = tmp_path / "ran"
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "tiers-last.json").write_text(json.dumps({"build": 1, "vm": 5000}))
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)), tiers.Tier("vm", 100, (f"echo vm >> {ran}",)))
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=4000) == 0
    assert ran.read_text().split() == ["build"]
    out = capsys.readouterr().out
    assert "tiers: vm: NOT RUN: it took 5000 s on this host last time, and 4000 s were left" in out
    assert out.rstrip().splitlines()[-2].startswith("  vm                 NOT RUN: it took 5000 s")
    # without a deadline (not CI) or with room for it, it runs
    assert tiers.run(plan, make=("sh", "-c")) == 0 and ran.read_text().split() == ["build", "build", "vm"]
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=6000) == 0 and ran.read_text().split()[-1] == "vm"


def test_under_cis_limit_a_tier_this_host_never_ran_is_judged_by_its_measured_time(tiers, tmp_path, capsys):
    # a CI host's first run has no record: a tier known to take longer than is left is not started either
    ran = tmp_path / "ran"
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)),
            tiers.Tier("vm", 100, (f"echo vm >> {ran}",), measured_s=2700))
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=2000) == 0
    assert ran.read_text().split() == ["build"]
    assert re.search(r"tiers: vm: NOT RUN: it takes about 2700 s \(measured on this project's machine; no record on "
                     r"this host\), and (1999|2000) s were left", capsys.readouterr().out)
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=3000) == 0 and ran.read_text().split()[-1] == "vm"
    # the host's own record, once there is one, is what counts
    (tmp_path / "host" / "tiers-last.json").write_text(json.dumps({"vm": 100}))
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=2000) == 0 and ran.read_text().split()[-1] == "vm"


def test_under_cis_limit_a_tier_that_runs_past_what_is_left_is_stopped_cleans_up_and_is_said(tiers, tmp_path, capsys,
                                                                                              monkeypatch):
    # known to take 1 s here, it takes 60: stopped at the deadline, its own cleanup (the VM test's trap) given time
    ran = tmp_path / "ran"
    monkeypatch.setattr(tiers, "STOP_GRACE_S", 1)
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "tiers-last.json").write_text(json.dumps({"vm": 1}))
    slow = f"trap 'echo cleaned >> {ran}; exit 143' TERM; echo vm >> {ran}; sleep 60 & wait"
    plan = (tiers.Tier("build", 100, (f"echo build >> {ran}",)), tiers.Tier("vm", 100, (slow,)))
    began = time.monotonic()
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=4) == 0      # CI goes on: nothing failed, one tier stopped
    assert time.monotonic() - began < 10
    assert ran.read_text().split() == ["build", "vm", "cleaned"]
    out = capsys.readouterr().out
    assert re.search(r"tiers: vm: STOPPED: stopped after [23] s, at what was left of CI's 5400 s; run it alone", out)
    assert re.search(r"^  vm +STOPPED: stopped after", out, re.M)
    # remembered as at least that long: with as little left next time, it is not started
    assert json.loads((tmp_path / "host" / "tiers-last.json").read_text())["vm"] >= 2
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=2) == 0 and ran.read_text().split()[-1] == "build"
    # a tier that ignores SIGTERM is killed after the grace
    stubborn = tiers.Tier("vm", 100, (f"trap '' TERM; echo stubborn >> {ran}; sleep 60",))
    (tmp_path / "host" / "tiers-last.json").write_text(json.dumps({"vm": 1}))
    began = time.monotonic()
    assert tiers.run((stubborn,), make=("sh", "-c"), deadline_s=3) == 0 and time.monotonic() - began < 10


def test_at_a_terminal_a_tier_stays_in_its_callers_process_group_so_ctrl_c_reaches_it(tiers, tmp_path):
    group = tmp_path / "group"
    plan = (tiers.Tier("build", 100, (f"ps -o pgid= -p $$ > {group}",)),)
    assert tiers.run(plan, make=("sh", "-c")) == 0
    assert int(group.read_text()) == os.getpgrp()
    assert tiers.run(plan, make=("sh", "-c"), deadline_s=600) == 0      # under CI's limit: a group of its own
    assert int(group.read_text()) != os.getpgrp()
