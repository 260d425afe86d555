"""`make check` is hermetic: a fast test sees only the programs `make check` installs."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from hermetic import hidden_path, packages_only_make_test_installs, programs_only_make_test_installs

pytestmark = pytest.mark.fast


def test_the_vm_tests_packages_are_the_ones_make_check_does_not_install():
    only_make_test = packages_only_make_test_installs()
    assert {"vagrant", "vagrant-libvirt", "qemu-system-x86", "libvirt-clients", "debootstrap"} <= only_make_test
    assert not only_make_test & {"apache2-bin", "openjdk-17-jdk-headless", "pcp", "chromium"}


def test_a_fast_test_finds_no_program_only_make_test_installs():
    # Empty where none of those packages is installed: then there is nothing to hide, and nothing to find.
    found = {name: shutil.which(name) for name in programs_only_make_test_installs()}
    assert not {name: where for name, where in found.items() if where}
    assert shutil.which("java") and shutil.which("sh")     # what make check installs, and the base system, stay


def test_the_hidden_path_keeps_every_other_program_and_the_first_of_two(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, names in ((first, ("tool", "vm-only")), (second, ("tool", "other"))):
        folder.mkdir()
        for name in names:
            program = folder / name
            program.write_text(f"#!/bin/sh\necho {folder.name}\n")
            program.chmod(0o755)
    (first / "data.txt").write_text("not a program")
    path = hidden_path(os.pathsep.join([str(first), str(second)]), {"vm-only"}, tmp_path / "shadow")
    assert shutil.which("vm-only", path=path) is None
    assert shutil.which("data.txt", path=path) is None
    assert subprocess.run(["tool"], env={"PATH": path}, capture_output=True, text=True).stdout == "first\n"
    assert subprocess.run(["other"], env={"PATH": path}, capture_output=True, text=True).stdout == "second\n"


def test_a_fast_test_that_calls_a_hidden_program_fails(tmp_path):
    # A fast test file of its own, run by pytest with this conftest: the program it calls is one make check lacks.
    programs = sorted(programs_only_make_test_installs())
    if not programs:
        pytest.skip("none of the packages only `make test` installs is on this host: nothing is hidden")
    probe = tmp_path / "test_probe.py"
    probe.write_text("import shutil, pytest\n\n@pytest.mark.fast\n"
                     f"def test_probe():\n    assert shutil.which({programs[0]!r})\n")
    # -p conftest: the tests' own conftest, as a plugin, from outside tests/ (where pytest would not look for it).
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", str(probe)],
                            capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": os.path.dirname(__file__)})
    assert result.returncode == 1 and "1 failed" in result.stdout, result.stdout[-2000:]
