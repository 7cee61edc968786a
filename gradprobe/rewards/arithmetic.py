"""A step verifier of free-text arithmetic (GSM8K solutions): every ``a op b = c`` must hold.

:func:`arithmetic_line` judges one line (rules in its docstring): exact rational arithmetic
(:mod:`fractions`) of the longest expressions on either side of each ``=``, read with
:mod:`ast` (numbers, ``+ - * /``, parentheses, unary signs; nothing else is evaluated).
:func:`solution_reference_steps` counts the checkable lines of a gold solution (the reference
of :func:`gradprobe.rewards.fidelity.trace_fidelity`). Registered for the task kinds ``gsm8k``
and ``gsm_symbolic`` in :data:`gradprobe.rewards.verifiers.STEP_VERIFIERS`.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from typing import Sequence

__all__ = ["arithmetic_line", "solution_reference_steps"]

_TOKEN = re.compile(r"\s*(\d+\.\d+|\.\d+|\d+|[-+*/()])")
_ARITH_SUFFIX = re.compile(r"[0-9.\s+\-*/()]*$")
_ARITH_PREFIX = re.compile(r"[0-9.\s+\-*/()]*")
_MAX_TOKENS = 64  # longest expression read on either side of "="
_OPS = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
        ast.Div: lambda x, y: x / y}


def _normalize_arithmetic(line: str) -> str:
    line = re.sub(r"<<[^<>]*>>", "", line)  # GSM8K calculator annotations
    line = line.replace("$", "").replace("\u2212", "-").replace("\u00f7", "/").replace("\u00d7", "*")
    line = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", line)  # thousands separators
    return re.sub(r"(?<=[\d)])\s*[xX]\s*(?=[\d(.])", " * ", line)  # "0.2 x 50"


def _tokens(text: str) -> list[tuple[str, int, int]] | None:
    """(token, start, end) spans of an arithmetic chunk; None when a character is no token."""
    out, pos = [], 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        tok = m.group(1)
        out.append((str(int(tok)) if tok.isdigit() else tok, m.start(1), m.end(1)))  # "007" is no literal
        pos = m.end()
    return out


def _evaluate(node) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(repr(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _evaluate(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not arithmetic")


def _parse(tokens: list[str]):
    """(tree, has_operation) of a token list, or None when it is not an arithmetic expression."""
    try:
        tree = ast.parse(" ".join(tokens), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, (ast.Expression, ast.Constant, ast.UnaryOp, ast.BinOp, ast.unaryop, ast.operator))
               for n in ast.walk(tree)):
        return None
    if any(isinstance(n, ast.BinOp) and type(n.op) not in _OPS for n in ast.walk(tree)):
        return None
    return tree, any(isinstance(n, ast.BinOp) for n in ast.walk(tree))


def _side(text: str, *, left: bool):
    """Longest arithmetic expression ending (left side) or starting (right side) at the ``=``.

    None when there is none, or when it is cut out of a longer one: an operator, a number or a
    glued letter next to it (``S + 143 = ...``, ``60 students x 2/3 = ...``, ``= 5A/5``).
    """
    m = _ARITH_SUFFIX.search(text) if left else _ARITH_PREFIX.match(text)
    chunk, offset = m.group(), m.start()
    spans = _tokens(chunk)
    while spans is None and chunk:  # e.g. a lone "." in the chunk: keep the part next to "="
        chunk, offset = (chunk[1:], offset + 1) if left else (chunk[:-1], offset)
        spans = _tokens(chunk)
    spans = (spans or [])[-_MAX_TOKENS:] if left else (spans or [])[:_MAX_TOKENS]
    for k in range(len(spans), 0, -1):
        part = spans[-k:] if left else spans[:k]
        tokens = [t for t, _, _ in part]
        parsed = _parse(tokens)
        if parsed is None:
            continue
        if left:
            before = text[: offset + part[0][1]]
            cut = (tokens[0] in "+*/" or re.search(r"[A-Za-z_]$", before)
                   or re.search(r"([0-9)+\-*/^%]|(^|\s)[xX])$", before.rstrip()))
        else:
            after = text[offset + part[-1][2]:]
            cut = re.match(r"[A-Za-z_(]", after) or re.match(r"[0-9(+\-*/^]|\.\d", after.lstrip())
        return None if cut else (tokens, parsed)
    return None


def _half_unit(tokens: list[str]) -> Fraction:
    """Half a unit of the last shown decimal of a lone number (its rounding tolerance), else 0."""
    if len(tokens) == 1 and "." in tokens[0]:
        return Fraction(1, 2 * 10 ** len(tokens[0].split(".")[1]))
    return Fraction(0)


def arithmetic_line(line: str, problem=None, previous: Sequence[str] = ()) -> bool | None:
    """Step verifier of free-text solutions (GSM8K): every ``a op b = c`` in the line must hold.

    Rules: calculator annotations ``<<...>>``, ``$`` and thousands commas are dropped, ``x``/``×``
    between numbers is ``*``, ``÷`` is ``/``. At every ``=`` the longest arithmetic expression
    (numbers, ``+ - * /``, parentheses, unary signs; no powers) ending at it is compared with the
    longest one starting after it; a pair counts when both sides parse and one side holds an
    operation (or it continues a counted chain with two bare numbers: in ``3 + 4 = 7 = 8`` the ``7 = 8``
    counts and fails; ``1/2 = 0.5 = 50%`` and ``2 * 60 = 120 = 2 hours`` convert units and do not count),
    and neither side is cut out of a longer expression (an operator, a number or a
    glued letter next to it: ``S + 143 = ...``, ``2 apples * 3/4 = ...``, ``= 5A/5`` are not
    counted). Values are exact (fractions); a side that is a lone decimal number may be rounded
    (``10/3 = 3.33`` holds: tolerance half a unit of its last decimal), an integer may not
    (``7/2 = 3`` fails); division by zero fails. A line without any counted pair (no arithmetic,
    words between the numbers, a percentage) is neutral.

    Returns
    -------
    bool or None
        True: all pairs hold; False: one fails; None: no pair (not a step).
    """
    text = _normalize_arithmetic(line)
    cuts = [m.start() for m in re.finditer(r"(?<![=<>!])=(?!=)", text)]
    verdicts, counted = [], False
    for i, pos in enumerate(cuts):
        before = text[(cuts[i - 1] + 1 if i else 0): pos]
        after = text[pos + 1: (cuts[i + 1] if i + 1 < len(cuts) else len(text))]
        lhs, rhs = _side(before, left=True), _side(after, left=False)
        # a chain "3 + 4 = 7 = 8": the lone numbers 7 = 8 count, their left side being the counted pair's whole right
        # side and their right side the whole rest (not "= 20%" or "= 2 hours", another unit of the same quantity)
        chained = (counted and lhs is not None and rhs is not None and "".join(lhs[0]) == re.sub(r"\s", "", before)
                   and "".join(rhs[0]) == re.sub(r"[\s.,;:!?]", "", after))
        counted = False
        if lhs is None or rhs is None or not (lhs[1][1] or rhs[1][1] or chained):
            continue
        counted = True
        try:
            diff = abs(_evaluate(lhs[1][0]) - _evaluate(rhs[1][0]))
        except ZeroDivisionError:
            verdicts.append(False)
            continue
        verdicts.append(diff <= max(_half_unit(lhs[0]), _half_unit(rhs[0])))
    return all(verdicts) if verdicts else None


def solution_reference_steps(problem) -> int | None:
    """Reference step count of a GSM8K problem: the gold solution's lines with checkable arithmetic.

    ``metadata["solution"]`` (the dataset's ``answer`` field); None when absent.
    """
    solution = (getattr(problem, "metadata", None) or {}).get("solution")
    if not solution:
        return None
    lines = [x.strip() for x in str(solution).splitlines() if x.strip() and not x.strip().startswith("####")]
    return sum(arithmetic_line(x) is not None for x in lines)

