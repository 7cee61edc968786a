"""Argument pieces that more than one ``gradprobe`` command uses: the ``--report-to`` flag, the
integer range checkers, the token-count reader of ``--budget-tokens`` (:func:`token_count`), the ``--out``
and input path checks and the parser class of a command (:class:`CommandParser`). Light (argparse,
:mod:`gradprobe.token_counts` and :mod:`gradprobe.tracking`'s names only), like the rest of :mod:`gradprobe.cli`."""

from __future__ import annotations

import argparse
import os

from ..config import MAX_SEED
from ..tiers import ALIASES, TIER_ALIASES, TINY_ARCHITECTURES
from ..token_counts import TOKEN_COUNT_FORMS, echo_text, parse_token_count
from ..tracking import REPORT_TO

__all__ = ["HelpFormatter", "add_report_to", "integer", "nonneg_int", "positive_int", "seed_int", "token_count",
           "TOKEN_COUNT_FORMS", "out_path",
           "in_path", "home", "CALIBRATION_PATH", "CommandParser", "flag_named", "MODEL_HELP"]

CALIBRATION_PATH = "the calibration file `calib fit ROWS.csv --out FILE.json` wrote, or 'default' (the shipped one)"
"""What ``--calibration`` (``gradprobe probe``, ``calib apply``) takes, as its empty-value error says."""

MODEL_HELP = (f"a shipped warm-started tier ({', '.join(TIER_ALIASES)}), a randomly initialised tiny model "
              f"({', '.join(TINY_ARCHITECTURES)}), another alias "
              f"({', '.join(a for a in ALIASES if a not in TIER_ALIASES + TINY_ARCHITECTURES)}), a local folder, "
              f"a .gguf file or a hub id")
"""What ``--model`` takes (``gradprobe probe``, ``rank-prompts``, ``difficulty-eval``): every alias of
:func:`gradprobe.models.load_policy` (:data:`gradprobe.tiers.ALIASES`, read from there, never restated), a folder, a
``.gguf`` file or a hub id."""


def add_report_to(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Add ``--report-to {none,tensorboard,trackio,wandb}`` (default ``none``) to ``parser``.

    The choices are :data:`gradprobe.tracking.REPORT_TO`; ``help_text`` says where the command's tracker
    files go (a run folder for ``train``, one per run of the study for ``study``). Parsed as
    ``args.report_to``.
    """
    parser.add_argument("--report-to", choices=list(REPORT_TO), default="none", help=help_text)


def integer(text: str) -> int:
    """An argparse ``type``: ``text`` as an integer, as ``int`` reads it (``12``, ``-3``, ``1_000``).

    Raises
    ------
    argparse.ArgumentTypeError
        ``expected an integer, got 'x'``; the value is echoed by its first 40 characters and its length when longer
        than 80 (:func:`gradprobe.token_counts.echo_text`), so a pasted mistake (argparse's own ``invalid int
        value`` quoted it whole) or an integer of more digits than Python reads (over 4300) stays one short line.
    """
    try:
        return int(text)
    except ValueError:
        digits = text.strip().lstrip("+-").replace("_", "")
        too_long = digits.isdigit() and len(digits) > 4300
        raise argparse.ArgumentTypeError(f"expected an integer, got {echo_text(text)}" + (
            f" ({len(digits):,} digits: more than Python reads as a number)" if too_long else "")) from None


def _int_at_least(text: str, minimum: int) -> int:
    v = integer(text)
    if v < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {echo_text(str(v), str)}")
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
    v = integer(text)
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**63 - 1] (it seeds numpy and torch), got "
                                         f"{echo_text(str(v), str)}")
    return v


def token_count(text: str) -> int:
    """An argparse ``type`` for a token budget (``gradprobe probe --budget-tokens``, ``gradprobe train
    --budget-tokens``): :func:`gradprobe.token_counts.parse_token_count` of ``text`` (``250000``, ``250_000``,
    ``250k``, ``1.5M``, ``2.5e5``; computed exactly): tokens, in [1, 2**63 - 1]. What that refuses raises
    argparse.ArgumentTypeError with its message (which lists the accepted forms); argparse prefixes the option
    (``argument --budget-tokens: ...``)."""
    try:
        return parse_token_count(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def out_path(text: str) -> str:
    """An argparse ``type`` for ``--out``: ``text`` with a leading ``~`` or ``~user`` expanded to that home folder
    (:func:`os.path.expanduser`: a shell leaves the ``~`` of ``--out=~/x`` as it is, and the Python API expands it,
    :func:`gradprobe.outputs.home_path`), refused when it is empty or only spaces.

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
    return home(text)


def in_path(what: str):
    """An argparse ``type`` for an input file or folder option (``--calibration``, ``--trl-config``, a rows CSV):
    ``text`` with a leading ``~`` or ``~user`` expanded to that home folder (:func:`home`), refused when it is empty
    or only spaces.

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
        return home(text)

    check.__name__ = "path"  # argparse names a type by it ("invalid path value") when it raises another error
    return check


def home(text: str) -> str:
    """An argparse ``type`` for a path option: ``text`` with a leading ``~`` or ``~user`` expanded to that home folder
    (:func:`os.path.expanduser`; unchanged for a user not known here), as the shell does for ``--opt ~/x`` but not for
    ``--opt=~/x``, and as the Python API does (:func:`gradprobe.outputs.home_path`). Raises nothing."""
    return os.path.expanduser(text)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's help with each option's default appended (``(default: 16)``), except a default of None: such an
    option's help says what happens without it (``--budget-flops`` unset: no FLOP budget), and ``(default: None)``
    beside a help text that names its own default read as a contradiction."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help or ""
        return super()._get_help_string(action)


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
