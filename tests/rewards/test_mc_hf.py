"""MC rewards end to end with the HF sampler on a random tiny Qwen2."""

import dataclasses

import pytest
import torch

from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.models import load_policy
from gradprobe.rewards import RewardContext, get_reward, mc_step_values
from gradprobe.rollout import HFSampler, collect_rollouts

from helpers_rollout import FakeTask, one_thread, problems

_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


def test_mc_with_hf_sampler():
    base = load_policy("tiny-qwen2")
    tok = base.tokenizer
    # extra EOS ids so some completions end early; the random model emits newlines now and then
    policy = dataclasses.replace(base, eos_token_ids=[2, tok.convert_tokens_to_ids("e")])
    sampling = SamplingConfig(max_new_tokens=32, batch_size=64)
    sampler = HFSampler(policy, seed=0, progress=False)
    ledger = Ledger()
    task = FakeTask(marker="a")
    batch = collect_rollouts(policy, task, problems(3), group_size=4, sampler=sampler, sampling=sampling,
                             ledger=ledger)
    before = sampler.generated_tokens
    ctx = RewardContext(task=task, sampler=sampler, sampling=sampling, mc=MCConfig(continuations=2, max_steps=4),
                        ledger=ledger, tokenizer=tok, eos_token_ids=policy.eos_token_ids)
    outs = [get_reward(n)(batch, ctx) for n in ("mc_value", "mc_advantage", "hybrid_0.5", "mc_min")]
    sv = mc_step_values(batch, ctx)
    assert sampler.calls == 2  # rollouts + one call for all continuations
    assert sv.requests > 0 and max(sv.num_steps) > 1 and max(sv.num_steps) <= 4
    assert ledger.generated_tokens["continuation"] == sv.continuation_tokens == sampler.generated_tokens - before
    assert ledger.generated_tokens["rollout"] == batch.generated_tokens
    for out in outs:
        assert out.advantages.shape == batch.completion_mask.shape
        assert not torch.isnan(out.advantages).any()
        assert not out.advantages[~batch.completion_mask].any()
        assert out.generated_tokens == {"continuation": sv.continuation_tokens}
    # a row's values are fractions of K = 2 and end with its reward
    for vals, r in zip(sv.values, batch.scores.tolist()):
        if vals:
            assert vals[-1] == r and all(v in (0.0, 0.5, 1.0) for v in vals)
