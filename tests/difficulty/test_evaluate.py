"""Quality metrics of p_hat and the held-out evaluation protocol."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.difficulty.estimator import EstimatorConfig
from gradprobe.difficulty.evaluate import (auc_score, brier_score, evaluate_estimator, plot_reliability,
                                           reliability_bins, spearman_rho, split_halves)


def test_metrics_by_hand():
    p = np.array([0.2, 0.9])
    y = np.array([[0, 1], [1, np.nan]])
    # (0.04 + 0.64 + 0.01) / 3
    assert brier_score(p, y) == pytest.approx(0.69 / 3)
    # pairs (pos, neg): (0.2 vs 0.2) tie = 0.5, (0.9 vs 0.2) = 1 -> AUC 0.75
    assert auc_score(p, y) == pytest.approx(0.75)
    assert auc_score(p, np.zeros((2, 2))) is None
    assert spearman_rho([0.1, 0.2, 0.3], [0.0, 0.5, 1.0]) == pytest.approx(1.0)
    assert spearman_rho([0.1, 0.1, 0.1], [0.0, 0.5, 1.0]) is None
    rel = reliability_bins(np.array([0.05, 0.05, 0.95]), np.array([[0, 1], [0, 0], [1, 1]]))
    assert rel == {"mean_predicted": [0.05, 0.95], "observed": [0.25, 1.0], "count": [4, 2]}


def test_split_halves_partition():
    fit, ev = split_halves(11, seed=3)
    assert len(fit) == 5 and len(ev) == 6 and sorted(np.concatenate([fit, ev]).tolist()) == list(range(11))


def test_informative_features_beat_the_pool_mean(tmp_path):
    rng = np.random.default_rng(0)
    m, s = 300, 12
    x = rng.normal(size=(m, 3))
    p = 1 / (1 + np.exp(-2.5 * x[:, 0]))
    y = (rng.random((m, s)) < p[:, None]).astype(float)
    ids = [f"q{i}" for i in range(m)]
    res = evaluate_estimator(ids, x, y, observed=3, config=EstimatorConfig(prior_strength=4.0), seed=0)
    est, base = res["estimators"], res["baselines"]
    assert res["split"] == {"fit_prompts": 150, "eval_prompts": 150, "observed_per_eval_prompt": 3,
                            "target_per_eval_prompt": 9, "seed": 0}
    assert est["model"]["brier"] < base["pool_mean"]["brier"] - 0.03
    assert est["posterior"]["brier"] < base["posterior_pool_mean"]["brier"]
    assert est["model"]["auc"] > 0.8 and base["pool_mean"]["auc"] == pytest.approx(0.5)
    assert est["model"]["spearman_rho"] > 0.7 and base["pool_mean"]["spearman_rho"] is None
    plot_reliability(res, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 1000


def test_never_solved_pool_is_reported_not_crashed():
    ids = [f"q{i}" for i in range(6)]
    res = evaluate_estimator(ids, np.zeros((6, 2)), np.zeros((6, 4)), observed=1)
    assert res["estimators"]["posterior"]["auc"] is None and res["estimators"]["model"]["spearman_rho"] is None
    assert res["model_degenerate"] and any("every target completion failed" in n for n in res["notes"])
    # fit half: 3 prompts x 4 failures -> p_model = (0 + 1/2) / (12 + 1) for every prompt; every target is 0
    assert res["estimators"]["model"]["brier"] == pytest.approx((0.5 / 13) ** 2, rel=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="at least 2 prompts"):
        evaluate_estimator(["a"], np.zeros((1, 2)), np.zeros((1, 4)), observed=1)
    with pytest.raises(ValueError, match="observed must lie"):
        evaluate_estimator(["a", "b"], np.zeros((2, 2)), np.zeros((2, 4)), observed=4)
    from gradprobe.difficulty.estimator import DuplicatePromptError
    with pytest.raises(DuplicatePromptError):
        evaluate_estimator(["a", "a"], np.zeros((2, 2)), np.zeros((2, 4)), observed=1)
