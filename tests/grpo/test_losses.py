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
