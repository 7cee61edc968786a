"""The outcome reward (GRPO) and sequence-level normalisation shared by all sequence rewards.

A_ijt = (r_ij - mean_j r_i.) / (std_j r_i. + eps) for every token t of completion j
(Shao et al. 2024, DeepSeekMath, sec. 4.1.2 "outcome supervision"), computed by
:func:`gradprobe.grpo.advantages.group_normalize` (ddof 1, zero-variance and single-member
groups -> exactly 0, NaN rewards masked and counted). The scale is an explicit parameter
(``scale=``, default :data:`~gradprobe.grpo.advantages.DEFAULT_SCALE`); registered scales:

``outcome``        ``"group"``: divide by the group std (GRPO);
``outcome_batch``  ``"batch"``: divide by the batch std (Hu et al. 2025, REINFORCE++);
``outcome_dr``     ``"none"``: centre only (Liu et al. 2025, Dr. GRPO, sec. 3.1).
"""

from __future__ import annotations

import math

import torch

from ..grpo.advantages import DEFAULT_SCALE, group_normalize
from ..types import RolloutBatch
from .base import RewardContext, RewardOutput, broadcast_to_tokens, register_reward


def normalize_sequence_rewards(rewards: torch.Tensor, batch: RolloutBatch, *,
                               scale: str = DEFAULT_SCALE) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Group-normalise sequence rewards and broadcast them over each completion's tokens.

    Parameters
    ----------
    rewards : Tensor, shape (N,)
        r_ij in row order ``n = i * G + j``; NaN (or +-inf) = missing.
    batch : RolloutBatch
        Supplies G and ``completion_mask`` (N, T).
    scale : {"group", "batch", "none"}

    Returns
    -------
    advantages : Tensor (float64), shape (N, T)
        Zero off the mask and on missing rows.
    valid : BoolTensor, shape (N,)
        Finite rewards.
    stats : dict
        ``missing``, ``zero_variance_groups``, ``groups``, ``mean_reward`` (over valid rows;
        NaN when none), ``valid``.

    Raises
    ------
    ValueError
        ``rewards`` is not of length N, or an unknown ``scale``.
    """
    r = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
    if r.numel() != batch.num_rows:
        raise ValueError(f"expected {batch.num_rows} rewards (N = B * G), got {r.numel()}")
    valid = torch.isfinite(r)
    r = torch.where(valid, r, torch.full_like(r, math.nan))
    adv, stats = group_normalize(r.view(batch.num_prompts, batch.group_size), scale=scale)
    stats = dict(stats)
    stats["valid"] = int(valid.sum())
    stats["mean_reward"] = float(r[valid].mean()) if bool(valid.any()) else math.nan
    return broadcast_to_tokens(adv.reshape(-1), batch.completion_mask), valid, stats


def outcome_reward(batch: RolloutBatch, ctx: RewardContext | None = None, *, scale: str = DEFAULT_SCALE,
                   name: str = "outcome") -> RewardOutput:
    """GRPO outcome advantages from ``batch.scores``.

    Parameters
    ----------
    batch : RolloutBatch
        ``scores`` (N,) float64 r_ij in {0, 1}, NaN = missing.
    ctx : RewardContext, optional
        Unused (no tokens generated).
    scale : {"group", "batch", "none"}
        A key of :data:`gradprobe.grpo.advantages.SCALES` (default ``"group"``).

    Returns
    -------
    RewardOutput
        ``advantages`` (N, T), equal on every token of a completion; ``generated_tokens`` {}.

    Raises
    ------
    ValueError
        Unknown ``scale`` (the message lists the valid ones).
    """
    adv, valid, stats = normalize_sequence_rewards(batch.scores, batch, scale=scale)
    return RewardOutput(name=name, advantages=adv, valid=valid, generated_tokens={}, stats=stats)


@register_reward("outcome", rollout_only=True)
def outcome(batch: RolloutBatch, ctx: RewardContext | None = None) -> RewardOutput:
    """GRPO outcome reward, centred per group and divided by the group std (:data:`~gradprobe.grpo.advantages.DEFAULT_SCALE`)."""
    return outcome_reward(batch, ctx, name="outcome")


@register_reward("outcome_batch", rollout_only=True)
def outcome_batch(batch: RolloutBatch, ctx: RewardContext | None = None) -> RewardOutput:
    """Outcome reward, centred per group and divided by the batch std (REINFORCE++)."""
    return outcome_reward(batch, ctx, scale="batch", name="outcome_batch")


@register_reward("outcome_dr", rollout_only=True)
def outcome_dr(batch: RolloutBatch, ctx: RewardContext | None = None) -> RewardOutput:
    """Outcome reward, centred per group only (Dr. GRPO)."""
    return outcome_reward(batch, ctx, scale="none", name="outcome_dr")
