"""`up --knobs FILE`: a knobs file (a tune's best.yml, a user's own) given to one machine over its host_vars, checked
before anything starts, kept as it was given for every playbook run that follows, in each run's record and report,
until `--knobs none` or `down`."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, PlaybookStarted, edited_once_read
from lab import cli, given_knobs, lifecycle, provision
from lab.errors import StepFailed

pytestmark = pytest.mark.fast

BEST = ("# what a tune writes where it chose AJP over APR: a host_vars file, templates included\n"
        "camel_app_http_client_per_route: 120\ncamel_app_http_client_max_total: 120\n"
        "httpd_proxy_protocol: ajp\nhttpd_ajp_secret: '{{ lab_ajp_secret }}'\ncamel_app_ajp_enabled: true\n"
        "camel_app_ajp_secret: '{{ lab_ajp_secret }}'\ncamel_app_java_options: [-XX:+UseParallelGC, -Xmx96m]\n"
        "camel_app_ajp_protocol: APR\ntomcat_native_enabled: true\n"
        "camel_app_native_library_dir: '{{ tomcat_native_library_dir }}'\n")


@pytest.mark.parametrize("text, message", [
    ("camel_app_http_client_per_route: 120\ncamel_app_http_client_per_rout: 120\n",
     "no role declares camel_app_http_client_per_rout (roles/*/meta/argument_specs.yml; did you mean "
     "camel_app_http_client_per_route"),
    ("- a list\n", "must be a mapping of role variables"),
    ("", "must be a mapping of role variables"),
    ("lab_ajp_secret: mine\n", "lab_ajp_secret: the lab's own account, folders and secrets are not a knobs file's"),
    # given as extra vars, a connection variable would point the machine's playbook elsewhere
    ("ansible_host: 10.0.0.9\n", "no role declares ansible_host"),
    ("httpd_mpm: [worker\n", "cannot read"),
])
def test_a_knobs_file_is_checked_naming_what_the_user_typed(tmp_path: Path, text: str, message: str):
    (tmp_path / "mine.yml").write_text(text)
    with pytest.raises(StepFailed) as caught:
        given_knobs.check(str(tmp_path / "mine.yml"))
    assert str(caught.value).startswith(f"--knobs {tmp_path / 'mine.yml'}: ") and message in str(caught.value)
    with pytest.raises(StepFailed, match=r"--knobs nosuch\.yml: no such file \(.*nosuch\.yml\)"):
        given_knobs.check("nosuch.yml")


def test_the_bytes_a_knobs_file_is_checked_in_are_the_bytes_copied(tmp_path: Path, monkeypatch):
    # edited between its check and its copy (here: the moment it was read once), the machine gets what was checked
    best = tmp_path / "best.yml"
    best.write_text("camel_app_http_client_per_route: 120\n")
    edited_once_read(monkeypatch, best, "camel_app_http_client_per_route: 120\nlab_ajp_secret: mine\n")
    item = given_knobs.give("tuned", str(best))
    assert item is not None and item.file.read_text() == "camel_app_http_client_per_route: 120\n"


def test_a_machine_keeps_what_it_was_given_until_none_and_a_tampered_copy_is_refused(tmp_path: Path):
    best = tmp_path / "best.yml"
    best.write_text(BEST)                               # templates allowed: a host_vars file, as the roles' own
    assert given_knobs.given() == {} and given_knobs.files() == {}
    item = given_knobs.give("tuned", str(best))
    assert item is not None and item.file.read_text() == BEST and item.source == str(best)
    assert given_knobs.given() == {"tuned": item} and given_knobs.files() == {"tuned": item.file}
    best.write_text("camel_app_http_client_per_route: 5\n")        # the file changes after: the machine keeps its copy
    assert yaml.safe_load(given_knobs.files()["tuned"].read_text())["camel_app_http_client_per_route"] == 120
    best.unlink()
    assert given_knobs.given()["tuned"].sha256 == item.sha256
    item.file.write_text("camel_app_http_client_per_route: 7\n")
    with pytest.raises(StepFailed, match="is not what the tuned machine was given .*--knobs FILE|none"):
        given_knobs.given()
    # what the refusal says mends it: up --knobs for that machine reads everything but its broken record
    assert lifecycle.MachineSetup(knobs="none").knobs_files() == {}
    assert given_knobs.give("tuned", "none") is None and given_knobs.given() == {}
    (tmp_path / "a.yml").write_text("httpd_timeout: 30\n")
    given_knobs.give("default", str(tmp_path / "a.yml"))
    given_knobs.give("tuned", str(tmp_path / "a.yml"))
    given_knobs.forget()
    assert given_knobs.given() == {}


def test_every_playbook_run_gives_them_unless_it_gives_that_machine_other_knobs(tmp_path: Path, playbook_commands):
    seen = playbook_commands
    best = tmp_path / "best.yml"
    best.write_text(BEST)
    copy = given_knobs.give("tuned", str(best)).file
    for given in (None, {"default": tmp_path / "aa.yml"}, {"tuned": tmp_path / "aa.yml"}):
        with pytest.raises(PlaybookStarted):
            provision.run_playbook(tmp_path / "hosts.yml", tmp_path, given=given)
    # up (and the restore after an ablation): the copy; an ablation step that gives the other machine: both; one
    # that gives the tuned machine a configuration: that one, for that run
    assert [json.loads(c[c.index("--extra-vars") + 1])["lab_given_knobs"] for c in seen] == [
        {"tuned": str(copy)}, {"tuned": str(copy), "default": str(tmp_path / "aa.yml")},
        {"tuned": str(tmp_path / "aa.yml")}]
    with pytest.raises(PlaybookStarted):       # another playbook of the lab's (an engine's) gets nothing of the machines'
        provision.run_playbook(tmp_path / "hosts.yml", tmp_path, playbook=REPO / "ansible" / "loadgen.yml")
    assert "--extra-vars" not in seen[-1]


def test_knobs_are_ups_and_checked_before_anything_starts(tmp_path: Path, capsys, host):
    with pytest.raises(SystemExit):
        cli.main(["run", "--knobs", "best.yml"], host=host)         # not an option of run at all
    assert "unrecognized arguments: --knobs" in capsys.readouterr().err
    assert cli.main(["--knobs", "best.yml", "capacity"], host=host) == 1
    assert "--knobs sets what `up` gives the machines" in capsys.readouterr().err
    assert cli.main(["up", "--only", "default", "--knobs", str(tmp_path / "nosuch.yml")], host=host) == 1
    assert capsys.readouterr().err == f"start.sh: --knobs {tmp_path / 'nosuch.yml'}: no such file ({tmp_path / 'nosuch.yml'}); a vars file of role variables, such as a tune's best.yml, or none for the machine's host_vars alone\n"
    assert host.owner() is None                             # nothing started


def test_the_setup_gives_the_only_machine_or_the_tuned_one_and_none_takes_them_back(tmp_path: Path):
    best = tmp_path / "best.yml"
    best.write_text(BEST)
    args = argparse.Namespace(profile=None, memory=None, swap_mib=None, knobs=str(best), only=None)
    backend = argparse.Namespace(name="vagrant")
    assert lifecycle.MachineSetup.of(args, None, backend).knobs_files() == {"tuned": best.resolve()}
    setup = lifecycle.MachineSetup.of(argparse.Namespace(**{**vars(args), "only": "default"}), None, backend)
    assert setup.knobs_files() == {"default": best.resolve()}
    setup.apply(backend)
    assert given_knobs.files() == {"default": given_knobs.FOLDER / "default.yml"}
    given_knobs.give("tuned", str(best))
    # --knobs none for one machine: the other keeps what it was given
    assert lifecycle.MachineSetup(knobs="none", knobs_machine="default").knobs_files() == {
        "tuned": given_knobs.FOLDER / "tuned.yml"}
    lifecycle.MachineSetup(knobs="none", knobs_machine="default").apply(backend)
    assert set(given_knobs.given()) == {"tuned"}
