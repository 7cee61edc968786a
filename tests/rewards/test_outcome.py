"""outcome rewards and the registry."""

import inspect
import math

import pytest
import torch

from gradprobe.rewards import (REWARDS, UnknownRewardError, get_reward, outcome_reward,
                               parse_rewards, register_reward)
from gradprobe.rewards import outcome as outcome_mod
from gradprobe.rewards.dense import mc_min
from gradprobe.rewards.majority import majority_vote

from helpers_rollout import make_batch

EPS = 1e-4


def batch_of(scores, g=4):
    texts = ["ab", "abc", "a", "abcd"] * (len(scores) // 4) if g == 4 else ["ab"] * len(scores)
    return make_batch(texts, group_size=g, scores=scores)


def test_group_advantages_sum_to_zero_and_broadcast():
    batch = batch_of([1, 0, 0, 1, 1, 1, 1, 0])
    out = get_reward("outcome")(batch, None)
    assert out.name == "outcome" and out.generated_tokens == {}
    assert out.advantages.dtype == torch.float64 and out.advantages.shape == batch.completion_mask.shape
    seq = out.advantages[:, 0]
    std0 = math.sqrt(((0.5 ** 2) * 4) / 3)
    torch.testing.assert_close(seq[:4], torch.tensor([0.5, -0.5, -0.5, 0.5], dtype=torch.float64) / (std0 + EPS))
    std1 = math.sqrt((0.25 ** 2 * 3 + 0.75 ** 2) / 3)
    torch.testing.assert_close(seq[4:], torch.tensor([0.25, 0.25, 0.25, -0.75], dtype=torch.float64) / (std1 + EPS))
    assert abs(float(seq[:4].sum())) < 1e-12 and abs(float(seq[4:].sum())) < 1e-12
    mask = batch.completion_mask
    assert torch.equal(out.advantages, seq[:, None] * mask)  # same on every token, 0 off the mask
    assert out.valid.all() and out.stats["missing"] == 0 and out.stats["mean_reward"] == 5 / 8


def test_zero_variance_and_nan_scores():
    batch = batch_of([1, 1, 1, 1, 1, 0, float("nan"), 1])
    out = get_reward("outcome")(batch, None)
    assert torch.equal(out.advantages[:4], torch.zeros_like(out.advantages[:4]))  # exactly 0
    assert not torch.isnan(out.advantages).any()
    assert out.stats["zero_variance_groups"] == 1 and out.stats["missing"] == 1
    assert out.valid.tolist() == [True] * 6 + [False, True]
    assert torch.equal(out.advantages[6], torch.zeros_like(out.advantages[6]))
    # the rest of the group is normalised without the missing member: r = (1, 0, 1)
    std = math.sqrt(((1 / 3) ** 2 * 2 + (2 / 3) ** 2) / 2)
    expected = torch.tensor([1 / 3, -2 / 3, 1 / 3], dtype=torch.float64) / (std + EPS)
    torch.testing.assert_close(out.advantages[[4, 5, 7], 0], expected)
    assert out.stats["mean_reward"] == 6 / 7  # ignores the missing one


def test_single_valid_member_and_other_scales():
    batch = batch_of([1, float("nan"), float("nan"), float("nan"), 1, 0, 0, 0])
    out = get_reward("outcome")(batch, None)
    assert torch.equal(out.advantages[0], torch.zeros_like(out.advantages[0]))
    dr = get_reward("outcome_dr")(batch, None)
    torch.testing.assert_close(dr.advantages[4:, 0], torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=torch.float64))
    bt = get_reward("outcome_batch")(batch, None)
    std = torch.tensor([1.0, 1, 0, 0, 0], dtype=torch.float64).std()  # batch std over valid rewards
    torch.testing.assert_close(bt.advantages[4:, 0], dr.advantages[4:, 0] / (std + EPS))


def test_the_scale_is_an_explicit_parameter_not_a_module_setting():
    batch = batch_of([1, 0, 0, 0])
    centred = torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=torch.float64)
    torch.testing.assert_close(outcome_reward(batch, scale="none").advantages[:, 0], centred, rtol=0, atol=1e-15)
    # the registered reward is GRPO's group scale: centred / (sample std 0.5 + eps)
    torch.testing.assert_close(get_reward("outcome")(batch, None).advantages[:, 0], centred / (0.5 + EPS),
                               rtol=0, atol=1e-12)
    assert not hasattr(outcome_mod, "OUTCOME_SCALE")  # no module global to set
    with pytest.raises(ValueError, match="valid scales: group, batch, none"):
        outcome_reward(batch, scale="std")
    # every other sequence reward that normalises takes the same parameter
    for fn in (mc_min, majority_vote):
        assert inspect.signature(fn).parameters["scale"].default == "group"


def test_registry():
    with pytest.raises(UnknownRewardError) as e:
        get_reward("mc_valeu")
    assert "mc_value" in str(e.value) and "outcome" in str(e.value) and isinstance(e.value, ValueError)
    names = [n for n, _ in parse_rewards("outcome, mc_value,hybrid_0.9")]
    assert names == ["outcome", "mc_value", "hybrid_0.9"]
    assert parse_rewards(["mc_min"])[0][1] is REWARDS["mc_min"]
    with pytest.raises(ValueError, match="more than once"):
        parse_rewards("outcome,mc_value,outcome")
    with pytest.raises(UnknownRewardError):
        parse_rewards("outcome,bogus")
    for name in ("outcome", "outcome_batch", "outcome_dr", "mc_value", "mc_advantage", "hybrid", "hybrid_0.9",
                 "hybrid_0.5", "hybrid_0.1", "mc_min"):
        assert name in REWARDS
    with pytest.raises(ValueError):
        register_reward("a,b")
    with pytest.raises(ValueError, match="already registered"):
        register_reward("outcome")(lambda batch, ctx: None)
