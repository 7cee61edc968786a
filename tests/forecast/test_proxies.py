"""Efficiency ratios: exact when the ratio is exact, invariant to the reference's scale, shrunk toward 1 by
the empirical-Bayes rule, widened by the spread of reference draws; verl's signal proxy as verl computes it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gradprobe.forecast import probe_efficiency, shrink_factor, signal_proxy_efficiency
from gradprobe.forecast.proxies import robust_se, stratified_counts
from gradprobe.probe.estimate import signal_proxy_group_sums


def _groups(seed=0, b=16, scale=1.0):
    rng = np.random.default_rng(seed)
    return scale * rng.normal(1.0, 3.0, size=b)


def test_an_exact_ratio_is_recovered_with_zero_spread_and_no_shrinkage():
    ref = [_groups(0), _groups(1)]
    counts = stratified_counts([16, 16], 500, 0)
    eff = probe_efficiency("r", [2.5 * g for g in ref], ref, counts=counts)
    assert eff.rho_raw == pytest.approx(2.5, rel=1e-14)
    assert eff.se == pytest.approx(0.0, abs=1e-12) and eff.snr > 1e12 and eff.shrink == pytest.approx(1.0, abs=1e-20)
    assert eff.rho == pytest.approx(2.5, rel=1e-14)
    np.testing.assert_allclose(eff.replicates, 2.5, rtol=1e-12)


def test_ratio_is_the_ratio_of_batch_means_and_invariant_to_the_scale_of_u():
    r, o = [_groups(2), _groups(3)], [_groups(4), _groups(5)]
    counts = stratified_counts([16, 16], 400, 7)
    a = probe_efficiency("r", r, o, counts=counts)
    assert a.rho_raw == pytest.approx((r[0].sum() + r[1].sum()) / (o[0].sum() + o[1].sum()), rel=1e-14)
    b = probe_efficiency("r", [1e3 * x for x in r], [1e3 * x for x in o], counts=counts)  # u scaled by 1000
    assert b.rho_raw == pytest.approx(a.rho_raw, rel=1e-12) and b.se == pytest.approx(a.se, rel=1e-9)
    assert b.snr == pytest.approx(a.snr, rel=1e-9)
    perm = np.random.default_rng(0).permutation(16)
    c = probe_efficiency("r", [x[perm] for x in r], [x[perm] for x in o], counts=counts)
    assert c.rho_raw == pytest.approx(a.rho_raw, rel=1e-13)


def test_shrinkage_is_the_positive_part_james_stein_rule():
    for snr in (0.0, 0.5, 1.0, 1.5, 3.0, 10.0):
        se, dev = 0.7, 0.7 * snr
        tau2 = max(0.0, dev ** 2 - se ** 2)  # method-of-moments prior variance (Morris 1983)
        assert shrink_factor(snr) == pytest.approx(tau2 / (tau2 + se ** 2), abs=1e-15)
    assert shrink_factor(math.inf) == 1.0 and shrink_factor(math.nan) == 0.0


def test_low_snr_falls_back_to_one_and_a_noisy_ratio_is_shrunk():
    rng = np.random.default_rng(11)
    o = [rng.normal(0.3, 3.0, size=16)]
    r = [o[0] * 1.2 + rng.normal(0.0, 3.0, size=16)]
    counts = stratified_counts([16], 1000, 0)
    eff = probe_efficiency("r", r, o, counts=counts)
    se = robust_se((counts[0] @ r[0]) / (counts[0] @ o[0]))
    assert eff.se == pytest.approx(se, rel=1e-12)
    assert eff.snr == pytest.approx(abs(eff.rho_raw - 1) / se, rel=1e-12)
    assert eff.snr < 1  # 0.99: shrunk all the way, i.e. the cost-only forecast
    assert eff.rho == 1.0 and np.all(eff.replicates == 1.0) and all(math.isnan(x) for x in eff.interval)
    # a real but noisy ratio (SNR 3.7): shrunk toward 1 by exactly k = 1 - 1/SNR^2, replicates too
    rng = np.random.default_rng(3)
    o = rng.normal(2.0, 1.0, size=16)
    r = 1.5 * o + rng.normal(0, 2.0, size=16)
    e2 = probe_efficiency("r", [r], [o], counts=counts)
    k = 1 - 1 / e2.snr ** 2
    assert 3 < e2.snr < 4.5 and 0.85 < k < 0.97
    assert e2.rho == pytest.approx(1 + k * (e2.rho_raw - 1), rel=1e-14)
    raw = (counts[0] @ r) / (counts[0] @ o)
    np.testing.assert_allclose(e2.replicates, 1 + k * (raw - 1), rtol=1e-13)


def test_undefined_ratio_when_grpo_alignment_is_not_positive():
    counts = stratified_counts([4], 200, 0)
    eff = probe_efficiency("r", [np.array([1.0, 2.0, 3.0, 4.0])], [np.array([1.0, -2.0, -1.0, 0.5])], counts=counts)
    assert math.isnan(eff.rho_raw) and eff.rho == 1.0 and eff.snr == 0.0
    assert any("undefined" in n for n in eff.notes)


def test_reference_draws_widen_the_interval_by_the_jackknife_spread():
    rng = np.random.default_rng(5)
    o = [rng.normal(2.0, 1.0, size=16) for _ in range(4)]
    # each batch measured along a different reference draw: the ratio differs by batch (0.8 .. 2.6)
    r = [f * x for f, x in zip((0.8, 1.4, 2.0, 2.6), o)]
    counts = stratified_counts([16] * 4, 1000, 0)
    shared = probe_efficiency("r", r, o, counts=counts, reference_draws=[0, 0, 0, 0])
    drawn = probe_efficiency("r", r, o, counts=counts, reference_draws=[0, 1, 2, 3])
    assert not shared.reference_noise and any("one reference draw" in n for n in shared.notes)
    assert drawn.reference_noise and drawn.rho_raw == shared.rho_raw
    s = np.array([x.sum() for x in r]), np.array([x.sum() for x in o])
    loo = (s[0].sum() - s[0]) / (s[1].sum() - s[1])
    se_j = math.sqrt(3 / 4 * np.sum((loo - loo.mean()) ** 2))
    assert se_j > shared.se and drawn.se == pytest.approx(se_j, rel=1e-12)


def test_robust_se_is_the_standard_deviation_of_a_normal():
    x = np.random.default_rng(0).normal(0.0, 2.0, size=200_000)
    assert robust_se(x) == pytest.approx(2.0, rel=0.01)
    assert math.isnan(robust_se(np.array([1.0])))


def _verl_proxy2(adv, old_log_probs, sum_pi_squared, response_mask):
    """verl/trainer/ppo/metric_utils.py compute_variance_proxy_metrics, on-policy branch, line for line."""
    def masked_sum(v, m, axis):
        return (torch.where(m.bool(), v, 0.0) * m).sum(axis=axis)

    def masked_mean(v, m, axis):
        return masked_sum(v, m, axis) / (m.sum(axis=axis) + 1e-8)

    pi_t = torch.exp(old_log_probs)
    w_per_timestep = 1 - 2 * pi_t + sum_pi_squared
    advantages_scalar = masked_mean(adv, response_mask, -1)
    w_values = masked_sum(w_per_timestep, response_mask, -1)
    return (advantages_scalar ** 2 * torch.clamp(w_values, min=0.0)).mean()


def test_signal_proxy_is_verls_total_power_in_float64():
    g = torch.Generator().manual_seed(0)
    n, t, v, groups = 12, 9, 11, 3
    logits = torch.randn(n, t, v, generator=g, dtype=torch.float64)
    ids = torch.randint(0, v, (n, t), generator=g)
    mask = torch.rand(n, t, generator=g) > 0.2
    mask[4] = False  # an empty completion counts in N with A = 0
    probs = logits.softmax(-1)
    pi = probs.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    sq = (probs ** 2).sum(-1)
    adv = torch.randn(n, t, generator=g, dtype=torch.float64) * mask
    sums = signal_proxy_group_sums(adv, pi, sq, mask, groups)
    assert sums.shape == (n // groups,)
    ref = _verl_proxy2(adv, pi.log(), sq, mask.to(torch.float64))
    assert float(sums.sum()) / n == pytest.approx(float(ref), rel=1e-7)
    # several rewards at once give each one's sums
    both = signal_proxy_group_sums(torch.stack([adv, 2 * adv]), pi, sq, mask, groups)
    torch.testing.assert_close(both[1], 4 * both[0], rtol=1e-14, atol=0)


def test_signal_proxy_efficiency_is_the_root_of_the_power_ratio():
    p = [np.array([1.0, 2.0, 0.5, 4.0])]
    counts = stratified_counts([4], 300, 0)
    rho, iv, reps = signal_proxy_efficiency([4.0 * p[0]], p, counts=counts)
    assert rho == pytest.approx(2.0, rel=1e-15) and iv == pytest.approx((2.0, 2.0))
    rho0, _, reps0 = signal_proxy_efficiency([p[0]], [0 * p[0]], counts=counts)
    assert math.isnan(rho0) and np.isnan(reps0).all()
