"""The Vagrantfile and the vagrant backend's choices, checked with the real Vagrant (no VMs here:
tests/vagrant/ boots them under emulation, see its README)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))
from lab import evidence  # noqa: E402
from lab.machines import choose
from lab.machines.vagrant import VagrantBackend, kvm_usable, vagrant_inventory, vagrant_states  # noqa: E402
from lab.names import MACHINES  # noqa: E402

VAGRANT_ENV_KEYS = ("LAB_VAGRANT_BOX", "LAB_VAGRANT_BOX_VERSION", "LAB_LIBVIRT_DRIVER", "LAB_LIBVIRT_CPU_MODEL", "LAB_LIBVIRT_STORAGE_POOL",
                    "LAB_VAGRANT_MEMORY_MB", "LAB_VAGRANT_LOADGEN")


def vagrant(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in VAGRANT_ENV_KEYS}
    return subprocess.run(["vagrant", *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**clean, **env})


def vagrantfile_settings(**env: str) -> dict:
    """The Vagrantfile's own constants, read by Ruby with Vagrant.configure stubbed out."""
    script = ('require "json"; module Vagrant; def self.configure(*); end; end; load "Vagrantfile"; '
              'puts JSON.dump({box: BOX, box_version: BOX_VERSION, memory: MEMORY_MB, cpus: CPUS, machines: MACHINES, vms: VMS, '
              'inventory: INVENTORY})')
    clean = {k: v for k, v in os.environ.items() if k not in VAGRANT_ENV_KEYS}
    result = subprocess.run(["ruby", "-e", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                            env={**clean, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("env", [{}, {"LAB_LIBVIRT_DRIVER": "qemu", "LAB_LIBVIRT_CPU_MODEL": "qemu64",
                                      "LAB_VAGRANT_BOX": "camel-tuning-lab/debian-12"}, {"LAB_VAGRANT_LOADGEN": "1"}])
def test_vagrant_validates_the_vagrantfile(env):
    result = vagrant("validate", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "validated successfully" in result.stdout


def test_vagrant_validate_catches_a_misspelt_provider_setting(tmp_path):
    # What makes the check above worth having: validate reads the provider blocks, so a typo fails.
    misspelt = (REPO / "Vagrantfile").read_text().replace("lv.cpus = CPUS", "lv.cpu = CPUS")
    assert misspelt != (REPO / "Vagrantfile").read_text()
    (tmp_path / "Vagrantfile").write_text(misspelt)
    result = subprocess.run(["vagrant", "validate"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "cpu" in result.stdout + result.stderr, result.stdout + result.stderr


def test_vagrantfile_machines_are_the_write_ups_and_the_inventorys():
    settings = vagrantfile_settings()
    assert (settings["memory"], settings["cpus"]) == (512, 2)
    assert settings["box"] == "debian/bookworm64"
    assert re.fullmatch(r"12\.\d{8}\.\d+", settings["box_version"]), settings    # one release of the box, not "any"
    inventory = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-inventory"), "-i",
                                str(REPO / "ansible" / "inventories" / "vagrant" / "hosts.yml"), "--list"],
                               capture_output=True, text=True, check=True)
    hostvars = json.loads(inventory.stdout)["_meta"]["hostvars"]
    assert settings["machines"] == {name: hostvars[name]["ansible_host"] for name in MACHINES}
    assert {hostvars[name]["lab_service_manager"] for name in MACHINES} == {"systemd"}


def vagrantfile_config() -> dict:
    """Every setting the Vagrantfile's configure block makes, by its path (`vm.define(tuned).vm.provision(ansible).limit`),
    read by Ruby with a recorder in place of Vagrant's config object."""
    script = """require "json"
class Recorder
  def initialize(path, log) = (@path, @log = path, log)
  def method_missing(name, *args, &block)
    key = [@path, name.to_s.chomp("=")].compact.join(".")
    return @log[key] = args[0] if name.to_s.end_with?("=")
    child = Recorder.new(args.empty? ? key : "#{key}(#{args.join(",")})", @log)
    block&.call(child)
    child
  end
  def respond_to_missing?(*) = true
end
module Vagrant; def self.configure(*) = yield(Recorder.new(nil, $log = {})); end
load "Vagrantfile"
puts JSON.dump($log)"""
    clean = {k: v for k, v in os.environ.items() if k not in VAGRANT_ENV_KEYS}
    result = subprocess.run(["ruby", "-e", script], cwd=REPO, capture_output=True, text=True, timeout=60, env=clean)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_each_vm_gets_a_key_of_its_own_and_the_provisioner_checks_host_keys():
    config = vagrantfile_config()
    assert config["vm.define(tuned).vm.provision(ansible).playbook"] == "ansible/site.yml"    # the recorder reads it
    # Vagrant's well-known key opens a box only until its first boot; then the VM has a key of its own.
    assert config["ssh.insert_key"] is True
    # Vagrant's provisioner turns host-key checking off unless told (its ANSIBLE_HOST_KEY_CHECKING and
    # UserKnownHostsFile=/dev/null would win over the inventory's own settings).
    assert config["vm.define(tuned).vm.provision(ansible).host_key_checking"] is True


def test_the_inventory_reaches_each_vm_with_its_own_key_and_pins_its_host_key(tmp_path):
    # The inventory where it lies in a checkout, beside a .vagrant/ in which `vagrant up` made the default VM's key only.
    inventory = tmp_path / "ansible" / "inventories" / "vagrant" / "hosts.yml"
    inventory.parent.mkdir(parents=True)
    inventory.write_text((REPO / "ansible" / "inventories" / "vagrant" / "hosts.yml").read_text())
    made = tmp_path / ".vagrant" / "machines" / "default" / "libvirt"
    made.mkdir(parents=True)
    (made / "private_key").write_text("key\n")
    result = subprocess.run(
        # localhost too: a controller's play (controller-downloads.yml) runs there with this inventory
        [str(REPO / ".venv" / "bin" / "ansible"), "-i", str(inventory), "all:localhost", "-m", "ansible.builtin.debug",
         "-a", "msg={{ ansible_ssh_private_key_file }}|{{ ansible_ssh_common_args }}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
             "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    assert result.returncode == 0, result.stdout + result.stderr
    seen = {host: answer["msg"] for host, answer in json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"].items()}
    key, args = seen["default"].split("|")
    assert key == str(made / "private_key")
    assert args.split() == ["-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={made / 'known_hosts'}"]
    # A VM not yet up has no key: the path SSH names says where it would be, and nothing falls back to Vagrant's own.
    key, _ = seen["tuned"].split("|")
    assert key == str(tmp_path / ".vagrant" / "machines" / "tuned" / "PROVIDER" / "private_key")
    assert "insecure" not in result.stdout and "StrictHostKeyChecking=no" not in result.stdout
    assert set(seen) == {"default", "tuned", "localhost"}


def test_the_load_generators_vm_is_the_vagrantfiles_third_with_loadgen_set_and_the_inventorys_loadgen(monkeypatch,
                                                                                                     tmp_path):
    monkeypatch.delenv("LAB_VAGRANT_LOADGEN", raising=False)
    plain = vagrantfile_settings()
    assert plain["vms"] == plain["machines"] and not VagrantBackend().has_engines
    settings = vagrantfile_settings(LAB_VAGRANT_LOADGEN="1")
    extra = {name: address for name, address in settings["vms"].items() if name not in MACHINES}
    monkeypatch.setenv("LAB_VAGRANT_LOADGEN", "1")
    backend = VagrantBackend()
    # The lab and the Vagrantfile's provisioner use the same inventory, whose loadgen group is the third VM
    assert backend.inventory == REPO / settings["inventory"]
    assert backend.engine_hosts == tuple(extra) == ("loadgen1",) and backend.has_engines
    assert backend.address("loadgen1") == extra["loadgen1"]
    assert backend.hostvars["loadgen1"]["ansible_user"] == "vagrant"    # the machines' SSH settings reach it too
    assert "a load generator's VM" in backend.emulation_note
    # once Vagrant created it, it stays in the inventory (./start.sh down must destroy it too)
    monkeypatch.delenv("LAB_VAGRANT_LOADGEN")
    created = tmp_path / ".vagrant" / "machines" / "loadgen1" / "libvirt"
    assert vagrant_inventory(tmp_path / ".vagrant") == REPO / "ansible" / "inventories" / "vagrant" / "hosts.yml"
    created.mkdir(parents=True)
    (created / "id").write_text("3f2a")
    assert vagrant_inventory(tmp_path / ".vagrant") == backend.inventory


def test_the_box_and_the_memory_come_from_the_environment(monkeypatch):
    settings = vagrantfile_settings(LAB_VAGRANT_BOX="my/box", LAB_VAGRANT_MEMORY_MB="1024")
    assert (settings["box"], settings["memory"], settings["cpus"]) == ("my/box", 1024, 2)
    assert settings["box_version"] == ""        # the default box's version is not another box's
    assert vagrantfile_settings(LAB_VAGRANT_BOX_VERSION="12.20240905.1")["box_version"] == "12.20240905.1"
    # What the report says of the machines follows the same variable, with the same default.
    monkeypatch.setenv("LAB_VAGRANT_MEMORY_MB", "1024")
    assert "two VMs with 1024 MiB and 2 vCPUs" in VagrantBackend().emulation_note
    monkeypatch.delenv("LAB_VAGRANT_MEMORY_MB")
    assert f"two VMs with {vagrantfile_settings()['memory']} MiB" in VagrantBackend().emulation_note
    # Software emulation is said where the figures are shown: the terminal's headline and the report's banner.
    monkeypatch.setenv("LAB_LIBVIRT_DRIVER", "kvm")
    assert "emulation" not in VagrantBackend().emulation_note and not VagrantBackend().emulated
    monkeypatch.setenv("LAB_LIBVIRT_DRIVER", "qemu")
    note = VagrantBackend().emulation_note
    assert "under QEMU's software emulation (no KVM)" in note and VagrantBackend().emulated
    from lab.analysis.headline import headline
    assert f"  Backend: {note}." in headline({"run": {"backend": "vagrant", "backend_note": note}, "machines": {}})


@pytest.mark.fast
def test_vagrant_status_lines_become_states():
    text = ("1700000000,default,metadata,provider,libvirt\n"
            "1700000000,default,state,running\n"
            "1700000000,tuned,state,not_created\n"
            "1700000000,,ui,info,Current machine states:\\n\\ndefault  running (libvirt)\n")
    assert vagrant_states(text) == {"default": "running", "tuned": "not_created"}


@pytest.mark.fast
def test_one_vagrant_status_answers_for_both_vms(monkeypatch, tmp_path):
    # The backend insists on a vagrant on PATH; its commands are stood in for below, so this one never runs.
    (tmp_path / "vagrant").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "vagrant").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    calls = []
    def fake_vagrant(*args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "1,default,state,running\n1,tuned,state,poweroff\n", "")
    vagrant_backend = VagrantBackend()
    monkeypatch.setattr(vagrant_backend, "_vagrant", fake_vagrant)
    assert [vagrant_backend.exists(name) for name in ("default", "tuned")] == [True, False]
    assert calls == [("status", "--machine-readable")]
    vagrant_backend._states_read_at -= 11    # a later question reads the states again
    vagrant_backend.exists("tuned")
    assert len(calls) == 2


@pytest.mark.fast
def test_both_vms_asked_at_once_wait_for_one_vagrant_status(monkeypatch, tmp_path):
    # lab/status.py observes both machines at once: the second question waits for the first one's `vagrant status`
    # (two at once, the VM test once had a running VM taken for absent).
    import threading
    import time
    (tmp_path / "vagrant").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "vagrant").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    running, calls = [], []

    def fake_vagrant(*args, **kwargs):
        running.append(args)
        calls.append(len(running))      # how many ran at once
        time.sleep(0.3)
        running.pop()
        return subprocess.CompletedProcess(args, 0, "1,default,state,running\n1,tuned,state,running\n", "")
    vagrant_backend = VagrantBackend()
    monkeypatch.setattr(vagrant_backend, "_vagrant", fake_vagrant)
    answers: dict[str, bool] = {}
    threads = [threading.Thread(target=lambda n=name: answers.update({n: vagrant_backend.exists(n)}))
               for name in ("default", "tuned")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {"default": True, "tuned": True} and calls == [1]


def _cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nflags\t\t: fpu sse2 {flags}\n")
    return path


@pytest.mark.fast
def test_kvm_is_usable_only_with_the_device_and_hardware_virtualisation(tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    assert kvm_usable(_cpuinfo(tmp_path, "vmx"), device)
    assert kvm_usable(_cpuinfo(tmp_path, "svm"), device)
    assert not kvm_usable(_cpuinfo(tmp_path, "hypervisor"), device)     # /dev/kvm that only emulates
    assert not kvm_usable(_cpuinfo(tmp_path, "vmx"), tmp_path / "absent")


@pytest.mark.parametrize("tools, plugins, kvm, expected", [
    (set(), "", True, "local"),
    ({"vagrant", "VBoxManage"}, "", False, "vagrant"),
    ({"vagrant"}, "vagrant-libvirt (0.11.2, system)", True, "vagrant"),
    ({"vagrant"}, "vagrant-libvirt (0.11.2, system)", False, "local"),
    ({"vagrant"}, "No plugins installed.", True, "local"),
])
@pytest.mark.fast
def test_vagrant_is_the_default_only_with_an_accelerated_provider(tools, plugins, kvm, expected):
    name, why = choose.default_backend(which=lambda tool: tool in tools and f"/usr/bin/{tool}",
                                         kvm=lambda: kvm, plugins=lambda: plugins)
    assert name == expected and why


def test_start_sh_says_which_backend_it_chose_and_why(host, capsys):
    # With a host record of its own (this host's real one may name another checkout's lab): none, then one up.
    from lab import cli
    expected, why = choose.default_backend()
    assert cli.main(["status", "--json"], host=host) == 0
    assert f"Backend: {expected} ({why}; --backend chooses another)" in capsys.readouterr().err
    host.claim("local", None)           # a lab is up: its backend is used, whatever this host has
    assert cli.main(["status", "--json"], host=host) == 0
    assert "Backend: local (the lab that is up uses it; --backend chooses another)" in capsys.readouterr().err


@pytest.mark.fast
def test_systemds_journal_tells_which_service_died_and_how():
    journal = (
        "1763790000.000001 lab-tuned systemd[1]: Started camel-app.service - camel-tuning-lab Camel service.\n"
        "1763790100.500000 lab-tuned systemd[1]: camel-app.service: A process of this unit has been killed by the OOM killer.\n"
        "1763790100.600000 lab-tuned systemd[1]: camel-app.service: Main process exited, code=killed, status=9/KILL\n"
        "1763790100.700000 lab-tuned systemd[1]: camel-app.service: Failed with result 'oom-kill'.\n"
        "1763790200.000000 lab-tuned systemd[1]: pmlogger.service: Main process exited, code=exited, status=1/FAILURE\n"
        "1763799999.000000 lab-tuned systemd[1]: httpd.service: Main process exited, code=exited, status=1/FAILURE\n")
    exits = evidence.systemd_exits(journal, since=1763790000, until=1763790300)
    assert exits == [
        {"process": "camel-app", "at": 1763790100.5, "reason": "A process of this unit has been killed by the OOM killer"},
        {"process": "camel-app", "at": 1763790100.6, "reason": "Main process exited, code=killed, status=9/KILL"}]
