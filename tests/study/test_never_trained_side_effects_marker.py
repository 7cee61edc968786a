"""analysis.json keeps the numbers of an arm with a run that never trained as read (calib builds its rows from the
per-seed accuracies; the report reads the side-effect entries to print "never trained" in their place) but marks them
as no finding: ``arms[ARM]["not_findings"]`` lists the fields (accuracy, gains and side effects of every axis, the
sigmoid fits) and why; every arm's gains vs a control arm that never trained are marked the same way
(gradprobe.study.never_trained_arms.not_findings).

The studies: test_never_trained_everywhere._study (tests/study_helpers.make_study with 6 seeds and a metrics.jsonl in
every run folder)."""

from __future__ import annotations

import json

import pytest

from gradprobe.study.analysis import analyze, format_rankings

from test_never_trained_everywhere import CONTROL_WHY, LR_BROKEN, LR_TEXT, LR_WHY, _study

AXES = ("updates", "generated_tokens", "flops", "device_seconds")
GAINS = ("gain_vs_grpo", "gain_ci", "gain_vs_grpo_ci_two_way", "gain_sd", "gain_seeds", "disagreement")
OWN = ("accuracy", "ci", *GAINS, "gain_vs_initial", "gain_vs_initial_ci", "gain_vs_initial_ci_two_way", "side_effects")
NOT_A_FINDING = ('a run that never trained measures a broken setup: these numbers are kept as read, not as findings '
                 '(the report shows "never trained" in their place)')


def test_an_arm_that_never_trained_has_its_side_effects_marked_not_findings(tmp_path):
    root = _study(tmp_path / "lr", LR_BROKEN)  # grpo_2xlr's seeds 0 and 3 never trained
    result = analyze(root, figures=False)
    written = json.loads((root / "analysis.json").read_text())
    arm = written["arms"]["grpo_2xlr"]
    # before: no marker, the side effects stood in analysis.json as the arm's findings
    assert arm["not_findings"] == {"fields": [f"{a}.{k}" for a in AXES for k in OWN] + ["sigmoid"],
                                   "reason": f"{LR_WHY}: {NOT_A_FINDING}"}
    assert "generated_tokens.side_effects" in arm["not_findings"]["fields"]
    # the numbers are kept as read (calib reads per_seed; the report prints "never trained" in their place)
    assert arm["generated_tokens"]["side_effects"] == pytest.approx(
        {"response_length": 20.0, "format_rate": 0.9, "kl_init": 0.1})
    assert written["arms"]["grpo"]["not_findings"] is None and written["arms"]["mc_value"]["not_findings"] is None
    assert result["arms"]["grpo_2xlr"]["not_findings"] == arm["not_findings"]
    assert f"  grpo_2xlr     never trained: {LR_TEXT}" in format_rankings(result).splitlines()  # still renders


def test_gains_vs_a_control_arm_that_never_trained_are_marked_in_every_arm(tmp_path):
    result = analyze(_study(tmp_path / "ctrl", {("grpo", 2): {}}), write=False, figures=False)
    grpo = result["arms"]["grpo"]["not_findings"]
    assert grpo["reason"] == f"{CONTROL_WHY}: {NOT_A_FINDING}"
    assert "generated_tokens.side_effects" in grpo["fields"] and "sigmoid" in grpo["fields"]
    for arm in ("mc_value", "grpo_2xlr"):  # their own accuracy and side effects are findings, their gains are not
        assert result["arms"][arm]["not_findings"] == {
            "fields": [f"{a}.{k}" for a in AXES for k in GAINS],
            "reason": f"the control arm {CONTROL_WHY}: {NOT_A_FINDING}"}, arm
    assert result["arms"]["mc_value"]["generated_tokens"]["gain_vs_grpo"] is not None  # kept as read
    assert "gains vs grpo: not shown, the control arm " + CONTROL_WHY in format_rankings(result)
