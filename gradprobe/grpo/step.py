"""One GRPO update: micro-batched forward + backward of the clipped surrogate, then AdamW.

The probe's cost is stated as a ratio to this step's forward + backward on the same batch
(``benchmarks/probe_cost.py``), and the matched-compute runs are made of it.

Attention: the update runs under ``UpdateConfig.attention`` (default ``sdpa``, PyTorch's fused
scaled-dot-product attention), switched for the update only and restored afterwards
(:func:`gradprobe.models.use_attention`); the model keeps the exact ``gradprobe_eager`` kernel
that the probe's ``torch.func.jvp`` needs (:mod:`gradprobe.attention`). Left padding is safe
under ``sdpa``: fully masked (padding) query rows do not leak NaN into real tokens, and each
row's per-token log-probabilities equal those of the row alone (``tests/grpo/test_update_attention.py``).

Per-update policy statistics (entropy, k3 KL to the initial policy; definitions in
:mod:`gradprobe.training.metrics`) are taken from the loss's own forward pass
(:func:`loss_and_backward` with ``stats`` and ``init_model``): no second forward of the policy.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass

import torch

from ..logprobs import token_logprobs
from ..types import RolloutBatch
from .losses import (IMPORTANCE_SAMPLING, KL_LOG_RATIO_CLAMP, LOSS_TYPES, logprob_mismatch, policy_loss,
                     token_weights, truncated_is_weights)

log = logging.getLogger(__name__)


class NonFiniteLossError(FloatingPointError):
    """The loss or gradient of an update is NaN/inf; the parameters were left unchanged."""


@dataclass(frozen=True)
class UpdateConfig:
    """Settings of one update.

    Attributes
    ----------
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        Normalisation and objective, see :mod:`gradprobe.grpo.losses`: the first four minimise
        the token-level PPO clipped surrogate (bnpo with dapo's token mean over the batch);
        ``cispo`` the clipped, detached importance weight times the log-probability (dapo's
        weights), ``gspo`` the surrogate of a sequence-level ratio (grpo's weights). Under
        on-policy updates (``old_logp`` not given: rho = 1) cispo's gradient is dapo's and
        gspo's is grpo's with each sequence's mean advantage
        (:func:`~gradprobe.grpo.losses.probe_advantages`).
    micro_batch_size : int
        Rows per forward/backward; results do not depend on it (weights are batch-global).
    max_grad_norm : float
        Global gradient-norm clip (0 = off).
    clip_low, clip_high : float
        Ratio clip [1 - clip_low, 1 + clip_high], of each token's ratio, or of each sequence's
        under ``gspo`` (the GSPO paper uses 3e-4, 4e-4); ``cispo`` caps its weight at
        1 + clip_high (TRL's ``epsilon_high`` for cispo is that cap: TRL E = 1 + clip_high).
    importance_sampling : {"none", "tis"}
        ``tis``: multiply each token's loss by min(pi_train / pi_sampler, ``is_cap``), the
        truncated importance-sampling correction for a sampler (vLLM) whose distribution
        differs from the training forward pass (:func:`~gradprobe.grpo.losses.truncated_is_weights`);
        needs the sampler's per-token log-probabilities (``sampler_logp``).
    is_cap : float
        C of ``tis`` (TRL ``vllm_importance_sampling_cap``, verl ``tis_imp_ratio_cap``; default 2).
    max_completion_length : int or None
        L_max (tokens) of ``dr_grpo``: the loss is sum_ijt A rho / (N * L_max), a constant
        independent of the batch (Liu et al. 2025, "Understanding R1-Zero-Like Training: A
        Critical Perspective", Dr. GRPO, sec. 3.1 / eq. 5; TRL ``GRPOTrainer`` divides by rows x
        ``max_completion_length``). Set it to the sampler's ``max_new_tokens``
        (:func:`gradprobe.training.run.run_training` does). ``None`` falls back to T, the batch's
        longest completion, so the effective learning rate varies from batch to batch (a
        warning is logged for ``dr_grpo``). Ignored by ``grpo`` and ``dapo``.
    attention : str or None
        Attention implementation of the update's forward + backward (and of the initial
        policy's statistics forward), a transformers ``attn_implementation`` name: default
        ``"sdpa"`` (fast; exact to float rounding); ``"gradprobe_eager"`` reproduces the
        probe's kernel; ``None`` keeps the model's own. Restored after the update.
    """

    loss_type: str = "grpo"
    micro_batch_size: int = 8
    max_grad_norm: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    importance_sampling: str = "none"
    is_cap: float = 2.0
    max_completion_length: int | None = None
    attention: str | None = "sdpa"

    def __post_init__(self):
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"UpdateConfig.loss_type {self.loss_type!r} is not one of {sorted(LOSS_TYPES)}")
        if self.max_completion_length is not None and (
                isinstance(self.max_completion_length, bool) or not isinstance(self.max_completion_length, int)
                or self.max_completion_length < 1):
            raise ValueError(f"max_completion_length (L_max of dr_grpo, tokens) must be a positive int or None, got "
                             f"{self.max_completion_length!r}; use the sampler's max_new_tokens")
        if self.loss_type == "dr_grpo" and self.max_completion_length is None:
            log.warning("UpdateConfig(loss_type='dr_grpo') without max_completion_length: normalising by the "
                        "batch's longest completion T, which varies per batch; set max_completion_length to the "
                        "sampler's max_new_tokens for Dr. GRPO's constant (as TRL does)")
        if self.attention is not None and (not isinstance(self.attention, str) or not self.attention):
            raise ValueError(f"attention must be a transformers attn_implementation name (e.g. 'sdpa', "
                             f"'gradprobe_eager') or None (keep the model's), got {self.attention!r}")
        if self.importance_sampling not in IMPORTANCE_SAMPLING:
            raise ValueError(f"importance_sampling {self.importance_sampling!r} is not one of {IMPORTANCE_SAMPLING}")
        if not self.is_cap > 0:
            raise ValueError(f"is_cap (the TIS cap C) must be > 0, got {self.is_cap}; TRL and verl use 2.0")


def policy_stat_sums(logp: torch.Tensor, init_logp: torch.Tensor, entropy: torch.Tensor,
                     mask: torch.Tensor) -> tuple[float, float]:
    """Sums over completion tokens of the k3 KL to the initial policy and of the entropy.

    k3_t = exp(d_t) - d_t - 1 with d_t = l_init_t - l_theta_t, an unbiased, non-negative
    per-token estimator of KL(pi_theta || pi_init) for tokens sampled from pi_theta (Schulman
    2020, "Approximating KL divergence"). Divide both sums by the number of completion tokens
    for the per-token means logged as ``kl_init`` and ``entropy``
    (:mod:`gradprobe.training.metrics`). d is clamped to [-20, 20] nats as verl clamps its
    ``low_var_kl`` log-ratio (``KL_LOG_RATIO_CLAMP``, :func:`~gradprobe.grpo.losses.k3_kl_penalty`),
    so a token that pi_theta or pi_init gives probability ~0 cannot make the sum inf; verl's
    value clamp (10 nats) is not applied to this statistic, which would hide real drift (a token
    raised from p = 1e-5 to 0.9 has k3 ~ 10.5). :func:`kl_clamped_tokens` counts the clamped tokens.

    Parameters
    ----------
    logp, init_logp : Tensor, shape (n, T)
        l_theta and l_init of the sampled tokens (nats), at the sampling temperature.
    entropy : Tensor, shape (n, T)
        Full-vocabulary entropy of pi_theta(. | prefix) per position (nats).
    mask : BoolTensor, shape (n, T)
        Completion mask.

    Returns
    -------
    (float, float)
        (sum of k3 over masked tokens, sum of entropy over masked tokens), computed in float64.
    """
    m = mask.to(torch.float64)
    d = (init_logp.detach() - logp.detach()).to(torch.float64).clamp(min=-KL_LOG_RATIO_CLAMP, max=KL_LOG_RATIO_CLAMP)
    kl = torch.where(mask.bool(), torch.expm1(d) - d, torch.zeros_like(d))  # padding may hold any finite value
    ent = torch.where(mask.bool(), entropy.detach().to(torch.float64), torch.zeros_like(d))
    return float((kl * m).sum()), float((ent * m).sum())


def kl_clamped_tokens(logp: torch.Tensor, init_logp: torch.Tensor, mask: torch.Tensor) -> int:
    """Completion tokens whose log-ratio |l_init - l_theta| exceeds ``KL_LOG_RATIO_CLAMP`` (20 nats).

    The tokens :func:`policy_stat_sums` clamps (verl's ``low_var_kl`` log-ratio clamp); a NaN
    log-ratio is not counted (it is a different failure, caught as a non-finite statistic).

    Parameters
    ----------
    logp, init_logp : Tensor, shape (n, T)
        l_theta and l_init of the sampled tokens (nats).
    mask : BoolTensor, shape (n, T)
        Completion mask.

    Returns
    -------
    int
    """
    d = (init_logp.detach() - logp.detach()).to(torch.float64)
    return int(((d.abs() > KL_LOG_RATIO_CLAMP) & mask.bool()).sum())


class _EntropyCapture:
    """Forward hook on a causal LM: per-position full-vocabulary entropy from its output logits.

    Used inside :func:`token_logprobs`'s own forward (``logits_to_keep = T + 1``), so the entropy
    of pi_theta(. | prefix) at each completion position comes from the loss's logits, detached:
    H_t = -sum_v p_v log p_v, p = softmax(logits_t / temperature); half-precision logits are
    upcast to float32 first. ``rows`` collects one (n, T) tensor per forward; ``seconds`` the
    wall time spent in the hook.
    """

    def __init__(self, model, temperature: float):
        self.model, self.temperature = model, float(temperature)
        self.rows: list[torch.Tensor] = []
        self.seconds = 0.0
        self._handle = None

    def _hook(self, module, args, output):
        t0 = time.perf_counter()
        with torch.no_grad():
            logits = output.logits[:, :-1].detach()
            if logits.dtype in (torch.float16, torch.bfloat16):
                logits = logits.float()
            logp_all = torch.log_softmax(logits / self.temperature, dim=-1)
            self.rows.append(-(logp_all.exp() * logp_all).sum(-1))
        self.seconds += time.perf_counter() - t0

    def __enter__(self):
        self._handle = self.model.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc):
        self._handle.remove()
        return False


def loss_and_backward(model, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig, *,
                      old_logp: torch.Tensor | None = None, sampler_logp: torch.Tensor | None = None,
                      stats: dict | None = None, init_model=None) -> float:
    """Accumulate the gradient of the batch loss into ``param.grad`` (no optimizer step).

    The forward + backward run under ``config.attention`` (restored afterwards).

    Parameters
    ----------
    advantages : Tensor, shape (N, T)
        Per-token advantages A_ijt (zero off the mask).
    old_logp : Tensor, shape (N, T), optional
        Log-probabilities of the policy the rollouts were drawn with, as the training forward
        pass computes them, for the PPO ratio (default: on-policy, the current values, rho = 1).
    sampler_logp : Tensor, shape (N, T), optional
        The sampler's own per-token log-probabilities (e.g. vLLM's, NaN where missing). With
        ``config.importance_sampling == "tis"`` they give the truncated IS weights; in any case
        their mismatch with the training forward pass is measured.
    stats : dict, optional
        Filled with ``sampler_mismatch`` (:func:`~gradprobe.grpo.losses.logprob_mismatch`) and,
        under ``tis``, ``is_weight`` (``mean``, ``min``, ``max``, ``capped_fraction`` over
        masked tokens) when ``sampler_logp`` is given; with ``init_model`` also ``entropy``
        and ``kl_init`` (see :func:`policy_stat_sums`; nats per completion token),
        ``kl_clamped_tokens`` (completion tokens whose log-ratio hit the 20-nat clamp of
        ``kl_init``, :func:`kl_clamped_tokens`) and
        ``stats_seconds`` (wall-seconds of that statistics work: the initial policy's forward
        and the entropy/KL arithmetic, not of the loss forward they share).
    init_model : transformers causal LM, optional
        The frozen initial policy pi_init (same tokenizer). Its per-token log-probabilities come
        from one no-grad forward per micro-batch; the current policy's log-probabilities and
        full-vocabulary entropies come from the loss's own forward pass (detached), i.e. at the
        parameters before this update, at the sampling temperature. Needs ``stats``.

    Returns
    -------
    float
        The batch loss (sum over micro-batches).

    Raises
    ------
    ValueError
        ``tis`` without ``sampler_logp``; ``init_model`` without ``stats``; ``advantages``,
        ``old_logp`` or ``sampler_logp`` not of shape (N, T); a batch whose
        completion width T exceeds ``config.max_completion_length`` under ``dr_grpo``.
    """
    if config.importance_sampling == "tis" and sampler_logp is None:
        raise ValueError("importance_sampling='tis' needs the sampler's per-token log-probabilities (sampler_logp, "
                         "shape (N, T)), e.g. from gradprobe.rollout.vllm_sampler.sampler_logprobs; or set "
                         "importance_sampling='none' for a sampler that is the training model itself (HFSampler)")
    if init_model is not None and stats is None:
        raise ValueError("init_model is given for the KL/entropy statistics, but stats is None: pass stats={} to "
                         "receive them")
    t = batch.completion_mask.shape[1]
    for name, x in (("advantages", advantages), ("old_logp", old_logp), ("sampler_logp", sampler_logp)):
        if x is not None and tuple(x.shape) != tuple(batch.completion_mask.shape):
            raise ValueError(f"{name} has shape {tuple(x.shape)}, but the batch's completion mask has shape "
                             f"{tuple(batch.completion_mask.shape)} (N rows, T completion tokens); give one value "
                             "per completion token")
    if config.loss_type == "dr_grpo" and config.max_completion_length is not None \
            and t > config.max_completion_length:
        raise ValueError(f"the batch's completion width T = {t} tokens exceeds UpdateConfig.max_completion_length = "
                         f"{config.max_completion_length} (dr_grpo's L_max); set it to the sampler's max_new_tokens")
    weights = token_weights(batch.completion_mask, config.loss_type,
                            max_completion_length=config.max_completion_length)
    mask = batch.completion_mask.bool()
    total = 0.0
    n = batch.num_rows
    train_rows, is_rows = [], []
    kl_sum = ent_sum = stats_seconds = 0.0
    kl_clamped = 0
    from ..models import use_attention

    with contextlib.ExitStack() as stack:
        if config.attention is not None:
            stack.enter_context(use_attention(model, config.attention))
            if init_model is not None:
                stack.enter_context(use_attention(init_model, config.attention))
        capture = None
        if init_model is not None:
            capture = stack.enter_context(_EntropyCapture(model, batch.temperature))
        for start in range(0, n, config.micro_batch_size):
            rows = slice(start, min(n, start + config.micro_batch_size))
            logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                                  temperature=batch.temperature)
            if init_model is not None:
                if logp.is_cuda:  # charge the loss forward's queued kernels to training, not to the statistics
                    torch.cuda.synchronize(logp.device)
                t0 = time.perf_counter()
                with torch.no_grad():
                    init_logp = token_logprobs(init_model, batch.input_ids[rows], batch.attention_mask[rows],
                                               batch.prompt_length, temperature=batch.temperature)
                kl, ent = policy_stat_sums(logp.detach(), init_logp, capture.rows.pop(), mask[rows])
                kl_sum, ent_sum = kl_sum + kl, ent_sum + ent
                kl_clamped += kl_clamped_tokens(logp, init_logp, mask[rows])
                stats_seconds += time.perf_counter() - t0
            old = None if old_logp is None else old_logp[rows]
            is_w = None
            if sampler_logp is not None:
                base = (logp.detach() if old is None else old.to(logp.dtype))
                train_rows.append(base)
                if config.importance_sampling == "tis":
                    is_w = truncated_is_weights(base, sampler_logp[rows].to(base.device), mask[rows],
                                                cap=config.is_cap)
                    is_rows.append(is_w)
            loss = policy_loss(logp, advantages[rows], weights[rows], old_logp=old,
                               clip_low=config.clip_low, clip_high=config.clip_high, is_weights=is_w,
                               loss_type=config.loss_type, completion_mask=mask[rows])
            loss.backward()
            total += float(loss.detach())
    if init_model is not None:
        tokens = max(int(mask.sum()), 1)
        stats.update(kl_init=kl_sum / tokens, entropy=ent_sum / tokens, kl_clamped_tokens=kl_clamped,
                     stats_seconds=stats_seconds + capture.seconds)
        if kl_clamped:
            log.warning("kl_init: %d of %d completion tokens have |log pi_init - log pi_theta| > %g nats and were "
                        "clamped (verl's low_var_kl clamp); kl_init is a lower bound for this update",
                        kl_clamped, tokens, KL_LOG_RATIO_CLAMP)
    if stats is not None and sampler_logp is not None:
        train = torch.cat(train_rows)
        stats["sampler_mismatch"] = logprob_mismatch(train, sampler_logp.to(train.device), mask)
        if is_rows:
            w = torch.cat(is_rows).to(torch.float64)[mask]
            stats["is_weight"] = {"mean": float(w.mean()) if w.numel() else 1.0,
                                  "min": float(w.min()) if w.numel() else 1.0,
                                  "max": float(w.max()) if w.numel() else 1.0,
                                  "capped_fraction": float((w >= config.is_cap).double().mean()) if w.numel() else 0.0,
                                  "cap": config.is_cap}
    return total


def old_policy_logprobs(model, batch: RolloutBatch, config: UpdateConfig = UpdateConfig()) -> torch.Tensor:
    """pi_old's per-token log-probabilities of a batch, before the first of mu optimizer steps on it.

    The ``old_logp`` of :func:`loss_and_backward` for steps 2..mu of an update with
    ``iterations = mu > 1`` (TRL computes the same ``old_per_token_logps`` with one no-grad forward
    when ``num_iterations > 1``). Runs in ``config.micro_batch_size`` rows under
    ``config.attention``, as the loss's own forward does, so that the ratio is exactly 1 on the first
    step up to the forward's rounding.

    Returns
    -------
    Tensor, shape (N, T), float32 or the model's dtype
        N rows, T completion tokens; padding positions hold finite values to be masked.
    """
    from ..models import use_attention

    rows_out = []
    with contextlib.ExitStack() as stack, torch.no_grad():
        if config.attention is not None:
            stack.enter_context(use_attention(model, config.attention))
        for start in range(0, batch.num_rows, config.micro_batch_size):
            rows = slice(start, min(batch.num_rows, start + config.micro_batch_size))
            rows_out.append(token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows],
                                           batch.prompt_length, temperature=batch.temperature))
    return torch.cat(rows_out)


def grpo_step(model, optimizer, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig = UpdateConfig(),
              *, ledger=None, old_logp: torch.Tensor | None = None, sampler_logp: torch.Tensor | None = None,
              init_model=None) -> dict:
    """One optimizer update on a rollout batch.

    The forward + backward run under ``config.attention`` (default ``sdpa``; the model's own
    attention is restored afterwards). ``old_logp``, ``sampler_logp`` and ``init_model`` are
    as in :func:`loss_and_backward`. The model is in train mode for the forward (the
    project's models have no dropout, so train and eval forwards agree) and left in eval mode.

    Returns
    -------
    dict
        ``loss``, ``grad_norm`` (before clipping), ``seconds`` (wall-seconds of the update,
        statistics excluded), ``trained_tokens``; with ``sampler_logp`` also
        ``sampler_mismatch`` and (under ``tis``) ``is_weight``; with ``init_model`` also
        ``kl_init`` and ``entropy`` (nats per completion token, under the policy BEFORE this
        update, from the loss's own forward), ``kl_clamped_tokens`` and ``stats_seconds``.
        With a ``ledger``: ``seconds`` go to ``device_seconds["training"]``, ``stats_seconds`` to
        ``device_seconds["metrics"]`` (outside the training budget, as before).

    Raises
    ------
    ValueError
        ``config.importance_sampling == "tis"`` without ``sampler_logp``; a batch wider than
        ``config.max_completion_length`` under ``dr_grpo``.
    NonFiniteLossError
        When the loss or the gradient norm is not finite; gradients are cleared and the
        parameters are not changed, so the caller can stop with its data intact.
    """
    start = time.perf_counter()
    model.train()
    optimizer.zero_grad(set_to_none=True)
    try:
        extra: dict = {}
        loss = loss_and_backward(model, batch, advantages, config, old_logp=old_logp, sampler_logp=sampler_logp,
                                 stats=extra, init_model=init_model)
        params = [p for p in model.parameters() if p.grad is not None]
        if config.max_grad_norm > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
        else:
            grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(f"non-finite update: loss={loss}, grad_norm={grad_norm}; parameters unchanged")
        optimizer.step()
    finally:
        model.eval()
    stats_seconds = extra.get("stats_seconds", 0.0)
    seconds = time.perf_counter() - start - stats_seconds
    trained = batch.generated_tokens
    if ledger is not None:
        ledger.trained_tokens += trained
        ledger.add_seconds("training", seconds)
        if init_model is not None:
            ledger.add_seconds("metrics", stats_seconds)
    return {"loss": loss, "grad_norm": grad_norm, "seconds": seconds, "trained_tokens": trained, **extra}
