"""Forward-mode rules the probe's jvp pass (:func:`gradprobe.probe.alignment.token_alignment`) uses
instead of PyTorch's, for speed (softmax, log_softmax) and for agreement with the training gradient
(the embedding's padding row). Re-exported by :mod:`gradprobe.probe.alignment`.

Speed: PyTorch's forward-mode rules for ``softmax`` and ``log_softmax`` recompute the
max-normalised exponentials of the input (``logsumexp_jvp``: amax, sub, exp, sum, mul, sum, div),
which over the (batch, heads, L, L) attention weights and the (n, T, V) logits costs more than the
backward pass's fused kernels. During the jvp, :class:`FastSoftmaxJvp` (a ``TorchFunctionMode``)
routes those calls to :class:`_Softmax` / :class:`_LogSoftmax`, which run the very same forward
(so the primal values are bit-identical) and use the output for the tangent:

    softmax:      y_dot = y * (x_dot - sum(y * x_dot)),  one fused ``_softmax_backward_data`` call
                  (the softmax Jacobian diag(y) - y y^T is symmetric, so J x_dot = J^T x_dot);
    log_softmax:  y_dot = x_dot - sum(exp(y) * x_dot).

Measured on a 2-core CPU (benchmarks/probe_cost.py, 16 rows): the jvp pass takes ~45% less time
on the attention-dominated tiny model (P + T = 308 tokens) and ~5% less on SmolLM2-135M.
``fast_softmax_jvp=False`` keeps PyTorch's rules.

The embedding's padding row: ``nn.Embedding(padding_idx=p)`` (transformers' Llama/Qwen2 set
p = ``config.pad_token_id``, often equal to EOS) gives row p no gradient from the lookup in
reverse mode (``embedding_backward`` skips index p), so the gradient training takes never moves
that row through the lookup; PyTorch's forward-mode rule for ``embedding`` is the plain lookup
of the tangent (``auto_linear`` in ``tools/autograd/derivatives.yaml``) and carries v's row p
wherever the pad id sits at a real position (an EOS-as-pad inside a completion, say). During the
jvp, :class:`EmbeddingPaddingJvp` routes ``F.embedding`` calls that have a ``padding_idx`` to
:class:`_PaddedEmbedding`, whose tangent is zero at the positions holding the pad id, so a_nt is
<grad l_nt, v> for the reverse-mode gradient (``tests/probe/test_probe_alignment.py::
test_pad_id_inside_a_completion_matches_the_training_gradient``). A tied LM head still reads row p
(the head's matmul is not an embedding lookup), as in reverse mode.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = ["FastSoftmaxJvp", "EmbeddingPaddingJvp"]


class _OutputRule(torch.autograd.Function):
    """Base of :class:`_Softmax` and :class:`_LogSoftmax`: both take ``(x, dim)`` and keep only
    their output y (same shape as x) and ``dim`` for the tangent and the gradient."""

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_forward(output)
        ctx.save_for_backward(output)


class _Softmax(_OutputRule):
    """``torch.softmax(x, dim)`` with a one-kernel forward-mode rule (see module docstring)."""

    @staticmethod
    def forward(x, dim):
        return torch.softmax(x, dim)

    @staticmethod
    def jvp(ctx, x_t, _):
        (y,) = ctx.saved_tensors
        return torch._softmax_backward_data(x_t, y, ctx.dim, y.dtype)  # y * (x_t - sum(y * x_t))

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, y, ctx.dim, y.dtype), None


class _LogSoftmax(_OutputRule):
    """``torch.log_softmax(x, dim)`` with a forward-mode rule that reuses the output."""

    @staticmethod
    def forward(x, dim):
        return torch.log_softmax(x, dim)

    @staticmethod
    def jvp(ctx, x_t, _):
        (y,) = ctx.saved_tensors
        return x_t - (y.exp() * x_t).sum(ctx.dim, keepdim=True)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch._log_softmax_backward_data(grad, y, ctx.dim, y.dtype), None


# function -> (replacement, position of `dtype` when passed positionally, or None)
_SOFTMAXES = {
    torch.softmax: (_Softmax, 2), torch.Tensor.softmax: (_Softmax, 2), F.softmax: (_Softmax, None),
    torch.log_softmax: (_LogSoftmax, 2), torch.Tensor.log_softmax: (_LogSoftmax, 2), F.log_softmax: (_LogSoftmax, None),
}


class FastSoftmaxJvp(TorchFunctionMode):
    """While active, ``softmax``/``log_softmax`` calls use forward-mode rules that reuse their output.

    The forward computation is unchanged (the same ``torch.softmax``/``torch.log_softmax`` call
    after the same ``dtype`` cast), so values are bit-identical; only the tangent is computed
    more cheaply. Calls it cannot parse (implicit ``dim``, non-float input) pass through untouched.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = _SOFTMAXES.get(func)
        if entry is not None:
            replacement, dtype_pos = entry
            x = args[0] if args else kwargs.get("input")
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            dtype = args[dtype_pos] if dtype_pos is not None and len(args) > dtype_pos else kwargs.get("dtype")
            if isinstance(x, Tensor) and isinstance(dim, int) and (dtype is not None or x.is_floating_point()):
                if dtype is not None:
                    x = x.to(dtype)  # what softmax(x, dim, dtype=...) does before the operation
                if x.is_floating_point():
                    return replacement.apply(x, dim)
        return func(*args, **kwargs)


class _PaddedEmbedding(torch.autograd.Function):
    """``F.embedding(ids, weight, padding_idx)`` whose tangent, like its gradient, skips the padding row.

    Forward: the plain lookup, shape (*ids.shape, D). Forward-mode rule: the lookup of the weight's
    tangent, zeroed at the positions where ``ids == padding_idx`` (what reverse mode's
    ``embedding_backward(..., padding_idx)`` implies: row ``padding_idx`` gets no gradient from
    the lookup). Backward: ``aten.embedding_backward`` with the same ``padding_idx``.
    """

    @staticmethod
    def forward(ids, weight, padding_idx):
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ids, weight, padding_idx = inputs
        ctx.padding_idx, ctx.num_weights = padding_idx, weight.shape[0]
        ctx.out_shape, ctx.out_dtype, ctx.out_device = output.shape, output.dtype, output.device
        ctx.save_for_forward(ids)
        ctx.save_for_backward(ids)

    @staticmethod
    def jvp(ctx, ids_t, weight_t, _):
        (ids,) = ctx.saved_tensors
        if weight_t is None:
            return torch.zeros(ctx.out_shape, dtype=ctx.out_dtype, device=ctx.out_device)
        return F.embedding(ids, weight_t).masked_fill((ids == ctx.padding_idx).unsqueeze(-1), 0)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        return None, torch.ops.aten.embedding_backward(grad, ids, ctx.num_weights, ctx.padding_idx, False, False), None


class EmbeddingPaddingJvp(TorchFunctionMode):
    """While active, ``F.embedding`` calls with a ``padding_idx`` give that row no tangent (see module docstring).

    Values are unchanged (the same lookup). Calls without ``padding_idx`` pass through untouched.

    Raises
    ------
    ValueError
        An embedding with both ``padding_idx`` and ``scale_grad_by_freq`` or ``max_norm`` (no
        transformers LM uses them): the probe does not reproduce their reverse-mode gradient.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.embedding:
            names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")
            bound = dict(zip(names, args), **kwargs)
            pad = bound.get("padding_idx")
            if pad is not None:
                if bound.get("scale_grad_by_freq") or bound.get("max_norm") is not None:
                    raise ValueError("token_alignment: an embedding with padding_idx and scale_grad_by_freq/max_norm "
                                     "is not supported (its reverse-mode gradient is not reproduced); set both off")
                weight = bound["weight"]
                pad = int(pad) + weight.shape[0] if int(pad) < 0 else int(pad)  # as F.embedding normalises it
                return _PaddedEmbedding.apply(bound["input"], weight, pad)
        return func(*args, **kwargs)
