"""A version-2 calibration file's ``training.rows`` must be the number of its data rows, as ``calib fit`` writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib.file_check import CalibrationFileError
from calib.model import load_calibration

SHIPPED = Path(__file__).resolve().parents[2] / "calib" / "data" / "calibration.json"


def test_the_shipped_file_records_its_data_rows():
    d = json.loads(SHIPPED.read_text())
    assert d["training"]["rows"] == len(d["data"]["rows"]) == 83
    assert len(load_calibration(SHIPPED).rows) == 83


@pytest.mark.parametrize("value, shown", [(True, "true"), ("0.9", '"0.9"'), (82, "82"), (83.0, "83.0"),
                                          (None, "null"), (10 ** 400, "1111111111")])
def test_a_damaged_training_rows_is_refused_naming_the_field_and_the_rebuild(tmp_path, value, shown):
    d = json.loads(SHIPPED.read_text())
    d["training"]["rows"] = int("1" * 400) if value == 10 ** 400 else value
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    msg = str(e.value)
    assert msg.startswith(f"calibration file {path} is damaged: field training.rows is {shown}")
    assert "not the number of rows of the data block (83)" in msg and "calib fit" in msg and "\n" not in msg
