"""The setup check's "Lower max_new_tokens to at most X" makes every prompt of the set fit: X = limit minus the longest
prompt, named as such, not the first failing prompt's own bound, which the next longer prompt refused again (tester:
max_new_tokens=1000, a guided prefix of 1 on the tiny tier said 990, then 988; the set's bound was 971). The first
failing prompt in data order is still the one named. A sampler's per-call message keeps its one prompt's bound."""

from __future__ import annotations

import json

import pytest

from gradprobe.models import load_tokenizer
from gradprobe.rollout import PromptTooLongError
from gradprobe.rollout.base import check_prompt_ids
from gradprobe.rollout.prompt_lengths import check_prompt_lengths
from gradprobe.tasks import encode_prompt, load_task

LIMIT = 1024  # the tiny tier's max_position_embeddings


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def _pool(tmp_path, questions):
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"question": q, "answer": "#### 1"}) + "\n"
                                                  for q in questions))
    return load_task(f"gsm8k:{tmp_path}").problems("train", len(questions), seed=0)


def test_the_bound_fits_the_longest_prompt_and_following_it_passes(tmp_path, tokenizer):
    pool = _pool(tmp_path, [f"What is {i} + {i}?" + " and 1" * (3 * i) for i in range(6)])
    lengths = {p.metadata["row"]: len(encode_prompt(tokenizer, p.question)) for p in pool}
    first_row = min(r for r, n in lengths.items() if n + 1000 > LIMIT)
    longest = max(lengths.values())
    assert lengths[first_row] < longest  # the named (first) prompt is not the longest
    with pytest.raises(PromptTooLongError) as info:
        check_prompt_lengths(tokenizer, pool, max_new_tokens=1000, limit=LIMIT, role="training pool")
    text = str(info.value)
    assert text.startswith(f"prompt gsm8k/train/{first_row} (line {first_row + 1}) of ")
    assert (f"of the training pool has {lengths[first_row]} tokens; with max_new_tokens=1000 that is "
            f"{lengths[first_row] + 1000} > the model's max_position_embeddings={LIMIT}. Lower max_new_tokens to at "
            f"most {LIMIT - longest}, the bound for the longest prompt of the training pool ({longest} tokens), or "
            "shorten the prompts.") in text  # was "at most {LIMIT - lengths[first_row]}", refused again
    check_prompt_lengths(tokenizer, pool, max_new_tokens=LIMIT - longest, limit=LIMIT)  # following it: every one fits


def test_a_longest_prompt_that_fills_the_context_alone_is_said(tmp_path, tokenizer):
    pool = _pool(tmp_path, ["What is 1 + 1?" + " and 1" * 60, "long " * 250 + "What is 1 + 1?"])
    short, long = (len(encode_prompt(tokenizer, p.question)) for p in pool)
    assert short < LIMIT <= long
    with pytest.raises(PromptTooLongError) as info:
        check_prompt_lengths(tokenizer, pool, max_new_tokens=LIMIT - short + 1, limit=LIMIT, role="training pool")
    assert (f"No max_new_tokens fits every prompt: the longest prompt of the training pool has {long} tokens, which "
            "alone leave no room for a completion: shorten it or leave it out of the prompt pool. 2 of the training "
            "pool's 2 prompts do not fit.") in str(info.value)


def test_a_samplers_call_keeps_its_one_prompts_bound():
    with pytest.raises(PromptTooLongError) as info:
        check_prompt_ids([[1] * 30, [1] * 40], [1000, 1000], LIMIT)
    assert str(info.value) == ("prompt 0 (of this call's 2) has 30 tokens; with max_new_tokens=1000 that is 1030 > the "
                               f"model's max_position_embeddings={LIMIT}. Lower max_new_tokens to at most 994 or "
                               "shorten the prompt.")
