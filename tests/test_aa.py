"""A/A runs (lab/aa.py): the tuned machine gets the default one's knobs for the run and its own back however the
run ends; the host remembers it meanwhile, and an A/B run refuses until tuned is restored. The playbook itself is
stood in for here (an A/A run on real machines is the end-to-end test's)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_experiment import FakeBackend, _run_json, steps  # noqa: F401  (the fixture)

from conftest import REPO
from lab import aa, experiment, knobs, load, provision
from lab.errors import LabError, StepFailed
from lab.provision import PlaybookResult

pytestmark = pytest.mark.fast


@pytest.fixture()
def playbooks(monkeypatch, tmp_path) -> SimpleNamespace:
    """Each machine a playbook run provisioned, with the knobs file it was given (runs); how many runs (calls);
    fail=True makes the next ones fail."""
    seen = SimpleNamespace(runs=[], calls=0, fail=False, knobs_only=[])

    def run_playbook(inventory, log_dir, limit=None, given=None, knobs_only=False):
        seen.calls += 1
        seen.knobs_only.append(knobs_only)
        seen.runs.extend((machine, (given or {}).get(machine)) for machine in limit.split(","))
        return PlaybookResult(2 if seen.fail else 0, {machine: 1 for machine in limit.split(",")},
                              {machine: 1 for machine in limit.split(",")} if seen.fail else {}, tmp_path / "ansible.log")
    monkeypatch.setattr(provision, "run_playbook", run_playbook)
    return seen


def test_tuned_has_defaults_knobs_inside_and_its_own_after_even_when_interrupted(host, playbooks):
    with pytest.raises(KeyboardInterrupt), aa.tuned_as_default(FakeBackend(), host) as mode:
        assert playbooks.runs == [("tuned", aa.AS_DEFAULT)] and host.aa_pending()
        assert mode == {"mode": "aa", "tuned_knobs": "ansible/host_vars/default.yml"}
        raise KeyboardInterrupt
    assert playbooks.runs == [("tuned", aa.AS_DEFAULT), ("tuned", None)] and not host.aa_pending()
    # a provisioning that fails leaves the host saying tuned may not have its own knobs, and how to restore them
    playbooks.fail = True
    with pytest.raises(StepFailed, match=r"\./start\.sh up --only tuned gives the tuned machine its own knobs back"), \
            aa.tuned_as_default(FakeBackend(), host):
        pass
    assert host.aa_pending()
    with pytest.raises(StepFailed, match="the tuned machine still carries other knobs than its own from an A/A run or an"):
        aa.refuse_if_pending(host)


def test_ctrl_c_while_tuned_takes_defaults_knobs_still_gives_its_own_back(host, playbooks, monkeypatch):
    real = provision.run_playbook

    def interrupted_first(inventory, log_dir, limit=None, given=None, knobs_only=False):
        real(inventory, log_dir, limit, given, knobs_only)
        if given:
            raise KeyboardInterrupt
        return PlaybookResult(0, {}, {}, log_dir)
    monkeypatch.setattr(provision, "run_playbook", interrupted_first)
    with pytest.raises(KeyboardInterrupt), aa.tuned_as_default(FakeBackend(), host):
        pytest.fail("the block never runs when the first provisioning was interrupted")
    assert playbooks.runs == [("tuned", aa.AS_DEFAULT), ("tuned", None)] and not host.aa_pending()


def test_an_a_a_run_says_so_in_every_record_and_a_b_refuses_meanwhile(steps, host, playbooks,  # noqa: F811
                                                                          monkeypatch):
    modes = []
    monkeypatch.setattr(experiment, "_knobs", lambda backend, mode: modes.append(mode) or {})
    assert experiment.run(FakeBackend(), load.QUICK, "parallel", repeat=2, host=host, a_a=True) == 0
    top = _run_json(steps)
    assert top["mode"] == "aa" and top["tuned_knobs"] == "ansible/host_vars/default.yml"
    assert json.loads((steps["run"] / "trials" / "1" / "run.json").read_text())["mode"] == "aa"
    assert not host.aa_pending() and playbooks.runs == [("tuned", aa.AS_DEFAULT), ("tuned", None)]
    assert [m["mode"] for m in modes] == ["aa"]             # knobs.json shows tuned with default's knobs
    host.aa_begin()
    with pytest.raises(StepFailed, match="./start.sh up --only tuned restores them"):
        experiment.run(FakeBackend(), load.QUICK, "parallel", host=host)


def test_the_knobs_of_an_a_a_run_show_tuned_with_defaults():
    inventory = REPO / "ansible" / "inventories" / "local" / "hosts.yml"
    machines = knobs.rendered(inventory, REPO / "ansible", ["default", "tuned"], knobs.KNOB_PREFIXES,
                              extra_vars={"tuned": aa.AS_DEFAULT})
    assert machines["tuned"]["httpd_mpm"] == machines["default"]["httpd_mpm"] == "prefork"
    assert machines["tuned"]["camel_app_java_options"] == machines["default"]["camel_app_java_options"]


def test_an_ablation_gives_both_machines_other_knobs_and_the_host_names_each_until_it_has_its_own_back(
        host, playbooks, tmp_path):
    knobs_a, knobs_b = tmp_path / "a.yml", tmp_path / "b.yml"
    with aa.machines_with(FakeBackend(), host) as give:
        give({"tuned": knobs_a}, "configuration a")
        assert host.aa_machines() == ["tuned"] and aa.restore_command(host.aa_machines()) == aa.RESTORE
        give({"default": knobs_b}, "configuration b")
        assert host.aa_machines() == ["default", "tuned"]
        assert aa.restore_command(host.aa_machines()) == "./start.sh up"
    assert playbooks.runs == [("tuned", knobs_a), ("default", knobs_b), ("default", None), ("tuned", None)]
    assert playbooks.calls == 3 and not host.aa_pending()      # both restored in one run
    # a restore that fails leaves both named, and how to restore them
    with pytest.raises(StepFailed, match=r"\./start\.sh up gives the machines their own knobs back"), \
            aa.machines_with(FakeBackend(), host) as give:
        give({"default": knobs_b}, "configuration b")
        give({"tuned": knobs_a}, "configuration a")
        playbooks.fail = True
    with pytest.raises(StepFailed, match=r"the default and tuned machines still carry other knobs than their own "
                                         r"from an A/A run or an ablation .*: \./start\.sh up restores them"):
        aa.refuse_if_pending(host)
    # both restores were tried: the tuned one failed too, and is named
    assert playbooks.runs[-2:] == [("default", None), ("tuned", None)]
    # an A/A run would measure its noise floor against a default machine with an ablation's knobs
    with pytest.raises(StepFailed, match=r"the default machine still carries other knobs than its own .*"
                                         r"\./start\.sh up restores them"):
        aa.refuse_if_pending(host, a_a=True)
    host.aa_end("tuned")            # ./start.sh up --only tuned: the default machine still carries others
    with pytest.raises(StepFailed, match=r"the default machine still carries other knobs than its own .*"
                                         r"\./start\.sh up restores them"):
        aa.refuse_if_pending(host)
    host.aa_end("default")
    assert not host.aa_pending()


def test_every_provisioning_of_a_block_changes_knobs_only_the_base_is_ups(host, playbooks, tmp_path):
    # An A/A run or an ablation gives machines `up` provisioned other knobs, and their own back: each run skips
    # what no knob changes (--skip-tags base), so every configuration runs on the base `up` made.
    with aa.machines_with(FakeBackend(), host) as give:
        give({"tuned": tmp_path / "a.yml"}, "configuration a")
        give({"default": tmp_path / "a.yml", "tuned": tmp_path / "b.yml"}, "configurations a and b")
    assert playbooks.calls == 3 and playbooks.knobs_only == [True, True, True]      # the last: their own back


def test_a_record_of_an_earlier_lab_keeps_the_tuned_machine_when_the_default_one_is_given_others(
        host, playbooks, tmp_path):
    host.aa_file.parent.mkdir(parents=True, exist_ok=True)
    host.aa_file.write_text(json.dumps({"since": "earlier", "restore": aa.RESTORE}))     # no "machines": tuned
    playbooks.fail = True
    with pytest.raises(StepFailed), aa.machines_with(FakeBackend(), host) as give:
        give({"default": tmp_path / "b.yml"}, "configuration b")
    assert host.aa_machines() == ["default", "tuned"]       # the default machine's restore failed; tuned never had


def test_a_pair_is_provisioned_in_one_run_and_a_machine_whose_part_failed_stays_named(host, monkeypatch, tmp_path):
    runs = []

    def run_playbook(inventory, log_dir, limit=None, given=None, knobs_only=False):
        runs.append((limit, given))
        if given:
            return PlaybookResult(0, {"default": 5, "tuned": 5}, {}, tmp_path / "ansible.log")
        # the restore: the default machine's part ended well, the tuned machine's failed
        return PlaybookResult(2, {"default": 3, "tuned": 1}, {"default": 0, "tuned": 1}, tmp_path / "ansible.log")
    monkeypatch.setattr(provision, "run_playbook", run_playbook)
    files = {"tuned": tmp_path / "a.yml", "default": tmp_path / "b.yml"}
    with pytest.raises(StepFailed, match=r"\./start\.sh up gives the machines their own knobs back"), \
            aa.machines_with(FakeBackend(), host) as give:
        give(files, "configurations a and b")
        assert host.aa_machines() == ["default", "tuned"]
    # one run each way, the hosts in the lab's order
    assert runs == [("default,tuned", files), ("default,tuned", None)]
    assert host.aa_machines() == ["tuned"]


def test_each_provisioning_refuses_an_inventory_edited_since_up_before_its_playbook(host, playbooks, tmp_path):
    # An ablation or a tune provisions for hours after its command's own check: each playbook run, root's, checks
    # the inventory again, and one edited meanwhile is never run (the machines are given their own knobs back after).
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("lab_machines: {hosts: {default: {}, tuned: {}}}\n")
    backend = FakeBackend()
    backend.inventory = inventory
    host.claim("ssh", inventory)
    with aa.machines_with(backend, host) as give:
        give({"tuned": aa.AS_DEFAULT}, "the default machine's knobs")
        assert playbooks.runs == [("tuned", aa.AS_DEFAULT)]
        inventory.write_text("lab_machines: {hosts: {default: {}, tuned: {ansible_become_exe: /tmp/x}}}\n")
        with pytest.raises(LabError, match=rf"^{inventory} \(or .*\) was edited since up"):
            give({"tuned": aa.AS_DEFAULT}, "the default machine's knobs")
        inventory.write_text("lab_machines: {hosts: {default: {}, tuned: {}}}\n")    # put back: restored after
    assert playbooks.runs == [("tuned", aa.AS_DEFAULT), ("tuned", None)]
