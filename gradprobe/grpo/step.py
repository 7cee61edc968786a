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
from .losses import policy_loss, token_weights


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
    """

    loss_type: str = "grpo"
    micro_batch_size: int = 8
    max_grad_norm: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2


def loss_and_backward(model, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig, *,
                      old_logp: torch.Tensor | None = None) -> float:
    """Accumulate the gradient of the batch loss into ``param.grad`` (no optimizer step).

    Parameters
    ----------
    advantages : Tensor, shape (N, T)
        Per-token advantages A_ijt (zero off the mask).
    old_logp : Tensor, shape (N, T), optional
        Sampler log-probabilities for the importance ratio (default: on-policy, rho = 1).

    Returns
    -------
    float
        The batch loss (sum over micro-batches).
    """
    weights = token_weights(batch.completion_mask, config.loss_type)
    total = 0.0
    n = batch.num_rows
    for start in range(0, n, config.micro_batch_size):
        rows = slice(start, min(n, start + config.micro_batch_size))
        logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                              temperature=batch.temperature)
        loss = policy_loss(logp, advantages[rows], weights[rows],
                           old_logp=None if old_logp is None else old_logp[rows],
                           clip_low=config.clip_low, clip_high=config.clip_high)
        loss.backward()
        total += float(loss.detach())
    return total


def grpo_step(model, optimizer, batch: RolloutBatch, advantages: torch.Tensor, config: UpdateConfig = UpdateConfig(),
              *, ledger=None, old_logp: torch.Tensor | None = None) -> dict:
    """One optimizer update on a rollout batch.

    Returns
    -------
    dict
        ``loss``, ``grad_norm`` (before clipping), ``seconds``, ``trained_tokens``.

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
        loss = loss_and_backward(model, batch, advantages, config, old_logp=old_logp)
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
    return {"loss": loss, "grad_norm": grad_norm, "seconds": seconds, "trained_tokens": trained}
