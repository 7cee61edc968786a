"""A reward registered with ``register_reward(name, rollout_only=True)`` promises to generate no tokens beyond the
rollouts, and a plan's budget check bounds its arms' updates on that promise (B * G * max_new_tokens tokens each:
gradprobe.training.budget.most_tokens_per_update). One that reported generated tokens all the same was accepted where
its output enters training and the probe (gradprobe.rewards.base.checked_output), so a token budget checked as within
reach could be spent by fewer updates than checked; it is now refused naming the reward, the tokens and the fix."""

from __future__ import annotations

import pytest
import torch

import gradprobe
from gradprobe.probe.stages import reward_outputs
from gradprobe.rewards import base
from gradprobe.rewards.base import RewardFunctionError, RewardOutput, checked_output

from helpers_rollout import make_batch
from helpers_training import metric_lines, train_tiny

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)  # N = 4 completions x T = 4 tokens
NAME = "test_rollout_only_but_samples"


def _out(batch, tokens) -> RewardOutput:
    n, t = batch.completion_mask.shape
    return RewardOutput(name="x", advantages=torch.randn(n, t, dtype=torch.float64) * batch.completion_mask,
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens=tokens, stats={})


def _samples(batch, ctx):  # generates 300 continuation tokens per update, though declared rollout-only
    return _out(batch, {"continuation": 300})


@pytest.fixture
def declared():
    """``_samples`` registered under NAME with ``rollout_only=True`` for one test."""
    gradprobe.register_reward(NAME, rollout_only=True)(_samples)
    try:
        yield NAME
    finally:
        base.REWARDS.pop(NAME, None)
        base.ROLLOUT_ONLY.discard(NAME)


REFUSAL = (f"reward '{NAME}' is registered with rollout_only=True (it generates no tokens beyond the rollouts) but "
           "returned generated_tokens={{{tokens}}}: a plan's budget check bounds each update of its arms by B * G * "
           "max_new_tokens tokens on that promise, so its token budget could be spent unchecked; register it without "
           f"rollout_only=True (register_reward('{NAME}')) when it generates tokens of its own, else return "
           "generated_tokens={{}}")


def test_checked_output_refuses_tokens_reported_by_a_reward_declared_rollout_only(declared):
    with pytest.raises(RewardFunctionError) as e:
        checked_output(_out(BATCH, {"rollout": 0, "continuation": 300, "eval": 1_234}), declared, BATCH)
    assert str(e.value) == REFUSAL.format(tokens="'continuation': 300, 'eval': 1,234")
    # what keeps the promise is accepted: none reported, or counts of 0
    assert checked_output(_out(BATCH, {}), declared, BATCH).generated_tokens == {}
    assert checked_output(_out(BATCH, {"continuation": 0}), declared, BATCH).generated_tokens == {"continuation": 0}
    # the same output of a reward not declared rollout-only: its tokens are charged, not refused
    gradprobe.register_reward(declared)(_samples)  # registered again without the declaration
    assert checked_output(_out(BATCH, {"continuation": 300}), declared, BATCH).generated_tokens == {"continuation": 300}


def test_the_probe_refuses_it_naming_the_reward(declared):
    with pytest.raises(RewardFunctionError) as e:
        reward_outputs(BATCH, [(declared, base.REWARDS[declared])], None)
    assert str(e.value) == REFUSAL.format(tokens="'continuation': 300")
    assert e.value.reward == declared  # a study's probe leaves that reward out (gradprobe.study.worker)


def test_training_refuses_it_at_the_first_update_before_any_optimizer_step(declared, tmp_path):
    with pytest.raises(RewardFunctionError) as e:
        train_tiny(tmp_path / "run", reward=declared, budget={"updates": 2})
    assert str(e.value) == REFUSAL.format(tokens="'continuation': 300")
    assert not [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]  # no update recorded


CHARGES = "test_rollout_only_but_charges"


def _charges(batch, ctx):  # samples continuations through the ledger itself, reporting none
    ctx.ledger.add_generated("continuation", 512)
    return _out(batch, {})


def test_training_refuses_one_that_charges_the_ledger_itself_without_reporting(tmp_path):
    """Was: tokens a rollout-only reward charged through ``ctx.sampler`` (the ledger) trained on, unrefused."""
    gradprobe.register_reward(CHARGES, rollout_only=True)(_charges)
    try:
        with pytest.raises(RewardFunctionError) as e:
            train_tiny(tmp_path / "run", reward=CHARGES, budget={"updates": 2})
        assert str(e.value) == (
            f"reward '{CHARGES}' is registered with rollout_only=True (it generates no tokens beyond the rollouts) "
            "but generated {'continuation': 512} tokens in this update (ctx.sampler): a plan's budget check bounds "
            "each update of its arms by B * G * max_new_tokens tokens on that promise, so its token budget could be "
            f"spent unchecked; register it without rollout_only=True (register_reward('{CHARGES}')) when it "
            "generates tokens of its own")
        assert not [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]  # no update recorded
        gradprobe.register_reward(CHARGES)(_charges)  # declared as generating: trained, its tokens charged
        summary = train_tiny(tmp_path / "run2", reward=CHARGES, budget={"updates": 1})
        assert summary["ledger"]["generated_tokens"]["continuation"] == 512
    finally:
        base.REWARDS.pop(CHARGES, None)
        base.ROLLOUT_ONLY.discard(CHARGES)
