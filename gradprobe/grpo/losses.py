"""Policy-gradient losses and their normalisation, as per-token weights.

Every loss type is a rule for the weight w_ijt of each token in

    loss = - sum_ijt w_ijt * A_ijt * rho_ijt,   rho = pi_theta / pi_old (clipped, PPO),

so the ascent direction of reward R at rho = 1 is g_R = sum_ijt w_ijt A_ijt grad l_ijt: the
same weights serve the update and the probe (DESIGN.md, "The probe": Z_R). Weights are
computed once from the completion mask of the WHOLE batch, so a batch processed in
micro-batches with gradient accumulation gives the same loss and gradient, and no loss
scales with batch size.

``grpo``     mean over a sequence's tokens, then over sequences (Shao et al. 2024, eq. 3);
``dapo``     mean over all tokens of the batch (Yu et al. 2025, DAPO, eq. 12);
``dr_grpo``  sum over tokens divided by N * L_max, a constant (Liu et al. 2025, Dr. GRPO, eq. 5).
"""

from __future__ import annotations

from typing import Callable

import torch


def _grpo(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    lengths = mask.sum(-1, keepdim=True).clamp(min=1)
    return mask / (lengths * mask.shape[0])


def _dapo(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return mask / mask.sum().clamp(min=1)


def _dr_grpo(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return mask / (mask.shape[0] * max_len)


LOSS_TYPES: dict[str, Callable[[torch.Tensor, int], torch.Tensor]] = {
    "grpo": _grpo,
    "dapo": _dapo,
    "dr_grpo": _dr_grpo,
}


def token_weights(completion_mask: torch.Tensor, loss_type: str = "grpo", *,
                  max_completion_length: int | None = None, dtype=torch.float64) -> torch.Tensor:
    """Per-token loss weights w, shape (N, T), zero off the mask.

    Parameters
    ----------
    completion_mask : BoolTensor, shape (N, T)
        The whole batch's mask (not a micro-batch's).
    loss_type : {"grpo", "dapo", "dr_grpo"}
    max_completion_length : int, optional
        L_max of ``dr_grpo`` (default: T).

    Raises
    ------
    ValueError
        Unknown ``loss_type`` (the message lists the valid ones).
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type {loss_type!r} is not one of {sorted(LOSS_TYPES)}")
    mask = completion_mask.to(dtype)
    return LOSS_TYPES[loss_type](mask, max_completion_length or mask.shape[1])


def policy_loss(logp: torch.Tensor, advantages: torch.Tensor, weights: torch.Tensor, *,
                old_logp: torch.Tensor | None = None, clip_low: float = 0.2, clip_high: float = 0.2,
                ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0) -> torch.Tensor:
    """Clipped surrogate loss of a (micro-)batch, a scalar.

    Parameters
    ----------
    logp : Tensor, shape (n, T)
        l_ijt at the current parameters (rows of a micro-batch).
    advantages : Tensor, shape (n, T)
        A_ijt.
    weights : Tensor, shape (n, T)
        The rows' slice of :func:`token_weights` of the whole batch.
    old_logp : Tensor, shape (n, T), optional
        Sampler log-probabilities; default ``logp.detach()`` (on-policy: rho = 1, gradient
        = -sum w A grad l).
    clip_low, clip_high : float
        PPO clip range [1 - clip_low, 1 + clip_high] (Schulman et al. 2017, eq. 7; DAPO's
        decoupled clip when they differ).
    ref_logp : Tensor, shape (n, T), optional
        Reference-policy log-probabilities for the k3 KL penalty (Schulman 2020;
        DeepSeekMath eq. 4) weighted by ``kl_coef``.
    """
    old = logp.detach() if old_logp is None else old_logp
    ratio = torch.exp(logp - old)
    adv = advantages.to(logp.dtype)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv)
    per_token = -surrogate
    if kl_coef and ref_logp is not None:
        delta = ref_logp - logp
        per_token = per_token + kl_coef * (torch.exp(delta) - delta - 1)
    return (per_token * weights.to(logp.dtype)).sum()
