"""TRL-signature sequence rewards."""

import copy
import math

import pytest
import torch

from gradprobe.rewards import RewardFunctionError, sequence_reward

from helpers_rollout import make_batch

EPS = 1e-4


def batch4():
    return make_batch(["#### 0", "#### 5", "x", "#### 1"], group_size=2, scores=[1.0, 0.0, 0.0, 1.0])


def correctness(prompts, completions, answer, **kwargs):
    """A reward written for TRL's GRPOTrainer: dataset columns arrive as keyword lists."""
    return [1.0 if c.endswith(a) else 0.0 for c, a in zip(completions, answer)]


def test_trl_function_plugs_in_unchanged():
    batch = batch4()
    seen = {}

    def spy(prompts, completions, **kwargs):
        seen.update(prompts=prompts, completions=completions, **kwargs)
        return correctness(prompts, completions, **kwargs)

    out = sequence_reward(spy, name="correctness")(batch, None)
    assert seen["prompts"] == ["q0", "q0", "q1", "q1"] and seen["completions"] == batch.completions
    assert seen["answer"] == ["0", "0", "1", "1"] and seen["index"] == [0, 0, 1, 1]  # metadata column
    assert seen["completion_ids"][2] == batch.completion_ids[2, :1].tolist()
    a = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([a, -a, -a, a], dtype=torch.float64))
    assert not out.advantages[2, 1:].any()  # zero off the mask ("x" has one token)
    assert out.name == "correctness" and out.generated_tokens == {} and out.stats["mean_reward"] == 0.5
    assert sequence_reward(correctness)(batch, None).name == "correctness"


def test_none_and_nan_are_masked_and_counted():
    batch = batch4()
    fn = lambda prompts, completions, **kw: [None, 1.0, float("nan"), 0.0]  # noqa: E731
    out = sequence_reward(fn, name="partial")(batch, None)
    assert out.valid.tolist() == [False, True, False, True]
    assert out.stats["missing"] == 2 and out.stats["mean_reward"] == 0.5
    assert not out.advantages.any()  # each group has a single valid member: 0, never NaN


def test_errors_name_the_reward_and_leave_the_batch_untouched():
    batch = batch4()
    before = (copy.deepcopy(batch.completions), batch.scores.clone(), batch.input_ids.clone())

    def broken(prompts, completions, **kwargs):
        completions.append("junk")  # mutating its arguments must not reach the batch
        raise KeyError("missing column")

    with pytest.raises(RewardFunctionError, match="'broken'") as e:
        sequence_reward(broken)(batch, None)
    assert isinstance(e.value.__cause__, KeyError) and isinstance(e.value, RuntimeError)
    assert batch.completions == before[0] and torch.equal(batch.scores, before[1])
    assert torch.equal(batch.input_ids, before[2])
    with pytest.raises(RewardFunctionError, match="3 values for 4 completions"):
        sequence_reward(lambda prompts, completions, **kw: [1.0, 0.0, 1.0], name="short")(batch, None)
    with pytest.raises(RewardFunctionError, match="str"):
        sequence_reward(lambda prompts, completions, **kw: ["1", 0, 0, 0], name="text")(batch, None)
    with pytest.raises(ValueError):
        sequence_reward(correctness, scale="rank")


def test_called_by_keyword_as_trl_calls_it():
    """TRL's GRPOTrainer calls reward_func(prompts=..., completions=..., **columns): a function that names only
    ``completions`` works there, so it works here."""
    def has_answer(completions, **kwargs):
        return [float("####" in c) for c in completions]

    out = sequence_reward(has_answer)(batch4(), None)
    assert out.stats["mean_reward"] == 0.75  # "#### 0", "#### 5", "x", "#### 1"
    a = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([0.0, 0.0, -a, a], dtype=torch.float64))
