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
(:func:`loss_and_backward` with ``stats`` and ``init_model``): no second forward of the policy
(the arithmetic: :mod:`gradprobe.grpo.policy_stats`).

Variants are read from registries, never from their names: the loss type's normalisation from
:data:`gradprobe.grpo.losses.LOSSES` (``"constant"``, dr_grpo's N * L_max, is what makes
``max_completion_length`` matter), the importance-sampling correction from
:data:`gradprobe.grpo.importance.IMPORTANCE_SAMPLINGS`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass

import torch

from ..logprobs import token_logprobs
from ..models import use_attention
from ..types import RolloutBatch
from .importance import ImportanceSampling, get_importance_sampling
from .losses import KL_LOG_RATIO_CLAMP, LOSS_TYPES, LOSSES, logprob_mismatch, policy_loss, token_weights
# the statistics' arithmetic lives in policy_stats; policy_stat_sums and kl_clamped_tokens stay importable here
from .policy_stats import EntropyCapture, kl_clamped_tokens, policy_stat_sums

__all__ = ["NonFiniteLossError", "UpdateConfig", "loss_and_backward", "old_policy_logprobs", "grpo_step",
           "policy_stat_sums", "kl_clamped_tokens"]

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
        if self.constant_normaliser and self.max_completion_length is None:
            log.warning("UpdateConfig(loss_type=%r) without max_completion_length: normalising by the "
                        "batch's longest completion T, which varies per batch; set max_completion_length to the "
                        "sampler's max_new_tokens for Dr. GRPO's constant (as TRL does)", self.loss_type)
        if self.attention is not None and (not isinstance(self.attention, str) or not self.attention):
            raise ValueError(f"attention must be a transformers attn_implementation name (e.g. 'sdpa', "
                             f"'gradprobe_eager') or None (keep the model's), got {self.attention!r}")
        get_importance_sampling(self.importance_sampling)
        if not self.is_cap > 0:
            raise ValueError(f"is_cap (the TIS cap C) must be > 0, got {self.is_cap}; TRL and verl use 2.0")

    @property
    def constant_normaliser(self) -> bool:
        """Whether the loss type divides by the constant N * L_max (normalisation ``"constant"``: dr_grpo),
        so that ``max_completion_length`` matters (:data:`gradprobe.grpo.losses.LOSSES`)."""
        return LOSSES[self.loss_type].normalisation == "constant"


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
    correction = _check_update_inputs(batch, advantages, config, old_logp=old_logp, sampler_logp=sampler_logp,
                                      stats=stats, init_model=init_model)
    weights = token_weights(batch.completion_mask, config.loss_type,
                            max_completion_length=config.max_completion_length)
    mask = batch.completion_mask.bool()
    total = 0.0
    sampler = None if sampler_logp is None else _SamplerStats(sampler_logp, mask, correction, config.is_cap)
    with contextlib.ExitStack() as stack:
        policy = _enter_update(stack, model, init_model, config, batch.temperature)
        for start in range(0, batch.num_rows, config.micro_batch_size):
            rows = slice(start, min(batch.num_rows, start + config.micro_batch_size))
            logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                                  temperature=batch.temperature)
            if policy is not None:
                policy.add(batch, rows, logp, mask[rows])
            old = None if old_logp is None else old_logp[rows]
            is_w = None if sampler is None else sampler.weights(rows, logp, old)
            loss = policy_loss(logp, advantages[rows], weights[rows], old_logp=old,
                               clip_low=config.clip_low, clip_high=config.clip_high, is_weights=is_w,
                               loss_type=config.loss_type, completion_mask=mask[rows])
            loss.backward()
            total += float(loss.detach())
    if policy is not None:
        policy.write(stats, mask)
    if stats is not None and sampler is not None:
        sampler.write(stats)
    return total


def _check_update_inputs(batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig, *,
                         old_logp, sampler_logp, stats, init_model) -> ImportanceSampling:
    """Validate :func:`loss_and_backward`'s inputs (its ``Raises``) and return the chosen IS correction."""
    correction = get_importance_sampling(config.importance_sampling)
    if correction.needs_sampler_logp and sampler_logp is None:
        raise ValueError(f"importance_sampling={correction.name!r} needs the sampler's per-token log-probabilities "
                         "(sampler_logp, shape (N, T)), e.g. from gradprobe.rollout.vllm_sampler.sampler_logprobs; "
                         "or set importance_sampling='none' for a sampler that is the training model itself "
                         "(HFSampler)")
    if init_model is not None and stats is None:
        raise ValueError("init_model is given for the KL/entropy statistics, but stats is None: pass stats={} to "
                         "receive them")
    t = batch.completion_mask.shape[1]
    for name, x in (("advantages", advantages), ("old_logp", old_logp), ("sampler_logp", sampler_logp)):
        if x is not None and tuple(x.shape) != tuple(batch.completion_mask.shape):
            raise ValueError(f"{name} has shape {tuple(x.shape)}, but the batch's completion mask has shape "
                             f"{tuple(batch.completion_mask.shape)} (N rows, T completion tokens); give one value "
                             "per completion token")
    if config.constant_normaliser and config.max_completion_length is not None \
            and t > config.max_completion_length:
        raise ValueError(f"the batch's completion width T = {t} tokens exceeds UpdateConfig.max_completion_length = "
                         f"{config.max_completion_length} ({config.loss_type}'s L_max); set it to the sampler's "
                         "max_new_tokens")
    return correction


def _enter_update(stack: contextlib.ExitStack, model, init_model, config: UpdateConfig,
                  temperature: float) -> "_PolicyStats | None":
    """Switch the attention of the update (and of pi_init) on ``stack``; with ``init_model``, start the
    entropy capture on the loss's forward and return the statistics accumulator."""
    if config.attention is not None:
        stack.enter_context(use_attention(model, config.attention))
        if init_model is not None:
            stack.enter_context(use_attention(init_model, config.attention))
    if init_model is None:
        return None
    return _PolicyStats(init_model, stack.enter_context(EntropyCapture(model, temperature)))


class _PolicyStats:
    """Entropy and k3 KL to pi_init, summed over the micro-batches of one update (:func:`policy_stat_sums`).

    ``add`` takes one micro-batch: pi_init's log-probabilities from one no-grad forward, pi_theta's
    from the loss's own forward, its entropies from the capture hook; ``write`` puts the per-token
    means (nats per completion token), the clamped-token count and the seconds into ``stats``.
    """

    def __init__(self, init_model, capture: EntropyCapture):
        self.init_model, self.capture = init_model, capture
        self.kl_sum = self.ent_sum = self.seconds = 0.0
        self.kl_clamped = 0

    def add(self, batch: RolloutBatch, rows: slice, logp: torch.Tensor, mask: torch.Tensor) -> None:
        if logp.is_cuda:  # charge the loss forward's queued kernels to training, not to the statistics
            torch.cuda.synchronize(logp.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            init_logp = token_logprobs(self.init_model, batch.input_ids[rows], batch.attention_mask[rows],
                                       batch.prompt_length, temperature=batch.temperature)
        kl, ent = policy_stat_sums(logp.detach(), init_logp, self.capture.rows.pop(), mask)
        self.kl_sum, self.ent_sum = self.kl_sum + kl, self.ent_sum + ent
        self.kl_clamped += kl_clamped_tokens(logp, init_logp, mask)
        self.seconds += time.perf_counter() - t0

    def write(self, stats: dict, mask: torch.Tensor) -> None:
        tokens = max(int(mask.sum()), 1)
        stats.update(kl_init=self.kl_sum / tokens, entropy=self.ent_sum / tokens, kl_clamped_tokens=self.kl_clamped,
                     stats_seconds=self.seconds + self.capture.seconds)
        if self.kl_clamped:
            log.warning("kl_init: %d of %d completion tokens have |log pi_init - log pi_theta| > %g nats and were "
                        "clamped (verl's low_var_kl clamp); kl_init is a lower bound for this update",
                        self.kl_clamped, tokens, KL_LOG_RATIO_CLAMP)


class _SamplerStats:
    """The sampler's log-probabilities against the training forward pass over one update.

    ``weights`` gives a micro-batch's importance weights (the registered correction's; None for
    ``none``) and keeps the training log-probabilities they were computed from (pi_old: ``old_logp``
    when given, else the loss's own forward, detached); ``write`` puts ``sampler_mismatch``
    (:func:`~gradprobe.grpo.losses.logprob_mismatch`) and, when there were weights, ``is_weight``
    (``mean``, ``min``, ``max``, ``capped_fraction`` over masked tokens, ``cap``) into ``stats``.
    """

    def __init__(self, sampler_logp: torch.Tensor, mask: torch.Tensor, correction: ImportanceSampling, cap: float):
        self.sampler_logp, self.mask, self.correction, self.cap = sampler_logp, mask, correction, cap
        self.train_rows: list[torch.Tensor] = []
        self.is_rows: list[torch.Tensor] = []

    def weights(self, rows: slice, logp: torch.Tensor, old: torch.Tensor | None) -> torch.Tensor | None:
        base = (logp.detach() if old is None else old.to(logp.dtype))
        self.train_rows.append(base)
        w = self.correction.weights(base, self.sampler_logp[rows].to(base.device), self.mask[rows], self.cap)
        if w is not None:
            self.is_rows.append(w)
        return w

    def write(self, stats: dict) -> None:
        train = torch.cat(self.train_rows)
        stats["sampler_mismatch"] = logprob_mismatch(train, self.sampler_logp.to(train.device), self.mask)
        if self.is_rows:
            w = torch.cat(self.is_rows).to(torch.float64)[self.mask]
            stats["is_weight"] = {"mean": float(w.mean()) if w.numel() else 1.0,
                                  "min": float(w.min()) if w.numel() else 1.0,
                                  "max": float(w.max()) if w.numel() else 1.0,
                                  "capped_fraction": float((w >= self.cap).double().mean()) if w.numel() else 0.0,
                                  "cap": self.cap}


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
