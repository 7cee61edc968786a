"""The rebuild command a damaged calibration file's error names parses back to the file's own settings."""

from __future__ import annotations

import inspect
import shlex

import pytest

from calib.cli import _settings, build_parser
from calib.file_check import FIT_DEFAULTS, rebuild_command
from calib.model import fit_calibration


def parsed(command: str) -> dict:
    """The settings ``calib fit`` would use for a command line (the real parser)."""
    words = shlex.split(command)
    assert words[:2] == ["calib", "fit"]
    return _settings(build_parser().parse_args(words[1:]))


@pytest.mark.parametrize("settings", [
    {},
    {"forecaster": "forecast_cost_only"},
    {"forecaster": "forecast_signal_proxy", "method": "isotonic", "interval": "split", "confidence_level": 0.8,
     "include_reference": True},
    {"method": "none", "cv": "arm", "confidence_level": 0.95},
])
def test_rebuild_command_round_trips_through_the_cli_parser(settings):
    record = {**FIT_DEFAULTS, **settings}
    cv = record["cv"]
    d = {"format_version": 2, "forecaster": record["forecaster"], "method": record["method"],
         "cv": "study" if cv == "auto" else cv, "interval": record["interval"],
         "confidence_level": record["confidence_level"], "include_reference": record["include_reference"],
         "domain": {"studies": ["s1", "s2"]}}
    command = rebuild_command("/tmp/cal.json", d, default=False)
    start = command.index("`calib fit") + 1
    got = parsed(command[start:command.index("`", start)].replace("ROWS.csv", "rows.csv"))
    expect = {**record, "cv": "auto" if d["cv"] == "study" else d["cv"]}  # 2 studies: auto picks study
    assert got == expect
    # only the options that differ from calib fit's defaults are named
    assert ("--method" in command) == (record["method"] != FIT_DEFAULTS["method"])
    assert ("--forecaster" in command) == (record["forecaster"] != FIT_DEFAULTS["forecaster"])


def test_the_cli_and_the_python_api_share_the_defaults():
    args = build_parser().parse_args(["fit", "rows.csv", "--out", "cal.json"])
    assert _settings(args) == FIT_DEFAULTS
    sig = inspect.signature(fit_calibration).parameters
    assert {k: sig[k].default for k in FIT_DEFAULTS} == FIT_DEFAULTS
