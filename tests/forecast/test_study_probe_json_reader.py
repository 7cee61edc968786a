"""gradprobe.forecast.study reads a study's probe.json (and a guided arm's) as gradprobe.load_probe does
(gradprobe.outputs.read_probe_json): a UTF-8 byte-order mark is read, a file that is not UTF-8 is refused in one
line naming the file and the fix (a guided arm's too, as load_probe refuses it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gradprobe.forecast.study import study_forecasts
from gradprobe.layout import rerun_advice

ROOT = Path(__file__).resolve().parents[2]
BOM = b"\xef\xbb\xbf"
LATIN1 = '{"rewards": [], "note": "caf\xe9"}'.encode("latin-1")  # byte 0xe9 at position 28: no UTF-8


def _copy(tmp_path, name: str) -> Path:
    return shutil.copytree(ROOT / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures", "*.gz"))


def test_study_forecasts_read_bom_probe_files_as_without_them(tmp_path):
    study = _copy(tmp_path, "study_tiny_guided")
    before = study_forecasts(study)
    for file in (study / "probe" / "probe.json", study / "probe" / "guided" / "guided" / "probe.json"):
        file.write_bytes(BOM + file.read_bytes())
    after = study_forecasts(study)
    assert after.equals(before) and len(after) == 2


def test_study_forecasts_refuse_a_probe_that_is_not_utf8_naming_the_file(tmp_path):
    study = _copy(tmp_path, "study_tiny")
    file = study / "probe" / "probe.json"
    file.write_bytes(LATIN1)
    with pytest.raises(ValueError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{file} is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in position 28: invalid "
                            f"continuation byte); {rerun_advice(file.parent)}")



def test_study_forecasts_read_a_bom_arms_file_and_name_one_that_is_not_utf8(tmp_path):
    study = _copy(tmp_path, "study_tiny_guided")
    before = study_forecasts(study)
    file = study / "probe" / "arms.json"
    file.write_bytes(BOM + file.read_bytes())
    assert study_forecasts(study).equals(before)
    file.write_bytes(LATIN1)
    with pytest.raises(ValueError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{file} is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in position 28: invalid "
                            f"continuation byte); restore it from a copy of the study ({study} has no runs/: "
                            "resuming the study to write it again would train every run again)")
