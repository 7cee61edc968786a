"""Prompt features: padding invariance, agreement with the model's own hidden states, ledger charges."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gradprobe.difficulty.features import hidden_features, metadata_features, prompt_features
from gradprobe.ledger import Ledger, forward_flops_per_token
from gradprobe.tasks import Problem


@pytest.fixture(scope="module")
def policy64():
    from gradprobe.models import load_policy

    torch.set_num_threads(1)
    return load_policy("tiny-qwen2", dtype="float64", seed=0)


def test_batched_features_equal_each_prompt_alone_and_the_model_hidden_states(policy64):
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]
    ledger = Ledger()
    batched = hidden_features(policy64, prompts, batch_size=3, ledger=ledger)
    assert batched.shape == (3, policy64.model.config.hidden_size)
    for i, p in enumerate(prompts):
        alone = hidden_features(policy64, [p], batch_size=1)
        np.testing.assert_allclose(batched[i], alone[0], atol=1e-10)
        with torch.no_grad():  # reference: the causal LM's own last hidden state (after the final norm)
            out = policy64.model(input_ids=torch.tensor([p]), output_hidden_states=True)
        np.testing.assert_allclose(batched[i], out.hidden_states[-1][0].mean(0).numpy(), atol=1e-10)
    # charges: prompt tokens read, their forward FLOPs, wall time, all under `selection`
    assert ledger.generated_tokens["selection"] == 13 and ledger.generated_tokens["rollout"] == 0
    expected = sum(len(p) * forward_flops_per_token(policy64.model, (len(p) + 1) / 2) for p in prompts)
    assert ledger.flops["selection"] == pytest.approx(expected)
    assert ledger.device_seconds["selection"] > 0


def test_metadata_features_and_missing_values():
    probs = [Problem("t/0", "q", "1", {"num_terms": 3, "num_digits": 2}), Problem("t/1", "q", "1", {"num_terms": 2})]
    m = metadata_features(probs, [[1, 2, 3], [4]])
    assert m[0].tolist() == [3.0, 3.0, 2.0]
    assert m[1, 0] == 1.0 and m[1, 1] == 2.0 and math.isnan(m[1, 2])
    with pytest.raises(ValueError, match="2 problems but 1 prompts"):
        metadata_features(probs, [[1]])


def test_prompt_features_concatenate_hidden_and_metadata(policy64):
    from gradprobe.tasks import load_task

    probs = load_task("chain_sum", min_terms=2, max_terms=3).problems("train", 3)
    f = prompt_features(policy64, probs, batch_size=2)
    d = policy64.model.config.hidden_size
    assert f.shape == (3, d + 3)
    assert f[:, d + 1].tolist() == [p.metadata["num_terms"] for p in probs]


def test_empty_prompt_is_refused(policy64):
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        hidden_features(policy64, [[3, 4], []])
