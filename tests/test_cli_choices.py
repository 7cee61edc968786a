"""The command line restates no vocabulary (issue 15): every --choice list is read from its registry."""

from __future__ import annotations

import argparse
import subprocess
import sys

from gradprobe import models
from gradprobe.cli.difficulty import add_difficulty_parsers
from gradprobe.cli.probe import _add_probe
from gradprobe.cli.study import add_study_parser
from gradprobe.cli.train import add_train_parser
from gradprobe.config import EXECUTOR_NAMES, PRECONDITIONERS, SAMPLER_BACKENDS
from gradprobe.grpo.losses import LOSSES
from gradprobe.study.executors import EXECUTORS
from gradprobe.tracking import REPORT_TO


def _choices(add, command: str) -> dict:
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    add(sub)
    parser = sub.choices[command]
    return {a.option_strings[-1]: list(a.choices) for a in parser._actions if a.choices is not None and a.option_strings}


def test_choices_come_from_the_registries():
    probe = _choices(_add_probe, "probe")
    assert sorted(probe["--loss-type"]) == sorted(LOSSES)
    assert probe["--precondition"] == list(PRECONDITIONERS)
    assert probe["--backend"] == list(SAMPLER_BACKENDS)
    assert probe["--dtype"] == list(models.DTYPES)  # the names the loader accepts, in its order
    study = _choices(add_study_parser, "study")
    assert study["--executor"] == list(EXECUTOR_NAMES) == list(EXECUTORS) == ["local", "ray", "inline"]
    assert study["--report-to"] == list(REPORT_TO)
    assert _choices(add_train_parser, "train")["--report-to"] == list(REPORT_TO)
    assert _choices(add_difficulty_parsers, "rank-prompts")["--dtype"] == list(models.DTYPES)


def test_importing_the_command_line_loads_no_heavy_library():
    """``gradprobe --help`` and argument errors answer at once: the command line imports its layers only
    when a command runs (torch, pandas, scipy, statsmodels, sklearn, matplotlib stay unloaded)."""
    code = ("import sys, gradprobe.cli\nheavy = ('torch', 'transformers', 'pandas', 'scipy', 'statsmodels', "
            "'sklearn', 'matplotlib')\nprint([h for h in heavy if h in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
