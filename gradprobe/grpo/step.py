"""One GRPO update: micro-batched forward + backward of the clipped surrogate, then AdamW.

The probe's cost is stated as a ratio to this step's forward + backward on the same batch
(``benchmarks/probe_cost.py``), and the matched-compute runs are made of it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ..logprobs import token_logprobs
from ..types import RolloutBatch
from .losses import IMPORTANCE_SAMPLING, logprob_mismatch, policy_loss, token_weights, truncated_is_weights


class NonFiniteLossError(FloatingPointError):
    """The loss or gradient of an update is NaN/inf; the parameters were left unchanged."""


@dataclass(frozen=True)
class UpdateConfig:
    """Settings of one update.

    Attributes
    ----------
    loss_type : {"grpo", "dapo", "dr_grpo"}
        Normalisation, see :mod:`gradprobe.grpo.losses`.
    micro_batch_size : int
        Rows per forward/backward; results do not depend on it (weights are batch-global).
    max_grad_norm : float
        Global gradient-norm clip (0 = off).
    clip_low, clip_high : float
        PPO ratio clip.
    importance_sampling : {"none", "tis"}
        ``tis``: multiply each token's loss by min(pi_train / pi_sampler, ``is_cap``), the
        truncated importance-sampling correction for a sampler (vLLM) whose distribution
        differs from the training forward pass (:func:`~gradprobe.grpo.losses.truncated_is_weights`);
        needs the sampler's per-token log-probabilities (``sampler_logp``).
    is_cap : float
        C of ``tis`` (TRL ``vllm_importance_sampling_cap``, verl ``tis_imp_ratio_cap``; default 2).
    """

    loss_type: str = "grpo"
    micro_batch_size: int = 8
    max_grad_norm: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    importance_sampling: str = "none"
    is_cap: float = 2.0

    def __post_init__(self):
        if self.importance_sampling not in IMPORTANCE_SAMPLING:
            raise ValueError(f"importance_sampling {self.importance_sampling!r} is not one of {IMPORTANCE_SAMPLING}")
        if not self.is_cap > 0:
            raise ValueError(f"is_cap (the TIS cap C) must be > 0, got {self.is_cap}; TRL and verl use 2.0")


def loss_and_backward(model, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig, *,
                      old_logp: torch.Tensor | None = None, sampler_logp: torch.Tensor | None = None,
                      stats: dict | None = None) -> float:
    """Accumulate the gradient of the batch loss into ``param.grad`` (no optimizer step).

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
        masked tokens) when ``sampler_logp`` is given.

    Returns
    -------
    float
        The batch loss (sum over micro-batches).
    """
    if config.importance_sampling == "tis" and sampler_logp is None:
        raise ValueError("importance_sampling='tis' needs the sampler's per-token log-probabilities (sampler_logp, "
                         "shape (N, T)), e.g. from gradprobe.rollout.vllm_sampler.sampler_logprobs; or set "
                         "importance_sampling='none' for a sampler that is the training model itself (HFSampler)")
    weights = token_weights(batch.completion_mask, config.loss_type)
    mask = batch.completion_mask.bool()
    total = 0.0
    n = batch.num_rows
    train_rows, is_rows = [], []
    for start in range(0, n, config.micro_batch_size):
        rows = slice(start, min(n, start + config.micro_batch_size))
        logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                              temperature=batch.temperature)
        old = None if old_logp is None else old_logp[rows]
        is_w = None
        if sampler_logp is not None:
            base = (logp.detach() if old is None else old.to(logp.dtype))
            train_rows.append(base)
            if config.importance_sampling == "tis":
                is_w = truncated_is_weights(base, sampler_logp[rows].to(base.device), mask[rows], cap=config.is_cap)
                is_rows.append(is_w)
        loss = policy_loss(logp, advantages[rows], weights[rows], old_logp=old,
                           clip_low=config.clip_low, clip_high=config.clip_high, is_weights=is_w)
        loss.backward()
        total += float(loss.detach())
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


def grpo_step(model, optimizer, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig = UpdateConfig(),
              *, ledger=None, old_logp: torch.Tensor | None = None, sampler_logp: torch.Tensor | None = None) -> dict:
    """One optimizer update on a rollout batch.

    ``old_logp`` and ``sampler_logp`` are as in :func:`loss_and_backward`.

    Returns
    -------
    dict
        ``loss``, ``grad_norm`` (before clipping), ``seconds``, ``trained_tokens``; with
        ``sampler_logp`` also ``sampler_mismatch`` and (under ``tis``) ``is_weight``.

    Raises
    ------
    ValueError
        ``config.importance_sampling == "tis"`` without ``sampler_logp``.

    Raises
    ------
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
                                 stats=extra)
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
    seconds = time.perf_counter() - start
    trained = batch.generated_tokens
    if ledger is not None:
        ledger.trained_tokens += trained
        ledger.add_seconds("training", seconds)
    return {"loss": loss, "grad_norm": grad_norm, "seconds": seconds, "trained_tokens": trained, **extra}
