"""Monte-Carlo step values shared by the dense rewards (DESIGN.md, "MC step values").

A completion y of length L is split into S steps at boundaries b_1 < ... < b_S = L - 1
(token indices, inclusive end of each step; :func:`split_steps`). From every internal
boundary s < S, K continuations are drawn from x + y[:b_s + 1] with the rollouts' sampling
settings and the completion's remaining length budget ``max_new_tokens - (b_s + 1)``, and

    V_s = (1/K) sum_k score(y[:b_s + 1] + continuation_k)       (Kazemnejad et al. 2024,
                                                                  VinePPO, eq. 6; Wang et
                                                                  al. 2024, Math-Shepherd)
    V_S = r_ij (the completion itself; 0 for a truncated one unless it scored),
    V_0 = mean_j r_ij over the valid members of the group.

Cost (DESIGN.md, "Check"): with S evenly spread steps, about K * L * (S - 1) / 2 continuation
tokens per completion. All continuations of a batch go to the sampler in ONE call (each
prefix with its own budget), are charged once to ``ledger.generated_tokens["continuation"]``
(wall time to ``device_seconds["generation"]``) and cached in ``ctx.cache`` so every dense
reward of the batch reuses them (a cache hit needs the same rollouts: the same batch object,
or one with equal ids, masks and scores, e.g. after ``batch.to(device)``).

Conventions:

* an empty completion (L = 0) has S = 0 steps: no boundaries, no values, no continuations;
  its advantages are 0 (it has no tokens), and ``mc_min`` uses r for it;
* a boundary whose remaining budget is <= 0 is not continued: V_s = r;
* rows with a missing reward (NaN) are not continued; their values are NaN and the dense
  rewards mark them invalid; a scorer exception on a continuation drops that continuation
  from the mean (counted in ``score_errors``); if all K fail, V_s is NaN (row invalid).
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..rollout.base import cut_at_eos
from ..rollout.collect import score_completions
from ..types import RolloutBatch

CACHE_KEY = "mc_step_values"
_TOKEN_TEXT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class MissingSamplerError(ValueError):
    """A Monte-Carlo reward was asked for without a sampler in its RewardContext."""


def newline_splitter(token_text: str) -> bool:
    """Default splitter: a step ends at a token whose decoded text contains a newline."""
    return "\n" in token_text


def _token_texts(tokenizer) -> dict:
    try:
        return _TOKEN_TEXT.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no memo
        return {}


def split_steps(completion_ids: list[int], tokenizer, *, max_steps: int,
                splitter: Callable[[str], bool] = newline_splitter) -> list[int]:
    """Step boundaries of one completion.

    Rules: a step ends at every token whose text (``tokenizer.decode([id])``) satisfies
    ``splitter`` (default: contains ``"\\n"``); the last step always ends at the last token; a
    step whose text (special tokens skipped) is blank, such as a trailing EOS or an empty
    line, joins the previous step (a leading blank one joins the next); with more than
    ``max_steps`` steps, adjacent steps are merged into ``max_steps`` groups of near-equal
    line counts (sizes differ by at most one).

    Parameters
    ----------
    completion_ids : list[int], length L
        Generated ids (EOS included, no padding).
    tokenizer : transformers tokenizer
    max_steps : int
        Upper bound on S (>= 1).
    splitter : callable(str) -> bool
        Whether a token's text ends a step.

    Returns
    -------
    list[int]
        b_1 < ... < b_S, with b_S = L - 1; ``[]`` when L = 0.

    Raises
    ------
    ValueError
        ``max_steps < 1``.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    ids = [int(t) for t in completion_ids]
    if not ids:
        return []
    memo = _token_texts(tokenizer)
    ends = []
    for t, tid in enumerate(ids):
        text = memo.get(tid)
        if text is None:
            text = memo[tid] = tokenizer.decode([tid])
        if splitter(text):
            ends.append(t)
    if not ends or ends[-1] != len(ids) - 1:
        ends.append(len(ids) - 1)
    kept: list[int] = []
    start = 0
    for e in ends:
        blank = not tokenizer.decode(ids[start: e + 1], skip_special_tokens=True).strip()
        if blank and kept:
            kept[-1] = e  # extend the previous step
        elif blank:
            continue  # leading blank: joins the next step (start unchanged)
        else:
            kept.append(e)
        start = e + 1
    if not kept:
        kept = [len(ids) - 1]
    n = len(kept)
    if n > max_steps:
        kept = [kept[((k + 1) * n) // max_steps - 1] for k in range(max_steps)]
    return kept


@dataclass
class StepValues:
    """MC step values of a batch (N rows).

    Attributes
    ----------
    boundaries : list[list[int]], length N
        b_1 < ... < b_S per row (S = 0 for an empty completion).
    values : list[list[float]], length N
        V_1 ... V_S per row, V_S = r; NaN on rows with a missing reward.
    v0 : list[float], length N
        V_0 = mean_j r of the row's group (valid members).
    rewards : list[float], length N
        r_ij (NaN = missing).
    group_size : int
        G.
    continuation_tokens : int
        Tokens of all continuations (each cut at its budget; padding excluded).
    row_continuation_tokens : list[int], length N
    requests : int
        Prefixes continued (each K times).
    score_errors : int
        Continuations whose scorer raised.
    truncated_continuations : int
        Continuations that hit their budget without EOS.
    seconds : float
        Wall seconds of the sampling call.
    """

    boundaries: list[list[int]]
    values: list[list[float]]
    v0: list[float]
    rewards: list[float]
    group_size: int
    continuation_tokens: int = 0
    row_continuation_tokens: list[int] = field(default_factory=list)
    requests: int = 0
    score_errors: int = 0
    truncated_continuations: int = 0
    seconds: float = 0.0

    @property
    def num_rows(self) -> int:
        return len(self.values)

    @property
    def num_steps(self) -> list[int]:
        """S per row."""
        return [len(b) for b in self.boundaries]

    def valid(self) -> torch.Tensor:
        """BoolTensor, shape (N,): finite r, V_0 and step values."""
        return torch.tensor([math.isfinite(r) and math.isfinite(v0) and all(math.isfinite(v) for v in vals)
                             for r, v0, vals in zip(self.rewards, self.v0, self.values)], dtype=torch.bool)

    def step_index(self, num_columns: int) -> torch.Tensor:
        """LongTensor, shape (N, T): 0-based step s - 1 of every token, -1 beyond the last boundary."""
        out = torch.full((self.num_rows, num_columns), -1, dtype=torch.long)
        cols = torch.arange(num_columns)
        for n, b in enumerate(self.boundaries):
            if b:
                idx = torch.searchsorted(torch.tensor(b, dtype=torch.long), cols)  # first b_s >= t
                out[n] = torch.where(idx < len(b), idx, torch.full_like(idx, -1))
        return out

    def stats(self) -> dict:
        steps = self.num_steps
        return {"num_steps": sum(steps) / max(len(steps), 1), "continuation_tokens": self.continuation_tokens,
                "continuation_requests": self.requests, "continuation_score_errors": self.score_errors,
                "truncated_continuations": self.truncated_continuations}


def _same_batch(a: RolloutBatch, b: RolloutBatch) -> bool:
    """The same rollouts (also after ``batch.to(device)``, which makes a new object)."""
    if a is b:
        return True
    if a.input_ids.shape != b.input_ids.shape or a.group_size != b.group_size:
        return False
    return (torch.equal(a.input_ids.cpu(), b.input_ids.cpu())
            and torch.equal(a.completion_mask.cpu(), b.completion_mask.cpu())
            and torch.allclose(a.scores.cpu(), b.scores.cpu(), rtol=0, atol=0, equal_nan=True))


def _group_means(rewards: list[float], num_prompts: int, group_size: int) -> list[float]:
    """V_0 per row, length N: the mean of the finite rewards of its group (NaN when none is finite)."""
    v0 = []
    for i in range(num_prompts):
        grp = [r for r in rewards[i * group_size:(i + 1) * group_size] if math.isfinite(r)]
        v0 += [sum(grp) / len(grp) if grp else math.nan] * group_size
    return v0


def _continuation_requests(batch: RolloutBatch, ctx, ids_per_row: list[list[int]], rewards: list[float]):
    """Split every completion into steps and list the prefixes to continue.

    Returns
    -------
    boundaries : list[list[int]], length N
    values : list[list[float]], length N
        V_s = r on every step for now (NaN on rows with a missing reward); the internal ones are
        overwritten by :func:`_score_continuations`.
    prompts : list[list[int]]
        One prompt per internal boundary with a positive budget: the problem's prompt ids + y[:b_s + 1].
    budgets : list[int]
        Its remaining length budget, ``max_new_tokens - (b_s + 1)`` tokens.
    owners : list[(int, int)]
        Its (row n, step s).
    """
    g = batch.group_size
    boundaries, values = [], []
    prompts, budgets, owners = [], [], []  # one request per internal boundary
    for n in range(batch.num_rows):
        b = split_steps(ids_per_row[n], ctx.tokenizer, max_steps=ctx.mc.max_steps)
        boundaries.append(b)
        r = rewards[n]
        vals = [r] * len(b)  # V_S = r; internal values overwritten below
        if not math.isfinite(r):
            vals = [math.nan] * len(b)
        else:
            for s, bs in enumerate(b[:-1]):
                budget = ctx.sampling.max_new_tokens - (bs + 1)
                if budget > 0:
                    prompts.append(batch.prompt_token_ids[n // g] + ids_per_row[n][: bs + 1])
                    budgets.append(budget)
                    owners.append((n, s))
        values.append(vals)
    return boundaries, values, prompts, budgets, owners


def _score_continuations(out: StepValues, batch: RolloutBatch, ctx, ids_per_row: list[list[int]],
                         prompts: list[list[int]], budgets: list[int], owners: list[tuple[int, int]], k: int) -> None:
    """Draw K continuations of every prefix in ONE sampler call, score them and fill ``out`` in place.

    Sets the internal V_s (mean of the finite scores of its K continuations, NaN when none),
    the token counts, truncations, score errors and seconds of ``out``; charges the tokens to
    ``ledger.generated_tokens["continuation"]`` and the wall time to ``device_seconds["generation"]``.

    Raises
    ------
    MissingSamplerError
        ``ctx.sampler`` is None.
    RuntimeError
        The sampler returned another number of samples than len(prompts) x K.
    """
    if ctx.sampler is None:
        raise MissingSamplerError("MC step values need continuations but RewardContext.sampler is None; "
                                  "pass a sampler (e.g. gradprobe.rollout.HFSampler)")
    g = batch.group_size
    start = time.perf_counter()
    samples = ctx.sampler.sample(prompts, num_samples=k, sampling=ctx.sampling, max_new_tokens=budgets,
                                 desc="mc continuations")
    out.seconds = time.perf_counter() - start
    if len(samples) != len(prompts) * k:
        raise RuntimeError(f"sampler returned {len(samples)} samples for {len(prompts)} prompts x {k}")
    texts, problems = [], []
    for q, (n, s) in enumerate(owners):
        prefix = ids_per_row[n][: out.boundaries[n][s] + 1]
        for c in range(k):
            smp = cut_at_eos(samples[q * k + c].token_ids, ctx.eos_token_ids, budgets[q])
            out.row_continuation_tokens[n] += len(smp.token_ids)
            out.truncated_continuations += int(smp.truncated)
            texts.append(ctx.tokenizer.decode(prefix + smp.token_ids, skip_special_tokens=True))
            problems.append(batch.problems[n // g])
    scores, out.score_errors = score_completions(ctx.task, texts, problems)
    for q, (n, s) in enumerate(owners):
        got = [x for x in scores[q * k:(q + 1) * k] if math.isfinite(x)]
        out.values[n][s] = sum(got) / len(got) if got else math.nan
    out.continuation_tokens = sum(out.row_continuation_tokens)
    ctx.ledger.add_generated("continuation", out.continuation_tokens)
    ctx.ledger.add_seconds("generation", out.seconds)


def mc_step_values(batch: RolloutBatch, ctx) -> StepValues:
    """Compute (or fetch from ``ctx.cache``) the MC step values of ``batch``.

    Parameters
    ----------
    batch : RolloutBatch
        N = B * G scored rollouts; ``prompt_token_ids`` are the continuations' prompts.
    ctx : RewardContext
        ``sampler`` (one ``sample`` call with ``num_samples = ctx.mc.continuations`` and a
        per-prefix ``max_new_tokens`` list), ``sampling``, ``mc.max_steps``, ``task.score``,
        ``tokenizer``, ``eos_token_ids``, ``ledger`` (charged once), ``cache``.

    Returns
    -------
    StepValues

    Raises
    ------
    MissingSamplerError
        Some prefix needs continuations and ``ctx.sampler`` is None.
    ValueError
        ``ctx.mc.continuations < 1``.
    """
    hit = ctx.cache.get(CACHE_KEY)
    if hit is not None and _same_batch(hit[0], batch):
        return hit[1]
    k = int(ctx.mc.continuations)
    if k < 1:
        raise ValueError(f"mc.continuations must be >= 1, got {k}")
    rewards = [float(x) for x in batch.scores.tolist()]
    lengths, comp = batch.completion_lengths.tolist(), batch.completion_ids
    ids_per_row = [comp[n, : lengths[n]].tolist() for n in range(batch.num_rows)]
    v0 = _group_means(rewards, batch.num_prompts, batch.group_size)
    boundaries, values, prompts, budgets, owners = _continuation_requests(batch, ctx, ids_per_row, rewards)
    out = StepValues(boundaries=boundaries, values=values, v0=v0, rewards=rewards, group_size=batch.group_size,
                     row_continuation_tokens=[0] * batch.num_rows, requests=len(prompts))
    if prompts:
        _score_continuations(out, batch, ctx, ids_per_row, prompts, budgets, owners, k)
    ctx.cache[CACHE_KEY] = (batch, out)
    return out
