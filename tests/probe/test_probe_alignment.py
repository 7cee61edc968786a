"""token_alignment (forward mode) against the per-token autograd loop and finite differences."""

import pytest
import torch
import torch.nn.functional as F

from gradprobe.models import use_attention
from gradprobe.probe import DirectionMismatchError, token_alignment
from gradprobe.probe.alignment import FastSoftmaxJvp
from gradprobe.probe.references import token_alignment_autograd, token_alignment_finite_difference

import probe_helpers as h

single_thread = h.single_thread  # autouse fixture: one intra-op thread for tiny models
ARCHS = ["tiny-qwen2", "tiny-llama"]


def rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("arch", ARCHS)
def test_jvp_matches_autograd_loop_and_finite_difference(arch):
    model = h.tiny_model(arch)
    batch = h.make_batch(num_prompts=3, group_size=2, prompt_length=6, completion_length=8, temperature=0.7, seed=1)
    # the batch really is left-padded and ragged
    assert (batch.attention_mask[:, 0] == 0).any() and (batch.attention_mask[:, 0] == 1).any()
    assert len(set(batch.completion_lengths.tolist())) > 2
    v = h.random_direction(model, seed=2)

    fast = token_alignment(model, batch, v, micro_batch_size=4)
    loop = token_alignment_autograd(model, batch, v)
    fd = token_alignment_finite_difference(model, batch, v, eps=1e-5)

    assert fast.shape == batch.completion_mask.shape and fast.dtype == torch.float64
    assert (fast[~batch.completion_mask] == 0).all()
    assert fast[batch.completion_mask].abs().min() > 0
    assert fast.abs().max() > 0.1  # a non-trivial direction
    assert rel_err(fast, loop) < 1e-10  # measured ~1e-15
    assert rel_err(fast, fd) < 1e-7  # measured ~1e-10 (truncation eps^2 + rounding)


def test_temperature_enters_the_alignment():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(seed=3, temperature=0.5)
    v = h.random_direction(model, seed=4)
    hot = token_alignment(model, batch, v)
    cold = token_alignment(model, h.make_batch(seed=3, temperature=1.0), v)
    assert rel_err(hot, token_alignment_autograd(model, batch, v)) < 1e-10
    assert rel_err(hot, cold) > 1e-3


@pytest.mark.parametrize("micro_batch_size", [1, 3, 6, 100])
def test_micro_batch_size_does_not_change_the_alignment(micro_batch_size):
    model = h.tiny_model("tiny-llama")
    batch = h.make_batch(num_prompts=3, group_size=2, seed=5)
    v = h.random_direction(model, seed=6)
    reference = token_alignment(model, batch, v, micro_batch_size=batch.num_rows)
    assert torch.allclose(token_alignment(model, batch, v, micro_batch_size=micro_batch_size), reference,
                          rtol=1e-12, atol=1e-14)


def test_rows_are_independent_of_the_rest_of_the_batch():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=2, seed=7)
    v = h.random_direction(model, seed=8)
    full = token_alignment(model, batch, v)
    sub = token_alignment(model, batch.select_groups([2, 0]), v)
    assert torch.allclose(sub, full[[4, 5, 0, 1]], rtol=1e-12, atol=1e-14)


def test_alignment_is_linear_in_the_direction():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(seed=9)
    u, w = h.random_direction(model, seed=10), h.random_direction(model, seed=11)
    combo = {k: 2.0 * u[k] - 0.5 * w[k] for k in u}
    expected = 2.0 * token_alignment(model, batch, u) - 0.5 * token_alignment(model, batch, w)
    assert torch.allclose(token_alignment(model, batch, combo), expected, rtol=1e-11, atol=1e-13)


def test_float32_model_runs_and_roughly_agrees():
    model = h.tiny_model("tiny-qwen2", dtype="float32")
    batch = h.make_batch(seed=12)
    v = h.random_direction(model, seed=13)
    fast = token_alignment(model, batch, v)
    assert fast.dtype == torch.float32 and torch.isfinite(fast).all()
    assert rel_err(fast, token_alignment_autograd(model, batch, v)) < 1e-4


def test_direction_mismatch_errors_name_the_key():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(seed=14)
    v = h.random_direction(model, seed=15)
    key = "model.layers.1.mlp.up_proj.weight"

    missing = {k: x for k, x in v.items() if k != key}
    with pytest.raises(DirectionMismatchError, match=key):
        token_alignment(model, batch, missing)
    wrong_shape = dict(v, **{key: v[key].T})
    with pytest.raises(DirectionMismatchError, match="shape"):
        token_alignment(model, batch, wrong_shape)
    extra = dict(v, **{"lm_head.weight": torch.zeros(3)})
    with pytest.raises(DirectionMismatchError, match="lm_head.weight"):
        token_alignment(model, batch, extra)
    assert issubclass(DirectionMismatchError, ValueError)
    with pytest.raises(ValueError, match="micro_batch_size"):
        token_alignment(model, batch, v, micro_batch_size=0)


def test_attention_without_forward_ad_is_refused():
    model = h.fresh_tiny_model("tiny-qwen2", dtype="float32")
    batch = h.make_batch(seed=16)
    v = h.random_direction(model, seed=17)
    with use_attention(model, "sdpa"):
        with pytest.raises(ValueError, match="forward-mode"):
            token_alignment(model, batch, v)


@pytest.mark.parametrize("arch", ARCHS)
def test_fast_softmax_rules_match_pytorch_rules(arch):
    model = h.tiny_model(arch)
    batch = h.make_batch(num_prompts=3, group_size=2, completion_length=8, seed=18)
    v = h.random_direction(model, seed=19)
    fast = token_alignment(model, batch, v, fast_softmax_jvp=True)
    plain = token_alignment(model, batch, v, fast_softmax_jvp=False)
    assert rel_err(fast, plain) < 1e-13


def test_fast_softmax_mode_intercepts_every_spelling():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 7, generator=g, dtype=torch.float64)
    x_dot = torch.randn(3, 5, 7, generator=g, dtype=torch.float64)
    x[0, 0, :3] = -1e300  # masked entries, as an additive attention mask makes them
    spellings = [
        lambda t: torch.softmax(t, -1),
        lambda t: torch.softmax(t, dim=1, dtype=torch.float64),
        lambda t: t.softmax(-1),
        lambda t: F.softmax(t, dim=-1, dtype=torch.float64),
        lambda t: torch.log_softmax(t, dim=-1),
        lambda t: t.log_softmax(1),
        lambda t: F.log_softmax(t, dim=0),
    ]
    for fn in spellings:
        plain_out, plain_dot = torch.func.jvp(fn, (x,), (x_dot,))
        with FastSoftmaxJvp():
            fast_out, fast_dot = torch.func.jvp(fn, (x,), (x_dot,))
            node = fn(x.clone().requires_grad_()).grad_fn
        assert type(node).__name__ in ("_SoftmaxBackward", "_LogSoftmaxBackward")
        assert torch.equal(fast_out, plain_out)
        assert torch.allclose(fast_dot, plain_dot, rtol=1e-13, atol=1e-13)
        assert torch.isfinite(fast_dot).all()
    # an integer input with a dtype is cast first, as softmax(..., dtype=) does
    with FastSoftmaxJvp():
        assert torch.equal(torch.softmax(torch.arange(3), 0, dtype=torch.float64),
                           torch.softmax(torch.arange(3.0, dtype=torch.float64), 0))


@pytest.mark.parametrize("fast_softmax_jvp", [True, False])
def test_pad_id_inside_a_completion_matches_the_training_gradient(fast_softmax_jvp):
    """The pad id (often EOS) at a real position: reverse mode gives the embedding's padding row
    no gradient from the lookup (``nn.Embedding(padding_idx=...)``), so neither may the probe."""
    model = h.tiny_model("tiny-qwen2")
    pad = model.get_input_embeddings().padding_idx
    assert pad == 0 and model.config.tie_word_embeddings  # the tied head still gives the row a gradient
    batch = h.make_batch(num_prompts=3, group_size=2, prompt_length=6, completion_length=8, seed=1)
    batch.input_ids[1, 6 + 2] = pad  # row 1 has a full-length completion: position 2 is real, tokens follow it
    batch.input_ids[3, 6 + 0] = pad  # a completion that starts with the pad id
    assert batch.completion_mask[1, 2] and batch.completion_mask[1, 3:].all() and batch.completion_mask[3, 0]
    assert batch.attention_mask[1, 6 + 2] == 1 and batch.attention_mask[3, 6] == 1
    v = h.random_direction(model, seed=2)

    fast = token_alignment(model, batch, v, micro_batch_size=4, fast_softmax_jvp=fast_softmax_jvp)
    loop = token_alignment_autograd(model, batch, v)  # the gradient training takes (reverse mode)
    assert rel_err(fast, loop) < 1e-10
    # the pad row's embedding tangent alone: only the tokens after the pad id see it, through the lookup
    only_pad = {k: torch.zeros_like(x) for k, x in v.items()}
    key = next(k for k in v if k.endswith("embed_tokens.weight"))
    only_pad[key][pad] = v[key][pad]
    a = token_alignment(model, batch, only_pad, fast_softmax_jvp=fast_softmax_jvp)
    b = token_alignment_autograd(model, batch, only_pad)
    assert torch.allclose(a, b, rtol=1e-10, atol=1e-13)
    assert a[1, 3:].abs().min() > 0  # the tied LM head's pad row still moves every token's log-prob
