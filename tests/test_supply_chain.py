"""What the lab downloads is what was pinned: the Maven wrapper checks the distribution's SHA-256
(distributionSha256Sum, taken from Maven Central's published checksum) before using it; every Python
package is locked with its hashes; Ansible is ansible-core plus only the collections the roles use."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from lab.analysis import gcviewer

_spec = importlib.util.spec_from_file_location("install_collections", REPO / "tools" / "install_collections.py")
install_collections = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_collections)

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
    (tmp_path / "requirements-bootstrap.txt").write_text("")
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
        (venv_bin, "python", "exit 0\n"), (venv_bin, "pip", f'echo "pip $*" >> {tmp_path}/pip.log\n'),
        (venv_bin, "uv", f'echo "uv $*" >> {tmp_path}/pip.log\n'),
    ]:
        _fake_tool(folder, name, script)
    result = subprocess.run([str(tmp_path / "tools" / "install-deps")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    # pip installs the installer from its lock, which installs the lab's: each with its hashes checked,
    # and nothing it does not name
    installs = [line for line in (tmp_path / "pip.log").read_text().splitlines() if " install " in line]
    assert installs == [
        f"pip install -q --require-hashes --no-deps --requirement={tmp_path / 'requirements-bootstrap.txt'}",
        f"uv pip install -q --native-tls --python={venv_bin / 'python'} --require-hashes --no-deps --compile-bytecode"
        f" --requirement={tmp_path / 'requirements.txt'}"]
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


LOCKS = [REPO / "requirements.txt", REPO / "requirements-dev.txt", REPO / "mock-service" / "requirements.txt",
         REPO / "requirements-bootstrap.txt"]


def _locked(lock: Path) -> dict[str, tuple[str, int]]:
    """{name: (version, number of hashes)} of a pip-compile lock; fails on an entry without ==."""
    entries: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=\S)", lock.read_text()):
        first = block.split("\\")[0].strip()
        if not first or first.startswith(("#", "-")):
            continue
        name, _, version = first.partition("==")
        assert version, f"{lock.name}: {first!r} is not pinned to one version"
        entries[re.sub(r"[-_.]+", "-", name.lower())] = (version.strip(), block.count("--hash=sha256:"))
    return entries


@pytest.mark.fast
@pytest.mark.parametrize("lock", LOCKS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_python_package_is_pinned_with_its_hashes(lock: Path) -> None:
    locked = _locked(lock)
    assert locked and all(hashes for _, hashes in locked.values()), \
        [name for name, (_, hashes) in locked.items() if not hashes]
    # What the .in file asks for is what the lock holds (the lock was compiled from it, not edited).
    for line in lock.with_suffix(".in").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = (part.strip() for part in line.split("=="))
            assert locked[re.sub(r"[-_.]+", "-", name.lower())][0] == version, f"{lock.name}: {name}"


@pytest.mark.fast
def test_the_test_suites_lock_keeps_the_labs_versions() -> None:
    lab, dev = _locked(LOCKS[0]), _locked(LOCKS[1])
    assert {name: lab[name][0] for name in lab.keys() & dev.keys()} == \
        {name: dev[name][0] for name in lab.keys() & dev.keys()}


@pytest.mark.fast
def test_ansible_core_and_only_the_collections_the_roles_use() -> None:
    wanted = install_collections.wanted()
    # Every collection module a role, playbook or handler names, and every callback the lab asks Ansible for,
    # is from a listed collection, and every listed collection is used.
    used = set()
    for path in (REPO / "ansible").rglob("*.yml"):
        used |= set(re.findall(r"^\s*-?\s*((?!ansible\.builtin)[a-z_]+\.[a-z_]+)\.[a-z_]+:\s*$", path.read_text(), re.M))
    for path in (REPO / "lab").rglob("*.py"):
        callbacks = re.findall(r'"ANSIBLE_STDOUT_CALLBACK": "([a-z_]+\.[a-z_]+)\.[a-z_]+"', path.read_text())
        assert "ansible.builtin" not in callbacks, f"{path}: name the collection a callback lives in"
        used |= set(callbacks)
    assert used == set(wanted), used
    # The venv has ansible-core and those collections, at their versions; not the bundle.
    site = Path(sysconfig.get_paths(vars={"base": str(REPO / ".venv"), "platbase": str(REPO / ".venv")})["purelib"])
    installed = {f"{ns.name}.{c.name}" for ns in (site / "ansible_collections").iterdir() if ns.is_dir()
                 for c in ns.iterdir() if c.is_dir()}
    assert installed == set(wanted)
    for name, version in wanted.items():
        assert install_collections.version_in(site / "ansible_collections" / Path(*name.split("."))) == version
    assert not list(site.glob("ansible-*.dist-info")), "the whole ansible bundle is installed"


def _bundle(tmp_path: Path, files: dict[str, str]) -> Path:
    wheel = tmp_path / "ansible-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def _manifest(version: str) -> str:
    return json.dumps({"collection_info": {"version": version}})


@pytest.mark.fast
def test_a_collection_is_taken_out_of_the_bundle_at_its_pinned_version_and_nothing_else(tmp_path: Path) -> None:
    wheel = _bundle(tmp_path, {"ansible_collections/acme/tools/MANIFEST.json": _manifest("2.0.0"),
                               "ansible_collections/acme/tools/plugins/modules/thing.py": "# a module\n",
                               "ansible_collections/acme/other/MANIFEST.json": _manifest("1.0.0")})
    root = tmp_path / "site" / "ansible_collections"
    (root / "acme" / "tools").mkdir(parents=True)
    (root / "acme" / "tools" / "stale.py").write_text("left from before\n")
    install_collections.extract(wheel, {"acme.tools": "2.0.0"}, root)
    assert (root / "acme" / "tools" / "plugins" / "modules" / "thing.py").read_text() == "# a module\n"
    assert not (root / "acme" / "tools" / "stale.py").exists() and not (root / "acme" / "other").exists()
    with pytest.raises(install_collections.CollectionError, match="holds acme.tools 2.0.0, but .* pins 3.0.0"):
        install_collections.extract(wheel, {"acme.tools": "3.0.0"}, root)
    assert install_collections.version_in(root / "acme" / "tools") == "2.0.0"     # the good one stays
    with pytest.raises(install_collections.CollectionError, match="holds no collection acme.absent"):
        install_collections.extract(wheel, {"acme.absent": "1.0.0"}, root)
    (tmp_path / "evil").mkdir()
    evil = _bundle(tmp_path / "evil", {"ansible_collections/acme/tools/MANIFEST.json": _manifest("2.0.0"),
                                       "ansible_collections/acme/tools/../../../escape.py": "x"})
    with pytest.raises(install_collections.CollectionError, match="refusing the member"):
        install_collections.extract(evil, {"acme.tools": "2.0.0"}, root)
    assert not (tmp_path / "site" / "escape.py").exists()


@pytest.mark.fast
def test_a_collection_pinned_loosely_is_refused(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.yml"
    requirements.write_text("collections:\n  - name: community.general\n    version: '>=11.0.0'\n")
    with pytest.raises(install_collections.CollectionError, match="one exact version"):
        install_collections.wanted(requirements)


def _artifact(repo: Path, group: str, name: str, content: bytes) -> dict[str, bytes]:
    """A jar and its pom in a file:// Maven repository, each with the .sha1 a repository publishes beside it (so
    that only the project's own list can tell a changed jar); what each file holds, by its path in the repository."""
    import hashlib
    folder = repo / group.replace(".", "/") / name / "1.0"
    folder.mkdir(parents=True)
    pom = (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           f"<groupId>{group}</groupId><artifactId>{name}</artifactId><version>1.0</version></project>").encode()
    files = {}
    for suffix, data in ((".pom", pom), (".jar", content)):
        (folder / f"{name}-1.0{suffix}").write_bytes(data)
        (folder / f"{name}-1.0{suffix}.sha1").write_text(hashlib.sha1(data).hexdigest())
        files[f"{group.replace('.', '/')}/{name}/1.0/{name}-1.0{suffix}"] = data
    return files


def test_maven_refuses_an_artifact_that_differs_from_the_projects_list_or_is_not_on_it(tmp_path):
    # The lab's builds (the service, JMeter, GCViewer) run Maven with the project's .mvn/maven.config: each artifact
    # it resolves must match the SHA-512 in the project's list (.mvn/checksums), even when the repository serves a
    # changed jar with a checksum to match it; one not listed fails too. The project's own list (central's) must
    # hold the dependency plugin this test runs, and the artifacts of a stand-in repository get a list of theirs.
    import hashlib
    group = "test.camel_tuning_lab.checksums"
    repo = tmp_path / "repo"
    listed = {**_artifact(repo, group, "good", b"a jar"), **_artifact(repo, group, "tampered", b"a jar, changed")}
    listed[f"{group.replace('.', '/')}/tampered/1.0/tampered-1.0.jar"] = b"a jar, as it was published"
    _artifact(repo, group, "unlisted", b"a jar nobody listed")
    project = _wrapper_copy(tmp_path)
    shutil.copytree(REPO / ".mvn" / "checksums", project / ".mvn" / "checksums")
    shutil.copy2(REPO / ".mvn" / "maven.config", project / ".mvn" / "maven.config")
    (project / ".mvn" / "checksums" / "checksums-stand-in.sha512").write_text(
        "".join(f"{hashlib.sha512(data).hexdigest()}  {path}\n" for path, data in sorted(listed.items())))
    cached = Path.home() / ".m2" / "repository" / group.replace(".", "/")
    goal = gcviewer.MAVEN_COPY_GOAL.rsplit(":", 1)[0] + ":resolve"

    def resolve(artifact: str) -> subprocess.CompletedProcess:
        (project / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>t</groupId><artifactId>t</artifactId><version>1</version>"
            f"<repositories><repository><id>stand-in</id><url>{repo.as_uri()}</url></repository></repositories>"
            f"<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            "<version>1.0</version></dependency></dependencies></project>")
        return subprocess.run([str(project / "mvnw"), "-B", "-ntp", goal], cwd=project,
                              capture_output=True, text=True, timeout=600)
    try:
        good = resolve("good")
        assert good.returncode == 0, good.stdout[-3000:]
        tampered = resolve("tampered")
        assert tampered.returncode != 0, tampered.stdout[-3000:]
        assert "trusted checksum mismatch" in tampered.stdout, tampered.stdout[-3000:]
        again = resolve("tampered")     # now from the local repository, where Maven left it: refused there too
        assert again.returncode != 0 and "trusted checksum mismatch" in again.stdout, again.stdout[-3000:]
        unlisted = resolve("unlisted")
        assert unlisted.returncode != 0, unlisted.stdout[-3000:]
        assert "Missing from" in unlisted.stdout, unlisted.stdout[-3000:]
    finally:
        shutil.rmtree(cached, ignore_errors=True)
