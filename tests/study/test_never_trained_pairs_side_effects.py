"""An arm with a run that never trained (every update of its metrics.jsonl had every advantage 0) is no sample of the
arm's effect where the analysis's rankings already leave it out (tests/study/test_never_trained_everywhere.py) but
two readers still used it: the per-item paired differences (gradprobe.study.power.paired_item_differences) that
calib's held-out split of the seed-noise floor (calib.noise_floor.heldout_floor) reads, and the report's side effects
(gradprobe.study.report.format_rankings). The first leaves the arm out (every arm, when the control arm never
trained) and says why in its entry; calib lists it as not split, with its seeds and the cause, where it prints the
floor; the report reads "never trained: SEEDS AND CAUSE" in place of the arm's side effects.

The studies: test_never_trained_everywhere._study (tests/study_helpers.make_study with 6 seeds, 40 held-out items
and a metrics.jsonl in every run folder)."""

from __future__ import annotations

import numpy as np
import pytest

from calib.cli import _print_heldout
from calib.noise_floor import heldout_floor
from calib.report_html import _heldout_html
from gradprobe.study.analysis import analyze, format_rankings
from gradprobe.study.never_trained_arms import never_trained_runs
from gradprobe.study.power import paired_item_differences
from gradprobe.study.reading import load_runs

from study_helpers import ITEMS
from test_never_trained_everywhere import CONTROL_WHY, FLAT, LR_BROKEN, LR_TEXT, LR_WHY, _study

SEEDS = 6
#: why calib does not split an arm with a run that never trained, after "left out, ARM never trained (...)"
NOT_NOISE = ("a run that never trained (every update had every advantage 0) samples a broken setup, not the arm's seed "
             "noise")
#: mc_value's paired differences from grpo at the matched 1000 tokens, per seed (points: (k - k_grpo) / 40 items)
MC_DIFFS = [-5.0, -5.0, -10.0, -2.5, -7.5, -7.5]


def _records(study, arm: str) -> list[dict]:
    df = load_runs(study)
    return never_trained_runs(study, zip(df["arm"], df["seed"]))[arm]


def test_an_arm_that_never_trained_is_left_out_of_the_paired_differences_and_says_why(tmp_path):
    ok = paired_item_differences(_study(tmp_path / "ok", {}))
    broken_dir = _study(tmp_path / "lr", LR_BROKEN)  # grpo_2xlr's seeds 0 and 3 never trained
    broken = paired_item_differences(broken_dir)
    # before: grpo_2xlr's 6 seeds x 40 items were paired as if its runs had trained
    assert ok["grpo_2xlr"]["D"].shape == (SEEDS, ITEMS) and ok["grpo_2xlr"]["left_out"] is None
    assert broken["grpo_2xlr"] == {"diffs": None, "D": None, "items": None, "left_out": LR_WHY,
                                   "never_trained": {"grpo_2xlr": _records(broken_dir, "grpo_2xlr")}}
    assert [(r["seed"], r["cause"], r["updates"]) for r in broken["grpo_2xlr"]["never_trained"]["grpo_2xlr"]] == [
        (0, "flat", 10), (3, "truncated", 10)]
    mc = broken["mc_value"]  # the arm that trained: paired as before
    assert (mc["items"], mc["left_out"], mc["never_trained"]) == (ITEMS, None, {})
    np.testing.assert_allclose(mc["diffs"], MC_DIFFS, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(mc["D"], ok["mc_value"]["D"])


def test_a_control_arm_that_never_trained_leaves_every_arm_out(tmp_path):
    control_dir = _study(tmp_path / "ctrl", {("grpo", 2): {}})
    pairs = paired_item_differences(control_dir)
    grpo = {"grpo": _records(control_dir, "grpo")}
    assert pairs == {a: {"diffs": None, "D": None, "items": None, "never_trained": grpo,
                         "left_out": f"the control arm {CONTROL_WHY}"} for a in ("mc_value", "grpo_2xlr")}
    both_dir = _study(tmp_path / "both", {("grpo", 2): {}, ("grpo_2xlr", 0): {}})
    both = paired_item_differences(both_dir)
    assert both["grpo_2xlr"]["left_out"] == (f"grpo_2xlr never trained (seed 0: {FLAT} (10 updates)); "
                                             f"the control arm {CONTROL_WHY}")
    assert list(both["grpo_2xlr"]["never_trained"]) == ["grpo_2xlr", "grpo"]
    assert both["mc_value"]["left_out"] == f"the control arm {CONTROL_WHY}"


def test_calib_does_not_split_the_arm_and_prints_why(tmp_path, capsys):
    ok, broken = _study(tmp_path / "ok", {}), _study(tmp_path / "lr", LR_BROKEN)
    r = heldout_floor([broken], resamples=2000)
    assert [(a["study"], a["arm"], a["seeds"]) for a in r["arms"]] == [("lr@x", "mc_value", SEEDS)]
    assert r["runs"] == SEEDS  # before: 12, grpo_2xlr's seeds counted as seed noise
    why = f"lr@x/grpo_2xlr: left out, {LR_WHY}: {NOT_NOISE}"
    assert r["skipped"] == [why]
    alone = heldout_floor([ok], keep={("ok@x", "mc_value")}, resamples=2000)  # mc_value's split is unchanged
    assert [f["estimate"] for f in r["floors"]] == pytest.approx([f["estimate"] for f in alone["floors"]], rel=1e-12)
    assert r["heldout_share"] == pytest.approx(alone["heldout_share"], rel=1e-12)
    _print_heldout(r)
    assert f"{'':<26}not split: {why}" in capsys.readouterr().out.splitlines()
    assert f"Not split: {why.replace(chr(39), '&#x27;')}." in _heldout_html(r)


def _side_effect_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("side effects at matched generated_tokens"))
    return lines[start + 1:lines.index("", start)]


def test_the_report_shows_never_trained_in_place_of_an_arms_side_effects(tmp_path):
    trained = analyze(_study(tmp_path / "ok", {}), write=False, figures=False)
    result = analyze(_study(tmp_path / "lr", LR_BROKEN), write=False, figures=False)
    grpo = "  grpo          response_length 20, format_rate 0.9, kl_init 0.1"
    mc = "  mc_value      response_length 12, format_rate 0.98, kl_init 0.02"
    # before: grpo_2xlr's side effects were shown as numbers, as an effect of doubling the learning rate
    assert _side_effect_lines(format_rankings(trained)) == [
        grpo, mc, "  grpo_2xlr     response_length 20, format_rate 0.9, kl_init 0.1"]
    assert _side_effect_lines(format_rankings(result)) == [grpo, mc, f"  grpo_2xlr     never trained: {LR_TEXT}"]
    # analysis.json keeps the numbers (as it keeps the fits and gains the report does not show)
    assert result["arms"]["grpo_2xlr"]["generated_tokens"]["side_effects"] == pytest.approx(
        {"response_length": 20.0, "format_rate": 0.9, "kl_init": 0.1})
    control = analyze(_study(tmp_path / "ctrl", {("grpo", 2): {}}), write=False, figures=False)
    assert _side_effect_lines(format_rankings(control)) == [
        f"  grpo          never trained: seed 2: {FLAT} (10 updates)", mc,
        "  grpo_2xlr     response_length 20, format_rate 0.9, kl_init 0.1"]  # an arm's own means, not vs grpo
