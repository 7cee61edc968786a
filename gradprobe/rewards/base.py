"""Rewards: rollouts -> per-token advantages A_ijt, shape (N, T), zero off the mask.

A reward is a plain function ``reward(batch, ctx) -> RewardOutput`` registered under a
name (DESIGN.md, "Rewards and per-token advantages"); variants are chosen once from
:data:`REWARDS`, never by flags tested in loops. Built-ins (registered when
:mod:`gradprobe.rewards` is imported, which importing any of its modules does first):

``outcome``, ``outcome_batch``, ``outcome_dr``            :mod:`gradprobe.rewards.outcome`
``mc_value``, ``mc_advantage``, ``hybrid``, ``hybrid_0.9``,
``hybrid_0.5``, ``hybrid_0.1``, ``mc_min``                :mod:`gradprobe.rewards.dense`
``process``, ``process_hybrid_0.9``, ``process_hybrid_0.5``,
``process_hybrid_0.1``                                    :mod:`gradprobe.rewards.process`
``majority_vote``                                         :mod:`gradprobe.rewards.majority`
``outcome_loo``                                           :mod:`gradprobe.rewards.counterfactual`

A user's TRL-style sequence reward becomes a :data:`Reward` with
:func:`gradprobe.rewards.sequence.sequence_reward`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..config import MCConfig, SamplingConfig
from ..ledger import Ledger
from ..types import RolloutBatch


class UnknownRewardError(ValueError):
    """No reward is registered under that name (the message lists the valid ones)."""


class RewardFunctionError(RuntimeError):
    """A user reward function raised or returned something unusable (names the reward)."""


@dataclass
class RewardContext:
    """What a reward may use besides the batch.

    Attributes
    ----------
    task : Task
        ``score(completion, problem) -> float``; scores MC continuations.
    sampler : Sampler or None
        Draws MC continuations; None is fine for rewards that do not sample.
    sampling : SamplingConfig
        The rollouts' settings; continuations use the same ones.
    mc : MCConfig
        K continuations per boundary, ``max_steps``.
    ledger : Ledger
        Continuation tokens are charged here (once per batch, see ``cache``).
    tokenizer : transformers tokenizer
        Decodes completions and finds step boundaries.
    eos_token_ids : list[int]
    cache : dict
        Shared by the rewards of ONE batch: MC step values are computed once for all dense
        rewards and charged to the ledger once. Use a fresh context (or clear it) per batch.
    """

    task: Any
    sampler: Any
    sampling: SamplingConfig
    mc: MCConfig
    ledger: Ledger
    tokenizer: Any
    eos_token_ids: list[int]
    cache: dict = field(default_factory=dict)


@dataclass
class RewardOutput:
    """Per-token advantages of one reward on one batch.

    Attributes
    ----------
    name : str
    advantages : Tensor (float64), shape (N, T)
        A_ijt; zero off ``batch.completion_mask`` and on invalid rows.
    valid : BoolTensor, shape (N,)
        Rows that received a reward (a missing reward is masked, never silently zero).
    generated_tokens : dict[str, int]
        Tokens this reward generated per update beyond the rollouts, by ledger category,
        e.g. ``{"continuation": 1234}``; ``{}`` for sequence rewards.
    stats : dict
        ``missing``, ``zero_variance_groups``, ``mean_reward`` (ignoring missing), ...
    """

    name: str
    advantages: torch.Tensor
    valid: torch.Tensor
    generated_tokens: dict[str, int]
    stats: dict


Reward = Callable[[RolloutBatch, RewardContext], RewardOutput]
REWARDS: dict[str, Reward] = {}
#: Resolvers of names that are not registered: ``resolver(name) -> Reward or None`` (None: not its kind of name);
#: :mod:`gradprobe.rewards.plugin` adds the ``MODULE:FUNCTION`` import-path one.
RESOLVERS: list[Callable[[str], "Reward | None"]] = []


def register_reward(name: str):
    """Decorator registering a :data:`Reward` under ``name``.

    Raises
    ------
    ValueError
        ``name`` is empty, contains a comma, or is already registered to another function.
    TypeError
        ``name`` is not a string (``@register_reward("my_reward")``, not bare ``@register_reward``), or the
        decorated object is not callable.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string (use @register_reward(\"my_reward\")), got {name!r} "
                        f"({type(name).__name__})")
    if not name or "," in name or name != name.strip():
        raise ValueError(f"invalid reward name {name!r}: non-empty, no comma, no surrounding spaces")

    def deco(fn: Reward) -> Reward:
        if not callable(fn):
            raise TypeError(f"register_reward({name!r}) decorates a function, got {fn!r} ({type(fn).__name__})")
        old = REWARDS.get(name)
        if old is not None and old is not fn and getattr(old, "__qualname__", None) != getattr(fn, "__qualname__", 0):
            raise ValueError(f"reward {name!r} is already registered ({old!r})")
        REWARDS[name] = fn
        return fn

    return deco


def get_reward(name: str) -> Reward:
    """The reward registered under ``name``.

    Raises
    ------
    UnknownRewardError
        Unknown name; the message lists the registered ones and the import-path form
        (:mod:`gradprobe.rewards.plugin`), or says why an import-path name could not be loaded.
    """
    if name in REWARDS:
        return REWARDS[name]
    for resolve in RESOLVERS:
        reward = resolve(name)
        if reward is not None:
            return reward
    if name.strip().rstrip(":").endswith(".py"):  # a plug-in's file without its function
        raise UnknownRewardError(f"reward {name!r} names a Python file but no function in it: write it as "
                                 f"{name.strip().rstrip(':')}:FUNCTION (the reward function after the last ':')")
    raise UnknownRewardError(f"unknown reward {name!r}; valid: {', '.join(sorted(REWARDS))}, or a reward of your own "
                             "as MODULE:FUNCTION or path/to/file.py:FUNCTION")


def parse_rewards(spec: str | list[str]) -> list[tuple[str, Reward]]:
    """Rewards named by ``"outcome,mc_value"`` or ``["outcome", "mc_value"]``, in order.

    Raises
    ------
    UnknownRewardError
        An unknown name.
    ValueError
        Empty spec or a name given twice.
    """
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise ValueError(f"no reward named in {spec!r}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"reward(s) given more than once: {', '.join(dup)}")
    return [(n, get_reward(n)) for n in names]


def broadcast_to_tokens(row_values: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Sequence-level values (N,) -> per-token (N, T) float64, zero off the mask."""
    return row_values.to(torch.float64)[:, None] * completion_mask.to(torch.float64)
