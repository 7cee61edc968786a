"""Policy-gradient losses and their normalisation, as per-token weights.

Every loss type is a rule for the weight w_ijt of each token in

    loss = - sum_ijt w_ijt * A_ijt * rho_ijt,   rho = pi_theta / pi_old (clipped, PPO),

(cispo and gspo change the per-token term, see below), so the ascent direction of reward R at
rho = 1 is g_R = sum_ijt w_ijt Atilde_ijt grad l_ijt, Atilde = A except under gspo
(:func:`probe_advantages`): the same weights serve the update and the probe (DESIGN.md, "The
probe": Z_R). Weights are
computed once from the completion mask of the WHOLE batch, so a batch processed in
micro-batches with gradient accumulation gives the same loss and gradient, and no loss
scales with batch size.

``grpo``     mean over a sequence's tokens, then over sequences (Shao et al. 2024, eq. 3);
``dapo``     mean over all tokens of the batch (Yu et al. 2025, DAPO, eq. 12);
``dr_grpo``  sum over tokens divided by N * L_max, a constant (Liu et al. 2025, Dr. GRPO, eq. 5);
``bnpo``     dapo's weights and PPO surrogate: the token mean of the batch. TRL's ``bnpo`` divides
             each local micro-batch by its own active tokens; here the batch is the whole update
             (weights are batch-global), which is TRL's ``bnpo`` with the batch in one micro-batch
             (``gradient_accumulation_steps`` 1, one process);
``cispo``    dapo's weights, another objective: the clipped importance weight, detached, times
             the log-probability (MiniMax 2025, "MiniMax-M1", arXiv 2506.13585, the CISPO objective);
``gspo``     grpo's weights, another objective: one importance ratio per sequence, the geometric
             mean of its tokens' ratios, clipped at sequence level (Zheng et al. 2025, "Group
             Sequence Policy Optimization", arXiv 2507.18071, the GSPO objective).

The three objectives (:data:`OBJECTIVES`, :func:`policy_loss`; TRL 1.16
``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._compute_loss``), with l = log pi_theta(y_t),
r_it = exp(l_it - l_old_it), A the advantage, sg = stop-gradient (detach):

``ppo``    per-token loss  -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)          (grpo, dapo,
           dr_grpo, bnpo; TRL ``loss_type`` in [grpo, bnpo, dr_grpo, dapo]);
``cispo``  per-token loss  -sg(min(r, 1 + eps_high)) A l   (no lower bound, as MiniMax-M1 and
           TRL: ``torch.clamp(coef_1, max=self.epsilon_high).detach() * advantages *
           per_token_logps``; TRL's ``epsilon_high`` is the cap itself, so TRL
           ``epsilon_high = E`` is ``clip_high = E - 1`` here: ScaleRL's recommended E = 5 is
           ``clip_high = 4``);
``gspo``   per-token loss  -min(s_i A_it, clip(s_i, 1 - eps_low, 1 + eps_high) A_it),
           s_i = exp((1/|y_i|) sum_t (l_it - l_old_it)) = (pi_theta(y_i) / pi_old(y_i))^(1/|y_i|)
           (TRL ``importance_sampling_level="sequence"`` with ``loss_type="grpo"``, the setting
           TRL's own warning names for the GSPO paper). With a per-sequence advantage this is
           the paper's -min(s_i A_i, clip(s_i) A_i) per sequence; per-token advantages are
           broadcast against s_i as TRL broadcasts them. The GSPO paper clips at
           [1 - 3e-4, 1 + 4e-4] (sec. 5.1, as TRL's paper index quotes it: sequence ratios stay
           close to 1); set ``clip_low``/``clip_high`` accordingly.

What each reduces to at rho = 1 (the probe's point: the first update on a fresh batch, l_old =
l, so r = s = 1, every clip inactive for eps >= 0, and torch.minimum of two equal values passes
half the gradient to each branch, summing to 1):

* ``ppo``: d(-r A)/dl = -A, so the gradient is -sum_it w_it A_it grad l_it;
* ``cispo``: sg(min(1, 1 + eps_high)) = 1, so the gradient is -sum_it w_it A_it grad l_it, dapo's
  exactly (only the loss VALUE differs: it is -sum w A l, not -sum w A);
* ``gspo``: ds_i/dl_it = s_i / |y_i| = 1/|y_i| on the mask, so the gradient is
  -sum_i (sum_t w_it A_it) (1/|y_i|) sum_t' grad l_it'. gspo's weights are row-uniform
  (w_it = c_i m_it, c_i = 1 / (N |y_i|)), so sum_t w_it A_it / |y_i| = c_i Abar_i with Abar_i the
  mean of A over row i's completion tokens: the gradient is -sum_it w_it Abar_i grad l_it,
  grpo's with each token's advantage replaced by its sequence's mean advantage (identical to
  grpo for a per-sequence advantage such as ``outcome``).

:func:`probe_advantages` gives these effective advantages, so the probe's direction
sum_it w_it Abar_it grad l_it is exactly the negative gradient of :func:`policy_loss` at rho = 1
(``tests/grpo/test_loss_types_trl.py`` checks it in float64 against torch.autograd).

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

import torch

from .loss_types import (GROUP_PARTS, LOSS_TYPES, LOSSES, NORMALISATIONS, OBJECTIVE_NAMES, OBJECTIVES,  # noqa: F401
                         LossType, register_loss_type)


def _check_loss_type(loss_type: str) -> None:
    if loss_type not in LOSSES:
        raise ValueError(f"loss_type {loss_type!r} is not one of {sorted(LOSSES)}")


def token_weights(completion_mask: torch.Tensor, loss_type: str = "grpo", *,
                  max_completion_length: int | None = None, dtype=torch.float64) -> torch.Tensor:
    """Per-token loss weights w, shape (N, T), zero off the mask.

    Parameters
    ----------
    completion_mask : BoolTensor, shape (N, T)
        The whole batch's mask (not a micro-batch's).
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        bnpo and cispo have dapo's weights, gspo has grpo's (module docstring).
    max_completion_length : int, optional
        L_max of ``dr_grpo`` (default: T).

    Raises
    ------
    ValueError
        Unknown ``loss_type`` (the message lists the valid ones).
    """
    _check_loss_type(loss_type)
    mask = completion_mask.to(dtype)
    return LOSS_TYPES[loss_type](mask, max_completion_length or mask.shape[1])


def probe_advantages(advantages: torch.Tensor, completion_mask: torch.Tensor, loss_type: str = "grpo") -> torch.Tensor:
    """The effective per-token advantages of the loss's gradient at rho = 1.

    At rho = 1 (l_old = l) the gradient of :func:`policy_loss` with ``loss_type`` is
    -sum_it w_it Atilde_it grad l_it, w = :func:`token_weights` (derivation in the module
    docstring). Atilde = A for every loss type except ``gspo``, whose sequence-level ratio
    s_i = exp(mean_t (l_it - l_old_it)) spreads a sequence's advantage evenly over its tokens:
    Atilde_it = Abar_i, the mean of A over row i's completion tokens. The probe's direction of a
    reward is sum_it w_it Atilde_it grad l_it (:func:`gradprobe.probe.estimate.group_sums`).

    Parameters
    ----------
    advantages : Tensor, shape (..., N, T)
        A_it of one reward (N, T) or of R rewards stacked (R, N, T); values off the mask are ignored.
    completion_mask : BoolTensor, shape (N, T)
    loss_type : str
        One of :data:`LOSS_TYPES`.

    Returns
    -------
    Tensor, shape of ``advantages``
        Atilde, zero off the mask (dtype of ``advantages``; a row without completion tokens gets 0).

    Raises
    ------
    ValueError
        Unknown ``loss_type`` (the message lists the valid ones), or ``advantages`` whose last two
        dimensions are not the mask's (N, T).
    """
    _check_loss_type(loss_type)
    if tuple(advantages.shape[-2:]) != tuple(completion_mask.shape):
        raise ValueError(f"advantages have shape {tuple(advantages.shape)}, but the completion mask is "
                         f"{tuple(completion_mask.shape)}: give (N, T) or (R, N, T) advantages of the same batch")
    mask = completion_mask.bool().to(advantages.device)
    adv = torch.where(mask, advantages, torch.zeros((), dtype=advantages.dtype, device=advantages.device))
    if OBJECTIVES[loss_type] != "gspo":
        return adv
    mean = adv.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1).to(adv.dtype)
    return torch.where(mask, mean.expand_as(adv), torch.zeros((), dtype=adv.dtype, device=adv.device))


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
                is_weights: torch.Tensor | None = None, stats: dict | None = None,
                loss_type: str = "grpo", completion_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Policy-gradient loss of a (micro-)batch, a scalar: ``loss_type``'s objective (:data:`OBJECTIVES`).

    Per-token loss L_it (module docstring; TRL 1.16 ``trl/trainer/grpo_trainer.py``,
    ``GRPOTrainer._compute_loss``), r_it = exp(l_it - l_old_it):

    * ``ppo`` (grpo, dapo, dr_grpo, bnpo): -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
      (Schulman et al. 2017, eq. 7; DAPO's decoupled clip when they differ);
    * ``cispo``: -sg(min(r, 1 + clip_high)) A l, the weight detached and not bounded below
      (MiniMax-M1; TRL's ``epsilon_high`` is our 1 + ``clip_high``);
    * ``gspo``: -min(s_i A_it, clip(s_i, 1 - clip_low, 1 + clip_high) A_it) with the sequence
      ratio s_i = exp(sum_t m_it (l_it - l_old_it) / max(1, sum_t m_it)) (GSPO; TRL
      ``importance_sampling_level="sequence"``).

    Parameters
    ----------
    logp : Tensor, shape (n, T)
        l_ijt at the current parameters (rows of a micro-batch).
    advantages : Tensor, shape (n, T)
        A_ijt.
    weights : Tensor, shape (n, T)
        The rows' slice of :func:`token_weights` of the whole batch (same ``loss_type``).
    old_logp : Tensor, shape (n, T), optional
        Sampler log-probabilities; default ``logp.detach()`` (on-policy: rho = 1, gradient
        = -sum w Atilde grad l, Atilde = :func:`probe_advantages`).
    clip_low, clip_high : float
        Clip range [1 - clip_low, 1 + clip_high] of the token ratio (``ppo``) or the sequence
        ratio (``gspo``); ``cispo`` caps its weight at 1 + clip_high and ignores clip_low.
    ref_logp : Tensor, shape (n, T), optional
        Reference-policy log-probabilities for the k3 KL penalty (Schulman 2020;
        DeepSeekMath eq. 4) weighted by ``kl_coef``, clamped as verl clamps it
        (:func:`k3_kl_penalty`), so extreme log-ratios give a finite loss and gradient.
    is_weights : Tensor, shape (n, T), optional
        Per-token importance weights for a sampler other than the training forward pass
        (:func:`truncated_is_weights`); they multiply the policy term (not the KL
        term), detached, as in TRL and verl.
    stats : dict, optional
        With the KL term, receives ``kl_clamped_tokens`` (int): tokens of non-zero weight whose
        k3 term was clamped (:func:`k3_kl_penalty`); added to a value already there, so one
        dict can gather a batch's micro-batches.
    loss_type : str
        One of :data:`LOSS_TYPES` (default ``grpo``); selects the objective, not the weights
        (pass ``weights`` of the same loss type).
    completion_mask : BoolTensor, shape (n, T), optional
        The rows' completion mask; needed by ``gspo`` (the tokens of each sequence's mean log-ratio).

    Returns
    -------
    Tensor, shape ()
        sum_ijt w_ijt * (L_ijt [* is_weight] + kl_coef * k3), dtype of ``logp``.

    Raises
    ------
    ValueError
        Unknown ``loss_type`` (the message lists the valid ones); ``gspo`` without
        ``completion_mask`` or with one of another shape; ``cispo`` with ``clip_high <= -1``
        (a non-positive cap).
    """
    _check_loss_type(loss_type)
    old = logp.detach() if old_logp is None else old_logp
    term = _OBJECTIVE_TERMS[OBJECTIVES[loss_type]]
    per_token = term(logp, logp - old.to(logp.dtype), advantages.to(logp.dtype), clip_low, clip_high, completion_mask)
    if is_weights is not None:
        per_token = per_token * is_weights.detach().to(logp.dtype)
    if kl_coef and ref_logp is not None:
        k3, hit = k3_kl_penalty(logp, ref_logp)
        per_token = per_token + kl_coef * k3
        if stats is not None:
            stats["kl_clamped_tokens"] = stats.get("kl_clamped_tokens", 0) + int((hit & (weights != 0)).sum())
    return (per_token * weights.to(logp.dtype)).sum()


def _ppo_term(logp, log_ratio, adv, clip_low, clip_high, completion_mask):
    """-min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) per token (Schulman et al. 2017, eq. 7), (n, T)."""
    ratio = torch.exp(log_ratio)
    return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv)


def _cispo_term(logp, log_ratio, adv, clip_low, clip_high, completion_mask):
    """-sg(min(r, 1 + clip_high)) A l per token (MiniMax-M1, the CISPO objective), (n, T)."""
    if not 1 + clip_high > 0:
        raise ValueError(f"cispo caps its importance weight at 1 + clip_high, which must be > 0; got clip_high = "
                         f"{clip_high} (TRL's epsilon_high E is clip_high = E - 1; ScaleRL recommends E = 5)")
    weight = torch.clamp(torch.exp(log_ratio), max=1 + clip_high).detach()
    return -weight * adv * logp


def _gspo_term(logp, log_ratio, adv, clip_low, clip_high, completion_mask):
    """The ppo term with one ratio per sequence, s_i = exp(mean_t log r_it) over its completion tokens
    (GSPO, Zheng et al. 2025), (n, T)."""
    if completion_mask is None or tuple(completion_mask.shape) != tuple(logp.shape):
        got = None if completion_mask is None else tuple(completion_mask.shape)
        raise ValueError(f"loss_type 'gspo' needs completion_mask of shape {tuple(logp.shape)} (n rows, T "
                         f"completion tokens) for each sequence's mean log-ratio, got {got}")
    m = completion_mask.bool().to(logp.device)
    masked = torch.where(m, log_ratio, torch.zeros((), dtype=logp.dtype, device=logp.device))
    seq_log_ratio = (masked.sum(-1) / m.sum(-1).clamp(min=1).to(logp.dtype)).unsqueeze(-1)  # (n, 1)
    return _ppo_term(logp, seq_log_ratio, adv, clip_low, clip_high, completion_mask)


#: objective (:data:`OBJECTIVE_NAMES`) -> its per-token term (logp, log r, A, clip_low, clip_high, mask) -> (n, T)
_OBJECTIVE_TERMS = {"ppo": _ppo_term, "cispo": _cispo_term, "gspo": _gspo_term}
