"""The estimator: exact posterior arithmetic, decay, the logistic prior, ranking, verdict, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gradprobe.difficulty.estimator import (DegenerateOutcomesWarning, DifficultyEstimator, DuplicatePromptError,
                                            EstimatorConfig, check_unique_ids, rank_half, verdict)


def test_posterior_matches_hand_worked_example():
    # n0 = 4, gamma = 1/2, p_model = 1/4: alpha0 = 1, beta0 = 3.
    # update 0: 3 of 4 correct; update 1: 1 of 2 correct.
    # S = 0.5 * 3 + 1 = 2.5, F = 0.5 * 1 + 1 = 1.5 -> alpha = 3.5, beta = 4.5, p_hat = 3.5 / 8 = 0.4375.
    est = DifficultyEstimator(EstimatorConfig(prior_strength=4.0, decay=0.5))
    x = np.zeros((1, 3))
    est.observe(["a"], x, [3], [4])
    est.step()
    est.observe(["a"], x, [1], [2])
    alpha, beta = est.posterior(["a"], [0.25])
    assert alpha[0] == pytest.approx(3.5, abs=1e-12) and beta[0] == pytest.approx(4.5, abs=1e-12)
    # one more update later every count is halved again: alpha = 1 + 1.25, beta = 3 + 0.75
    est.step()
    alpha, beta = est.posterior(["a"], [0.25])
    assert (alpha[0], beta[0]) == pytest.approx((2.25, 3.75), abs=1e-12)
    assert (alpha / (alpha + beta))[0] == pytest.approx(2.25 / 6.0, abs=1e-12)


def test_decayed_counts_equal_a_slow_float64_sum_over_observations():
    rng = np.random.default_rng(0)
    gamma, n0 = 0.83, 5.0
    est = DifficultyEstimator(EstimatorConfig(prior_strength=n0, decay=gamma))
    log = []  # (id, t, s, f)
    ids = ["p0", "p1", "p2"]
    for t in range(12):
        for pid in ids:
            if rng.random() < 0.5:
                n = int(rng.integers(1, 9))
                s = int(rng.integers(0, n + 1))
                est.observe([pid], np.zeros((1, 2)), [s], [n])
                log.append((pid, t, s, n - s))
        est.step()
    p_model = np.array([0.1, 0.5, 0.9])
    alpha, beta = est.posterior(ids, p_model)
    for k, pid in enumerate(ids):
        S = sum(gamma ** (est.clock - t) * s for i, t, s, f in log if i == pid)
        F = sum(gamma ** (est.clock - t) * f for i, t, s, f in log if i == pid)
        assert alpha[k] == pytest.approx(n0 * p_model[k] + S, rel=1e-12)
        assert beta[k] == pytest.approx(n0 * (1 - p_model[k]) + F, rel=1e-12)


def _synthetic(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    p = 1 / (1 + np.exp(-(2.0 * x[:, 0] - 1.0 * x[:, 1])))
    attempts = np.full(n, 8)
    successes = rng.binomial(attempts, p)
    return x, p, successes, attempts


def test_never_attempted_prompt_gets_the_model_prior_and_the_model_learns():
    x, p_true, s, n = _synthetic()
    est = DifficultyEstimator(EstimatorConfig(decay=1.0))
    ids = [f"q{i}" for i in range(len(x))]
    est.observe(ids[:80], x[:80], s[:80], n[:80])
    est.fit()
    assert not est.degenerate_
    unseen = ids[80:]
    p_model = est.predict_model(x[80:])
    np.testing.assert_array_equal(est.p_hat(unseen, x[80:]), p_model)  # exactly the prior: S = F = 0
    # the fitted model ranks unseen prompts like the truth
    from scipy.stats import spearmanr
    assert spearmanr(p_model, p_true[80:]).statistic > 0.8
    # an attempted prompt moves toward its observed rate
    seen = est.p_hat(ids[:1], x[:1])[0]
    prior = est.predict_model(x[:1])[0]
    rate = s[0] / n[0]
    assert min(prior, rate) - 1e-12 <= seen <= max(prior, rate) + 1e-12


def test_weighted_fit_equals_one_row_per_completion():
    """Two weighted rows per observation give the same logistic fit as one row per completion."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, _, s, n = _synthetic(n=60, seed=1)
    est = DifficultyEstimator(EstimatorConfig(decay=1.0, C=0.7))
    est.observe([f"q{i}" for i in range(60)], x, s, n)
    est.fit()
    rows, ys = [], []
    for i in range(60):
        rows += [x[i]] * int(n[i])
        ys += [1] * int(s[i]) + [0] * int(n[i] - s[i])
    rows, ys = np.array(rows), np.array(ys)
    # the per-completion reference standardises with the per-completion mean/std, which equal the
    # weighted ones here (every prompt has the same number of completions)
    scaler = StandardScaler().fit(rows)
    ref = LogisticRegression(C=0.7, max_iter=1000, tol=1e-10).fit(scaler.transform(rows), ys)
    q = np.random.default_rng(2).normal(size=(10, 4))
    np.testing.assert_allclose(est.predict_model(q), ref.predict_proba(scaler.transform(q))[:, 1], atol=2e-4)


def test_all_failures_warn_and_give_the_smoothed_rate():
    est = DifficultyEstimator(EstimatorConfig(decay=1.0))
    est.observe(["a", "b"], np.ones((2, 3)), [0, 0], [4, 6])
    with pytest.warns(DegenerateOutcomesWarning, match="all 10 observed completions failed"):
        est.fit()
    assert est.degenerate_
    np.testing.assert_allclose(est.predict_model(np.zeros((3, 3))), 0.5 / 11)
    est2 = DifficultyEstimator()
    est2.observe(["a"], np.ones((1, 3)), [5], [5])
    with pytest.warns(DegenerateOutcomesWarning, match="succeeded"):
        est2.fit()
    np.testing.assert_allclose(est2.predict_model(np.zeros((1, 3))), 5.5 / 6)


def test_no_history_gives_one_half():
    est = DifficultyEstimator()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit()
    np.testing.assert_array_equal(est.p_hat(["x", "y"], np.zeros((2, 5))), [0.5, 0.5])


def test_rank_puts_one_half_first_and_breaks_ties_by_id():
    ids = ["d", "c", "b", "a", "e"]
    p = [0.9, 0.6, 0.4, 0.5, 0.1]
    order = rank_half(ids, p)
    # 0.5 first; |0.4 - 1/2| = |0.6 - 1/2| tie -> b, c by id; |0.1 - 1/2| = |0.9 - 1/2| tie -> d, e by id
    assert [ids[i] for i in order] == ["a", "b", "c", "d", "e"]


def test_rank_ties_are_broken_by_prompt_id_exactly():
    ids = ["z", "m", "a"]
    order = rank_half(ids, [0.25, 0.75, 0.25])
    assert [ids[i] for i in order] == ["a", "m", "z"]
    with pytest.raises(ValueError, match="NaN"):
        rank_half(["a"], [float("nan")])
    with pytest.raises(ValueError, match="2 ids but 1"):
        rank_half(["a", "b"], [0.5])


def test_verdict():
    v = verdict([0.2, 0.4, 0.7])
    assert v["fail_more_often"] is True and v["mean_p_hat"] == pytest.approx(1.3 / 3)
    assert verdict([0.5, 0.5])["fail_more_often"] is False
    assert verdict([])["fail_more_often"] is None


def test_bad_input():
    with pytest.raises(DuplicatePromptError, match="'a'"):
        check_unique_ids(["a", "b", "a"])
    with pytest.raises(ValueError, match="decay"):
        EstimatorConfig(decay=0.0)
    with pytest.raises(ValueError, match="prior_strength"):
        EstimatorConfig(prior_strength=-1)
    est = DifficultyEstimator()
    with pytest.raises(ValueError, match="successes <= attempts"):
        est.observe(["a"], np.zeros((1, 2)), [3], [2])
    with pytest.raises(ValueError, match="expected M ids"):
        est.observe(["a", "b"], np.zeros((1, 2)), [0], [1])


def test_state_dict_round_trip_gives_the_same_predictions():
    x, _, s, n = _synthetic(n=40, seed=3)
    ids = [f"q{i}" for i in range(40)]
    est = DifficultyEstimator(EstimatorConfig(decay=0.8))
    est.observe(ids[:20], x[:20], s[:20], n[:20])
    est.step()
    est.observe(ids[20:], x[20:], s[20:], n[20:])
    est.step()
    other = DifficultyEstimator()
    other.load_state_dict(est.state_dict())
    np.testing.assert_array_equal(est.fit().p_hat(ids, x), other.fit().p_hat(ids, x))
