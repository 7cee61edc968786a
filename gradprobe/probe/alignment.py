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

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from ..logprobs import token_logprobs

__all__ = ["DirectionMismatchError", "token_alignment", "trainable_parameters", "check_direction",
           "FastSoftmaxJvp", "EmbeddingPaddingJvp", "alignment_reference_check", "gradient_buffer"]

#: attention implementations known to support forward-mode AD
FORWARD_AD_ATTENTION = ("gradprobe_eager", "eager")


class DirectionMismatchError(ValueError):
    """A parameter-space vector does not match the model's trainable parameters (keys or shapes)."""


def trainable_parameters(model) -> dict[str, Tensor]:
    """The parameters a direction is defined over: ``model.named_parameters()`` with ``requires_grad``.

    Tied parameters (e.g. input embedding and LM head) appear once, under their first name,
    as ``named_parameters`` lists them.
    """
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


@contextlib.contextmanager
def gradient_buffer(params: dict[str, Tensor]):
    """Sum the gradients of several ``backward`` calls in the parameters' ``.grad``, without extra copies.

    ``torch.autograd.grad`` returns every parameter's gradient at once, so adding them into a
    separate total holds two parameter-sized vectors (2 x 0.54 GB for SmolLM2-135M in float32);
    ``backward(inputs=...)`` adds each parameter's gradient into its ``.grad`` as soon as it is
    ready (the first one is kept as is, later ones are added in place), so only one vector plus one
    parameter's gradient is alive. The sums are the same: g_1, then g_1 + g_2, ... in order.

    Parameters
    ----------
    params : dict[str, Tensor]
        Leaf parameters, e.g. :func:`trainable_parameters`; call
        ``torch.autograd.backward(objective, inputs=list(params.values()))`` inside the block.

    Yields
    ------
    dict[str, Tensor]
        Empty inside the block; on normal exit filled with the summed gradients, keyed like
        ``params``, the parameters' shapes and dtypes (zeros for parameters no backward reached).

    The callers' ``.grad`` values are set aside on entry and restored on exit (also on error).
    """
    saved = {k: p.grad for k, p in params.items()}
    for p in params.values():
        p.grad = None
    out: dict[str, Tensor] = {}
    try:
        yield out
        for k, p in params.items():
            out[k] = p.grad.detach() if p.grad is not None else torch.zeros_like(p, requires_grad=False)
    finally:
        for k, p in params.items():
            p.grad = saved[k]


_FIX = ("a parameter-space vector needs one tensor per trainable parameter, keyed by "
        "model.named_parameters() names with the same shapes; build one with "
        "gradprobe.probe.direction_between(final_model, initial_model) or "
        "gradprobe.probe.heldout_reference(model, batch), or load it with load_direction")


def check_direction(model, direction: dict[str, Tensor], *, name: str = "direction") -> dict[str, Tensor]:
    """Validate ``direction`` against the model and return it on the parameters' device and dtype.

    Parameters
    ----------
    model : torch.nn.Module
    direction : dict[str, Tensor]
        One tensor per trainable parameter, same shapes.
    name : str
        What to call the vector in error messages.

    Returns
    -------
    dict[str, Tensor]
        Same keys, in the order of :func:`trainable_parameters`, cast to each parameter's
        device and dtype.

    Raises
    ------
    DirectionMismatchError
        A missing key, an extra key or a wrong shape; the message names the first bad key and the fix.
    """
    if not isinstance(direction, dict):
        raise DirectionMismatchError(f"{name} must be a dict[str, Tensor], got {type(direction).__name__}; {_FIX}")
    params = trainable_parameters(model)
    for key, p in params.items():
        if key not in direction:
            raise DirectionMismatchError(
                f"{name} has no entry for parameter {key!r} (shape {tuple(p.shape)}); {_FIX}")
        v = direction[key]
        if not isinstance(v, Tensor):
            raise DirectionMismatchError(f"{name}[{key!r}] is a {type(v).__name__}, not a Tensor; {_FIX}")
        if tuple(v.shape) != tuple(p.shape):
            raise DirectionMismatchError(
                f"{name}[{key!r}] has shape {tuple(v.shape)} but the parameter has shape {tuple(p.shape)} "
                f"(a direction from another model or architecture?); {_FIX}")
    for key in direction:
        if key not in params:
            raise DirectionMismatchError(
                f"{name} has key {key!r}, which is not a trainable parameter of the model (a tied weight "
                f"saved twice, a frozen parameter, or another model?); {_FIX}")
    return {key: direction[key].detach().to(device=p.device, dtype=p.dtype) for key, p in params.items()}


def _check_attention(model) -> None:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl is not None and impl not in FORWARD_AD_ATTENTION:
        raise ValueError(
            f"token_alignment needs an attention implementation with forward-mode AD, the model uses {impl!r}; "
            "load it with gradprobe.models.load_policy (attention 'gradprobe_eager') or call "
            "model.set_attn_implementation('gradprobe_eager') after gradprobe.attention.register()")


class _Softmax(torch.autograd.Function):
    """``torch.softmax(x, dim)`` with a one-kernel forward-mode rule (see module docstring)."""

    @staticmethod
    def forward(x, dim):
        return torch.softmax(x, dim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_forward(output)
        ctx.save_for_backward(output)

    @staticmethod
    def jvp(ctx, x_t, _):
        (y,) = ctx.saved_tensors
        return torch._softmax_backward_data(x_t, y, ctx.dim, y.dtype)  # y * (x_t - sum(y * x_t))

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, y, ctx.dim, y.dtype), None


class _LogSoftmax(torch.autograd.Function):
    """``torch.log_softmax(x, dim)`` with a forward-mode rule that reuses the output."""

    @staticmethod
    def forward(x, dim):
        return torch.log_softmax(x, dim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_forward(output)
        ctx.save_for_backward(output)

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
    import copy
    import math
    import time

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
