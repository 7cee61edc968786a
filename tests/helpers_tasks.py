"""Test helpers shared by the training, study, difficulty and probe tests: a task with a scoring
rule that gives mixed groups on a random model, and a reward that turns non-finite on a given call."""

from __future__ import annotations

import math

import torch

from gradprobe.tasks import load_task


class ScoredTask:
    """Real chain_sum prompts (reasoning-gym) with a rule for success instead of the verifier.

    ``rule``: ``"digit3"`` (a completion is correct iff it contains a 3: the random tiny model then
    gets mixed groups, so advantages are non-zero and weights move), ``"never"`` or ``"always"``.
    ``train_size``: reasoning-gym's train-split size (None: the task's default).
    """

    name = "scored"

    def __init__(self, rule: str = "digit3", train_size: int | None = None):
        self.inner = load_task("chain_sum", **({} if train_size is None else {"train_size": train_size}))
        self.rule = rule
        self.name = "digit3" if rule == "digit3" else f"scored_{rule}"

    def problems(self, split, n, *, seed=0):
        return self.inner.problems(split, n, seed=seed)

    def score(self, completion, problem):
        return {"digit3": float("3" in completion), "never": 0.0, "always": 1.0}[self.rule]

    def format_rate(self, completion):
        return "####" in completion


def exploding_reward(at_call: int):
    """The ``outcome`` reward, except that call number ``at_call`` (1-based) returns +inf advantages
    on every completion token (a NaN/inf loss follows)."""
    from gradprobe.rewards.outcome import outcome_reward

    calls = []

    def reward(batch, ctx):
        calls.append(1)
        out = outcome_reward(batch, ctx)
        if len(calls) == at_call:
            out.advantages = torch.full_like(out.advantages, math.inf) * batch.completion_mask
        return out

    return reward
