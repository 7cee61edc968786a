"""Study analysis on hand-made runs.csv data: interpolation, matched budgets, paired bootstrap
against a slow float64 reference, the ScaleRL sigmoid fit, rankings, hypotheses, the CLI."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import (analyze, bootstrap_means, fit_sigmoid, format_rankings, interpolate,
                                      paired_bootstrap, scalerl_sigmoid)
from gradprobe.study.runner import RUNS_CSV_COLUMNS

PLAN = """
name = "handmade"
seeds = [0, 1, 2]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[train]
prompts_per_update = 2
group = 4
[budget]
generated_tokens = 1000
[eval]
every_tokens = 500
[arms.grpo]
reward = "outcome"
[arms.mc_value]
reward = "mc_value"
[arms.grpo_2xlr]
reward = "outcome"
lr_scale = 2.0

[[hypotheses]]
name = "grpo_learns"
statement = "GRPO gains at least 4 points over the initial policy"
test = "paired_bootstrap"
arms = ["grpo", "initial"]
min_effect = 4.0

[[hypotheses]]
name = "dense_not_worth_tokens"
statement = "GRPO beats mc_value at equal tokens"
test = "paired_bootstrap"
arms = ["grpo", "mc_value"]

[[hypotheses]]
name = "dense_better"
statement = "mc_value beats GRPO at equal tokens (false here)"
test = "paired_bootstrap"
arms = ["mc_value", "grpo"]

[[hypotheses]]
name = "double_lr"
statement = "2x lr differs from GRPO"
test = "paired_bootstrap"
arms = ["grpo_2xlr", "grpo"]
alternative = "two-sided"

[[hypotheses]]
name = "per_update"
statement = "per update, mc_value beats GRPO"
test = "paired_bootstrap"
arms = ["mc_value", "grpo"]
at = "updates"
budget = 2
"""


def _rows():
    """Three arms x three seeds. Per update mc_value is best; at equal tokens and time it is worst.

    grpo:      updates 0/5/10, tokens 0/500/1010+s, seconds 0/5/10,   accuracy .20/.30+.01s/.40+.01s
    mc_value:  updates 0/1/2,  tokens 0/500/1020,   seconds 0/8/16,   accuracy .20/.28/.35+.005s
    grpo_2xlr: as grpo, accuracy + .02 after update 0 (+ .01 more for seed 2)
    """
    rows = []
    for s in range(3):
        for u, t, sec, a in [(0, 0, 0.0, .20), (5, 500, 5.0, .30 + .01 * s), (10, 1010 + s, 10.0 + s, .40 + .01 * s)]:
            rows.append(("grpo", s, u, t, sec, a, a / 2, "outcome", 1.0))
            b = a if u == 0 else a + .02 + (.01 if s == 2 else 0)
            rows.append(("grpo_2xlr", s, u, t, sec, b, b / 2, "outcome", 2.0))
        for u, t, sec, a in [(0, 0, 0.0, .20), (1, 500, 8.0, .28), (2, 1020, 16.0, .35 + .005 * s)]:
            rows.append(("mc_value", s, u, t, sec, a, a / 2, "mc_value", 1.0))
    return rows


@pytest.fixture()
def study(tmp_path):
    (tmp_path / "plan.toml").write_text(PLAN)
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RUNS_CSV_COLUMNS)
        w.writerows(_rows())
    return tmp_path


# ----------------------------------------------------------------------------- building blocks

def test_interpolation_is_linear_between_eval_points_and_never_extrapolates():
    x, y = [0, 100, 300], [0.1, 0.3, 0.2]
    assert interpolate(x, y, 0) == pytest.approx(0.1)
    assert interpolate(x, y, 50) == pytest.approx(0.2)
    assert interpolate(x, y, 200) == pytest.approx(0.25)
    assert interpolate(x, y, 300) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="outside the run's eval range"):
        interpolate(x, y, 301)
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolate([0, 100, 100], y, 50)


def _slow_percentile(values: list[float], p: float) -> float:
    """numpy's default ('linear') quantile, by hand in float64."""
    v = sorted(values)
    h = (len(v) - 1) * p
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def test_paired_bootstrap_matches_a_slow_reference():
    t = {0: 31.0, 1: 35.5, 2: 29.0, 3: 40.25, 4: 33.0}
    c = {0: 30.0, 1: 30.0, 2: 30.5, 3: 31.0, 4: 28.0, 9: 99.0}  # seed 9 has no pair: ignored
    fast = paired_bootstrap(t, c, n_resamples=2500, seed=7)
    seeds = [0, 1, 2, 3, 4]
    d = [t[s] - c[s] for s in seeds]
    idx = np.random.default_rng(7).integers(0, 5, size=(2500, 5))
    means = []
    for row in idx.tolist():  # slow: one python loop per resample
        total = 0.0
        for i in row:
            total += d[i]
        means.append(total / len(row))
    assert fast["seeds"] == 5 and fast["estimate"] == pytest.approx(sum(d) / 5, abs=1e-12)
    np.testing.assert_allclose(fast["boot"], means, rtol=0, atol=1e-12)
    assert fast["ci"] == pytest.approx([_slow_percentile(means, 0.025), _slow_percentile(means, 0.975)], abs=1e-12)
    assert fast["ci"][0] < fast["estimate"] < fast["ci"][1]
    # the resample draws are row-by-row the same as drawing seeds one resample at a time
    rng = np.random.default_rng(7)
    assert [rng.integers(0, 5, size=5).tolist() for _ in range(3)] == idx[:3].tolist()


def test_pairing_removes_the_between_seed_spread():
    """Adding a per-seed offset to both arms (a seed's easier held-out draws) leaves the paired
    gain and its interval unchanged, while the unpaired spread of each arm grows."""
    t = {0: 31.0, 1: 33.0, 2: 32.0, 3: 34.0}
    c = {0: 30.0, 1: 30.5, 2: 30.0, 3: 31.0}
    shift = {0: -20.0, 1: 15.0, 2: 0.0, 3: 30.0}
    a = paired_bootstrap(t, c)
    b = paired_bootstrap({s: v + shift[s] for s, v in t.items()}, {s: v + shift[s] for s, v in c.items()})
    assert b["estimate"] == pytest.approx(a["estimate"]) and b["ci"] == pytest.approx(a["ci"])
    spread = np.ptp(bootstrap_means([t[s] + shift[s] for s in t]))
    assert spread > 10 * (a["ci"][1] - a["ci"][0])
    with pytest.raises(ValueError, match="no common seed"):
        paired_bootstrap({0: 1.0}, {1: 2.0})


def test_sigmoid_fit_recovers_known_parameters():
    true = {"A": 62.0, "B": 1.6, "C_mid": 3.0e5, "R0": 20.0}
    x = np.tile(np.linspace(0, 2.0e6, 21), 4)
    y = scalerl_sigmoid(x, **true) + np.random.default_rng(0).normal(0, 0.3, x.size)
    fit = fit_sigmoid(x, y, R0=20.0)
    assert fit["A"] == pytest.approx(62.0, abs=1.0)
    assert fit["B"] == pytest.approx(1.6, rel=0.1)
    assert fit["C_mid"] == pytest.approx(3.0e5, rel=0.1)
    assert fit["R0"] == 20.0 and fit["x"] == "generated_tokens" and fit["rmse"] == pytest.approx(0.3, rel=0.25)
    # the curve: R(0) = R0, R(C_mid) = (A + R0) / 2, R -> A
    assert scalerl_sigmoid([0.0, 3.0e5, 1e12], **true) == pytest.approx([20.0, 41.0, 62.0], abs=1e-6)


def test_sigmoid_fit_fails_clearly():
    with pytest.raises(ValueError, match=">= 3 distinct token counts"):
        fit_sigmoid([0, 100, 100, 200], [1, 2, 2, 3], R0=1.0)
    with pytest.raises(ValueError, match="flat curve"):
        fit_sigmoid([0, 100, 200, 300, 400], [5, 5, 5, 5, 5], R0=5.0)


# ----------------------------------------------------------------------------- the analysis

def test_analysis_of_a_handmade_study(study):
    res = analyze(study, n_resamples=2000)
    written = json.loads((study / "analysis.json").read_text())
    assert written["arms"]["grpo"]["tokens"]["accuracy"] == pytest.approx(res["arms"]["grpo"]["tokens"]["accuracy"])
    assert {p.name for p in (study / "figures").glob("*.png")} == {
        "accuracy_vs_updates.png", "accuracy_vs_generated_tokens.png", "accuracy_vs_device_seconds.png"}

    m = res["matched"]
    assert m["tokens"]["budget"] == 1000 and m["updates"]["budget"] == 2 and m["time"]["budget"] == 10.0
    assert m["tokens"]["overshoot_tokens"] == {"mean": pytest.approx((10 + 11 + 12) * 2 / 9 + 20 / 3),
                                               "max": 20.0, "min": 10.0}
    assert res["initial"]["accuracy"] == pytest.approx(20.0) and res["initial"]["per_seed"] == {
        0: pytest.approx(20.0), 1: pytest.approx(20.0), 2: pytest.approx(20.0)}

    g, mc, lr2 = (res["arms"][a] for a in ("grpo", "mc_value", "grpo_2xlr"))
    assert g["reward"] == "outcome" and lr2["lr_scale"] == 2.0 and g["seeds"] == 3
    # tokens: each run's final eval
    assert g["tokens"]["per_seed"] == {s: pytest.approx(40 + s) for s in range(3)}
    assert mc["tokens"]["per_seed"] == {s: pytest.approx(35 + 0.5 * s) for s in range(3)}
    # updates = 2: grpo interpolated between updates 0 and 5
    assert g["updates"]["per_seed"] == {s: pytest.approx(20 + 0.4 * (10 + s)) for s in range(3)}
    assert mc["updates"]["per_seed"] == {s: pytest.approx(35 + 0.5 * s) for s in range(3)}
    # time = 10 s: mc_value between (8 s, 28) and (16 s, 35 + .5 s)
    assert g["time"]["per_seed"] == {s: pytest.approx(30 + s + 5 / (5 + s) * 10) for s in range(3)}
    assert mc["time"]["per_seed"] == {s: pytest.approx(28 + 0.25 * (7 + 0.5 * s)) for s in range(3)}
    # gains are paired per seed
    assert mc["tokens"]["gain_vs_grpo"] == pytest.approx(np.mean([35 + .5 * s - 40 - s for s in range(3)]))
    assert g["tokens"]["gain_vs_grpo"] == 0.0 and g["tokens"]["gain_ci"] == [0.0, 0.0]
    assert lr2["tokens"]["gain_vs_grpo"] == pytest.approx(7 / 3)
    assert lr2["tokens"]["gain_ci"][0] == pytest.approx(2.0) and lr2["tokens"]["gain_ci"][1] == pytest.approx(3.0)
    assert g["tokens"]["gain_vs_initial"] == pytest.approx(21.0)
    lo, hi = g["tokens"]["ci"]
    assert lo == pytest.approx(40) and hi == pytest.approx(42) and lo < g["tokens"]["accuracy"] < hi
    # rankings: per update mc_value first; at matched tokens and time last
    assert res["rankings"] == {"updates": ["mc_value", "grpo_2xlr", "grpo"], "tokens": ["grpo_2xlr", "grpo", "mc_value"],
                               "time": ["grpo_2xlr", "grpo", "mc_value"]}
    # a straight rise to the budget does not identify the asymptote: no fit, and the reason
    assert g["sigmoid"] is None and "not identified" in g["sigmoid_error"]
    text = format_rankings(res)
    assert "per update (at 2 updates)" in text and "at matched tokens (1,000)" in text and "at matched time (10.0 s)" in text
    first = [line for line in text.splitlines() if line.startswith("1 ")][0]
    assert first.index("mc_value") < first.index("grpo_2xlr")


def test_hypotheses(study):
    hyp = {h["name"]: h for h in analyze(study, write=False, figures=False)["hypotheses"]}
    n = 4000
    h = hyp["grpo_learns"]  # gains 20, 21, 22 points >= 4 in every resample
    assert h["estimate"] == pytest.approx(21.0) and h["p_value"] == pytest.approx(1 / (n + 1)) and h["passed"]
    assert h["ci_level"] == pytest.approx(0.9) and h["seeds"] == 3
    h = hyp["dense_not_worth_tokens"]
    assert h["estimate"] == pytest.approx(np.mean([5, 5.5, 6])) and h["passed"]
    h = hyp["dense_better"]
    assert h["estimate"] < 0 and h["p_value"] == pytest.approx(1.0) and not h["passed"]
    h = hyp["double_lr"]  # differences 2, 2, 3: every resample > 0 -> two-sided p = 2 / (n + 1)
    assert h["p_value"] == pytest.approx(2 / (n + 1)) and h["passed"] and h["ci_level"] == pytest.approx(0.95)
    h = hyp["per_update"]
    assert h["estimate"] == pytest.approx(np.mean([35 + .5 * s - 20 - .4 * (10 + s) for s in range(3)])) and h["passed"]


def test_sigmoid_in_the_analysis_and_a_study_without_a_control_arm(tmp_path):
    (tmp_path / "plan.toml").write_text(PLAN.split("[[hypotheses]]")[0].replace("[arms.grpo]\n", "[arms.base]\n"))
    true = {"A": 70.0, "B": 2.0, "C_mid": 400.0, "R0": 20.0}
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RUNS_CSV_COLUMNS)
        for arm in ("base", "mc_value"):
            for s in range(2):
                for u, t in enumerate([0, 200, 400, 600, 800, 1000 + s]):
                    acc = float(scalerl_sigmoid([t], **true)[0]) / 100 + (0.004 * s if t else 0)
                    w.writerow((arm, s, u, t, float(u), acc, "", "outcome", 1.0))
    res = analyze(tmp_path, figures=False)
    fit = res["arms"]["base"]["sigmoid"]
    assert fit["A"] == pytest.approx(70.0, abs=2.0) and fit["C_mid"] == pytest.approx(400.0, rel=0.1)
    assert res["arms"]["base"]["tokens"]["gain_vs_grpo"] is None  # no grpo arm
    assert res["initial"]["accuracy_sampled"] is None


def test_analyze_only_cli(study, capsys):
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    out = capsys.readouterr().out
    assert "at matched tokens" in out and "dense_not_worth_tokens: PASSED" in out
    assert json.loads((study / "analysis.json").read_text())["rankings"]["tokens"][0] == "grpo_2xlr"
    (study / "runs.csv").unlink()
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 2
    assert "runs.csv does not exist" in capsys.readouterr().err


def test_runs_stopped_by_another_budget_match_tokens_at_the_smallest_final_count(study):
    """With a token and a seconds budget, a run may stop on seconds first: matched tokens then
    fall back to the smallest final token count, interpolated (never a final eval below budget)."""
    (study / "plan.toml").write_text(PLAN.replace("generated_tokens = 1000", "generated_tokens = 1015\ndevice_seconds = 30"))
    res = analyze(study, write=False, figures=False)
    tok = res["matched"]["tokens"]
    assert tok["budget"] == 1010.0 and not tok["final_eval"] and "another budget" in tok["source"]
    # grpo seed 2 ends at 1012 tokens: read at 1010 between (500, 32) and (1012, 42)
    assert res["arms"]["grpo"]["tokens"]["per_seed"][2] == pytest.approx(32 + 510 / 512 * 10)
    assert res["arms"]["mc_value"]["tokens"]["per_seed"][0] == pytest.approx(28 + 510 / 520 * 7)
