"""Worked solutions of reasoning-gym ``chain_sum`` problems.

The one line-per-step solution format that the tiny tier is warm-started on
(:mod:`gradprobe.warmstart`) and that off-context guidance shows as a hint
(:mod:`gradprobe.rollout.guided`), in the answer format the prompt asks for
(:data:`gradprobe.tasks.prompts.INSTRUCTION`)::

    12 + 7 = 19
    19 - 3 = 16
    #### 16
"""

from __future__ import annotations

import re

__all__ = ["chain_sum_target"]

_EXPR = re.compile(r":\s*(-?\d+(?:\s*[-+]\s*\d+)*)\s*=\s*$")


def chain_sum_target(problem) -> str:
    """The worked solution of a chain-sum problem: one step per line, then ``#### answer``.

    Parameters
    ----------
    problem : Problem
        ``metadata["expression"]`` (``"12 + 7 - 3"``) is used when present, else the question
        text up to its final ``=``.

    Returns
    -------
    str
        E.g. ``"12 + 7 = 19\\n19 - 3 = 16\\n#### 16"``; a single number gives ``"#### n"``.

    Raises
    ------
    ValueError
        The expression cannot be parsed.
    """
    expr = (problem.metadata or {}).get("expression")
    if expr is None:
        m = _EXPR.search(problem.question.strip())
        if m is None:
            raise ValueError(f"cannot find a chain sum in question {problem.question!r}")
        expr = m.group(1)
    parts = re.findall(r"[-+]|\d+", expr)
    if not parts:
        raise ValueError(f"cannot parse chain sum {expr!r}")
    if parts[0] == "-":  # a leading negative number
        parts = [f"-{parts[1]}"] + parts[2:]
    acc, lines = int(parts[0]), []
    if len(parts) % 2 != 1 or any(op not in "+-" for op in parts[1::2]):
        raise ValueError(f"cannot parse chain sum {expr!r}")
    for op, num in zip(parts[1::2], parts[2::2]):
        new = acc + int(num) if op == "+" else acc - int(num)
        lines.append(f"{acc} {op} {num} = {new}")
        acc = new
    lines.append(f"#### {acc}")
    return "\n".join(lines)
