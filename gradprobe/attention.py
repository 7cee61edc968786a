"""A dtype-faithful eager attention for transformers models.

Why: transformers' own ``eager`` attention computes the softmax in float32 even for a
float64 model. That (a) caps the precision of float64 reference checks (jvp vs autograd vs
finite differences) at about 1e-7, and (b) turns the additive mask of a left-padded row,
``finfo(float64).min``, into ``-inf`` after the cast, so a fully masked (padding) query row
becomes NaN and the NaN leaks into the real tokens through ``0 * NaN``.

``gradprobe_eager`` is the same math with the softmax in the query dtype (float32 for
half-precision inputs). It is differentiable in forward and reverse mode, so
``torch.func.jvp`` works through it (PyTorch's fused SDPA CPU kernel has no forward-mode AD).
It is registered with transformers' ``AttentionInterface`` under the name
:data:`ATTN_IMPLEMENTATION` by :func:`register`, which :mod:`gradprobe.models` calls.
"""

from __future__ import annotations

import torch

ATTN_IMPLEMENTATION = "gradprobe_eager"
_REGISTERED = False


def exact_eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Scaled dot-product attention in the input dtype.

    Parameters
    ----------
    query : Tensor, shape (batch, heads, q_len, head_dim)
    key, value : Tensor, shape (batch, kv_heads, k_len, head_dim)
        Grouped-query heads are repeated to ``heads``.
    attention_mask : Tensor or None, shape (batch, 1, q_len, k_len)
        Additive mask (0 where attended, a large negative number elsewhere), as built by
        transformers' ``eager_mask``.
    scaling : float
        Multiplier of the logits, usually ``head_dim ** -0.5`` (Vaswani et al. 2017, eq. 1).

    Returns
    -------
    (Tensor of shape (batch, q_len, heads, head_dim), Tensor of shape (batch, heads, q_len, k_len))
    """
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    weights = torch.matmul(query * scaling, key.transpose(2, 3))
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, : key.shape[-2]]
    softmax_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    weights = torch.softmax(weights, dim=-1, dtype=softmax_dtype).to(query.dtype)
    if dropout and module.training:
        weights = torch.nn.functional.dropout(weights, p=dropout)
    out = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return out, weights


def register() -> str:
    """Register :data:`ATTN_IMPLEMENTATION` with transformers (idempotent); return its name."""
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask

        AttentionInterface.register(ATTN_IMPLEMENTATION, exact_eager_attention)
        AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)
        _REGISTERED = True
    return ATTN_IMPLEMENTATION
