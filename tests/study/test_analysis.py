"""Study analysis on hand-made study folders (tests/study/study_helpers.py): reading within the
promised eval interval, matched values on every axis, paired t and two-way intervals against
direct computations, hypotheses with exact p-values and Holm, side effects, determinism, the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import analyze, format_rankings, load_eval_items
from gradprobe.study.reading import interpolate, promised_gap, read_point
from gradprobe.study.stats import paired_t, two_way_bootstrap

from study_helpers import ITEMS, PLAN, aggregate_items, item_string, make_study

N = 2000  # bootstrap resamples in these tests


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("handmade"))


@pytest.fixture(scope="module")
def result(study):
    return analyze(study, n_resamples=N)


def _pts(k) -> float:
    return 100.0 * k / ITEMS


# ----------------------------------------------------------------------------- reading a curve

def test_interpolation_is_linear_between_eval_points_and_never_extrapolates():
    x, y = [0, 100, 300], [0.1, 0.3, 0.2]
    assert interpolate(x, y, 50) == pytest.approx(0.2) and interpolate(x, y, 200) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="outside the run's eval range"):
        interpolate(x, y, 301)
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolate([0, 100, 100], y, 50)


def test_promised_gap_is_the_promised_interval_that_holds_the_point():
    pts = [0.0, 2.0, 5.0, 10.0]
    assert [promised_gap(pts, a) for a in (0.0, 1.0, 2.0, 3.0, 10.0)] == [0.0, 2.0, 2.0, 3.0, 5.0]
    assert promised_gap(pts, 11.0) == math.inf and promised_gap([], 1.0) == math.inf


def test_a_read_within_the_promised_interval_plus_one_update_is_interpolated_a_wider_one_refused():
    # the eval promised at 1000 tokens came at the first update after it (1012): 512 apart, 5 updates of
    # 102.4 tokens, allowed 500 + 102.4
    r = read_point([0, 500, 1012], [0, 5, 10], 1000, gap=500.0)
    assert r["status"] == "interpolated" and r["rows"] == (1, 2) and r["w"] == pytest.approx(500 / 512)
    assert r["allowed"] == pytest.approx(602.4)
    r = read_point([0, 1012], [0, 10], 500, gap=500.0)  # a skipped eval: 1012 apart
    assert r["status"] == "gap_exceeded" and r["gap"] == 1012
    assert read_point([0, 500, 1012], [0, 5, 10], 500, gap=500.0)["status"] == "exact"
    assert read_point([0, 500, 1012], [0, 5, 10], 700, gap=math.inf)["status"] == "gap_exceeded"  # nothing promised
    assert read_point([0, 500], [0, 5], 700, gap=500.0)["status"] == "outside"


# ----------------------------------------------------------------------------- the analysis

def test_matched_values_on_every_axis(study, result):
    m = result["matched"]
    assert m["updates"]["budget"] == 2 and m["updates"]["reads"] == {"exact": 24}
    assert m["generated_tokens"]["budget"] == 1000 and m["generated_tokens"]["reads"] == {"final": 24}
    assert m["generated_tokens"]["overshoot"]["max"] == 20.0 and m["flops"]["reads"] == {"final": 24}
    # no device_seconds promise: only the runs that end exactly at the smallest final value are read
    assert m["device_seconds"]["budget"] == 10.0 and m["device_seconds"]["reads"] == {"exact": 2, "gap_exceeded": 22}
    g, mc, lr2 = (result["arms"][a] for a in ("grpo", "mc_value", "grpo_2xlr"))
    assert g["generated_tokens"]["per_seed"] == {s: pytest.approx(_pts(16 + s % 3)) for s in range(8)}
    assert mc["generated_tokens"]["per_seed"] == {s: pytest.approx(_pts(14 + s % 2)) for s in range(8)}
    assert g["updates"]["per_seed"] == {s: pytest.approx(_pts(11)) for s in range(8)}
    assert g["device_seconds"]["per_seed"] == {0: pytest.approx(_pts(16)), **{s: None for s in range(1, 8)}}
    assert g["device_seconds"]["gap_exceeded"] == list(range(1, 8)) and mc["device_seconds"]["seeds"] == 0
    assert result["initial"]["accuracy"] == pytest.approx(20.0) and result["initial"]["ci"] == pytest.approx([20, 20])
    # rankings: per update mc_value first; at matched tokens and FLOPs last; nothing is read on every seed in time
    assert result["rankings"] == {"updates": ["mc_value", "grpo", "grpo_2xlr"],
                                  "generated_tokens": ["grpo_2xlr", "grpo", "mc_value"],
                                  "flops": ["grpo_2xlr", "grpo", "mc_value"], "device_seconds": []}
    assert {p.name for p in (study / "figures").glob("*.png")} == {
        "accuracy_vs_updates.png", "accuracy_vs_generated_tokens.png", "accuracy_vs_flops.png",
        "accuracy_vs_device_seconds.png", "lr_sweep.png"}  # grpo and grpo_2xlr: a learning-rate sweep


def test_gains_are_paired_with_t_intervals(result):
    mc = result["arms"]["mc_value"]["generated_tokens"]
    d = [_pts(14 + s % 2) - _pts(16 + s % 3) for s in range(8)]
    ref = paired_t(d)
    assert mc["gain_vs_grpo"] == pytest.approx(np.mean(d)) and mc["gain_ci"] == pytest.approx(ref["ci"])
    assert mc["gain_sd"] == pytest.approx(np.std(d, ddof=1)) and mc["gain_seeds"] == 8
    g = result["arms"]["grpo"]["generated_tokens"]
    assert g["gain_vs_grpo"] == 0.0 and g["gain_ci"] == [0.0, 0.0]
    acc = paired_t([_pts(16 + s % 3) for s in range(8)])
    assert g["accuracy"] == pytest.approx(acc["estimate"]) and g["ci"] == pytest.approx(acc["ci"])
    assert g["gain_vs_initial"] == pytest.approx(np.mean([_pts(8 + s % 3) for s in range(8)]))


def test_two_way_intervals_from_the_per_item_results(study, result):
    t = np.array([[float(c) for c in item_string(s, 14 + s % 2)] for s in range(8)])
    c = np.array([[float(c) for c in item_string(s, 16 + s % 3)] for s in range(8)])
    ref = two_way_bootstrap(t, c, n_resamples=N, seed=0)
    mc = result["arms"]["mc_value"]["generated_tokens"]
    assert mc["gain_vs_grpo_ci_two_way"] == pytest.approx(ref["ci"]) and mc["disagreement"] == ref["disagreement"]
    t_ci = mc["gain_ci"]
    assert ref["ci"][1] - ref["ci"][0] > t_ci[1] - t_ci[0]  # the held-out items add their sampling error
    assert result["two_way"]["items"] == ITEMS and result["two_way_reason"] is None
    items = load_eval_items(study)
    assert list(items.columns) == ["arm", "seed", "update", "generated_tokens", "flops", "device_seconds", "mode",
                                   "sample", "item", "correct"]
    assert len(items) == 8 * (4 + 3 + 4) * ITEMS and set(items["mode"]) == {"greedy"}
    final = items[(items["arm"] == "mc_value") & (items["seed"] == 3) & (items["update"] == 2)]
    assert final["correct"].sum() == 15 and final["generated_tokens"].iloc[0] == 1020


def test_aggregated_items_read_like_the_run_files(tmp_path):
    a = make_study(tmp_path / "a")
    b = make_study(tmp_path / "b")
    aggregate_items(b)
    assert not list(b.glob("runs/*/seed*/eval_items.jsonl"))
    ia, ib = load_eval_items(a), load_eval_items(b)
    assert ia.sort_values(list(ia.columns)).reset_index(drop=True).equals(
        ib.sort_values(list(ib.columns)).reset_index(drop=True))
    ra, rb = (analyze(x, write=False, figures=False, n_resamples=N) for x in (a, b))
    assert ra["hypotheses"] == rb["hypotheses"]


def test_a_study_without_per_item_results_says_so(tmp_path):
    res = analyze(make_study(tmp_path, items=False), write=False, figures=False, n_resamples=N)
    assert res["two_way"] is None and "no per-item eval results" in res["two_way_reason"]
    assert res["arms"]["mc_value"]["generated_tokens"]["gain_vs_grpo_ci_two_way"] is None
    assert all(h["ci_two_way"] is None for h in res["hypotheses"]) and res["hypotheses"][0]["status"] == "PASSED"
    assert "n/a: the study saved no per-item eval results" in format_rankings(res)


def test_side_effects_at_matched_budgets(result):
    se = {a: result["arms"][a]["generated_tokens"]["side_effects"] for a in ("grpo", "mc_value")}
    assert se["grpo"] == pytest.approx({"response_length": 20.0, "format_rate": 0.9, "kl_init": 0.1})
    assert se["mc_value"] == pytest.approx({"response_length": 12.0, "format_rate": 0.98, "kl_init": 0.02})
    assert result["arms"]["grpo"]["updates"]["side_effects"]["kl_init"] == pytest.approx(0.02)


def test_sigmoid_per_axis_marks_what_is_identified(result):
    sig = result["arms"]["grpo"]["sigmoid"]
    assert set(sig) == {"updates", "generated_tokens", "flops"}
    assert sig["updates"]["x"] == "updates" and sig["updates"]["n_points"] == 32
    for fit in sig.values():
        for p in fit["params"].values():
            assert (p["ci"] is None) == (not p["identified"])
    assert "needs eval points at >= 3 distinct" in result["arms"]["mc_value"]["sigmoid"]["updates"]["error"]


def test_hypotheses_exact_p_values_and_holm(result):
    hyp = {h["name"]: h for h in result["hypotheses"]}
    h = hyp["grpo_learns"]  # differences 20-25 points >= 4 on all 8 seeds: the exact floor
    assert h["estimate"] == pytest.approx(np.mean([_pts(8 + s % 3) for s in range(8)])) and h["seeds"] == 8
    assert h["p_value"] == 1 / 256 == h["p_floor"] and h["p_text"] == "p = 1/256 (the smallest attainable with 8 seeds)"
    assert h["ci_level"] == pytest.approx(0.9) and h["test"] == "exact sign-flip, 256 patterns"
    assert hyp["dense_better"]["p_value"] == 1.0 and hyp["dense_better"]["status"] == "not passed"
    assert hyp["double_lr"]["p_value"] == 1 / 128 and hyp["double_lr"]["ci_level"] == pytest.approx(0.95)
    assert hyp["per_update"]["estimate"] == pytest.approx(np.mean([_pts(3 + s % 2) for s in range(8)]))
    assert hyp["at_flops"]["estimate"] == pytest.approx(hyp["dense_not_worth_tokens"]["estimate"])
    # Holm by hand: raw 1/256 x4, 1/128, 1 -> 6/256 (cumulative max), ..., 1
    adj = [hyp[n]["p_adjusted"] for n in ("grpo_learns", "dense_not_worth_tokens", "dense_better", "double_lr",
                                         "per_update", "at_flops")]
    assert adj == pytest.approx([6 / 256, 6 / 256, 1.0, 6 / 256, 6 / 256, 6 / 256])
    assert [h["status"] for h in result["hypotheses"]] == ["PASSED", "PASSED", "not passed", "PASSED", "PASSED",
                                                           "PASSED"]
    text = format_rankings(result)
    assert "grpo_learns: PASSED" in text and "p = 1/256 (the smallest attainable with 8 seeds)" in text
    assert "Holm-adjusted p = 0.0234" in text


@pytest.mark.parametrize("seeds, status, text", [(1, "not testable (1 seed)", "not testable (1 seed)"),
                                                 (4, "not testable (4 seeds)", "p = 1/16 (the smallest attainable")])
def test_too_few_seeds_are_not_testable(tmp_path, seeds, status, text):
    res = analyze(make_study(tmp_path, seeds=seeds), write=False, figures=False, n_resamples=N)
    h = res["hypotheses"][0]
    assert h["status"] == status and not h["passed"] and h["p_adjusted"] is None and h["holm_family"] == 0
    if seeds == 1:
        assert h["p_value"] is None and h["ci"] is None and h["ci_two_way"] is None
    else:
        assert h["p_value"] == 1 / 16 and "needs >= 5 seeds" in h["untestable_reason"]
    line = [x for x in format_rankings(res).splitlines() if x.startswith("  grpo_learns:")][0]
    assert status in line and text in line and "not passed" not in line


def test_a_skipped_eval_is_refused_not_interpolated(tmp_path):
    """grpo seeds 0-3 lost their eval at update 5: a hypothesis at 5 updates reads only seeds 4-7."""
    plan = PLAN.split("[[hypotheses]]")[0] + (
        '[[hypotheses]]\nname = "lr_at_5"\nstatement = "s"\ntest = "sign_flip"\narms = ["grpo_2xlr", "grpo"]\n'
        'at = "updates"\nbudget = 5\n')
    study = make_study(tmp_path, plan=plan)
    lines = (study / "runs.csv").read_text().splitlines()
    (study / "runs.csv").write_text("\n".join(x for x in lines if not (x.startswith("grpo,") and x.split(",")[1] in
                                                                       "0123" and x.split(",")[2] == "5")) + "\n")
    h = analyze(study, write=False, figures=False, n_resamples=N)["hypotheses"][0]
    assert h["excluded_seeds"] == [0, 1, 2, 3] and h["seeds"] == 4 and sorted(h["per_seed"]) == [4, 5, 6, 7]
    assert h["estimate"] == pytest.approx(_pts(1)) and h["status"] == "not testable (4 seeds)"


def test_an_axis_the_runs_do_not_record(tmp_path):
    res = analyze(make_study(tmp_path, flops=False, side_effects=False), n_resamples=N)
    assert not res["matched"]["flops"]["recorded"] and "flops" not in res["rankings"]
    h = {h["name"]: h for h in res["hypotheses"]}["at_flops"]
    assert h["status"] == "not evaluated" and "runs.csv has no flops values" in h["error"]
    assert res["arms"]["grpo"]["generated_tokens"]["side_effects"] == {k: None for k in
                                                                      ("response_length", "format_rate", "kl_init")}
    assert not (tmp_path / "figures" / "accuracy_vs_flops.png").exists()
    assert "at_flops: not evaluated" in format_rankings(res)


def test_analysis_json_is_the_same_on_every_rerun(study):
    """Issue 14: `--analyze-only` on the same folder must rewrite the same analysis.json."""
    analyze(study, figures=False, n_resamples=N)
    first = (study / "analysis.json").read_bytes()
    analyze(study, figures=False, n_resamples=N)
    assert (study / "analysis.json").read_bytes() == first


def test_runs_stopped_by_another_budget_are_matched_at_a_promised_point(tmp_path):
    study = make_study(tmp_path, plan=PLAN.replace("generated_tokens = 1000", "generated_tokens = 1015"))
    tok = analyze(study, write=False, figures=False, n_resamples=N)["matched"]["generated_tokens"]
    assert tok["budget"] == 1000.0 and not tok["final_eval"] and "largest promised" in tok["source"]


def test_analyze_only_cli(study, capsys):
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    out = capsys.readouterr().out
    assert "at matched tokens" in out and "dense_not_worth_tokens: PASSED" in out and "sigmoid fits" in out
    assert json.loads((study / "analysis.json").read_text())["rankings"]["generated_tokens"][0] == "grpo_2xlr"


def test_analyze_only_without_runs_csv(tmp_path, capsys):
    assert cli_main(["study", "--analyze-only", "--out", str(tmp_path)]) == 2
    assert "runs.csv does not exist" in capsys.readouterr().err
