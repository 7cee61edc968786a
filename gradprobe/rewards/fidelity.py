"""Trace-fidelity metrics of evaluated completions: how many reasoning lines hold, and how many there are.

Lines are steps, judged by the task's step verifier (:func:`gradprobe.rewards.verifiers.step_verifier_spec`)
with the rules of :func:`gradprobe.rewards.step_checks.check_steps`; recorded by the training
metrics and the study's evaluation (``step_validity_rate``, ``step_count_deviation``).
"""

from __future__ import annotations

from typing import Sequence

from .base import RewardFunctionError
from .step_checks import INVALID, VALID, check_steps
from .verifiers import UnknownTaskKindError, step_verifier_spec

__all__ = ["trace_fidelity"]


def trace_fidelity(task, completions: Sequence[str], problems: Sequence) -> dict:
    """Trace-fidelity metrics of evaluated completions (lines as steps, rules of the module docstring).

    Parameters
    ----------
    task : Task
        Its step verifier (:func:`step_verifier_spec`) and reference step count.
    completions : sequence of str, length N
        Decoded completions.
    problems : sequence of Problem, length N
        The problem of each completion.

    Returns
    -------
    dict
        ``step_validity_rate``: valid / (valid + invalid) steps over all completions (fraction;
        None without scored steps or without a verifier for the task); ``step_count_deviation``:
        mean over completions with a reference of |steps - reference steps| (steps: lines judged
        valid, invalid or that raised; reference: terms - 1 for chain sums, the gold solution's
        arithmetic lines for GSM8K; None when no completion has one). Never raises for a task
        without a verifier.

    Raises
    ------
    ValueError
        ``completions`` and ``problems`` differ in length.
    """
    if len(completions) != len(problems):
        raise ValueError(f"trace_fidelity: {len(completions)} completions but {len(problems)} problems")
    try:
        spec = step_verifier_spec(task)
    except UnknownTaskKindError:
        return {"step_validity_rate": None, "step_count_deviation": None}
    valid = scored = 0
    deviations = []
    for text, problem in zip(completions, problems):
        try:
            chk = check_steps(text.split("\n"), problem, spec.line)
        except RewardFunctionError:
            continue
        valid += chk.count(VALID)
        scored += chk.count(VALID) + chk.count(INVALID)
        try:
            ref = spec.reference(problem) if spec.reference is not None else None
        except Exception:  # a problem without a readable reference has none
            ref = None
        if ref is not None:
            deviations.append(abs(chk.steps - ref))
    return {"step_validity_rate": valid / scored if scored else None,
            "step_count_deviation": sum(deviations) / len(deviations) if deviations else None}
