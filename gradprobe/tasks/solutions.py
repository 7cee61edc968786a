"""Worked reference solutions of tasks, by task kind: the text guidance takes its hints from and
few-shot prompts take their examples from.

:data:`REFERENCE_SOLUTIONS` is keyed by task kind (the plan's ``[task] name`` before any ``":"``):
``chain_sum`` (the tiny tier's SFT target, :func:`gradprobe.tasks.chain_sum.chain_sum_target`),
``gsm8k`` and your own ``jsonl``/``hf`` data (``Problem.metadata["solution"]``; calculator
annotations ``<<...>>`` are dropped), ``gsm_symbolic`` (reasoning-gym's ``answer_cot``). A task
object may carry its own ``reference_solution(problem) -> str``; :func:`register_reference_solution`
adds a kind. It lives with the tasks (not with guided rollouts) so that tasks never import the
rollout layer.
"""

from __future__ import annotations

import re
from typing import Callable

from gradprobe.tasks.chain_sum import chain_sum_target

__all__ = ["ReferenceSolutionError", "REFERENCE_SOLUTIONS", "task_kind", "register_reference_solution",
           "has_reference_solution", "reference_solution"]


class ReferenceSolutionError(ValueError):
    """A task kind without reference solutions, or a problem without one (the message names the fix)."""


def task_kind(spec: str) -> str:
    """The kind of a task spec: its name before any ``":"`` (``"gsm8k:PATH"`` -> ``"gsm8k"``)."""
    return str(spec).split(":", 1)[0].strip()


def _chain_sum_solution(problem) -> str:
    return chain_sum_target(problem)


def _metadata_solution(problem) -> str | None:
    text = (getattr(problem, "metadata", None) or {}).get("solution")
    return None if text is None else re.sub(r"<<[^>]*>>", "", str(text))


def _answer_cot(problem) -> str | None:
    text = (getattr(problem, "metadata", None) or {}).get("answer_cot")
    return None if text is None else str(text)


#: Task kind -> ``fn(problem) -> str | None``, the problem's worked reference solution.
REFERENCE_SOLUTIONS: dict[str, Callable] = {
    "chain_sum": _chain_sum_solution,
    "gsm8k": _metadata_solution,
    "jsonl": _metadata_solution,
    "hf": _metadata_solution,
    "gsm_symbolic": _answer_cot,
}


def register_reference_solution(kind: str, fn: Callable) -> None:
    """Register ``fn(problem) -> str | None`` as the reference solution of task kind ``kind``.

    Raises
    ------
    ValueError
        Empty ``kind`` or a non-callable ``fn``.
    """
    if not kind or not isinstance(kind, str) or not callable(fn):
        raise ValueError(f"register_reference_solution needs a task kind (str) and a callable, got {kind!r}, {fn!r}")
    REFERENCE_SOLUTIONS[kind] = fn


def has_reference_solution(task_spec: str) -> bool:
    """Whether the task kind of ``task_spec`` has registered reference solutions (checked at plan load)."""
    return task_kind(task_spec) in REFERENCE_SOLUTIONS


def reference_solution(problem, kind: str, task=None) -> str:
    """The reference solution of ``problem``: ``task.reference_solution`` if the task has one, else
    :data:`REFERENCE_SOLUTIONS` ``[kind]``.

    Raises
    ------
    ReferenceSolutionError
        No reference solution for this kind, or none for this problem (e.g. JSONL data without a
        solution column; the message names the problem and the fix).
    """
    own = getattr(task, "reference_solution", None)
    if callable(own):
        text = own(problem)
    elif kind in REFERENCE_SOLUTIONS:
        text = REFERENCE_SOLUTIONS[kind](problem)
    else:
        raise ReferenceSolutionError(f"task {kind!r} has no reference solution; tasks with one: "
                            f"{', '.join(sorted(REFERENCE_SOLUTIONS))} (or register_reference_solution)")
    if text is None:
        raise ReferenceSolutionError(f"problem {getattr(problem, 'id', '?')} of task {kind!r} has no reference solution "
                            f"(metadata['solution']); map your data's worked-solution column with solution=COLUMN "
                            f"or remove guidance / fewshot")
    return str(text)
