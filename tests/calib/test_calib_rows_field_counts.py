"""A hand-edited rows CSV whose lines do not hold one cell per header column, or whose header names a column twice,
is refused naming the file, the line and the fix (not read with shifted or missing cells, nor a traceback)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from calib.cli import main
from calib.dataset import RowsError, read_rows

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv"


def _lines():
    with SHIPPED.open(newline="", encoding="utf-8") as f:
        return [list(r) for r in csv.reader(f)]


def _write(path, lines):
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(lines)
    return path


def test_a_short_line_is_refused_not_read_as_a_run_without_a_target(tmp_path):
    lines = _lines()
    assert len(read_rows(SHIPPED)) == len(lines) - 1  # the file as `calib rows` wrote it is read
    lines[5] = lines[5][:-2]  # curve_source and target... deleted by hand: pandas reads them as blank
    path = _write(tmp_path / "rows.csv", lines)
    with pytest.raises(RowsError) as e:
        read_rows(path)
    msg = str(e.value)
    assert f"{path}, line 6 holds {len(lines[0]) - 2} cells but the header (line 1) names {len(lines[0])}" in msg
    assert "a cell was deleted" in msg and f"calib rows STUDY_DIR... --out {path}" in msg


def test_an_extra_cell_on_every_line_is_refused_not_a_traceback(tmp_path, capsys):
    lines = _lines()
    path = _write(tmp_path / "rows.csv", [lines[0]] + [r + ["5"] for r in lines[1:]])
    status = main(["fit", str(path), "--forecaster", "forecast_cost_only", "--out", str(tmp_path / "cal.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{path}, line 2 holds {len(lines[0]) + 1} cells but the header (line 1) names {len(lines[0])}" in err
    assert "an extra cell or comma" in err and "Traceback" not in err
    assert not (tmp_path / "cal.json").exists()


def test_a_header_missing_its_last_name_is_refused(tmp_path):
    lines = _lines()
    path = _write(tmp_path / "rows.csv", [lines[0][:-1]] + lines[1:])
    with pytest.raises(RowsError, match=rf"line 2 holds {len(lines[0])} cells but the header \(line 1\) names "
                                        rf"{len(lines[0]) - 1} columns"):
        read_rows(path)


def test_a_column_named_twice_is_refused(tmp_path):
    lines = _lines()
    j = lines[0].index("target")
    path = _write(tmp_path / "rows.csv", [lines[0] + ["target"]] + [r + [str(float(r[j] or 0) + 50)]
                                                                     for r in lines[1:]])
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert "line 1 (the header): column(s) ['target'] appear more than once" in str(e.value)


def test_a_calibration_file_given_as_rows_is_named_as_such(tmp_path, capsys):
    cal = tmp_path / "calibration.json"
    cal.write_bytes((SHIPPED.parents[2] / "calib" / "data" / "calibration.json").read_bytes())
    status = main(["fit", str(cal), "--forecaster", "forecast_cost_only", "--out", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert (f"{cal} is a calibration file (the JSON `calib fit` writes; apply it with `calib apply PROBE_DIR "
            f"--calibration {cal}`), not a rows CSV") in err
    assert "cut short" not in err and not (tmp_path / "out.json").exists()
