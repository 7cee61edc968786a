import logging

import pytest
import torch

from gradprobe.models import (ALIASES, ModelNotFoundError, TokenizerError, _prepare_tokenizer, load_policy,
                              use_attention)


def test_unknown_alias_lists_the_aliases():
    with pytest.raises(ModelNotFoundError) as e:
        load_policy("smollm3-135m")
    for alias in ALIASES:
        assert alias in str(e.value)


def test_missing_gguf_file():
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_policy("/nonexistent/model.gguf")


def test_tiny_policy_is_deterministic_and_uses_exact_attention():
    a, b = load_policy("tiny-llama", seed=3), load_policy("tiny-llama", seed=3)
    c = load_policy("tiny-llama", seed=4)
    assert a.model.config._attn_implementation == "gradprobe_eager"
    pa, pb, pc = (torch.cat([p.flatten() for p in x.model.parameters()]) for x in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    assert a.tokenizer.padding_side == "left" and a.eos_token_ids == [2]


def test_use_attention_switches_and_restores(tiny_policy):
    m = tiny_policy.model
    with use_attention(m, "sdpa"):
        assert m.config._attn_implementation == "sdpa"
    assert m.config._attn_implementation == "gradprobe_eager"


def test_tokenizer_without_pad_token_uses_eos(tiny_policy, caplog):
    tok = tiny_policy.tokenizer
    tok.pad_token = None
    assert tok.pad_token_id is None
    with caplog.at_level(logging.WARNING):
        eos = _prepare_tokenizer(tok, tiny_policy.model)
    assert tok.pad_token_id == tok.eos_token_id == eos[0] == 2
    assert "pad" in caplog.text


def test_tokenizer_without_pad_and_eos_is_refused(tiny_policy):
    tok = tiny_policy.tokenizer
    model = tiny_policy.model
    tok.pad_token = None
    tok.eos_token = None
    model.generation_config.eos_token_id = None
    with pytest.raises(TokenizerError, match="pad_token"):
        _prepare_tokenizer(tok, model)


def test_generation_config_eos_ids_are_collected(tiny_policy):
    tiny_policy.model.generation_config.eos_token_id = [2, 5]
    assert _prepare_tokenizer(tiny_policy.tokenizer, tiny_policy.model) == [2, 5]
