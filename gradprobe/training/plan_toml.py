"""The text of a plan file read as TOML: :func:`read_plan_toml`, whose errors name the plan and, for an integer too
long for Python to read, its key.

The first step of reading a plan: :mod:`gradprobe.training.plan` validates the dict this returns (its keys, types
and ranges); a file that is no TOML is refused here, with :class:`~gradprobe.training.specs.PlanError`, before any
key is looked at.
"""

from __future__ import annotations

import re
import sys
import tomllib

from ..token_counts import echo_text
from .specs import PlanError

__all__ = ["read_plan_toml"]

#: a run of decimal digits as TOML writes an integer's (single underscores between digits); the sign stays outside
_DIGITS = re.compile(r"\d(?:_?\d)*")
#: what the i-th over-long integer is read as when a plan is read again to find its key: an integer no plan writes
#: (60 digits), so that a run of digits inside a string or a comment stays text and the TOML stays valid
_STAND_IN = 314159265358979323846264338327950288419716939937510582097494 * 10**6


def read_plan_toml(text: str, path: str) -> dict:
    """The TOML ``text`` of plan ``path`` as a dict (:mod:`tomllib`).

    Raises
    ------
    PlanError
        Invalid TOML (tomllib's message, with its line and column); or an integer longer than Python reads as a
        number (``sys.get_int_max_str_digits()``, 4300 digits, where tomllib's ``int()`` raises a bare ValueError),
        named by its key's full path (``budget.updates``) and line, shown by its first 40 digits and its length
        (:func:`gradprobe.token_counts.echo_text`), with the fix.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"plan {path} is not valid TOML: {e}") from None
    except ValueError as e:  # not TOML's own error: an integer beyond the int-to-text limit
        raise _long_integer_error(text, path, e) from None


def _long_integer_error(text: str, path: str, error: ValueError) -> PlanError:
    """The error of plan ``text`` holding an integer beyond Python's int-to-text limit (:func:`read_plan_toml`): each
    run of more digits than the limit is read as :data:`_STAND_IN` plus its number, so the first one read as a value
    (not text in a string or comment) names its key; ``error`` (tomllib's) when no such run is found."""
    limit = sys.get_int_max_str_digits()
    runs = [m for m in _DIGITS.finditer(text) if limit and m.end() - m.start() - m[0].count("_") > limit]
    if not runs:
        return PlanError(f"plan {path} cannot be read: {error}")
    stand_in = text
    for i, m in reversed(list(enumerate(runs))):
        stand_in = stand_in[:m.start()] + str(_STAND_IN + i) + stand_in[m.end():]
    try:
        found = {abs(v) - _STAND_IN: where for where, v in _values(tomllib.loads(stand_in), "")
                 if isinstance(v, int) and not isinstance(v, bool) and 0 <= abs(v) - _STAND_IN < len(runs)}
    except ValueError:  # another mistake in the file: the first run of digits is named by its line only
        found = {}
    i = min(found, default=0)
    for j, run in enumerate(runs):  # a bare key of digits (task.config.999...) was read as its stand-in too
        found = {k: v.replace(str(_STAND_IN + j), echo_text(run[0], str)) for k, v in found.items()}
    m = runs[i]
    sign = text[m.start() - 1] if m.start() and text[m.start() - 1] in "+-" else ""
    line = text.count("\n", 0, m.start()) + 1
    key = echo_text(found[i], str) if found else None
    where, key = (f"{key} (line {line})", key) if found else (f"line {line}", "it")
    return PlanError(f"plan {path}: {where} holds an integer of {len(m[0].replace('_', '')):,} digits, "
                     f"{echo_text(sign + m[0], str)}: more than Python reads as a number "
                     f"(sys.get_int_max_str_digits() = {limit}), and far outside the range of any plan key; write the "
                     f"number {key} needs (seeds and budgets of updates or generated tokens are at most 2**63 - 1, "
                     f"19 digits; a FLOP budget may be written as a float, e.g. 1e18)")


def _values(value, where: str):
    """(full path, value) of every value in the TOML data ``value`` (``budget.updates``, ``seeds[1]``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _values(v, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _values(v, f"{where}[{i}]")
    else:
        yield where, value
