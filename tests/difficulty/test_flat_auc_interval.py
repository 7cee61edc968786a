"""The flat-group AUC (can p_i tell a flat, zero-advantage group of G completions before rollout?) gets the percentile
bootstrap interval the Brier score, AUC and rho get: the same resamples of eval prompts, level and seed, recorded in
``flat_auc_interval`` and printed; None with the point AUC's own reason when the groups hold one class only."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.difficulty.evaluate import evaluate_estimator
from gradprobe.difficulty.metrics import bootstrap_metrics, flat_group_auc

KINDS = ("all_correct", "all_wrong", "flat")


def _reference(p, y, group_size, resamples, level, seed):
    """A plain loop: each resample draws M prompts as bootstrap_metrics does (the same generator, one row of draws at
    a time) and scores the resampled prompts with flat_group_auc (scikit-learn's roc_auc_score), in float64."""
    rng = np.random.default_rng([seed, 0xB007])
    values = {k: [] for k in KINDS}
    for _ in range(resamples):
        pick = rng.integers(0, len(p), len(p))
        fa = flat_group_auc(p[pick], y[pick], group_size)
        for k in KINDS:
            if fa[k]["auc"] is not None:
                values[k].append(fa[k]["auc"])
    a = (1.0 - level) / 2.0
    return ({k: np.quantile(np.array(v, dtype=np.float64), [a, 1 - a]).tolist() if 2 * len(v) >= resamples else None
             for k, v in values.items()}, {k: resamples - len(v) for k, v in values.items()})


@pytest.mark.parametrize("group_size, level, seed", [(4, 0.9, 0), (3, 0.8, 7)])
def test_flat_auc_interval_equals_a_plain_loop_bootstrap(group_size, level, seed):
    rng = np.random.default_rng(5)
    p = np.round(rng.uniform(0.05, 0.95, size=30), 1)  # ties in p, so in every score
    y = (rng.uniform(size=(30, 9)) < p[:, None]).astype(float)
    y[rng.uniform(size=y.shape) < 0.1] = np.nan  # missing outcomes inside groups
    y[4, :] = np.nan  # a prompt without a finite outcome: none of its groups is scored
    got = bootstrap_metrics(p, y, resamples=300, level=level, seed=seed, group_size=group_size)
    want, undefined = _reference(p, y, group_size, 300, level, seed)
    for k in KINDS:
        assert want[k] is not None
        assert got["flat_auc"][k] == pytest.approx(want[k], abs=1e-12, rel=0), k
        assert got["flat_auc_reason"][k] is None
    assert got["undefined"]["flat_auc"] == undefined
    plain = bootstrap_metrics(p, y, resamples=300, level=level, seed=seed)  # the other intervals are unchanged
    assert all(got[k] == plain[k] for k in ("brier", "auc", "spearman_rho"))
    assert "flat_auc" not in plain and "flat_auc" not in plain["undefined"]


def test_one_class_gives_no_interval_and_the_point_auc_reason():
    p = np.linspace(0.1, 0.9, 8)
    y = np.ones((8, 4))  # every group all correct: all-correct and flat are one class, all-wrong too
    got = bootstrap_metrics(p, y, resamples=50, group_size=2)
    point = flat_group_auc(p, y, 2)
    for k in KINDS:
        assert point[k]["auc"] is None
        assert got["flat_auc"][k] is None and got["undefined"]["flat_auc"][k] == 50
        assert got["flat_auc_reason"][k] == point[k]["reason"]
    assert got["flat_auc_reason"]["all_correct"] == "all 16 groups positive: one class only, AUC undefined"
    assert got["flat_auc_reason"]["all_wrong"] == "all 16 groups negative: one class only, AUC undefined"


def test_bootstrap_metrics_refuses_a_group_size_outside_the_outcomes():
    with pytest.raises(ValueError, match=r"group_size must be an integer in \[1, K\] = \[1, 4\].*got 5"):
        bootstrap_metrics(np.full(3, 0.5), np.zeros((3, 4)), group_size=5)


def test_evaluate_estimator_records_the_flat_auc_interval_with_the_other_intervals():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(80, 3))
    p_true = 1 / (1 + np.exp(-2 * x[:, 0]))
    y = (rng.uniform(size=(80, 8)) < p_true[:, None]).astype(float)
    r = evaluate_estimator([f"p{i}" for i in range(80)], x, y, observed=2, seed=1, resamples=300, group_size=3)
    post = r["estimators"]["posterior"]  # exact values: checked on bootstrap_metrics above; here, where they are
    for k in KINDS:
        lo, hi = post["flat_auc_interval"][k]
        assert lo <= post["flat_auc"][k]["auc"] <= hi and 0 <= lo < hi <= 1
        assert post["flat_auc_interval_reason"][k] is None
        assert post["undefined_resamples"]["flat_auc"][k] <= 150
    assert r["baselines"]["pool_mean"]["flat_auc_interval"]["flat"] == [0.5, 0.5]  # a constant p: every group ties


def test_difficulty_eval_prints_the_flat_auc_with_its_intervals(capsys):
    from gradprobe.cli.difficulty import _print_eval

    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 2))
    y = (rng.uniform(size=(60, 8)) < 1 / (1 + np.exp(-2 * x[:, :1]))).astype(float)
    r = evaluate_estimator([f"p{i}" for i in range(60)], x, y, observed=2, seed=0, resamples=200, group_size=2)
    _print_eval("tiny-qwen2", None, r, 0)
    fa, iv = r["estimators"]["posterior"]["flat_auc"], r["estimators"]["posterior"]["flat_auc_interval"]
    shown = {k: f"{fa[k]['auc']:.3f} [{iv[k][0]:.3f}, {iv[k][1]:.3f}]" for k in KINDS}
    assert (f"posterior AUC of a flat group of 2 ({fa['groups']} groups): all-correct {shown['all_correct']}, "
            f"all-wrong {shown['all_wrong']}, either {shown['flat']}\n") in capsys.readouterr().out
