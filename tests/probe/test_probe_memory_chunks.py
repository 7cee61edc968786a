"""Issue 14 (probe memory): the memory-bounded paths give the values of the unchunked ones.

float64 tiny models (RMSNorm patched to stay in float64, :mod:`probe_helpers`), so agreement is
checked to 1e-10: per-token log-probabilities and alignments computed one row at a time (the
micro-batch SmolLM2-135M gets) equal the whole-batch pass; gradients summed in ``.grad`` by
:func:`gradient_buffer` equal ``autograd.grad`` sums, and the callers' ``.grad`` survive; the
in-place second moment equals its formula; :func:`memory_bounded_rows` bounds the rows as documented.
"""

from functools import partial

import pytest
import torch

from gradprobe.grpo.losses import token_weights
from gradprobe.logprobs import (
    ACTIVATION_BUDGET_FLOOR,
    activation_bytes_per_row,
    memory_bounded_rows,
    token_logprobs,
)
from gradprobe.probe import (
    heldout_reference,
    rloo_coefficients,
    second_moment_from_minibatches,
    token_alignment,
    trainable_parameters,
)
from gradprobe.probe.alignment import gradient_buffer
from gradprobe.probe.references import reward_gradient

import probe_helpers as h

single_thread = h.single_thread
TOL = 1e-10


@pytest.fixture(scope="module", params=["tiny-qwen2", "tiny-llama"])
def model(request):
    return h.tiny_model(request.param)


def _batch(seed=0):
    return h.make_batch(num_prompts=3, group_size=3, prompt_length=6, completion_length=9, seed=seed)


def _autograd_sum(model, batch, coef_nt, rows_per_pass):
    """sum_nt coef_nt grad l_nt by torch.autograd.grad, the pre-issue-14 way (a separate total)."""
    params = trainable_parameters(model)
    total = {k: torch.zeros_like(p) for k, p in params.items()}
    for start in range(0, batch.num_rows, rows_per_pass):
        rows = slice(start, start + rows_per_pass)
        with torch.enable_grad():
            logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                                  temperature=batch.temperature)
            grads = torch.autograd.grad((coef_nt[rows] * logp).sum(), list(params.values()), allow_unused=True)
        for k, g in zip(params, grads):
            if g is not None:
                total[k] += g
    return total


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_logprobs_row_by_row_equal_the_whole_batch(model):
    batch = _batch()
    with torch.no_grad():
        whole = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.prompt_length,
                               temperature=batch.temperature)
        rows = torch.cat([token_logprobs(model, batch.input_ids[n:n + 1], batch.attention_mask[n:n + 1],
                                         batch.prompt_length, temperature=batch.temperature)
                          for n in range(batch.num_rows)])
    assert whole.dtype == torch.float64 and whole.shape == (9, 9)
    mask = batch.completion_mask
    assert float((whole - rows)[mask].abs().max()) < TOL
    assert float(whole[mask].max()) < 0  # real log-probabilities, not zeros


def test_alignment_one_row_per_jvp_equals_the_whole_batch(model):
    batch = _batch(seed=1)
    v = h.random_direction(model, seed=3)
    whole = token_alignment(model, batch, v, micro_batch_size=batch.num_rows)
    one = token_alignment(model, batch, v, micro_batch_size=1)
    bounded = token_alignment(model, batch, v, micro_batch_size=memory_bounded_rows(model, batch, 8, budget_bytes=1))
    mask = batch.completion_mask
    assert float(whole[mask].abs().max()) > 1e-3  # a real signal
    assert float((whole - one).abs().max()) < TOL
    assert float((whole - bounded).abs().max()) < TOL
    assert float(one[~mask].abs().max()) == 0.0


def test_gradient_buffer_sums_like_autograd_grad_and_restores_grad(model):
    batch = _batch(seed=2)
    adv = h.random_advantages(batch, seed=5)
    weights = token_weights(batch.completion_mask, "grpo")
    params = trainable_parameters(model)
    sentinel = {k: torch.full_like(p, 7.0) for k, p in params.items()}
    for k, p in params.items():
        p.grad = sentinel[k]
    try:
        got = reward_gradient(model, batch, adv, weights, micro_batch_size=2)
        for k, p in params.items():  # the caller's .grad is back, untouched
            assert p.grad is sentinel[k]
            assert float(p.grad.max()) == 7.0
    finally:
        for p in params.values():
            p.grad = None
    coef = torch.where(batch.completion_mask, adv * weights, torch.zeros((), dtype=torch.float64))
    want = _autograd_sum(model, batch, coef, rows_per_pass=batch.num_rows)
    assert max(float(g.abs().max()) for g in want.values()) > 1e-4
    assert _max_diff(got, want) < TOL
    assert all(got[k].dtype == p.dtype and got[k].shape == p.shape and not got[k].requires_grad
               for k, p in params.items())


def test_gradient_buffer_gives_zeros_for_unreached_parameters_and_restores_on_error(model):
    params = trainable_parameters(model)
    with gradient_buffer(params) as total:
        pass  # no backward at all
    assert total.keys() == params.keys() and all(float(t.abs().max()) == 0.0 for t in total.values())
    with pytest.raises(RuntimeError, match="boom"):
        with gradient_buffer(params):
            first = next(iter(params.values()))
            (first.sum() * 2).backward(inputs=[first])
            raise RuntimeError("boom")
    assert all(p.grad is None for p in params.values())


def test_heldout_reference_one_row_per_backward_equals_the_autograd_sum(model):
    batch = _batch(seed=4)
    batch.scores = torch.tensor([1, 0, 0, 1, 1, 0, 0, 0, 1], dtype=torch.float64)
    coef = rloo_coefficients(batch.scores, batch.group_size)
    coef_nt = torch.where(batch.completion_mask, coef[:, None].expand_as(batch.completion_mask.double()),
                          torch.zeros((), dtype=torch.float64))
    want = _autograd_sum(model, batch, coef_nt, rows_per_pass=batch.num_rows)
    for mb in (1, 8):
        got = heldout_reference(model, batch, micro_batch_size=mb)
        assert _max_diff(got, want) < TOL
    assert max(float(g.abs().max()) for g in want.values()) > 1e-4


def test_second_moment_in_place_equals_its_formula(model):
    batch = _batch(seed=6)
    adv = h.random_advantages(batch, seed=7)
    wfn = partial(token_weights, loss_type="grpo")
    got = second_moment_from_minibatches(model, batch, adv, wfn, num_minibatches=3, micro_batch_size=1)
    grads = []
    for i in range(3):  # minibatch i = group i
        sub = batch.select_groups(torch.tensor([i]))
        rows = slice(3 * i, 3 * i + 3)
        grads.append(reward_gradient(model, sub, adv[rows], wfn(sub.completion_mask), micro_batch_size=3))
    want = {k: sum(g[k].square() for g in grads) / 3 for k in grads[0]}
    assert max(float(x.max()) for x in want.values()) > 1e-8
    assert _max_diff(got, want) < TOL


def test_memory_bounded_rows(model):
    batch = _batch()
    per_row = activation_bytes_per_row(model, batch.input_ids.shape[1], batch.completion_mask.shape[1])
    cfg = model.config
    l, t = batch.input_ids.shape[1], batch.completion_mask.shape[1]
    body = l * cfg.num_hidden_layers * (12 * cfg.hidden_size + 5 * cfg.intermediate_size + 2 * cfg.num_attention_heads * l)
    assert per_row == 8 * (body + 4 * (t + 1) * cfg.vocab_size)  # float64: 8 bytes per value
    assert memory_bounded_rows(model, batch, 8, budget_bytes=1) == 1
    assert memory_bounded_rows(model, batch, 8, budget_bytes=3 * per_row) == 3
    assert memory_bounded_rows(model, batch, 8, budget_bytes=100 * per_row) == 8
    assert memory_bounded_rows(model, batch, 8) == min(8, ACTIVATION_BUDGET_FLOOR // per_row)  # tiny: unchanged, 8
    with pytest.raises(ValueError, match="micro_batch_size"):
        memory_bounded_rows(model, batch, 0)
