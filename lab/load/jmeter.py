"""JMeter itself: assembled from Maven Central by jmeter-maven-plugin (jmeter/pom.xml), found, and
the Java that runs it."""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.load.profile import LoadError
from lab.machines.manifest import role_default
from lab.paths import REPO
from lab.progress import run_logged

JMETER_DIR = REPO / "jmeter"
POM = JMETER_DIR / "pom.xml"
PLAN = JMETER_DIR / "camel-tuning-lab.jmx"
TARGET = JMETER_DIR / "target"
PLUGIN_CONFIG = TARGET / "config.json"          # written by the plugin's configure goal
STAMP = TARGET / "lab-assembled.sha256"         # pom.xml hash of the assembled JMeter
BUNDLE = TARGET / "jmeter-engine.tar"           # it, packed for the engines on other hosts (roles/jmeter_engine)
PREPARE_LOG = TARGET / "prepare.log"
LOCK = JMETER_DIR / ".prepare.lock"
MVNW = REPO / "mvnw"
CONFIGURE_GOAL = "jmeter:configure@configuration"




def java_executable() -> str:
    """The Java JMeter runs on: JAVA_HOME's, else the one on PATH; LoadError if none or too old."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if not java:
        raise LoadError("java not found (JMeter needs Java 8 or later; Debian: apt-get install openjdk-17-jre-headless)")
    version = java_version(java)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version)
    if not found:
        raise LoadError(f"cannot tell the Java version of {java}: {version.strip()[:200]}")
    major = int(found.group(1)) if found.group(1) != "1" else int(found.group(2) or 0)
    if major < 8:
        raise LoadError(f"{java} is Java {major}; JMeter 5.6 needs Java 8 or later")
    return java


@functools.cache
def java_version(java: str) -> str:
    """What `java -version` says (asked once per Java: a JVM start each time)."""
    try:
        return subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LoadError(f"{java} -version failed: {error}") from error


def launch(java: str, jar: Path, *args: str) -> list[str]:
    """JMeter's JVM as its bin/jmeter script starts it (the lab's JVM options), with JMeter's arguments."""
    return [java, *jvm_args(), "-jar", str(jar), *args]


@functools.cache
def jvm_args() -> list[str]:
    """Like JMeter's own bin/jmeter script (which sets 1 GB and G1), a little smaller at the start: the same for
    this host's JMeter and the engines on other hosts (the jmeter_engine role's, read when first asked)."""
    return [str(option) for option in role_default("jmeter_engine", "jmeter_engine_java_options")]


def log_levels() -> list[str]:
    """JMeter's -L options for a load run, the same for this host's JMeter and the engines (the jmeter_engine role's)."""
    return [f"-L{level}" for level in role_default("jmeter_engine", "jmeter_engine_log_levels")]


def as_properties(properties: dict[str, str], flag: str = "-J") -> list[str]:
    """JMeter properties as its command line takes them: -Jname=value, or -Gname=value for remote engines."""
    return [f"{flag}{key}={value}" for key, value in properties.items()]


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def jmeter_home() -> Path | None:
    """The assembled JMeter's folder (…/jmeter with bin/ and lib/), if prepare() has run."""
    try:
        configurations = json.loads(PLUGIN_CONFIG.read_text())["configurations"]
        configuration = next(c for c in configurations if c.get("executionID") == "configuration")
        home = Path(configuration["jmeterDirectoryPath"])
        jar = home / "bin" / configuration["runtimeJarName"]
    except (OSError, ValueError, KeyError, StopIteration):
        return None
    return home if jar.is_file() else None


def _runtime_jar(home: Path) -> Path:
    jars = sorted((home / "bin").glob("ApacheJMeter*.jar"))
    if not jars:
        raise LoadError(f"no ApacheJMeter*.jar in {home / 'bin'}: run prepare() again")
    return jars[0]


def _assembled() -> bool:
    try:
        return jmeter_home() is not None and STAMP.read_text().strip() == _pom_hash()
    except OSError:
        return False


@contextmanager
def _prepare_lock() -> Iterator[None]:
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def prepare() -> None:
    """Assemble JMeter from Maven Central with the plugin (idempotent: ~0 s when already done).

    Needs Java and Maven Central (the wrapper downloads Maven 3.9 the first time, then the plugin
    downloads JMeter's jars: ~1.5 min on first run)."""
    java = java_executable()
    if _assembled():
        return
    with _prepare_lock():
        if _assembled():                       # another process did it while we waited
            return
        if not os.access(MVNW, os.X_OK):
            raise LoadError(f"{MVNW} missing or not executable (the repository's Maven wrapper)")
        shutil.rmtree(TARGET, ignore_errors=True)   # the plugin assembles into a new random folder each time
        TARGET.mkdir(parents=True)
        env = dict(os.environ)
        env.setdefault("JAVA_HOME", str(Path(os.path.realpath(java)).parent.parent))
        command = [str(MVNW), "-B", "-ntp", "-f", str(POM), CONFIGURE_GOAL]
        try:
            done = run_logged(command, PREPARE_LOG, "Maven", 1800, cwd=REPO, env=env)
        except subprocess.TimeoutExpired:
            raise LoadError(f"assembling JMeter took over 30 min; see {PREPARE_LOG}") from None
        output = PREPARE_LOG.read_text(errors="replace")
        if done.returncode != 0 or jmeter_home() is None:
            hint = ""
            if re.search(r"could not (transfer|resolve|be resolved)|UnknownHost|Connection (refused|timed out)|"
                         r"Network is unreachable|unable to find valid certification path|Failed to fetch|"
                         r"Cannot access central", output, re.IGNORECASE):
                hint = (" Maven Central (https://repo.maven.apache.org) looks unreachable: JMeter is assembled "
                        "from it (and the Maven wrapper downloads Maven 3.9 from it on first use).")
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise LoadError(f"assembling JMeter failed (`{' '.join(command[1:])}`, exit {done.returncode}).{hint}\n"
                            f"Log: {PREPARE_LOG}\n{tail}")
        STAMP.write_text(_pom_hash() + "\n")



def runtime_jar() -> Path:
    """The assembled JMeter's launcher jar (bin/ApacheJMeter-<version>.jar), assembling JMeter first if needed."""
    prepare()
    home = jmeter_home()
    if home is None:
        raise LoadError("JMeter is not assembled: prepare() failed")
    return _runtime_jar(home)


def bundle() -> Path:
    """The assembled JMeter packed for remote engines (ansible/roles/jmeter_engine): one tar whose top folder is
    jmeter/, the launcher jar as bin/ApacheJMeter.jar (the name the role starts). Packed once per assembly and
    the same bytes each time (sorted, owned by root, the files' own times), so provisioning copies it again
    only when JMeter changed."""
    jar = runtime_jar()
    home = jar.parent.parent
    if BUNDLE.is_file() and BUNDLE.stat().st_mtime >= STAMP.stat().st_mtime:
        return BUNDLE
    partial = BUNDLE.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.GNU_FORMAT) as packed:
        for path in sorted(home.rglob("*")):
            if path.is_symlink() or path.suffix == ".log" or not (path.is_file() or path.is_dir()):
                continue        # a run's log, or anything but a plain file or folder
            name = "jmeter/" + ("bin/ApacheJMeter.jar" if path == jar else path.relative_to(home).as_posix())
            member = packed.gettarinfo(path, name)
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            if member.isfile():
                with path.open("rb") as content:
                    packed.addfile(member, content)
            else:
                packed.addfile(member)
    partial.replace(BUNDLE)
    return BUNDLE


def command_line(args: list[str], properties: dict[str, str]) -> list[str]:
    """The lab's own JMeter as its bin/jmeter script would start it, with properties (-J) and the
    user's arguments: the GUI without arguments, `-n -t PLAN.jmx` for a plan of one's own."""
    return launch(java_executable(), runtime_jar(), *as_properties(properties), *args)
