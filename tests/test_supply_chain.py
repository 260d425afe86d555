"""What the lab downloads is what was pinned: the Maven wrapper checks the distribution's SHA-256
(distributionSha256Sum, taken from Maven Central's published checksum) before using it."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

PROPERTIES = Path(".mvn") / "wrapper" / "maven-wrapper.properties"


def _wrapper_copy(tmp_path: Path, sha256: str | None = None) -> Path:
    copy = tmp_path / "project"
    (copy / PROPERTIES.parent).mkdir(parents=True)
    shutil.copy2(REPO / "mvnw", copy / "mvnw")
    text = (REPO / PROPERTIES).read_text()
    if sha256 is not None:
        text = "\n".join(line if not line.startswith("distributionSha256Sum=") else f"distributionSha256Sum={sha256}"
                         for line in text.splitlines()) + "\n"
    (copy / PROPERTIES).write_text(text)
    return copy


def _mvnw_version(project: Path, home: Path) -> subprocess.CompletedProcess:
    # A fresh MAVEN_USER_HOME: the wrapper downloads the distribution, as on a fresh machine.
    return subprocess.run([str(project / "mvnw"), "--version"], cwd=project, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "MAVEN_USER_HOME": str(home)})


def test_the_maven_wrapper_checks_the_distribution_it_downloads(tmp_path):
    assert "distributionSha256Sum=" in (REPO / PROPERTIES).read_text()
    good = _mvnw_version(_wrapper_copy(tmp_path / "good"), tmp_path / "good-home")
    assert good.returncode == 0 and "Apache Maven 3.9.11" in good.stdout, good.stdout + good.stderr
    bad = _mvnw_version(_wrapper_copy(tmp_path / "bad", "0" * 64), tmp_path / "bad-home")
    assert bad.returncode != 0
    assert "Failed to validate Maven distribution SHA-256" in bad.stdout + bad.stderr, bad.stdout + bad.stderr


def _install_list(*options: str) -> dict[str, list[str]]:
    result = subprocess.run([str(REPO / "tools" / "install-deps"), *options, "--list"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return {key: value.split() for key, value in (line.split(": ", 1) for line in result.stdout.splitlines())}


@pytest.mark.fast
def test_the_users_install_is_not_the_test_suites():
    user, tests = _install_list(), _install_list("--with-tests")
    assert not {"chromium", "wrk"} & set(user["packages"]) and {"chromium", "wrk"} <= set(tests["packages"])
    assert user["requirements"] == ["requirements.txt"]
    assert tests["requirements"] == ["requirements.txt", "requirements-dev.txt", "mock-service/requirements.txt"]
    assert {"openjdk-17-jdk-headless", "supervisor", "pcp"} <= set(user["packages"])    # what running the lab needs


def _fake_tool(folder: Path, name: str, script: str) -> None:
    (folder / name).write_text("#!/bin/sh\n" + script)
    (folder / name).chmod(0o755)


@pytest.mark.fast
def test_install_deps_installs_a_missing_package_and_keeps_apts_messages_but_not_its_noise(tmp_path):
    # A copy of the script in a tree of its own, with apt, dpkg-query and id faked: every package but
    # pcp missing, root, and an apt-get that logs its arguments and says what apt says on a fresh box.
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools" / "install-deps", tmp_path / "tools" / "install-deps")
    (tmp_path / "requirements.txt").write_text("")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    for folder, name, script in [
        (fakes, "dpkg-query", '[ "$3" = pcp ] && printf "install ok installed"; exit 0\n'),
        (fakes, "id", "echo 0\n"),
        (fakes, "apt-get", f'echo "$*" >> {tmp_path}/apt.log\n[ "$1" = install ] || exit 0\n'
                           'echo "debconf: delaying package configuration, since apt-utils is not installed" >&2\n'
                           'echo "W: a warning the user should see" >&2\n'),
        (venv_bin, "python", "exit 0\n"), (venv_bin, "pip", "exit 0\n"),
    ]:
        _fake_tool(folder, name, script)
    result = subprocess.run([str(tmp_path / "tools" / "install-deps")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    installs = [line for line in (tmp_path / "apt.log").read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 1 and "openjdk-17-jdk-headless" in installs[0] and "supervisor" in installs[0]
    assert "W: a warning the user should see" in result.stderr
    assert "apt-utils" not in result.stderr


@pytest.mark.fast
def test_install_deps_stops_when_apt_fails(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools" / "install-deps", tmp_path / "tools" / "install-deps")
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    _fake_tool(fakes, "dpkg-query", "exit 1\n")
    _fake_tool(fakes, "id", "echo 0\n")
    _fake_tool(fakes, "apt-get", '[ "$1" = install ] || exit 0\necho "E: Unable to locate package openjdk" >&2\nexit 100\n')
    result = subprocess.run([str(tmp_path / "tools" / "install-deps")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}"})
    assert result.returncode == 100, result.stderr
    assert "E: Unable to locate package openjdk" in result.stderr
