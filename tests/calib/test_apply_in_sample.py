"""``calib apply`` on a probe of a study the calibration was fitted on says its result is in-sample, and adds no
file to a study's folder.

A trial user ran ``calib apply data/study_tiny/probe``: it printed ``mc_value -4.625 -> -4.289 [-7.603, -0.981]``
(realized -4.35) with ``warnings: []`` and wrote ``data/study_tiny/probe/calibrated.json`` into the shipped study.
study_tiny is one of the default calibration's training studies (``study_tiny@b6b755233a8f`` in its domain), so
that gain is in-sample. Now: a warning (printed, and in calibrated.json's ``warnings`` and ``in_sample``); a
study's probe folder gets no calibrated.json (as ``gradprobe probe --out`` refuses a study's probe folder): the
result is printed and written only with ``--out``, outside any study. The studies are copied to ``tmp_path``
(study.json, plan.toml, probe/), so no test writes under data/ even against the old code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import calib
from calib.cli import main as calib_main

DATA = Path(__file__).resolve().parents[2] / "data"
KEY = "study_tiny@b6b755233a8f"


def copy_study(src: Path, dest: Path) -> Path:
    """The files of a study ``calib apply`` reads (study.json, plan.toml, probe/), copied to ``dest``."""
    dest.mkdir(parents=True)
    for name in ("study.json", "plan.toml"):
        shutil.copy2(src / name, dest / name)
    shutil.copytree(src / "probe", dest / "probe")
    return dest


def warning_of(key: str, recorded: str = "") -> str:
    return (f"in-sample: the calibration was fitted on the runs of this probe's study ({key}{recorded}), so its "
            "calibrated gains and intervals here are in-sample (optimistic), not a test of the calibration; for a "
            "held-out check see `calib report`'s leave-one-study-out errors")


def test_a_training_study_gets_the_warning_and_no_file_in_its_probe_folder(tmp_path, capsys):
    study = copy_study(DATA / "study_tiny", tmp_path / "study_tiny")
    before = sorted(p.name for p in (study / "probe").iterdir())
    assert calib_main(["apply", str(study / "probe")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"warning: {warning_of(KEY)}" in lines
    assert lines.index(f"warning: {warning_of(KEY)}") < next(i for i, x in enumerate(lines) if x.startswith("reward"))
    assert "mc_value            -4.625      -4.289        [-7.603, -0.981]  tied" in lines
    assert sorted(p.name for p in (study / "probe").iterdir()) == before  # nothing added to the study
    assert lines[-1] == (f"not written: {study / 'probe'} is the probe folder of the study {study} (study.json "
                         "there), and calib apply adds no file to a study (as `gradprobe probe --out` refuses a "
                         "study's probe folder): pass --out FILE to write calibrated.json elsewhere")


def test_out_writes_the_warning_into_calibrated_json(tmp_path, capsys):
    study = copy_study(DATA / "study_tiny", tmp_path / "study_tiny")
    dest = tmp_path / "elsewhere" / "calibrated.json"
    assert calib_main(["apply", str(study / "probe"), "--out", str(dest)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {dest}"
    doc = json.loads(dest.read_text())
    assert doc["in_sample"] == warning_of(KEY) and doc["warnings"] == [warning_of(KEY)]
    assert doc["outside_domain"] is False
    mc = next(r for r in doc["rewards"] if r["name"] == "mc_value")
    assert mc["calibrated_gain"] == pytest.approx(-4.289, abs=5e-4)
    # again: the earlier calibrated.json is replaced, and stderr says so
    assert calib_main(["apply", str(study / "probe"), "--out", str(dest)]) == 0
    assert f"replaced the earlier calibrated file (`calib apply`) {dest}" in capsys.readouterr().err


def test_a_renamed_copy_is_matched_by_its_plan(tmp_path):
    study = copy_study(DATA / "study_tiny", tmp_path / "my_copy")
    table = calib.apply("default", study / "probe")  # the Python front door: writes nothing
    key = "my_copy@b6b755233a8f"
    assert table.attrs["document"]["in_sample"] == warning_of(key, f", recorded as {KEY}")


def test_a_held_out_study_and_a_plain_probe_get_no_warning(tmp_path, capsys):
    study = copy_study(DATA / "study_tiny_heldout4k", tmp_path / "study_tiny_heldout4k")
    table = calib.apply("default", study / "probe")
    assert table.attrs["document"]["in_sample"] is None
    assert not any(str(w).startswith("in-sample") for w in table.attrs["document"]["warnings"])
    plain = tmp_path / "runs" / "probe"  # a `gradprobe probe --out` folder: written next to probe.json, as before
    plain.mkdir(parents=True)
    shutil.copy2(DATA / "study_tiny" / "probe" / "probe.json", plain / "probe.json")
    assert calib_main(["apply", str(plain)]) == 0
    out = capsys.readouterr().out
    assert "in-sample" not in out
    # (outside the domain: a probe.json outside its study records the task's name only, not the plan's config)
    assert out.splitlines()[-1].startswith(f"wrote {plain / 'calibrated.json'}")
    assert json.loads((plain / "calibrated.json").read_text())["in_sample"] is None


def test_out_into_a_study_or_over_another_file_is_refused(tmp_path, capsys):
    study = copy_study(DATA / "study_tiny", tmp_path / "study_tiny")
    for dest in (study / "probe" / "calibrated.json", study / "calibrated.json"):
        assert calib_main(["apply", str(study / "probe"), "--out", str(dest)]) == 2
        err = capsys.readouterr().err
        assert f"--out {str(dest)!r} lies in {str(dest.parent)!r}, which is a study" in err
        assert "choose another --out" in err and not dest.exists()
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": 1}')
    assert calib_main(["apply", str(study / "probe"), "--out", str(mine)]) == 2
    assert "exists and is no calibrated file (`calib apply`)" in capsys.readouterr().err
    assert mine.read_text() == '{"mine": 1}'
