"""estimate_rewards / group_sums: the probe's inner products, their invariances and the bootstrap."""

import json
import math

import pytest
import torch

from gradprobe.grpo.loss_types import GROUP_PARTS
from gradprobe.grpo.losses import LOSS_TYPES, token_weights
from gradprobe.probe import estimate_rewards, group_sums, token_alignment
from gradprobe.probe.references import dot, norm, reward_gradient

import probe_helpers as h

single_thread = h.single_thread  # autouse fixture: one intra-op thread for tiny models
LOSSES = ["grpo", "dapo", "dr_grpo"]


def synthetic(num_prompts=6, group_size=4, t=9, seed=0):
    """Random alignment and advantages on a ragged mask (no model needed); one empty row."""
    g = torch.Generator().manual_seed(seed)
    n = num_prompts * group_size
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    lengths[3] = 0
    mask = torch.arange(t)[None, :] < lengths[:, None]
    a = torch.randn(n, t, generator=g, dtype=torch.float64)
    adv = torch.randn(n, t, generator=g, dtype=torch.float64) * mask
    return a, adv, mask


def estimate(alignment, rewards, mask, group_size, **kw):
    kw.setdefault("n_bootstrap", 200)
    names = list(rewards)
    return estimate_rewards(alignment, rewards, completion_mask=mask, group_size=group_size,
                            lr=kw.pop("lr", 1e-6), tokens_per_update=kw.pop("tokens", {k: 1000 for k in names}),
                            budget_tokens=kw.pop("budget_tokens", 1e6), **kw)


def weighted_sum(a, adv, mask, loss_type, max_len=None):
    return float((token_weights(mask, loss_type, max_completion_length=max_len) * adv * a).sum())


@pytest.mark.parametrize("loss_type", LOSSES)
def test_group_sums_ratio_equals_the_weighted_sum(loss_type):
    a, adv, mask = synthetic()
    num, den = group_sums(a, adv, mask, 4, loss_type=loss_type)
    assert num.shape == (6,) and den.shape == (6,) and num.dtype == torch.float64
    expected = weighted_sum(a, adv, mask, loss_type)
    assert abs(float(num.sum() / den.sum()) - expected) <= 1e-14 * max(1.0, abs(expected))
    # the normaliser shares documented in the module docstring
    want_den = {"grpo": torch.full((6,), 4.0), "dapo": mask.sum(-1).view(6, 4).sum(-1).double(),
                "dr_grpo": torch.full((6,), 4.0 * 9)}[loss_type]
    assert torch.equal(den, want_den.double())


def test_normalizers_agree_with_the_loss_weights():
    assert set(GROUP_PARTS) == set(LOSS_TYPES)
    _, _, mask = synthetic(seed=1)
    for loss_type, rule in GROUP_PARTS.items():
        u, den = rule(mask.double(), 4, mask.shape[1])
        assert torch.allclose(u / den.sum(), token_weights(mask, loss_type), rtol=1e-15, atol=0)


@pytest.mark.parametrize("loss_type", LOSSES)
def test_inner_product_equals_explicit_dot_with_reward_gradient(loss_type):
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=2, completion_length=8, seed=20)
    v = h.random_direction(model, seed=21)
    adv = h.random_advantages(batch, seed=22)
    a = token_alignment(model, batch, v)
    [est] = estimate(a, {"r": adv}, batch.completion_mask, 2, loss_type=loss_type)
    g_r = reward_gradient(model, batch, adv, token_weights(batch.completion_mask, loss_type), micro_batch_size=4)
    explicit = dot(g_r, v)
    assert abs(explicit) > 1e-3
    assert abs(est.inner_product - explicit) < 1e-11 * abs(explicit)


def test_linear_in_the_advantages_and_paired_across_rewards():
    a, adv1, mask = synthetic(seed=2)
    _, adv2, _ = synthetic(seed=3)
    rewards = {"a1": adv1, "a2": adv2, "combo": 1.5 * adv1 - 2.0 * adv2, "double": 2.0 * adv1}
    e = {r.name: r for r in estimate(a, rewards, mask, 4, n_bootstrap=300, seed=5)}
    assert math.isclose(e["combo"].inner_product, 1.5 * e["a1"].inner_product - 2.0 * e["a2"].inner_product,
                        rel_tol=1e-12, abs_tol=1e-14)
    # paired bootstrap: the same resampled groups for every reward, so a doubled reward doubles its interval
    assert e["double"].interval == pytest.approx(tuple(2 * x for x in e["a1"].interval), rel=1e-12)
    assert e["double"].snr == pytest.approx(e["a1"].snr, rel=1e-12)
    # and a reward's estimate does not depend on which other rewards are estimated with it
    [alone] = estimate(a, {"a2": adv2}, mask, 4, n_bootstrap=300, seed=5)
    assert alone.inner_product == pytest.approx(e["a2"].inner_product, rel=1e-14)
    assert alone.interval == pytest.approx(e["a2"].interval, rel=1e-12)


@pytest.mark.parametrize("loss_type", LOSSES)
def test_splitting_the_batch_and_reordering_groups(loss_type):
    model = h.tiny_model("tiny-llama")
    batch = h.make_batch(num_prompts=4, group_size=2, seed=30)
    v = h.random_direction(model, seed=31)
    adv = h.random_advantages(batch, seed=32)
    kw = dict(loss_type=loss_type, max_completion_length=batch.completion_mask.shape[1])
    full = float(weighted_sum(token_alignment(model, batch, v, micro_batch_size=3), adv, batch.completion_mask,
                              loss_type))
    [e] = estimate(token_alignment(model, batch, v), {"r": adv}, batch.completion_mask, 2, n_bootstrap=0, **kw)
    assert e.inner_product == pytest.approx(full, rel=1e-12)

    nums, dens = [], []
    for groups in ([0, 1], [2, 3]):  # two sub-batches, each with its own jvp, combined by per-group sums
        sub = batch.select_groups(groups)
        rows = torch.tensor([[2 * i, 2 * i + 1] for i in groups]).flatten()
        num, den = group_sums(token_alignment(model, sub, v), adv[rows], sub.completion_mask, 2, **kw)
        nums.append(num)
        dens.append(den)
    assert float(torch.cat(nums).sum() / torch.cat(dens).sum()) == pytest.approx(full, rel=1e-12)

    perm = [2, 0, 3, 1]
    shuffled = batch.select_groups(perm)
    rows = torch.tensor([[2 * i, 2 * i + 1] for i in perm]).flatten()
    [p] = estimate(token_alignment(model, shuffled, v), {"r": adv[rows]}, shuffled.completion_mask, 2,
                   n_bootstrap=0, **kw)
    assert p.inner_product == pytest.approx(full, rel=1e-12)
    assert p.per_group == pytest.approx([e.per_group[i] for i in perm], rel=1e-12)


def test_bootstrap_interval_determinism_and_snr():
    a, adv, mask = synthetic(num_prompts=12, seed=4)
    first = estimate(a, {"r": adv + 0.3 * mask}, mask, 4, n_bootstrap=1000, seed=7)[0]
    again = estimate(a, {"r": adv + 0.3 * mask}, mask, 4, n_bootstrap=1000, seed=7)[0]
    other = estimate(a, {"r": adv + 0.3 * mask}, mask, 4, n_bootstrap=1000, seed=8)[0]
    lo, hi = first.interval
    assert lo < first.inner_product < hi
    assert first.to_dict() == again.to_dict()
    assert other.interval != first.interval
    assert other.inner_product == first.inner_product
    assert math.isfinite(first.snr) and first.snr > 0
    assert sum(first.per_group) == pytest.approx(first.inner_product, rel=1e-12)
    assert len(first.per_group) == 12


def test_all_zero_reward_gives_exact_zeros():
    a, adv, mask = synthetic(seed=5)
    zero, real = estimate(a, {"zero": torch.zeros_like(adv), "real": adv}, mask, 4, n_bootstrap=500)
    assert zero.inner_product == 0.0 and zero.interval == (0.0, 0.0) and zero.snr == 0.0
    assert zero.predicted_gain_per_update == 0.0 and zero.predicted_gain_at_budget == 0.0
    assert zero.gain_interval_at_budget == (0.0, 0.0)
    for value in (real.inner_product, *real.interval, real.snr):
        assert math.isfinite(value)
    json.dumps(zero.to_dict(), allow_nan=False)
    json.dumps(real.to_dict(), allow_nan=False)


def test_gain_arithmetic_and_budgets():
    a, adv, mask = synthetic(seed=6)
    [e] = estimate(a, {"mc": adv}, mask, 4, lr=2e-6, tokens={"mc": 5000}, budget_tokens=1e7, n_bootstrap=100,
                   seconds_per_update={"mc": 4.0}, budget_seconds=3600.0)
    gain = 100 * 2e-6 * e.inner_product
    assert e.predicted_gain_per_update == pytest.approx(gain, rel=1e-15)
    assert e.predicted_gain_at_budget == pytest.approx(1e7 / 5000 * gain, rel=1e-15)
    assert e.predicted_gain_at_time_budget == pytest.approx(3600 / 4.0 * gain, rel=1e-15)
    lo, hi = e.gain_interval_at_budget
    assert lo == pytest.approx(1e7 / 5000 * 100 * 2e-6 * e.interval[0], rel=1e-12)
    assert hi == pytest.approx(1e7 / 5000 * 100 * 2e-6 * e.interval[1], rel=1e-12)
    assert e.tokens_per_update == 5000 and e.cosine is None

    [nb] = estimate(a, {"mc": adv}, mask, 4, n_bootstrap=0)
    assert nb.interval is None and nb.snr is None and nb.gain_interval_at_budget is None
    assert nb.inner_product == pytest.approx(e.inner_product, rel=1e-15)


def test_cosine_from_given_norms():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(seed=40)
    v = h.random_direction(model, seed=41)
    adv = h.random_advantages(batch, seed=42)
    g_r = reward_gradient(model, batch, adv, token_weights(batch.completion_mask, "grpo"))
    [e] = estimate(token_alignment(model, batch, v), {"r": adv}, batch.completion_mask, 2,
                   gradient_norms={"r": norm(g_r)}, direction_norm=norm(v))
    assert e.cosine == pytest.approx(dot(g_r, v) / (norm(g_r) * norm(v)), rel=1e-10)
    assert -1 <= e.cosine <= 1


def test_errors():
    a, adv, mask = synthetic(seed=7)
    with pytest.raises(ValueError, match="tokens_per_update"):
        estimate(a, {"r": adv}, mask, 4, tokens={"other": 10})
    with pytest.raises(ValueError, match="loss_type"):
        estimate(a, {"r": adv}, mask, 4, loss_type="ppo")
    with pytest.raises(ValueError, match="multiple"):
        estimate(a, {"r": adv}, mask, 5)
    with pytest.raises(ValueError, match="shape"):
        estimate(a, {"r": adv[:, :3]}, mask, 4)
    with pytest.raises(ValueError, match="not finite"):
        estimate(a, {"r": torch.where(mask, torch.nan, 0.0)}, mask, 4)
    with pytest.raises(ValueError, match="at least one"):
        estimate(a, {}, mask, 4)
    with pytest.raises(ValueError, match="budget_seconds"):
        estimate(a, {"r": adv}, mask, 4, budget_seconds=10.0)
    # NaN off the mask is ignored (advantages are masked before use)
    [e] = estimate(a, {"r": torch.where(mask, adv, torch.nan)}, mask, 4, n_bootstrap=0)
    assert e.inner_product == pytest.approx(weighted_sum(a, adv, mask, "grpo"), rel=1e-14)
    with pytest.warns(UserWarning, match="2 groups"):
        [one] = estimate(a[:4], {"r": adv[:4]}, mask[:4], 4)
    assert one.interval is None and one.snr is None
