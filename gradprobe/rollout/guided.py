"""Off-context guidance: some completions of each group are sampled with a hint, trained without it.

An arm with ``guidance = {fraction = 0.25, prefix = 0.5}`` samples ``k = round(fraction * G)``
of each group's G completions from a *guided* prompt: the question plus the first
``floor(prefix * S)`` of the S reasoning lines of the task's reference solution, as a hint
(:data:`HINT_HEADER`). The other G - k completions are ordinary rollouts. Every completion is
then stored, scored and trained under the *unguided* prompt x: the policy learns to produce
y without the hint. Because y was drawn from pi_theta(. | x, hint), not from pi_theta(. | x),
each of its tokens is weighted by a detached, truncated importance ratio

    w_t = min( pi_theta(y_t | x, y_<t) / pi_theta(y_t | x, hint, y_<t), C ),   C = ``cap`` (default 2)

and the loss is the arm's usual objective of the unguided log-probabilities l_t(theta) =
log pi_theta(y_t | x, y_<t) times w_t (advantages are the reward's, from the whole group,
guided and unguided completions together). Sources: the off-context ratio, numerator under the
hint-free context and denominator under the hinted context that sampled y, is Guide-GRPO's
(Nath et al. 2025, "Adaptive Guidance Accelerates Reinforcement Learning of Reasoning Models",
arXiv 2506.13923, sec. 2); the per-token truncation at C is truncated importance sampling
(Yao et al. 2025; TRL ``vllm_importance_sampling_mode="token_truncate"``), the same machinery
that corrects a vLLM sampler's mismatch. Mixing off-policy completions into the GRPO group is
LUFFY's mixed-policy GRPO (Yan et al. 2025, arXiv 2504.14945; LUFFY shapes the ratio with
x / (x + 0.1) instead of truncating it). In the code the hinted context's log-probabilities are
the "sampler" log-probabilities of :func:`gradprobe.grpo.step.grpo_step`
(``importance_sampling="tis"``, ``is_cap = cap``; :func:`~gradprobe.grpo.losses.truncated_is_weights`),
which is exactly what they are: the distribution y was sampled from. An unguided row, and a
guided row whose hint is empty (its context IS x), has no such log-probabilities (NaN) and
weight exactly 1; with ``iterations > 1`` the base of the ratio is pi_old(y_t | x, y_<t), so
ratio x weight = pi_theta(y_t | x, y_<t) / pi_old(y_t | x, hint, y_<t), Guide's ratio.

Compute (DESIGN.md, "The compute ledger"): completion tokens of guided rows are ordinary
``rollout`` tokens. The hint tokens are extra prompt tokens the sampler processes once per
guided completion: their forward FLOPs go to ``flops["generation"]`` (their seconds are inside
the sampling call's, ``device_seconds["generation"]``). The no-grad forward that scores guided
completions under the hinted context is training work (like pi_old's forward):
(hint + completion tokens) x forward FLOPs per token to ``flops["training"]``, its wall time to
``device_seconds["training"]``.

The settings, hints and guided prompts are in :mod:`gradprobe.rollout.guidance` (torch-free; every
name is re-exported here). Reference solutions (:data:`REFERENCE_SOLUTIONS`, keyed by task kind, the plan's ``[task] name``
before any ``":"``): ``chain_sum`` (the tiny tier's SFT target, :func:`gradprobe.tasks.chain_sum.chain_sum_target`),
``gsm8k`` and your own ``jsonl``/``hf`` data (``Problem.metadata["solution"]``; calculator
annotations ``<<...>>`` are dropped), ``gsm_symbolic`` (reasoning-gym's ``answer_cot``). A task
object may carry its own ``reference_solution(problem) -> str``; :func:`register_reference_solution`
adds a kind. Lines starting with ``####`` (the answer line) are never part of a hint.
"""


from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict

import torch

from ..ledger import forward_flops_per_token
from ..logprobs import token_logprobs
from ..models import use_attention
from ..tasks.prompts import encode_prompt
from .collect import build_batch, collect_rollouts, score_completions
from .guidance import (GUIDANCE_KEYS, HINT_HEADER, REFERENCE_SOLUTIONS, GuidanceConfig, GuidanceError,
                       check_hint_reaches_prompt, has_reference_solution, hint_text, hinted_question, parse_guidance,
                       reference_solution, register_reference_solution, solution_lines, task_kind)

__all__ = ["GUIDANCE_KEYS", "HINT_HEADER", "GuidanceConfig", "GuidanceError", "parse_guidance", "task_kind",
           "REFERENCE_SOLUTIONS", "register_reference_solution", "has_reference_solution", "reference_solution",
           "solution_lines", "hint_text", "hinted_question", "check_hint_reaches_prompt", "collect_guided_rollouts",
           "guided_logprobs", "guidance_stats"]


def collect_guided_rollouts(policy, task, problems: list, *, group_size: int, sampler, sampling,
                            guidance: GuidanceConfig, kind: str, ledger=None, category: str = "rollout"):
    """B problems x G completions, k of each group sampled with the hint, all stored under the plain prompt.

    Rows ``i * G + j`` with ``j < G - k`` are sampled from the plain prompt x_i (one sampler call
    for all of them), rows with ``j >= G - k`` from the guided prompt (x_i + hint_i; a second
    call). The batch's ``input_ids`` hold x_i for every row, so rewards, advantages and the loss
    see the unguided context; scores are ``task.score`` of the completion.

    Parameters
    ----------
    policy : gradprobe.models.Policy
    task : Task
    problems : list[Problem], length B
    group_size : int
        G.
    sampler : Sampler
    sampling : SamplingConfig
    guidance : GuidanceConfig
    kind : str
        The task kind (:func:`task_kind` of the plan's ``[task] name``) whose reference solutions
        give the hints.
    ledger : Ledger, optional
        Completion tokens (all rows) to ``generated_tokens[category]``; sampling seconds to
        ``device_seconds["generation"]``; the hint tokens' forward FLOPs (k x sum_i h_i tokens at
        the guided prompts' mean context) to ``flops["generation"]``.
    category : str

    Returns
    -------
    RolloutBatch
        As :func:`~gradprobe.rollout.collect.collect_rollouts`, with ``metadata["guidance"]``:
        ``guided_rows`` (row indices sampled with a hint, sorted), ``prompt_ids`` (B guided prompt
        id lists; equal to the plain ones where the hint is empty), ``hint_tokens`` (B ints, h_i =
        guided minus plain prompt length, tokens), ``charged_hint_tokens`` (k x sum_i h_i) and
        ``config``.

    Raises
    ------
    GuidanceError
        A problem without a reference solution.
    PromptTooLongError
        From the sampler, when a guided prompt plus ``max_new_tokens`` exceeds the context.
    """
    g = int(group_size)
    k = guidance.guided_per_group(g)
    if k == 0:
        batch = collect_rollouts(policy, task, problems, group_size=g, sampler=sampler, sampling=sampling,
                                 ledger=ledger, category=category)
        batch.metadata["guidance"] = {"guided_rows": [], "prompt_ids": [list(p) for p in batch.prompt_token_ids],
                                      "hint_tokens": [0] * len(problems), "charged_hint_tokens": 0,
                                      "config": asdict(guidance)}
        return batch
    tok = policy.tokenizer
    plain, guided = _guided_prompts(tok, task, problems, guidance, kind)
    hint_tokens = [len(a) - len(b) for a, b in zip(guided, plain)]
    start = time.perf_counter()
    free = sampler.sample(plain, num_samples=g - k, sampling=sampling, desc=category) if g > k else []
    hinted = sampler.sample(guided, num_samples=k, sampling=sampling, desc=f"{category} (guided)")
    seconds = time.perf_counter() - start
    samples, guided_rows = [], []
    for i in range(len(problems)):
        samples += free[i * (g - k): (i + 1) * (g - k)] + hinted[i * k: (i + 1) * k]
        guided_rows += range(i * g + g - k, (i + 1) * g)
    batch = build_batch(tok, problems, plain, samples, group_size=g, temperature=sampling.temperature)
    scores, errors = score_completions(task, batch.completions, [problems[r // g] for r in range(len(samples))])
    batch.scores = torch.tensor(scores, dtype=torch.float64)
    charged_hint = k * sum(hint_tokens)
    batch.metadata.update(sampler=type(sampler).__name__, generation_seconds=seconds, score_errors=errors,
                          max_new_tokens=sampling.max_new_tokens, category=category,
                          guidance={"guided_rows": guided_rows, "prompt_ids": guided, "hint_tokens": hint_tokens,
                                    "charged_hint_tokens": charged_hint, "config": asdict(guidance)})
    if ledger is not None:
        ledger.add_generated(category, batch.generated_tokens)
        ledger.add_seconds("generation", seconds)
        if charged_hint:
            context = sum(len(p) + h / 2 for p, h in zip(plain, hint_tokens)) / len(plain)
            ledger.add_flops("generation", charged_hint * forward_flops_per_token(policy.model, context))
    return batch


def _guided_prompts(tok, task, problems, guidance: GuidanceConfig, kind: str) -> tuple[list, list]:
    """(plain, guided) prompt ids of each problem (B lists each); a problem with an empty hint has
    guided = plain. Raises GuidanceError for a missing reference solution or a prompt format that
    drops the hint (:func:`check_hint_reaches_prompt`)."""
    plain = [list(encode_prompt(tok, p.question)) for p in problems]
    hints = [hint_text(p, kind, guidance, task) for p in problems]
    guided = [list(encode_prompt(tok, hinted_question(p.question, h))) if h else list(ids)
              for p, h, ids in zip(problems, hints, plain)]
    for p, h, a, b in zip(problems, hints, plain, guided):
        check_hint_reaches_prompt(tok, p, h, plain_ids=a, guided_ids=b)
    return plain, guided


def guided_logprobs(model, batch, *, micro_batch_size: int = 8, attention: str | None = "sdpa", ledger=None,
                    skip_empty_hints: bool = True):
    """l_t(y | x, hint) of the guided rows: the "sampler" log-probabilities of the importance weights.

    One no-grad forward of every guided row as [guided prompt, completion] (left-padded, position
    ids from the mask, at the batch's temperature: :func:`gradprobe.logprobs.token_logprobs`, the
    function the loss uses), at the current parameters (call it before the update).

    Parameters
    ----------
    model : transformers causal LM
    batch : RolloutBatch
        From :func:`collect_guided_rollouts` (``metadata["guidance"]``), on the model's device.
    micro_batch_size : int
        Rows per forward (results do not depend on it).
    attention : str or None
        Attention implementation of the forward (default ``sdpa``, the update's, so that an empty
        hint would give the loss's own values); None keeps the model's.
    ledger : Ledger, optional
        (hint + completion tokens of the scored rows) x forward FLOPs per token to
        ``flops["training"]``; the wall time to ``device_seconds["training"]``.
    skip_empty_hints : bool
        Leave rows whose hint is empty at NaN (their context is x itself: weight exactly 1, no
        forward). False scores them too (tests: the weight is then 1 up to rounding).

    Returns
    -------
    Tensor, shape (N, T), float32 (float64 for a float64 model)
        NaN on unguided rows (and on empty-hint rows when skipped) and off the completion mask.

    Raises
    ------
    GuidanceError
        A batch without ``metadata["guidance"]`` (not from :func:`collect_guided_rollouts`).
    """
    info = batch.metadata.get("guidance")
    if info is None:
        raise GuidanceError("guided_logprobs needs a batch from collect_guided_rollouts (metadata['guidance'])")
    g, n, t = batch.group_size, batch.num_rows, batch.completion_mask.shape[1]
    dtype = torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32
    device = batch.input_ids.device
    out = torch.full((n, t), math.nan, dtype=dtype, device=device)
    rows = [r for r in info["guided_rows"] if info["hint_tokens"][r // g] or not skip_empty_hints]
    if not rows:
        return out
    start = time.perf_counter()
    prompts = [info["prompt_ids"][r // g] for r in rows]
    p = max(len(x) for x in prompts)
    ids = torch.zeros((len(rows), p + t), dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), p + t), dtype=torch.long, device=device)
    for k, (r, prompt) in enumerate(zip(rows, prompts)):
        ids[k, p - len(prompt): p] = torch.tensor(prompt, dtype=torch.long, device=device)
        mask[k, p - len(prompt): p] = 1
    index = torch.tensor(rows, dtype=torch.long, device=device)
    ids[:, p:] = batch.input_ids[index, batch.prompt_length:]
    mask[:, p:] = batch.attention_mask[index, batch.prompt_length:]
    parts = []
    with contextlib.ExitStack() as stack, torch.no_grad():
        if attention is not None:
            stack.enter_context(use_attention(model, attention))
        for s in range(0, len(rows), micro_batch_size):
            parts.append(token_logprobs(model, ids[s: s + micro_batch_size], mask[s: s + micro_batch_size], p,
                                        temperature=batch.temperature).to(dtype))
    logp = torch.cat(parts)
    cmask = batch.completion_mask[index].bool()
    out[index] = torch.where(cmask, logp, torch.full_like(logp, math.nan))
    if ledger is not None:
        ledger.add_seconds("training", time.perf_counter() - start)
        hint = sum(info["hint_tokens"][r // g] for r in rows)
        context = sum(len(x) for x in prompts) / len(prompts) + float(cmask.sum(-1).double().mean()) / 2
        ledger.add_flops("training", (hint + int(cmask.sum())) * forward_flops_per_token(model, context))
    return out


def guidance_stats(batch, step: dict | None = None) -> dict:
    """The guidance figures of one update (the ``guidance`` field of a ``metrics.jsonl`` line).

    Parameters
    ----------
    batch : RolloutBatch
        From :func:`collect_guided_rollouts`.
    step : dict, optional
        :func:`~gradprobe.grpo.step.grpo_step`'s result with the guided log-probabilities as
        ``sampler_logp``: its ``is_weight`` (mean/min/max/capped share of w_t over ALL completion
        tokens; unguided tokens weigh 1) and ``sampler_mismatch`` (|l(y|x) - l(y|x,hint)| and the
        KL estimates over the scored guided tokens only, nats) are passed on.

    Returns
    -------
    dict
        ``guided_rows``, ``empty_hint_rows`` (guided rows whose hint is empty), ``hint_tokens``
        (charged: per guided completion), ``guided_reward_mean`` and ``unguided_reward_mean``
        (mean verifier score r in [0, 1], NaN scores ignored; None without such rows),
        ``is_weight`` and ``logp_shift`` (``sampler_mismatch`` without its ``unscored`` count, which
        would only count the unguided rows' tokens); both None without ``step``.
    """
    info = batch.metadata.get("guidance") or {}
    g = batch.group_size
    rows = list(info.get("guided_rows", []))
    guided = torch.zeros(batch.num_rows, dtype=torch.bool)
    guided[rows] = True
    scores = batch.scores.to(torch.float64).cpu()

    def mean(sel):
        s = scores[sel]
        s = s[~torch.isnan(s)]
        return float(s.mean()) if s.numel() else None

    step = step or {}
    shift = step.get("sampler_mismatch")
    if shift is not None:  # its "unscored" tokens are the unguided rows' (no hinted context): not a shift
        shift = {k: v for k, v in shift.items() if k != "unscored"}
    return {"guided_rows": len(rows),
            "empty_hint_rows": sum(1 for r in rows if not info["hint_tokens"][r // g]),
            "hint_tokens": int(info.get("charged_hint_tokens", 0)),
            "guided_reward_mean": mean(guided), "unguided_reward_mean": mean(~guided),
            "is_weight": step.get("is_weight"), "logp_shift": shift}
