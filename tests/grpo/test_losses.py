import math

import pytest
import torch

from gradprobe.grpo.losses import LOSS_TYPES, policy_loss, token_weights
from gradprobe.grpo.step import UpdateConfig, loss_and_backward


def _mask():
    return torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)


def test_weights_per_loss_type():
    m = _mask()
    w = token_weights(m, "grpo")
    assert w[0, 0].item() == pytest.approx(1 / (3 * 3)) and w[1, 0].item() == pytest.approx(1 / 3)
    assert w.sum().item() == pytest.approx(1.0)
    assert token_weights(m, "dapo").sum().item() == pytest.approx(1.0)
    assert token_weights(m, "dapo")[0, 0].item() == pytest.approx(1 / 8)
    assert token_weights(m, "dr_grpo")[0, 0].item() == pytest.approx(1 / (3 * 4))
    assert token_weights(m, "dr_grpo", max_completion_length=10)[2, 3].item() == pytest.approx(1 / 30)
    assert torch.all(token_weights(m, "grpo")[~m] == 0)
    with pytest.raises(ValueError, match="dapo"):
        token_weights(m, "nope")


def test_on_policy_gradient_is_weighted_advantage():
    logp = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    adv = torch.randn(3, 4, dtype=torch.float64)
    w = token_weights(_mask(), "grpo")
    policy_loss(logp, adv, w).backward()
    assert torch.allclose(logp.grad, -w * adv)


def test_kl_penalty_is_clamped_as_verl_and_stays_finite_in_float32():
    """Log-ratios d = l_ref - l_theta of +-100 nats overflowed exp(d) to inf in float32 (loss inf,
    gradient -inf); verl's low_var_kl clamps d to [-20, 20] and k3 to [-10, 10]."""
    from gradprobe.grpo.losses import k3_kl_penalty

    mask = torch.tensor([[True, True, True, True, True, False]])
    logp = torch.tensor([[-120.0, -1.0, -2.0, -0.5, -3.0, -1.0]], dtype=torch.float32, requires_grad=True)
    d = torch.tensor([[100.0, -100.0, 0.5, 1.5, -12.0, 500.0]])  # the last is padding: not counted
    ref = (logp.detach() + d).to(torch.float32)
    w = token_weights(mask, "dapo").to(torch.float32)  # 1/5 per real token
    stats: dict = {}
    loss = policy_loss(logp, torch.zeros_like(logp), w, ref_logp=ref, kl_coef=0.1, stats=stats)
    loss.backward()
    k3 = [min(math.exp(min(max(x, -20), 20)) - min(max(x, -20), 20) - 1, 10.0) for x in (100, -100, 0.5, 1.5, -12)]
    assert k3[0] == 10.0 and k3[1] == 10.0 and k3[4] == 10.0 and k3[2] < 10 and k3[3] < 10
    assert torch.isfinite(loss) and float(loss.detach()) == pytest.approx(0.1 * sum(k3) / 5, rel=1e-6)
    assert torch.isfinite(logp.grad).all()
    # d/dl_theta of exp(d) - d - 1 is 1 - exp(d); clamped tokens (|d| > 20 or k3 > 10) get none
    expected = [0.0, 0.0, 0.1 / 5 * (1 - math.exp(0.5)), 0.1 / 5 * (1 - math.exp(1.5)), 0.0, 0.0]
    assert logp.grad[0].tolist() == pytest.approx(expected, rel=1e-5, abs=1e-9)
    assert stats == {"kl_clamped_tokens": 3}  # d = 100, -100 (log-ratio clamp), -12 (k3 = 11 > 10)
    policy_loss(logp.detach(), torch.zeros_like(logp), w, ref_logp=ref, kl_coef=0.1, stats=stats)
    assert stats == {"kl_clamped_tokens": 6}  # micro-batches accumulate into one dict
    # inside both bounds it is TRL's expression, bit for bit
    k, hit = k3_kl_penalty(logp.detach()[:, 2:4], ref[:, 2:4])
    delta = ref[:, 2:4] - logp.detach()[:, 2:4]
    assert torch.equal(k, torch.exp(delta) - delta - 1) and not hit.any()
    k, hit = k3_kl_penalty(logp.detach(), ref, value_clamp=None)  # the statistic's variant: log-ratio only
    assert hit[0].tolist() == [True, True, False, False, False, True]
    assert float(k[0, 0]) == pytest.approx(math.exp(20) - 21, rel=1e-6)
    assert float(k[0, 4]) == pytest.approx(11 + math.exp(-12))
    with pytest.raises(ValueError, match="ref_logp has shape"):
        k3_kl_penalty(logp.detach(), ref[:, :3])
    with pytest.raises(ValueError, match="value_clamp"):
        k3_kl_penalty(logp.detach(), ref, value_clamp=0.0)


def test_kl_penalty_zero_at_reference():
    logp = torch.randn(3, 4, dtype=torch.float64)
    w = token_weights(_mask(), "dapo")
    base = policy_loss(logp, torch.zeros_like(logp), w)
    with_kl = policy_loss(logp, torch.zeros_like(logp), w, ref_logp=logp.clone(), kl_coef=0.1)
    assert base.item() == 0 and with_kl.item() == pytest.approx(0.0)


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_micro_batching_gives_same_loss_and_gradient(tiny_policy, loss_type):
    from gradprobe.types import RolloutBatch
    from gradprobe.tasks.base import Problem

    model = tiny_policy.model.double()
    torch.manual_seed(1)
    b, g, p, t = 3, 2, 5, 6
    ids = torch.randint(4, 90, (b * g, p + t))
    am = torch.ones_like(ids)
    am[0, :2] = 0
    mask = torch.ones(b * g, t, dtype=torch.bool)
    mask[1, 3:] = False
    mask[4, 1:] = False
    am[:, p:] = mask.long()
    batch = RolloutBatch(problems=[Problem(str(i), "q", "1", {}) for i in range(b)], group_size=g, input_ids=ids,
                         attention_mask=am, prompt_length=p, completion_mask=mask, completions=["x"] * (b * g),
                         truncated=torch.zeros(b * g, dtype=torch.bool), scores=torch.zeros(b * g, dtype=torch.float64),
                         temperature=0.7, prompt_token_ids=[[1]] * b)
    adv = torch.randn(b * g, t, dtype=torch.float64) * mask
    grads, losses = [], []
    for mb in (1, 4, b * g):
        model.zero_grad()
        losses.append(loss_and_backward(model, batch, adv, UpdateConfig(loss_type=loss_type, micro_batch_size=mb)))
        grads.append(torch.cat([q.grad.flatten() for q in model.parameters()]))
    assert losses[0] == pytest.approx(losses[2], abs=1e-12)
    assert torch.allclose(grads[0], grads[2], atol=1e-12) and torch.allclose(grads[1], grads[2], atol=1e-12)
    assert grads[0].abs().sum() > 0
