"""A calibration file whose ``forecaster`` is not text (JSON true, null, a list) is refused with a refit command
that names the forecaster its data block holds, and that command, run, rebuilds the file.

Before: the command left ``--forecaster`` out when the field was not text, so following it fitted ``calib fit``'s
default ``forecast_probe``, not the ``forecast_cost_only`` whose column the shipped default's data holds (a different
calibration, written over the file). The message shows the field's value as the file spells it (``true``, not
``True``); a placeholder note shows a bad recorded value the same way.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest

from calib.cli import main
from calib.file_check import FIT_DEFAULTS, json_spelled, rebuild_command
from calib.model import CalibrationFileError, default_path, load_calibration

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"  # the rows the shipped default was fitted from (its README)
DEFAULT = json.loads(default_path().read_text())
CHOICES = "['forecast_probe', 'forecast_cost_only', 'forecast_signal_proxy', 'forecast_first_order']"


@pytest.mark.parametrize("value, shown", [(True, "true"), (None, "null"), (["forecast_cost_only"],
                                                                         'a list ["forecast_cost_only"]')],
                         ids=["true", "null", "list"])
def test_a_forecaster_that_is_no_text_gets_a_command_that_rebuilds_the_file(tmp_path, capsys, value, shown):
    # the premise: the data block's one forecast column is forecast_cost_only, not fit's default forecast_probe
    assert DEFAULT["forecaster"] == "forecast_cost_only" != FIT_DEFAULTS["forecaster"]
    assert DEFAULT["data"]["columns"] == ["study", "model", "task", "arm", "seed", "budget_value",
                                          "forecast_cost_only", "target", "reward", "loss_type"]
    d = copy.deepcopy(DEFAULT)
    d["forecaster"] = value
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    message = str(e.value)
    assert message.startswith(f"calibration file {path} is damaged: field 'forecaster' ({shown}, not one of "
                              f"{CHOICES}) is missing or malformed; refit it with `calib fit ROWS.csv --forecaster "
                              f"forecast_cost_only --out {path}` (ROWS.csv: the rows it was fitted from;"), message
    # the suggested command, run on the rows the file was fitted from, rebuilds it with the data's forecaster
    command = shlex.split(message.split("`")[1])
    assert command[:3] == ["calib", "fit", "ROWS.csv"]
    assert main(["fit", str(ROWS), *command[3:]]) == 0
    assert "wrote" in capsys.readouterr().out
    rebuilt = load_calibration(path)
    assert rebuilt.forecaster == "forecast_cost_only"  # was forecast_probe: another calibration
    assert json.loads(path.read_text())["forecaster"] == "forecast_cost_only"
    shipped = load_calibration(default_path())
    new, old = rebuilt.fitted_parameters(), shipped.fitted_parameters()  # the same fit as the shipped file
    assert new["coef"] == pytest.approx(old["coef"], rel=1e-9) and sorted(new) == sorted(old)
    assert {k: new[k] for k in new if k != "coef"} == pytest.approx({k: old[k] for k in old if k != "coef"}, rel=1e-9)
    assert (rebuilt.method, rebuilt.cv, rebuilt.interval, rebuilt.confidence_level) == (
        shipped.method, shipped.cv, shipped.interval, shipped.confidence_level)


@pytest.mark.parametrize("value, shown", [(True, "true"), (None, "null"), ([1, False], "[1, false]")],
                         ids=["true", "null", "list"])
def test_a_forecaster_no_data_column_names_becomes_a_placeholder_not_fits_default(value, shown):
    """When the data does not say (no forecast column, or several), the command names the placeholder FORECASTER
    and shows the file's value as JSON: without --forecaster, calib fit would fit forecast_probe."""
    d = {"format_version": 2, **FIT_DEFAULTS, "cv": "study", "domain": {"studies": ["s1", "s2"]},
         "forecaster": value,
         "data": {"columns": ["study", "forecast_probe", "forecast_cost_only"], "rows": []}}
    command = rebuild_command("/tmp/cal.json", d, default=False)
    assert command.startswith("refit it with `calib fit ROWS.csv --forecaster FORECASTER --out /tmp/cal.json` "
                              f"(FORECASTER: the file's {shown} is not a valid --forecaster: give the value it was "
                              "fitted with, see `calib fit --help`)"), command
    del d["data"]
    assert "--forecaster FORECASTER --out" in rebuild_command("/tmp/cal.json", d, default=False)
    # a data block holding forecast_probe alone (calib fit's default) needs no --forecaster: the command fits it
    d["data"] = {"columns": ["study", "forecast_probe", "target"], "rows": []}
    assert rebuild_command("/tmp/cal.json", d, default=False).startswith(
        "refit it with `calib fit ROWS.csv --out /tmp/cal.json` (ROWS.csv:")


@pytest.mark.parametrize("value, shown", [
    (True, "true"), (False, "false"), (None, "null"), ("abc", "'abc'"), ([True, 2.0], "[true, 2.0]"),
    ({"x": None}, '{"x": null}'), (float("nan"), "NaN"), (float("inf"), "Infinity"), (1.5, "1.5"), (3, "3"),
    (10 ** 400, "1000000000...0000000000 (an integer of 401 digits, too large for a float)"),
    (10 ** 5000, "an integer of about 5001 digits (too large for a float)"), ("x" * 100, "'" + "x" * 56 + "...")],
    ids=["true", "false", "null", "text", "list", "object", "nan", "inf", "1.5", "3", "huge", "beyond-str", "long"])
def test_json_spelled_shows_a_value_as_the_file_spells_it(value, shown):
    assert json_spelled(value) == shown
