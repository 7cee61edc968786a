"""Learning-rate sweep of a study (gradprobe.study.lr_sweep) on a hand-made study folder with
per-item results and on a copy of the shipped data/study_tiny: which arms form a sweep, the
matched accuracy and paired difference per lr_scale against scipy's t quantile in float64,
the best lr_scale, the edge flag, refused reads left out, the peak fit, the report and figure."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from gradprobe.study.analysis import analyze, format_rankings
from gradprobe.study.lr_sweep import EDGE_NOTE, lr_sweep, peak_fit, sweep_groups
from gradprobe.study.lr_sweep_report import plot_lr_sweep
from gradprobe.study.stats import two_way_bootstrap
from gradprobe.training.plan import parse_plan

from study_helpers import ITEMS, item_string, plan_head

N = 2000  # bootstrap resamples
SEEDS = 4
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "study_tiny"

PLAN = plan_head("lr_handmade", list(range(SEEDS)), train="lr = 1e-4\n") + """[budget]
generated_tokens = 1000
[eval]
every_tokens = 500
at_updates = [2, 5]
[arms."grpo_0.5xlr"]
reward = "outcome"
lr_scale = 0.5
[arms.grpo]
reward = "outcome"
[arms.grpo_2xlr]
reward = "outcome"
lr_scale = 2.0
[arms.grpo_4xlr]
reward = "outcome"
lr_scale = 4.0
[arms.grpo_g2]
reward = "outcome"
lr_scale = 2.0
group = 2
[arms.mc_value]
reward = "mc_value"
[arms.mc_value_2xlr]
reward = "mc_value"
lr_scale = 2.0
"""

# correct held-out items (of 40) per seed 0-3 at update 5 (500 tokens) and at the final eval (1000 + s tokens)
AT_5 = {"grpo_0.5xlr": [10, 11, 10, 11], "grpo": [11, 12, 11, 12], "grpo_2xlr": [12, 13, 12, 14],
        "grpo_4xlr": [14, 15, 14, 15], "grpo_g2": [9, 9, 9, 9], "mc_value": [11, 11, 12, 12],
        "mc_value_2xlr": [12, 11, 12, 13]}
FINAL = {"grpo_0.5xlr": [14, 15, 13, 16], "grpo": [17, 18, 16, 18], "grpo_2xlr": [19, 18, 18, 20],
         "grpo_4xlr": [15, 14, 16, 13], "grpo_g2": [30, 30, 30, 30], "mc_value": [15, 15, 16, 14],
         "mc_value_2xlr": [16, 17, 15, 16]}
REWARD = {"mc_value": "mc_value", "mc_value_2xlr": "mc_value"}
SCALE = {"grpo_0.5xlr": 0.5, "grpo_2xlr": 2.0, "grpo_4xlr": 4.0, "grpo_g2": 2.0, "mc_value_2xlr": 2.0}
DROPPED = ("grpo_4xlr", 3)  # this run lost its eval at update 5: its read there is refused


def make_lr_study(root: Path) -> Path:
    """plan.toml, runs.csv, study.json and runs/ARM/seedS/eval_items.jsonl consistent with AT_5/FINAL."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.toml").write_text(PLAN)
    cols = ["arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled", "reward",
            "lr_scale", "flops"]
    runs = []
    with open(root / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for arm in AT_5:
            for s in range(SEEDS):
                pts = [(0, 0, 8), (2, 200, 9), (5, 500, AT_5[arm][s]), (10, 1000 + s, FINAL[arm][s])]
                if (arm, s) == DROPPED:
                    pts.pop(2)
                lines = []
                for u, tok, k in pts:
                    w.writerow([arm, s, u, tok, float(u), k / ITEMS, "", REWARD.get(arm, "outcome"),
                                SCALE.get(arm, 1.0), 1e7 * tok])
                    lines.append({"update": u, "generated_tokens": tok, "flops": 1e7 * tok, "device_seconds": float(u),
                                  "greedy": item_string(s, k), "sampled": []})
                d = root / "runs" / arm / f"seed{s}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "eval_items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
                runs.append({"arm": arm, "seed": s, "status": "done"})
    (root / "study.json").write_text(json.dumps({"runs": runs, "finished": "2026-12-01T00:00:00+00:00"}))
    return root


def pts(ks) -> np.ndarray:
    return 100.0 * np.asarray(ks, dtype=np.float64) / ITEMS


def t_interval(x) -> list[float]:
    """Mean +- t_(n-1, 0.975) sd / sqrt(n), by hand in float64."""
    x = np.asarray(x, dtype=np.float64)
    half = student_t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return [x.mean() - half, x.mean() + half]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_lr_study(tmp_path_factory.mktemp("lr_study"))


@pytest.fixture(scope="module")
def result(study):
    return analyze(study, n_resamples=N)


def _group(res, first: str) -> dict:
    return next(g for g in res["lr_sweep"]["groups"] if g["arms"][0] == first)


# ----------------------------------------------------------------------------- grouping

def test_groups_are_the_arms_that_differ_only_by_the_learning_rate():
    plan = parse_plan(PLAN + '[arms.grpo_lr4]\nreward = "outcome"\nlr = 4e-4\n'
                      + '[arms.grpo_half]\nreward = "outcome"\nlr_scale = 4.0\nselection = "half"\n'
                      + '[arms.grpo_half_1x]\nreward = "outcome"\nselection = "half"\n', check_schedule=False)
    groups = sweep_groups(plan)
    assert [g["arms"] for g in groups] == [["grpo_0.5xlr", "grpo", "grpo_2xlr", "grpo_4xlr"],
                                           ["mc_value", "mc_value_2xlr"], ["grpo_half_1x", "grpo_half"]]
    g = groups[0]
    assert g["lr_scales"] == [0.5, 1.0, 2.0, 4.0] and g["reference"] == "grpo"
    # lr = 4e-4 is the plan's 1e-4 times 4: the same point as grpo_4xlr, which comes first in the plan
    assert g["duplicates"] == ["grpo_lr4"] and g["shared"] == {"reward": "outcome", "train": {}, "mc": {},
                                                                "selection": {}}
    assert groups[2]["shared"]["selection"]["rule"] == "half" and groups[1]["reference"] == "mc_value"
    # grpo_g2 (group = 2) is alone at its settings: no sweep; arms without runs are left out
    assert sweep_groups(plan, {"grpo", "grpo_g2", "mc_value", "mc_value_2xlr"})[0]["arms"] == ["mc_value",
                                                                                             "mc_value_2xlr"]
    assert sweep_groups(plan, {"grpo", "grpo_2xlr"})[0]["not_run"] == ["grpo_0.5xlr", "grpo_4xlr", "grpo_lr4"]


def test_no_sweep_without_two_learning_rates_of_one_setting():
    plan = parse_plan(PLAN.split('[arms."grpo_0.5xlr"]')[0] + '[arms.grpo]\nreward = "outcome"\n'
                      '[arms.mc_value_2xlr]\nreward = "mc_value"\nlr_scale = 2.0\n', check_schedule=False)
    out = lr_sweep(plan, {}, {})
    assert out["groups"] == [] and "differ only by lr_scale" in out["reason"]
    assert "no frozen plan.toml" in lr_sweep(None, {}, {})["reason"]


# ----------------------------------------------------------------------------- the hand-made study

def test_matched_tokens_means_intervals_differences_and_the_interior_optimum(result):
    g = _group(result, "grpo_0.5xlr")
    assert g["arms"] == ["grpo_0.5xlr", "grpo", "grpo_2xlr", "grpo_4xlr"] and g["reference"] == "grpo"
    r = g["axes"]["generated_tokens"]
    assert r["budget"] == 1000.0 and r["used"] == 4
    for p in r["points"]:
        acc = pts(FINAL[p["arm"]])
        assert p["used"] and p["seeds"] == 4 and p["refused_seeds"] == []
        assert p["accuracy"] == pytest.approx(acc.mean(), abs=1e-12)
        assert p["ci"] == pytest.approx(t_interval(acc), abs=1e-9)
        if p["arm"] != "grpo":
            d = acc - pts(FINAL["grpo"])
            assert p["difference"] == pytest.approx(d.mean(), abs=1e-12) and p["difference_seeds"] == 4
            assert p["difference_ci"] == pytest.approx(t_interval(d), abs=1e-9)
    # 2x: differences 5, 0, 5, 5 points, mean 3.75 +- 3.182 * 1.25: the interval holds 0
    two = r["points"][2]
    assert two["difference"] == pytest.approx(3.75) and two["difference_ci"][0] < 0 < two["difference_ci"][1]
    assert r["best"] == "grpo_2xlr" and r["best_lr_scale"] == 2.0
    assert r["optimum"] == "interior" and r["optimum_note"] == "interior: 1x < 2x < 4x"
    assert r["reference_within_best"] is True and "contains 0" in r["reference_within_best_note"]


def test_the_peak_fit_is_the_quadratic_in_log2_lr_scale_through_the_best_and_its_neighbours(result):
    """Best 2x: the bracket 1x, 2x, 4x (0.5x is left out of the fit), interpolated exactly."""
    fit = _group(result, "grpo_0.5xlr")["axes"]["generated_tokens"]["peak_fit"]
    x = np.log2([1.0, 2.0, 4.0])
    y = np.array([pts(FINAL[a]).mean() for a in ("grpo", "grpo_2xlr", "grpo_4xlr")])
    a, b, c = np.linalg.solve(np.stack([np.ones(3), x, x ** 2], axis=1), y)
    assert c < 0 and fit["concave"] and fit["coefficients"] == pytest.approx([c, b, a], abs=1e-9)
    assert fit["log2_lr_scale"] == pytest.approx(-b / (2 * c)) and fit["lr_scale"] == pytest.approx(2 ** (-b / (2 * c)))
    assert fit["accuracy"] == pytest.approx(a - b * b / (4 * c)) and fit["within_sweep"] and fit["residual_df"] == 0
    assert fit["points"] == 3 and "no interval" in fit["flag"] and "exact through 3 points" in fit["flag"]
    assert max(y) <= fit["accuracy"] <= max(y) + (max(y) - min(y))  # a vertex near the bracket's top, not far above it


def test_a_refused_read_is_not_used_and_the_optimum_at_the_edge_says_so(result):
    r = _group(result, "grpo_0.5xlr")["axes"]["updates"]
    assert r["budget"] == 5.0
    four = r["points"][3]
    assert four["arm"] == "grpo_4xlr" and not four["used"] and four["refused_seeds"] == [3] and four["seeds"] == 3
    assert "read on 3 of 4 seeds" in four["note"] and "gap wider than the promised eval interval" in four["note"]
    assert four["accuracy"] == pytest.approx(pts(AT_5["grpo_4xlr"][:3]).mean())  # the other seeds' mean, reported
    d = pts(AT_5["grpo_4xlr"][:3]) - pts(AT_5["grpo"][:3])
    assert np.ptp(d) == 0  # 7.5 on every seed: no spread, no t interval (it was [+7.50, +7.50])
    assert four["difference_seeds"] == 3 and four["difference_ci"] is None
    # 4x is the highest mean but not read on every seed: the best is 2x, the largest lr_scale read
    assert four["accuracy"] > r["points"][2]["accuracy"]
    assert r["best"] == "grpo_2xlr" and r["used"] == 3 and r["optimum"] == "edge"
    assert r["optimum_note"].startswith(EDGE_NOTE) and "above 2x" in r["optimum_note"]
    d2 = pts(AT_5["grpo_2xlr"]) - pts(AT_5["grpo"])  # 2.5, 2.5, 2.5, 5
    lo, hi = t_interval(d2)
    assert lo > 0 and r["reference_within_best"] is False and "excludes 0" in r["reference_within_best_note"]
    assert r["peak_fit"] is None and "edge" in r["peak_fit_reason"]


def test_a_reference_other_than_the_control_is_compared_with_two_way_intervals(result):
    g = _group(result, "mc_value")
    assert g["reference"] == "mc_value" and result["control_arm"] == "grpo"
    p = g["axes"]["generated_tokens"]["points"][1]
    d = pts(FINAL["mc_value_2xlr"]) - pts(FINAL["mc_value"])
    assert p["difference"] == pytest.approx(d.mean(), abs=1e-12)
    assert p["difference_ci"] == pytest.approx(t_interval(d), abs=1e-9)
    items = {a: np.array([[float(c) for c in item_string(s, FINAL[a][s])] for s in range(SEEDS)])
             for a in ("mc_value", "mc_value_2xlr")}
    ref = two_way_bootstrap(items["mc_value_2xlr"], items["mc_value"], n_resamples=N, seed=0)
    assert p["difference_ci_two_way"] == pytest.approx(ref["ci"], abs=1e-12)
    r = g["axes"]["generated_tokens"]
    assert r["best"] == "mc_value_2xlr" and r["optimum"] == "edge" and "above 2x" in r["optimum_note"]
    # where the reference is the control arm, the difference is the analysis's gain_vs_grpo
    two = _group(result, "grpo_0.5xlr")["axes"]["generated_tokens"]["points"][2]
    assert two["difference_ci_two_way"] == result["arms"]["grpo_2xlr"]["generated_tokens"]["gain_vs_grpo_ci_two_way"]


def test_analysis_json_report_and_figure(study, result):
    saved = json.loads((study / "analysis.json").read_text())
    assert [g["arms"] for g in saved["lr_sweep"]["groups"]] == [g["arms"] for g in result["lr_sweep"]["groups"]]
    assert (study / "figures" / "lr_sweep.png").stat().st_size > 10_000
    text = format_rankings(saved)
    section = text[text.index("learning-rate sweep"):]
    assert "reward outcome: grpo_0.5xlr 0.5x, grpo 1x, grpo_2xlr 2x, grpo_4xlr 4x" in section
    assert "best 2x (grpo_2xlr); interior: 1x < 2x < 4x" in section and "peak fit" in section
    assert "4x 35.83 [+32.25, +39.42] diff +7.50 n/a" in section
    assert "(not used: read on 3 of 4 seeds, refused [3])" in section
    assert f"{EDGE_NOTE} (above 2x" in section


def test_peak_fit_checks_its_input_and_finds_no_peak_on_a_convex_curve():
    fit = peak_fit([0.5, 1.0, 2.0], [40.0, 44.0, 42.0])  # exact through 3 points: vertex of the parabola
    assert fit["residual_df"] == 0 and "exact through 3 points" in fit["flag"] and fit["rmse"] < 1e-9
    assert fit["log2_lr_scale"] == pytest.approx(1 / 6) and fit["accuracy"] == pytest.approx(44 + 1 / 12)
    convex = peak_fit([0.5, 1.0, 2.0], [44.0, 40.0, 42.0])
    assert not convex["concave"] and convex["lr_scale"] is None
    with pytest.raises(ValueError, match=">= 3"):
        peak_fit([1.0, 2.0], [40.0, 41.0])
    with pytest.raises(ValueError, match="distinct lr_scales > 0"):
        peak_fit([1.0, 1.0, 2.0], [40.0, 41.0, 39.0])


# ----------------------------------------------------------------------------- the shipped study

def test_the_shipped_tiny_study_doubles_the_learning_rate_for_worse_accuracy(tmp_path):
    """data/study_tiny (read from a copy): grpo_2xlr is 4.35 [-5.93, -2.77] points below grpo at 250k tokens."""
    study = shutil.copytree(SHIPPED, tmp_path / "study_tiny")
    before = (SHIPPED / "analysis.json").read_bytes()
    res = analyze(study, n_resamples=N, figures=False)
    assert (SHIPPED / "analysis.json").read_bytes() == before
    [g] = res["lr_sweep"]["groups"]
    assert g["arms"] == ["grpo", "grpo_2xlr"] and g["lr_scales"] == [1.0, 2.0] and g["reference"] == "grpo"
    r = g["axes"]["generated_tokens"]
    assert r["budget"] == 250_000.0
    rows = list(csv.DictReader(open(SHIPPED / "runs.csv")))
    final = {a: np.array([100 * float([x for x in rows if x["arm"] == a and int(x["seed"]) == s][-1]["accuracy"])
                          for s in range(4)]) for a in ("grpo", "grpo_2xlr")}
    d = final["grpo_2xlr"] - final["grpo"]
    two = r["points"][1]
    assert two["difference"] == pytest.approx(d.mean(), abs=1e-9) == pytest.approx(-4.35, abs=1e-9)
    assert two["difference_ci"] == pytest.approx(t_interval(d), abs=1e-9)
    assert two["difference_ci"] == pytest.approx([-5.933, -2.767], abs=1e-3)
    assert r["points"][0]["accuracy"] == pytest.approx(78.375) and two["accuracy"] == pytest.approx(74.025)
    assert r["best"] == "grpo" and r["optimum"] == "edge" and r["optimum_note"].startswith(EDGE_NOTE)
    assert "below 1x" in r["optimum_note"] and r["reference_within_best"] is True
    assert res["lr_sweep"]["groups"][0]["axes"]["updates"]["points"][1]["difference"] == pytest.approx(-3.375)
    assert plot_lr_sweep(res["lr_sweep"], tmp_path / "fig") == tmp_path / "fig" / "lr_sweep.png"
    assert "learning-rate sweep" in format_rankings(json.loads((study / "analysis.json").read_text()))
