"""JMeter's distributed mode as the lab drives it (lab/load/engines.py): the client's command line, the RMI
keystore, and a real engine (jmeter-server) on loopback loading two mocks over TLS. The engine in the local
backend's load-generator namespace is tested end to end in test_lab_local_e2e.py."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_load import read_results, start_mock

from conftest import REPO, Process, free_port, spawn

sys.path.insert(0, str(REPO))
from lab import load  # noqa: E402
from lab.analysis import loadgen  # noqa: E402
from lab.load import engines as lab_engines  # noqa: E402
from lab.load.jmeter import java_executable, launch, runtime_jar  # noqa: E402
from lab.runfolder import JMeterFolder  # noqa: E402

load_run = sys.modules["lab.load.run"]
TARGETS = [load_run._Target("default", "http", "10.213.1.2", 80, "/svc"),
           load_run._Target("tuned", "http", "10.213.2.2", 80, "/svc")]


def engines_at(*hosts: str, properties: Path = Path("/secret/rmi.properties")) -> lab_engines.Engines:
    return lab_engines.Engines(hosts=hosts, client_host="10.213.3.1", rmi_properties=properties, where="test")


def flags(command: list[str], flag: str) -> dict[str, str]:
    return dict(arg[2:].split("=", 1) for arg in command if arg.startswith(flag))


@pytest.mark.fast
def test_the_client_sends_the_plan_to_its_engines_and_keeps_each_machines_results_here(tmp_path: Path) -> None:
    folder = JMeterFolder(tmp_path)
    command = load_run._jmeter_command("java", Path("ApacheJMeter.jar"), tmp_path / "jmeter.log", 4445, load.QUICK,
                                       TARGETS, "/svc", folder, engines_at("10.213.3.2:1099"))
    plan, client = flags(command, "-G"), flags(command, "-J")
    # What the engines evaluate: the load and where it goes
    assert plan["default.host"] == "10.213.1.2" and plan["tuned.port"] == "80"
    assert plan["default.users"] == plan["tuned.users"] == str(load.QUICK.users)
    assert plan["duration_s"] == str(load.QUICK.duration_s) and "default.results" not in plan
    # What stays on the client: where each machine's samples are written, its shutdown port, its callback
    assert client["default.results"] == str(folder.results("default"))
    assert client["jmeterengine.nongui.port"] == "4445" and "default.host" not in client
    assert command[command.index("-R") + 1] == "10.213.3.2:1099"
    assert command[command.index("-q") + 1] == "/secret/rmi.properties"
    assert "-Djava.rmi.server.hostname=10.213.3.1" in command
    # Without engines the same properties all go to the one JMeter
    alone = load_run._jmeter_command("java", Path("ApacheJMeter.jar"), tmp_path / "jmeter.log", 4445, load.QUICK,
                                     TARGETS, "/svc", folder)
    assert "-R" not in alone and not flags(alone, "-G") and flags(alone, "-J")["default.host"] == "10.213.1.2"


@pytest.mark.fast
def test_each_engine_gets_its_share_of_a_machines_users_or_the_run_is_refused(tmp_path: Path) -> None:
    folder = JMeterFolder(tmp_path)
    two = engines_at("10.0.0.5:1099", "10.0.0.6:1099")
    command = load_run._jmeter_command("java", Path("j.jar"), tmp_path / "j.log", 4445,
                                       load.LoadProfile(users=150), TARGETS, "/svc", folder, two)
    assert flags(command, "-G")["default.users"] == "75"
    assert command[command.index("-R") + 1] == "10.0.0.5:1099,10.0.0.6:1099"
    with pytest.raises(load.LoadError, match="151 users per machine cannot be split evenly over 2 remote engines"):
        load_run._jmeter_command("java", Path("j.jar"), tmp_path / "j.log", 4445, load.LoadProfile(users=151),
                                 TARGETS, "/svc", folder, two)
    with pytest.raises(load.LoadError, match="open model's arrival rates are not split over 2 engines"):
        load_run._jmeter_command("java", Path("j.jar"), tmp_path / "j.log", 4445, load.QUICK_STEPS, TARGETS,
                                 "/svc", folder, two)


def _stores(keytool: str, store: Path, password: str) -> set[str]:
    """A PKCS12 store's entries: alias and kind (PrivateKeyEntry, trustedCertEntry)."""
    listed = subprocess.run([keytool, "-list", "-keystore", str(store), "-storetype", "PKCS12", "-storepass:env", "P"],
                            capture_output=True, text=True, env={**os.environ, "P": password}, check=True).stdout
    return {f"{line.split(',')[0]} {next(f.strip() for f in line.split(',') if 'Entry' in f)}"
            for line in listed.splitlines() if "Entry" in line}      # "rmi, Nov 28, 2026, PrivateKeyEntry,"


def test_the_rmi_keys_are_made_once_each_side_trusts_the_other_only_and_only_root_reads_them(tmp_path: Path) -> None:
    # keytool as it was started: its command line is any local user's to read, so the password is not on it
    seen = tmp_path / "keytool-argv"
    keytool = tmp_path / "keytool"
    keytool.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {seen}\nexec {lab_engines._keytool()} "$@"\n')
    keytool.chmod(0o700)
    properties = lab_engines.rmi_properties(tmp_path / "rmi", keytool=str(keytool))
    settings = dict(line.split("=", 1) for line in properties.read_text().splitlines() if "=" in line)
    password = settings["server.rmi.ssl.keystore.password"]
    argv = seen.read_text().splitlines()
    assert argv.count("-genkeypair") == 2 and argv.count("-importcert") == 2 and password not in seen.read_text()
    assert argv.count("-storepass:env") == 6
    # the stores named without a folder: each side loads them at the names the other's socket factory carries,
    # from its own folder (the client in rmi/, an engine in rmi/engine/ or the role's home)
    assert settings["server.rmi.ssl.disable"] == "false" and settings["server.rmi.ssl.keystore.file"] == "rmi_keystore.p12"
    assert settings["server.rmi.ssl.truststore.file"] == "rmi_truststore.p12"
    assert settings["server.rmi.ssl.truststore.password"] == password and len(password) == 32
    controller, engine = tmp_path / "rmi", lab_engines.engine_folder(properties)
    assert engine == controller / "engine"
    real = lab_engines._keytool()
    # each side its own key, and the other side's certificate only: an engine's key is no client's
    assert _stores(real, controller / "rmi_keystore.p12", password) == {"rmi PrivateKeyEntry"}
    assert _stores(real, controller / "rmi_truststore.p12", password) == {"engines trustedCertEntry"}
    assert _stores(real, engine / "rmi_keystore.p12", password) == {"rmi PrivateKeyEntry"}
    assert _stores(real, engine / "rmi_truststore.p12", password) == {"controller trustedCertEntry"}
    made = {path: path.read_bytes() for folder in (controller, engine) for path in folder.glob("*.p12")}
    assert len(made) == 4 and not list(controller.rglob("*.crt"))
    assert {stat.S_IMODE(path.stat().st_mode) for path in [properties, *made]} == {0o600}
    assert stat.S_IMODE(controller.stat().st_mode) == stat.S_IMODE(engine.stat().st_mode) == 0o700
    written = properties.read_text()
    assert lab_engines.rmi_properties(tmp_path / "rmi") == properties
    assert {path: path.read_bytes() for path in made} == made and properties.read_text() == written
    # an earlier lab's single key pair (no engine folder): both made anew, with a new password
    (engine / "rmi_truststore.p12").unlink()
    assert lab_engines.rmi_properties(tmp_path / "rmi").read_text() != written
    assert all(path.is_file() for path in made)


def start_engine(processes: list[Process], folder: Path, properties: Path) -> str:
    """A real jmeter-server on loopback with the given TLS settings; its address:port."""
    port, object_port = free_port(), free_port()
    jar = runtime_jar()
    command = launch(java_executable(), jar, *lab_engines.engine_arguments("127.0.0.1", properties,
                                                                          folder / "engine.log", port, object_port))
    engine = spawn(processes, "engine", command, folder, cwd=lab_engines.engine_folder(properties))    # its keys
    lab_engines.wait_until_listening("127.0.0.1", port, lambda: engine.popen.poll() is None, 90)
    return f"127.0.0.1:{port}"


def test_a_remote_engine_loads_both_machines_over_tls_and_the_client_keeps_their_results(processes,
                                                                                          tmp_path: Path) -> None:
    ports = {"default": start_mock(processes, tmp_path / "mock-default"),
             "tuned": start_mock(processes, tmp_path / "mock-tuned")}
    properties = lab_engines.rmi_properties(tmp_path / "rmi")
    host = start_engine(processes, tmp_path / "engine", properties)
    engine_pid = processes[-1].popen.pid
    engines = lab_engines.Engines(hosts=(host,), client_host="127.0.0.1", rmi_properties=properties,
                                  where="test engine", pids=(engine_pid,))
    profile = load.LoadProfile(users=2, ramp_s=1, duration_s=10)
    out = tmp_path / "run"
    result = load.run({m: f"http://127.0.0.1:{p}" for m, p in ports.items()}, profile, out, path="/data",
                      engines=engines)
    assert not result.interrupted and result.problems == []
    for machine, port in ports.items():
        _, rows = read_results(result.results[machine])
        assert len(rows) > 50 and all(row["success"] == "true" for row in rows)
        assert {row["URL"] for row in rows} == {f"http://127.0.0.1:{port}/data"}
        # Samples of the engine's threads (JMeter names them after it), this machine's only
        assert {row["threadName"].rsplit(" ", 1)[0] for row in rows} == {f"{host}-{machine}"}
        assert result.dashboards[machine].is_file()
    # The engine's CPU counts as the load generator's, beside the client's
    rows = loadgen.read(out / "loadgen.csv")
    assert engine_pid in {int(row["loadgen_pid"]) for row in rows} and len({row["loadgen_pid"] for row in rows}) == 2
    engine_log = (tmp_path / "engine" / "engine.log").read_text()
    assert "Starting ThreadGroup" in engine_log and "Thread started" not in engine_log


def _properties(path: Path, keystore: tuple[Path, str], truststore: tuple[Path, str]) -> Path:
    """RMI over TLS with these stores (file, password), each by its full path (a stranger runs where neither side's
    folder is)."""
    path.write_text("".join(f"server.rmi.ssl.{key}={value}\n" for key, value in (
        ("disable", "false"), ("keystore.type", "PKCS12"), ("keystore.file", keystore[0]),
        ("keystore.password", keystore[1]), ("keystore.alias", lab_engines.KEY_ALIAS), ("truststore.type", "PKCS12"),
        ("truststore.file", truststore[0]), ("truststore.password", truststore[1]))))
    return path


def _password(properties: Path) -> str:
    return dict(line.split("=", 1) for line in properties.read_text().splitlines() if "=" in line)[
        "server.rmi.ssl.keystore.password"]


def test_an_engine_refuses_any_client_but_the_controller_even_one_with_the_engines_own_key(processes,
                                                                                         tmp_path: Path) -> None:
    # Every load-generator host holds the engines' key: whoever reads it there must not drive the other engines
    # (a plan is code). The stranger's client trusts the engine (the controller's truststore), presents that key.
    port = start_mock(processes, tmp_path / "mock")
    lab_keys = lab_engines.rmi_properties(tmp_path / "rmi")
    host = start_engine(processes, tmp_path / "engine", lab_keys)
    engines_key = lab_engines.engine_folder(lab_keys) / lab_engines.KEYSTORE
    stranger = _properties(tmp_path / "stranger.properties", (engines_key, _password(lab_keys)),
                           (tmp_path / "rmi" / lab_engines.TRUSTSTORE, _password(lab_keys)))
    with pytest.raises(load.LoadError, match="JMeter failed .* before any sample"):
        load.run({"default": f"http://127.0.0.1:{port}"}, load.LoadProfile(users=1, ramp_s=0, duration_s=5),
                 tmp_path / "run", path="/data", engines=lab_engines.Engines(
                     hosts=(host,), client_host="127.0.0.1", where="test", rmi_properties=stranger))
    assert "Starting ThreadGroup" not in (tmp_path / "engine" / "engine.log").read_text()


def test_the_controller_refuses_an_engine_without_the_engines_key(processes, tmp_path: Path) -> None:
    # A stranger's engine that trusts the controller (the engines' truststore) but presents a key of its own: the
    # controller must not send it a plan, nor take samples from it.
    port = start_mock(processes, tmp_path / "mock")
    lab_keys = lab_engines.rmi_properties(tmp_path / "rmi")
    other = lab_engines.rmi_properties(tmp_path / "other")
    stranger = _properties(tmp_path / "stranger-engine.properties",
                           (lab_engines.engine_folder(other) / lab_engines.KEYSTORE, _password(other)),
                           (lab_engines.engine_folder(lab_keys) / lab_engines.TRUSTSTORE, _password(lab_keys)))
    host = start_engine(processes, tmp_path / "engine", stranger)
    with pytest.raises(load.LoadError, match="JMeter failed .* before any sample"):
        load.run({"default": f"http://127.0.0.1:{port}"}, load.LoadProfile(users=1, ramp_s=0, duration_s=5),
                 tmp_path / "run", path="/data", engines=lab_engines.Engines(
                     hosts=(host,), client_host="127.0.0.1", where="test", rmi_properties=lab_keys))
    assert "Starting ThreadGroup" not in (tmp_path / "engine" / "engine.log").read_text()


@pytest.mark.fast
def test_the_loadgen_group_is_read_with_its_child_groups_and_an_inventory_without_one_is_refused(tmp_path) -> None:
    from lab.errors import StepFailed
    from lab.machines import remote_engines
    listing = {"loadgen": {"hosts": ["gen1"], "children": ["rack2"]}, "rack2": {"hosts": ["gen2", "gen1"]},
               "lab_machines": {"hosts": ["default", "tuned"]}}
    assert remote_engines.group_hosts(listing) == ("gen1", "gen2")
    assert remote_engines.group_hosts({"lab_machines": {"hosts": ["default"]}}) == ()
    with pytest.raises(StepFailed, match=f"{tmp_path / 'hosts.yml'} has no loadgen group"), \
            remote_engines.engines(tmp_path / "hosts.yml", (), [], tmp_path / "engine.log", lambda *a: None):
        pytest.fail("no engine without a loadgen group")
    # the engines call back this host's own address toward them
    assert remote_engines.source_address("127.0.0.1") == "127.0.0.1"
    # a failed start says each host's own message (the YAML result format puts it under the fatal line)
    output = ("TASK [jmeter_engine : Report why the engine did not start]\n"
              "fatal: [gen1]: FAILED! =>\n    changed: false\n    msg: 'The JMeter engine on gen1 did not start: x\n"
              "        (run it again)'\n\nPLAY RECAP\n")
    assert remote_engines.failures(output) == ["gen1: The JMeter engine on gen1 did not start: x (run it again)"]
    assert remote_engines.failures("[ERROR]: the inventory is broken\n") == ["[ERROR]: the inventory is broken"]


def test_jmeter_is_packed_for_the_engines_once_and_the_same_bytes_each_time(tmp_path: Path) -> None:
    import tarfile

    from lab.load import jmeter
    bundle = jmeter.bundle()
    made = bundle.read_bytes()
    with tarfile.open(bundle) as packed:
        names = packed.getnames()
        launcher = packed.getmember("jmeter/bin/ApacheJMeter.jar")     # the name the role starts
        assert launcher.size == runtime_jar().stat().st_size and (launcher.uid, launcher.uname) == (0, "root")
    assert all(name.startswith("jmeter/") and not name.endswith(".log") for name in names)
    packed_at = bundle.stat().st_mtime_ns
    assert jmeter.bundle().stat().st_mtime_ns == packed_at             # not packed again
    bundle.unlink()
    assert jmeter.bundle().read_bytes() == made                        # packed again, byte for byte
