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
