"""``difficulty-eval``'s bootstrap intervals (Brier, AUC, Spearman rho, flat-group AUC) are None with a reason where the
bootstrap cannot measure the sampling error: one eval prompt (every resample draws it alone) or resamples that all give
the same score up to rounding (no spread: a width of 0 read as precision). Every interval given contains its score:
the point is scored by scikit-learn/scipy and the resamples from counts, which differed by an ulp (Brier
0.007901234567901236 with the interval [0.007901234567901235, 0.007901234567901235]), and a skewed bootstrap put more
than 5% of the resamples on either side of the point."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.difficulty.evaluate import evaluate_estimator
from gradprobe.difficulty.metrics import (auc_score, bootstrap_metrics, brier_score, spearman_rho, success_rate)

ONE_PROMPT = ("only 1 prompt with an outcome: every resample draws that prompt alone, so the bootstrap cannot measure "
              "the sampling error; an interval needs at least 2 prompts")


def test_one_eval_prompt_gives_no_interval_and_the_reason():
    x = np.array([[0.3, 1.0], [-0.2, 2.0]])
    y = np.array([[1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, 1.0]])  # both classes in each target
    r = evaluate_estimator(["a", "b"], x, y, observed=1, resamples=300)
    assert r["split"]["eval_prompts"] == 1
    for group in ("estimators", "baselines"):
        for name, s in r[group].items():
            assert s["brier"] is not None and s["auc"] == 0.5, name  # one prompt: its outcomes tie on one p
            assert s["brier_interval"] is None and s["auc_interval"] is None, name  # was [b, b] and [0.5, 0.5]
            assert s["brier_interval_reason"] == s["auc_interval_reason"] == ONE_PROMPT, name
            assert s["spearman_rho"] is None and s["spearman_rho_interval"] is None
            assert s["spearman_rho_interval_reason"] == ("Spearman rho is undefined: the predictions or the prompts' "
                                                         "success rates are constant")
    assert (f"the model's, posterior's, pool_mean's and posterior_pool_mean's Brier and AUC intervals are None: "
            f"{ONE_PROMPT}") in r["notes"]  # every row that prints n/a, not the posterior's alone


def test_resamples_without_spread_give_no_interval():
    """Two eval prompts with the same prediction and outcomes (copies of one prompt): every resample is the same
    set of completions, so its Brier score is the same up to rounding (tester: [0.0004, 0.0004] around
    0.00040000000000000034)."""
    p, y = np.array([0.02, 0.02]), np.zeros((2, 3))
    got = bootstrap_metrics(p, y, resamples=500, group_size=3)
    assert got["brier"] is None  # was [0.0004, 0.0004]
    assert got["point"]["brier"] == brier_score(p, y) == pytest.approx(0.0004, abs=1e-15)
    assert got["reason"]["brier"] == ("every resample gives the same Brier score (the sample's) up to rounding: the "
                                      "prompts do not differ in it, so the bootstrap cannot measure its sampling error "
                                      "(a width of 0 would claim a precision the data do not give)")
    assert got["auc"] is None and got["reason"]["auc"] == "the AUC is undefined: the outcomes hold one class only"
    spread = bootstrap_metrics(np.array([0.02, 0.5]), y, resamples=500)  # the prompts' losses differ: an interval
    assert spread["reason"]["brier"] is None and spread["brier"][0] < spread["brier"][1]


def test_a_constant_prediction_keeps_its_exact_auc_interval():
    """The AUC of a prediction constant over the prompts is 0.5 on every sample, by construction: [0.5, 0.5] is exact
    (the pool-mean baseline), not a lack of spread; flat-group AUCs alike."""
    rng = np.random.default_rng(4)
    y = (rng.uniform(size=(12, 4)) < 0.5).astype(float)
    got = bootstrap_metrics(np.full(12, 0.3), y, resamples=200, group_size=2)
    assert got["auc"] == [0.5, 0.5] and got["reason"]["auc"] is None
    assert got["flat_auc"]["flat"] == [0.5, 0.5] and got["flat_auc_reason"]["flat"] is None
    assert got["brier"][0] < got["brier"][1] and got["reason"]["brier"] is None


@pytest.mark.parametrize("p, y, seed, score", [
    ([0.4, 0.8], [[0, 0, 1], [1, 1, 0]], 9, "auc"),  # point 0.6666666666666667, old interval [0.5, 0.6666666666666666]
    ([0.6, 0.3, 0.7, 0.2, 0.9], [[1], [1], [1], [0], [1]], 4, "spearman_rho"),  # point 0.707, old [0.725, 1.0]
])
def test_an_interval_that_missed_its_point_reaches_it(p, y, seed, score):
    p, y = np.array(p, float), np.array(y, float)
    got = bootstrap_metrics(p, y, resamples=200, seed=seed)
    point = auc_score(p, y) if score == "auc" else spearman_rho(p, y[:, 0])
    lo, hi = got[score]
    assert lo <= point <= hi and lo < hi
    assert point in (lo, hi)  # the percentile end beyond it moved to it, the other end kept
    assert got["point"][score] == point


def test_every_interval_contains_its_point_on_small_samples():
    rng = np.random.default_rng(0)
    checked, results = 0, []
    for trial in range(300):
        m, k = int(rng.integers(2, 6)), int(rng.integers(1, 5))
        p = np.round(rng.uniform(0.05, 0.95, m), 1) if trial % 2 else rng.uniform(size=m)
        y = (rng.uniform(size=(m, k)) < p[:, None]).astype(float)
        got = bootstrap_metrics(p, y, resamples=200, seed=trial, group_size=1)
        e = np.array([success_rate(r) for r in y])
        points = {"brier": brier_score(p, y), "auc": auc_score(p, y), "spearman_rho": spearman_rho(p, e)}
        for name, point in points.items():
            iv = got[name]
            if iv is not None:
                checked += 1
                assert iv[0] <= point <= iv[1], (trial, name, point, iv)
                assert iv[0] < iv[1] or (name == "auc" and np.ptp(p) == 0), (trial, name, iv)  # no zero width
        for kind, iv in got["flat_auc"].items():
            if iv is not None:
                assert iv[0] <= got["flat_auc_point"][kind]["auc"] <= iv[1], (trial, kind)
        results.append((got, points))
    assert checked > 400
    for got, points in results:  # a reason exactly where there is no interval; the points as scored above
        assert all((got[name] is None) == (got["reason"][name] is not None) for name in points)
        assert got["point"] == points
