"""A calibration's confidence level, as given and as shown, and the ``include_reference`` flag of its file:

- ``calib fit --confidence 0.999`` then ``calib apply`` printed a "100% conformal interval" with [-inf, +inf]
  intervals and no word why: the level is now shown with its digits (99.9%), and both commands say that a finite
  interval at that level needs more conformity scores than the calibration has (999 at 99.9%; one per row with CV+),
  with the fix (the highest level its rows allow, or more rows).
- ``calib.fit(rows, confidence_level="0.9")`` said "must be in (0, 1), got 0.9": a string (or a bool) is now a
  TypeError naming the type.
- a calibration file whose ``include_reference`` was edited (false to true) loaded with its numbers unchanged,
  claiming grpo's rows were fitted: the flag is now checked against its data and counts.

Built on the shipped rows ``data/calibration/rows.csv`` and probe ``data/study_tiny_sparse/probe`` (read only).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import calib
from calib.cli import main as calib_main
from calib.dataset import read_rows
from calib.model import CalibrationFileError, fit_calibration, load_calibration

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "data" / "calibration" / "rows.csv"
PROBE = ROOT / "data" / "study_tiny_sparse" / "probe"
NOTE = ("the 99.9% conformal intervals are infinite ([-inf, +inf]): a finite one at that level needs at least 999 "
        "conformity scores, and this calibration has 83 (one per calibration row); refit it with a confidence level "
        "of at most 0.988 (--confidence 0.988), or on more rows")


@pytest.fixture(scope="module")
def rows():
    return read_rows(ROWS)


def test_fit_and_apply_at_999_show_the_level_and_say_why_the_intervals_are_infinite(tmp_path, capsys):
    cal = tmp_path / "c999.json"
    assert calib_main(["fit", str(ROWS), "--forecaster", "forecast_cost_only", "--confidence", "0.999",
                       "--out", str(cal)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"note: {NOTE}"
    assert calib_main(["apply", str(PROBE), "--calibration", str(cal), "--out", str(tmp_path / "cal.json")]) == 0
    out = capsys.readouterr().out
    assert ("(linear correction of forecast_cost_only, 99.9% conformal interval for one run; fitted on 83 runs of 15 "
            "arms, tiny, tiny-llama-sft)") in out
    assert "100%" not in out
    assert f"note: {NOTE}" in out.splitlines()
    doc = json.loads((tmp_path / "cal.json").read_text())
    assert NOTE in doc["notes"]
    gained = [r for r in doc["rewards"] if r["name"] != "outcome"]
    assert gained and all(r["calibrated_interval"] == ["-inf", "inf"] for r in gained)


def test_the_level_the_note_offers_gives_finite_intervals_and_no_note(rows):
    cal = fit_calibration(rows, forecaster="forecast_cost_only", confidence_level=0.988)
    _, lo, hi = cal.predict(cal.rows)
    assert len(cal.rows) == 83 and np.isfinite(lo).all() and np.isfinite(hi).all()
    assert cal.infinite_interval_note() is None
    assert fit_calibration(rows, forecaster="forecast_cost_only", confidence_level=0.989).infinite_interval_note() == (
        "the 98.9% conformal intervals are infinite ([-inf, +inf]): a finite one at that level needs at least 90 "
        "conformity scores, and this calibration has 83 (one per calibration row); refit it with a confidence level "
        "of at most 0.988 (--confidence 0.988), or on more rows")


@pytest.mark.parametrize("level, need", [(0.9, 9), (0.95, 19), (0.8, 4), (0.999, 999), (0.5, 1)])
def test_rows_for_a_finite_interval_are_mapies(level, need):
    from calib.validation import rows_for_finite_interval
    assert rows_for_finite_interval(level) == need


@pytest.mark.parametrize("level, shown", [(0.9, "90%"), (0.999, "99.9%"), (0.95, "95%"), (0.9999, "99.99%")])
def test_a_level_is_shown_with_its_digits(level, shown):
    from calib.validation import level_percent
    assert level_percent(level) == shown


@pytest.mark.parametrize("level, message", [
    ("0.9", "confidence_level must be a number in (0, 1) (e.g. 0.9 for 90% intervals), got the str '0.9'; pass the "
            "number it spells, 0.9, not a string"),
    (True, "confidence_level must be a number in (0, 1) (e.g. 0.9 for 90% intervals), got the bool True; pass a "
           "number, e.g. 0.9"),
    (None, "confidence_level must be a number in (0, 1) (e.g. 0.9 for 90% intervals), got the NoneType None; pass a "
           "number, e.g. 0.9"),
])
def test_a_confidence_level_that_is_no_number_is_a_type_error(rows, level, message):
    with pytest.raises(TypeError) as e:
        calib.fit(rows, confidence_level=level)
    assert str(e.value) == message


def _edited(tmp_path, source: Path, **fields) -> Path:
    d = json.loads(source.read_text())
    d.update(fields)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(d))
    return path


def test_include_reference_edited_to_true_is_refused(tmp_path):
    path = _edited(tmp_path, ROOT / "calib" / "data" / "calibration.json", include_reference=True)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value).startswith(
        f"calibration file {path} is damaged: field 'include_reference' is true (grpo's rows fitted), but "
        "training.counts.dropped_reference says 33 grpo row(s) were left out of the fit, and its data holds 0: the "
        "flag does not match the rows the calibration was fitted on; refit it with `calib fit ROWS.csv ")


def test_include_reference_edited_to_false_is_refused_and_an_intact_one_loads(tmp_path, rows):
    fitted = fit_calibration(rows, forecaster="forecast_cost_only", include_reference=True).save(tmp_path / "inc.json")
    cal = load_calibration(fitted)
    assert cal.include_reference is True and int((cal.rows["arm"] == "grpo").sum()) == 33
    assert not math.isnan(cal.predict(cal.rows)[0][0])
    path = _edited(tmp_path, fitted, include_reference=False)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value).startswith(
        f"calibration file {path} is damaged: field 'include_reference' is false (grpo's rows left out), but its data "
        "holds 33 row(s) of the arm 'grpo', which the calibration is fitted on: the flag does not match its rows; ")
