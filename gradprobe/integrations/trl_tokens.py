"""Counting what a TRL ``GRPOTrainer`` run generates, for :class:`~gradprobe.integrations.trl.GradprobeCallback`.

- :func:`generations_between`: how many generation batches TRL draws in a window of optimizer
  steps (the rollout tokens of a window are its mean completion length times its completions);
- :func:`reward_generated_tokens`: the *generated-tokens protocol* of reward functions (what MC
  continuations or a judge model generate), read as cumulative counts by ledger category;
- :func:`counting`: a wrapped TRL reward reporting what it generated during one probe call;
- :func:`append_jsonl_line`: ``ledger.jsonl``'s writer, one whole line per logged window.

The protocol itself is described in :mod:`gradprobe.integrations.trl`. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..ledger import CATEGORIES
from ..outputs import output_error

__all__ = ["reward_generated_tokens", "generations_between", "counting", "append_jsonl_line"]


def reward_generated_tokens(fn) -> dict[str, int]:
    """A reward function's cumulative generated tokens by ledger category (the protocol above).

    Returns
    -------
    dict[str, int]
        ``{}`` when ``fn`` has no ``generated_tokens``; an ``int`` is ``{"continuation": n}``.

    Raises
    ------
    ValueError
        A category not in :data:`gradprobe.ledger.CATEGORIES`, or a count that is not a
        non-negative integer (names the reward function).
    """
    value = getattr(fn, "generated_tokens", None)
    if value is None:
        return {}
    if callable(value):
        value = value()
    name = getattr(fn, "__name__", type(fn).__name__)
    counts = {"continuation": value} if not isinstance(value, Mapping) else dict(value)
    for category, n in counts.items():
        if category not in CATEGORIES:
            raise ValueError(f"reward {name!r}: generated_tokens category {category!r} is not one of {CATEGORIES}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"reward {name!r}: generated_tokens[{category!r}] must be a cumulative int >= 0, "
                             f"got {n!r}")
    return counts


def generations_between(step_from: int, step_to: int, *, gradient_accumulation_steps: int,
                        steps_per_generation: int, num_iterations: int) -> int:
    """Generation batches TRL draws in optimizer steps (step_from, step_to].

    TRL 1.16 generates on micro-step m (0-based) when m % (steps_per_generation x num_iterations)
    == 0; optimizer step s covers micro-steps [(s - 1) GA, s GA).
    """
    period = steps_per_generation * num_iterations
    a, b = step_from * gradient_accumulation_steps, step_to * gradient_accumulation_steps
    return -(-b // period) - -(-a // period)


def counting(reward, fn):
    """``reward`` (a gradprobe Reward wrapping the TRL function ``fn``) reporting, as its
    ``generated_tokens``, what ``fn`` generated during the call (the generated-tokens protocol), so
    the probe's tokens per update include e.g. a judge's tokens. It is the reward it wraps to
    :func:`gradprobe.rewards.base.same_reward` and :func:`~gradprobe.rewards.base.check_distinct_rewards` (its
    ``sequence_source``): the trainer's function named again by import path is one reward under two names."""

    def counted(batch, ctx=None):
        before = reward_generated_tokens(fn)
        out = reward(batch, ctx)
        after = reward_generated_tokens(fn)
        spent = {c: n - before.get(c, 0) for c, n in after.items() if n - before.get(c, 0) > 0}
        out.generated_tokens = {**out.generated_tokens, **spent}
        return out

    counted.__name__ = getattr(reward, "__name__", "reward")
    if hasattr(reward, "sequence_source"):  # the reward it counts for: its identity (gradprobe.rewards.base._where)
        counted.sequence_source = reward.sequence_source
    return counted


def append_jsonl_line(path: Path, record: dict) -> None:
    """Append ``record`` to the JSONL log ``path`` as one whole line: one ``write`` call, then flushed.

    A log read while training runs (or after a crash) never ends in half a line written by a
    buffered writer split across calls.

    Raises
    ------
    OutputDirError (an OSError)
        The file cannot be opened or written (names the path).
    """
    line = json.dumps(record) + "\n"
    try:
        with open(path, "a") as f:
            f.write(line)
            f.flush()
    except OSError as e:
        raise output_error("appending to", path, e) from e
