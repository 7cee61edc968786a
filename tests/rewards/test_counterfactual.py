"""outcome_loo: the outcome reward with the leave-one-out (counterfactual) baseline."""

import math

import pytest
import torch

from gradprobe.rewards import REWARDS, get_reward, loo_advantages, outcome_loo_reward

from helpers_rollout import make_batch
from helpers_training import metric_lines, train_tiny

EPS = 1e-4
F64 = torch.float64
NAN = float("nan")


def reference(rewards, g, scale="group"):
    """Hand-written float64 reference: per row, r_j minus the mean of the OTHER valid members, divided by
    the group's sample std (ddof 1) + eps, the batch's sample std + eps, or 1."""
    rows = [rewards[i: i + g] for i in range(0, len(rewards), g)]
    finite = [x for x in rewards if not math.isnan(x)]
    batch_mean = sum(finite) / len(finite)
    batch_std = math.sqrt(sum((x - batch_mean) ** 2 for x in finite) / (len(finite) - 1))
    out = []
    for row in rows:
        vals = [x for x in row if not math.isnan(x)]
        n = len(vals)
        if n < 2 or max(vals) == min(vals):
            out += [0.0] * g
            continue
        mean = sum(vals) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in vals) / (n - 1))
        div = {"group": std + EPS, "batch": batch_std + EPS, "none": 1.0}[scale]
        for x in row:
            if math.isnan(x):
                out.append(0.0)
                continue
            others = list(vals)
            others.remove(x)
            out.append((x - sum(others) / (n - 1)) / div)
    return torch.tensor(out, dtype=F64)


SCORES = [1, 0, 0, 1,   1, 1, 1, 0,   0, 0, 0, 0,   1, NAN, 0, 0,   NAN, NAN, NAN, 1]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_leave_one_out_advantages_equal_a_hand_written_float64_reference(scale):
    r = torch.tensor(SCORES, dtype=F64)
    adv, stats = loo_advantages(r.view(5, 4), scale=scale)
    assert adv.dtype == F64
    torch.testing.assert_close(adv.reshape(-1), reference(SCORES, 4, scale), rtol=0, atol=1e-12)
    assert stats["missing"] == 4 and stats["zero_variance_groups"] == 2 and stats["groups"] == 5


def test_the_registered_reward_broadcasts_over_tokens_and_takes_the_outcome_scale():
    batch = make_batch(["ab", "abc", "a", "abcd"] * 5, group_size=4, scores=SCORES)
    out = get_reward("outcome_loo")(batch, None)
    assert "outcome_loo" in REWARDS and out.name == "outcome_loo" and out.generated_tokens == {}
    expected = reference(SCORES, 4)
    torch.testing.assert_close(out.advantages, expected[:, None] * batch.completion_mask.to(F64), rtol=0, atol=1e-12)
    assert out.valid.tolist() == [not math.isnan(x) for x in SCORES]
    assert out.stats["mean_reward"] == pytest.approx(7 / 16) and out.stats["missing"] == 4
    # per group, the counterfactual baseline rescales outcome's advantage by n / (n - 1)
    outcome = get_reward("outcome")(batch, None).advantages[:, 0]
    n = torch.tensor([4] * 12 + [3] * 4 + [1] * 4, dtype=F64)
    torch.testing.assert_close(out.advantages[:, 0], outcome * torch.where(n > 1, n / (n - 1), 0.0), rtol=0,
                               atol=1e-12)
    # the scale is a parameter (default "group", as outcome's): plain RLOO centres only
    torch.testing.assert_close(outcome_loo_reward(batch, None, scale="none").advantages[:, 0],
                               reference(SCORES, 4, "none"), rtol=0, atol=1e-12)


def test_zero_variance_groups_give_exactly_zero():
    for scores in ([1, 1, 1, 1], [0, 0, 0, 0], [0.3, 0.3 + 1e-12, 0.3, 0.3]):
        out = outcome_loo_reward(make_batch(["ab"] * 4, group_size=4, scores=scores), None)
        assert torch.equal(out.advantages, torch.zeros_like(out.advantages))
        assert out.stats["zero_variance_groups"] == 1
    with pytest.raises(ValueError, match="advantage scale"):
        outcome_loo_reward(make_batch(["ab"] * 4, group_size=4, scores=[1, 0, 0, 0]), None, scale="rloo")


def test_one_training_update_with_outcome_loo_on_the_tiny_tier(tmp_path):
    summary = train_tiny(tmp_path / "run", arm="loo", reward="outcome_loo")
    assert summary["updates"] == 1 and summary["ledger"]["generated_tokens"]["continuation"] == 0
    lines = metric_lines(tmp_path / "run")
    update = next(x for x in lines if not x.get("eval"))
    assert update["reward_stats"]["groups"] == 2 and update["reward_stats"]["valid"] == 8
    assert math.isfinite(update["loss"])
