"""Argument pieces that more than one ``gradprobe`` command uses: the ``--report-to`` flag, the
integer range checkers, the token-count reader of ``--budget-tokens`` (:func:`token_count`), the ``--out``
and input path checks and the parser class of a command (:class:`CommandParser`). Light (argparse, re,
decimal and :mod:`gradprobe.tracking`'s names only), like the rest of :mod:`gradprobe.cli`."""

from __future__ import annotations

import argparse
import re
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext

from ..tracking import REPORT_TO

__all__ = ["add_report_to", "nonneg_int", "positive_int", "seed_int", "token_count", "TOKEN_COUNT_FORMS", "out_path",
           "in_path", "CALIBRATION_PATH", "CommandParser", "flag_named"]

CALIBRATION_PATH = "the calibration file `calib fit ROWS.csv --out FILE.json` wrote, or 'default' (the shipped one)"
"""What ``--calibration`` (``gradprobe probe``, ``calib apply``) takes, as its empty-value error says."""


def add_report_to(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Add ``--report-to {none,tensorboard,trackio,wandb}`` (default ``none``) to ``parser``.

    The choices are :data:`gradprobe.tracking.REPORT_TO`; ``help_text`` says where the command's tracker
    files go (a run folder for ``train``, one per run of the study for ``study``). Parsed as
    ``args.report_to``.
    """
    parser.add_argument("--report-to", choices=list(REPORT_TO), default="none", help=help_text)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
    return v


def positive_int(text: str) -> int:
    """An argparse ``type``: ``text`` as an integer >= 1.

    Raises
    ------
    argparse.ArgumentTypeError
        ``expected an integer, got 'x'`` or ``must be >= 1, got 0`` (argparse prefixes the flag).
    """
    return _int_at_least(text, 1)


def nonneg_int(text: str) -> int:
    """An argparse ``type``: ``text`` as an integer >= 0.

    Raises
    ------
    argparse.ArgumentTypeError
        ``expected an integer, got 'x'`` or ``must be >= 0, got -1`` (argparse prefixes the flag).
    """
    return _int_at_least(text, 0)


def seed_int(text: str) -> int:
    """An argparse ``type`` for a seed: ``text`` as an integer in [0, 2**63 - 1] (what numpy's and torch's
    generators take), checked when the command line is parsed, before any model loads.

    Raises
    ------
    argparse.ArgumentTypeError
        ``expected an integer, got 'x'`` or ``must be in [0, 2**63 - 1], got -1``.
    """
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= v <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**63 - 1] (it seeds numpy and torch), got {v}")
    return v


TOKEN_COUNT_FORMS = ("a whole number of tokens: an integer (250000), with a k, M or G suffix (250k, 1.5M, 2G) or "
                     "in scientific notation (2.5e5)")
"""What a token-count option (``--budget-tokens``) accepts, as its help and its error say."""
#: a token count as written: digits (with _ between groups, as Python and TOML allow), an optional decimal part,
#: then either an exponent or a k/M/G suffix (or neither)
_TOKEN_COUNT = re.compile(r"(?P<number>[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+))"
                          r"(?:(?P<exponent>[eE][+-]?\d{1,30})|(?P<suffix>[kKMG]))?", re.ASCII)  # ASCII digits only
_SUFFIX = {"k": 3, "K": 3, "M": 6, "G": 9}
_TOKEN_COUNT_MAX = 2**63 - 1  # an int64: what the ledger and the JSON readers hold


def token_count(text: str) -> int:
    """An argparse ``type`` for a token budget (``gradprobe probe --budget-tokens``, ``gradprobe train
    --budget-tokens``): ``text`` as a whole, positive number of tokens.

    Accepted: an integer (``250000``, ``250_000``), one with a ``k``/``K`` (10**3), ``M`` (10**6) or ``G`` (10**9)
    suffix (``250k``, ``1.5M``: the spelling gradprobe's own output uses) or scientific notation (``2.5e5``, what
    the Python API takes as a float). The value is computed exactly (decimal arithmetic, no float rounding).

    Returns
    -------
    int
        Tokens, in [1, 2**63 - 1].

    Raises
    ------
    argparse.ArgumentTypeError
        ``text`` is none of these forms (``1.5k5``, ``nan``, ``inf``, ``250 k``), is not a whole number of tokens
        (``250000.5``, ``1.0000005M``), is <= 0, under one token (``0.5``), or above 2**63 - 1 (an exponent of
        more than 30 digits is no form); only ASCII digits count; argparse prefixes the option
        (``argument --budget-tokens: ...``) and the message lists the accepted forms.
    """
    m = _TOKEN_COUNT.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"expected {TOKEN_COUNT_FORMS}; got {text!r}")
    number = Decimal(m["number"].replace("_", ""))
    shift = int(m["exponent"][1:]) if m["exponent"] else _SUFFIX.get(m["suffix"] or "", 0)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}; expected {TOKEN_COUNT_FORMS}")
    if number.adjusted() + shift < 0:  # under one token (0.5, 1e-3)
        raise argparse.ArgumentTypeError(f"{text!r} is less than one token; expected {TOKEN_COUNT_FORMS}")
    if number.adjusted() + shift > 19:  # beyond any int64: said so before the number is built
        raise argparse.ArgumentTypeError(f"{text!r} is more tokens than a count can hold (at most {_TOKEN_COUNT_MAX})")
    with localcontext() as ctx:  # exact: enough digits for every digit given (scaleb rounds to the precision)
        ctx.prec, ctx.Emin, ctx.Emax = len(text) + 40, MIN_EMIN, MAX_EMAX
        value = number.scaleb(shift)
        if value != value.to_integral_value():
            raise argparse.ArgumentTypeError(f"{text!r} is {value:f} tokens, not a whole number; expected "
                                             f"{TOKEN_COUNT_FORMS}")
    tokens = int(value)
    if tokens > _TOKEN_COUNT_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is more tokens than a count can hold (at most {_TOKEN_COUNT_MAX})")
    return tokens


def out_path(text: str) -> str:
    """An argparse ``type`` for ``--out``: ``text`` unchanged unless it is empty or only spaces.

    An empty ``--out`` (often an unset shell variable, ``--out "$OUT"``) would mean the current folder to
    ``pathlib`` and ``/`` to a path joined as ``f"{out}/file"``: output would land where nobody asked.

    Raises
    ------
    argparse.ArgumentTypeError
        ``is empty ...`` (argparse prefixes the flag), with the fix.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"is empty ({text!r}): give a path (an unset shell variable, --out "
                                         "\"$OUT\", gives an empty one; --out . is the current folder)")
    return text


def in_path(what: str):
    """An argparse ``type`` for an input file or folder option (``--calibration``, ``--trl-config``, a rows CSV):
    ``text`` unchanged unless it is empty or only spaces.

    An empty value (often an unset shell variable, ``--calibration "$CAL"``) would read as the current folder
    (``pathlib``: ``Path("") == Path(".")``) and be refused as a folder, or be taken for "not given".

    Parameters
    ----------
    what : str
        What to give instead, e.g. ``"the calibration file (calib fit --out FILE.json) or 'default'"``.

    Raises
    ------
    argparse.ArgumentTypeError
        ``is empty ('')`` (argparse prefixes the option), with ``what`` to give.
    """
    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"is empty ({text!r}): give {what} (an unset shell variable gives an "
                                             "empty value)")
        return text

    check.__name__ = "path"  # argparse names a type by it ("invalid path value") when it raises another error
    return check


class CommandParser(argparse.ArgumentParser):
    """The parser class of a command's subparser (``add_subparsers(parser_class=CommandParser)``): an option the
    command does not have is refused by the command's own parser, with its usage (``usage: gradprobe warmstart
    ...`` / ``gradprobe warmstart: error: unrecognized arguments: --steps 0``, exit status 2).

    argparse's subparser action parses a command's arguments with ``parse_known_args`` and hands what it does
    not know to the top-level parser, whose error shows the top-level usage (``gradprobe [-h] [-v] COMMAND
    [OPTIONS]``), which names none of the command's options. Arguments before the command stay the top-level
    parser's to refuse.
    """

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}; `{self.prog} --help` lists its options")
        return namespace, extras


#: The opening of a setting's error (``SamplingConfig``, ``EstimatorConfig``: named as in a plan) -> the same with the
#: command-line flag that sets it (:func:`flag_named`).
_FLAG_OPENINGS = {"sampling.temperature ": "sampling.temperature (--temperature) ",
                  "sampling.top_p ": "sampling.top_p (--top-p) ",
                  "sampling.max_new_tokens ": "sampling.max_new_tokens (--max-new-tokens) ",
                  "sampling.batch_size ": "sampling.batch_size (--generation-batch-size) ",
                  "decay (gamma) ": "decay (gamma, --decay) ",
                  "prior_strength (n0) ": "prior_strength (n0, --prior-strength) "}


def flag_named(message: str) -> str:
    """``message`` (a command's error) with the flag named beside the setting it opens with, for the settings that
    name themselves as a plan does (``sampling.temperature must be a finite number > 0`` -> ``sampling.temperature
    (--temperature) must be ...``); any other message unchanged."""
    for opening, named in _FLAG_OPENINGS.items():
        if message.startswith(opening):
            return named + message[len(opening):]
    return message
