"""Token counts as people write them: ``250000``, ``250_000``, ``250k``, ``1.5M``, ``2.5e5`` (the spelling gradprobe's
own output uses, and what a token budget is given as on the command line and in the Python API). Light: re and
decimal only, so :mod:`gradprobe.cli` can read ``--budget-tokens`` without loading anything heavy."""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext

TOKEN_COUNT_FORMS = ("a whole number of tokens: an integer (250000), with a k, M or G suffix (250k, 1.5M, 2G) or "
                     "in scientific notation (2.5e5)")
"""What a token count (``--budget-tokens``, ``budget_tokens=``) accepts, as its help and its error say."""
#: a token count as written: digits (with _ between groups, as Python and TOML allow), an optional decimal part,
#: then either an exponent or a k/M/G suffix (or neither)
_TOKEN_COUNT = re.compile(r"(?P<number>[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+))"
                          r"(?:(?P<exponent>[eE][+-]?\d{1,30})|(?P<suffix>[kKMG]))?", re.ASCII)  # ASCII digits only
_SUFFIX = {"k": 3, "K": 3, "M": 6, "G": 9}
_TOKEN_COUNT_MAX = 2**63 - 1  # an int64: what the ledger and the JSON readers hold
ECHO_WHOLE, ECHO_HEAD = 80, 40  # an error echoes a value of up to 80 characters whole, a longer one's first 40


def echo_text(text: str, quote=repr) -> str:
    """``text`` as an error quotes it: ``quote(text)`` when it has at most 80 characters, else ``quote`` of its first
    40 and its length (``'99999...'... (1,000,000 characters)``), so a pasted mistake does not flood the terminal."""
    if len(text) <= ECHO_WHOLE:
        return quote(text)
    return f"{quote(text[:ECHO_HEAD])}... ({len(text):,} characters)"


def parse_token_count(text: str) -> int:
    """``text`` as a whole, positive number of tokens (a token budget: ``gradprobe probe --budget-tokens``,
    ``gradprobe train --budget-tokens``, ``gradprobe.probe(budget_tokens="250k")``).

    Accepted: an integer (``250000``, ``250_000``), one with a ``k``/``K`` (10**3), ``M`` (10**6) or ``G`` (10**9)
    suffix (``250k``, ``1.5M``: the spelling gradprobe's own output uses) or scientific notation (``2.5e5``). The
    value is computed exactly (decimal arithmetic, no float rounding).

    Returns
    -------
    int
        Tokens, in [1, 2**63 - 1].

    Raises
    ------
    ValueError
        ``text`` is none of these forms (``1.5k5``, ``nan``, ``inf``, ``250 k``), is not a whole number of tokens
        (``250000.5``, ``1.0000005M``), is <= 0, under one token (``0.5``), or above 2**63 - 1 (an exponent of
        more than 30 digits is no form); only ASCII digits count. The message lists the accepted forms and quotes
        ``text`` (whole up to 80 characters; a longer one by its first 40 and its length).
    """
    m = _TOKEN_COUNT.fullmatch(text.strip())
    shown = echo_text(text)
    if m is None:
        raise ValueError(f"expected {TOKEN_COUNT_FORMS}; got {shown}")
    number = Decimal(m["number"].replace("_", ""))
    shift = int(m["exponent"][1:]) if m["exponent"] else _SUFFIX.get(m["suffix"] or "", 0)
    if number <= 0:
        raise ValueError(f"must be > 0, got {shown}; expected {TOKEN_COUNT_FORMS}")
    if number.adjusted() + shift < 0:  # under one token (0.5, 1e-3)
        raise ValueError(f"{shown} is less than one token; expected {TOKEN_COUNT_FORMS}")
    if number.adjusted() + shift > 19:  # beyond any int64: said so before the number is built
        raise ValueError(f"{shown} is more tokens than a count can hold (at most {_TOKEN_COUNT_MAX})")
    with localcontext() as ctx:  # exact: enough digits for every digit given (scaleb rounds to the precision)
        ctx.prec, ctx.Emin, ctx.Emax = len(text) + 40, MIN_EMIN, MAX_EMAX
        value = number.scaleb(shift)
        if value != value.to_integral_value():
            raise ValueError(f"{shown} is {echo_text(f'{value:f}', str)} tokens, not a whole number; expected "
                             f"{TOKEN_COUNT_FORMS}")
    tokens = int(value)
    if tokens > _TOKEN_COUNT_MAX:
        raise ValueError(f"{shown} is more tokens than a count can hold (at most {_TOKEN_COUNT_MAX})")
    return tokens
