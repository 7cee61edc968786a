"""What the prompt-selection rules share: the rule interface (:class:`SelectionRule`), group outcomes,
and rolling out candidate groups before deciding which ones the update trains on.

The rules that filter on observed rewards (``dynamic``, ``greso``) roll out B candidates at a time
(:func:`sample_groups`), keep the informative groups (:func:`partition_informative`), fill a short batch
from the dropped ones (:func:`fill_from_dropped`) and charge kept groups as training generation and
dropped ones as ``selection`` (:func:`charge_and_build`), as the module docstring of
:mod:`gradprobe.difficulty.select` states.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
import torch

from ..ledger import forward_flops_per_token
from ..rollout import build_batch, score_completions
from ..tasks.prompts import encode_prompt

__all__ = ["SelectionRule", "RolledGroup", "group_outcomes", "is_informative", "sample_groups",
           "partition_informative", "fill_from_dropped", "charge_and_build", "mean_success"]


class SelectionRule:
    """One prompt-selection rule (a value of ``selection`` in a plan's arm), bound to its
    :class:`~gradprobe.difficulty.select.PromptSelector`.

    Subclasses set :attr:`name` (the key of
    :data:`~gradprobe.difficulty.config.SELECTION_RULE_CLASSES`) and implement :meth:`next_batch`;
    a rule with state of its own (``greso``) also overrides :meth:`state_dict` and
    :meth:`load_state_dict`. A rule that reads no candidates (``plain``) sets :attr:`draws_candidates`
    False: its selector then has no estimator and no selection state.

    Parameters
    ----------
    selector : PromptSelector
        The run's context: policy, task, pool, sampler, sampling, ``group`` (G), ``b`` (B), ``seed``,
        ``config``, ``estimator`` and :meth:`~gradprobe.difficulty.select.PromptSelector.candidates`.
    """

    name: str = ""
    #: True: the rule draws m x B candidates and its selector holds the difficulty estimator (every rule
    #: but ``plain``, whose selector holds nothing and whose checkpoint state is None)
    draws_candidates: bool = True

    def __init__(self, selector):
        self.selector = selector

    def next_batch(self, update: int, ledger) -> tuple[Any, dict]:
        """The update's batch of B scored groups and the rule's record (without the ``selection_*``
        costs, which :meth:`PromptSelector.next_batch` adds; None for ``plain``, which records nothing).
        Charges ``ledger`` as it goes."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Entries of the rule's own state to merge into the selector's checkpoint state ({} for none)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Continue from the selector's checkpoint state (the whole dict; nothing to read by default)."""


class RolledGroup(NamedTuple):
    """One candidate's rolled-out group, before the rule decides whether the update trains on it."""

    problem: Any
    prompt_ids: list[int]
    samples: list  # G rollout.Sample
    scores: list  # G verifier scores (NaN = no reward)
    tokens: int  # generated tokens of the G completions
    seconds: float  # the chunk's generation wall time, split by tokens (device-seconds)


def group_outcomes(scores: torch.Tensor, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(successes, attempts) per group from row scores (N,) = (B * G,); NaN rows are not attempts.

    A completion is a success iff its score is 1.0 (the verifier's exact match)."""
    s = scores.detach().cpu().to(torch.float64).view(-1, group_size)
    finite = torch.isfinite(s)
    return (((s == 1.0) & finite).sum(1).numpy().astype(np.float64), finite.sum(1).numpy().astype(np.float64))


def is_informative(scores) -> bool:
    """True when a group's scores (G,) have at least 2 finite values that are not all equal (a
    non-zero advantage for some completion); NaN scores are ignored."""
    t = torch.tensor(scores, dtype=torch.float64)
    r = t[torch.isfinite(t)]
    return bool(r.numel() >= 2 and r.max() != r.min())


def sample_groups(selector, problems, desc: str) -> tuple[list[RolledGroup], float]:
    """Roll out G completions of each problem and score them (nothing charged yet).

    Returns one :class:`RolledGroup` per problem (its ``seconds`` = the chunk's wall time split by
    generated tokens) and the chunk's wall time in seconds."""
    g, tok = selector.group, selector.policy.tokenizer
    prompt_ids = [list(encode_prompt(tok, p.question)) for p in problems]
    start = time.perf_counter()
    samples = selector.sampler.sample(prompt_ids, num_samples=g, sampling=selector.sampling, desc=desc)
    secs = time.perf_counter() - start
    texts = tok.batch_decode([x.token_ids for x in samples], skip_special_tokens=True)
    scores, _ = score_completions(selector.task, texts, [p for p in problems for _ in range(g)])
    chunk_tokens = sum(len(x.token_ids) for x in samples)
    entries = []
    for i, p in enumerate(problems):
        sm, sc = samples[i * g:(i + 1) * g], scores[i * g:(i + 1) * g]
        toks = sum(len(x.token_ids) for x in sm)
        share = toks / chunk_tokens if chunk_tokens else 1 / len(problems)
        entries.append(RolledGroup(p, prompt_ids[i], sm, sc, toks, secs * share))
    return entries, secs


def partition_informative(entries, kept: list, dropped: list, b: int) -> None:
    """Append each entry, in order, to ``kept`` while it is informative and fewer than ``b`` are kept,
    else to ``dropped`` (DAPO's dynamic-sampling filter)."""
    for entry in entries:
        if is_informative(entry.scores) and len(kept) < b:
            kept.append(entry)
        else:
            dropped.append(entry)


def fill_from_dropped(kept: list, dropped: list, b: int) -> int:
    """Move the earliest dropped groups to ``kept`` until it holds ``b`` (or ``dropped`` is empty): no
    informative group left within the candidates, train on zero-advantage ones. Returns how many moved."""
    filled = 0
    while len(kept) < b and dropped:
        kept.append(dropped.pop(0))
        filled += 1
    return filled


def mean_success(groups) -> float | None:
    """Share of finite scores equal to 1.0 over every completion of ``groups`` (None without any)."""
    all_scores = np.array([x for e in groups for x in e.scores], dtype=np.float64)
    finite = all_scores[np.isfinite(all_scores)]
    return float(np.mean(finite == 1.0)) if finite.size else None


def charge_and_build(selector, kept, dropped, seconds_total: float, ledger):
    """Charge kept groups as training generation and dropped ones as ``selection``; the batch of the kept.

    Generation seconds are split by tokens: the kept groups' share is ``generation``, the dropped
    groups' share ``selection``; each dropped group's tokens are ``selection`` tokens with their
    forward FLOPs at the mean context (prompt + half the mean completion) in ``flops["selection"]``.
    The kept groups' tokens are charged as ``rollout``."""
    ledger.add_seconds("generation", sum(e.seconds for e in kept))
    ledger.add_seconds("selection", sum(e.seconds for e in dropped))
    for e in dropped:
        ctx = len(e.prompt_ids) + e.tokens / max(len(e.samples), 1) / 2
        ledger.add_generated("selection", e.tokens)
        ledger.add_flops("selection", e.tokens * forward_flops_per_token(selector.policy.model, ctx))
    sampling = selector.sampling
    batch = build_batch(selector.policy.tokenizer, [e.problem for e in kept], [e.prompt_ids for e in kept],
                        [x for e in kept for x in e.samples], group_size=selector.group,
                        temperature=sampling.temperature, scores=[x for e in kept for x in e.scores])
    batch.metadata.update(sampler=type(selector.sampler).__name__, generation_seconds=seconds_total,
                          max_new_tokens=sampling.max_new_tokens, category="rollout")
    ledger.add_generated("rollout", batch.generated_tokens)
    return batch
