"""The bf16 alignment pass checked against a float32 copy on a slice (``reference_check_rows``)."""

import pytest
import torch

from gradprobe.probe import token_alignment, trainable_parameters
from gradprobe.probe.alignment import alignment_reference_check

from probe_helpers import make_batch, single_thread  # noqa: F401  (single_thread: autouse fixture, one intra-op thread)


def _direction(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {k: (torch.randn(p.shape, generator=g) * 1e-2).to(p.dtype) for k, p in trainable_parameters(model).items()}


def test_bf16_pass_close_to_float32_and_errors_detected(tiny_policy):
    batch = make_batch(vocab_size=len(tiny_policy.tokenizer))
    model = tiny_policy.model.to(torch.bfloat16)
    u = _direction(model)
    a = token_alignment(model, batch, u, micro_batch_size=4)
    check = alignment_reference_check(model, batch, u, a, rows=3, micro_batch_size=4)
    g = batch.group_size
    assert check["rows"] == -(-3 // g) * g and check["dtype"] == "bfloat16" and check["reference_dtype"] == "float32"
    assert 0 < check["relative_error"] < 0.1 and check["reference_norm"] > 0
    assert next(model.parameters()).dtype == torch.bfloat16  # the probed model is not cast
    wrong = a.clone()
    wrong[batch.completion_mask] *= 2
    assert alignment_reference_check(model, batch, u, wrong, rows=3)["relative_error"] == pytest.approx(1.0, abs=0.1)
    with pytest.raises(ValueError, match="reference_check_rows"):
        alignment_reference_check(model, batch, u, a, rows=0)


def test_float32_pass_checked_in_float64(tiny_policy):
    batch = make_batch(vocab_size=len(tiny_policy.tokenizer))
    model = tiny_policy.model
    u = _direction(model, 1)
    a = token_alignment(model, batch, u, micro_batch_size=4)
    check = alignment_reference_check(model, batch, u, a, rows=batch.num_rows)
    assert check["reference_dtype"] == "float64" and check["rows"] == batch.num_rows
    assert check["relative_error"] < 1e-4
