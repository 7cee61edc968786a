"""build_batch: padding, masks, EOS handling, token counts (no model)."""

import math

import pytest
import torch

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.rollout import Sample, build_batch, cut_at_eos

from helpers_rollout import EOS, char_ids, problems


@pytest.fixture
def tok_pad_eos():
    tok = char_tokenizer()
    tok.pad_token = tok.eos_token  # SmolLM2-style: pad == eos
    assert tok.pad_token_id == EOS
    return tok


def test_layout_when_pad_equals_eos(tok_pad_eos):
    tok = tok_pad_eos
    a, b, c = char_ids(tok, "ab"), char_ids(tok, "c"), char_ids(tok, "xyz")
    prompt_ids = [[1] + char_ids(tok, "Q1:"), [1] + char_ids(tok, "Long Q2:")]  # lengths 4 and 9
    samples = [Sample(a + [EOS], False), Sample(b + [EOS], False),  # group 0
               Sample(c, True), Sample([], True)]  # group 1: truncated, empty
    batch = build_batch(tok, problems(2), prompt_ids, samples, group_size=2, temperature=0.7, scores=[1, 0, None, 0])
    assert batch.prompt_length == 9
    assert batch.completion_mask.shape == (4, 3)
    # left padding of the short prompt with the pad (= EOS) id, attention 0 there
    assert batch.input_ids[0, :5].tolist() == [EOS] * 5
    assert batch.input_ids[0, 5:9].tolist() == prompt_ids[0]
    assert batch.attention_mask[0, :9].tolist() == [0] * 5 + [1] * 4
    assert batch.input_ids[2, :9].tolist() == prompt_ids[1]
    # the first EOS stays in the completion even though it equals the pad id
    assert batch.completion_ids[0].tolist() == a + [EOS]
    assert batch.completion_mask.tolist() == [[True, True, True], [True, True, False],
                                              [True, True, True], [False, False, False]]
    assert batch.attention_mask[1, 9:].tolist() == [1, 1, 0]
    assert batch.attention_mask[3, 9:].tolist() == [0, 0, 0]
    assert batch.truncated.tolist() == [False, False, True, True]
    assert batch.generated_tokens == 3 + 2 + 3 + 0  # padding excluded
    assert batch.completion_lengths.tolist() == [3, 2, 3, 0]
    assert batch.completions == ["ab", "c", "xyz", ""]
    assert batch.scores.dtype == torch.float64
    assert batch.scores[:2].tolist() == [1.0, 0.0] and math.isnan(batch.scores[2]) and batch.scores[3] == 0
    assert batch.temperature == 0.7
    assert batch.prompt_token_ids == prompt_ids
    assert batch.group_ids.tolist() == [0, 0, 1, 1]


def test_all_empty_completions_keep_one_masked_column():
    tok = char_tokenizer()
    batch = build_batch(tok, problems(1), [[1, 5]], [Sample([], True), Sample([], True)], group_size=2,
                        temperature=1.0)
    assert batch.completion_mask.shape == (2, 1)
    assert not batch.completion_mask.any()
    assert batch.generated_tokens == 0
    assert torch.isnan(batch.scores).all()
    assert batch.input_ids[:, -1].tolist() == [tok.pad_token_id] * 2


def test_mismatched_lengths_raise():
    tok = char_tokenizer()
    with pytest.raises(ValueError, match="B \\* G"):
        build_batch(tok, problems(2), [[1], [1]], [Sample([5], True)] * 3, group_size=2, temperature=1.0)
    with pytest.raises(ValueError, match="prompts"):
        build_batch(tok, problems(2), [[1]], [Sample([5], True)] * 4, group_size=2, temperature=1.0)
    with pytest.raises(ValueError, match="scores"):
        build_batch(tok, problems(1), [[1]], [Sample([5], True)] * 2, group_size=2, temperature=1.0, scores=[1.0])


def test_cut_at_eos_first_of_several_ids():
    assert cut_at_eos([5, 6, 9, 7, 2, 0, 0], [2, 7], 10) == Sample([5, 6, 9, 7], False)
    assert cut_at_eos([5, 6, 9], [2], 3) == Sample([5, 6, 9], True)
    assert cut_at_eos([5, 6, 9, 2], [2], 3) == Sample([5, 6, 9], True)  # EOS beyond the budget
    assert cut_at_eos([2, 2], [2], 4) == Sample([2], False)  # immediate EOS: one token
