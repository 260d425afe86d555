"""The Ansible tree read as files: the invariants that make "only configuration differs" true (the tree through
Ansible's own programs, lint, syntax, the preflight and the plays: tests/test_ansible_play.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from lab.tune import space as knob_space

# No lab, no jar, no VM, and no Ansible program but ansible-galaxy's listing: the edit-test loop's (make check).
pytestmark = pytest.mark.fast

ANSIBLE = REPO / "ansible"
VENV_BIN = REPO / ".venv" / "bin"
ENV = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg")}
ROLES = sorted(path.parent.parent.name for path in (ANSIBLE / "roles").glob("*/defaults/main.yml"))
LOCAL_INVENTORY = ANSIBLE / "inventories" / "local" / "hosts.yml"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", re.M)


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


# ------------------------------------------------------------------------------------ role variables

def _yaml(path):
    return yaml.safe_load(path.read_text()) or {}


def role_defaults(role: str) -> dict:
    return _yaml(ANSIBLE / "roles" / role / "defaults" / "main.yml")


def role_options(role: str) -> dict:
    return _yaml(ANSIBLE / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]


def test_the_default_machine_is_the_role_defaults():
    """host_vars/default.yml writes the software as installed out: each value is its role's default."""
    defaults = {name: value for role in ROLES for name, value in role_defaults(role).items()}
    default = _yaml(ANSIBLE / "host_vars" / "default.yml")
    differ = {name: (value, defaults.get(name, "<no role default>")) for name, value in default.items()
              if name not in defaults or defaults[name] != value}
    assert not differ, f"host_vars/default.yml differs from the role defaults (value, default): {differ}"


@pytest.mark.parametrize("role", ROLES)
def test_the_argument_spec_declares_exactly_the_role_defaults(role):
    assert set(role_options(role)) == set(role_defaults(role))


@pytest.mark.parametrize("role", ROLES)
def test_the_argument_spec_documents_each_variable_as_its_default_sets_it(role):
    defaults = role_defaults(role)
    for name, option in role_options(role).items():
        assert option.get("type") and option.get("description"), f"{role}: {name} needs a type and a description"
        described = " ".join(option["description"]) if isinstance(option["description"], list) else option["description"]
        if "default" in option:
            assert option["default"] == defaults[name], f"{role}: {name}'s documented default is not defaults/main.yml's"
        else:
            # No default in the spec: the variable is nullable (a spec default would refuse null).
            assert "null keeps" in described, f"{role}: {name} has no documented default and is not nullable"
        if "choices" in option:
            assert defaults[name] in option["choices"], f"{role}: {name}'s default is not among its choices"


@pytest.mark.parametrize("role", ROLES)
def test_null_validates_for_every_nullable_variable(role):
    """null keeps the software's default: the spec lets it through (a spec default would not)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    options = role_options(role)
    nullable = {name: None for name, option in options.items() if "default" not in option}
    result = ArgumentSpecValidator(options).validate(nullable, validate_role_argument_spec=True)
    assert not result.error_messages
    if role == "httpd":
        assert ArgumentSpecValidator(options).validate({"httpd_port": None},
                                                       validate_role_argument_spec=True).error_messages


def test_enumerations_list_their_choices():
    choices = {name: option.get("choices") for role in ROLES for name, option in role_options(role).items()}
    assert choices["httpd_mpm"] == ["prefork", "worker", "event"]
    assert choices["httpd_proxy_protocol"] == ["http", "ajp"]
    assert choices["camel_app_ajp_protocol"] == ["NIO", "NIO2", "APR"]
    assert choices["camel_app_stack"] == ["classic", "modern"]
    assert choices["lab_service_manager"] == ["supervisord", "systemd"]


# ------------------------------------------------------------------------------- one copy of each thing

def test_no_two_vars_files_are_identical():
    files = sorted(path for path in (ANSIBLE / "roles").glob("*/vars/*") if path.is_file())
    by_content: dict[bytes, list[str]] = {}
    for path in files:
        by_content.setdefault(path.read_bytes(), []).append(str(path.relative_to(ANSIBLE)))
    assert not [paths for paths in by_content.values() if len(paths) > 1]


def test_per_os_values_are_loaded_by_os_family_and_task_files_imported():
    for main in (ANSIBLE / "roles").glob("*/tasks/main.yml"):
        text = main.read_text()
        assert "include_tasks" not in text, f"{main}: static task files are imported"
        assert "ansible_facts['distribution']" not in text, f"{main}: per-OS values go by os family"
        assert "ansible.builtin.import_tasks" in text
        for task in _yaml(main):
            assert set(task) <= {"name", "ansible.builtin.import_tasks", "ansible.builtin.include_vars", "tags"}, \
                f"{main} stays thin: imports and the per-OS values only"


IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def _base_task_files() -> list[Path]:
    """The task files a role imports with the tag base (what lab/provision.py's knobs_only skips), with the templates
    and the lab role's task files they use."""
    files: list[Path] = []
    for main in sorted((ANSIBLE / "roles").glob("*/tasks/main.yml")):
        for task in _yaml(main):
            if "base" in task.get("tags", []):
                files.append(main.parent / task["ansible.builtin.import_tasks"])
    for path in list(files):
        role = path.parent.parent
        files += [role / "templates" / name for name in re.findall(r"src: (\S+\.j2)", path.read_text())]
        files += [ANSIBLE / "roles" / "lab" / "tasks" / f"{name}.yml"
                  for name in re.findall(r"tasks_from: (\w+)", path.read_text())]
    return files


def test_no_tuning_knob_reaches_a_task_a_knobs_only_run_skips():
    # An A/A run or an ablation only changes the knobs of machines `up` provisioned (--skip-tags base): sound only
    # while no knob, directly or through a variable made from it, is read by a task tagged base.
    definitions: dict[str, str] = {}        # each variable's definitions as written, to follow one made of others
    sources = [*(ANSIBLE / "roles").glob("*/defaults/main.yml"), *(ANSIBLE / "roles").glob("*/vars/*.yml"),
               *(ANSIBLE / "group_vars").glob("*.yml")]
    for path in sources:
        for name, value in (_yaml(path) or {}).items():
            definitions[name] = definitions.get(name, "") + " " + json.dumps(value)
    groups = _yaml(ANSIBLE / "knob-groups.yml")["groups"]
    knobs = {v for group in groups.values() for v in group["variables"]}
    knobs |= set(_yaml(ANSIBLE / "host_vars" / "default.yml") or {}) | set(_yaml(ANSIBLE / "host_vars" / "tuned.yml"))
    # what a tune sets, and what the shipped knobs files set (camel_app_stack: the jar and the Java that run it)
    knobs |= knob_space.load().variables() | {v for path in (ANSIBLE / "knobs").glob("*.yml") for v in _yaml(path) or {}}
    files = _base_task_files()
    assert {path.parent.parent.name for path in files} >= {"lab", "java", "mock_service", "pcp"}, files
    for path in files:
        read = set(IDENTIFIER.findall(path.read_text())) & (set(definitions) | knobs)
        seen: set[str] = set()
        while read - seen:                  # the variables each read one is made of, to the end
            name = (read - seen).pop()
            seen.add(name)
            read |= set(IDENTIFIER.findall(definitions.get(name, ""))) & (set(definitions) | knobs)
        assert not read & knobs, f"{path.relative_to(ANSIBLE)} (tagged base) reads the knobs {sorted(read & knobs)}"


def test_the_roles_handlers_share_the_lab_roles_restart_tasks():
    restart_modules = ("community.general.supervisorctl", "ansible.builtin.systemd_service")
    handler_files = sorted((ANSIBLE / "roles").glob("*/handlers/main.yml"))
    assert len(handler_files) == 4
    for path in handler_files:
        for handler in _yaml(path):
            assert not set(restart_modules) & set(handler), f"{path}: restarts itself instead of lab's restart.yml"
            assert handler["ansible.builtin.include_tasks"] == "{{ role_path }}/../lab/tasks/restart.yml", path
            assert set(handler["vars"]) == {"lab_service_name"}, path
    restart = _yaml(ANSIBLE / "roles" / "lab" / "tasks" / "restart.yml")
    assert sorted(module for task in restart for module in restart_modules if module in task) == sorted(restart_modules)


def test_a_template_that_holds_a_secret_never_shows_it_in_a_diff():
    # ansible-playbook --diff prints what a template changes: the AJP secret must not reach a terminal or CI log
    secret = re.compile(r"\{\{[^}]*secret[^}]*\}\}")
    checked = []
    for path in sorted((ANSIBLE / "roles").glob("*/tasks/*.yml")):
        for task in _yaml(path) or []:
            template = task.get("ansible.builtin.template")
            if not template:
                continue
            sources = [str(template["src"]).replace("{{ item }}", str(item)) for item in task.get("loop") or [None]]
            if any(secret.search((path.parent.parent / "templates" / src).read_text()) for src in sources):
                checked.append(template["src"])
                assert task.get("diff") is False or task.get("no_log") is True, f"{path}: {task['name']}"
    assert sorted(checked) == ["application.properties.j2", "httpd.conf.j2"]


def test_roles_are_listed_once_in_site_yml():
    for meta in (ANSIBLE / "roles").glob("*/meta/main.yml"):
        assert _yaml(meta)["dependencies"] == [], f"{meta}: site.yml is the one list of roles"
    site = _yaml(ANSIBLE / "site.yml")
    for play in site:
        listed = [entry["role"] for entry in play.get("roles", [])]
        assert len(set(listed)) == len(listed), play["name"]
    # the machines' play runs every role but the load generators' own, which run in a play of their own
    plays = {play["hosts"]: [entry["role"] for entry in play["roles"]] for play in site if "roles" in play}
    assert sorted(plays["lab_machines"]) == sorted(set(ROLES) - {"jmeter_engine"})
    assert plays["loadgen"] == ["lab", "java", "jmeter_engine"]


# --------------------------------------------------------------------------------------- the manifest

# What lab/evidence.py collected from a machine before the manifest said it (paths under lab_home).


def test_a_load_generator_gets_the_engines_keys_never_the_controllers():
    # the controller's key pair stays on the controller: an engine host holding it could pose as the controller
    # to every other engine (and drive them: a plan is code); the engines get their own pair and the controller's
    # certificate only (lab/load/engines.py)
    from lab.load import engines
    tasks = _yaml(ANSIBLE / "roles" / "jmeter_engine" / "tasks" / "rmi.yml")
    copied = [item for task in tasks if "ansible.builtin.copy" in task for item in task.get("loop") or
              [task["ansible.builtin.copy"]["src"].rsplit("/", 1)[-1]]]
    assert sorted(copied) == sorted([f"{engines.ENGINE_FOLDER}/{engines.KEYSTORE}",
                                     f"{engines.ENGINE_FOLDER}/{engines.TRUSTSTORE}", "rmi.properties"]), copied
    assert not [task for task in tasks if any(key in task for key in ("ansible.builtin.synchronize",
                                                                        "ansible.builtin.template"))]
