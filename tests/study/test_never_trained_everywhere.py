"""An arm with a run that never trained (every update of its metrics.jsonl had every advantage 0) yields no finding
anywhere in the analysis, not only in the rankings (tests/study/test_ranking_never_trained.py): a hypothesis with
that arm is not tested and left out of the Holm family, its point of the learning-rate sweep is not used (no best
lr_scale from it), no detectable effect is computed for it (nor for any arm when the control arm never trained),
and the report says "never trained" with the seeds and the cause in place of those numbers.

The study: tests/study_helpers.make_study with 6 seeds (so that the sign-flip hypotheses are testable: floor 1/64,
two-sided 1/32) and a metrics.jsonl in every run folder."""

from __future__ import annotations

import json

import pytest

from gradprobe.study.analysis import analyze, format_rankings

from study_helpers import make_study
from test_ranking_never_trained import _metrics, _update  # same folder: the metrics lines of a run

ARMS, SEEDS = ("grpo", "mc_value", "grpo_2xlr"), 6
FLAT = "every group's rewards were equal (all groups flat: zero variance)"
TRUNCATED = "every completion was truncated (truncation_rate 1.0), so every group's rewards were equal"
#: grpo_2xlr's seeds 0 and 3 never trained (flat groups, every completion truncated); every other run trained
LR_BROKEN = {("grpo_2xlr", 0): {}, ("grpo_2xlr", 3): {"truncation": 1.0}}
LR_TEXT = f"seed 0: {FLAT} (10 updates); seed 3: {TRUNCATED} (10 updates)"  # report.never_trained_text
LR_WHY = f"grpo_2xlr never trained ({LR_TEXT})"
#: the control arm grpo's seed 2 never trained
CONTROL_WHY = f"grpo never trained (seed 2: {FLAT} (10 updates))"


def _study(root, never: dict):
    """make_study (6 seeds) with a metrics.jsonl in every run folder: ``never[(arm, seed)]`` the kwargs of its 10
    untrained updates, the other runs trained (every advantage 0 on update 1 only)."""
    root = make_study(root, seeds=SEEDS)
    for arm in ARMS:
        for seed in range(SEEDS):
            kw = never.get((arm, seed))
            _metrics(root, arm, seed, [_update(u, adv=0.0, **kw) for u in range(1, 11)] if kw is not None else
                     [_update(1, adv=0.0), *(_update(u, adv=0.5) for u in range(2, 11))])
    return root


@pytest.fixture(scope="module")
def lr_broken(tmp_path_factory):
    """(analysis, its report, analysis.json as written) of the study whose grpo_2xlr never trained on seeds 0, 3."""
    root = _study(tmp_path_factory.mktemp("lr") / "s", LR_BROKEN)
    result = analyze(root, figures=False)
    return result, format_rankings(result), json.loads((root / "analysis.json").read_text())


@pytest.fixture(scope="module")
def control_broken(tmp_path_factory):
    """(analysis, its report) of the study whose control arm grpo never trained on seed 2."""
    result = analyze(_study(tmp_path_factory.mktemp("ctrl") / "s", {("grpo", 2): {}}), write=False, figures=False)
    return result, format_rankings(result)


def test_a_hypothesis_with_an_arm_that_never_trained_is_not_tested_nor_in_the_holm_family(lr_broken):
    result, text, written = lr_broken
    hyp = {h["name"]: h for h in result["hypotheses"]}
    double = hyp["double_lr"]  # grpo_2xlr vs grpo; before: tested, +2.92 points, p 1/32, Holm p 0.0938 over 6
    assert double["status"] == "not tested (never trained)"
    assert double["untestable_reason"] == LR_WHY
    assert (double["testable"], double["passed"], double["estimate"], double["p_value"], double["p_adjusted"],
            double["seeds"], double["error"]) == (False, False, None, None, None, 0, None)
    assert double["never_trained"] == {"grpo_2xlr": result["arms"]["grpo_2xlr"]["never_trained"]}
    assert [r["seed"] for r in double["never_trained"]["grpo_2xlr"]] == [0, 3]
    # the family is the 5 others: Holm's smallest step is 5 x 1/64, not 6 x 1/64 = 0.09375 as before
    assert {h["holm_family"] for h in result["hypotheses"]} == {5}
    assert hyp["grpo_learns"]["p_adjusted"] == pytest.approx(5 / 64)
    assert hyp["grpo_learns"]["status"] == "not passed" and hyp["grpo_learns"]["never_trained"] == {}
    assert hyp["dense_better"]["p_adjusted"] == pytest.approx(1.0)
    assert {h["name"]: h["status"] for h in written["hypotheses"]}["double_lr"] == "not tested (never trained)"
    assert "hypotheses (Holm-corrected over the 5 testable):" in text
    assert f"  double_lr: not tested: {LR_WHY}; out of the Holm family" in text.splitlines()
    assert "double_lr: not passed" not in text and "estimate +2.92" not in text


def test_the_lr_sweep_does_not_use_a_point_that_never_trained(lr_broken):
    result, text, _ = lr_broken
    group = result["lr_sweep"]["groups"][0]
    assert group["arms"] == ["grpo", "grpo_2xlr"] and group["reference"] == "grpo"
    tokens = group["axes"]["generated_tokens"]  # before: best grpo_2xlr (2x), "optimum at the edge"
    assert (tokens["best"], tokens["best_lr_scale"], tokens["optimum"], tokens["used"]) == (None, None, None, 1)
    assert tokens["optimum_note"] == ("not located: 1 lr_scale(s) read on every seed with no run that never "
                                      "trained, 2 needed (never trained: grpo_2xlr)")
    ref, broken = tokens["points"]
    assert ref["used"] is True and ref["never_trained"] == [] and ref["accuracy"] == pytest.approx(42.5)
    assert broken["used"] is False
    assert broken["note"] == f"not used: never trained ({LR_TEXT}); a broken run measures no learning rate"
    assert broken["never_trained"] == result["arms"]["grpo_2xlr"]["never_trained"]
    assert (broken["difference"], broken["difference_ci"], broken["difference_seeds"]) == (None, None, 0)
    assert broken["difference_note"] == f"no difference: {LR_WHY}"
    assert all(ax["best"] is None for ax in group["axes"].values())  # updates: before, best grpo (a tie with 2x)
    lines = text.splitlines()
    assert "    generated_tokens = 1,000: 1x 42.50 [+40.15, +44.85] (reference); 2x never trained (not used)" in lines
    assert f"    not used: {LR_WHY}; a broken run measures no learning rate" in lines
    assert "best 2x" not in text and "45.42" not in text


def test_no_detectable_effect_is_computed_for_an_arm_that_never_trained(lr_broken):
    result, text, _ = lr_broken
    d = result["detectable_effect"]
    assert d["per_arm"]["grpo_2xlr"] == {"sd": None, "seeds": 0, "effect": None, "reason": f"not computed: {LR_WHY}"}
    mc = d["per_arm"]["mc_value"]  # computed as before
    assert (mc["sd"], mc["seeds"], mc["reason"]) == (pytest.approx(2.622022120425379), 6, None)
    assert d["largest"] == pytest.approx(mc["effect"]) and mc["effect"] == pytest.approx(3.7614090885489886)
    assert d["reason"] is None
    line = next(x for x in text.splitlines() if x.startswith("detectable effect"))
    assert "(largest over arms: mc_value 3.76)" in line and "grpo_2xlr 1.46" not in line
    assert line.endswith(f"; not computed: {LR_WHY}")


def test_a_control_arm_that_never_trained_leaves_every_comparison_with_it_out(control_broken):
    result, text = control_broken
    assert {h["status"] for h in result["hypotheses"]} == {"not tested (never trained)"}  # each has grpo
    assert {h["untestable_reason"] for h in result["hypotheses"]} == {CONTROL_WHY}
    assert {h["holm_family"] for h in result["hypotheses"]} == {0}
    d = result["detectable_effect"]
    assert d["reason"] == f"not computed: the control arm {CONTROL_WHY}" and d["largest"] is None
    assert {a: (v["effect"], v["reason"]) for a, v in d["per_arm"].items()} == {
        "mc_value": (None, d["reason"]), "grpo_2xlr": (None, d["reason"])}
    tokens = result["lr_sweep"]["groups"][0]["axes"]["generated_tokens"]
    ref, other = tokens["points"]
    assert (ref["arm"], ref["used"], other["used"], tokens["best"]) == ("grpo", False, True, None)
    assert (other["difference"], other["difference_note"]) == (None, f"no difference: the reference {CONTROL_WHY}")
    lines = text.splitlines()
    assert f"detectable effect (at matched generated_tokens): not computed: the control arm {CONTROL_WHY}" in lines
    assert f"gains vs grpo: not shown, the control arm {CONTROL_WHY}" in lines
    assert "(accuracy points; ranked: the arms read on every seed)" in lines  # no "paired gain vs grpo" column
    assert "(-6.25)" not in text and "(+8.75)" not in text  # mc_value's gains vs grpo, shown before
    assert "    generated_tokens = 1,000: 1x never trained (not used); 2x 45.42 [+42.35, +48.48]" in lines


def test_the_lr_sweep_figure_draws_no_point_that_never_trained(lr_broken, tmp_path, monkeypatch):
    import gradprobe.study.lr_sweep_report as lr_report

    drawn = []

    def keep(*args, **kwargs):  # the figure plot_lr_sweep draws, kept to read its lines back
        fig, panels = subplots(*args, **kwargs)
        drawn.append(fig)
        return fig, panels

    subplots = lr_report.subplots
    monkeypatch.setattr(lr_report, "subplots", keep)
    path = lr_report.plot_lr_sweep(lr_broken[0]["lr_sweep"], tmp_path)
    assert path == tmp_path / "lr_sweep.png" and path.is_file()
    xs = {float(x) for ax in drawn[0].axes for line in ax.get_lines() for x in line.get_xdata()}
    assert xs == {1.0}  # grpo (1x) only; before: grpo_2xlr's 2x drawn as a used point and starred as the best
