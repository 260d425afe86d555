"""lab.knobs: a knob in host_vars or group_vars that no role declares is named, with the likely intended name."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from lab.knobs import UnknownKnob, describe, unknown_knobs

pytestmark = pytest.mark.fast

ANSIBLE = REPO / "ansible"


@pytest.fixture
def ansible_copy(tmp_path) -> Path:
    copy = tmp_path / "ansible"
    shutil.copytree(ANSIBLE, copy, ignore=shutil.ignore_patterns(".cache"))
    return copy


def test_the_shipped_vars_have_no_unknown_knob():
    unknown = unknown_knobs(ANSIBLE)
    assert unknown == [], describe(unknown)


def test_a_misspelled_knob_is_named_with_the_intended_one(ansible_copy):
    tuned = ansible_copy / "host_vars" / "tuned.yml"
    tuned.write_text(tuned.read_text().replace("httpd_mpm: worker", "httpd_mpn: worker"))
    unknown = unknown_knobs(ansible_copy)
    assert unknown == [UnknownKnob(Path("ansible/host_vars/tuned.yml"), "httpd_mpn", "httpd_mpm")]
    assert describe(unknown) == ("ansible/host_vars/tuned.yml: httpd_mpn is not a variable of any role "
                                 "(did you mean httpd_mpm?)")


def test_group_vars_and_folders_of_vars_files_are_read_too(ansible_copy):
    (ansible_copy / "group_vars" / "lab_machines.yml").write_text(
        (ansible_copy / "group_vars" / "lab_machines.yml").read_text() + "lab_servce_path: /x\nzzz_unrelated: !unsafe '{{ x }}'\n")
    (ansible_copy / "host_vars" / "default").mkdir()
    (ansible_copy / "host_vars" / "default" / "extra.yml").write_text("ansible_user: me\ncamel_app_max_threads: 3\n")
    assert unknown_knobs(ansible_copy) == [
        UnknownKnob(Path("ansible/host_vars/default/extra.yml"), "camel_app_max_threads", "camel_app_tomcat_max_threads"),
        UnknownKnob(Path("ansible/group_vars/lab_machines.yml"), "lab_servce_path", "lab_service_path"),
        UnknownKnob(Path("ansible/group_vars/lab_machines.yml"), "zzz_unrelated", None),
    ]
    assert describe(unknown_knobs(ansible_copy)).splitlines()[2] == (
        "ansible/group_vars/lab_machines.yml: zzz_unrelated is not a variable of any role")


def test_the_runs_knobs_are_rendered_and_secrets_never_shown(ansible_copy):
    # A value another variable feeds, a role's default, and the AJP secret (made by a lookup on first use: in a
    # copy of the ansible folder, so a lookup run by mistake would leave a file in its .cache/secrets).
    from lab.knobs import KNOB_PREFIXES, MASKED, rendered
    inventory = ansible_copy / "inventories" / "local" / "hosts.yml"
    # Secrets as the lab keeps them once made (.cache/secrets beside the ansible folder): their values must not show.
    secrets = ansible_copy.parent / ".cache" / "secrets"
    secrets.mkdir(parents=True)
    made = {secrets / f"{name}-ajp-secret": f"s3cret{name}0123456789abcdefghijk" for name in ("default", "tuned")}
    for path, value in made.items():
        path.write_text(value + "\n")
    # a secret nested in a knob's value, fed by a lookup that must never run
    host_vars = ansible_copy / "host_vars" / "tuned.yml"
    host_vars.write_text(host_vars.read_text() + "\ncamel_app_extra: {user: lab, api_token: \"{{ lookup('pipe', "
                         "'touch " + str(secrets / "looked-up") + "') }}\"}\n")
    machines = rendered(inventory, ansible_copy, ["default", "tuned"], KNOB_PREFIXES)
    default, tuned = machines["default"], machines["tuned"]
    assert default["httpd_mpm"] == "prefork" and tuned["httpd_mpm"] == "worker"       # role default, host_vars
    assert tuned["camel_app_gc_log_options"].startswith("-Xlog:gc*:file=/var/lib/camel-tuning-lab/machines/tuned/")
    assert not any("{{" in str(value) for machine in machines.values() for value in machine.values())
    assert tuned["camel_app_ajp_secret"] == MASKED and tuned["httpd_ajp_secret"] == MASKED
    assert tuned["camel_app_extra"] == {"user": "lab", "api_token": MASKED}
    assert not (secrets / "looked-up").exists()
    assert sorted(ansible_copy.parent.rglob("*ajp-secret*")) == sorted(made)     # none made by a lookup
    for value in made.values():
        assert value not in json.dumps(machines)


def test_a_value_ansible_cannot_render_here_is_shown_as_written_and_the_rest_still_are(ansible_copy):
    from lab.knobs import KNOB_PREFIXES, rendered
    host_vars = ansible_copy / "host_vars" / "tuned.yml"
    host_vars.write_text(host_vars.read_text() + "\nhttpd_server_name: \"{{ ansible_facts['fqdn'] }}\"\n")
    machines = rendered(ansible_copy / "inventories" / "local" / "hosts.yml", ansible_copy, ["tuned"], KNOB_PREFIXES)
    assert machines["tuned"]["httpd_server_name"].startswith("{{ ansible_facts['fqdn'] }} (not rendered here: ")
    assert machines["tuned"]["httpd_mpm"] == "worker"


def test_the_reports_knob_table_shows_rendered_values_and_says_when_an_old_run_did_not(ansible_copy, tmp_path):
    import re

    from lab.knobs import KNOB_PREFIXES, rendered
    from lab.report import render
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "run-local-tiny", run)

    def knob_table() -> str:
        page = render(run, refresh=True).read_text()
        return re.search(r'<section id="knobs">.*?</section>', page, re.S)[0]

    # the stored run is from before the rendering: its values as written, and the table says so
    old = knob_table()
    assert "{{ camel_app_home }}" in old and "knobs.json is from before the lab rendered them" in old
    # a run of today's lab: knobs.json as the run writes it, and no template text left in the table
    inventory = ansible_copy / "inventories" / "local" / "hosts.yml"
    (run / "knobs.json").write_text(json.dumps(rendered(inventory, ansible_copy, ["default", "tuned"], KNOB_PREFIXES)))
    new = knob_table()
    assert "{{" not in new and "from before" not in new and "/var/lib/camel-tuning-lab/machines/tuned/" in new
