"""MC step values: step splitting, batched continuations, token accounting, caching."""

import math

import pytest
import torch

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.rewards import (MissingSamplerError, RewardContext, get_reward, mc_step_values,
                               split_steps)

from helpers_rollout import EOS, FakeSampler, FakeTask, char_ids, make_batch

TOK = char_tokenizer()
K = 4
PROMPT_LEN = 4  # BOS + "P0:"
L = 9
TEXTS = ["aa\nbb\n77\n", "aa\n7b\ncc\n", "ab\ncd\nef\n", "xy\nzz\nqq\n"]  # S = 3 evenly spaced steps


def ctx_for(batch_sampler, *, max_new=16, task=None):
    return RewardContext(task=task or FakeTask(), sampler=batch_sampler,
                         sampling=SamplingConfig(max_new_tokens=max_new),
                         mc=MCConfig(continuations=K, max_steps=8), ledger=Ledger(), tokenizer=TOK,
                         eos_token_ids=[EOS])


def scored_batch(texts=TEXTS, scores=None, **kw):
    task = FakeTask()
    scores = scores if scores is not None else [task.score(t, None) for t in texts]
    return make_batch(texts, group_size=2, scores=scores, **kw)


@pytest.mark.parametrize("text, max_steps, expected", [
    ("ab\ncd\nef", 8, [2, 5, 7]),
    ("ab\ncd\nef\n", 8, [2, 5, 8]),
    ("ab\n\ncd", 8, [3, 5]),  # an empty line joins the previous step
    ("\nab\ncd", 8, [3, 5]),  # a leading empty line joins the next step
    ("abc", 8, [2]),
    ("a\nb\nc\nd\ne", 2, [3, 8]),  # 5 lines -> 2 steps of 2 and 3 lines
    ("a\nb\nc\nd\ne", 3, [1, 5, 8]),  # 5 lines -> 1, 2, 2
    ("", 8, []),
])
def test_split_steps(text, max_steps, expected):
    assert split_steps(char_ids(TOK, text), TOK, max_steps=max_steps) == expected


def test_split_steps_trailing_eos_joins_last_line():
    ids = char_ids(TOK, "ab\ncd\n") + [EOS]
    assert split_steps(ids, TOK, max_steps=8) == [2, 6]
    assert split_steps([EOS], TOK, max_steps=8) == [0]
    with pytest.raises(ValueError):
        split_steps(ids, TOK, max_steps=0)


def test_values_token_count_and_single_call():
    batch = scored_batch()
    assert batch.scores.tolist() == [1.0, 1.0, 0.0, 0.0]
    sampler = FakeSampler(TOK, total_length=PROMPT_LEN + L)
    ctx = ctx_for(sampler)
    sv = mc_step_values(batch, ctx)
    assert len(sampler.calls) == 1  # every continuation of the batch in one call
    prompts, k, budgets = sampler.calls[0]
    assert k == K and len(prompts) == 4 * 2 and budgets == [16 - 3, 16 - 6] * 4
    assert prompts[1] == batch.prompt_token_ids[0] + char_ids(TOK, TEXTS[0][:6])
    assert sv.boundaries == [[2, 5, 8]] * 4
    # fill alternates "7..."/"z...": a prefix without a 7 scores 1/2, with a 7 scores 1
    assert sv.values == [[0.5, 0.5, 1.0], [0.5, 1.0, 1.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]
    assert sv.v0 == [1.0, 1.0, 0.0, 0.0]
    # DESIGN.md "Check": K * L * (S - 1) / 2 continuation tokens per completion, exactly here
    per_row = K * L * (3 - 1) // 2
    assert sv.row_continuation_tokens == [per_row] * 4
    assert sv.continuation_tokens == 4 * per_row == 144
    assert ctx.ledger.generated_tokens["continuation"] == 144 and ctx.ledger.generated_tokens["rollout"] == 0
    assert "generation" in ctx.ledger.device_seconds
    assert sv.valid().all()


def test_cache_reuse_charges_once():
    batch = scored_batch()
    sampler = FakeSampler(TOK, total_length=PROMPT_LEN + L)
    ctx = ctx_for(sampler)
    a = get_reward("mc_value")(batch, ctx)
    b = get_reward("mc_advantage")(batch, ctx)
    c = get_reward("hybrid")(batch, ctx)
    assert len(sampler.calls) == 1
    assert ctx.ledger.generated_tokens["continuation"] == 144
    assert a.generated_tokens == b.generated_tokens == c.generated_tokens == {"continuation": 144}
    moved = batch.to("cpu")  # a new object holding the same rollouts: still a cache hit
    assert moved is not batch
    get_reward("mc_min")(moved, ctx)
    assert len(sampler.calls) == 1
    other = scored_batch(["aa\nbb\n77\n", "aa\n7b\ncc\n", "ab\ncd\nef\n", "xy\nzz\nqz\n"])  # new rollouts
    get_reward("mc_min")(other, ctx)
    assert len(sampler.calls) == 2 and ctx.ledger.generated_tokens["continuation"] == 288


def test_remaining_budget_and_skipped_boundaries():
    batch = scored_batch()
    sampler = FakeSampler(TOK, total_length=PROMPT_LEN + L)
    ctx = ctx_for(sampler, max_new=6)  # prefix of 3 -> budget 3; prefix of 6 -> budget 0: skipped, V = r
    sv = mc_step_values(batch, ctx)
    assert sampler.calls[0][2] == [3] * 4
    assert sv.values == [[0.5, 1.0, 1.0], [0.5, 1.0, 1.0], [0.5, 0.0, 0.0], [0.5, 0.0, 0.0]]
    assert sv.continuation_tokens == 4 * K * 3 and sv.truncated_continuations == 4 * K


def test_missing_reward_empty_and_truncated_completions():
    texts = ["", "aa\n7b\ncc\n", "ab\ncd\nef\n", "xy\nzz"]
    batch = scored_batch(texts, scores=[0.0, 1.0, float("nan"), 0.0], truncated_rows={3})
    sampler = FakeSampler(TOK, total_length=PROMPT_LEN + L)
    ctx = ctx_for(sampler)
    sv = mc_step_values(batch, ctx)
    assert sv.boundaries == [[], [2, 5, 8], [2, 5, 8], [2, 4]]
    assert len(sampler.calls[0][0]) == 2 + 1  # no continuations for the empty and the unscored row
    assert sv.values[0] == [] and sv.values[1] == [0.5, 1.0, 1.0] and sv.values[3] == [0.5, 0.0]  # V_S = r
    assert all(math.isnan(v) for v in sv.values[2])
    assert sv.v0 == [0.5, 0.5, 0.0, 0.0]  # group 1: mean over its valid member only
    assert sv.valid().tolist() == [True, True, False, True]
    for name in ("mc_value", "mc_advantage", "hybrid_0.1", "mc_min"):
        out = get_reward(name)(batch, ctx)
        assert not torch.isnan(out.advantages).any(), name
        assert not out.advantages[0].any() and not out.advantages[2].any(), name
        assert out.valid.tolist()[2] is False and out.stats["missing"] >= 1, name
        assert not out.advantages[~batch.completion_mask].any(), name


def test_scorer_errors_are_dropped_from_the_mean_and_sampler_required():
    class ZRaises(FakeTask):
        def score(self, completion, problem):
            if "z" in completion:
                raise ValueError("no z allowed")
            return super().score(completion, problem)

    batch = scored_batch()
    sampler = FakeSampler(TOK, total_length=PROMPT_LEN + L)
    sv = mc_step_values(batch, ctx_for(sampler, task=ZRaises()))
    assert sv.score_errors == 8 * K // 2 + K // 2  # every "z..." continuation, and all of row 3's 2nd prefix
    assert sv.values[0] == [1.0, 1.0, 1.0]  # only the "7" continuations were scored
    assert math.isnan(sv.values[3][1]) and sv.valid().tolist() == [True, True, True, False]
    with pytest.raises(MissingSamplerError, match="sampler"):
        mc_step_values(batch, ctx_for(None))
