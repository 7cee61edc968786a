"""A rows CSV's bad cells and infinite forecasts are refused by name (file, line, column; or study, arm, seed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calib.cli import main
from calib.dataset import RowsError, StudyFormatError, build_rows, build_rows_many, read_rows, select_rows
from gradprobe.layout import rerun_advice
from calib_helpers import single_thread_blas, synthetic, synthetic_forecasts, write_study  # noqa: F401 (fixtures)


@pytest.fixture()
def rows_csv(tmp_path):
    """A rows CSV of one synthetic study and its DataFrame."""
    rows = build_rows(write_study(tmp_path / "s"), forecast_fn=synthetic_forecasts)
    path = tmp_path / "rows.csv"
    rows.to_csv(path, index=False)
    return path, rows


def _set_cell(path, rows, i, column, value):
    df = rows.astype({column: object})
    df.loc[i, column] = value
    df.to_csv(path, index=False)


def _row_of(rows, arm, seed):
    return int(rows.index[(rows["arm"] == arm) & (rows["seed"] == seed)][0])


def test_a_non_number_names_the_file_the_line_and_the_column(rows_csv, tmp_path, capsys):
    path, rows = rows_csv
    i = _row_of(rows, "mc_value", 2)
    _set_cell(path, rows, i, "target", "abc")
    with pytest.raises(RowsError) as e:
        read_rows(path)
    msg = str(e.value)
    assert f"{path}, line {i + 2}, column 'target': 'abc' is not a number" in msg
    assert f"calib rows STUDY_DIR... --out {path}" in msg
    # the command line prints it on one line, exit status 2 (was "could not convert string to float: 'abc'")
    assert main(["fit", str(path), "--out", str(tmp_path / "cal.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"line {i + 2}, column 'target'" in err and str(path) in err
    assert not (tmp_path / "cal.json").exists()


def test_a_bad_flag_is_refused_not_read_as_true(rows_csv):
    path, rows = rows_csv
    i = _row_of(rows, "grpo", 1)
    _set_cell(path, rows, i, "is_reference", "yes")
    with pytest.raises(RowsError, match=rf"line {i + 2}, column 'is_reference': 'yes' is not True or False"):
        read_rows(path)


def test_a_good_file_reads_back_with_its_types(rows_csv):
    path, rows = rows_csv
    back = read_rows(path)
    assert back["is_reference"].dtype == bool and back["is_reference"].sum() == 4
    assert np.allclose(back["target"], rows["target"], equal_nan=True)
    assert back["seed"].tolist() == rows["seed"].tolist()


@pytest.mark.parametrize("content, expected", [
    (b"", r"is empty \(no header line\)"),
    (b"\xff\xfe\x00\x01binary\x00", r"is not a UTF-8 text CSV \(byte 0xff at offset 0\)"),
])
def test_an_empty_or_binary_file_is_named(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(RowsError, match=expected) as e:
        read_rows(path)
    assert str(path) in str(e.value) and "calib rows STUDY_DIR" in str(e.value)
    assert main(["fit", str(path), "--out", str(tmp_path / "cal.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("calib fit: error: ") and str(path) in err and err.count("\n") == 1


def test_an_infinite_forecast_in_a_rows_file_is_refused_not_taken_for_no_forecast(rows_csv):
    path, rows = rows_csv
    i = _row_of(rows, "mc_min", 3)
    _set_cell(path, rows, i, "forecast_cost_only", "inf")
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert f"{path}, line {i + 2}, column 'forecast_cost_only': inf is not a forecast" in str(e.value)
    _set_cell(path, rows, i, "forecast_cost_only", "-inf")
    with pytest.raises(RowsError, match=rf"line {i + 2}, column 'forecast_cost_only': -inf"):
        read_rows(path)


def test_an_empty_forecast_cell_still_means_no_forecast(rows_csv):
    path, rows = rows_csv
    i = _row_of(rows, "mc_min", 3)
    _set_cell(path, rows, i, "forecast_cost_only", "")
    sel, counts = select_rows(read_rows(path), forecaster="forecast_cost_only")
    assert counts["dropped_no_forecast"] == 4 + 1  # the lr arm's 4 runs and this one
    assert counts["rows"] == 12 - 1 and not ((sel["arm"] == "mc_min") & (sel["seed"] == 3)).any()


def test_an_infinite_forecast_in_a_rows_table_names_study_arm_and_seed(tmp_path):
    rows = build_rows(write_study(tmp_path / "s"), forecast_fn=synthetic_forecasts)
    i = _row_of(rows, "hybrid_0.5", 1)
    rows.loc[i, "forecast_probe"] = math.inf
    with pytest.raises(RowsError, match=r"study 's@[0-9a-f]{12}', arm 'hybrid_0.5', seed 1: forecast_probe = inf "
                                        r"is not a finite number"):
        select_rows(rows)
    select_rows(rows, forecaster="forecast_cost_only")  # another forecaster's column is not read


def _inf_forecasts(study_dir, curve=None):
    fc = synthetic_forecasts(study_dir, curve=curve)
    fc.loc[fc["arm"] == "mc_value", "forecast_cost_only"] = math.inf
    return fc


def test_an_infinite_forecast_of_a_study_names_the_study_the_arm_and_its_seeds(tmp_path, synthetic, capsys):
    study = write_study(tmp_path / "s")
    with pytest.raises(StudyFormatError) as e:
        build_rows_many([study], forecast_fn=_inf_forecasts)
    msg = str(e.value)
    assert msg.startswith(f"{study}: arm 'mc_value' (seeds [0, 1, 2, 3]) has forecast_cost_only = inf")
    assert "NaN means no forecast" in msg
    # the study's fix (a probe folder of a study is refused by gradprobe probe --out): restore it, runs/ being absent
    assert msg.endswith(f"(tokens_per_update, rho); {rerun_advice(study / 'probe')}") and "gradprobe probe" not in msg
    assert rerun_advice(study / "probe").endswith(f"restore {study / 'probe' / 'probe.json'} from a copy of the study")
    # NaN (the lr arm) is still no forecast: the study builds
    assert build_rows(study, forecast_fn=synthetic_forecasts)["forecast_cost_only"].isna().sum() == 4


@pytest.mark.parametrize("column, value, what", [("target", 1e9, "a gain vs grpo"), ("target", -100.5, "a gain vs grpo"),
                                                 ("realized", 0.78e3, "an accuracy"), ("realized", -1.0, "an accuracy")])
def test_a_gain_or_accuracy_outside_the_points_range_is_refused(rows_csv, column, value, what):
    """`calib fit` took target = 1e9 (an impossible gain in accuracy points) and fitted on it."""
    path, rows = rows_csv
    i = _row_of(rows, "mc_min", 3)
    _set_cell(path, rows, i, column, value)
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert str(e.value).startswith(f"{path}, line {i + 2}, column {column!r}: {float(value)} is not {what} (accuracy "
                                   "points lie in [")


def test_the_ends_of_the_points_range_and_unbounded_forecasts_are_taken(rows_csv):
    path, rows = rows_csv
    for column, value in (("target", -100.0), ("target", 100.0), ("realized", 0.0), ("realized", 100.0),
                          ("forecast_first_order", 250.0)):
        _set_cell(path, rows, _row_of(rows, "mc_min", 3), column, value)
        assert float(read_rows(path).loc[_row_of(rows, "mc_min", 3), column]) == value
