"""The update reads its variants from registries, never from their names: the importance-sampling
correction (:data:`gradprobe.grpo.importance.IMPORTANCE_SAMPLINGS`) and the loss type's normalisation
(:data:`gradprobe.grpo.losses.LOSSES`: ``"constant"`` is what makes ``max_completion_length`` matter)."""

from __future__ import annotations

import logging

import pytest
import torch

from gradprobe.grpo.importance import IMPORTANCE_SAMPLINGS, ImportanceSampling, get_importance_sampling
from gradprobe.grpo.losses import LOSSES, LossType
from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.models import load_policy
from gradprobe.tasks.base import Problem
from gradprobe.types import RolloutBatch

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def policy64():
    return load_policy("tiny-qwen2", dtype="float64", seed=3)


def _batch(vocab: int) -> RolloutBatch:
    gen = torch.Generator().manual_seed(0)
    p, t, n = 3, 6, 4
    ids = torch.randint(4, vocab, (n, p + t), generator=gen)
    am = torch.ones((n, p + t), dtype=torch.long)
    am[1, p + 2:] = 0  # row 1: two completion tokens
    return RolloutBatch(problems=[Problem(str(i), "q", "1", {}) for i in range(2)], group_size=2, input_ids=ids,
                        attention_mask=am, prompt_length=p, completion_mask=am[:, p:].bool(), completions=["x"] * n,
                        truncated=torch.zeros(n, dtype=torch.bool), scores=torch.zeros(n, dtype=torch.float64),
                        temperature=1.0, prompt_token_ids=[[1]] * 2)


def test_unknown_importance_sampling_names_the_registered_ones():
    assert list(IMPORTANCE_SAMPLINGS) == ["none", "tis"]
    assert get_importance_sampling("tis").needs_sampler_logp and not get_importance_sampling("none").needs_sampler_logp
    with pytest.raises(ValueError, match=r"importance_sampling 'is' is not one of \('none', 'tis'\)"):
        UpdateConfig(importance_sampling="is")


def test_a_registered_correction_is_used_by_its_properties(policy64, monkeypatch):
    model = policy64.model
    batch = _batch(model.config.vocab_size)
    adv = torch.randn(batch.completion_mask.shape, dtype=torch.float64,
                      generator=torch.Generator().manual_seed(1)) * batch.completion_mask
    sampler_logp = torch.full(batch.completion_mask.shape, -1.0, dtype=torch.float64)
    plain = loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=3))
    twice = ImportanceSampling("twice", True, lambda train, smp, mask, cap: torch.full_like(train, 2.0))
    monkeypatch.setitem(IMPORTANCE_SAMPLINGS, "twice", twice)
    config = UpdateConfig(importance_sampling="twice", micro_batch_size=3)
    with pytest.raises(ValueError, match="importance_sampling='twice' needs the sampler's per-token log-probabilities"):
        loss_and_backward(model, batch, adv, config)
    stats: dict = {}
    doubled = loss_and_backward(model, batch, adv, config, sampler_logp=sampler_logp, stats=stats)
    assert doubled == pytest.approx(2 * plain, rel=1e-12) and abs(plain) > 1e-6
    assert stats["is_weight"]["mean"] == 2.0 and stats["is_weight"]["cap"] == 2.0
    assert stats["sampler_mismatch"]["tokens"] == int(batch.completion_mask.sum())


def test_max_completion_length_follows_the_constant_normalisation_not_the_name(policy64, monkeypatch, caplog):
    monkeypatch.setitem(LOSSES, "sum_over_lmax", LossType("sum_over_lmax", "constant", "ppo"))
    assert UpdateConfig(loss_type="sum_over_lmax").constant_normaliser and UpdateConfig("dr_grpo").constant_normaliser
    assert not UpdateConfig(loss_type="dapo").constant_normaliser
    with caplog.at_level(logging.WARNING, logger="gradprobe.grpo.step"):
        UpdateConfig(loss_type="sum_over_lmax")
    assert "UpdateConfig(loss_type='sum_over_lmax') without max_completion_length" in caplog.text
    model = policy64.model
    batch = _batch(model.config.vocab_size)  # T = 6
    adv = torch.ones(batch.completion_mask.shape, dtype=torch.float64) * batch.completion_mask
    with pytest.raises(ValueError, match=r"T = 6 tokens exceeds UpdateConfig.max_completion_length = 5 "
                                         r"\(sum_over_lmax's L_max\)"):
        loss_and_backward(model, batch, adv, UpdateConfig(loss_type="sum_over_lmax", max_completion_length=5))
    # a non-constant loss type ignores L_max
    loss_and_backward(model, batch, adv, UpdateConfig(loss_type="dapo", max_completion_length=5))
