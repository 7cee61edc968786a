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

Rollouts from another engine (vLLM) are sampled from a slightly different distribution
pi_sampler than the training forward pass pi_theta computes (other kernels, bf16 rounding,
stale weights). :func:`truncated_is_weights` gives the truncated importance-sampling (TIS)
correction of Yao et al. 2025 ("Your efficient RL framework secretly brings you off-policy
RL training"), as TRL (``vllm_importance_sampling_cap`` / ``_clip_max``, mode
``token_truncate``) and verl (``tis_imp_ratio_cap``) apply it: each token's loss is
multiplied by min(pi_train / pi_sampler, C), detached; :func:`policy_loss` takes it as
``is_weights``. :func:`logprob_mismatch` reports the gap between the two log-probabilities.

The k3 KL penalty (:func:`k3_kl_penalty`) is clamped as verl clamps its ``low_var_kl``/``k3``
penalty (``verl/trainer/ppo/core_algos.py``, ``kl_penalty_forward``, volcengine/verl commit
b178a3cd): the log-ratio d = l_ref - l_theta to [-20, 20] before exp(d) - d - 1, and the
per-token value to [-10, 10]. Unclamped, exp(d) overflows to inf in float32 for d > 88.7 nats
(and the loss's gradient to -inf); the clamp keeps both finite and gives a clamped token zero
gradient. The number of clamped tokens is reported, never silent.
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


IMPORTANCE_SAMPLING = ("none", "tis")


def truncated_is_weights(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, *,
                         cap: float = 2.0) -> torch.Tensor:
    """Truncated importance-sampling weights min(pi_train / pi_sampler, C) per token.

    rho_t = exp(l_train_t - l_sampler_t), truncated at ``cap`` from above (Yao et al. 2025,
    "truncated importance sampling"; TRL ``GRPOTrainer``, ``vllm_importance_sampling_mode=
    "token_truncate"``; verl ``tis_imp_ratio_cap``). The weights are constants (detached):
    they re-weight the per-token policy-gradient loss, they are not differentiated.

    Parameters
    ----------
    train_logp : Tensor, shape (N, T)
        l_t under the training forward pass at the parameters the rollouts were drawn with
        (pi_old; detached).
    sampler_logp : Tensor, shape (N, T)
        l_t the sampler reported for the token it drew; NaN where the sampler gave none (the
        token then gets weight 1, as in TRL).
    mask : BoolTensor, shape (N, T)
        Completion mask; weights are 1 off the mask (they multiply zero-weight tokens there).
    cap : float
        C > 0 (default 2, TRL's and verl's default).

    Returns
    -------
    Tensor, shape (N, T), dtype of ``train_logp``
        min(exp(train - sampler), C) on the mask, 1 elsewhere.

    Raises
    ------
    ValueError
        ``cap <= 0`` or shapes that differ.
    """
    if not cap > 0:
        raise ValueError(f"importance-sampling cap C must be > 0 (TRL/verl default 2.0), got {cap}")
    if train_logp.shape != sampler_logp.shape or train_logp.shape != mask.shape:
        raise ValueError(f"train_logp {tuple(train_logp.shape)}, sampler_logp {tuple(sampler_logp.shape)} and "
                         f"mask {tuple(mask.shape)} must have the same shape (N, T)")
    diff = (train_logp.detach() - sampler_logp.to(train_logp.dtype)).nan_to_num(nan=0.0)
    rho = torch.exp(diff).clamp(max=float(cap))
    return torch.where(mask.bool(), rho, torch.ones_like(rho))


def logprob_mismatch(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> dict:
    """How far the sampler's per-token log-probabilities are from the training forward pass.

    Parameters
    ----------
    train_logp, sampler_logp : Tensor, shape (N, T)
        l_t of the training forward pass and of the sampler, for the sampled tokens; NaN in
        ``sampler_logp`` marks tokens the sampler did not score (excluded, counted).
    mask : BoolTensor, shape (N, T)

    Returns
    -------
    dict
        ``max_abs_diff``, ``mean_abs_diff`` (nats, over masked scored tokens, as TRL's
        ``sampling/sampling_logp_difference/{max,mean}``); ``kl_k1`` = mean(l_sampler -
        l_train) and ``kl_k3`` = mean(rho - 1 - log rho), rho = pi_train / pi_sampler: two
        Monte-Carlo estimates of KL(pi_sampler || pi_train) from tokens drawn from pi_sampler
        (Schulman 2020, "Approximating KL divergence"; k3 is non-negative per token);
        ``tokens`` scored, ``unscored`` (NaN) tokens. All 0 when no token is scored.
    """
    m = mask.bool() & torch.isfinite(sampler_logp)
    unscored = int((mask.bool() & ~torch.isfinite(sampler_logp)).sum())
    t = train_logp.detach().to(torch.float64)[m]
    s = sampler_logp.to(torch.float64)[m]
    if t.numel() == 0:
        return {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "kl_k1": 0.0, "kl_k3": 0.0, "tokens": 0,
                "unscored": unscored}
    d = t - s  # log rho
    return {"max_abs_diff": float(d.abs().max()), "mean_abs_diff": float(d.abs().mean()),
            "kl_k1": float((-d).mean()), "kl_k3": float((torch.expm1(d) - d).mean()), "tokens": int(t.numel()),
            "unscored": unscored}


#: |d| bound of the k3 log-ratio d = l_ref - l_theta (nats), verl's ``torch.clamp(kl, min=-20, max=20)``
KL_LOG_RATIO_CLAMP = 20.0
#: bound of the per-token k3 value (nats), verl's ``torch.clamp(kld, min=-10, max=10)``
KL_VALUE_CLAMP = 10.0


def k3_kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, *,
                  value_clamp: float | None = KL_VALUE_CLAMP) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token k3 estimate of KL(pi_theta || pi_ref), clamped as verl clamps it, and where it was clamped.

    k3_t = exp(d_t) - d_t - 1, d_t = l_ref_t - l_theta_t (Schulman 2020, "Approximating KL
    divergence"; DeepSeekMath, Shao et al. 2024, eq. 4), with d clamped to
    [-``KL_LOG_RATIO_CLAMP``, ``KL_LOG_RATIO_CLAMP``] = [-20, 20] and the value to
    [-``value_clamp``, ``value_clamp``] (verl ``kl_penalty_forward``, ``low_var_kl``: both clamps
    "for numerical stability"). For |d| <= 20 and k3 <= 10 it equals TRL's unclamped
    ``torch.exp(ref - logp) - (ref - logp) - 1`` bit for bit (same expression).

    Parameters
    ----------
    logp : Tensor, shape (n, T)
        l_theta of the sampled tokens (nats); differentiable.
    ref_logp : Tensor, shape (n, T)
        l_ref of the same tokens (nats), a constant.
    value_clamp : float or None
        Bound of the per-token value (verl: 10); None keeps only the log-ratio clamp (the value is
        then at most e^20 - 21 ~ 4.9e8, finite in float32 and float64).

    Returns
    -------
    (Tensor, BoolTensor), both shape (n, T)
        The clamped k3 (dtype of ``logp``; a clamped token has zero gradient), and True where a
        clamp was active (|d| > 20, or k3 > ``value_clamp``); padding positions are not masked
        here: combine with the completion mask before counting.

    Raises
    ------
    ValueError
        Shapes that differ, or ``value_clamp <= 0``.
    """
    if tuple(logp.shape) != tuple(ref_logp.shape):
        raise ValueError(f"ref_logp has shape {tuple(ref_logp.shape)} but logp has {tuple(logp.shape)}; give the "
                         "reference log-probability of every token of logp (n rows, T completion tokens)")
    if value_clamp is not None and not value_clamp > 0:
        raise ValueError(f"value_clamp must be > 0 nats or None, got {value_clamp}; verl uses 10")
    delta = ref_logp.to(logp.dtype) - logp
    d = torch.clamp(delta, min=-KL_LOG_RATIO_CLAMP, max=KL_LOG_RATIO_CLAMP)
    k3 = torch.exp(d) - d - 1
    hit = delta.detach().abs() > KL_LOG_RATIO_CLAMP
    if value_clamp is not None:
        hit = hit | (k3.detach().abs() > value_clamp)
        k3 = torch.clamp(k3, min=-value_clamp, max=value_clamp)
    return k3, hit


def policy_loss(logp: torch.Tensor, advantages: torch.Tensor, weights: torch.Tensor, *,
                old_logp: torch.Tensor | None = None, clip_low: float = 0.2, clip_high: float = 0.2,
                ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0,
                is_weights: torch.Tensor | None = None, stats: dict | None = None) -> torch.Tensor:
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
        DeepSeekMath eq. 4) weighted by ``kl_coef``, clamped as verl clamps it
        (:func:`k3_kl_penalty`), so extreme log-ratios give a finite loss and gradient.
    is_weights : Tensor, shape (n, T), optional
        Per-token importance weights for a sampler other than the training forward pass
        (:func:`truncated_is_weights`); they multiply the clipped surrogate (not the KL
        term), detached, as in TRL and verl.
    stats : dict, optional
        With the KL term, receives ``kl_clamped_tokens`` (int): tokens of non-zero weight whose
        k3 term was clamped (:func:`k3_kl_penalty`); added to a value already there, so one
        dict can gather a batch's micro-batches.

    Returns
    -------
    Tensor, shape ()
        sum_ijt w_ijt * (-min(rho A, clip(rho) A) [* is_weight] + kl_coef * k3), dtype of ``logp``.
    """
    old = logp.detach() if old_logp is None else old_logp
    ratio = torch.exp(logp - old)
    adv = advantages.to(logp.dtype)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv)
    per_token = -surrogate
    if is_weights is not None:
        per_token = per_token * is_weights.detach().to(logp.dtype)
    if kl_coef and ref_logp is not None:
        k3, hit = k3_kl_penalty(logp, ref_logp)
        per_token = per_token + kl_coef * k3
        if stats is not None:
            stats["kl_clamped_tokens"] = stats.get("kl_clamped_tokens", 0) + int((hit & (weights != 0)).sum())
    return (per_token * weights.to(logp.dtype)).sum()
