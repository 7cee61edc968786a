"""Command line: ``gradprobe probe|train|warmstart|study|rank-prompts|difficulty-eval``.

The ``cli`` package is the only place that parses command lines (issue 15): one module per command
(:mod:`.probe`, :mod:`.train`, :mod:`.warmstart`, :mod:`.study`, :mod:`.difficulty`), each with its
``add_*_parser`` and its ``*_main``; this module builds the parser and dispatches. Importing it loads
no torch: each command imports its heavy layers when it runs."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

from ..tables import shown
from .args import CommandParser
from .difficulty import add_difficulty_parsers, difficulty_main
from .probe import _add_probe, probe_main
from .study import add_study_parser, study_main
from .train import add_train_parser, train_main
from .warmstart import add_warmstart_parser, warmstart_main

#: What ``gradprobe --help`` says (the module docstring above is for developers). One line per
#: command, each under 80 columns; tests/training/test_cli_help.py checks it lists every command.
_COMMANDS = {
    "probe": "forecast each reward's gain from a probe of one batch",
    "train": "one GRPO run of a plan's arm and seed, up to its budget",
    "study": "all arms x seeds of a plan at equal compute, then analysis",
    "warmstart": "build (or reuse) a model tier by supervised warm start",
    "rank-prompts": "rank a prompt pool by predicted success, nearest 1/2 first",
    "difficulty-eval": "score the success predictor (Brier, AUC, Spearman)",
}
_DESCRIPTION = ("Is an RLVR (GRPO) training intervention, such as a dense process reward, a\n"
                "prompt-selection rule or a learning-rate change, worth its compute? gradprobe\n"
                "answers cheaply, with a per-token gradient probe on one batch, and for real,\n"
                "with GRPO runs that all get the same budget of generated tokens, FLOPs or\n"
                "device-seconds.\n\ncommands:\n"
                + "\n".join(f"  {name:<17}{text}" for name, text in _COMMANDS.items()))
_EPILOG = """quick start (from the repository root; a CPU is enough):
  pip install torch==2.13.0 && pip install -e .
  gradprobe probe --out runs/probe
      probe rewards outcome, mc_value and hybrid_0.5 on the shipped tiny model
  gradprobe train --plan plans/tiny.toml --arm grpo --out runs/g0 --updates 1
      a one-update GRPO run (without --updates: the plan's whole budget)
  gradprobe COMMAND --help
      every option of a command

docs: README.md in the repository (install, commands, outputs, costs)."""


def _plain_warnings() -> None:
    """Show Python warnings as one ``gradprobe: warning: ...`` line each (no file, line or source
    echo); ``-v`` keeps Python's full form. Installed only by the console command (``argv`` None),
    so callers of :func:`main` from Python keep their own warning handling."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"gradprobe: warning: {message}", file=file or sys.stderr)

    warnings.showwarning = show


def _passive_openmp() -> None:
    """OpenMP threads that wait sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``, unless set).

    Spinning threads keep their cores busy while they wait at the end of each parallel region; on a
    machine shared with another process they take the cores that the threads being waited for need,
    and a small model's job slowed 10-20-fold (README, "Quick start"). Read once when torch loads its
    OpenMP runtime, so this runs before anything imports torch, in the console command only."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


#: The environment variables ``--no-progress`` sets (:func:`_no_library_progress_bars`)
_PROGRESS_SWITCHES = ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE")


def _restore_progress_bars(kept: dict) -> None:
    """Undo :func:`_no_library_progress_bars` after an in-process ``main(argv)`` call: the variables as ``kept``
    (None: unset), transformers' bars on again, and the hub's as they were (``kept["hub_bars_off"]``)."""
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    hub_off = kept.pop("hub_bars_off", False)
    for key, value in kept.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    with warnings.catch_warnings():  # the hub warns when its variable keeps them off: the caller's own setting
        warnings.simplefilter("ignore")
        hf_logging.enable_progress_bar()
        (disable_progress_bars if hub_off else enable_progress_bars)()


def _no_library_progress_bars() -> None:
    """``--no-progress`` also hides the libraries' bars (transformers' "Loading weights", hub downloads, and those
    drawn with tqdm directly, such as transformers' GGUF "Converting and de-quantizing": ``TQDM_DISABLE``, which
    tqdm >= 4.66 reads as every bar's default)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    from transformers.utils import logging as hf_logging  # light (no torch); only when the flag is given

    hf_logging.disable_progress_bar()


def _warning_as_error(command, args) -> int:
    """``command(args)``, with a warning that a filter turned into an error (``python -W error``, ``PYTHONWARNINGS=
    error``) reported as the command's one error line and exit status 2, as its other refusals are, instead of a
    traceback: the warning's text says what is wrong, and the filter is the user's choice."""
    try:
        return command(args)
    except Warning as e:
        print(f"gradprobe {args.command}: error: {type(e).__name__} (a warning turned into an error by a warnings "
              f"filter, e.g. -W error): {shown(str(e))}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradprobe`` command; returns the exit status."""
    console = argv is None
    if console:
        _passive_openmp()
    parser = argparse.ArgumentParser(prog="gradprobe", usage="gradprobe [-h] [-v] COMMAND [OPTIONS]",
                                     description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log progress details and show Python warnings in full")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="gradprobe",
                                help=argparse.SUPPRESS,  # listed one line each in _DESCRIPTION
                                parser_class=CommandParser)  # an unknown option: the command's own usage
    _add_probe(sub)
    add_train_parser(sub)
    add_warmstart_parser(sub)
    add_study_parser(sub)
    add_difficulty_parsers(sub)
    args = parser.parse_args(argv)
    if console and not args.verbose:
        _plain_warnings()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")

    commands = {"probe": probe_main, "train": train_main, "warmstart": warmstart_main, "study": study_main,
                "rank-prompts": difficulty_main, "difficulty-eval": difficulty_main}
    if not getattr(args, "no_progress", False):
        return _warning_as_error(commands[args.command], args)
    kept = {k: os.environ.get(k) for k in _PROGRESS_SWITCHES}
    if not console:
        from huggingface_hub.utils import are_progress_bars_disabled  # light: no torch

        kept["hub_bars_off"] = are_progress_bars_disabled()
    _no_library_progress_bars()
    try:
        return _warning_as_error(commands[args.command], args)
    finally:
        if not console:  # called in process (a notebook, a test): its later bars are the caller's again
            _restore_progress_bars(kept)
