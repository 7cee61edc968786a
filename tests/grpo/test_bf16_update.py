"""bf16 end to end on the CPU: one GRPO update of a bf16 model (with and without gradient
checkpointing) against the same update in float32 on the same batch, and the probe's alignment
pass of the bf16 model against float32 on that batch."""

import pytest
import torch

from gradprobe.grpo.step import UpdateConfig, grpo_step
from gradprobe.models import load_policy
from gradprobe.probe import token_alignment, trainable_parameters
from gradprobe.training.run import enable_gradient_checkpointing

from probe_helpers import make_batch, random_advantages  # the probe tests' random batches


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(dtype):
    return load_policy("tiny-qwen2", dtype=dtype, seed=0).model


def _update(model, batch, adv, *, checkpointing=False):
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    if checkpointing:
        enable_gradient_checkpointing(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = grpo_step(model, opt, batch, adv, UpdateConfig(micro_batch_size=3))
    delta = {k: (p.detach() - before[k]).float() for k, p in model.named_parameters()}
    return out, delta


@pytest.mark.parametrize("checkpointing", [False, True])
def test_bf16_update_matches_float32(checkpointing):
    batch = make_batch(num_prompts=3, group_size=2, vocab_size=101)
    adv = random_advantages(batch, seed=1)
    ref_out, ref_delta = _update(_model("float32"), batch, adv)
    model = _model("bfloat16")
    out, delta = _update(model, batch, adv, checkpointing=checkpointing)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())  # the update does not cast the model
    assert torch.isfinite(torch.tensor([out["loss"], out["grad_norm"]])).all()
    # the same update to bf16 rounding: loss and gradient norm within 2%, and the parameter step
    # (AdamW's first step is ~lr * sign(grad)) points the same way
    assert out["loss"] == pytest.approx(ref_out["loss"], rel=0.02, abs=1e-3)
    assert out["grad_norm"] == pytest.approx(ref_out["grad_norm"], rel=0.02)
    a = torch.cat([d.flatten() for d in delta.values()])
    b = torch.cat([d.flatten() for d in ref_delta.values()])
    cos = float(a @ b / (a.norm() * b.norm()))
    assert 0.9 < cos <= 1.0 + 1e-6 and a.abs().max() > 0


def test_bf16_alignment_close_to_float32_on_the_same_batch():
    """a_nt of the bf16 model vs the float32 model with the same weights (rounded to bf16) and direction."""
    batch = make_batch(num_prompts=3, group_size=2, vocab_size=101)
    low = _model("bfloat16")
    ref = _model("float32")
    with torch.no_grad():  # the same weights: the bf16 ones, held in float32
        for (_, p), (_, q) in zip(low.named_parameters(), ref.named_parameters()):
            q.copy_(p.float())
    g = torch.Generator().manual_seed(3)
    u32 = {k: torch.randn(p.shape, generator=g) * 1e-2 for k, p in trainable_parameters(ref).items()}
    u16 = {k: v.to(torch.bfloat16) for k, v in u32.items()}
    u32 = {k: v.float() for k, v in u16.items()}  # the same direction too
    a16 = token_alignment(low, batch, u16, micro_batch_size=3)
    a32 = token_alignment(ref, batch, u32, micro_batch_size=3)
    assert a16.dtype == torch.bfloat16 and a32.dtype == torch.float32
    mask = batch.completion_mask
    err = float((a16.float() - a32)[mask].norm() / a32[mask].norm())
    print(f"bf16 vs float32 alignment relative error: {err:.4f}")
    assert 0 < err < 0.05
