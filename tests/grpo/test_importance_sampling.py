"""Truncated importance sampling (TIS) for a sampler other than the training forward pass (vLLM).

References are hand-computed in float64 (numbers in the comments), and the wiring through
``loss_and_backward`` is checked against an explicit per-token formula on a float64 model.
"""

import math

import pytest
import torch

from gradprobe.grpo.losses import logprob_mismatch, policy_loss, token_weights, truncated_is_weights
from gradprobe.grpo.step import UpdateConfig, grpo_step, loss_and_backward

# Two completions: row 0 has two tokens, row 1 one (its second column is padding).
TRAIN = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]], dtype=torch.float64)
# sampler log-probs: rho = pi_train / pi_sampler = 1.5, exp(-0.1), 4 (capped at C = 2), (padding)
SAMPLER = torch.tensor([[-1.0 - math.log(1.5), -1.9], [-0.5 - math.log(4.0), -7.0]], dtype=torch.float64)
MASK = torch.tensor([[True, True], [True, False]])
ADV = torch.tensor([[1.0, 1.0], [-2.0, 0.0]], dtype=torch.float64)


def test_truncated_weights_hand_computed():
    w = truncated_is_weights(TRAIN, SAMPLER, MASK, cap=2.0)
    expected = torch.tensor([[1.5, 0.9048374180359595], [2.0, 1.0]], dtype=torch.float64)
    assert torch.allclose(w, expected, rtol=0, atol=1e-15)
    # a larger cap lets rho = 4 through; padding stays 1
    assert truncated_is_weights(TRAIN, SAMPLER, MASK, cap=10.0)[1].tolist() == pytest.approx([4.0, 1.0], abs=1e-14)
    # NaN (unscored by the sampler) -> weight 1, as in TRL
    nan = SAMPLER.clone()
    nan[0, 0] = float("nan")
    assert truncated_is_weights(TRAIN, nan, MASK)[0, 0].item() == 1.0


def test_tis_loss_and_gradient_hand_computed():
    # grpo weights: row 0 1/(2 sequences * 2 tokens) = 0.25 per token, row 1 1/(2 * 1) = 0.5
    weights = token_weights(MASK, "grpo")
    assert weights.tolist() == [[0.25, 0.25], [0.5, 0.0]]
    logp = TRAIN.clone().requires_grad_(True)
    is_w = truncated_is_weights(logp.detach(), SAMPLER, MASK, cap=2.0)
    loss = policy_loss(logp, ADV, weights, is_weights=is_w)
    # loss = -(0.25 * 1 * 1.5 + 0.25 * 1 * exp(-0.1) + 0.5 * (-2) * 2) = -(0.375 + 0.2262093545089899 - 2)
    assert loss.item() == pytest.approx(1.3987906454910101, abs=1e-15)
    loss.backward()
    # d loss / d l_t = -w_t A_t rho_t (on-policy ratio 1): [-0.375, -0.22620935450898987], [2.0, 0]
    expected = torch.tensor([[-0.375, -0.22620935450898987], [2.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(logp.grad, expected, rtol=0, atol=1e-15)


def test_mismatch_statistics_hand_computed():
    m = logprob_mismatch(TRAIN, SAMPLER, MASK)
    d = [math.log(1.5), -0.1, math.log(4.0)]  # log rho on the three masked tokens
    assert m["tokens"] == 3 and m["unscored"] == 0
    assert m["max_abs_diff"] == pytest.approx(math.log(4.0), abs=1e-15)
    assert m["mean_abs_diff"] == pytest.approx(sum(abs(x) for x in d) / 3, abs=1e-15)
    assert m["kl_k1"] == pytest.approx(-sum(d) / 3, abs=1e-15)
    assert m["kl_k3"] == pytest.approx(sum(math.exp(x) - 1 - x for x in d) / 3, abs=1e-15)
    same = logprob_mismatch(TRAIN, TRAIN, MASK)
    assert same["max_abs_diff"] == 0.0 and same["kl_k3"] == 0.0


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="cap"):
        truncated_is_weights(TRAIN, SAMPLER, MASK, cap=0.0)
    with pytest.raises(ValueError, match="same shape"):
        truncated_is_weights(TRAIN, SAMPLER[:, :1], MASK)
    with pytest.raises(ValueError, match="importance_sampling"):
        UpdateConfig(importance_sampling="is")
    with pytest.raises(ValueError, match="is_cap"):
        UpdateConfig(importance_sampling="tis", is_cap=-1.0)


def _batch(b=2, g=2, p=4, t=5, seed=3):
    from gradprobe.tasks.base import Problem
    from gradprobe.types import RolloutBatch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 90, (b * g, p + t), generator=gen)
    am = torch.ones_like(ids)
    am[0, :1] = 0
    mask = torch.ones(b * g, t, dtype=torch.bool)
    mask[1, 2:] = False
    am[:, p:] = mask.long()
    return RolloutBatch(problems=[Problem(str(i), "q", "1", {}) for i in range(b)], group_size=g, input_ids=ids,
                        attention_mask=am, prompt_length=p, completion_mask=mask, completions=["x"] * (b * g),
                        truncated=torch.zeros(b * g, dtype=torch.bool), scores=torch.zeros(b * g, dtype=torch.float64),
                        temperature=0.8, prompt_token_ids=[[1]] * b)


def test_loss_and_backward_applies_tis_per_token(tiny_policy):
    """The model gradient under TIS equals the gradient of -sum w A min(exp(l - l_s), C) l, float64."""
    from gradprobe.logprobs import token_logprobs

    model = tiny_policy.model.double()
    batch = _batch()
    mask = batch.completion_mask
    adv = torch.randn(mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * mask
    with torch.no_grad():
        train = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.prompt_length, temperature=0.8)
    delta = torch.randn(mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))  # log rho
    sampler = train - delta
    cfg = UpdateConfig(micro_batch_size=3, importance_sampling="tis", is_cap=1.5)
    stats: dict = {}
    model.zero_grad()
    loss = loss_and_backward(model, batch, adv, cfg, sampler_logp=sampler, stats=stats)
    got = torch.cat([q.grad.flatten() for q in model.parameters()])

    model.zero_grad()
    w = token_weights(mask, "grpo")
    rho = torch.where(mask, delta.exp().clamp(max=1.5), torch.ones_like(delta))
    logp = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.prompt_length, temperature=0.8)
    ref_loss = -(w * adv * rho * logp.exp() / logp.detach().exp()).sum()
    ref_loss.backward()
    want = torch.cat([q.grad.flatten() for q in model.parameters()])
    assert loss == pytest.approx(ref_loss.item(), abs=1e-12)
    assert torch.allclose(got, want, atol=1e-12) and want.abs().sum() > 0
    # the reported mismatch is that of delta on the mask
    assert stats["sampler_mismatch"]["max_abs_diff"] == pytest.approx(float(delta[mask].abs().max()), abs=1e-12)
    assert stats["is_weight"]["max"] <= 1.5 and stats["is_weight"]["capped_fraction"] > 0

    # no IS: gradient differs; sampler == train: TIS is the identity
    model.zero_grad()
    loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=3))
    plain = torch.cat([q.grad.flatten() for q in model.parameters()])
    assert not torch.allclose(plain, want, atol=1e-9)
    model.zero_grad()
    loss_and_backward(model, batch, adv, cfg, sampler_logp=train)
    same = torch.cat([q.grad.flatten() for q in model.parameters()])
    assert torch.allclose(same, plain, atol=1e-12)


def test_grpo_step_requires_sampler_logprobs_for_tis(tiny_policy):
    model = tiny_policy.model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="sampler_logp"):
        grpo_step(model, opt, _batch(), torch.zeros(4, 5, dtype=torch.float64), UpdateConfig(importance_sampling="tis"))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
