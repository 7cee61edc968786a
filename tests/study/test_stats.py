"""gradprobe.study.stats against hand computations and slow references: the t interval, the exact
sign-flip test (enumerated by hand and by itertools), Holm, the two-way bootstrap, the sigmoid fit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gradprobe.forecast import analysis_sigmoid as sigmoid
from gradprobe.study.stats import (NO_SPREAD, fit_sigmoid, holm, min_seeds_for_floor, paired_t, scalerl_sigmoid,
                                   sign_flip_test, two_way_bootstrap, two_way_indices)


# ----------------------------------------------------------------------------- t interval

def test_paired_t_by_hand():
    d = [1.0, 2.0, 3.0, 6.0]  # mean 3, sd sqrt(14 / 3)
    res = paired_t(d, level=0.95)
    sd = math.sqrt(14 / 3)
    half = 3.182446305284263 * sd / 2  # t_(0.975, 3) from tables
    assert res["estimate"] == 3.0 and res["sd"] == pytest.approx(sd) and res["df"] == 3
    assert res["ci"] == pytest.approx([3 - half, 3 + half], abs=1e-12) and res["testable"]
    one = paired_t([2.5])
    assert one["ci"] is None and one["sd"] is None and one["note"] == "not testable (1 seed)" and not one["testable"]
    assert paired_t([1.0, 1.0, 1.0])["ci"] == [1.0, 1.0]  # no spread: the interval is the point
    with pytest.raises(ValueError, match="finite per-seed differences"):
        paired_t([1.0, float("nan")])


# ----------------------------------------------------------------------------- sign-flip test

def _slow_sign_flip(d, m, alternative):
    """Every sign pattern by itertools.product; counts in exact integers."""
    n = len(d)
    obs_g, obs_l = sum(d) - n * m, sum(d) + n * m
    ge = le = 0
    for signs in itertools.product((1, -1), repeat=n):
        ge += sum(s * (x - m) for s, x in zip(signs, d)) >= obs_g - 1e-9
        le += sum(s * (x + m) for s, x in zip(signs, d)) <= obs_l + 1e-9
    total = 2 ** n
    return {"greater": ge / total, "less": le / total, "two-sided": min(1.0, 2 * min(ge, le) / total)}[alternative]


def test_sign_flip_exact_cases_by_hand():
    res = sign_flip_test([1.0, 2.0, 3.0, 4.0])  # every difference positive: only the observed pattern is as large
    assert res["p_value"] == 1 / 16 and res["p_floor"] == 1 / 16 and res["at_floor"]
    assert res["p_text"] == "p = 1/16 (the smallest attainable with 4 seeds)" and res["method"].startswith("exact")
    # d = (3, -1, 2, 4), sum 8 of |d| total 10: only flipping the -1 (sum 10) is at least as large
    res = sign_flip_test([3.0, -1.0, 2.0, 4.0])
    assert res["p_value"] == 2 / 16 and not res["at_floor"] and res["p_text"] == "p = 1/8 = 0.125"
    two = sign_flip_test([1.0, 2.0, 3.0, 4.0], alternative="two-sided")
    assert two["p_value"] == 1 / 8 and two["p_floor"] == 1 / 8
    assert two["p_text"] == "p = 1/8 (the smallest attainable two-sided with 4 seeds)"
    assert sign_flip_test([3.0, 3.0, 3.0], min_effect=3.0)["p_value"] == 1.0  # all patterns tie at 0
    assert sign_flip_test([-1.0, -2.0, -3.0, -4.0])["p_text"] == "p = 1"
    one = sign_flip_test([5.0])
    assert one["p_value"] is None and one["p_text"] == "not testable (1 seed)" and not one["testable"]


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
@pytest.mark.parametrize("m", [0.0, 0.7])
def test_sign_flip_matches_an_itertools_enumeration(alternative, m):
    d = [round(float(v), 1) for v in np.random.default_rng(4).normal(0.8, 1.5, 7)]  # ties included
    fast = sign_flip_test(d, min_effect=m, alternative=alternative)
    assert fast["p_value"] == pytest.approx(_slow_sign_flip(d, m, alternative), abs=1e-12)


def test_monte_carlo_sign_flip_agrees_with_the_exact_test():
    d = np.random.default_rng(1).normal(0.6, 1.0, 10)
    exact = sign_flip_test(d)
    mc = sign_flip_test(d, max_exact=5, n_patterns=20000, seed=3)
    assert mc["method"] == "Monte Carlo sign-flip, 20000 patterns" and "Monte Carlo" in mc["p_text"]
    assert mc["p_value"] == pytest.approx(exact["p_value"], abs=0.01)
    floor = sign_flip_test(np.full(20, 3.0), n_patterns=999)  # 20 seeds: Monte Carlo; all positive
    assert floor["p_value"] == floor["p_floor"] == 1 / 1000 and floor["p_text"].startswith("p <= 0.001")


def test_smallest_seed_counts_that_can_reach_alpha():
    assert min_seeds_for_floor(0.05, "greater") == 5  # 1/32 <= 0.05 < 1/16
    assert min_seeds_for_floor(0.05, "two-sided") == 6  # 2/64 <= 0.05 < 2/32
    assert min_seeds_for_floor(0.01, "greater") == 7


def test_holm_by_hand():
    # sorted 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, max(0.06, 0.04 * 1) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2]) == [0.2]
    with pytest.raises(ValueError, match="p-values in"):
        holm([])


# ----------------------------------------------------------------------------- two-way bootstrap

def test_two_way_bootstrap_matches_a_slow_reference():
    rng = np.random.default_rng(0)
    t = (rng.random((4, 50)) < 0.6).astype(float)
    c = (rng.random((4, 50)) < 0.5).astype(float)
    fast = two_way_bootstrap(t, c, n_resamples=600, seed=5)
    d = 100 * (t - c)
    slow = []
    for si, ii in two_way_indices(4, 50, n_resamples=600, seed=5):  # the same draws, one resample at a time
        for r in range(si.shape[0]):
            slow.append(float(np.mean([[d[s, i] for i in ii[r]] for s in si[r]])))
    np.testing.assert_allclose(fast["boot"], slow, rtol=0, atol=1e-10)
    assert fast["ci"] == pytest.approx(list(np.quantile(slow, [0.025, 0.975])), abs=1e-10)
    assert fast["estimate"] == pytest.approx(d.mean()) and fast["disagreement"] == pytest.approx(np.abs(t - c).mean())
    assert two_way_bootstrap(t[:1], c[:1])["ci"] is None  # one seed: no interval


def test_the_two_way_interval_carries_the_held_out_sampling_error():
    """Seeds that agree exactly make a t interval of zero width; the items are still a sample, so the
    two-way interval keeps their spread: about 1.96 * 100 * sqrt((q - delta^2) / N) for a disagreement
    rate q and a mean difference delta (here both 0.1)."""
    t = np.zeros((4, 400))
    t[:, :40] = 1.0  # every seed: treatment right on 40 items the control gets wrong, q = 0.1
    c = np.zeros_like(t)
    tw = two_way_bootstrap(t, c, n_resamples=4000, seed=0)
    tt = paired_t(100 * (t - c).mean(axis=1))
    assert tt["ci"] == pytest.approx([10.0, 10.0])
    half = 1.96 * 100 * math.sqrt(0.1 * 0.9 / 400)
    assert (tw["ci"][1] - tw["ci"][0]) / 2 == pytest.approx(half, rel=0.1)


# ----------------------------------------------------------------------------- sigmoid

def test_sigmoid_fit_recovers_known_parameters_with_intervals():
    true = {"A": 62.0, "B": 1.6, "C_mid": 3.0e5, "R0": 20.0}
    x = np.tile(np.linspace(0, 2.0e6, 21), 4)
    y = scalerl_sigmoid(x, **true) + np.random.default_rng(0).normal(0, 0.3, x.size)
    fit = fit_sigmoid(x, y, R0=20.0)
    assert fit["A"] == pytest.approx(62.0, abs=1.0) and fit["B"] == pytest.approx(1.6, rel=0.1)
    assert fit["C_mid"] == pytest.approx(3.0e5, rel=0.1) and fit["rmse"] == pytest.approx(0.3, rel=0.25)
    assert fit["identified"] and fit["at_bound"] == []
    for name in ("A", "B", "C_mid"):
        lo, hi = fit["params"][name]["ci"]
        assert lo < true[name] < hi
    assert scalerl_sigmoid([0.0, 3.0e5, 1e12], **true) == pytest.approx([20.0, 41.0, 62.0], abs=1e-6)


def test_analytic_jacobian_matches_finite_differences():
    x = np.array([0.0, 10.0, 100.0, 1000.0])
    f, jac = sigmoid._sigmoid_and_jacobian(x, 20.0)
    p = np.array([60.0, 1.3, 2.1])
    num = np.stack([(f(x, *(p + h)) - f(x, *(p - h))) / (2 * 1e-6) for h in np.eye(3) * 1e-6], axis=1)
    np.testing.assert_allclose(jac(x, *p), num, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(f(x, *p), scalerl_sigmoid(x, 60.0, 1.3, 10 ** 2.1, 20.0), rtol=1e-12)


def test_unidentified_parameters_are_marked_and_get_no_interval():
    # a straight rise to the last eval: the curve has not bent over, A runs to its bound
    x = np.repeat([0.0, 100.0, 200.0, 300.0, 400.0], 3)
    y = 20 + 0.05 * x + np.tile([-0.2, 0.0, 0.2], 5)
    fit = fit_sigmoid(x, y, R0=20.0)
    assert not fit["identified"] and not all(p["identified"] for p in fit["params"].values())
    for p in fit["params"].values():
        assert (p["ci"] is None) == (not p["identified"])
    flat = fit_sigmoid([0, 100, 200, 300, 400], [5, 5, 5, 5, 5], R0=5.0)  # no gain: B and C_mid meaningless
    assert not flat["params"]["B"]["identified"] and not flat["params"]["C_mid"]["identified"]
    with pytest.raises(ValueError, match=">= 3 distinct"):
        fit_sigmoid([0, 100, 100, 200], [1, 2, 2, 3], R0=1.0)


def test_sigmoid_fit_is_deterministic_for_the_same_data():
    """The same points in another order, and R0 one ulp away (a mean computed in another order),
    give the same fit: issue 14's re-runs of --analyze-only rewrote different fits."""
    x = np.array([0, 129065, 253861, 0, 125000, 251000, 0, 127000, 255000], dtype=float)
    y = np.array([67.6, 75.4, 78.8, 67.6, 74.9, 77.1, 67.6, 75.8, 79.4])
    a = fit_sigmoid(x, y, R0=67.6)
    order = np.random.default_rng(2).permutation(x.size)
    for b in (fit_sigmoid(x, y, R0=67.6), fit_sigmoid(x[order], y[order], R0=67.6),
              fit_sigmoid(x, y, R0=np.nextafter(67.6, 100.0))):
        for k in ("A", "B", "C_mid"):
            assert b[k] == pytest.approx(a[k], rel=1e-6)


def test_paired_t_test_matches_scipy_and_can_reject_with_four_seeds():
    """paired_t: the one-sample t test of the per-seed differences against the margin
    (scipy.stats.ttest_1samp), able to reject with 4 seeds where the sign-flip floor is 1/16."""
    from scipy.stats import ttest_1samp

    from gradprobe.study.stats import paired_t_test, sign_flip_test

    d = [4.1, 5.3, 4.7, 5.9]
    for alt, margin in (("greater", 0.0), ("greater", 4.0), ("less", 0.0), ("two-sided", 0.0)):
        got = paired_t_test(d, min_effect=margin, alternative=alt)
        null = {"greater": margin, "less": -margin, "two-sided": 0.0}[alt]
        ref = ttest_1samp(d, null, alternative=alt)
        assert got["p_value"] == pytest.approx(ref.pvalue, rel=1e-12) and got["t"] == pytest.approx(ref.statistic)
    assert paired_t_test(d)["p_value"] < 0.001 and sign_flip_test(d)["p_value"] == 1 / 16
    one = paired_t_test([2.0])
    assert one["p_value"] is None and not one["testable"]
    same = paired_t_test([1.0, 1.0, 1.0])  # no spread: no t test (it was p = 0)
    assert same["p_value"] is None and same["why"] == NO_SPREAD
    assert paired_t_test([0.0, 0.0], alternative="two-sided")["p_value"] is None
    with pytest.raises(ValueError, match="alternative"):
        paired_t_test(d, alternative="up")
