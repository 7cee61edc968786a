"""Rollouts: B problems x G samples -> a scored :class:`~gradprobe.types.RolloutBatch`.

:func:`build_batch` is the pure part (padding, masks, decoding), testable without a model;
:func:`collect_rollouts` adds prompt encoding, sampling, scoring and the ledger.

Layout (DESIGN.md, "Notation"; :mod:`gradprobe.types`): row ``n = i * G + j``; prompts
left-padded to P columns, completions right-padded to T columns with the tokenizer's pad id.
Masks come from the samples' lengths, never from ``id != pad``, so a first EOS equal to the
pad id (SmolLM2) stays in the completion. ``T = max(1, longest completion)``: a batch of
empty completions still has one (fully masked) column.
"""

from __future__ import annotations

import logging
import math
import time

import torch

from ..config import SamplingConfig
from ..types import RolloutBatch
from .base import Sample, Sampler
from ..tasks.prompts import encode_prompt


log = logging.getLogger(__name__)


def build_batch(tokenizer, problems, prompt_ids: list[list[int]], samples: list[Sample], *, group_size: int,
                temperature: float, scores=None) -> RolloutBatch:
    """Pad and mask B prompts x G samples into a :class:`RolloutBatch` (pure; no model).

    Parameters
    ----------
    tokenizer : transformers tokenizer
        ``pad_token_id`` fills padding; ``decode(..., skip_special_tokens=True)`` gives
        ``completions``.
    problems : list[Problem], length B
    prompt_ids : list[list[int]], length B
        Unpadded prompt ids.
    samples : list[Sample], length N = B * G, prompt-major
        Already cut after the first EOS (see :mod:`gradprobe.rollout.base`).
    group_size : int
        G.
    temperature : float
        Stored in the batch (log-probabilities are evaluated at it).
    scores : sequence of float, length N, optional
        r_ij; NaN (or None) for missing. Default: all NaN (unscored).

    Returns
    -------
    RolloutBatch
        ``input_ids``/``attention_mask`` (N, P + T), ``completion_mask`` (N, T) True on the
        first ``len(sample)`` columns, ``truncated`` (N,), ``scores`` (N,) float64.

    Raises
    ------
    ValueError
        Mismatched lengths (``len(prompt_ids) != B``, ``len(samples) != B * G``, ``len(scores) != N``)
        or a tokenizer without a pad id.
    """
    b, g = len(problems), int(group_size)
    if g < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if len(prompt_ids) != b:
        raise ValueError(f"build_batch: {len(prompt_ids)} prompts for {b} problems")
    n = b * g
    if len(samples) != n:
        raise ValueError(f"build_batch: expected B * G = {b} * {g} = {n} samples, got {len(samples)}")
    pad = tokenizer.pad_token_id
    if pad is None:
        raise ValueError("build_batch: the tokenizer has no pad_token_id (load it with gradprobe.models.load_policy)")
    p = max((len(x) for x in prompt_ids), default=0)
    t = max(1, max((len(s.token_ids) for s in samples), default=0))
    input_ids = torch.full((n, p + t), int(pad), dtype=torch.long)
    attention_mask = torch.zeros((n, p + t), dtype=torch.long)
    completion_mask = torch.zeros((n, t), dtype=torch.bool)
    for row, s in enumerate(samples):
        prompt = prompt_ids[row // g]
        if prompt:
            input_ids[row, p - len(prompt): p] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, p - len(prompt): p] = 1
        k = len(s.token_ids)
        if k:
            input_ids[row, p: p + k] = torch.tensor(s.token_ids, dtype=torch.long)
            attention_mask[row, p: p + k] = 1
            completion_mask[row, :k] = True
    if scores is None:
        score_t = torch.full((n,), math.nan, dtype=torch.float64)
    else:
        vals = [math.nan if v is None else float(v) for v in scores]
        if len(vals) != n:
            raise ValueError(f"build_batch: {len(vals)} scores for {n} samples")
        score_t = torch.tensor(vals, dtype=torch.float64)
    completions = tokenizer.batch_decode([s.token_ids for s in samples], skip_special_tokens=True)
    return RolloutBatch(
        problems=list(problems),
        group_size=g,
        input_ids=input_ids,
        attention_mask=attention_mask,
        prompt_length=p,
        completion_mask=completion_mask,
        completions=list(completions),
        truncated=torch.tensor([bool(s.truncated) for s in samples], dtype=torch.bool),
        scores=score_t,
        temperature=float(temperature),
        prompt_token_ids=[list(x) for x in prompt_ids],
    )


def score_completions(task, completions: list[str], problems: list, *,
                      max_warnings: int = 3) -> tuple[list[float], int]:
    """``task.score`` of every completion; NaN (logged, counted) where the scorer raised.

    Parameters
    ----------
    task : Task
        Anything with ``score(completion, problem) -> float``.
    completions : list[str], length N
    problems : list[Problem], length N
        The problem of each completion.
    max_warnings : int
        Errors logged one by one; the rest are summarised in one warning.

    Returns
    -------
    scores : list[float], length N
    errors : int
        Completions whose scorer raised.
    """
    out, errors = [], 0
    for n, (c, prob) in enumerate(zip(completions, problems)):
        try:
            out.append(float(task.score(c, prob)))
        except Exception as e:  # a verifier crash must not lose the batch: mask the row instead
            errors += 1
            out.append(math.nan)
            if errors <= max_warnings:
                log.warning("scorer %r raised on completion %d (problem %s): %s: %s; score set to NaN (masked)",
                            type(task).__name__, n, getattr(prob, "id", "?"), type(e).__name__, e)
    if errors > max_warnings:
        log.warning("scorer %r raised on %d of %d completions in all (%d not shown); those scores are NaN (masked)",
                    type(task).__name__, errors, len(completions), errors - max_warnings)
    return out, errors


def collect_rollouts(policy, task, problems: list, *, group_size: int, sampler: Sampler, sampling: SamplingConfig,
                     ledger=None, category: str = "rollout", desc: str | None = None) -> RolloutBatch:
    """Sample G completions of every problem and score them.

    Parameters
    ----------
    policy : gradprobe.models.Policy
        Its tokenizer encodes prompts (:func:`gradprobe.tasks.prompts.encode_prompt`) and pads.
    task : Task
        ``score(completion, problem) -> float`` (1.0 / 0.0).
    problems : list[Problem], length B
    group_size : int
        G.
    sampler : Sampler
        Called once with ``num_samples=G``.
    sampling : SamplingConfig
    ledger : Ledger, optional
        Completion tokens (padding excluded) are charged to ``ledger.generated_tokens[category]``;
        the sampling wall time to ``device_seconds["generation"]`` (``"eval"`` for
        ``category="eval"``).
    category : {"rollout", "continuation", "selection", "eval"}
    desc : str, optional
        Progress-bar label.

    Returns
    -------
    RolloutBatch
        N = B * G rows; ``scores`` float64 with NaN where the scorer raised;
        ``metadata``: ``sampler``, ``generation_seconds``, ``score_errors``, ``max_new_tokens``,
        ``category``.

    Raises
    ------
    PromptTooLongError
        From the sampler, when a prompt plus ``max_new_tokens`` exceeds the context.
    ValueError
        Unknown ledger category.
    """
    if ledger is not None and category not in ledger.generated_tokens:
        raise ValueError(f"ledger category {category!r} is not one of {tuple(ledger.generated_tokens)}")
    tok = policy.tokenizer
    prompt_ids = [list(encode_prompt(tok, p.question)) for p in problems]
    start = time.perf_counter()
    samples = sampler.sample(prompt_ids, num_samples=group_size, sampling=sampling, desc=desc or category)
    seconds = time.perf_counter() - start
    batch = build_batch(tok, problems, prompt_ids, samples, group_size=group_size, temperature=sampling.temperature)
    row_problems = [problems[r // group_size] for r in range(len(samples))]
    scores, errors = score_completions(task, batch.completions, row_problems)
    batch.scores = torch.tensor(scores, dtype=torch.float64)
    batch.metadata.update(sampler=type(sampler).__name__, generation_seconds=seconds, score_errors=errors,
                          max_new_tokens=sampling.max_new_tokens, category=category)
    if ledger is not None:
        ledger.add_generated(category, batch.generated_tokens)
        ledger.add_seconds("eval" if category == "eval" else "generation", seconds)
    return batch
