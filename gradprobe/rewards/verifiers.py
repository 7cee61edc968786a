"""Step verifiers: rules that judge one reasoning line, and their registry by task kind.

A line verifier is ``verifier(line, problem, previous) -> True | False | None`` (valid,
invalid, neutral: not a step); :data:`STEP_VERIFIERS` maps a task kind (the task's ``name``
before any ``":"``) to its :class:`StepVerifierSpec` (the line verifier and, optionally, the
reference step count of a problem). Built-ins: ``chain_sum`` (:func:`chain_sum_line`, here),
``gsm8k`` and ``gsm_symbolic`` (:func:`gradprobe.rewards.arithmetic.arithmetic_line`). Hooks: a
task may carry its own ``step_verifier(line, problem, previous)`` (found by
:func:`step_verifier_spec`); :func:`register_step_verifier` adds a task kind. The process
rewards (:mod:`gradprobe.rewards.process`) and the trace-fidelity metrics
(:mod:`gradprobe.rewards.fidelity`) both read this registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .arithmetic import arithmetic_line, solution_reference_steps

__all__ = ["LineVerifier", "UnknownTaskKindError", "chain_terms", "chain_sum_line", "chain_sum_reference_steps",
           "StepVerifierSpec", "STEP_VERIFIERS", "register_step_verifier", "task_kind", "step_verifier_spec"]

#: ``verifier(line, problem, previous) -> True | False | None``: ``line`` a stripped, non-blank
#: line, ``problem`` its Problem, ``previous`` the earlier step lines of the completion (those
#: judged True/False or that raised), in order.
LineVerifier = Callable[[str, Any, Sequence[str]], Optional[bool]]


class UnknownTaskKindError(ValueError):
    """No step verifier is registered for the task (the message lists the kinds and the hooks)."""


# ----------------------------------------------------------------------------- chain sums

_CHAIN_QUESTION = re.compile(r"(-?\d+(?:\s*[-+]\s*-?\d+)+)\s*=?\s*$")
_CHAIN_LINE = re.compile(r"(-?\d+)\s*([-+])\s*(-?\d+)\s*=\s*(-?\d+)")


def chain_terms(problem) -> list[int]:
    """Signed terms of a chain sum: the first term, then each next term with its sign.

    ``"-6 + 5 - -3 - 7"`` -> ``[-6, 5, 3, -7]`` (the value is their sum).

    Parameters
    ----------
    problem : Problem
        ``metadata["expression"]`` when present, else the question's text before its final ``=``.

    Raises
    ------
    ValueError
        No chain of two or more terms can be read.
    """
    expr = (getattr(problem, "metadata", None) or {}).get("expression")
    text = str(expr) if expr is not None else str(getattr(problem, "question", ""))
    m = _CHAIN_QUESTION.search(text.strip())
    if m is None:
        raise ValueError(f"no chain sum of two or more terms in {text!r}")
    first = re.match(r"\s*(-?\d+)", m.group(1))
    rest = re.findall(r"([-+])\s*(-?\d+)", m.group(1)[first.end():])
    return [int(first.group(1))] + [int(b) if op == "+" else -int(b) for op, b in rest]


def chain_sum_line(line: str, problem, previous: Sequence[str]) -> bool | None:
    """Step verifier of chain sums: ``a op b = c`` that holds and continues the chain.

    Rules, for the k-th step line (k = 0, 1, ...; terms t_0, s_1, s_2, ... from
    :func:`chain_terms`, s_i signed):

    * a line without ``=`` is neutral (None);
    * otherwise it must be exactly ``a + b = c`` or ``a - b = c`` (integers, optional signs) with
      a + b = c (resp. a - b = c);
    * ``a`` must be t_0 for k = 0, else the result ``c`` stated by the latest previous step line
      of that form (an error is charged to the line that makes it, not to the lines after;
      the running sum t_0 + s_1 + ... + s_k when no previous line has that form);
    * the line's signed term (+b or -b) must be s_{k+1}: ``8 - 3`` and ``8 + -3`` both continue
      ``... - 3``; a line that skips a term, or a step beyond the last term, is invalid.

    Raises
    ------
    ValueError
        The problem holds no chain sum (the step is then masked and counted).
    """
    if "=" not in line:
        return None
    m = _CHAIN_LINE.fullmatch(line.strip())
    if m is None:
        return False
    a, op, b, c = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    term = b if op == "+" else -b
    terms = chain_terms(problem)
    k = len(previous)
    if k + 1 >= len(terms):
        return False
    expected_a = terms[0] if k == 0 else sum(terms[: k + 1])
    for prev in reversed(previous):
        pm = _CHAIN_LINE.fullmatch(prev.strip())
        if pm is not None:
            expected_a = int(pm.group(4))
            break
    return a + term == c and a == expected_a and term == terms[k + 1]


def chain_sum_reference_steps(problem) -> int:
    """Reference step count of a chain sum: terms - 1."""
    return len(chain_terms(problem)) - 1

# ----------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class StepVerifierSpec:
    """A task kind's line verifier and (optionally) its reference step count ``reference(problem) -> int | None``."""

    line: LineVerifier
    reference: Callable[[Any], Optional[int]] | None = None


STEP_VERIFIERS: dict[str, StepVerifierSpec] = {
    "chain_sum": StepVerifierSpec(chain_sum_line, chain_sum_reference_steps),
    "gsm8k": StepVerifierSpec(arithmetic_line, solution_reference_steps),
    "gsm_symbolic": StepVerifierSpec(arithmetic_line, None),
}


def register_step_verifier(kind: str, line: LineVerifier, reference: Callable | None = None) -> None:
    """Register the step verifier of a task kind (the task's ``name`` before any ``":"``).

    Raises
    ------
    ValueError
        Empty ``kind`` or a non-callable ``line``/``reference``.
    """
    if not kind or not isinstance(kind, str):
        raise ValueError(f"step verifier kind must be a non-empty string, got {kind!r}")
    if not callable(line) or (reference is not None and not callable(reference)):
        raise ValueError(f"step verifier for {kind!r}: line (and reference) must be callable")
    STEP_VERIFIERS[kind] = StepVerifierSpec(line, reference)


def task_kind(task) -> str:
    """The task's kind: its ``name`` before any ``":"`` (``"gsm8k:data/x.jsonl"`` -> ``"gsm8k"``)."""
    return str(getattr(task, "name", "") or "").split(":", 1)[0]


def step_verifier_spec(task) -> StepVerifierSpec:
    """The task's own ``step_verifier`` method when it has one, else :data:`STEP_VERIFIERS` of its kind.

    Raises
    ------
    UnknownTaskKindError
        Neither exists.
    """
    own = getattr(task, "step_verifier", None)
    if callable(own):
        return StepVerifierSpec(own, getattr(task, "reference_steps", None))
    kind = task_kind(task)
    if kind not in STEP_VERIFIERS:
        raise UnknownTaskKindError(
            f"no step verifier for task {getattr(task, 'name', task)!r} (kind {kind!r}); registered kinds: "
            f"{', '.join(sorted(STEP_VERIFIERS))}. Give the task a step_verifier(line, problem, previous) "
            "method, call gradprobe.rewards.process.register_step_verifier, or build the reward with "
            "make_process_reward(verifier=...)")
    return STEP_VERIFIERS[kind]

