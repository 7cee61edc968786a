"""The command line restates no vocabulary (issue 15): every --choice list is read from its registry."""

from __future__ import annotations

import argparse

from gradprobe import models
from gradprobe.cli.difficulty import add_difficulty_parsers
from gradprobe.cli.probe import _add_probe
from gradprobe.cli.study import add_study_parser
from gradprobe.cli.train import add_train_parser
from gradprobe.config import PRECONDITIONERS, SAMPLER_BACKENDS
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
    assert study["--executor"] == list(EXECUTORS) == ["local", "ray", "inline"]
    assert study["--report-to"] == list(REPORT_TO)
    assert _choices(add_train_parser, "train")["--report-to"] == list(REPORT_TO)
    assert _choices(add_difficulty_parsers, "rank-prompts")["--dtype"] == list(models.DTYPES)
