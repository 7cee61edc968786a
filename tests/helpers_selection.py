"""A short training run with a prompt-selection arm, shared by the selection tests (difficulty/test_select.py,
difficulty/test_select_greso.py).

:data:`SELECTION_PLAN` is the base plan (random ``tiny-qwen2`` on chain_sum: B = 2 prompts x G = 4
completions of at most 10 tokens per update, a checkpoint every update, greedy evaluation on 2
held-out prompts); :func:`selection_plan` renders it with one arm and its selection keys,
:func:`selection_records` reads each update's ``selection`` record back, and :func:`kill_at` stops a
run after a given update (for the resume tests).
"""

from __future__ import annotations

import copy
from pathlib import Path

import tomlkit

from helpers_training import metric_lines

#: The plan without arms (as a TOML table); ``[task] pool`` and ``[budget] updates`` are set per test.
SELECTION_PLAN: dict = {
    "seeds": [0],
    "model": {"name": "tiny-qwen2"},
    "task": {"name": "chain_sum", "pool": 16},
    "heldout": {"prompts": 2},
    "sampling": {"max_new_tokens": 10},
    "train": {"prompts_per_update": 2, "group": 4, "lr": 1e-3, "micro_batch_size": 8, "checkpoint_every": 1},
    "budget": {"updates": 1},
    "eval": {"greedy": True, "sampled": False},
}


def selection_plan(selection: str | None, *, updates: int, pool: int = 16, arm: str = "select_half",
                   candidates_multiplier: int = 3, **arm_keys) -> str:
    """TOML text of :data:`SELECTION_PLAN` with ``[budget] updates``, ``[task] pool`` and one arm.

    The arm is ``[arms.<arm>] reward = "outcome"``, plus ``selection = "<selection>"`` and
    ``candidates_multiplier`` (m: m x B candidates per update) unless ``selection`` is None (a plain
    arm), plus ``arm_keys`` as given (``decay=1.5``, ``greso_step=0.0``...). The text is not validated
    here: :func:`gradprobe.training.plan.parse_plan` does that (PlanError naming the field).
    """
    plan = copy.deepcopy(SELECTION_PLAN)
    plan["task"]["pool"] = pool
    plan["budget"]["updates"] = updates
    keys = {"reward": "outcome"}
    if selection is not None:
        keys.update(selection=selection, candidates_multiplier=candidates_multiplier)
    plan["arms"] = {arm: {**keys, **arm_keys}}
    return tomlkit.dumps(plan)


def selection_records(run: Path) -> list[dict]:
    """The ``selection`` record of every update of ``run/metrics.jsonl``, in order (evaluation lines
    have none). Raises FileNotFoundError when the run folder has no metrics.jsonl."""
    return [x["selection"] for x in metric_lines(run) if "selection" in x]


class Killed(Exception):
    """Raised by :func:`kill_at`'s callback: the run stops as if killed."""


def kill_at(update: int):
    """An ``after_update`` callback for :func:`gradprobe.training.run.run_training` that raises
    :class:`Killed` after update number ``update`` (1-based), so the run stops there."""

    def after_update(done: int) -> None:
        if done == update:
            raise Killed(f"killed after update {update}")

    return after_update
