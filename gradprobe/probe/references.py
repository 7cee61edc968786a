"""Slow reference implementations of the probe, for tests and for the naive cost baseline.

* :func:`token_alignment_autograd`: one reverse-mode backward per completion token,
  ``autograd.grad(l_nt, theta)``, dotted with v. Exact, O(N T) backwards; the ground truth the
  forward-mode fast path (:func:`gradprobe.probe.alignment.token_alignment`) is compared with.
* :func:`token_alignment_finite_difference`: the central difference
  (l(theta + eps v) - l(theta - eps v)) / (2 eps), two forwards; error O(eps^2) plus rounding
  O(u / eps) (u the unit roundoff), so it is meaningful only in float64. It moves the whole
  parameter, so where the pad id sits at a real position it also differentiates the input
  embedding's ``padding_idx`` row through the lookup, which reverse mode (training, the autograd
  loop, the fast path) does not: compare it with them only on batches without such positions.
* :func:`reward_gradient`: g_R = sum_nt w_nt A_nt grad l_nt by one backward per micro-batch (the
  ascent direction of the reward objective, DESIGN.md "The probe"); the naive way to get
  <g_R, v> (one backward per reward) and the way to get ||g_R|| for the optional cosine.

These functions evaluate the model through its own parameters (no ``functional_call``), so they
also check the fast path's handling of tied weights. The finite difference perturbs the
parameters in place and restores the saved originals bit for bit.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..logprobs import token_logprobs
from .alignment import check_direction, gradient_buffer, trainable_parameters

__all__ = ["token_alignment_autograd", "token_alignment_finite_difference", "reward_gradient", "dot", "norm"]


def _logprobs(model, batch, rows=slice(None)) -> Tensor:
    device = next(model.parameters()).device
    return token_logprobs(model, batch.input_ids[rows].to(device), batch.attention_mask[rows].to(device),
                          batch.prompt_length, temperature=batch.temperature)


def dot(u: dict[str, Tensor], v: dict[str, Tensor]) -> float:
    """Inner product sum_k <u_k, v_k> of two parameter-space vectors with the same keys, in float64."""
    if u.keys() != v.keys():
        missing = sorted(set(u) ^ set(v))
        raise ValueError(f"dot: the vectors have different keys, e.g. {missing[:3]}")
    return float(sum((u[k].double() * v[k].double().to(u[k].device)).sum() for k in u))


def norm(u: dict[str, Tensor]) -> float:
    """Euclidean norm of a parameter-space vector, in float64."""
    return dot(u, u) ** 0.5


def token_alignment_autograd(model, batch, direction: dict[str, Tensor]) -> Tensor:
    """a_nt = <grad l_nt, v> by an explicit loop of one backward per completion token.

    Parameters
    ----------
    model : transformers causal LM
    batch : gradprobe.types.RolloutBatch
    direction : dict[str, Tensor]
        v, keyed like ``model.named_parameters()``.

    Returns
    -------
    Tensor, shape (N, T), the model's dtype; 0 off the completion mask.

    Raises
    ------
    DirectionMismatchError
        ``direction`` does not match the model.
    """
    v = check_direction(model, direction)
    params = trainable_parameters(model)
    names = list(params)
    mask = batch.completion_mask.bool()
    dtype = next(iter(params.values())).dtype
    out = torch.zeros(mask.shape, dtype=dtype)
    with torch.enable_grad():
        logp = _logprobs(model, batch)  # (N, T), one forward with the batch's padding
        for n, t in mask.nonzero().tolist():
            grads = torch.autograd.grad(logp[n, t], [params[k] for k in names], retain_graph=True,
                                        allow_unused=True)
            out[n, t] = sum((g * v[k]).sum() for k, g in zip(names, grads) if g is not None).cpu()
    return out.to(batch.completion_mask.device)


def token_alignment_finite_difference(model, batch, direction: dict[str, Tensor], *, eps: float = 1e-5) -> Tensor:
    """a_nt by the central difference (l(theta + eps v) - l(theta - eps v)) / (2 eps).

    Parameters
    ----------
    eps : float
        Step along v. With ||v|| ~ ||theta|| in float64, 1e-5 balances truncation (eps^2) and
        rounding (1e-16 / eps) at about 1e-9 relative.

    Returns
    -------
    Tensor, shape (N, T), the model's dtype; 0 off the completion mask.
    """
    v = check_direction(model, direction)
    params = trainable_parameters(model)
    saved = {k: p.detach().clone() for k, p in params.items()}
    mask = batch.completion_mask.bool()
    try:
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(saved[k] + eps * v[k])
            plus = _logprobs(model, batch)
            for k, p in params.items():
                p.copy_(saved[k] - eps * v[k])
            minus = _logprobs(model, batch)
    finally:
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(saved[k])
    diff = (plus - minus) / (2 * eps)
    return torch.where(mask.to(diff.device), diff, torch.zeros_like(diff)).to(batch.completion_mask.device)


def reward_gradient(model, batch, advantages: Tensor, weights: Tensor, *,
                    micro_batch_size: int = 8) -> dict[str, Tensor]:
    """g_R = sum_nt w_nt A_nt grad l_nt, the ascent direction of reward R, by reverse mode.

    Parameters
    ----------
    advantages : Tensor, shape (N, T)
        A^R.
    weights : Tensor, shape (N, T)
        :func:`gradprobe.grpo.losses.token_weights` of the whole batch's completion mask.
    micro_batch_size : int
        Rows per backward; the gradients are accumulated (the result does not depend on it).

    Returns
    -------
    dict[str, Tensor]
        Keyed like ``model.named_parameters()`` (trainable ones), the parameters' dtype. At rho = 1
        this is minus the gradient of :func:`gradprobe.grpo.losses.policy_loss`.
    """
    params = trainable_parameters(model)
    mask = batch.completion_mask.bool()
    coef = torch.where(mask, advantages.double() * weights.double(), torch.zeros((), dtype=torch.float64))
    with torch.enable_grad(), gradient_buffer(params) as total:  # one gradient copy (memory), same sums
        for start in range(0, batch.num_rows, micro_batch_size):
            rows = slice(start, start + micro_batch_size)
            logp = _logprobs(model, batch, rows)
            objective = (coef[rows].to(logp.device, logp.dtype) * logp).sum()
            torch.autograd.backward(objective, inputs=list(params.values()))
    return total
