"""Argument pieces that more than one ``gradprobe`` command uses: the ``--report-to`` flag, the
integer range checkers and the ``--out`` path check. Light (argparse and :mod:`gradprobe.tracking`'s names only), like the rest
of :mod:`gradprobe.cli`."""

from __future__ import annotations

import argparse

from ..tracking import REPORT_TO

__all__ = ["add_report_to", "nonneg_int", "positive_int", "seed_int", "out_path"]


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
