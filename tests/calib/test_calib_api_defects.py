"""Bad inputs at calib's public API boundary give clear errors (findings 8, 9 and 13 of a bad-input test).

- ``calib.build_rows`` (:func:`calib.dataset.build_rows_many`) took a single path for a list and iterated it one
  character at a time ("'/' is not a study folder"); ``None`` gave "'NoneType' object is not iterable". A single
  str or Path is now one study; other non-iterables are a TypeError naming ``study_dirs``.
- ``calib.report_metrics`` (:func:`calib.report.compute`) returned normally with a bad ``confidence_level``
  (5, -1, NaN), the error hidden inside the metrics and an empty table; ``n_permutations <= 0`` failed inside
  numpy ("need at least one array to stack"). Both are now a ValueError at the boundary, the one of ``calib.fit``.
- ``Calibration.predict`` (as notebook 03 calls it) gave raw scikit-learn/pandas errors: a NaN forecast (with
  advice to use HistGradientBoostingClassifier), an empty frame ("Found array with 0 sample(s)"), a flat list
  ("Expected 2D array"), a frame without the column (KeyError). Each is now a clear error naming the column and
  the fix; an empty frame gives three empty arrays.

Built on the shipped study ``data/study_tiny`` (read only).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calib
from calib.cli import main as calib_main
from calib.report import write_report

STUDY = Path(__file__).resolve().parents[2] / "data" / "study_tiny"
QUICK = {"n_permutations": 9, "bootstrap_resamples": 50}  # the settings don't matter to the checks; keep it fast
NEED = "Calibration.predict needs a pandas DataFrame with the column(s) ['forecast_probe']"


@pytest.fixture(scope="module")
def rows():
    return calib.build_rows([STUDY])


@pytest.fixture(scope="module")
def calibration(rows):
    return calib.fit(rows, forecaster="forecast_probe")


# --- 8. build_rows: one path, or not a list at all -------------------------------------------------------------

@pytest.mark.parametrize("one", [str(STUDY), STUDY], ids=["str", "Path"])
def test_build_rows_takes_a_single_path_as_one_study(rows, one):
    got = calib.build_rows(one)
    assert got.shape == rows.shape == (20, 27)
    pd.testing.assert_frame_equal(got, rows)
    assert list(got["study"].unique()) == list(rows["study"].unique())


@pytest.mark.parametrize("bad, kind", [(None, "NoneType"), (3, "int"), (b"data/study_tiny", "bytes")])
def test_build_rows_refuses_a_non_iterable_naming_the_argument(bad, kind):
    with pytest.raises(TypeError) as e:
        calib.build_rows(bad)
    assert str(e.value) == (f"study_dirs must be a study folder or a list of study folders, got {kind}; "
                            'pass e.g. ["data/study_tiny"]')


def test_build_rows_names_an_item_that_is_not_a_path():
    with pytest.raises(TypeError) as e:
        calib.build_rows([STUDY, None])
    assert str(e.value) == ("study_dirs[1] is a NoneType, not a path; pass study folders as str or pathlib.Path, "
                            'e.g. ["data/study_tiny"]')


def test_write_report_refuses_none_before_making_the_folder(tmp_path):
    out = tmp_path / "report"
    with pytest.raises(TypeError, match=r"^study_dirs must be a study folder or a list of study folders, got NoneType"):
        write_report(None, out)
    assert not out.exists()


# --- 9. report_metrics: confidence_level and n_permutations checked at the boundary ------------------------------

@pytest.mark.parametrize("level, shown", [(5, "5"), (-1, "-1"), (math.nan, "nan"), (0.0, "0.0"), (1, "1")])
def test_report_metrics_refuses_a_confidence_level_outside_0_1(rows, level, shown):
    with pytest.raises(ValueError) as e:
        calib.report_metrics(rows, confidence_level=level, **QUICK)
    assert str(e.value) == f"confidence_level must be in (0, 1), got {shown}"
    with pytest.raises(ValueError) as fit_error:  # the same check, and message, as calib.fit
        calib.fit(rows, confidence_level=level)
    assert str(fit_error.value) == str(e.value)


@pytest.mark.parametrize("n", [0, -1, 2.5, True])
def test_report_metrics_refuses_n_permutations_that_is_not_a_positive_integer(rows, n):
    with pytest.raises(ValueError) as e:
        calib.report_metrics(rows, n_permutations=n, bootstrap_resamples=50)
    assert str(e.value) == ("n_permutations must be a positive integer (the permutations of the rank tests; e.g. "
                            f"9999), got {n!r}")


def test_report_metrics_refuses_an_unknown_interval(rows):
    with pytest.raises(ValueError) as e:
        calib.report_metrics(rows, interval="jackknife", **QUICK)
    assert str(e.value) == "unknown interval method 'jackknife'; choose one of ('cv_plus', 'split')"


def test_report_metrics_with_good_settings_still_computes(rows):
    metrics, cv_rows, table = calib.report_metrics(rows, confidence_level=0.8, **QUICK)
    head = metrics["errors"][metrics["headline_cv"]]["forecast_probe"]
    assert "error" not in head["raw"] and "error" not in head["calibrated"]
    assert metrics["confidence_level"] == 0.8 and metrics["headline_cv"] == "arm"
    assert cv_rows.shape[0] > 0 and {"cv", "forecaster", "method", "cv_pred"} <= set(cv_rows.columns)
    assert len(table) == 5  # the study's 5 arms (grpo included at 0)


def test_cli_report_with_a_bad_confidence_prints_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "report"
    assert calib_main(["report", str(STUDY), "--out", str(out), "--confidence", "5"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "calib report: error: confidence_level must be in (0, 1), got 5.0\n"
    assert captured.out == ""
    assert not out.exists()


# --- 13. Calibration.predict: clear errors, an empty frame gives empty arrays ------------------------------------

def test_predict_names_a_nan_forecast_and_the_fix(calibration):
    x = pd.DataFrame({"forecast_probe": [1.0, np.nan, np.inf]}, index=["a", "b", "c"])
    with pytest.raises(ValueError) as e:
        calibration.predict(x)
    assert str(e.value) == (f"{NEED} holding finite numbers; column 'forecast_probe' has 2 NaN or infinite value(s) "
                            "(rows ['b', 'c']): a forecaster gives NaN where it cannot say; drop those rows first "
                            "(for NaN: X.dropna(subset=['forecast_probe']))")
    assert "HistGradientBoosting" not in str(e.value)


def test_predict_of_an_empty_frame_is_three_empty_arrays(calibration):
    got = calibration.predict(pd.DataFrame({"forecast_probe": []}))
    assert isinstance(got, tuple) and len(got) == 3
    for a in got:
        assert isinstance(a, np.ndarray) and a.shape == (0,) and a.dtype == np.float64
    full = calibration.predict(pd.DataFrame({"forecast_probe": [1.0, 2.0]}))  # the same type as with rows
    assert [(type(a), a.shape, a.dtype) for a in full] == [(np.ndarray, (2,), np.float64)] * 3


def test_predict_refuses_a_flat_list_with_the_shape_it_needs(calibration):
    with pytest.raises(ValueError) as e:
        calibration.predict([1.0, 2.0])
    assert str(e.value) == (f"{NEED} (or a 2-D array of shape (n_rows, 1)), got a list of shape (2,): pass e.g. "
                            "pandas.DataFrame({'forecast_probe': values})")


def test_predict_names_the_missing_column(calibration):
    with pytest.raises(ValueError) as e:
        calibration.predict(pd.DataFrame({"x": [1.0]}))
    assert str(e.value) == (f"{NEED}; the DataFrame lacks ['forecast_probe'] (it has ['x']): name the forecast "
                            "column 'forecast_probe' (the rows of calib.build_rows have it)")


@pytest.mark.parametrize("bad, kind", [(None, "NoneType"), ("forecast_probe", "str")])
def test_predict_refuses_what_is_not_a_table(calibration, bad, kind):
    with pytest.raises(TypeError) as e:
        calibration.predict(bad)
    assert str(e.value) == f"{NEED}, got {kind}: pass e.g. pandas.DataFrame({{'forecast_probe': [...]}})"


def test_predict_of_good_input_is_unchanged(calibration, rows):
    x = rows.loc[np.isfinite(rows["forecast_probe"]), ["study", "forecast_probe"]]
    point, lo, hi = calibration.predict(x)
    assert point.shape == lo.shape == hi.shape == (len(x),)
    np.testing.assert_allclose(point, calibration.estimator.predict(x[["forecast_probe"]].to_numpy(float)))
    as_array = calibration.predict(x[["forecast_probe"]].to_numpy(float))  # a 2-D array, as before
    for a, b in zip(as_array, (point, lo, hi)):
        np.testing.assert_array_equal(a, b)
    assert np.all(lo <= point) and np.all(point <= hi)


@pytest.mark.parametrize("bad", [123, None, b"calib.json", ["default"]])
def test_load_names_a_calibration_that_is_no_path(bad):
    """calib.load(123) raised pathlib's "expected str, bytes or os.PathLike object, not int", naming no argument."""
    with pytest.raises(TypeError) as e:
        calib.load(bad)
    assert str(e.value) == ("the calibration must be a path to a calibration file (str or os.PathLike) or 'default', "
                            f"got {bad!r} ({type(bad).__name__})")
