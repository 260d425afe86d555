"""The Ansible tree: lint, syntax, and the invariants that make "only configuration differs" true."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO

ANSIBLE = REPO / "ansible"
VENV_BIN = REPO / ".venv" / "bin"
ENV = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg")}


def test_ansible_lint_is_clean_at_the_production_profile():
    result = subprocess.run([str(VENV_BIN / "ansible-lint"), "--profile", "production"], cwd=ANSIBLE, env=ENV,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("inventory", ["local/hosts.yml", "vagrant/hosts.yml", "ssh/hosts.example.yml"])
def test_every_inventory_runs_the_same_playbook_on_default_and_tuned(inventory):
    path = ANSIBLE / "inventories" / inventory
    syntax = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(path), "site.yml", "--syntax-check"],
                            cwd=ANSIBLE, env=ENV, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr
    listed = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(path), "--list"], cwd=ANSIBLE, env=ENV,
                            capture_output=True, text=True, check=True)
    assert sorted(json.loads(listed.stdout)["lab_machines"]["hosts"]) == ["default", "tuned"]


def test_inventories_set_connection_details_only():
    """Tuning lives in host_vars beside the playbook, shared by every backend; never in an inventory."""
    tuning_prefixes = ("httpd_", "camel_app_", "tomcat_native_", "mock_service_")
    for inventory in (ANSIBLE / "inventories").rglob("*.yml"):
        text = inventory.read_text()
        assert not re.search(rf"^\s+({'|'.join(tuning_prefixes)})\w+:", text, re.M), inventory


def test_both_machines_name_the_same_knobs():
    """`diff host_vars/default.yml host_vars/tuned.yml` is the whole tuning: both list every knob."""
    default = yaml.safe_load((ANSIBLE / "host_vars" / "default.yml").read_text())
    tuned = yaml.safe_load((ANSIBLE / "host_vars" / "tuned.yml").read_text())
    assert set(default) - {"httpd_mpm_prefork_settings"} == set(tuned) - {
        "httpd_mpm_worker_settings", "camel_app_logback_async_queue_size", "camel_app_logback_async_discarding_threshold"}
    assert [k for k in default if default[k] != tuned.get(k)], "the machines must differ"


def test_every_host_var_is_a_role_default():
    """A knob set in host_vars must exist, documented, in some role's defaults/main.yml."""
    defaults = {}
    for path in (ANSIBLE / "roles").glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    for machine in ("default", "tuned"):
        unknown = set(yaml.safe_load((ANSIBLE / "host_vars" / f"{machine}.yml").read_text())) - set(defaults)
        assert not unknown, f"{machine}: not a role default: {sorted(unknown)}"


def test_role_variables_carry_their_role_prefix():
    for path in (ANSIBLE / "roles").glob("*/defaults/main.yml"):
        role = path.parent.parent.name
        for variable in yaml.safe_load(path.read_text()) or {}:
            assert variable.startswith(f"{role}_"), f"{path}: {variable} lacks the prefix {role}_"


def test_tomcat_native_source_matches_the_services_tomcat():
    """Each Tomcat release demands a minimum tcnative: the role builds the one from the same release."""
    pom_version = re.search(r"<tomcat.version>([^<]+)</tomcat.version>", (REPO / "app" / "pom.xml").read_text())[1]
    role = yaml.safe_load((ANSIBLE / "roles" / "tomcat_native" / "defaults" / "main.yml").read_text())
    assert role["tomcat_native_tomcat_version"] == pom_version


def test_pinned_collections_are_the_installed_ones():
    wanted = {c["name"]: c["version"] for c in yaml.safe_load((ANSIBLE / "requirements.yml").read_text())["collections"]}
    listed = subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "list", "--format", "json"], env=ENV,
                            capture_output=True, text=True, check=True)
    installed = {name: info["version"] for path in json.loads(listed.stdout).values() for name, info in path.items()}
    assert {name: installed.get(name) for name in wanted} == wanted
