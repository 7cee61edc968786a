"""Dense (process) rewards from MC step values: pure functions, then registered rewards.

Every variant is a pure function of :class:`~gradprobe.rewards.steps.StepValues` and the
batch's completion mask (N, T) returning ``(advantages (N, T) float64, valid (N,), stats)``;
the registered reward computes the step values once per batch (``ctx.cache``) and reports
``generated_tokens = {"continuation": <all continuation tokens of the batch>}``.
Notation: row n = i * G + j, steps s = 1..S_n with boundaries b_s, values V_s, V_0 = mean_j r.

``mc_value``      process supervision (Shao et al. 2024, DeepSeekMath, sec. 4.1.3):
                  V~_s = (V_s - mean(R_i)) / (std(R_i) + eps), R_i = all step values of group
                  i; A_t = sum_{s : b_s >= t} V~_s (suffix sum from the token's step).
                  Same ddof (1), eps and zero-variance rule as
                  :func:`gradprobe.grpo.advantages.group_normalize` (it is reused).
``mc_advantage``  VinePPO (Kazemnejad et al. 2024, eq. 5-6): a token of step s gets
                  V_s - V_{s-1}; over one token per step this telescopes to r - V_0.
``hybrid_<lam>``  lam * A(mc_value) + (1 - lam) * A(outcome), lam in {0.9, 0.5, 0.1};
                  ``hybrid`` = ``hybrid_0.5``.
``mc_min``        min_s V_s as a sequence reward (r for an empty completion), then the
                  outcome reward's group normalisation.
"""

from __future__ import annotations

import math

import torch

from ..grpo.advantages import DEFAULT_SCALE, group_normalize
from ..types import RolloutBatch
from .base import RewardContext, RewardOutput, register_reward
from .outcome import normalize_sequence_rewards, outcome_reward
from .steps import StepValues, mc_step_values

HYBRID_WEIGHTS = (0.9, 0.5, 0.1)


def _per_step_to_tokens(per_step: list[list[float]], sv: StepValues, completion_mask: torch.Tensor) -> torch.Tensor:
    """Spread per-step numbers (row n: S_n values) over tokens: (N, T) float64, 0 off the mask."""
    n_rows, t = completion_mask.shape
    idx = sv.step_index(t)  # (N, T), -1 past the last boundary
    s_max = max((len(v) for v in per_step), default=0)
    table = torch.zeros((n_rows, s_max + 1), dtype=torch.float64)  # last column: 0 for idx = -1
    for n, v in enumerate(per_step):
        if v:
            table[n, : len(v)] = torch.tensor(v, dtype=torch.float64)
    idx = torch.where(idx < 0, torch.full_like(idx, s_max), idx)
    out = table.gather(1, idx)
    return out * completion_mask.to(torch.float64)


def mc_value_advantages(sv: StepValues, completion_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Process-supervision advantages (DeepSeekMath sec. 4.1.3).

    Parameters
    ----------
    sv : StepValues
        N rows, groups of ``sv.group_size``.
    completion_mask : BoolTensor, shape (N, T)

    Returns
    -------
    advantages : Tensor (float64), shape (N, T)
        A_nt = sum over steps s >= step(t) of the normalised values; 0 off the mask and on
        invalid rows; a group whose step values are all equal gives 0.
    valid : BoolTensor, shape (N,)
    stats : dict
        ``missing`` (invalid rows), ``zero_variance_groups``, ``groups``, ``nonfinite_groups`` and
        ``overflow_max_abs_reward`` (groups whose step values differ but overflow float64 group statistics, advantage
        0, and their largest |value|: :func:`~gradprobe.grpo.advantages.group_normalize`, read by the probe's notes
        and the training loop's warning), ``mean_reward``, ``mean_step_value``.
    """
    g = sv.group_size
    n_rows = sv.num_rows
    b = n_rows // g
    valid = sv.valid()
    s_max = max(sv.num_steps, default=0)
    mat = torch.full((n_rows, max(s_max, 1)), math.nan, dtype=torch.float64)  # (N, S_max), NaN = no step
    for n, vals in enumerate(sv.values):
        if bool(valid[n]) and vals:
            mat[n, : len(vals)] = torch.tensor(vals, dtype=torch.float64)
    z, gstats = group_normalize(mat.view(b, g * mat.shape[1]), scale="group")  # R_i = all steps of group i
    z = z.view(n_rows, -1)
    suffix = torch.flip(torch.cumsum(torch.flip(z, [1]), 1), [1])  # (N, S_max): sum_{s' >= s} z_s'
    per_step = [suffix[n, : len(v)].tolist() for n, v in enumerate(sv.values)]
    adv = _per_step_to_tokens(per_step, sv, completion_mask)
    adv = adv * valid[:, None].to(torch.float64)
    finite = mat[torch.isfinite(mat)]
    stats = {"missing": int((~valid).sum()), "zero_variance_groups": gstats["zero_variance_groups"],
             "groups": b, **overflow_stats(gstats),
             "mean_reward": _mean([r for r, v in zip(sv.rewards, valid.tolist()) if v]),
             "mean_step_value": float(finite.mean()) if finite.numel() else math.nan}
    return adv, valid, stats


def overflow_stats(*parts: dict) -> dict:
    """``nonfinite_groups`` and ``overflow_max_abs_reward`` of a reward made of ``parts`` (the ``stats`` of its group
    normalisations, :func:`~gradprobe.grpo.advantages.group_normalize`: its step values, its outcome), each part's
    absent keys as 0: the larger count (groups of the batch in which a part overflowed float64 group statistics, so
    that part's advantage is 0 there; a group may overflow in both) and the largest |reward| of those groups. A
    hybrid records which part overflowed where (:func:`hybrid_overflow_stats`).

    Why: the probe's notes (:func:`gradprobe.probe.result.diagnose`) and the training loop's warning read these keys
    to tell the user to rescale the reward; a dense or hybrid reward that dropped them left those groups at advantage 0
    without a word."""
    return {"nonfinite_groups": max(int(p.get("nonfinite_groups") or 0) for p in parts),
            "overflow_max_abs_reward": max(float(p.get("overflow_max_abs_reward") or 0.0) for p in parts)}


def hybrid_overflow_stats(part: dict, outcome: dict, lam: float, *, part_name: str = "process") -> dict:
    """:func:`overflow_stats` of a hybrid ``lam * A(part) + (1 - lam) * A(outcome)`` (:func:`hybrid_advantages`;
    ``part``, ``outcome``: the stats of each part's group normalisation) from the parts of nonzero weight only, and,
    when both parts weigh, ``nonfinite_part_groups``: ``{part_name: count, "outcome": count}``, the groups in which
    each part overflowed float64 group statistics (0 included). ``part_name`` names the first part to the user.

    Why: a group in which one part overflowed gets advantage 0 from that part only; the other part still trains it
    where its own values differ (and did not overflow). ``nonfinite_groups`` (the larger part's count) says that some
    part overflowed; the per-part counts let the probe's notes and the training loop's warning say which part to
    rescale and that the other still trains those groups where its values differ
    (:func:`gradprobe.forecast.overflow_parts.overflow_parts`), not that the groups got advantage 0. A part of weight
    0 (``lam`` 0 or 1, which ``make_process_reward`` and ``prm_reward`` take) adds nothing to the advantages, so
    its overflow zeroes none of them: it is left out, and the reward reads as the one part that weighs (no
    ``nonfinite_part_groups``)."""
    weighted = {name: stats for name, stats, weight in ((part_name, part, lam), ("outcome", outcome, 1.0 - lam))
                if weight != 0.0}
    out = overflow_stats(*weighted.values())
    if len(weighted) > 1:
        out["nonfinite_part_groups"] = {name: int(stats.get("nonfinite_groups") or 0)
                                        for name, stats in weighted.items()}
    return out


def mc_advantage_advantages(sv: StepValues, completion_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """VinePPO-style step advantages: a token of step s gets V_s - V_{s-1} (V_0 = mean_j r).

    Parameters
    ----------
    sv : StepValues
    completion_mask : BoolTensor, shape (N, T)

    Returns
    -------
    advantages : Tensor (float64), shape (N, T)
        Unnormalised; 0 off the mask and on invalid rows.
    valid : BoolTensor, shape (N,)
    stats : dict
        ``missing``, ``mean_reward``, ``mean_abs_step_advantage``.
    """
    valid = sv.valid()
    per_step, diffs = [], []
    for n, vals in enumerate(sv.values):
        if not bool(valid[n]):
            per_step.append([0.0] * len(vals))
            continue
        prev = [sv.v0[n]] + vals[:-1]
        d = [v - p for v, p in zip(vals, prev)]
        per_step.append(d)
        diffs += d
    adv = _per_step_to_tokens(per_step, sv, completion_mask)
    stats = {"missing": int((~valid).sum()), "groups": sv.num_rows // sv.group_size,
             "mean_reward": _mean([r for r, v in zip(sv.rewards, valid.tolist()) if v]),
             "mean_abs_step_advantage": _mean([abs(x) for x in diffs])}
    return adv, valid, stats


def hybrid_advantages(mc_value_adv: torch.Tensor, mc_value_valid: torch.Tensor, outcome_adv: torch.Tensor,
                      outcome_valid: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Convex combination lam * A(mc_value) + (1 - lam) * A(outcome).

    Parameters
    ----------
    mc_value_adv, outcome_adv : Tensor, shape (N, T)
    mc_value_valid, outcome_valid : BoolTensor, shape (N,)
    lam : float in [0, 1]

    Returns
    -------
    advantages : Tensor (float64), shape (N, T), 0 on rows not valid for both
    valid : BoolTensor, shape (N,)

    Raises
    ------
    ValueError
        ``lam`` outside [0, 1].
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"hybrid weight must be in [0, 1], got {lam}")
    valid = mc_value_valid & outcome_valid
    adv = lam * mc_value_adv.to(torch.float64) + (1.0 - lam) * outcome_adv.to(torch.float64)
    return adv * valid[:, None].to(torch.float64), valid


def mc_min_rewards(sv: StepValues) -> torch.Tensor:
    """Sequence reward min_s V_s per row, shape (N,) float64 (r when S = 0; NaN if invalid)."""
    valid = sv.valid().tolist()
    return torch.tensor([(min(v) if v else r) if ok else math.nan
                         for v, r, ok in zip(sv.values, sv.rewards, valid)], dtype=torch.float64)


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else math.nan


def _output(name: str, adv, valid, stats, sv: StepValues) -> RewardOutput:
    stats = {**stats, **sv.stats()}
    return RewardOutput(name=name, advantages=adv, valid=valid,
                        generated_tokens={"continuation": sv.continuation_tokens}, stats=stats)


@register_reward("mc_value")
def mc_value(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
    """Process-supervision GRPO from MC step values (see :func:`mc_value_advantages`)."""
    sv = mc_step_values(batch, ctx)
    return _output("mc_value", *mc_value_advantages(sv, batch.completion_mask), sv)


@register_reward("mc_advantage")
def mc_advantage(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
    """VinePPO-style step advantages (see :func:`mc_advantage_advantages`)."""
    sv = mc_step_values(batch, ctx)
    return _output("mc_advantage", *mc_advantage_advantages(sv, batch.completion_mask), sv)


def _make_hybrid(lam: float, name: str):
    def hybrid(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
        sv = mc_step_values(batch, ctx)
        a_mc, v_mc, s_mc = mc_value_advantages(sv, batch.completion_mask)
        out = outcome_reward(batch, ctx)
        adv, valid = hybrid_advantages(a_mc, v_mc, out.advantages, out.valid, lam)
        stats = {"missing": int((~valid).sum()), "lambda": lam, "mean_reward": s_mc["mean_reward"],
                 "zero_variance_groups_mc_value": s_mc["zero_variance_groups"],
                 "zero_variance_groups_outcome": out.stats["zero_variance_groups"], "groups": s_mc["groups"],
                 **hybrid_overflow_stats(s_mc, out.stats, lam, part_name="mc_value")}
        return _output(name, adv, valid, stats, sv)

    hybrid.__name__ = hybrid.__qualname__ = name.replace(".", "")
    hybrid.__doc__ = f"{lam} * A(mc_value) + {1 - lam:g} * A(outcome) (see :func:`hybrid_advantages`)."
    return hybrid


for _lam in HYBRID_WEIGHTS:
    register_reward(f"hybrid_{_lam}")(_make_hybrid(_lam, f"hybrid_{_lam}"))
register_reward("hybrid")(_make_hybrid(0.5, "hybrid"))


@register_reward("mc_min")
def mc_min(batch: RolloutBatch, ctx: RewardContext, *, scale: str = DEFAULT_SCALE) -> RewardOutput:
    """min_s V_s as a sequence reward, group-normalised like ``outcome``.

    ``scale`` is a key of :data:`gradprobe.grpo.advantages.SCALES` (registered: ``"group"``,
    as ``outcome``); an unknown one raises ValueError naming the valid scales.
    """
    sv = mc_step_values(batch, ctx)
    adv, valid, stats = normalize_sequence_rewards(mc_min_rewards(sv), batch, scale=scale)
    stats["mean_reward"] = _mean([r for r, v in zip(sv.rewards, valid.tolist()) if v])
    stats["mean_min_value"] = _mean([x for x in mc_min_rewards(sv).tolist() if math.isfinite(x)])
    return _output("mc_min", adv, valid, stats, sv)
