"""Per-token gradient alignment, the probe's fast path (DESIGN.md, "The probe").

For a direction v in parameter space (the reference update, optionally preconditioned), the
alignment of token t of completion n is the directional derivative

    a_nt = <grad_theta l_nt(theta), v> = d/d eps  l_nt(theta + eps v) |_{eps=0},

shape (N, T). Every reward's inner product with v is then a weighted sum of the same a_nt
(:mod:`gradprobe.probe.estimate`), so one pass serves any number of rewards.

How: forward-mode automatic differentiation. ``torch.func.jvp`` pushes the tangent v through
``torch.func.functional_call`` of the model, evaluated by :func:`gradprobe.logprobs.token_logprobs`
(the same function, padding, position ids, dtype and temperature as the training loss). One
forward pass carrying a tangent gives the directional derivative of *every* output at once,
here N x T log-probabilities, at roughly the cost of a forward plus a backward. Reverse mode
would need one backward per token (the per-token loop in :mod:`gradprobe.probe.references`,
kept for tests), or one backward per reward to form g_R and dot it with v (the naive baseline,
whose cost grows with the number of rewards).

Why eager attention: PyTorch's fused SDPA CPU kernel has no forward-mode derivative, and
transformers' own ``eager`` attention computes the softmax in float32 and makes fully masked
padding rows NaN in float64; :mod:`gradprobe.attention` provides ``gradprobe_eager``, which the
loader selects. :func:`token_alignment` raises if a model uses ``sdpa``/``flash`` attention.

Rows are independent (each row's log-probabilities depend only on that row), so the batch is
split into micro-batches of rows, one ``jvp`` each, and the result is exact, not an approximation.

The forward-mode rules this pass uses instead of PyTorch's for softmax, log_softmax and the
embedding's padding row: :mod:`gradprobe.probe.jvp_rules`. Parameter-space vectors (trainable
parameters, checking a direction, summing gradients): :mod:`gradprobe.probe.vectors`.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time

import torch
from torch import Tensor

from ..logprobs import token_logprobs
from .jvp_rules import EmbeddingPaddingJvp, FastSoftmaxJvp
from .vectors import DirectionMismatchError, check_direction, gradient_buffer, trainable_parameters

__all__ = ["DirectionMismatchError", "token_alignment", "trainable_parameters", "check_direction",
           "FastSoftmaxJvp", "EmbeddingPaddingJvp", "alignment_reference_check", "gradient_buffer"]

#: attention implementations known to support forward-mode AD
FORWARD_AD_ATTENTION = ("gradprobe_eager", "eager")


def _check_attention(model) -> None:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl is not None and impl not in FORWARD_AD_ATTENTION:
        raise ValueError(
            f"token_alignment needs an attention implementation with forward-mode AD, the model uses {impl!r}; "
            "load it with gradprobe.models.load_policy (attention 'gradprobe_eager') or call "
            "model.set_attn_implementation('gradprobe_eager') after gradprobe.attention.register()")


def token_alignment(model, batch, direction: dict[str, Tensor], *, micro_batch_size: int = 8,
                    fast_softmax_jvp: bool = True) -> Tensor:
    """Directional derivatives a_nt = <grad l_nt, v> of every completion token's log-probability.

    Parameters
    ----------
    model : transformers causal LM
        Attention ``gradprobe_eager`` (see module docstring); evaluated at its current parameters.
    batch : gradprobe.types.RolloutBatch
        N = B * G rows; log-probabilities at ``batch.temperature``.
    direction : dict[str, Tensor]
        v, one tensor per trainable parameter (see :func:`check_direction`).
    micro_batch_size : int
        Rows per ``jvp`` call (a memory knob; the result does not depend on it).
    fast_softmax_jvp : bool
        Use :class:`FastSoftmaxJvp` (cheaper tangents of softmax/log_softmax, same values up to
        rounding); False keeps PyTorch's forward-mode rules.

    Returns
    -------
    Tensor, shape (N, T), the model's dtype
        a_nt on the completion mask, exactly 0 elsewhere; the gradient is the one reverse mode (training)
        takes, which gives the input embedding's ``padding_idx`` row nothing through the lookup.

    Raises
    ------
    DirectionMismatchError
        ``direction`` does not match the model's trainable parameters.
    ValueError
        ``micro_batch_size < 1``, an attention implementation without forward-mode AD, or a model
        without trainable parameters.
    """
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    _check_attention(model)
    tangents = check_direction(model, direction)
    primals = {key: p.detach() for key, p in trainable_parameters(model).items()}
    if not primals:
        raise ValueError("the model has no trainable parameters (requires_grad=True): nothing to differentiate")
    first = next(iter(primals.values()))
    device, dtype = first.device, first.dtype
    input_ids = batch.input_ids.to(device)
    attention_mask = batch.attention_mask.to(device)
    mask = batch.completion_mask.to(device).bool()
    n, t = mask.shape
    out = torch.zeros(n, t, dtype=dtype, device=device)
    with torch.no_grad(), EmbeddingPaddingJvp(), (FastSoftmaxJvp() if fast_softmax_jvp else contextlib.nullcontext()):
        # no_grad: no reverse-mode graph, forward-mode tangents only; no tangent on the embedding's padding row
        for start in range(0, n, micro_batch_size):
            rows = slice(start, start + micro_batch_size)
            ids, am = input_ids[rows], attention_mask[rows]

            def logprobs(params, ids=ids, am=am):
                return token_logprobs(model, ids, am, batch.prompt_length, temperature=batch.temperature,
                                      params=params)

            _, tangent = torch.func.jvp(logprobs, (primals,), (tangents,))  # (n_mb, T)
            out[rows] = torch.where(mask[rows], tangent.to(dtype), torch.zeros((), dtype=dtype, device=device))
    return out


def alignment_reference_check(model, batch, direction: dict[str, Tensor], alignment: Tensor, *, rows: int,
                              reference_dtype: torch.dtype | None = None, micro_batch_size: int = 8) -> dict:
    """Error of a low-precision alignment pass against a higher-precision one, on a slice.

    The probe runs in the model's dtype (bf16 on GPUs); this recomputes a_nt for the first
    groups of the batch with a copy of the model and of the direction in ``reference_dtype``
    (float32 for bf16/fp16 models, float64 otherwise) and compares.

    Parameters
    ----------
    model : transformers causal LM
        The probed model (not modified; a copy is cast).
    batch : gradprobe.types.RolloutBatch
    direction : dict[str, Tensor]
        The u the alignment was computed along (the same values, upcast).
    alignment : Tensor, shape (N, T)
        The low-precision a_nt of the whole batch.
    rows : int
        Rows to check (>= 1); rounded up to whole groups (the first ceil(rows / G) groups).
    reference_dtype : torch.dtype, optional
    micro_batch_size : int

    Returns
    -------
    dict
        ``rows`` checked, ``dtype``, ``reference_dtype``, ``relative_error`` = ||a - a_ref|| /
        ||a_ref|| over masked tokens (Frobenius; None when a_ref is 0), ``max_abs_error``,
        ``reference_norm``, ``seconds``.

    Raises
    ------
    ValueError
        ``rows < 1`` or ``alignment`` not of shape (N, T).
    """
    if rows < 1:
        raise ValueError(f"reference_check_rows must be >= 1, got {rows}")
    if tuple(alignment.shape) != tuple(batch.completion_mask.shape):
        raise ValueError(f"alignment has shape {tuple(alignment.shape)}, the batch's mask "
                         f"{tuple(batch.completion_mask.shape)}")
    start = time.perf_counter()
    dtype = next(model.parameters()).dtype
    if reference_dtype is None:
        reference_dtype = torch.float32 if dtype in (torch.bfloat16, torch.float16) else torch.float64
    groups = min(batch.num_prompts, math.ceil(rows / batch.group_size))
    sub = batch.select_groups(list(range(groups)))
    n = sub.num_rows
    ref_model = copy.deepcopy(model).to(reference_dtype)
    ref_dir = {k: v.detach().to(reference_dtype) for k, v in direction.items()}
    try:
        ref = token_alignment(ref_model, sub, ref_dir, micro_batch_size=micro_batch_size)
    finally:
        del ref_model
    mask = sub.completion_mask.to(ref.device).bool()
    low = alignment[:n].to(device=ref.device, dtype=reference_dtype)
    err = (low - ref)[mask].double()
    ref_m = ref[mask].double()
    ref_norm = float(torch.linalg.vector_norm(ref_m)) if ref_m.numel() else 0.0
    return {"rows": n, "dtype": str(dtype).replace("torch.", ""), "reference_dtype": str(reference_dtype).replace(
        "torch.", ""), "relative_error": float(torch.linalg.vector_norm(err)) / ref_norm if ref_norm > 0 else None,
            "max_abs_error": float(err.abs().max()) if err.numel() else 0.0, "reference_norm": ref_norm,
            "seconds": time.perf_counter() - start}
