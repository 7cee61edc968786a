"""Checking the steps of completions with a line verifier, and their process advantages.

Rules (one place for the process rewards and :func:`gradprobe.rewards.fidelity.trace_fidelity`):
steps are :func:`gradprobe.rewards.steps.split_steps` of a completion's tokens, never merged;
every non-blank line of a step that does not start with ``####`` goes to the verifier; a step
is *invalid* if any of its lines is, else *valid* if any is, else *neutral*; a line whose
verifier raises makes its step *masked* (no step reward, advantage 0, counted). The per-step
rewards (valid 1, invalid 0) go through the ``mc_value`` path
(:func:`gradprobe.rewards.dense.mc_value_advantages`). Full rules: :mod:`gradprobe.rewards.process`.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass
from typing import Sequence

import torch

from ..types import RolloutBatch
from .base import RewardContext, RewardFunctionError
from .dense import mc_value_advantages
from .steps import StepValues, _same_batch, split_steps
from .verifiers import LineVerifier, step_verifier_spec

__all__ = ["VALID", "INVALID", "NEUTRAL", "MASKED", "CACHE_KEY", "StepCheck", "check_steps", "ProcessSteps",
           "process_steps", "process_advantages"]

VALID, INVALID, NEUTRAL, MASKED = "valid", "invalid", "neutral", "masked"
CACHE_KEY = "process_steps"

@dataclass
class StepCheck:
    """Verdicts on one completion's steps.

    Attributes
    ----------
    statuses : list[str]
        Per step: ``valid``, ``invalid``, ``neutral`` (no line judged; answer lines) or ``masked``
        (the verifier raised).
    error : str or None
        The first exception raised, as ``"Type: message"``.
    """

    statuses: list[str]
    error: str | None = None

    def count(self, status: str) -> int:
        return self.statuses.count(status)

    @property
    def steps(self) -> int:
        """Steps the verifier was asked about and did not call neutral (valid + invalid + masked)."""
        return len(self.statuses) - self.count(NEUTRAL)


def check_steps(steps: Sequence[str], problem, verifier: LineVerifier, *, name: str = "step verifier") -> StepCheck:
    """Run a line verifier over the steps of one completion (rules in the module docstring).

    Parameters
    ----------
    steps : sequence of str, length S
        Step texts in order (each one or more lines).
    problem : Problem
    verifier : LineVerifier

    Returns
    -------
    StepCheck
        ``statuses`` of length S.

    Raises
    ------
    RewardFunctionError
        The verifier returned something other than True, False or None (raising is fine).
    """
    previous: list[str] = []
    statuses, error = [], None
    for step in steps:
        verdicts = []
        for raw in step.splitlines():
            line = raw.strip()
            if not line or line.startswith("####"):
                continue
            try:
                r = verifier(line, problem, tuple(previous))
            except Exception as e:  # a crash masks the step; the run goes on
                verdicts.append(MASKED)
                previous.append(line)
                error = error or f"{type(e).__name__}: {e}"
                continue
            if r is None:
                continue
            if not (isinstance(r, bool) or type(r).__name__ == "bool_"
                    or (isinstance(r, numbers.Integral) and int(r) in (0, 1))):
                raise RewardFunctionError(f"{name} returned {type(r).__name__} {r!r} on line {line!r}; "
                                          "expected True, False or None")
            verdicts.append(VALID if r else INVALID)
            previous.append(line)
        statuses.append(next((s for s in (MASKED, INVALID, VALID) if s in verdicts), NEUTRAL))
    return StepCheck(statuses, error)


@dataclass
class ProcessSteps:
    """Step verdicts of a batch (N rows).

    Attributes
    ----------
    boundaries : list[list[int]], length N
        :func:`~gradprobe.rewards.steps.split_steps` boundaries b_1 < ... < b_S per row (tokens).
    checks : list[StepCheck], length N
        Verdicts on those steps.
    seconds : float
        Wall seconds of splitting and verifying (recorded as ``device_seconds["reward"]``).
    """

    boundaries: list[list[int]]
    checks: list[StepCheck]
    seconds: float

    def step_values(self, group_size: int) -> StepValues:
        """Per-step rewards as :class:`StepValues` for :func:`mc_value_advantages`.

        Only valid (1.0) and invalid (0.0) steps are kept; ``rewards`` is each row's mean step
        reward (0.0 without scored steps) and ``v0`` its group's mean.
        """
        bounds, values, rewards = [], [], []
        for b, chk in zip(self.boundaries, self.checks):
            kept = [(e, 1.0 if s == VALID else 0.0) for e, s in zip(b, chk.statuses) if s in (VALID, INVALID)]
            bounds.append([e for e, _ in kept])
            values.append([v for _, v in kept])
            rewards.append(sum(values[-1]) / len(kept) if kept else 0.0)
        v0 = []
        for i in range(0, len(rewards), group_size):
            grp = rewards[i: i + group_size]
            v0 += [sum(grp) / len(grp)] * len(grp)
        return StepValues(boundaries=bounds, values=values, v0=v0, rewards=rewards, group_size=group_size,
                          seconds=self.seconds)

    def masked_tokens(self, num_columns: int) -> torch.Tensor:
        """BoolTensor, shape (N, T): tokens of masked steps (the verifier raised)."""
        out = torch.zeros((len(self.checks), num_columns), dtype=torch.bool)
        for n, (b, chk) in enumerate(zip(self.boundaries, self.checks)):
            start = 0
            for e, s in zip(b, chk.statuses):
                if s == MASKED:
                    out[n, start: e + 1] = True
                start = e + 1
        return out

    def stats(self) -> dict:
        c = {s: sum(chk.count(s) for chk in self.checks) for s in (VALID, INVALID, MASKED)}
        scored = c[VALID] + c[INVALID]
        errors = [chk.error for chk in self.checks if chk.error]
        return {"valid_steps": c[VALID], "invalid_steps": c[INVALID], "verifier_errors": c[MASKED],
                "verifier_error_example": errors[0] if errors else None,
                "no_step_completions": sum(1 for chk in self.checks if chk.count(VALID) + chk.count(INVALID) == 0),
                "step_validity_rate": c[VALID] / scored if scored else math.nan,
                "num_steps": scored / max(len(self.checks), 1), "verifier_seconds": self.seconds}


def process_steps(batch: RolloutBatch, ctx: RewardContext, verifier: LineVerifier | None = None) -> ProcessSteps:
    """Split and verify every completion of ``batch`` (cached in ``ctx.cache`` per verifier).

    Parameters
    ----------
    batch : RolloutBatch
        N = B * G rollouts; ``completion_ids`` (N, T) are split with ``ctx.tokenizer``.
    ctx : RewardContext
        ``tokenizer``, ``task`` (for its verifier when ``verifier`` is None), ``ledger`` (the wall
        time goes to ``device_seconds["reward"]`` once per batch and verifier), ``cache``.
    verifier : LineVerifier, optional
        Default: :func:`step_verifier_spec` of ``ctx.task``.

    Raises
    ------
    UnknownTaskKindError
        No verifier given and none for the task.
    RewardFunctionError
        The verifier returned a value other than True, False or None.
    """
    if verifier is None:
        verifier = step_verifier_spec(ctx.task).line
    cache = ctx.cache.setdefault(CACHE_KEY, {})
    hit = cache.get(verifier)
    if hit is not None and _same_batch(hit[0], batch):
        return hit[1]
    start = time.perf_counter()
    g, lengths, comp = batch.group_size, batch.completion_lengths.tolist(), batch.completion_ids
    name = getattr(verifier, "__name__", repr(verifier))
    boundaries, checks = [], []
    for n in range(batch.num_rows):
        ids = comp[n, : lengths[n]].tolist()
        b = split_steps(ids, ctx.tokenizer, max_steps=max(len(ids), 1))
        texts, s = [], 0
        for e in b:
            texts.append(ctx.tokenizer.decode(ids[s: e + 1], skip_special_tokens=True))
            s = e + 1
        boundaries.append(b)
        checks.append(check_steps(texts, batch.problems[n // g], verifier, name=name))
    out = ProcessSteps(boundaries, checks, time.perf_counter() - start)
    ctx.ledger.add_seconds("reward", out.seconds)
    cache[verifier] = (batch, out)
    return out


def process_advantages(ps: ProcessSteps, completion_mask: torch.Tensor,
                       group_size: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Token advantages of verified steps by the ``mc_value`` path (rules in the module docstring).

    Parameters
    ----------
    ps : ProcessSteps
        N rows.
    completion_mask : BoolTensor, shape (N, T)
    group_size : int
        G.

    Returns
    -------
    advantages : Tensor (float64), shape (N, T)
        :func:`~gradprobe.rewards.dense.mc_value_advantages` of the 1/0 step rewards, then 0 on
        masked steps' tokens.
    valid : BoolTensor, shape (N,)
        All True (a completion without steps has zero advantages, not a missing reward).
    stats : dict
        ``mc_value``'s (``mean_reward`` = mean process reward per completion) plus
        :meth:`ProcessSteps.stats`.
    """
    sv = ps.step_values(group_size)
    adv, valid, stats = mc_value_advantages(sv, completion_mask)
    adv = adv.masked_fill(ps.masked_tokens(adv.shape[1]).to(adv.device), 0.0)
    return adv, valid, {**stats, **ps.stats()}

