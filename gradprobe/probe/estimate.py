"""From one alignment tensor to every reward's predicted gain, with bootstrap uncertainty.

For reward R with per-token advantages A^R (N, T) and the loss's per-token weights w
(:func:`gradprobe.grpo.losses.token_weights` of the whole batch), the ascent direction is
g_R = sum_nt w_nt A^R_nt grad l_nt, so its inner product with the direction u the alignment was
computed along (v, or P v with a preconditioner) is

    <g_R, u> = sum_nt w_nt A^R_nt a_nt            (DESIGN.md, "The probe": (1/Z_R) sum A a).

The alignment a (N, T) does not depend on the reward: :func:`estimate_rewards` stacks the R
rewards' advantages (R, N, T) and reduces them against a in one pass, so its cost is a few
multiply-adds per token per reward, negligible next to the jvp that made a.

Bootstrap over prompts. The weights w couple rows through a batch-level normaliser Z (the number
of rows, of tokens, or N * L_max). :func:`group_sums` writes the sum as a ratio of per-group sums,

    sum_nt w A a = (sum_g num_g) / (sum_g den_g),    num_g = sum_{n in g, t} u_nt A_nt a_nt,

with u = w * Z the unnormalised weight and den_g group g's share of Z:

=========  ==================  ======================
loss_type  u_nt                den_g
=========  ==================  ======================
grpo       m_nt / T_n          G (rows of the group)
dapo       m_nt                tokens of the group
dr_grpo    m_nt                G * L_max
bnpo       m_nt                tokens of the group
cispo      m_nt                tokens of the group
gspo       m_nt / T_n          G (rows of the group)
=========  ==================  ======================

bnpo and cispo have dapo's weights and gspo grpo's (:data:`gradprobe.grpo.losses.LOSSES`). At
rho = 1, where the probe predicts the update, cispo's detached weight min(r, 1 + eps_high) is 1,
so its gradient is dapo's; gspo's sequence ratio s_n = exp(mean_t log r_nt) has ds_n/dl_nt =
1/T_n, so its gradient is grpo's with A_nt replaced by the sequence's mean advantage
Abar_n = (1/T_n) sum_t m_nt A_nt: :func:`group_sums` applies
:func:`gradprobe.grpo.losses.probe_advantages` to the advantages first (identity for the others;
derivation in :mod:`gradprobe.grpo.losses`). For a per-sequence advantage (``outcome``) gspo's
prediction is grpo's.

so resampling groups with replacement and recomputing the ratio re-normalises each replicate as
the loss would on that batch (a ratio estimator). The same resampled groups serve all rewards
(paired), from ``numpy.random.Generator(seed)``. Per-group sums of sub-batches concatenate:
splitting the probe batch by groups gives the same estimate.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..grpo.loss_types import GROUP_PARTS
from ..grpo.losses import probe_advantages
from .signal_proxy import signal_proxy_group_sums, token_probability_stats

__all__ = ["RewardEstimate", "group_sums", "estimate_rewards", "token_probability_stats",
           "signal_proxy_group_sums"]


def group_sums(alignment: Tensor, advantages: Tensor, completion_mask: Tensor, group_size: int, *,
               loss_type: str = "grpo", max_completion_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Per-group numerators and normaliser shares of sum_nt w_nt A_nt a_nt (see module docstring).

    Parameters
    ----------
    alignment : Tensor, shape (N, T)
        a_nt from :func:`gradprobe.probe.token_alignment`.
    advantages : Tensor, shape (N, T) or (R, N, T)
        A^R_nt of one or R rewards; values off the completion mask are ignored.
    completion_mask : BoolTensor, shape (N, T)
        The whole probe batch's mask (the loss weights are computed from it).
    group_size : int
        G; rows are prompt-major (row n = i * G + j).
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        ``gspo`` replaces each token's advantage by its sequence's mean (module docstring).
    max_completion_length : int, optional
        L_max of ``dr_grpo`` (default T); give it explicitly when combining sub-batches of different T.

    Returns
    -------
    numerators : Tensor (float64), shape (B,) or (R, B)
    denominators : Tensor (float64), shape (B,)
        ``numerators.sum(-1) / denominators.sum()`` equals
        ``(token_weights(mask, loss_type) * probe_advantages(advantages, mask, loss_type) * alignment).sum((-2, -1))``.

    Raises
    ------
    ValueError
        Unknown ``loss_type``, mismatched shapes, N not a multiple of G, or non-finite values on the mask.
    """
    if loss_type not in GROUP_PARTS:
        raise ValueError(f"loss_type {loss_type!r} is not one of {sorted(GROUP_PARTS)}")
    mask = completion_mask.bool().to(alignment.device)
    n, t = mask.shape
    if alignment.shape != (n, t):
        raise ValueError(f"alignment has shape {tuple(alignment.shape)}, the completion mask {(n, t)}")
    if advantages.shape[-2:] != (n, t) or advantages.dim() not in (2, 3):
        raise ValueError(f"advantages must have shape (N, T) or (R, N, T) with (N, T) = {(n, t)}, "
                         f"got {tuple(advantages.shape)}")
    if group_size < 1 or n % group_size:
        raise ValueError(f"N = {n} rows is not a multiple of the group size {group_size}")
    zero = torch.zeros((), dtype=torch.float64, device=alignment.device)
    a = torch.where(mask, alignment.to(torch.float64), zero)
    adv = torch.where(mask, advantages.to(device=alignment.device, dtype=torch.float64), zero)
    if not (torch.isfinite(a).all() and torch.isfinite(adv).all()):
        raise ValueError("alignment or advantages are not finite on the completion mask (a NaN reward must be "
                         "masked, with advantage 0, before the probe)")
    adv = probe_advantages(adv, mask, loss_type)  # gspo: each sequence's mean advantage on its tokens
    u, den = GROUP_PARTS[loss_type](mask.to(torch.float64), group_size, max_completion_length or t)
    ua = u * a  # (N, T): shared by every reward
    per_row = (adv * ua).sum(-1)  # (N,) or (R, N)
    num = per_row.unflatten(-1, (n // group_size, group_size)).sum(-1)  # (B,) or (R, B)
    return num, den


@dataclass
class RewardEstimate:
    """The probe's prediction for one reward.

    Attributes
    ----------
    name : str
    inner_product : float
        <g_R, u>, u the direction of the alignment (v or P v); accuracy (fraction) per unit step.
    interval : (float, float) or None
        Bootstrap 95% percentile interval of ``inner_product`` over prompts (None without bootstrap).
    snr : float or None
        |inner_product| / bootstrap standard deviation (ddof=1); 0 when both are 0, inf when only the
        standard deviation is 0 (None without bootstrap or with fewer than 2 groups).
    predicted_gain_per_update : float
        Accuracy points, 100 * lr * inner_product (first order).
    gain_interval_per_update : (float, float) or None
    tokens_per_update : int
        c_R, generated tokens one update costs (continuations included).
    predicted_gain_at_budget : float
        Accuracy points after ``budget_tokens``: (budget_tokens / c_R) * gain per update.
    gain_interval_at_budget : (float, float) or None
    seconds_per_update, predicted_gain_at_time_budget : float or None
        The same at a device-seconds budget, when given.
    cosine : float or None
        <g_R, u> / (||g_R|| ||u||), when the norms were given (one backward per reward; off by default).
    per_group : list[float], length B
        Each prompt's contribution num_g / sum(den); they sum to ``inner_product``.
    loss_type, num_groups, n_bootstrap, lr, budget_tokens, budget_seconds, seed
        How it was made.
    """

    name: str
    inner_product: float
    interval: tuple[float, float] | None
    snr: float | None
    predicted_gain_per_update: float
    gain_interval_per_update: tuple[float, float] | None
    tokens_per_update: int
    predicted_gain_at_budget: float
    gain_interval_at_budget: tuple[float, float] | None
    seconds_per_update: float | None = None
    predicted_gain_at_time_budget: float | None = None
    cosine: float | None = None
    per_group: list[float] = field(default_factory=list)
    loss_type: str = "grpo"
    num_groups: int = 0
    n_bootstrap: int = 0
    lr: float = 0.0
    budget_tokens: float = 0.0
    budget_seconds: float | None = None
    seed: int = 0

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (tuples become lists)."""
        d = asdict(self)
        for key in ("interval", "gain_interval_per_update", "gain_interval_at_budget"):
            if d[key] is not None:
                d[key] = list(d[key])
        return d


def _bootstrap(num: np.ndarray, den: np.ndarray, n_bootstrap: int, seed: int) -> np.ndarray:
    """Ratio-estimator replicates, shape (n_bootstrap, R): resample groups with replacement."""
    b = den.shape[0]
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, b, size=(n_bootstrap, b))
    counts = np.zeros((n_bootstrap, b))
    np.add.at(counts, (np.repeat(np.arange(n_bootstrap), b), idx.ravel()), 1.0)
    boot_num = counts @ num.T  # (n_bootstrap, R)
    boot_den = counts @ den  # (n_bootstrap,)
    safe = np.where(boot_den > 0, boot_den, 1.0)
    return np.where(boot_den[:, None] > 0, boot_num / safe[:, None], 0.0)


def estimate_rewards(alignment: Tensor, rewards: dict[str, Tensor], *, completion_mask: Tensor, group_size: int,
                     loss_type: str = "grpo", lr: float, tokens_per_update: dict[str, int], budget_tokens: float,
                     n_bootstrap: int = 1000, seed: int = 0, seconds_per_update: dict[str, float] | None = None,
                     budget_seconds: float | None = None, max_completion_length: int | None = None,
                     gradient_norms: dict[str, float] | None = None,
                     direction_norm: float | None = None) -> list[RewardEstimate]:
    """Predicted gains of every reward from one alignment tensor.

    Parameters
    ----------
    alignment : Tensor, shape (N, T)
        a_nt = <grad l_nt, u> from :func:`gradprobe.probe.token_alignment`.
    rewards : dict[str, Tensor of shape (N, T)]
        Name -> per-token advantages A^R, zero off the mask (values off the mask are ignored).
    completion_mask : BoolTensor, shape (N, T)
    group_size : int
        G.
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        The loss of the update being predicted (:data:`gradprobe.grpo.losses.LOSS_TYPES`).
    lr : float
        Learning rate of that update.
    tokens_per_update : dict[str, int]
        c_R per reward name, generated tokens per update (from the probe batch's ledger).
    budget_tokens : float
        Generated-token budget of the extrapolation.
    n_bootstrap : int
        Bootstrap replicates over groups; 0 skips the bootstrap (intervals and snr are None).
    seed : int
        Seed of the resampling (the same resampled groups for every reward).
    seconds_per_update : dict[str, float], optional
        Device-seconds per update of each reward; with ``budget_seconds`` gives
        ``predicted_gain_at_time_budget``.
    max_completion_length : int, optional
        L_max of ``dr_grpo``.
    gradient_norms : dict[str, float], optional
        ||g_R|| per reward (e.g. from :func:`gradprobe.probe.references.reward_gradient`); with
        ``direction_norm`` = ||u|| gives the cosine.

    Returns
    -------
    list[RewardEstimate]
        In the order of ``rewards``.

    Raises
    ------
    ValueError
        No rewards, a reward without ``tokens_per_update`` (or seconds with ``budget_seconds``),
        non-positive budgets or token counts, ``n_bootstrap < 0``, or invalid shapes (see
        :func:`group_sums`); or a non-finite number in an estimate (a float64 overflow: :func:`_check_finite`),
        named by reward and field (the advantages' size is checked where every reward's output enters:
        :func:`gradprobe.rewards.base.checked_output`).
    """
    names = list(rewards)
    _check_estimate_inputs(alignment, rewards, n_bootstrap=n_bootstrap, tokens_per_update=tokens_per_update,
                           budget_tokens=budget_tokens, seconds_per_update=seconds_per_update,
                           budget_seconds=budget_seconds)
    stacked = torch.stack([rewards[k].to(alignment.device) for k in names])  # (R, N, T)
    num_t, den_t = group_sums(alignment, stacked, completion_mask, group_size, loss_type=loss_type,
                              max_completion_length=max_completion_length)
    num = num_t.cpu().numpy()  # (R, B)
    den = den_t.cpu().numpy()  # (B,)
    b = den.shape[0]
    total = float(den.sum())
    per_group = num / total if total > 0 else np.zeros_like(num)
    estimate = per_group.sum(-1)  # (R,)
    intervals, stds = _bootstrap_summary(num, den, n_bootstrap, seed, n_rewards=len(names))

    meta = {"loss_type": loss_type, "num_groups": b, "n_bootstrap": n_bootstrap, "lr": lr,
            "budget_tokens": budget_tokens, "budget_seconds": budget_seconds, "seed": seed}
    estimates = [_reward_estimate(
        name, float(estimate[r]), per_group[r],
        None if intervals is None else ((float(intervals[r, 0]), float(intervals[r, 1])), float(stds[r])),
        tokens=tokens_per_update[name], seconds_per_update=seconds_per_update, gradient_norms=gradient_norms,
        direction_norm=direction_norm, meta=meta) for r, name in enumerate(names)]
    _check_finite(estimates, stds, stacked, alignment, completion_mask)
    return estimates


def _reward_estimate(name: str, est: float, per_group: np.ndarray, bootstrap: tuple | None, *, tokens: int,
                     seconds_per_update: dict[str, float] | None, gradient_norms: dict[str, float] | None,
                     direction_norm: float | None, meta: dict) -> RewardEstimate:
    """One reward's :class:`RewardEstimate` from its inner product ``est``, its per-group shares
    (B,) and ``bootstrap`` = ((lo, hi), sd) or None; ``meta`` holds the fields every reward shares."""
    lr, budget_seconds = meta["lr"], meta["budget_seconds"]
    gain = 100.0 * lr * est
    scale = meta["budget_tokens"] / tokens
    interval = snr = gain_iv = gain_iv_budget = None
    if bootstrap is not None:
        interval, std = bootstrap
        snr = abs(est) / std if std > 0 else (0.0 if est == 0 else math.inf)
        gain_iv = tuple(sorted((100.0 * lr * interval[0], 100.0 * lr * interval[1])))
        gain_iv_budget = (scale * gain_iv[0], scale * gain_iv[1])
    secs = time_gain = None
    if seconds_per_update is not None and name in seconds_per_update:
        secs = float(seconds_per_update[name])
        if budget_seconds is not None:
            time_gain = budget_seconds / secs * gain
    cosine = None
    if gradient_norms is not None and direction_norm is not None and name in gradient_norms:
        denom = gradient_norms[name] * direction_norm
        cosine = est / denom if denom > 0 else 0.0
    return RewardEstimate(
        name=name, inner_product=est, interval=interval, snr=snr, predicted_gain_per_update=gain,
        gain_interval_per_update=gain_iv, tokens_per_update=int(tokens), predicted_gain_at_budget=scale * gain,
        gain_interval_at_budget=gain_iv_budget, seconds_per_update=secs, predicted_gain_at_time_budget=time_gain,
        cosine=cosine, per_group=[float(x) for x in per_group], **meta)


def _check_estimate_inputs(alignment: Tensor, rewards: dict[str, Tensor], *, n_bootstrap: int,
                           tokens_per_update: dict[str, int], budget_tokens: float,
                           seconds_per_update: dict[str, float] | None, budget_seconds: float | None) -> None:
    """The ``ValueError`` checks of :func:`estimate_rewards` (its Raises section), in its order."""
    names = list(rewards)
    if not names:
        raise ValueError("estimate_rewards needs at least one reward")
    if n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be >= 0, got {n_bootstrap}")
    if not budget_tokens > 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens}")
    for name in names:
        if tuple(rewards[name].shape) != tuple(alignment.shape):
            raise ValueError(f"reward {name!r}: advantages have shape {tuple(rewards[name].shape)}, the alignment "
                             f"{tuple(alignment.shape)}; both must be (N, T) of the same probe batch")
        if name not in tokens_per_update or not tokens_per_update[name] > 0:
            raise ValueError(f"tokens_per_update has no positive token count for reward {name!r}; "
                             "pass the generated tokens one update of it costs (ledger of the probe batch)")
        if budget_seconds is not None and (seconds_per_update is None or not seconds_per_update.get(name, 0) > 0):
            raise ValueError(f"budget_seconds is set but seconds_per_update has no positive value for {name!r}")


def _bootstrap_summary(num: np.ndarray, den: np.ndarray, n_bootstrap: int, seed: int, *,
                       n_rewards: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Percentile 95% intervals (R, 2) and standard deviations (R,) of the ratio estimator over
    :func:`_bootstrap` replicates; (None, None) without a bootstrap or with fewer than 2 groups (warns)."""
    b = den.shape[0]
    if n_bootstrap == 0:
        return None, None
    if b < 2:
        warnings.warn(f"bootstrap over prompts needs at least 2 groups, the batch has {b}: no interval or snr",
                      stacklevel=3)  # points at the caller of estimate_rewards
        return None, None
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by name: _check_finite
        boot = _bootstrap(num, den, n_bootstrap, seed)  # (n_bootstrap, R)
        intervals = np.percentile(boot, [2.5, 97.5], axis=0).T + 0.0  # (R, 2); +0.0 turns -0.0 into 0.0
        stds = boot.std(axis=0, ddof=1) if n_bootstrap > 1 else np.zeros(n_rewards)
    return intervals, stds


def _check_finite(estimates: list[RewardEstimate], stds: np.ndarray | None, advantages: Tensor, alignment: Tensor,
                  completion_mask: Tensor) -> None:
    """Refuse an estimate holding a non-finite number (an overflow of float64), before anything writes it.

    Every number of a :class:`RewardEstimate` is finite when its inputs are (:func:`group_sums` checks them) and
    within float64, except ``snr``, inf when the bootstrap's standard deviation is exactly 0; the standard
    deviation (``stds``, (R,)) is checked instead. Advantages within
    :data:`~gradprobe.rewards.output.MAX_ABS_ADVANTAGE` keep the squares finite for any realistic alignment, so
    this is the last line behind that check: an inf here was written as a stored SNR of 0.0 (the variance
    overflowed) or refused only when ``probe.json`` was read back. ``advantages``: (R, N, T), the rewards' in order.

    Raises
    ------
    ValueError
        Naming the reward, the field, the largest |A| of its advantages and |a| of the alignment on the mask, and
        the fix (rescale the reward).
    """
    mask = completion_mask.bool().to(alignment.device)
    zero = torch.zeros((), dtype=torch.float64, device=alignment.device)
    for r, est in enumerate(estimates):
        fields = {"inner_product": [est.inner_product], "interval": est.interval or [],
                  "bootstrap standard deviation": [] if stds is None else [stds[r]],
                  "predicted_gain_per_update": [est.predicted_gain_per_update],
                  "gain_interval_per_update": est.gain_interval_per_update or [],
                  "predicted_gain_at_budget": [est.predicted_gain_at_budget],
                  "gain_interval_at_budget": est.gain_interval_at_budget or [],
                  "predicted_gain_at_time_budget": [est.predicted_gain_at_time_budget],
                  "cosine": [est.cosine], "per_group": est.per_group}
        for field_name, values in fields.items():
            bad = [float(v) for v in values if v is not None and not math.isfinite(float(v))]
            if not bad:
                continue
            adv = float(torch.where(mask, advantages[r].to(mask.device, torch.float64), zero).abs().max())
            align = float(torch.where(mask, alignment.to(torch.float64), zero).abs().max())
            raise ValueError(f"reward {est.name!r}: the probe's {field_name} is {bad[0]} (float64 overflow: its "
                             f"advantages reach |A| = {adv:.3g}, the alignment |a| = {align:.3g}): rescale the "
                             "reward (divide its scores or advantages by a constant)")
