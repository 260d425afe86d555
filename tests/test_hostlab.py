"""One lab per host: the checkout that brought the lab up owns it, others refuse before anything starts,
and commands that change the machines run one at a time."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))
from lab import (
    cli,  # noqa: E402
    hostlab,  # noqa: E402
)
from lab.errors import LabError  # noqa: E402
from lab.hostlab import HostLab, NotOurs, inventory_fingerprint  # noqa: E402

pytestmark = pytest.mark.fast


def _host(tmp_path: Path, checkout: Path) -> HostLab:
    checkout.mkdir(parents=True, exist_ok=True)
    return HostLab(owner_file=tmp_path / "state" / "owner.json", busy_file=tmp_path / "busy.lock",
                   checkout=checkout, legacy_file=checkout / ".cache" / "backend.json")


def test_up_claims_the_host_and_down_releases_it(tmp_path):
    mine = _host(tmp_path, tmp_path / "mine")
    assert mine.owner() is None
    mine.check("up", "local")
    mine.claim("local", None)
    owner = mine.ours()
    assert owner is not None and (owner.checkout, owner.backend) == (tmp_path / "mine", "local")
    for command in ("status", "run", "down", "up"):
        mine.check(command, "local")                # this checkout's own lab: all allowed
    mine.release("local")
    assert mine.owner() is None
    assert not (tmp_path / "state").exists()        # nothing of the lab left on the host


def test_an_inventory_edited_since_up_is_refused_until_up_takes_the_edit(tmp_path):
    # Every later command runs Ansible as root with the inventory up was given: an edit to it (or to the host_vars/
    # and group_vars/ Ansible reads beside it) would run as root without the user having asked for it.
    mine = _host(tmp_path, tmp_path / "mine")
    inventory = tmp_path / "ssh" / "hosts.yml"
    (inventory.parent / "host_vars").mkdir(parents=True)
    inventory.write_text("lab_machines: {hosts: {default: {ansible_host: 192.0.2.1}, tuned: {ansible_host: 192.0.2.2}}}\n")
    knobs = inventory.parent / "host_vars" / "tuned.yml"
    knobs.write_text("httpd_mpm: worker\n")
    mine.claim("ssh", inventory)
    assert mine.owner().inventory_sha256 == inventory_fingerprint(inventory)
    for command in ("status", "run", "capacity", "down", "up"):
        mine.check_inventory(command, inventory)
    with pytest.raises(NotOurs, match=rf"provisioned with the inventory {inventory}, not {tmp_path / 'other.yml'}"):
        mine.check_inventory("run", tmp_path / "other.yml")
    knobs.write_text("httpd_mpm: worker\nansible_become_exe: sh -c 'id > /tmp/pwned'\n")
    for command in ("status", "run", "capacity", "down"):
        with pytest.raises(LabError, match=rf"^{inventory} \(or the group_vars/ or host_vars/ beside it\) was edited "
                                           rf"since up .*`./start.sh up --inventory {inventory}` provisions the "
                                           rf"machines with it, then ./start.sh {command}$"):
            mine.check_inventory(command, inventory)
    (inventory.parent / "group_vars").mkdir()
    (inventory.parent / "group_vars" / "all.yml").write_text("{}\n")
    mine.check_inventory("up", inventory)          # up takes the edit on purpose
    mine.claim("ssh", inventory)
    mine.check_inventory("run", inventory)
    inventory.unlink()
    with pytest.raises(LabError, match=rf"the lab's inventory {inventory} cannot be read \(No such file"):
        mine.check_inventory("run", inventory)
    mine.check_inventory("run", None)              # another backend's command: no inventory to check
    mine.release("ssh")
    mine.check_inventory("run", tmp_path / "other.yml")    # no lab is up


def test_another_checkout_is_refused_and_told_where_the_lab_is(tmp_path):
    _host(tmp_path, tmp_path / "mine").claim("local", None)
    other = _host(tmp_path, tmp_path / "other")
    for command in ("status", "run", "down", "up"):
        with pytest.raises(NotOurs, match=rf"another checkout \(local backend, up since .*{tmp_path / 'mine'}"):
            other.check(command, "local")
    assert other.ours() is None


def test_a_second_backend_is_refused_while_a_lab_is_up(tmp_path):
    mine = _host(tmp_path, tmp_path / "mine")
    mine.claim("local", None)
    with pytest.raises(NotOurs, match=r"`up --backend vagrant` waits until `./start.sh down --backend local`"):
        mine.check("up", "vagrant")
    mine.release("vagrant")                         # down of another backend leaves the local lab up
    assert mine.ours() is not None


def test_a_lab_whose_checkout_was_deleted_can_be_taken_down_from_here(tmp_path):
    gone = _host(tmp_path, tmp_path / "gone")
    gone.claim("local", None)
    gone.checkout.rmdir()
    here = _host(tmp_path, tmp_path / "here")
    here.check("down", "local")
    here.check("up", "local")
    with pytest.raises(NotOurs, match="no longer exists: `./start.sh down` here removes it"):
        here.check("run", "local")


def test_up_beside_a_deleted_checkouts_lab_of_another_backend_is_refused(tmp_path):
    gone = _host(tmp_path, tmp_path / "gone")
    gone.claim("vagrant", None)
    gone.checkout.rmdir()
    here = _host(tmp_path, tmp_path / "here")
    with pytest.raises(NotOurs, match=r"`up --backend local` waits until `./start.sh down --backend vagrant`"):
        here.check("up", "local")
    here.check("down", "vagrant")


def test_a_user_without_root_keeps_their_lab_in_their_own_state(tmp_path, monkeypatch):
    monkeypatch.setattr(hostlab.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    host = HostLab()
    assert (host.owner_file, host.busy_file) == (tmp_path / "state" / "camel-tuning-lab" / "owner.json",
                                                 tmp_path / "state" / "camel-tuning-lab" / "busy.lock")


def test_a_backend_remembered_by_an_earlier_version_is_adopted(tmp_path):
    mine = _host(tmp_path, tmp_path / "mine")
    mine.legacy_file.parent.mkdir(parents=True)
    mine.legacy_file.write_text(json.dumps({"backend": "ssh", "inventory": "/srv/hosts.yml"}))
    owner = mine.ours()
    assert owner is not None and (owner.backend, owner.inventory) == ("ssh", Path("/srv/hosts.yml"))
    assert not mine.legacy_file.exists()


def test_an_unreadable_owner_record_is_named(tmp_path):
    mine = _host(tmp_path, tmp_path / "mine")
    mine.owner_file.parent.mkdir(parents=True)
    mine.owner_file.write_text("{not json")
    with pytest.raises(LabError, match=rf"{mine.owner_file} is unreadable"):
        mine.owner()


def test_a_second_command_waits_for_the_first(tmp_path):
    mine = _host(tmp_path, tmp_path / "mine")
    holder = ("import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
              "f.write('`./start.sh run` in /elsewhere, pid 1\\n'); f.flush(); print('held', flush=True); "
              "time.sleep(30)")
    with subprocess.Popen([sys.executable, "-c", holder, str(mine.busy_file)], stdout=subprocess.PIPE,
                          text=True) as process:
        try:
            assert process.stdout.readline().strip() == "held"
            with pytest.raises(NotOurs, match=r"another ./start.sh is changing this host's lab "
                                              r"\(`./start.sh run` in /elsewhere, pid 1\)"), mine.busy("./start.sh down"):
                pass
        finally:
            process.kill()
    with mine.busy("./start.sh down"):          # free again once its holder has gone, however it ended
        assert "./start.sh down" in mine.busy_file.read_text()


def test_start_sh_refuses_another_checkouts_lab_before_anything_starts(tmp_path, capsys):
    other = _host(tmp_path, tmp_path / "other")
    other.claim("local", None)
    mine = _host(tmp_path, tmp_path / "mine")
    for argv in (["status"], ["down"], ["run", "--quick"], ["up"], []):
        assert cli.main(argv, host=mine) == 1
        err = capsys.readouterr().err
        assert "start.sh: the lab on this host belongs to another checkout" in err, err
        assert "==>" not in err                    # no step began
    assert other.owner().checkout == tmp_path / "other"


def test_a_relative_inventory_is_the_users_not_the_repositorys(tmp_path, monkeypatch):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    monkeypatch.setenv("LAB_CALLER_DIR", str(tmp_path))
    assert cli._inventory("hosts.yml") == tmp_path / "hosts.yml"
    # A path that exists in the repository but not where the user stands is not theirs.
    typed = "ansible/inventories/local/hosts.yml"
    assert (REPO / typed).is_file()
    result = subprocess.run([str(REPO / "start.sh"), "status", "--backend", "ssh", "--inventory", typed],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"{typed}: no such inventory file ({tmp_path / typed})" in result.stderr, result.stderr


def test_a_folder_inventory_is_fingerprinted_and_each_later_playbook_run_refuses_an_edit_or_no_fingerprint(tmp_path):
    # A folder inventory (its sources, host_vars/ and group_vars/ inside) is checked like a file; a long command (an
    # ablation, a tune) checks it again before each playbook run, hours after its own check; a record that holds no
    # fingerprint (an earlier version's) cannot tell an edit from what up provisioned.
    mine = _host(tmp_path, tmp_path / "mine")
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("lab_machines: {hosts: {default: {}, tuned: {}}}\n")
    mine.claim("ssh", inventory)
    assert mine.owner().inventory_sha256 == inventory_fingerprint(inventory)
    mine.check_inventory("run", inventory)
    mine.check_inventory_unchanged(inventory)
    (inventory / "host_vars" / "tuned.yml").write_text("ansible_become_exe: /tmp/anything\n")
    with pytest.raises(LabError, match=rf"^{inventory} \(or the group_vars/ or host_vars/ beside it\) was edited since "
                                       r"up .*`./start.sh up --inventory .*` provisions the machines with it$"):
        mine.check_inventory_unchanged(inventory)
    mine.check_inventory_unchanged(tmp_path / "other")     # not the lab's inventory: nothing to compare
    mine.check_inventory_unchanged(None)
    record = json.loads(mine.owner_file.read_text())
    mine.owner_file.write_text(json.dumps({**record, "inventory_sha256": None}))
    for check in (lambda: mine.check_inventory("run", inventory), lambda: mine.check_inventory_unchanged(inventory)):
        with pytest.raises(LabError, match=rf"recorded no fingerprint of its inventory {inventory} .*`./start.sh up "
                                           rf"--inventory {inventory}`"):
            check()
