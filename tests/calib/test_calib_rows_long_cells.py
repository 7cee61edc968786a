"""A rows CSV with a cell longer than the csv module's default field limit (131,072 characters: a task_config
holding a long list) is read as pandas reads it, not refused with csv's "field larger than field limit" traceback,
and the field-count check still names a short line in such a file; the process-wide csv limit is left as it was. A
calibration file saved with a UTF-8 byte-order mark is named as a calibration file, as one without it is."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from calib.dataset import RowsError, read_rows
from calib.model import load_calibration

SHIPPED_ROWS = Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv"
SHIPPED_CALIBRATION = Path(__file__).resolve().parents[2] / "calib" / "data" / "calibration.json"


def _rows_with_long_task_config(tmp_path: Path, *, cut_line: int | None = None) -> tuple[Path, str]:
    """The shipped rows with line 2's task_config a JSON object of 200,000+ characters (written as `calib rows`
    writes it: csv quoting); ``cut_line`` (a line number, 1 = the header) loses its last two cells."""
    with SHIPPED_ROWS.open(newline="", encoding="utf-8") as f:
        lines = [list(r) for r in csv.reader(f)]
    col = lines[0].index("task_config")
    long = json.dumps({"config": {"prompts": [f"prompt {i}, with a comma" for i in range(10000)]}, "name": "mine"})
    assert len(long) > 200_000
    lines[1][col] = long
    if cut_line is not None:
        lines[cut_line - 1] = lines[cut_line - 1][:-2]
    path = tmp_path / "rows.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(lines)
    return path, long


def test_a_cell_longer_than_the_csv_modules_limit_is_read(tmp_path):
    limit = csv.field_size_limit()
    path, long = _rows_with_long_task_config(tmp_path)
    rows = read_rows(path)
    assert len(rows) == 140 and rows.loc[0, "task_config"] == long
    assert rows.loc[1, "task_config"] == read_rows(SHIPPED_ROWS).loc[1, "task_config"]
    assert csv.field_size_limit() == limit  # raised for the check only


def test_a_short_line_in_a_file_with_a_long_cell_is_still_named(tmp_path):
    limit = csv.field_size_limit()
    path, _ = _rows_with_long_task_config(tmp_path, cut_line=7)
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert f"{path}, line 7 holds 25 cells but the header (line 1) names 27 columns" in str(e.value)
    assert csv.field_size_limit() == limit


def test_a_calibration_file_saved_with_a_byte_order_mark_is_named_as_one(tmp_path):
    load_calibration(SHIPPED_CALIBRATION)  # the shipped calibration is valid
    path = tmp_path / "calibration.json"
    path.write_bytes(b"\xef\xbb\xbf" + SHIPPED_CALIBRATION.read_bytes())
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert str(e.value) == (f"{path} is a calibration file (the JSON `calib fit` writes; apply it with `calib apply "
                            f"PROBE_DIR --calibration {path}`), not a rows CSV; pass the CSV that `calib rows "
                            "STUDY_DIR... --out ROWS.csv` writes")
