"""Label-free majority-vote reward (TTRL: Zuo et al. 2025, "TTRL: Test-Time Reinforcement Learning").

Each group votes: every completion's final answer is parsed, the group's *majority answer* is
the most frequent parsed answer (a plurality, as in TTRL's ``Counter.most_common`` vote), and
a completion gets sequence reward 1 when its answer equals the majority answer, else 0. The
gold answer is never read for the reward (nor ``batch.scores``); it only feeds the diagnostic
``label_accuracy`` (TTRL's "label accuracy": how often the majority answer is the gold one).
The 1/0 rewards are then group-normalised exactly like ``outcome``
(:func:`~gradprobe.rewards.outcome.normalize_sequence_rewards` with the ``scale`` parameter,
default ``"group"`` as ``outcome``: ddof 1, eps 1e-4, zero-variance groups -> exactly 0).

Rules (one place; :func:`majority_vote_rewards`):

* parsing: :func:`gradprobe.tasks.verify.extract_answer` (the single-line rule of
  ``Task.score``: the first non-blank line after the last ``####``, else the last ``\\boxed{}``).
  Multi-line answers (reasoning-gym grids) are voted on their first answer line, since choosing
  the multi-line rule would read the gold's shape;
* equality: two answers are equal when :func:`~gradprobe.tasks.verify.normalize_number` gives
  the same exact number (``"12"``, ``"12.0"``, ``"$12"`` agree), else when their texts agree
  after collapsing spaces, case-folding and dropping a final full stop (LaTeX is compared as
  text; math-verify is not called in the vote);
* unparsable: no answer, or, for a task with ``numeric_answers``, an answer holding neither a
  number nor LaTeX (the rule of ``Task.format_rate``). An unparsable completion never forms
  the majority and gets reward 0 (counted, ``unparsable_completions``);
* ties: when two or more answers share the top count there is no majority: the whole group
  gets reward 0 (counted, ``tie_groups``; its advantages are 0, so it is also a zero-variance
  group). A lone parsable answer in a group is its majority (count 1 beats no other answer);
* a group in which no completion parses gets reward 0 (counted, ``unparsable_groups``).

Answer-span masking: the tokens of each completion's final-answer span (the characters that
``extract_answer`` returns, not the ``####`` marker nor the EOS) get advantage 0, so no
gradient reinforces the voted answer tokens themselves and the policy cannot collapse by
repeating whatever answer is currently popular; the tokens before the answer carry the
advantage (the same per-token path as the process rewards: a RewardOutput with
``advantages`` (N, T) zero on the masked tokens). A token is in the span when its characters
overlap it (:func:`answer_token_mask`); the decoded prefix lengths locate the tokens, which is
exact for tokenizers whose decoding is prefix-stable (the tiny tier's character tokenizer,
byte-level BPE).

Cost: no generated tokens (``generated_tokens == {}``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Hashable, Sequence

import torch

from ..grpo.advantages import DEFAULT_SCALE
from ..tasks.verify import ANSWER_MARKER, normalize_text, answers_match, extract_answer, looks_like_latex, normalize_number
from ..types import RolloutBatch
from .base import RewardContext, RewardOutput, register_reward
from .outcome import normalize_sequence_rewards

__all__ = ["answer_key", "majority_vote_rewards", "answer_span", "answer_token_mask", "answer_span_mask",
           "majority_vote"]


def answer_key(answer: str | None, *, numeric: bool = False) -> Hashable | None:
    """The vote key of a parsed answer (equality rule of the module docstring).

    Parameters
    ----------
    answer : str or None
        Output of :func:`~gradprobe.tasks.verify.extract_answer`.
    numeric : bool
        The task's ``numeric_answers``: an answer without a number or LaTeX is then unparsable.

    Returns
    -------
    tuple or None
        ``("number", "12")`` or ``("text", "x + 1")``; None when the answer is unparsable.
    """
    if answer is None or not answer.strip():
        return None
    number = normalize_number(answer)
    if number is not None:
        return ("number", number)
    if numeric and not looks_like_latex(answer):
        return None
    return ("text", normalize_text(answer))


def majority_vote_rewards(answers: Sequence[str | None], group_size: int, *,
                          numeric: bool = False) -> tuple[torch.Tensor, list, dict]:
    """Majority-vote sequence rewards of B groups (rules in the module docstring).

    Parameters
    ----------
    answers : sequence of (str or None), length N = B * G
        Parsed answers in row order ``n = i * G + j``; None = no answer.
    group_size : int
        G (>= 1).
    numeric : bool
        See :func:`answer_key`.

    Returns
    -------
    rewards : Tensor (float64), shape (N,)
        1.0 where the answer equals its group's majority answer, else 0.0 (no NaN).
    majority : list, length B
        Per group the raw answer text of the first completion voting for the majority, or None
        (tie or no parsable answer).
    stats : dict
        ``tie_groups``, ``unparsable_groups``, ``majority_groups`` (groups with a majority),
        ``unparsable_completions``, ``majority_share`` (mean fraction of a group agreeing with
        its majority, over majority groups; NaN when none).

    Raises
    ------
    ValueError
        ``group_size < 1`` or ``len(answers)`` not a multiple of it.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int (G), got {group_size!r}")
    if len(answers) % group_size:
        raise ValueError(f"{len(answers)} answers do not split into groups of G = {group_size}")
    keys = [answer_key(a, numeric=numeric) for a in answers]
    rewards = torch.zeros(len(answers), dtype=torch.float64)
    majority: list = []
    ties = no_answer = 0
    shares = []
    for start in range(0, len(keys), group_size):
        group = keys[start: start + group_size]
        counts = Counter(k for k in group if k is not None)
        if not counts:
            no_answer += 1
            majority.append(None)
            continue
        top = counts.most_common(2)
        if len(top) > 1 and top[0][1] == top[1][1]:
            ties += 1
            majority.append(None)
            continue
        winner = top[0][0]
        hits = [j for j, k in enumerate(group) if k == winner]
        rewards[[start + j for j in hits]] = 1.0
        majority.append(answers[start + hits[0]])
        shares.append(len(hits) / group_size)
    stats = {"tie_groups": ties, "unparsable_groups": no_answer, "majority_groups": len(shares),
             "unparsable_completions": sum(k is None for k in keys),
             "majority_share": sum(shares) / len(shares) if shares else math.nan}
    return rewards, majority, stats


def answer_span(text: str | None) -> tuple[int, int] | None:
    """Character span ``[start, end)`` of the final answer, so that ``text[start:end] == extract_answer(text)``.

    Same rule as :func:`~gradprobe.tasks.verify.extract_answer` (single-line, ``\\boxed`` fallback).

    Parameters
    ----------
    text : str or None
        A decoded completion.

    Returns
    -------
    tuple of int or None
        None when the completion has no answer.
    """
    if not text:
        return None
    markers = list(ANSWER_MARKER.finditer(text))
    if markers:
        pos = markers[-1].end()
        for line in text[pos:].splitlines(keepends=True):
            if line.strip():
                start = pos + len(line) - len(line.lstrip())
                return start, start + len(line.strip())
            pos += len(line)
        return None
    for m in reversed(list(re.finditer(r"\\boxed\s*\{", text))):  # the last balanced \boxed{...}
        depth = 1
        for i in range(m.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                inner = text[m.end(): i]
                if not inner.strip():
                    return None
                start = m.end() + len(inner) - len(inner.lstrip())
                return start, start + len(inner.strip())
    return None


def answer_token_mask(ids: Sequence[int], tokenizer) -> torch.Tensor:
    """Which tokens of one completion belong to its final-answer span.

    Token t covers the characters ``[f(t), f(t + 1))`` of the decoded completion, f(t) =
    ``len(tokenizer.decode(ids[:t], skip_special_tokens=True))``; it is in the span when that
    range overlaps :func:`answer_span`. f is searched by bisection (O(log L) decodes).

    Parameters
    ----------
    ids : sequence of int, length L
        Completion ids (EOS included, no padding).
    tokenizer : transformers tokenizer

    Returns
    -------
    BoolTensor, shape (L,)
        All False when the completion has no answer.
    """
    ids = [int(t) for t in ids]
    out = torch.zeros(len(ids), dtype=torch.bool)
    memo: dict[int, int] = {}

    def f(t: int) -> int:
        if t not in memo:
            memo[t] = len(tokenizer.decode(ids[:t], skip_special_tokens=True))
        return memo[t]

    text = tokenizer.decode(ids, skip_special_tokens=True)
    memo[len(ids)] = len(text)
    span = answer_span(text)
    if span is None:
        return out
    a, b = span

    def first(pred) -> int:  # smallest t in [0, L) with pred(t), pred monotone; L if none
        lo, hi = 0, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if pred(mid) else (mid + 1, hi)
        return lo

    t_lo = first(lambda t: f(t + 1) > a)
    t_hi = first(lambda t: f(t) >= b) - 1
    if t_lo <= t_hi:
        out[t_lo: t_hi + 1] = True
    return out


def answer_span_mask(batch: RolloutBatch, tokenizer) -> torch.Tensor:
    """:func:`answer_token_mask` of every completion of a batch.

    Returns
    -------
    BoolTensor, shape (N, T)
        True on answer-span tokens; always inside ``batch.completion_mask``.
    """
    out = torch.zeros(batch.completion_mask.shape, dtype=torch.bool)
    lengths, comp = batch.completion_lengths.tolist(), batch.completion_ids
    for n in range(batch.num_rows):
        if lengths[n]:
            out[n, : lengths[n]] = answer_token_mask(comp[n, : lengths[n]].tolist(), tokenizer)
    return out & batch.completion_mask.bool().cpu()


@register_reward("majority_vote", rollout_only=True)
def majority_vote(batch: RolloutBatch, ctx: RewardContext, *, scale: str = DEFAULT_SCALE) -> RewardOutput:
    """Label-free majority-vote reward with answer-span masking (rules in the module docstring).

    Parameters
    ----------
    batch : RolloutBatch
        N = B * G rollouts; ``completions`` are voted on, ``completion_ids`` (N, T) locate the
        answer tokens. ``scores`` and the gold answers are not used for the reward.
    ctx : RewardContext
        ``tokenizer`` (decodes completions to find the answer tokens), ``task``
        (``numeric_answers``, optional).
    scale : {"group", "batch", "none"}
        A key of :data:`gradprobe.grpo.advantages.SCALES` (registered: ``"group"``, as ``outcome``).

    Returns
    -------
    RewardOutput
        ``advantages`` (N, T) float64: the group-normalised vote reward on every token of a
        completion except its answer span (0 there and off the mask); ``valid`` all True;
        ``generated_tokens`` {}; ``stats``: ``missing``, ``zero_variance_groups``, ``groups``,
        ``valid``, ``mean_reward`` (mean vote reward), :func:`majority_vote_rewards`'s counts,
        ``masked_answer_tokens``, ``answer_span_missing`` (completions with a parsed answer
        whose tokens were not found; they are not masked), ``label_accuracy`` (fraction of
        majority groups whose majority answer matches the gold; diagnostic only, NaN when none).

    Raises
    ------
    ValueError
        ``ctx`` is None or has no tokenizer (the answer span cannot be located); unknown ``scale``.
    """
    if ctx is None or getattr(ctx, "tokenizer", None) is None:
        raise ValueError("reward 'majority_vote' needs a RewardContext with a tokenizer (to mask the answer "
                         "tokens); pass ctx=RewardContext(..., tokenizer=policy.tokenizer)")
    numeric = bool(getattr(ctx.task, "numeric_answers", False))
    answers = [extract_answer(c) for c in batch.completions]
    rewards, majority, vote = majority_vote_rewards(answers, batch.group_size, numeric=numeric)
    adv, valid, stats = normalize_sequence_rewards(rewards, batch, scale=scale)
    span = answer_span_mask(batch, ctx.tokenizer).to(adv.device)
    adv = adv.masked_fill(span, 0.0)
    missing_span = sum(1 for n, a in enumerate(answers) if a is not None and not bool(span[n].any()))
    golds = [(m, p.answer) for m, p in zip(majority, batch.problems) if m is not None]
    stats.update(vote)
    stats.update({"masked_answer_tokens": int(span.sum()), "answer_span_missing": missing_span,
                  "label_accuracy": (sum(answers_match(m, g) for m, g in golds) / len(golds)) if golds else math.nan})
    return RewardOutput(name="majority_vote", advantages=adv, valid=valid, generated_tokens={}, stats=stats)
