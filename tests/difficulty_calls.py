"""Shared by the tests that show ``rank-prompts`` and ``difficulty-eval`` refuse a bad ``--out`` before any compute
(tests/test_difficulty_out_first.py, tests/difficulty/test_output_file_loops.py): the small command lines and the
loaders that record a call and refuse to work. Imported by name (``pythonpath = ["tests"]``), as calib_helpers is."""

from __future__ import annotations

import gradprobe.difficulty.rank as rank
import gradprobe.models

#: the smallest sizes of each command that still run end to end on the tiny tier
SIZES = {"rank-prompts": ["--fit-prompts", "2", "--probe-samples", "1", "--resamples", "10"],
         "difficulty-eval": ["--samples", "2"]}


def argv(command: str, out) -> list[str]:
    """``command``'s arguments for a pool of 4 chain-sum prompts on ``tiny-qwen2`` into ``out``."""
    return [command, "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "4", *SIZES[command], "--no-progress",
            "--max-new-tokens", "4", "--out", str(out)]


def refuse_loaders(monkeypatch, what: str) -> list[str]:
    """Make the task loader, the pool builder and the model loader each record its call and refuse to work (an
    AssertionError ``"NAME was called before WHAT"``, which no command catches); returns the list of calls, so that
    ``calls == []`` means none of them ran."""
    seen = []

    def refuse(name):
        def fake(*args, **kwargs):
            seen.append(name)
            raise AssertionError(f"{name} was called before {what}")
        return fake

    monkeypatch.setattr(rank, "load_task", refuse("load_task"))
    monkeypatch.setattr(rank, "pool_problems", refuse("pool_problems"))
    monkeypatch.setattr(gradprobe.models, "load_policy", refuse("load_policy"))
    return seen
