"""A reward whose advantages are too large for the probe's statistics is refused where its output enters
(checked_output, before any compute, for a plug-in and a reward passed from Python alike), naming it,
its largest |A| and the fix (advantages of 1e150 gave a stored SNR of 0.0 from an overflowed variance, 1e200 a
message about probe.json after the whole compute); a TRL-style reward's numpy bools count as Python bools do (a list
of ``np.True_`` was refused as "returned bool"); and a reward returning None as a whole is told what None means."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gradprobe.rewards.base import RewardFunctionError, RewardOutput, checked_output
from gradprobe.rewards import output
from gradprobe.rewards.plugin import checked_native
from gradprobe.rewards.sequence import sequence_reward

from helpers_rollout import make_batch

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)
FIX = ("above the 1e+100 the probe takes: its statistics square them (the bootstrap's variance, verl's signal proxy "
       "A^2 W), which overflows float64 (largest 1.8e308); rescale the reward (divide its scores or advantages by a "
       "constant; GRPO's group-normalised advantages are at most sqrt(G - 1))")


def native(scale, valid=None, off_mask=0.0):
    """A native reward: advantages ``scale`` * (1, -1, 2, -2) per row on the mask, ``off_mask`` off it."""
    def reward(batch, ctx):
        m = batch.completion_mask
        rows = torch.tensor([1.0, -1.0, 2.0, -2.0], dtype=torch.float64)[:, None]
        adv = torch.where(m, rows * scale, torch.full(m.shape, off_mask, dtype=torch.float64))
        ok = torch.ones(batch.num_rows, dtype=torch.bool) if valid is None else valid
        return RewardOutput(name="big", advantages=adv, valid=ok)
    return reward


def entered(reward, name):
    """``reward``'s output as it enters the probe and training: called through a plug-in's check, then checked."""
    return checked_output(checked_native(reward, name)(BATCH, None), name, BATCH)


def test_a_native_reward_whose_advantages_overflow_the_statistics_is_refused_naming_it_and_the_fix():
    with pytest.raises(RewardFunctionError) as e:
        entered(native(1e150), "rw.py:big")
    assert str(e.value) == "reward 'rw.py:big' returned advantages up to |A| = 2e+150, " + FIX
    with pytest.raises(RewardFunctionError) as e:  # a native reward given from Python, without a plug-in's check
        checked_output(native(1e150)(BATCH, None), "big", BATCH)
    assert str(e.value) == "reward 'big' returned advantages up to |A| = 2e+150, " + FIX


def test_the_limit_itself_passes_and_values_the_probe_does_not_read_are_not_counted():
    assert output.MAX_ABS_ADVANTAGE == 1e100
    out = entered(native(0.5e100), "rw.py:ok")  # largest |A| = 1e100: the limit
    assert float(out.advantages.abs().max()) == 1e100
    # off the completion mask, and on rows marked not valid (the probe zeroes both), size does not matter
    assert float(entered(native(1.0, off_mask=1e300), "rw.py:pad").advantages.abs().max()) == 2.0
    none_valid = native(1e150, valid=torch.zeros(4, dtype=torch.bool))
    assert float(entered(none_valid, "rw.py:none").advantages.abs().max()) == 0
    with pytest.raises(RewardFunctionError, match=r"^reward 'rw.py:rows' returned advantages up to \|A\| = 1e\+150, "):
        entered(native(1e150, valid=torch.tensor([True, True, False, False])), "rw.py:rows")
    # a NaN is left to the probe's own non-finite check (its message), not counted here
    assert output.advantage_overflow(torch.tensor([float("nan"), float("inf"), 3.0]), "reward 'x'") is None
    assert output.advantage_overflow(torch.tensor([True, False]), "reward 'x'") is None  # a bool tensor is read too


@pytest.mark.parametrize("values", [[np.True_, np.False_, np.True_, np.False_],
                                    list(np.array([2, 3, 2, 3]) % 2 == 0)])
def test_numpy_bools_in_a_list_count_as_python_bools(values):
    def as_numpy(completions, **kwargs):
        return values

    def as_python(completions, **kwargs):
        return [bool(v) for v in values]

    got = sequence_reward(as_numpy)(BATCH, None)
    want = sequence_reward(as_python)(BATCH, None)
    assert torch.equal(got.advantages, want.advantages) and got.stats["mean_reward"] == 0.5
    assert got.advantages[0].max() > 0 and got.advantages[1].min() < 0  # 1.0 beats 0.0 in each group


def test_none_as_the_whole_return_is_told_that_none_is_per_completion():
    def rw(completions, **kwargs):
        return None

    with pytest.raises(RewardFunctionError) as e:
        sequence_reward(rw)(BATCH, None)
    assert str(e.value) == ("reward 'rw' returned NoneType; expected a list of 4 values, one per completion: a "
                            "float, or None for no reward for that completion (the return itself must be a list)")
