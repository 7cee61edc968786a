"""``calib report`` reads each study's analysis.json for its rows only: the arms with a run that never trained (which
the seed-noise floor and every forecaster's arm-mean errors leave out) come from the document the rows were built from
(calib.dataset.build_rows_many ``_analyses``), not from a second read (calib.noise_floor.study_never_trained read every
analysis.json again). The study: a copy of the shipped data/study_tiny whose analysis.json marks
mc_advantage's seed 0 as never trained (as tests/calib/test_never_trained_noise_floor.py)."""

from __future__ import annotations

import builtins
import json
import shutil
from pathlib import Path

import pytest

import calib.report as report
from calib.noise_floor import study_never_trained

ROOT = Path(__file__).resolve().parents[2]
KEY = "study_tiny@b6b755233a8f"  # the study column of calib's rows (FOLDER@SHA12)
FLAT = "every group's rewards were equal (all groups flat: zero variance)"
NOT_NOISE = ("a run that never trained (every update had every advantage 0) samples a broken setup, not the arm's seed "
             "noise")
WHY = f"mc_advantage never trained (seed 0: {FLAT} (10 updates)): {NOT_NOISE}"
LEFT = [{"study": KEY, "arm": "mc_advantage", "why": WHY,
         "runs": [{"arm": "mc_advantage", "seed": 0, "cause": "flat"}]}]


def _study(tmp_path) -> Path:
    """data/study_tiny copied (figures left out), mc_advantage's seed 0 marked as never trained."""
    study = Path(shutil.copytree(ROOT / "data" / "study_tiny", tmp_path / "study_tiny",
                                 ignore=shutil.ignore_patterns("figures")))
    doc = json.loads((study / "analysis.json").read_text())
    doc["arms"]["mc_advantage"]["never_trained"] = [{"seed": 0, "cause": "flat", "why": FLAT, "updates": 10}]
    (study / "analysis.json").write_text(json.dumps(doc))
    return study


@pytest.fixture
def analysis_reads(monkeypatch):
    """``seen["reads"]``: reads of a file named analysis.json (``Path.read_text``/``read_bytes``, ``open``);
    ``seen["at_rows"]``: the count when the report's rows were built (``calib.report.build_rows_many`` returned)."""
    seen = {"reads": 0, "at_rows": None}
    read_text, read_bytes, builtin_open = Path.read_text, Path.read_bytes, builtins.open
    build = report.build_rows_many

    def counted(original):
        def wrapper(self, *args, **kwargs):
            seen["reads"] += Path(self).name == "analysis.json"
            return original(self, *args, **kwargs)
        return wrapper

    def rows_then_mark(*args, **kwargs):
        rows = build(*args, **kwargs)
        seen["at_rows"] = seen["reads"]
        return rows

    monkeypatch.setattr(Path, "read_text", counted(read_text))
    monkeypatch.setattr(Path, "read_bytes", counted(read_bytes))
    monkeypatch.setattr(builtins, "open", counted(builtin_open))  # Path.read_text opens by io.open: counted once
    monkeypatch.setattr(report, "build_rows_many", rows_then_mark)
    return seen


def test_the_report_reads_no_analysis_json_after_its_rows(tmp_path, analysis_reads):
    study = _study(tmp_path)
    m = report.write_report([study], tmp_path / "out", cv="arm", n_permutations=9, bootstrap_resamples=200)
    assert analysis_reads["at_rows"] >= 1  # the rows read it (with gradprobe's own checks of it)
    assert analysis_reads["reads"] == analysis_reads["at_rows"]  # before: one more, study_never_trained's
    assert m["seed_noise_floor"]["never_trained"] == LEFT  # the arm is still found, from the rows' read
    assert (m["seed_noise_floor"]["arms"], m["seed_noise_floor"]["runs"]) == (2, 8)  # hybrid_0.5, mc_value: 4 each
    levels = [e[k]["common"]["arm_level"] for e in m["errors"]["arm"].values() for k in ("raw", "calibrated")
              if "common" in e[k]]
    assert len(levels) == 8  # 4 forecasters x raw/calibrated, each leaving the arm out
    assert all(x["never_trained"] == LEFT and (x["arms"], x["floor_arms"]) == (2, 2) for x in levels)


def test_study_never_trained_takes_the_document_already_read(tmp_path):
    """A pre-read document is used as it stands (the file is not read): here it differs from the file on disk."""
    study = _study(tmp_path)
    doc = json.loads((ROOT / "data" / "study_tiny" / "analysis.json").read_text())  # no run that never trained
    assert study_never_trained([study], _analyses={study: doc}) == {}
    assert [r["seed"] for r in study_never_trained([study])[KEY]["mc_advantage"]] == [0]  # the file's
    assert [r["seed"] for r in study_never_trained([study], _analyses={tmp_path: doc})[KEY]["mc_advantage"]] == [0]

