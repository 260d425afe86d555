"""lab.knobs: a knob in host_vars or group_vars that no role declares is named, with the likely intended name."""
from __future__ import annotations

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
    (ansible_copy / "group_vars" / "all.yml").write_text(
        (ansible_copy / "group_vars" / "all.yml").read_text() + "lab_servce_path: /x\nzzz_unrelated: !unsafe '{{ x }}'\n")
    (ansible_copy / "host_vars" / "default").mkdir()
    (ansible_copy / "host_vars" / "default" / "extra.yml").write_text("ansible_user: me\ncamel_app_max_threads: 3\n")
    assert unknown_knobs(ansible_copy) == [
        UnknownKnob(Path("ansible/host_vars/default/extra.yml"), "camel_app_max_threads", "camel_app_tomcat_max_threads"),
        UnknownKnob(Path("ansible/group_vars/all.yml"), "lab_servce_path", "lab_service_path"),
        UnknownKnob(Path("ansible/group_vars/all.yml"), "zzz_unrelated", None),
    ]
    assert describe(unknown_knobs(ansible_copy)).splitlines()[2] == (
        "ansible/group_vars/all.yml: zzz_unrelated is not a variable of any role")
