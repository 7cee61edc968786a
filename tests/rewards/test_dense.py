"""Dense variants on hand-worked step values (B = 1 group of G = 2)."""

import math

import pytest
import torch

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.rewards import (RewardContext, StepValues, get_reward, hybrid_advantages,
                               mc_advantage_advantages, mc_min_rewards, mc_value_advantages)
from gradprobe.rewards.steps import CACHE_KEY

from helpers_rollout import EOS, make_batch

EPS = 1e-4
F64 = torch.float64


def example():
    """Row 0: L = 5, steps end at 1, 3, 4, V = (0.5, 1, 1), r = 1.
    Row 1: L = 6, steps end at 2, 5, V = (0.5, 0), r = 0.  V_0 = 0.5 for both."""
    batch = make_batch(["abcde", "abcdef"], group_size=2, scores=[1.0, 0.0])
    sv = StepValues(boundaries=[[1, 3, 4], [2, 5]], values=[[0.5, 1.0, 1.0], [0.5, 0.0]], v0=[0.5, 0.5],
                    rewards=[1.0, 0.0], group_size=2, continuation_tokens=40, row_continuation_tokens=[20, 20])
    ctx = RewardContext(task=None, sampler=None, sampling=SamplingConfig(), mc=MCConfig(), ledger=Ledger(),
                        tokenizer=char_tokenizer(), eos_token_ids=[EOS])
    ctx.cache[CACHE_KEY] = (batch, sv)  # as if computed; the registered rewards must reuse it
    return batch, sv, ctx


def expected_mc_value():
    # all step values of the group: 0.5, 1, 1, 0.5, 0 -> mean 0.6, sample std sqrt(0.7 / 4)
    s = math.sqrt(0.70 / 4) + EPS
    row0 = [0.7 / s] * 2 + [0.8 / s] * 2 + [0.4 / s] + [0.0]  # suffix sums of (-0.1, 0.4, 0.4) / s
    row1 = [-0.7 / s] * 3 + [-0.6 / s] * 3  # suffix sums of (-0.1, -0.6) / s
    return torch.tensor([row0, row1], dtype=F64)


def outcome_adv():
    a = 0.5 / (math.sqrt(0.5) + EPS)
    return torch.tensor([[a] * 5 + [0.0], [-a] * 6], dtype=F64)


def test_mc_value_suffix_sums():
    batch, sv, ctx = example()
    adv, valid, stats = mc_value_advantages(sv, batch.completion_mask)
    torch.testing.assert_close(adv, expected_mc_value())
    assert valid.all() and stats["zero_variance_groups"] == 0
    out = get_reward("mc_value")(batch, ctx)
    torch.testing.assert_close(out.advantages, expected_mc_value())
    assert out.generated_tokens == {"continuation": 40} and out.name == "mc_value"
    assert ctx.ledger.generated_tokens["continuation"] == 0  # cached values are not charged again


def test_mc_value_zero_variance_group_is_exactly_zero():
    batch, sv, _ = example()
    sv.values = [[1.0, 1.0, 1.0], [1.0, 1.0]]
    adv, valid, stats = mc_value_advantages(sv, batch.completion_mask)
    assert torch.equal(adv, torch.zeros_like(adv)) and stats["zero_variance_groups"] == 1


def test_mc_advantage_telescopes():
    batch, sv, ctx = example()
    out = get_reward("mc_advantage")(batch, ctx)
    expected = torch.tensor([[0.0, 0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, -0.5, -0.5, -0.5]], dtype=F64)
    torch.testing.assert_close(out.advantages, expected)
    for n in range(2):  # one token per step: sum_s (V_s - V_{s-1}) = V_S - V_0 = r - mean_j r
        per_step = out.advantages[n, sv.boundaries[n]]
        assert float(per_step.sum()) == pytest.approx(sv.rewards[n] - sv.v0[n])
    adv, _, _ = mc_advantage_advantages(sv, batch.completion_mask)
    assert torch.equal(adv, out.advantages)


@pytest.mark.parametrize("name, lam", [("hybrid_0.9", 0.9), ("hybrid_0.5", 0.5), ("hybrid_0.1", 0.1),
                                       ("hybrid", 0.5)])
def test_hybrid_is_a_convex_combination(name, lam):
    batch, sv, ctx = example()
    out = get_reward(name)(batch, ctx)
    torch.testing.assert_close(out.advantages, lam * expected_mc_value() + (1 - lam) * outcome_adv())
    assert out.name == name and out.generated_tokens == {"continuation": 40}
    adv, valid = hybrid_advantages(expected_mc_value(), torch.tensor([True, False]), outcome_adv(),
                                   torch.tensor([True, True]), lam)
    assert valid.tolist() == [True, False] and not adv[1].any()
    with pytest.raises(ValueError):
        hybrid_advantages(adv, valid, adv, valid, 1.5)


def test_mc_min():
    batch, sv, ctx = example()
    assert mc_min_rewards(sv).tolist() == [0.5, 0.0]
    out = get_reward("mc_min")(batch, ctx)
    a = 0.25 / (math.sqrt(2 * 0.25 ** 2) + EPS)  # rewards (0.5, 0): mean 0.25, sample std
    torch.testing.assert_close(out.advantages, torch.tensor([[a] * 5 + [0.0], [-a] * 6], dtype=F64))
    sv.boundaries[1], sv.values[1] = [], []  # an empty completion's sequence reward is r
    assert mc_min_rewards(sv).tolist() == [0.5, 0.0]


def test_invalid_row_is_zero_and_excluded():
    batch, sv, ctx = example()
    sv.values[1] = [math.nan, math.nan]
    sv.rewards[1] = math.nan
    adv, valid, stats = mc_value_advantages(sv, batch.completion_mask)
    assert valid.tolist() == [True, False] and stats["missing"] == 1
    s = math.sqrt(((0.5 - 2.5 / 3) ** 2 + 2 * (1 - 2.5 / 3) ** 2) / 2) + EPS  # row 0's steps alone
    z = [(0.5 - 2.5 / 3) / s, (1 - 2.5 / 3) / s, (1 - 2.5 / 3) / s]
    expected0 = [z[0] + z[1] + z[2]] * 2 + [z[1] + z[2]] * 2 + [z[2]] + [0.0]
    torch.testing.assert_close(adv[0], torch.tensor(expected0, dtype=F64))
    assert not adv[1].any()
    adv2, valid2, _ = mc_advantage_advantages(sv, batch.completion_mask)
    assert valid2.tolist() == [True, False] and not adv2[1].any() and not torch.isnan(adv2).any()
