"""The probe of a guided arm (``ProbeConfig.guidance``, ``gradprobe probe --guidance fraction=F,prefix=P``).

An arm with off-context guidance (:mod:`gradprobe.rollout.guided`) samples k = floor(fraction * G + 1/2)
completions of each group from the hinted prompt (x + hint) and trains every completion under the plain
prompt x, each token's loss multiplied by the detached, truncated importance weight

    W_nt = min( pi(y_t | x, y_<t) / pi(y_t | x, hint, y_<t), C )  on guided rows,   W_nt = 1 elsewhere,

(:func:`gradprobe.grpo.step.grpo_step` with the hinted log-probabilities as ``sampler_logp``,
``importance_sampling="tis"``, ``is_cap = C``; :func:`gradprobe.grpo.losses.truncated_is_weights`; an
empty hint has no hinted forward and weight exactly 1). Its per-token loss is W_nt * L_nt
(:func:`gradprobe.grpo.losses.policy_loss`: ``per_token * is_weights.detach()``), L the loss type's
objective, so at rho = 1 (the probe's point) its negative gradient is

    g_R = sum_nt w_nt Atilde[W * A^R]_nt grad l_nt,

w the loss type's token weights and Atilde = :func:`gradprobe.grpo.losses.probe_advantages`, derived
in :mod:`gradprobe.grpo.losses` for per_token = -r A: the importance weight enters the per-token term
exactly as the advantage does (r A W = r (W A)), so the guided update is the unguided one with A^R
replaced by W * A^R. For grpo, dapo, dr_grpo, bnpo and cispo, Atilde[W A] = W A, i.e. each token's
A^R_nt a_nt weighted by W_nt in the per-token sums; for gspo (one ratio per sequence) the effective
advantage is the sequence mean of W A, not W times the mean of A. The alignment a_nt = <grad l_nt, u>
is along the unguided context x, the context the loss differentiates (``batch.input_ids`` hold x for
every row), so the probe's <g_R, u> = sum w Atilde[W A^R] a (:func:`gradprobe.probe.estimate.group_sums`
applied to W * A^R). ``tests/probe/test_probe_guidance.py`` checks it in float64 against the directional
derivative of :func:`~gradprobe.grpo.step.loss_and_backward`'s loss with ``sampler_logp``.

Costs are the guided arm's: the batch is sampled by :func:`gradprobe.rollout.guided.collect_guided_rollouts`
(the function training calls; its hint tokens' prefill FLOPs to ``flops["generation"]``), the hinted
forward that scores the guided rows by :func:`gradprobe.rollout.guided.guided_logprobs` (charged to
``training`` as training charges it; its seconds are part of each entry's ``seconds_per_update``), and the
cost yardstick's update is the guided update (TIS). The plain forward of the guided rows, l(y | x) for
the weights (training has it from the loss's own forward), is the probe's work (charged to ``probe``).
"""

from __future__ import annotations

import dataclasses
import time

import torch
from torch import Tensor

from ..grpo.importance import get_importance_sampling
from ..grpo.losses import logprob_mismatch
from ..ledger import Ledger, batch_flops_per_token
from ..logprobs import token_logprobs
from ..rollout.guided import (REFERENCE_SOLUTIONS, GuidanceError, check_hint_reaches_prompt, collect_guided_rollouts,
                              guidance_stats, guided_logprobs, has_reference_solution, hint_text, task_kind)
from ..tasks.prompts import encode_prompt

__all__ = ["check_guided_task", "check_guided_prompts", "sample_guided_batch", "importance_weights",
           "guidance_entry", "pool_guidance"]

_FIX = "remove --guidance (guidance=None)"


def check_guided_task(config, task=None) -> None:
    """Refuse a guided probe whose task has no reference solution to take hints from (before any compute).

    A task object with its own ``reference_solution(problem)`` passes (:mod:`gradprobe.tasks.solutions`).

    Raises
    ------
    GuidanceError
        Naming the task (``config.task.spec``), the tasks with reference solutions and the fix.
    """
    if config.guidance is None or has_reference_solution(config.task.spec) \
            or callable(getattr(task, "reference_solution", None)):
        return
    raise GuidanceError(f"guidance (--guidance): task {config.task.spec!r} has no reference solution to take hints "
                        f"from; guidance works with tasks {', '.join(sorted(REFERENCE_SOLUTIONS))} (or a task "
                        f"with its own reference_solution); use such a task or {_FIX}")


def check_guided_prompts(config, policy, task, problems: list) -> None:
    """Refuse a model whose prompt format drops the hint, as training does
    (:func:`gradprobe.rollout.guided.check_hint_reaches_prompt`), before any rollout.

    Only when some completion is guided (k > 0); an empty hint (prefix 0) is not a dropped one.

    Raises
    ------
    GuidanceError
        The message of :func:`~gradprobe.rollout.guided.check_hint_reaches_prompt` (it names the fix:
        a model that reads its whole prompt), plus the probe's own fix; or a problem without a reference
        solution (named).
    """
    g = config.guidance
    if g is None or g.guided_per_group(config.batch.group) == 0:
        return
    kind, tok = task_kind(config.task.spec), policy.tokenizer
    for p in problems:
        hint = hint_text(p, kind, g, task)
        try:
            check_hint_reaches_prompt(tok, p, hint, plain_ids=encode_prompt(tok, p.question))
        except GuidanceError as e:
            raise GuidanceError(f"{e}; for the probe: --model with such a template, or {_FIX}") from None


def sample_guided_batch(config, policy, task, problems: list, sampler, ledger: Ledger):
    """Stage 1 of a guided probe: the guided arm's training batch, through the collection training uses
    (:func:`gradprobe.rollout.guided.collect_guided_rollouts`, ``rollout`` tokens; hint prefill FLOPs to
    ``generation``)."""
    return collect_guided_rollouts(policy, task, problems, group_size=config.batch.group, sampler=sampler,
                                   sampling=config.sampling, guidance=config.guidance,
                                   kind=task_kind(config.task.spec), ledger=ledger, category="rollout")


@dataclasses.dataclass(frozen=True)
class ImportanceWeights:
    """The guided update's per-token importance weights on the probe batch.

    Attributes
    ----------
    weights : Tensor, shape (N, T), float64
        W_nt (module docstring): min(exp(l(y|x) - l(y|x, hint)), C) on scored guided tokens, 1 elsewhere.
    sampler_logp : Tensor, shape (N, T)
        l(y_t | x, hint, y_<t) of the guided rows (NaN on unguided and empty-hint rows), the update's
        ``sampler_logp``.
    cap : float
        C.
    stats : dict
        :func:`guidance_entry`'s record.
    scoring_seconds : float
        Wall-seconds of the hinted forward (training charges it to ``device_seconds["training"]``).
    """

    weights: Tensor
    sampler_logp: Tensor
    cap: float
    stats: dict
    scoring_seconds: float


def _plain_logprobs(model, batch, rows: list[int], micro_batch_size: int) -> Tensor:
    """l(y_t | x, y_<t) of ``rows`` under the plain prompt x (no-grad forwards), shape (len(rows), T)."""
    index = torch.tensor(rows, dtype=torch.long, device=batch.input_ids.device)
    ids, am = batch.input_ids[index], batch.attention_mask[index]
    with torch.no_grad():
        return torch.cat([token_logprobs(model, ids[s: s + micro_batch_size], am[s: s + micro_batch_size],
                                         batch.prompt_length, temperature=batch.temperature)
                          for s in range(0, len(rows), micro_batch_size)])


def importance_weights(config, model, batch, ledger: Ledger, *, micro_batch_size: int) -> ImportanceWeights:
    """W (N, T) of the guided update at the current parameters, and its record.

    The hinted forward is :func:`gradprobe.rollout.guided.guided_logprobs` (the model's own attention, the
    probe's kernel; charged to ``training`` as in training); the plain forward of the scored rows is
    charged to ``probe``. The weights are the registered ``tis`` correction's
    (:data:`gradprobe.grpo.importance.IMPORTANCE_SAMPLINGS`), as :func:`~gradprobe.grpo.step.loss_and_backward`
    computes them from its own forward.
    """
    t0 = time.perf_counter()
    sampler_logp = guided_logprobs(model, batch, micro_batch_size=micro_batch_size, attention=None, ledger=ledger)
    scoring = time.perf_counter() - t0
    mask = batch.completion_mask.bool().to(sampler_logp.device)
    rows = [r for r in range(batch.num_rows) if bool(torch.isfinite(sampler_logp[r][mask[r]]).any())]
    train = torch.zeros_like(sampler_logp)
    if rows:
        with ledger.timed("probe"):
            train[rows] = _plain_logprobs(model, batch, rows, micro_batch_size).to(train.dtype)
        ledger.add_flops("probe", int(mask[rows].sum()) * batch_flops_per_token(model, batch))
    cap = float(config.guidance.cap)
    w = get_importance_sampling("tis").weights(train, sampler_logp, mask, cap).to(torch.float64)
    w = torch.where(mask, w, torch.ones_like(w))
    stats = guidance_entry(batch, w, sampler_logp, cap, logprob_mismatch(train, sampler_logp, mask))
    return ImportanceWeights(weights=w, sampler_logp=sampler_logp, cap=cap, stats=stats, scoring_seconds=scoring)


def guidance_entry(batch, weights: Tensor, sampler_logp: Tensor, cap: float, mismatch: dict) -> dict:
    """Each entry's ``guidance`` record in ``probe.json``.

    Parameters
    ----------
    batch : RolloutBatch
        From :func:`sample_guided_batch`.
    weights, sampler_logp : Tensor, shape (N, T)
        W and l(y | x, hint) (:class:`ImportanceWeights`).
    cap : float
        C.
    mismatch : dict
        :func:`gradprobe.grpo.losses.logprob_mismatch` of l(y | x) against l(y | x, hint).

    Returns
    -------
    dict
        ``config`` (fraction, prefix, cap); training's figures (:func:`gradprobe.rollout.guided.guidance_stats`:
        ``guided_rows``, ``empty_hint_rows``, ``hint_tokens`` (charged, tokens), ``guided_reward_mean`` and
        ``unguided_reward_mean`` (fraction), ``is_weight`` (``mean``, ``min``, ``max``, ``capped_fraction``,
        ``cap`` over ALL completion tokens, unguided ones weighing 1, as ``metrics.jsonl`` records them) and
        ``logp_shift`` (nats, over the scored guided tokens)); ``completion_tokens`` (all, the weights'
        denominator), ``guided_tokens`` (scored guided tokens, those with a hinted context) and
        ``guided_weight_mean`` / ``guided_capped_fraction`` (over those alone; None without any).
    """
    mask = batch.completion_mask.bool().to(weights.device)
    wm = weights[mask]
    step = {"is_weight": {"mean": float(wm.mean()) if wm.numel() else 1.0,
                          "min": float(wm.min()) if wm.numel() else 1.0,
                          "max": float(wm.max()) if wm.numel() else 1.0,
                          "capped_fraction": float((wm >= cap).double().mean()) if wm.numel() else 0.0, "cap": cap},
            "sampler_mismatch": mismatch}
    out = {"config": dict(batch.metadata["guidance"]["config"]), **guidance_stats(batch, step)}
    gw = weights[mask & torch.isfinite(sampler_logp)]
    out.update(completion_tokens=int(mask.sum()), guided_tokens=int(gw.numel()),
               guided_weight_mean=float(gw.mean()) if gw.numel() else None,
               guided_capped_fraction=float((gw >= cap).double().mean()) if gw.numel() else None)
    return out


def _pooled_mean(pairs) -> float | None:
    """sum_k n_k m_k / sum_k n_k over the (n_k, m_k) whose mean m_k is not None; None when no count is left."""
    pairs = [(n, m) for n, m in pairs if m is not None]
    total = sum(n for n, _ in pairs)
    return sum(n * m for n, m in pairs) / total if total else None


def pool_guidance(records: list[dict], rows: list[int]) -> dict:
    """One ``guidance`` record of several probe batches (:func:`gradprobe.probe.batches.combine_batches`).

    Parameters
    ----------
    records : list of dict, length N
        The batches' :func:`guidance_entry` records.
    rows : list of int, length N
        Each batch's completions (rows: prompts x group), the denominators of its unguided reward mean
        (with its ``guided_rows``).

    Returns
    -------
    dict
        ``config`` batch 0's (every batch has the same); ``guided_rows``, ``empty_hint_rows``, ``hint_tokens``,
        ``completion_tokens`` and ``guided_tokens`` summed; each mean the batches' means weighted by what it
        averages over (sum n_k m_k / sum n_k, batches without one left out): ``guided_reward_mean`` by
        guided rows, ``unguided_reward_mean`` by the other rows (NaN scores, which a batch's mean ignores, are
        not in the records: counted), ``is_weight`` ``mean`` and ``capped_fraction`` by completion tokens,
        ``guided_weight_mean`` / ``guided_capped_fraction`` by guided tokens, ``logp_shift``'s
        ``mean_abs_diff``, ``kl_k1`` and ``kl_k3`` by its scored ``tokens`` (summed; 0 when none, as one
        batch records it); ``min`` and ``max`` / ``max_abs_diff`` over the batches.

    Raises
    ------
    ValueError
        ``rows`` not one count per record.
    """
    if len(rows) != len(records):
        raise ValueError(f"pool_guidance: {len(records)} guidance records but {len(rows)} row counts")
    out = dict(records[0])
    for key in ("guided_rows", "empty_hint_rows", "hint_tokens", "completion_tokens", "guided_tokens"):
        out[key] = int(sum(r[key] for r in records))
    out["guided_reward_mean"] = _pooled_mean((r["guided_rows"], r["guided_reward_mean"]) for r in records)
    out["unguided_reward_mean"] = _pooled_mean((n - r["guided_rows"], r["unguided_reward_mean"])
                                               for n, r in zip(rows, records))
    iw = [r["is_weight"] for r in records]
    if all(w is not None for w in iw):
        pooled_iw = _pooled_mean((r["completion_tokens"], w["mean"]) for r, w in zip(records, iw))
        pooled_cf = _pooled_mean((r["completion_tokens"], w["capped_fraction"]) for r, w in zip(records, iw))
        out["is_weight"] = dict(iw[0], mean=1.0 if pooled_iw is None else pooled_iw,
                                capped_fraction=0.0 if pooled_cf is None else pooled_cf,
                                min=min(w["min"] for w in iw), max=max(w["max"] for w in iw))
    shifts = [r.get("logp_shift") for r in records]
    if all(s is not None for s in shifts):
        tokens = int(sum(s["tokens"] for s in shifts))
        out["logp_shift"] = dict(shifts[0], max_abs_diff=max(s["max_abs_diff"] for s in shifts), tokens=tokens,
                                 **{key: _pooled_mean((s["tokens"], s[key]) for s in shifts) if tokens else 0.0
                                    for key in ("mean_abs_diff", "kl_k1", "kl_k3")})
    out.update(guided_weight_mean=_pooled_mean((r["guided_tokens"], r["guided_weight_mean"]) for r in records),
               guided_capped_fraction=_pooled_mean((r["guided_tokens"], r["guided_capped_fraction"]) for r in records))
    return out
