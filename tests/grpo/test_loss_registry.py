"""One registry of loss types serves the update and the probe (issue 15): a registered loss type reaches
token_weights, the probe's per-group parts and plan/CLI validation, and its weights equal its parts' ratio."""

from __future__ import annotations

import pytest
import torch

from gradprobe.grpo import losses
from gradprobe.grpo.losses import (GROUP_PARTS, LOSS_TYPES, LOSSES, OBJECTIVES, LossType, register_loss_type,
                                   token_weights)
from gradprobe.probe.estimate import group_sums


@pytest.fixture
def extra_loss():
    loss = register_loss_type(LossType("test_token_ppo", "token_mean", "ppo", "test"))
    yield loss
    del LOSSES[loss.name]


def _mask(n=8, t=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    return torch.arange(t)[None, :] < lengths[:, None]


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_weights_equal_the_ratio_of_group_parts_in_float64(name):
    mask = _mask()
    w = token_weights(mask, name, max_completion_length=9)
    u, den = GROUP_PARTS[name](mask.double(), 4, 9)
    torch.testing.assert_close(w, u / den.sum(), rtol=0, atol=1e-15)
    assert abs(float(w.sum()) - {"constant": float(mask.sum()) / (8 * 9)}.get(LOSSES[name].normalisation, 1.0)) < 1e-12


def test_one_function_per_normalisation():
    assert LOSS_TYPES["bnpo"] is LOSS_TYPES["dapo"] is LOSS_TYPES["cispo"]
    assert LOSS_TYPES["gspo"] is LOSS_TYPES["grpo"] is not LOSS_TYPES["dr_grpo"]
    assert dict(OBJECTIVES)["cispo"] == "cispo"


def test_a_registered_loss_type_reaches_update_probe_and_validation(extra_loss):
    assert "test_token_ppo" in LOSS_TYPES and "test_token_ppo" in GROUP_PARTS
    assert OBJECTIVES["test_token_ppo"] == "ppo"
    mask = _mask(seed=1)
    torch.testing.assert_close(token_weights(mask, "test_token_ppo"), token_weights(mask, "dapo"), rtol=0, atol=0)
    a = torch.randn(mask.shape, dtype=torch.float64)
    adv = torch.randn(mask.shape, dtype=torch.float64)
    ours = group_sums(a, adv, mask, 4, loss_type="test_token_ppo")
    dapo = group_sums(a, adv, mask, 4, loss_type="dapo")
    assert all(torch.equal(x, y) for x, y in zip(ours, dapo))
    from gradprobe.probe.config import ProbeConfig
    ProbeConfig.from_dict(dict(loss_type="test_token_ppo"))  # validation reads the registry
    del LOSSES["test_token_ppo"]
    with pytest.raises(ValueError, match="test_token_ppo"):
        token_weights(mask, "test_token_ppo")
    LOSSES["test_token_ppo"] = extra_loss  # for the fixture's teardown


def test_bad_registrations_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_loss_type(LossType("grpo", "token_mean", "ppo"))
    assert register_loss_type(LOSSES["grpo"]) is LOSSES["grpo"]  # the same one again is fine
    with pytest.raises(ValueError, match="normalisation 'mean' is not one of"):
        LossType("x", "mean", "ppo")
    with pytest.raises(ValueError, match="objective 'reinforce' is not one of"):
        LossType("x", "token_mean", "reinforce")
    assert losses.OBJECTIVE_NAMES == ("ppo", "cispo", "gspo")
