"""Group-relative advantages (GRPO: Shao et al. 2024, DeepSeekMath, eq. 3 / sec. 4.1.2).

A_ij = (r_ij - mean_j r_i.) / (std_j r_i. + eps) for ``scale="group"``; ``"batch"`` divides by
the std over the whole batch (Hu et al., REINFORCE++); ``"none"`` only centres
(Liu et al. 2025, Dr. GRPO, sec. 3.1).

Conventions (DESIGN.md, "Pitfalls"):

* missing rewards (NaN: a reward that returned None/NaN or raised) are excluded from their
  group's mean and std and get advantage 0; they are counted in the stats;
* the std is the sample std, ``ddof=1`` (as ``torch.std`` in TRL and verl); a group with
  fewer than two valid members has advantage 0;
* spread is computed in float64, and a group whose max - min is below ``atol + rtol *
  max|r|`` counts as zero-variance: advantages exactly 0, never NaN nor a float32 residue
  blown up by a tiny std;
* a group whose statistics are not finite in float64 (rewards of magnitude ~1e150 and up: the
  mean, the centred rewards or their squares overflow, so the std is inf and every advantage
  would silently be 0 or NaN) gets advantage 0 and is counted as ``nonfinite_groups``, never as
  zero-variance: its rewards differ, and the caller warns naming the reward and the fix (rescale it).

The scale is a parameter of every function that normalises (no module-wide setting): the
registered rewards use :data:`DEFAULT_SCALE` or name theirs (``outcome_batch``, ``outcome_dr``);
:data:`SCALES` maps each scale's name to its divisor.
"""

from __future__ import annotations

from typing import Callable

import torch

#: the scale of ``outcome`` and of every sequence reward that does not name another (GRPO's)
DEFAULT_SCALE = "group"

#: (centred (B, G), rewards (B, G), valid (B, G), n (B,), eps) -> advantages (B, G), all float64
ScaleFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def _group_std(centred, rewards, valid, n, eps):
    """Divide by each group's sample std (ddof 1) + eps (Shao et al. 2024, eq. 3)."""
    var = (centred ** 2).sum(-1) / (n - 1).clamp(min=1)
    return centred / (var.sqrt() + eps)[:, None]


def _batch_std(centred, rewards, valid, n, eps):
    """Divide by the sample std of all valid rewards of the batch + eps (Hu et al. 2025, REINFORCE++)."""
    vals = rewards[valid]
    std = vals.std() if vals.numel() > 1 else torch.tensor(0.0, dtype=torch.float64)
    return centred / (std + eps)


def _centre_only(centred, rewards, valid, n, eps):
    """Centre only (Liu et al. 2025, Dr. GRPO, sec. 3.1)."""
    return centred


#: the registry of advantage scales, name -> divisor rule (:data:`ScaleFn`)
SCALES: dict[str, ScaleFn] = {"group": _group_std, "batch": _batch_std, "none": _centre_only}


def check_scale(scale: str, *, field: str = "advantage scale") -> ScaleFn:
    """The rule of advantage scale ``scale``.

    Raises
    ------
    ValueError
        ``scale`` is not a key of :data:`SCALES`; the message starts with ``field`` (the name the
        caller knows the setting by) and lists the valid scales.
    """
    try:
        return SCALES[scale]
    except (KeyError, TypeError):
        raise ValueError(f"{field} {scale!r} is unknown; valid scales: {', '.join(SCALES)} "
                         f"(group: divide by the group std, batch: by the batch std, none: centre only)") from None


def group_normalize(rewards: torch.Tensor, *, scale: str = DEFAULT_SCALE, eps: float = 1e-4,
                    atol: float = 1e-6, rtol: float = 1e-6) -> tuple[torch.Tensor, dict]:
    """Group-normalised advantages.

    Parameters
    ----------
    rewards : Tensor, shape (B, G)
        Sequence rewards; NaN marks a missing reward.
    scale : {"group", "batch", "none"}
        Divisor of the centred rewards, a key of :data:`SCALES` (see module docstring).
    eps : float
        Added to the std (TRL uses 1e-4).

    Returns
    -------
    advantages : Tensor (float64), shape (B, G)
        0 for missing rewards and for zero-variance or single-member groups; each group's
        valid advantages sum to 0.
    stats : dict
        ``missing`` (count of NaN rewards), ``zero_variance_groups``, ``groups``,
        ``nonfinite_groups`` (groups with differing rewards whose mean, centred rewards, squared
        deviations or advantages overflow float64: advantage 0, not counted as zero-variance) and
        ``overflow_max_abs_reward`` (largest finite |reward| of those groups; 0.0 when there are none).

    Raises
    ------
    ValueError
        Unknown ``scale`` or ``rewards`` not 2-D.
    """
    divide = check_scale(scale)
    if rewards.dim() != 2:
        raise ValueError(f"rewards must have shape (B, G), got {tuple(rewards.shape)}")
    r = rewards.to(torch.float64)
    valid = torch.isfinite(r)
    n = valid.sum(-1)
    r0 = torch.where(valid, r, torch.zeros_like(r))
    mean = r0.sum(-1) / n.clamp(min=1)
    centred = torch.where(valid, r - mean[:, None], torch.zeros_like(r))
    big = torch.finfo(torch.float64).max
    rmax = torch.where(valid, r, torch.full_like(r, -big)).amax(-1)
    rmin = torch.where(valid, r, torch.full_like(r, big)).amin(-1)
    magnitude = torch.where(valid, r.abs(), torch.zeros_like(r)).amax(-1)
    flat = (n < 2) | ((rmax - rmin) <= atol + rtol * magnitude)
    centred = torch.where(flat[:, None], torch.zeros_like(centred), centred)
    adv = divide(centred, r, valid, n, eps)
    overflow = _overflowing_groups(mean, centred, adv, valid, flat)
    adv = torch.where(overflow[:, None], torch.zeros_like(adv), adv)
    stats = {"missing": int((~valid).sum()), "zero_variance_groups": int((flat & ~overflow).sum()),
             "groups": int(r.shape[0]), "nonfinite_groups": int(overflow.sum()),
             "overflow_max_abs_reward": float(magnitude[overflow].max()) if bool(overflow.any()) else 0.0}
    return adv, stats


def _overflowing_groups(mean, centred, adv, valid, flat) -> torch.Tensor:
    """Groups (B,) whose statistics overflow float64: rewards that differ (not ``flat``; ``rmax - rmin`` may
    itself be inf) but whose mean, centred rewards or squared deviations are not finite, or whose advantages
    are not finite or all exactly 0 (a std of inf divides them to 0). A flat group is never one: its
    rewards are equal, whatever their size."""
    sq = torch.where(valid, centred, torch.zeros_like(centred)) ** 2
    bad_stats = ~torch.isfinite(mean) | ~torch.isfinite(centred).all(-1) | ~torch.isfinite(sq.sum(-1))
    vanished = ((adv == 0) | ~valid).all(-1) | ~torch.isfinite(adv).all(-1)
    return ~flat & (bad_stats | vanished)
