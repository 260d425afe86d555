"""Ablation's pure parts: the knob-group file checked against both machines' host_vars, configurations as
extra vars, and the path, shares, leave-one-out losses and interactions computed from recorded
measurements (additive groups, a dependency, and two groups that only work together)."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from lab import knobs
from lab.ablation import analysis as ablation
from lab.ablation import groups as knob_groups
from lab.errors import StepFailed

pytestmark = pytest.mark.fast


def test_the_shipped_groups_make_the_tuned_machine_from_the_default_one():
    groups = knob_groups.load()
    assert list(groups) == ["httpd_mpm", "timeouts", "ajp", "apr", "connector", "gc_heap", "async_logging"]
    assert groups["apr"].needs == ("ajp",)
    default = knob_groups._yaml(knob_groups.HOST_VARS / "default.yml", "")
    tuned = knob_groups._yaml(knob_groups.HOST_VARS / "tuned.yml", "")
    # Nothing applied: the default machine, and what only tuned.yml sets is back at its role default (extra vars
    # override host_vars only where they name a variable: left out, it would keep its tuned value)
    none = knob_groups.extra_vars(groups, frozenset())
    only_tuned = set(tuned) - set(default)
    assert {k: v for k, v in none.items() if k not in only_tuned} == default and only_tuned <= set(none)
    role_defaults = knobs.role_defaults(knob_groups.ANSIBLE_DIR)
    assert all(none[k] == role_defaults[k] != tuned[k] for k in only_tuned), only_tuned
    assert knob_groups.extra_vars(groups, frozenset(groups)) == {**default, **tuned}
    one = knob_groups.extra_vars(groups, frozenset({"gc_heap"}))
    assert one["camel_app_java_options"] == tuned["camel_app_java_options"] and one["httpd_mpm"] == "prefork"
    assert not knob_groups.valid(groups, frozenset({"apr"})) and knob_groups.valid(groups, frozenset({"apr", "ajp"}))


def _files(tmp_path: Path, groups_text: str) -> tuple[Path, Path]:
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    (host_vars / "default.yml").write_text("a: 1\nb: 1\nc: 1\n")
    (host_vars / "tuned.yml").write_text("a: 2\nb: 2\nc: 2\n")
    path = tmp_path / "knob-groups.yml"
    path.write_text(groups_text)
    return path, host_vars


@pytest.mark.parametrize("text, message", [
    ("groups: {one: {variables: [a, b, c, nope]}}\n", "groups.one.variables: nope is in neither"),
    ("groups: {one: {variables: [a, b]}, two: {variables: [b, c]}}\n", "b is already in group one"),
    ("groups: {one: {variables: [a, b]}}\n", "c (host_vars/tuned.yml) in no group"),
    ("groups: {one: {variables: [a, b, c], needs: [zero]}}\n", "groups.one.needs: zero is not a group"),
    ("groups: {one: {variables: [a], needs: [two]}, two: {variables: [b, c], needs: [one]}}\n", "a cycle of needs"),
    ("groups: {one: {variables: [a, b, c], wants: [x]}}\n", "about, variables and needs only"),
    ("groups: [a, b]\n", "groups: a mapping"),
    ("groups: {default: {variables: [a, b, c]}}\n", "groups.default: a group's name is lower-case letters"),
    ("groups: {gc+heap: {variables: [a, b, c]}}\n", "groups.gc+heap: a group's name is lower-case letters"),
])
def test_a_bad_group_file_is_refused_naming_the_group(tmp_path, text, message):
    path, host_vars = _files(tmp_path, text)
    with pytest.raises(StepFailed) as caught:
        knob_groups.load(path, host_vars)
    assert message in str(caught.value), str(caught.value)


GROUPS = {name: knob_groups.Group(name, name, (name,), needs) for name, needs in
          (("mpm", ()), ("ajp", ()), ("apr", ("ajp",)), ("gc", ()), ("logging", ()), ("synergy_a", ()),
           ("synergy_b", ()))}


def _measure(effects, trials: int = 6, noise: float = 0.005):
    def measure(config):
        rng = random.Random(",".join(sorted(config)))
        return [1.0 + effects(config) + rng.gauss(0, noise) for _ in range(trials)]
    return measure


def test_the_same_measurements_give_the_same_intervals_whatever_the_hash_seed():
    code = ("import json; from test_ablation import GROUPS, _measure; from lab.ablation import analysis as ablation; "
            "r = ablation.analyze(GROUPS, _measure(lambda c: 0.2 * ('gc' in c)), 'req/s', resamples=500); "
            "print(json.dumps([row['share_interval'] for row in r['path']]))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parent,
                           env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": f"{REPO}:{Path(__file__).parent}"}).stdout
            for seed in ("1", "2", "3")}
    assert len(runs) == 1, runs


def test_additive_groups_get_their_share_and_the_rest_nothing():
    result = ablation.analyze(GROUPS, _measure(lambda c: 0.2 * ("gc" in c) + 0.1 * ("logging" in c)),
                              "req/s", resamples=2000)
    path = result["path"]
    assert [r["group"] for r in path[:2]] == ["gc", "logging"]
    assert path[0]["share"] == pytest.approx(2 / 3, abs=0.03) and path[1]["share"] == pytest.approx(1 / 3, abs=0.03)
    assert path[0]["share_interval"][0] < 2 / 3 < path[0]["share_interval"][1]
    assert all(not r["measurable"] for r in path[2:]) and not result["interacting"]
    assert result["sentence"].startswith("gc and logging explain 100% of the gain")
    assert "changed nothing measurable" in result["sentence"]
    assert path[0]["loo_loss"] == pytest.approx(0.2, abs=0.01)


def test_a_gain_that_cannot_be_told_from_noise_gets_no_shares():
    result = ablation.analyze(GROUPS, _measure(lambda c: 0.0, noise=0.02), "req/s", resamples=2000)
    low, high = result["gain_interval"]
    assert low <= 0 <= high
    assert result["sentence"].startswith("The tuned machine's gain over the default machine's knobs is not measurable")
    assert f"(95% interval {low:+.3f} req/s to {high:+.3f} req/s)" in result["sentence"]
    assert all(row["share"] is None and row["share_interval"] is None for row in result["path"])
    # every trial alike (a bound the groups do not touch, such as a slow backend): no interval of "+0.000 to +0.000"
    same = ablation.analyze(GROUPS, lambda config: [150.0, 150.0], "req/s", resamples=200)
    assert same["gain_interval"] == (0.0, 0.0) and same["sentence"] == (
        "The tuned machine's gain over the default machine's knobs is not measurable here (the default and the tuned "
        "configuration measured the same in every trial): no group's share of it can be told.")


def test_a_group_the_tuning_cannot_do_without_is_named_even_when_the_whole_gain_is_not_measurable():
    # as measured on this host: gc alone breaks the machine (0 answered without error) unless mpm frees the memory
    # it needs; the tuned machine is no faster than the default one, but without mpm it breaks
    result = ablation.analyze(GROUPS, _measure(lambda c: -1.0 * ("gc" in c and "mpm" not in c)), "req/s",
                              resamples=2000)
    low, high = result["gain_interval"]
    assert low <= 0 <= high
    mpm = next(r for r in result["path"] if r["group"] == "mpm")
    assert mpm["loo_loss"] == pytest.approx(1.0, abs=0.01) and mpm["interacts"] and not mpm["measurable"]
    said = result["sentence"]
    assert said.startswith("The tuned machine's gain over the default machine's knobs is not measurable")
    assert re.search(r"; yet without mpm the tuned machine changes by -(1\.00\d|0\.99\d) req/s \(95% interval "
                     r"-1\.0\d\d req/s to -0\.99\d req/s\)", said), said
    assert re.search(r"\), far from what it gained alone on the path \([+-]0\.00\d req/s\): it matters with the "
                     r"other groups", said), said
    # gc is on the path after mpm: without it the tuned machine loses nothing, so it is not named
    assert "without gc" not in said and said.endswith(".")


def test_a_group_that_needs_another_comes_after_it_and_leaves_with_it():
    result = ablation.analyze(GROUPS, _measure(lambda c: 0.3 * ("apr" in c)), "req/s", resamples=2000)
    order = [r["group"] for r in result["path"]]
    assert order.index("ajp") < order.index("apr")
    ajp = next(r for r in result["path"] if r["group"] == "ajp")
    assert "apr" not in ajp["loo_config"] and "ajp" not in ajp["loo_config"]
    assert ajp["loo_loss"] == pytest.approx(0.3, abs=0.01)     # without ajp, apr cannot run: its gain goes too


def test_groups_that_only_work_together_are_flagged_as_interacting():
    result = ablation.analyze(GROUPS, _measure(lambda c: 0.3 * ({"synergy_a", "synergy_b"} <= c)), "req/s",
                              resamples=2000)
    # Greedily, the first of the pair gains nothing alone and the second gets all the gain; without either the
    # whole gain is lost: the first one's forward gain and its leave-one-out loss disagree.
    first, second = (r for r in result["path"] if r["group"] in ("synergy_a", "synergy_b"))
    assert first["interacts"] and first["gain"] == pytest.approx(0, abs=0.01)
    assert first["loo_loss"] == pytest.approx(0.3, abs=0.01) and second["loo_loss"] == pytest.approx(0.3, abs=0.01)
    assert result["interacting"] == [first["group"]]
    assert f"{first['group']} interacts" in result["sentence"]
    assert result["gain"] == pytest.approx(0.3, abs=0.01)


def _row(group, gain, gain_interval, share, loo_loss, loo_interval):
    measurable = not gain_interval[0] <= 0 <= gain_interval[1]
    return {"group": group, "gain": gain, "gain_interval": gain_interval, "share": share, "measurable": measurable,
            "share_interval": (share - 0.35, share + 0.6) if share is not None else None, "loo_loss": loo_loss,
            "loo_interval": loo_interval,
            "interacts": gain_interval[1] < loo_interval[0] or loo_interval[1] < gain_interval[0]}


def test_the_sentence_names_a_group_whose_step_was_noise_but_whose_removal_is_not():
    # as this host's full ablation measured it: ajp's step explains most of a small gain; without ajp or the worker
    # MPM the tuned machine breaks (the OOM killer); gc_heap's step is lost in noise, its removal is not
    rows = [_row("connector", 2.1, (-2.2, 5.6), 0.25, 5.3, (-0.1, 10.6)),
            _row("ajp", 7.2, (5.7, 8.9), 0.84, 809.8, (790.7, 835.8)),
            _row("httpd_mpm", -5.6, (-13.5, -0.01), -0.66, 800.2, (788.9, 818.1)),
            _row("gc_heap", 6.8, (-0.4, 14.7), 0.8, 7.3, (5.5, 9.1))]
    said = ablation.sentence(rows, (5.0, 13.8), "req/s")
    assert said.startswith("ajp explains 84% of the gain (intervals summed: 49% to 144%); ")
    assert ("; without gc_heap the tuned machine changes by -7.300 req/s (95% interval -9.100 req/s to -5.500 "
            "req/s), though its step on the path was not measurable; connector changed nothing measurable; ") in said
    assert said.endswith("ajp and httpd_mpm interact with other groups: without ajp the tuned machine changes by "
                         "-809.8 req/s (95% interval -835.8 req/s to -790.7 req/s) and without httpd_mpm the tuned "
                         "machine changes by -800.2 req/s (95% interval -818.1 req/s to -788.9 req/s), far from what "
                         "each gained alone on the path.")
