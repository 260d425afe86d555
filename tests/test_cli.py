"""./start.sh's command line refuses bad input before anything starts, naming what the user typed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from lab import lifecycle
from lab.errors import StepFailed
from lab.hostlab import HostLab

pytestmark = pytest.mark.fast


def _host(tmp_path: Path) -> HostLab:
    """The host's lab record and lock in tmp_path: the tests touch no real lab."""
    return HostLab(owner_file=tmp_path / "owner.json", busy_file=tmp_path / "busy.lock", checkout=tmp_path,
                   legacy_file=tmp_path / "legacy.json")


@pytest.mark.parametrize("args, message", [
    (["run", "--users", "-5"], "--users -5: must be 1 or more"),
    (["run", "--duration", "0"], "--duration 0: must be 1 or more"),
    (["run", "--quick", "--ramp", "200"], "--ramp 200 is longer than --duration 90: the ramp-up is part of the run"),
    (["--think", "-1"], "--think -1: must be 0 or more"),
    (["tune", "--budget", "2 fortnights"], "--budget 2 fortnights: a duration such as 90m, 2h or 5400s"),
    (["tune", "--trials", "3", "--budget", "1h"], "--trials 3 and --budget 1h: one or the other"),
    (["tune", "--trials", "0"], "--trials 0: must be 1 or more"),
    (["tune", "--groups", "jvm,gc"], "--groups jvm,gc: gc: the groups are backend_client, tomcat, httpd, "
                                     "proxy, jvm, logging, stack (knob-space.yml)"),
    (["tune", "--resume", "nosuch", "--trials", "2"], "--resume continues a tune as it was planned: --trials cannot "
                                                      "change it"),
    (["tune", "--max-rate", "50"], "--max-rate 50 is below --start-rate 100"),
    (["tune", "--validate", "-1"], "--validate -1: must be 0 (none) or more"),
    (["tune", "--resume", "nosuch", "--validate", "1"], "--resume continues a tune as it was planned: --validate "
                                                        "cannot change it"),
    (["tune", "--quick", "--schedule", "parallel"], "--schedule parallel is the validation's, and this tune validates "
                                                    "nothing (--quick): give --validate N too"),
    (["tune", "--validate", "0", "--schedule", "sequential"], "--schedule sequential is the validation's, and this "
                                                              "tune validates nothing (--validate 0): give --validate "
                                                              "N too"),
])
def test_a_bad_load_option_is_named_before_anything_starts(args: list[str], message: str, tmp_path: Path) -> None:
    # --backend ssh with an inventory of no hosts: had the options passed, it would fail there. The command line
    # as start.sh runs it once in the venv: neither the install step nor this host's lab (another checkout's,
    # which start.sh names first) is part of what this checks.
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {}\n")
    result = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "lab", *args, "--backend", "ssh",
                             "--inventory", str(inventory)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"start.sh: {message}", result.stderr
    assert "==> " not in result.stderr          # nothing began


def test_up_refuses_a_misspelled_knob_before_anything_changes(tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "ansible"
    shutil.copytree(REPO / "ansible", copy)
    tuned = copy / "host_vars" / "tuned.yml"
    tuned.write_text(tuned.read_text().replace("camel_app_logback_async: true", "camel_app_logback_asynch: true"))
    monkeypatch.setattr(lifecycle, "ANSIBLE_DIR", copy)
    with pytest.raises(StepFailed, match=r"camel_app_logback_asynch is not a variable of any role "
                                         r"\(did you mean camel_app_logback_async\?\)"):
        lifecycle.check_knobs()


def test_the_shipped_knobs_pass() -> None:
    assert lifecycle.knobs.unknown_knobs(lifecycle.ANSIBLE_DIR) == []
    lifecycle.check_knobs()                     # and the guard `up` runs raises nothing on them


def test_a_run_records_its_version_without_git(tmp_path: Path, monkeypatch) -> None:
    from lab import provenance
    assert provenance.lab_version(REPO) not in ("", None) and not provenance.lab_version(REPO).startswith("unknown")
    assert provenance.lab_version(tmp_path).startswith("unknown (")        # a folder that is no checkout
    monkeypatch.setenv("PATH", str(tmp_path))                               # a host without git
    assert provenance.lab_version(REPO) == "unknown (git is not installed)"


def test_the_java_found_through_java_home_alone_is_recorded(tmp_path: Path, monkeypatch) -> None:
    from lab import provenance
    java_home = Path(shutil.which("java")).resolve().parent.parent
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    assert "version" in provenance.java_version()
    monkeypatch.delenv("JAVA_HOME")
    assert provenance.environment()["java"] is None                         # no java at all: recorded, no crash


def test_a_run_the_disk_cannot_hold_is_refused_before_anything_starts(tmp_path: Path, monkeypatch, capsys) -> None:
    from lab import cli, runfolder
    host = _host(tmp_path)
    monkeypatch.setattr(runfolder.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - 50 * 2**20,
                                                                                              50 * 2**20))
    assert cli.main(["run", "--backend", "local"], host=host) == 1
    err = capsys.readouterr().err
    assert "has 50 MiB free; this run needs about 604 MiB" in err and "--duration" in err, err
    assert "==>" not in err
    runfolder.check_free_space(40 * 2**20)          # what fits is not refused


def test_up_can_provision_one_machine_only(tmp_path: Path, monkeypatch) -> None:
    from lab import cli
    host = _host(tmp_path)
    calls = []
    monkeypatch.setattr(lifecycle, "up", lambda backend, inventory, host, only=None, setup=None, strict=False:
                        calls.append((only, setup, strict)))
    # The swap check reads this host's lab state (a lab may be up here): its own test is in test_profiles.
    from lab.machines.local.backend import LocalBackend
    monkeypatch.setattr(LocalBackend, "check_memory", lambda self, model: None)
    assert cli.main(["up", "--backend", "local", "--only", "tuned"], host=host) == 0
    assert cli.main(["up", "--backend", "local", "--memory", "vm", "--swap", "64", "--strict"], host=host) == 0
    assert calls == [("tuned", lifecycle.MachineSetup(), False),
                     (None, lifecycle.MachineSetup(memory="vm", swap_mib=64), True)]


def test_jmeter_after_an_option_is_refused_not_taken_for_another_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from lab import cli
    host = _host(tmp_path)
    monkeypatch.setattr(lifecycle, "down", lambda *args: pytest.fail("down must not run"))
    assert cli.main(["--backend", "local", "jmeter"], host=host) == 2
    assert "put jmeter first: ./start.sh jmeter [JMETER ARGUMENTS]" in capsys.readouterr().err


class _UpBackend:
    """What lifecycle.up asks of a backend, creating nothing."""
    emulation_note = "a note"

    def __init__(self, name: str, inventory: Path, engine_hosts: tuple[str, ...] = ()) -> None:
        self.name, self.inventory, self.engine_hosts = name, inventory, engine_hosts
        self.has_engines = bool(engine_hosts)

    def up(self) -> None:
        pass


def test_up_only_provisions_and_checks_that_machine(tmp_path: Path, monkeypatch, capsys) -> None:
    from lab import provision, status
    host = _host(tmp_path)
    limits, observed = [], []
    monkeypatch.setattr(lifecycle, "check_knobs", lambda: None)
    monkeypatch.setattr(provision, "build_service", lambda: None)
    monkeypatch.setattr(provision, "run_playbook", lambda inventory, logs, limit=None: limits.append(limit) or
                        provision.PlaybookResult(0, {"tuned": 0}, {}, tmp_path / "ansible.log"))
    monkeypatch.setattr(status, "observe", lambda backend, name: observed.append(name) or
                        {"url": f"http://{name}", "http_status": 200})
    lifecycle.up(_UpBackend("local", tmp_path / "hosts.yml"), None, host, only="tuned")
    assert (limits, observed) == (["tuned"], ["tuned"])
    assert f"changed: tuned 0; full log: {tmp_path / 'ansible.log'}" in capsys.readouterr().err


def test_up_packs_jmeter_and_its_key_for_the_load_generators_before_provisioning(tmp_path: Path, monkeypatch) -> None:
    # The jmeter_engine role copies both from this host: a loadgen group's provisioning needs them first.
    from lab import provision, status
    done = []
    monkeypatch.setattr(lifecycle, "check_knobs", lambda: None)
    monkeypatch.setattr(provision, "build_service", lambda: None)
    monkeypatch.setattr(lifecycle.jmeter, "bundle", lambda: done.append("bundle") or REPO / "bundle.tar")
    monkeypatch.setattr(lifecycle.engines, "rmi_properties", lambda: done.append("key") or REPO / "rmi" / "p")
    monkeypatch.setattr(provision, "run_playbook", lambda inventory, logs, limit=None: done.append("playbook") or
                        provision.PlaybookResult(0, {}, {}, tmp_path / "ansible.log"))
    monkeypatch.setattr(status, "observe", lambda backend, name: {"url": f"http://{name}", "http_status": 200})
    lifecycle.up(_UpBackend("ssh", tmp_path / "hosts.yml", engine_hosts=("gen1",)), None, _host(tmp_path))
    assert done == ["bundle", "key", "playbook"]
    # the local backend's own engine needs neither before provisioning
    done.clear()
    lifecycle.up(_UpBackend("local", tmp_path / "hosts.yml"), None, _host(tmp_path))
    assert done == ["playbook"]


def test_up_builds_the_service_on_both_stacks_and_rebuilds_only_the_jar_a_newer_source_makes_stale(
        tmp_path: Path, monkeypatch) -> None:
    # A machine switched to the modern stack by a later `up --knobs` needs its jar: a fresh clone must build it too.
    import os

    from lab import provision
    assert {build.stack for build in provision.BUILDS} == {"classic", "modern"}
    assert {build.pom.relative_to(REPO).as_posix() for build in provision.BUILDS} == {"app/pom.xml",
                                                                                       "app/modern/pom.xml"}
    shared, classic, modern = tmp_path / "main", tmp_path / "classic", tmp_path / "modern"
    for folder in (shared, classic, modern):
        (folder / "x").mkdir(parents=True)
        (folder / "x" / "A.java").write_text("class A {}")
    builds = (provision.Build("classic", REPO / "app" / "pom.xml", tmp_path / "classic.jar", (shared, classic)),
              provision.Build("modern", REPO / "app" / "modern" / "pom.xml", tmp_path / "modern.jar", (shared, modern)))
    ran = []

    def maven(command, log, what, timeout_s, cwd):
        pom = command[command.index("-f") + 1]
        ran.append(pom)
        next(build for build in builds if build.pom == REPO / pom).jar.write_bytes(b"jar")
        return subprocess.CompletedProcess(command, 0)
    monkeypatch.setattr(provision, "LOGS", tmp_path / "logs")
    monkeypatch.setattr(provision, "run_logged", maven)
    provision.build_service(builds)
    assert ran == ["app/pom.xml", "app/modern/pom.xml"]
    provision.build_service(builds)                       # both up to date: nothing built
    assert len(ran) == 2
    later = builds[1].jar.stat().st_mtime + 10
    os.utime(modern / "x" / "A.java", (later, later))      # a modern-only source edited
    provision.build_service(builds)
    assert ran[2:] == ["app/modern/pom.xml"]


def test_a_failed_build_names_its_stack_and_its_log(tmp_path: Path, monkeypatch) -> None:
    from lab import provision
    build = provision.Build("modern", REPO / "app" / "modern" / "pom.xml", tmp_path / "none.jar", (tmp_path,))
    monkeypatch.setattr(provision, "LOGS", tmp_path / "logs")

    def maven(command, log, what, timeout_s, cwd):
        log.write_text("[ERROR] COMPILATION ERROR\n")
        return subprocess.CompletedProcess(command, 1)
    monkeypatch.setattr(provision, "run_logged", maven)
    with pytest.raises(StepFailed, match=r"building the modern stack's service failed \(./mvnw -f "
                                         r"app/modern/pom.xml package\).*build-service-modern.log\n"
                                         r"\[ERROR\] COMPILATION ERROR"):
        provision.build_service((build,))


@pytest.mark.parametrize("command", [[], ["up"], ["run"], ["capacity"], ["ablate"], ["tune"], ["compare"], ["status"], ["down"]])
def test_every_commands_help_prints(command: list[str], capsys) -> None:
    # argparse formats help texts with %: one unescaped % (an SLO's "0.1%") crashed `capacity --help`.
    from lab import cli
    with pytest.raises(SystemExit) as ended:
        cli.main([*command, "--help"])
    assert ended.value.code == 0
    assert "usage: ./start.sh" in capsys.readouterr().out


@pytest.mark.parametrize("module", ["lab.analysis", "lab.report"])
def test_a_tool_given_no_run_folder_says_so_without_a_traceback(module: str, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", module, str(tmp_path / "nope")], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"{tmp_path / 'nope'}: no such run folder (runs are under" in result.stderr


def test_without_a_venv_a_command_installs_what_the_lab_needs_first(tmp_path: Path) -> None:
    # A tree without .venv whose install-deps makes one: `status` (which installs nothing once the venv is
    # there) must install first, then run in it, not stop at a traceback.
    venv = tmp_path / ".venv"
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "install-deps").write_text(
        f"#!/bin/sh\nmkdir -p {venv}/bin\nprintf '#!/bin/sh\\necho ran: \"$@\"\\n' > {venv}/bin/python\n"
        f"chmod +x {venv}/bin/python\necho installed\n")
    (tmp_path / "tools" / "install-deps").chmod(0o755)
    result = _bootstrap(tmp_path, venv, "status")
    assert result.returncode == 0, result.stderr
    # install-deps speaks through the step (stderr), so the step's heartbeat knows when it is silent
    assert "Installing what the lab needs" in result.stderr and "\ninstalled\n" in result.stderr
    assert result.stdout.strip().endswith("ran: -m lab status")
    # another command changing the lab holds the host: no second install beside it (apt and pip would race)
    venv.joinpath("bin", "python").unlink()
    with _host(tmp_path).busy("./start.sh run"):
        refused = _bootstrap(tmp_path, venv, "up")
    assert refused.returncode == 1 and "installed" not in refused.stderr, refused.stderr
    assert "start.sh: another ./start.sh is changing this host's lab (`./start.sh run`" in refused.stderr


def _bootstrap(tmp_path: Path, venv: Path, *argv: str) -> subprocess.CompletedProcess:
    """bootstrap.enter_venv(argv) in a tree of tmp_path, with a host record of its own there."""
    code = ("import sys; from pathlib import Path; from lab import bootstrap, hostlab; home = Path(sys.argv[1]); "
            f"bootstrap.VENV = Path({str(venv)!r}); bootstrap.REPO = home; "
            "bootstrap.HostLab = lambda: hostlab.HostLab(owner_file=home / 'owner.json', busy_file=home / 'busy.lock', "
            "checkout=home, legacy_file=home / 'legacy.json'); "
            f"bootstrap.enter_venv({list(argv)!r})")
    return subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
