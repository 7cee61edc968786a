"""The probe's last stages: per-reward estimates and the ``probe.json`` result (DESIGN.md, "The probe").

After the alignment passes (:mod:`gradprobe.probe.direction`), :func:`gradprobe.probe.run.run_probe` calls:

- :func:`reward_cosines` (``cosine`` only): one backward per reward and loss type, cos(g_R, v);
- :func:`per_update_costs`: generated tokens c_R and seconds per training update of each reward;
- :func:`estimate_all`: each reward's <g_R, u> = sum w A^R a as a weighted sum over the alignment, the
  predicted gain per update = 100 * lr * <g_R, u> accuracy points and (T / c_R) * gain at a budget of T
  tokens, a bootstrap interval over prompts and the signal-to-noise ratio
  (:func:`gradprobe.probe.estimate_rewards`), under the probe's loss type and each of ``loss_types``;
- :func:`signal_proxy`: verl's forward-only gradient-signal proxy E[A^2 W] (a forecast baseline);
- :func:`reward_entries`, :func:`probe_notes` and :func:`assemble_result`: ``probe.json``'s content.
"""

from __future__ import annotations

import time

import torch

from ..forecast.overflow_parts import overflow_parts, part_overflow_text, part_rescale_text
from ..forecast.result import no_signal_reason
from ..grpo.losses import probe_advantages, token_weights
from ..ledger import CHARGED
from ..outputs import versions
from ..probe_keys import entry_key, split_entry_key
from .config import ProbeConfig
from .direction import weight_family
from .estimate import estimate_rewards, signal_proxy_group_sums, token_probability_stats
from .references import dot, norm, reward_gradient
from .stages import DeviceBatch, StageTimes

__all__ = ["REFERENCE_REWARD", "add_same_loss_ratios", "reward_cosines", "per_update_costs", "estimate_all",
           "signal_proxy", "reward_entries", "diagnose", "probe_notes", "assemble_result"]

#: The reward the forecast compares against (grpo's), whose entry under the same loss type is the
#: denominator of each entry's ``same_loss_ratio`` (:func:`add_same_loss_ratios`).
REFERENCE_REWARD = "outcome"


def add_same_loss_ratios(entries: list[dict], probe_loss_type: str, reference_reward: str = REFERENCE_REWARD) -> None:
    """Give every entry its ratio to the reference reward under the same loss type, in place.

    For the entry of reward R under loss type L (key ``R`` or ``R@L``, :mod:`gradprobe.probe_keys`):
    ``same_loss_reference`` = the key of ``reference_reward`` under L (``outcome`` or ``outcome@L``) and
    ``same_loss_ratio`` = <g_R,L, u> / <g_outcome,L, u> (dimensionless; R's per-update efficiency vs
    GRPO's advantages trained with the same loss, first order). Both are None when the reference reward
    was not probed; the ratio is None when its inner product is 0. The forecast's rho is another ratio:
    vs the reference reward under the probe's own loss type (the reference curve's), so that an arm
    that changes only the loss gets rho != 1 (:func:`gradprobe.forecast.forecast_rewards`).

    Parameters
    ----------
    entries : list of dict
        ``probe.json["rewards"]``: each with ``name``, ``inner_product`` and (else taken from the key)
        ``loss_type``.
    probe_loss_type : str
        ``probe.json["config"]["loss_type"]``.
    reference_reward : str
        Default ``outcome``.
    """
    by_key = {e["name"]: e for e in entries}
    for e in entries:
        reward, lt = split_entry_key(e["name"], probe_loss_type)
        ref = by_key.get(entry_key(reference_reward, e.get("loss_type") or lt, probe_loss_type))
        e["same_loss_reference"] = None if ref is None else ref["name"]
        den = None if ref is None else float(ref["inner_product"])
        e["same_loss_ratio"] = float(e["inner_product"]) / den if den else None


def reward_cosines(config: ProbeConfig, run: DeviceBatch, advantages: dict, v: dict) -> dict[str, float]:
    """Entry key -> cos(g_R, v) (not P v) under every loss type, when ``config.reference.cosine``; else empty.

    One backward per reward and loss type: g_R explicitly (:func:`gradprobe.probe.reward_gradient`, gspo
    with sequence-mean advantages); 0.0 when either vector is zero.
    """
    cosines = {}
    if not config.reference.cosine:
        return cosines
    batch, v_norm = run.batch, norm(v)
    for lt in config.update.all_loss_types:
        weights = token_weights(batch.completion_mask, lt, max_completion_length=run.max_completion_length)
        for name, adv in advantages.items():
            g = reward_gradient(run.model, batch, probe_advantages(adv, batch.completion_mask, lt), weights,
                                micro_batch_size=run.micro_batch_size)  # gspo: sequence-mean advantages
            g_norm = norm(g)
            cosines[entry_key(name, lt, config.update.loss_type)] = (dot(g, v) / (g_norm * v_norm)
                                                              if g_norm > 0 and v_norm > 0 else 0.0)
    return cosines


def per_update_costs(config: ProbeConfig, batch, outputs: dict, times: StageTimes) -> tuple[dict, dict, float]:
    """Generated tokens and seconds per training update of each reward.

    Returns
    -------
    (dict[str, int], dict[str, float], float)
        Reward -> tokens per update c_R (the batch's completion tokens plus the reward's own generation,
        e.g. MC continuations: its ``generated_tokens`` of the charged ledger categories
        :data:`gradprobe.ledger.CHARGED`, as training charges them; ``eval`` tokens are logged, never charged;
        counts checked by :func:`gradprobe.rewards.base.checked_output`), reward -> device-seconds per update
        (rollouts, the reward's continuations if any, one forward + backward, a guided probe's hinted scoring
        forward, and the reward's own compute ``own_seconds``: its call's wall time less the continuations'
        generation seconds, as training charges ``device_seconds["reward"]``), both scaled by ``update_scale``
        = (update_prompts x update_group) / (prompts x group), the training update's batch over the probe batch.
    """
    update, b = config.update, config.batch
    update_scale = (update.update_prompts or b.prompts) * (update.update_group or b.group) / (b.prompts * b.group)
    tokens_per_update, seconds_per_update = {}, {}
    for name, out in outputs.items():
        extra = sum(int(n) for c, n in out["generated_tokens"].items() if c in CHARGED)
        tokens_per_update[name] = max(1, round((batch.generated_tokens + extra) * update_scale))
        own = float(out.get("own_seconds", out.get("seconds", 0.0)) or 0.0)  # the reward's own compute
        seconds_per_update[name] = update_scale * (times.rollout + (times.continuation if extra else 0.0)
                                                   + times.update + times.guided_scoring + own)
    return tokens_per_update, seconds_per_update, update_scale


def estimate_all(config: ProbeConfig, run: DeviceBatch, alignments: dict, advantages: dict,
                 tokens_per_update: dict, seconds_per_update: dict, times: StageTimes) -> list[tuple]:
    """Every reward's estimate under the probe's loss type, then under each of ``loss_types``.

    Each loss type reads its token-weight family's alignment (the one alignment without Adam), with the
    same seed and costs; the seconds of its weighted sums and bootstrap go to ``times.sums[loss type]``.

    Returns
    -------
    list of (str, str, RewardEstimate)
        (reward, loss type, estimate named by its entry key ``REWARD`` or ``REWARD@LOSS_TYPE``).
    """
    adam, batch = config.reference.preconditioner.second_moment, run.batch
    alignment = alignments[weight_family(config.update.loss_type)]
    estimates = []
    for lt in config.update.all_loss_types:
        t0, c0 = time.perf_counter(), time.process_time()
        for est in estimate_rewards(
                alignments[weight_family(lt)] if adam else alignment, advantages,
                completion_mask=batch.completion_mask, group_size=batch.group_size,
                loss_type=lt, lr=config.update.lr, tokens_per_update=tokens_per_update,
                max_completion_length=run.max_completion_length,
                budget_tokens=config.budget.tokens, n_bootstrap=config.run.n_bootstrap, seed=config.batch.seed,
                seconds_per_update=seconds_per_update, budget_seconds=config.budget.seconds):
            reward, est.name = est.name, entry_key(est.name, lt, config.update.loss_type)
            estimates.append((reward, lt, est))
        times.sums[lt] = (time.perf_counter() - t0, time.process_time() - c0)
    return estimates


def signal_proxy(run: DeviceBatch, advantages: dict, times: StageTimes) -> dict:
    """verl's forward-only gradient-signal proxy (:func:`gradprobe.probe.estimate.signal_proxy_group_sums`):
    one no-grad forward for pi(y_t) and sum pi^2, outside the alignment pass; seconds into
    ``times.signal_proxy``.

    Returns
    -------
    dict[str, numpy.ndarray]
        Reward -> its per-group sums, shape (B,) (the masked-mean advantage: the same for every loss type).
    """
    t0 = time.perf_counter()
    batch = run.batch
    pi, sum_pi_sq = token_probability_stats(run.model, batch, micro_batch_size=run.micro_batch_size)
    names = list(advantages)
    power = signal_proxy_group_sums(torch.stack([advantages[n] for n in names]), pi, sum_pi_sq,
                                    batch.completion_mask, batch.group_size).cpu().numpy()  # (R, B)
    times.signal_proxy = time.perf_counter() - t0
    return dict(zip(names, power))


def reward_entries(config: ProbeConfig, estimates: list, reference: dict, cosines: dict, power: dict,
                   outputs: dict, num_rows: int, guidance: dict | None = None) -> list[dict]:
    """``probe.json["rewards"]``: one entry per (reward, loss type), the probe's loss type first.

    Each is the estimate's fields plus ``reward``, ``alignment_family`` / ``alignment_pass`` (the
    alignment it used: its token-weight family's pass under Adam, 0 the probe's own; None / 0 without
    Adam), ``cosine``, ``signal_proxy`` ((1/N) sum A^2 W, verl's proxy2_total_power) and its per-group
    sums, the reward's generated tokens, valid completions, statistics and seconds (``reward_seconds`` its call's
    wall time, ``reward_own_seconds`` that less its continuations' generation: the part in ``seconds_per_update``
    besides rollouts, continuations, the update and guided scoring, before ``update_scale``), ``no_signal_reason`` (why
    every advantage it gives is 0, :func:`gradprobe.forecast.result.no_signal_reason`, else None) and
    ``no_signal`` (bool), and ``same_loss_reference`` / ``same_loss_ratio`` (:func:`add_same_loss_ratios`); with
    ``guidance`` (a guided probe's record, :func:`gradprobe.probe.guided.guidance_entry`) also ``guidance``.
    """
    adam, families = config.reference.preconditioner.second_moment, reference["alignment_families"]
    entries = []
    for reward, lt, est in estimates:
        d = est.to_dict()
        d["reward"] = reward  # the reward's name; d["name"] is the entry key, d["loss_type"] the estimate's loss
        d["alignment_family"] = weight_family(lt) if adam else None
        d["alignment_pass"] = families[weight_family(lt)]["pass"] if adam else 0
        d["cosine"] = cosines.get(est.name)
        d["signal_proxy"] = float(power[reward].sum()) / num_rows
        d["signal_proxy_per_group"] = [float(x) for x in power[reward]]
        d.update(generated_tokens=outputs[reward]["generated_tokens"], valid_completions=outputs[reward]["valid"],
                 reward_stats=outputs[reward]["stats"], reward_seconds=outputs[reward]["seconds"],
                 reward_own_seconds=outputs[reward].get("own_seconds", outputs[reward]["seconds"]))
        if guidance is not None:  # only for a guided probe: the default job's entries keep their keys
            d["guidance"] = guidance
        d["no_signal_reason"] = no_signal_reason([d])  # every advantage 0: its zeros measure nothing
        d["no_signal"] = d["no_signal_reason"] is not None
        entries.append(d)
    add_same_loss_ratios(entries, config.update.loss_type)
    return entries


def diagnose(batch, reference: dict, outputs: dict) -> list[str]:
    """Plain-language warnings about inputs that make the probe uninformative.

    Among them, per reward: completions whose reward is missing (its value was None, NaN or +-inf;
    masked: advantage 0, left out of their group's mean and std, never scored 0), groups in which every
    reward is missing (they contribute nothing to that reward's estimate), and groups whose rewards
    differ but overflow float64 statistics (``nonfinite_groups``: advantage 0; rescale the reward; for a hybrid, only
    the overflowing part's advantage is 0 there, :func:`_overflow_note`). Once:
    completions on which the task's scorer raised (``batch.metadata["score_errors"]``: NaN scores, masked
    by the rewards that read the task's score; a sequence reward that raises stops the probe instead).
    """
    notes = []
    if str(reference.get("precondition", "")).startswith("none (fallback"):
        notes.append("Adam preconditioning was skipped: the outcome gradient of the probe batch is zero (all groups "
                     "flat), so gains are predicted for an SGD step; use more --prompts or a larger --group")
    if reference.get("norm", 1.0) == 0.0:
        notes.append("the reference update is zero (every held-out group had equal rewards, e.g. accuracy 0 or 1): "
                     "all inner products are 0; use more --heldout-prompts, a larger --heldout-group or an easier task")
    for name, out in outputs.items():
        stats = out["stats"] or {}
        groups = stats.get("groups") or batch.num_prompts
        if stats.get("zero_variance_groups", 0) >= groups and name.startswith("outcome"):
            notes.append(f"reward {name!r}: every group of the probe batch has equal rewards, so its advantages are "
                         "all zero; use more --prompts or a larger --group")
        missing, dead = int(stats.get("missing") or 0), int(out.get("missing_groups") or 0)
        if missing:
            notes.append(f"reward {name!r}: {missing} of {batch.num_rows} completions got no reward (its value was "
                         "None, NaN or +-inf); they are masked (advantage 0, left out of their group's mean and std), "
                         "not scored 0")
        if int(stats.get("nonfinite_groups") or 0):
            notes.append(_overflow_note(name, stats, groups))
        if dead:
            notes.append(f"reward {name!r}: {dead} of {batch.num_prompts} groups have no reward at all (every "
                         "completion's reward is missing), so they add nothing to its estimate; check the reward "
                         "function on those prompts")
    errors = int((getattr(batch, "metadata", None) or {}).get("score_errors") or 0)
    if errors:
        notes.append(f"the task's scorer raised on {errors} of {batch.num_rows} completions: their score is NaN, so "
                     "the rewards that read the task's score (outcome and its variants, the outcome part of hybrids) "
                     "mask them; a sequence reward that raises stops the probe instead")
    trunc = float(batch.truncated.double().mean())
    if trunc > 0.5:
        notes.append(f"{trunc:.0%} of completions hit --max-new-tokens without EOS (truncated); raise --max-new-tokens")
    if int((batch.completion_mask.sum(-1) == 0).sum()):
        notes.append(f"{int((batch.completion_mask.sum(-1) == 0).sum())} completions are empty")
    return notes


def _overflow_note(name: str, stats: dict, groups: int) -> str:
    """:func:`diagnose`'s warning on a reward whose group statistics overflow float64 (``stats``:
    ``nonfinite_groups``, ``overflow_max_abs_reward``; :func:`gradprobe.grpo.advantages.group_normalize`). For a
    hybrid that records its parts (``nonfinite_part_groups``, :func:`gradprobe.forecast.overflow_parts.overflow_parts`)
    it names the part that overflowed: only that part's advantage is 0 in those groups, the other part still trains
    those where its own values differ."""
    big = float(stats.get("overflow_max_abs_reward") or 0.0)
    parts = overflow_parts(stats)
    if parts is not None:
        return f"reward {name!r}: {part_overflow_text(parts, groups, big)}; {part_rescale_text(parts)}"
    return (f"reward {name!r}: in {int(stats['nonfinite_groups'])} of {groups} groups its rewards differ but are too "
            f"large for float64 group statistics (|reward| up to {big:.3g}): "
            "their mean or std overflows, so their advantages were set to 0 (the rewards are not equal); rescale the "
            "reward (e.g. divide it by its largest magnitude)")


def probe_notes(config: ProbeConfig, batch, reference: dict, outputs: dict, times: StageTimes) -> list[str]:
    """``probe.json["warnings"]``: :func:`diagnose`'s, and a note on the extra alignment passes of loss types
    with other token weights. Also sets ``reference["preconditioner_loss_type"]`` (that of
    ``reference["precondition"]``; None without Adam)."""
    notes = diagnose(batch, reference, outputs)
    adam = config.reference.preconditioner.second_moment
    reference["preconditioner_loss_type"] = config.update.loss_type if adam else None
    if times.extra_passes:
        own_lt = config.update.loss_type
        own = weight_family(own_lt)
        others = [f"{fam} ({', '.join(info['loss_types'])})" for fam, info in reference["alignment_families"].items()
                  if fam != own]
        notes.append(f"loss types with other token weights than --loss-type {own_lt} got their own Adam "
                     f"preconditioner and alignment pass, one per token-weight family: {'; '.join(others)} "
                     f"({times.extra_passes} extra pass(es): costs.extra_alignment_pass_seconds), as each loss "
                     "type's Adam has its own second moment in training; loss types with the same weights share one")
    return notes


def _batch_summary(batch, task, update_scale: float) -> dict:
    """``probe.json["batch"]``: size, generated tokens, mean completion tokens, mean reward (fraction), rates."""
    mask = batch.completion_mask
    scores = batch.scores[torch.isfinite(batch.scores)]
    return {
        "prompts": batch.num_prompts, "group": batch.group_size, "completions": batch.num_rows,
        "generated_tokens": batch.generated_tokens,
        "mean_completion_tokens": float(mask.sum(-1).double().mean()),
        "mean_reward": float(scores.mean()) if scores.numel() else float("nan"),
        "truncation_rate": float(batch.truncated.double().mean()),
        "format_rate": sum(task.format_rate(c) for c in batch.completions) / batch.num_rows,
        "score_errors": batch.metadata.get("score_errors", 0),
        "empty_completions": int((mask.sum(-1) == 0).sum()),
        "skipped_rows": int(getattr(task, "skipped", 0)),
        "update_scale": update_scale,
    }


def _costs(config: ProbeConfig, times: StageTimes, reference: dict, wall: float) -> dict:
    """``probe.json["costs"]`` (seconds; ``wall`` the ``time.perf_counter()`` at the probe's start)."""
    sums_seconds, sums_cpu = times.sums[config.update.loss_type]  # ONE pass's sums: the probe's own loss type's
    pass_seconds, pass_cpu = times.alignment + sums_seconds, times.alignment_cpu + sums_cpu
    return {
        "rollout_seconds": times.rollout, "continuation_seconds": times.continuation,
        "reference_seconds": reference["seconds"], "precondition_seconds": times.precondition,
        # ONE alignment pass (the probe's own loss type's: its jvp and its weighted sums for every reward)
        # against ONE update's forward + backward, however many loss types or families are estimated
        "update_forward_backward_seconds": times.update, "alignment_pass_seconds": pass_seconds,
        "alignment_to_update_ratio": pass_seconds / times.update if times.update else None,
        # the same two passes on this process's CPU clock (all its threads), which other processes on
        # shared cores do not inflate, as benchmarks/probe_cost.py --clock cpu measures the target
        "update_forward_backward_cpu_seconds": times.update_cpu, "alignment_pass_cpu_seconds": pass_cpu,
        "alignment_to_update_cpu_ratio": pass_cpu / times.update_cpu if times.update_cpu > 0 else None,
        "signal_proxy_seconds": times.signal_proxy,
        # Adam with loss types of other token weights: the extra families' passes (reference.alignment_families)
        "extra_alignment_passes": times.extra_passes, "extra_alignment_pass_seconds": times.extra_alignment,
        "extra_alignment_pass_cpu_seconds": times.extra_alignment_cpu,
        "extra_precondition_seconds": times.extra_precondition,  # their second moments and u_f = P_f v
        "extra_loss_type_sums_seconds": sum(sec for lt, (sec, _) in times.sums.items()
                                            if lt != config.update.loss_type),
        "wall_seconds": time.perf_counter() - wall,
        **({"guided_scoring_seconds": times.guided_scoring} if config.guidance is not None else {}),
    }


def assemble_result(config: ProbeConfig, *, task, batch, entries: list, ledger, reference: dict,
                    reference_check, notes: list, update_scale: float, times: StageTimes, wall: float) -> dict:
    """The content of ``probe.json`` (:func:`gradprobe.probe.run.run_probe` documents its fields)."""
    return {
        "config": config.to_dict(),
        "versions": versions(),
        "rewards": entries,
        "ledger": ledger.to_dict(),
        "reference": reference,
        "reference_check": reference_check,
        "warnings": notes,
        "batch": _batch_summary(batch, task, update_scale),
        "costs": _costs(config, times, reference, wall),
    }
