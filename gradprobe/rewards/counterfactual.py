"""Outcome reward with a leave-one-out ("counterfactual") baseline: ``outcome_loo``.

The issue's term is the *counterfactual baseline*: "reward minus the group's per-instance
accuracy", where the accuracy is the group's without the completion itself. That is the
leave-one-out baseline of RLOO (Ahmadian et al. 2024, "Back to Basics: Revisiting
REINFORCE-Style Optimization for Learning from Human Feedback in LLMs", sec. 3.3; Kool et al.
2019): with n_i valid members in group i,

    b_ij = (1 / (n_i - 1)) sum_{k != j} r_ik,      c_ij = r_ij - b_ij = n_i / (n_i - 1) * (r_ij - mean_k r_ik).

Registered as ``outcome_loo`` (the outcome reward, only its baseline changed); "counterfactual"
names the same thing.

Scaling: c_ij is divided by the divisor the project uses for grpo advantages,
:func:`gradprobe.grpo.advantages.group_normalize` with the same ``scale`` parameter (default
``"group"``, :data:`~gradprobe.grpo.advantages.DEFAULT_SCALE`: the group's sample std, ddof 1,
over all its valid members, plus eps 1e-4). Why std normalisation applies: the arm is meant to differ from the
``grpo`` (``outcome``) arm in its baseline only, so every other choice (divisor, eps, the
zero-variance rule, missing rewards) is shared and the learning rate tuned for grpo means the
same step size. Consequence, worth knowing when reading a probe: with the group scale,
A(outcome_loo) = n_i / (n_i - 1) * A(outcome) row by row, i.e. a per-group constant (G / (G - 1)
for full groups; 4/3 at G = 4), so its probe efficiency over ``outcome`` is that factor; the
baseline's unbiasedness shows as this rescaling (the mean baseline shrinks the expected
gradient by (n - 1) / n). Plain RLOO (no std) is :func:`outcome_loo_reward` with ``scale="none"``.

Conventions (shared with ``outcome``): a missing reward (NaN) is left out of its group's
baseline and gets advantage 0 (counted, ``missing``); a group with fewer than two valid
members has no counterfactual and gets 0; a zero-variance group (all rewards equal, spread
tested in float64) gets exactly 0 (counted, ``zero_variance_groups``).
"""

from __future__ import annotations

import math

import torch

from ..grpo.advantages import DEFAULT_SCALE, group_normalize
from ..types import RolloutBatch
from .base import RewardContext, RewardOutput, broadcast_to_tokens, register_reward

__all__ = ["loo_advantages", "outcome_loo_reward", "outcome_loo"]


def loo_advantages(rewards: torch.Tensor, *, scale: str = DEFAULT_SCALE) -> tuple[torch.Tensor, dict]:
    """Leave-one-out (counterfactual-baseline) advantages of B groups.

    A_ij = (r_ij - mean_{k != j, valid} r_ik) / d_i, d_i the divisor of
    :func:`~gradprobe.grpo.advantages.group_normalize` for ``scale`` (group std + eps, batch
    std + eps, or 1); computed as n_i / (n_i - 1) times its centred-and-scaled rewards.

    Parameters
    ----------
    rewards : Tensor, shape (B, G)
        r_ij; NaN marks a missing reward.
    scale : {"group", "batch", "none"}

    Returns
    -------
    advantages : Tensor (float64), shape (B, G)
        0 for missing rewards, groups with fewer than two valid members and zero-variance groups.
    stats : dict
        ``missing``, ``zero_variance_groups``, ``groups`` (as ``group_normalize``).

    Raises
    ------
    ValueError
        Unknown ``scale`` or ``rewards`` not 2-D.
    """
    adv, stats = group_normalize(rewards, scale=scale)
    n = torch.isfinite(rewards.to(torch.float64)).sum(-1).to(torch.float64)
    factor = torch.where(n >= 2, n / (n - 1).clamp(min=1.0), torch.zeros_like(n))
    return adv * factor[:, None], stats


def outcome_loo_reward(batch: RolloutBatch, ctx: RewardContext | None = None, *, scale: str = DEFAULT_SCALE,
                       name: str = "outcome_loo") -> RewardOutput:
    """Outcome advantages with the leave-one-out baseline, from ``batch.scores``.

    Parameters
    ----------
    batch : RolloutBatch
        ``scores`` (N,) float64 r_ij in {0, 1}, NaN = missing; rows ``n = i * G + j``.
    ctx : RewardContext, optional
        Unused (no tokens generated).
    scale : {"group", "batch", "none"}
        A key of :data:`gradprobe.grpo.advantages.SCALES` (default ``"group"``, as ``outcome``).
    name : str

    Returns
    -------
    RewardOutput
        ``advantages`` (N, T) float64, equal on every token of a completion and 0 off the mask;
        ``valid`` finite scores; ``generated_tokens`` {}; ``stats``: ``missing``,
        ``zero_variance_groups``, ``groups``, ``valid``, ``mean_reward`` (accuracy over valid rows).

    Raises
    ------
    ValueError
        Unknown ``scale``.
    """
    r = torch.as_tensor(batch.scores, dtype=torch.float64).reshape(-1).cpu()
    valid = torch.isfinite(r)
    r = torch.where(valid, r, torch.full_like(r, math.nan))
    adv, stats = loo_advantages(r.view(batch.num_prompts, batch.group_size), scale=scale)
    stats = {**stats, "valid": int(valid.sum()),
             "mean_reward": float(r[valid].mean()) if bool(valid.any()) else math.nan}
    return RewardOutput(name=name, advantages=broadcast_to_tokens(adv.reshape(-1), batch.completion_mask.cpu()),
                        valid=valid, generated_tokens={}, stats=stats)


@register_reward("outcome_loo", rollout_only=True)
def outcome_loo(batch: RolloutBatch, ctx: RewardContext | None = None) -> RewardOutput:
    """Outcome reward minus the group's accuracy without the completion (counterfactual / RLOO baseline)."""
    return outcome_loo_reward(batch, ctx, name="outcome_loo")
