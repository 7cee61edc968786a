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
  blown up by a tiny std.
"""

from __future__ import annotations

import torch

SCALES = ("group", "batch", "none")


def group_normalize(rewards: torch.Tensor, *, scale: str = "group", eps: float = 1e-4,
                    atol: float = 1e-6, rtol: float = 1e-6) -> tuple[torch.Tensor, dict]:
    """Group-normalised advantages.

    Parameters
    ----------
    rewards : Tensor, shape (B, G)
        Sequence rewards; NaN marks a missing reward.
    scale : {"group", "batch", "none"}
        Divisor of the centred rewards (see module docstring).
    eps : float
        Added to the std (TRL uses 1e-4).

    Returns
    -------
    advantages : Tensor (float64), shape (B, G)
        0 for missing rewards and for zero-variance or single-member groups; each group's
        valid advantages sum to 0.
    stats : dict
        ``missing`` (count of NaN rewards), ``zero_variance_groups``, ``groups``.

    Raises
    ------
    ValueError
        Unknown ``scale`` or ``rewards`` not 2-D.
    """
    if scale not in SCALES:
        raise ValueError(f"advantage scale {scale!r} is not one of {SCALES}")
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
    if scale == "group":
        var = (centred ** 2).sum(-1) / (n - 1).clamp(min=1)
        adv = centred / (var.sqrt() + eps)[:, None]
    elif scale == "batch":
        vals = r[valid]
        std = vals.std() if vals.numel() > 1 else torch.tensor(0.0, dtype=torch.float64)
        adv = centred / (std + eps)
    else:
        adv = centred
    stats = {"missing": int((~valid).sum()), "zero_variance_groups": int(flat.sum()), "groups": int(r.shape[0])}
    return adv, stats
