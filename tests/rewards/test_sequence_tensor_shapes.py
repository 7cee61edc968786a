"""A TRL-style reward's tensor and numpy array take one path in gradprobe.rewards.sequence.sequence_reward: shape
(N,) or (N, 1) (a one-logit head) is read in row order, any other shape is refused naming the reward and the shape.

Before, a torch tensor of any shape was flattened: a (G, B) table (4 x 4, transposed from the completions' order) was
accepted and its values landed on the wrong completions, while the same numpy array was refused ("returned 4 values
for 16 completions"); a numpy (N, 1) array was refused at index 0 where the same tensor was read.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gradprobe.rewards import RewardFunctionError, sequence_reward

from helpers_rollout import make_batch

BATCH = make_batch(["a", "abc", "ab", "abcdef", "abcd", "abcde"], group_size=2)  # N = 6 rows, B = 3 groups of G = 2
LENGTHS = [float(len(c)) for c in BATCH.completions]


def _returning(value):
    def shaped(prompts, completions, **kwargs):
        return value
    return sequence_reward(shaped, name="shaped")


def _expected():
    return sequence_reward(lambda completions, **kw: LENGTHS, name="listed")(BATCH, None)


def _refusal(kind: str, shape: tuple) -> str:
    return (f"reward 'shaped' returned a {kind} of shape {shape}; expected one value per completion in row order "
            "(completions[n] is row n): shape (6,) or (6, 1), a list of 6 floats or None")


@pytest.mark.parametrize("convert, kind", [(torch.tensor, "torch.Tensor"), (np.array, "numpy.ndarray")])
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (1, 6), (6, 1, 1), ()])
def test_a_tensor_or_array_of_another_shape_is_refused_the_same_way(convert, kind, shape):
    values = convert(LENGTHS if shape != () else 1.0).reshape(shape)
    if shape == (2, 3):
        values = convert(LENGTHS).reshape(3, 2).T  # (G, B): the completions' order transposed, as a table
    with pytest.raises(RewardFunctionError) as e:
        _returning(values)(BATCH, None)
    assert str(e.value) == _refusal(kind, shape)


def test_one_value_per_row_is_read_in_row_order_from_a_tensor_or_an_array():
    expected = _expected()
    for convert in (torch.tensor, np.array):
        for shape in ((6,), (6, 1)):  # a numpy (6, 1) was refused at index 0, the same tensor read
            out = _returning(convert(LENGTHS).reshape(shape))(BATCH, None)
            assert torch.equal(out.advantages, expected.advantages) and out.advantages.abs().sum() > 0, (convert, shape)
            assert out.stats == expected.stats
        for wrong in (convert([0.0] * 4), convert([0.0] * 4).reshape(4, 1)):  # a wrong length: counted
            with pytest.raises(RewardFunctionError) as e:
                _returning(wrong)(BATCH, None)
            assert str(e.value) == ("reward 'shaped' returned 4 values for 6 completions (N = B * G); return one float "
                                    "or None per completion")
    graph = torch.tensor(LENGTHS[:5] + [float("nan")], requires_grad=True) * 1.0  # a graph, a missing value
    out = _returning(graph.view(6, 1))(BATCH, None)
    assert out.valid.tolist() == [True] * 5 + [False] and out.stats["missing"] == 1
