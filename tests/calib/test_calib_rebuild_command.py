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


@pytest.mark.parametrize("field, value, flag", [("method", "isotonicx", "--method"), ("cv", "studies", "--cv"),
                                                ("interval", "conformal", "--interval"),
                                                ("confidence_level", 1.5, "--confidence"),
                                                ("forecaster", "forecast_nope", "--forecaster")])
def test_a_recorded_value_calib_fit_would_refuse_becomes_a_placeholder(field, value, flag):
    """The fix never repeats the damage: the bad value is replaced by a placeholder that says what to give."""
    d = {"format_version": 2, **FIT_DEFAULTS, "cv": "study", "domain": {"studies": ["s1", "s2"]}, field: value}
    command = rebuild_command("/tmp/cal.json", d, default=False)
    name = flag[2:].upper()
    assert f"{flag} {name} --out /tmp/cal.json`" in command.replace(" --include-grpo", "")
    # the bad value as the file spells it (was the confidence level's repr quoted again: '1.5')
    assert f"({name}: the file's {value!r} is not a valid {flag}: give the value it was fitted with, see `calib fit " \
           "--help`)" in command
    assert repr(value) not in command.split("`")[1]
    with pytest.raises(SystemExit):  # the placeholder itself is not a value calib fit takes silently
        start = command.index("`calib fit") + 1
        parsed(command[start:command.index("`", start)].replace("ROWS.csv", "rows.csv"))


def test_a_folder_passed_as_the_calibration_file_is_named_as_a_folder(tmp_path):
    from calib.model import CalibrationFileError, resolve

    with pytest.raises(CalibrationFileError, match=rf"calibration file '{tmp_path}' is a folder; pass the JSON file"):
        resolve(str(tmp_path))


def test_calib_fit_refuses_a_rows_file_passed_twice(tmp_path, capsys):
    """A run fitted twice would count double in the fit, its folds and the reported run count."""
    from pathlib import Path

    from calib.cli import main

    rows = Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv"
    out = tmp_path / "cal.json"
    assert main(["fit", str(rows), str(rows), "--forecaster", "forecast_cost_only", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "row(s) repeat a run (study, arm, seed) of an earlier row (study_tiny@" in err
    assert f"in the rows file(s) {rows}, {rows}: a file passed twice, or two files sharing a study" in err
    assert not out.exists()
    assert main(["fit", str(rows), "--forecaster", "forecast_cost_only", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out and out.is_file()


def test_fit_calibration_refuses_a_run_given_twice_in_one_table():
    """The refusal lives in the library (select_rows), so a notebook that concatenates rows gets it too."""
    from pathlib import Path

    import pandas as pd

    from calib.dataset import RowsError, read_rows
    from calib.model import fit_calibration

    rows = read_rows(Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv")
    twice = pd.concat([rows, rows.iloc[[3, 5]]], ignore_index=True)
    r3, r5 = rows.iloc[3], rows.iloc[5]
    with pytest.raises(RowsError, match=rf"^2 row\(s\) repeat a run \(study, arm, seed\) of an earlier row "
                                        rf"\({r3.study} {r3.arm} seed {r3.seed}; {r5.study} {r5.arm} seed {r5.seed}\) "
                                        r"in the rows table: a file passed twice"):
        fit_calibration(twice, forecaster="forecast_cost_only")
    assert fit_calibration(rows, forecaster="forecast_cost_only").counts["rows_in"] == len(rows)


@pytest.mark.parametrize("value, shown", [("0.9", "'0.9'"), (None, "null"), (True, "true"),
                                          (10 ** 400, "1000000000...0000000000 (an integer of 401 digits, too large "
                                                      "for a float)")])
def test_a_recorded_level_that_is_no_number_becomes_a_placeholder_not_the_default(value, shown):
    """A level calib fit would refuse is never dropped (the command would refit at the default 0.9) nor repeated
    in full: it becomes the CONFIDENCE placeholder, and the note shows it short, as the file spells it (null, true:
    was Python's None, True)."""
    d = {"format_version": 2, **FIT_DEFAULTS, "cv": "study", "domain": {"studies": ["s1", "s2"]},
         "confidence_level": value}
    command = rebuild_command("/tmp/cal.json", d, default=False)
    assert "--confidence CONFIDENCE --out /tmp/cal.json`" in command.replace(" --include-grpo", "")
    assert f"(CONFIDENCE: the file's {shown} is not a valid --confidence: give the value" in command
    assert len(command) < 600


def test_a_missing_level_is_the_default_and_a_valid_one_is_repeated():
    d = {"format_version": 2, **FIT_DEFAULTS, "cv": "study", "domain": {"studies": ["s1", "s2"]}}
    del d["confidence_level"]
    assert "--confidence" not in rebuild_command("/tmp/cal.json", d, default=False)
    d["confidence_level"] = 0.95
    assert "--confidence 0.95 --out /tmp/cal.json`" in rebuild_command("/tmp/cal.json", d, default=False)
