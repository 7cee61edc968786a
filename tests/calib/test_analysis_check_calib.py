"""``calib rows`` refuses a study whose runs.csv was edited after its analysis.json where the check let the edit
through (:func:`calib.integrity.check_analysis_matches_runs`, by :func:`gradprobe.study.coverage.stale_analysis`, the
forecast layer's comparison), and reads a re-saved or lost-eval runs.csv as before.

The breaker's edits on ``data/study_tiny`` without its per-item results: grpo's update-2 cells blanked and every
grpo final accuracy raised (a run with a blank cell was not compared); grpo's update-0 accuracies raised and
mc_value's lowered (the mean over the arms kept); an eval no matched read uses edited. A trial user's runs.csv
re-saved with ``to_csv(float_format="%.6g")`` was refused on its FLOPs reads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from calib.dataset import StudyFormatError, build_rows
from calib.integrity import check_analysis_matches_runs
from study_helpers import set_runs_cells, shipped_copy

REPO = Path(__file__).resolve().parents[2]
LEAD = "the accuracy analysis.json reads differs from runs.csv's now for "


def _check(study: Path) -> None:
    """calib's check of the folder's analysis.json against its runs.csv, as ``calib rows`` calls it (per_seed: each
    arm's accuracy per seed at the token budget, NaN for a null)."""
    analysis = json.loads((study / "analysis.json").read_text())
    per_seed = {arm: {int(s): math.nan if v is None else float(v)
                      for s, v in res["generated_tokens"]["per_seed"].items()} for arm, res in analysis["arms"].items()}
    check_analysis_matches_runs(study, analysis, per_seed)


def _refusal(study: Path) -> str:
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)  # calib rows: refused before any forecast is read
    msg = str(e.value)
    assert msg.startswith(f"{study}: analysis.json does not match runs.csv (")
    assert f"if it was edited since, restore it from a copy: {study} has no runs/ folder" in msg  # both fixes
    return msg


def test_calib_rows_refuses_the_breakers_blanked_and_edited_grpo_runs(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    finals = {0: (57, "0.838"), 1: (56, "0.821"), 2: (57, "0.844"), 3: (57, "0.832")}  # were 0.788 .771 .794 .782
    set_runs_cells(study, {**{("grpo", s, 2, "accuracy"): "" for s in finals},
                          **{("grpo", s, u, "accuracy"): a for s, (u, a) in finals.items()}})
    msg = _refusal(study)
    assert (f"({LEAD}4 run(s): grpo seed 0 at generated_tokens = 250,000: 78.8 points in analysis.json, 83.8 from "
            "runs.csv now (update 57: accuracy 0.838); grpo seed 1 at ") in msg


def test_calib_rows_refuses_a_compensating_update_0_edit_naming_the_arms(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    set_runs_cells(study, {**{("grpo", s, 0, "accuracy"): "0.776" for s in range(4)},
                          **{("mc_value", s, 0, "accuracy"): "0.576" for s in range(4)}})
    msg = _refusal(study)
    assert (f"({LEAD}arm grpo at update 0 (arms.grpo.sigmoid.updates.R0, the mean over its runs): 67.6 points in "
            "analysis.json, 77.6 from runs.csv now (seed 0: accuracy 0.776, ") in msg
    assert f"; {LEAD}arm mc_value at update 0 (arms.mc_value.sigmoid.updates.R0, " in msg


def test_calib_rows_refuses_an_edited_accuracy_that_no_read_uses(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    set_runs_cells(study, {("hybrid_0.5", 2, 5, "accuracy"): "0.75"})  # was 0.724; hybrid_0.5 seed 2: read at 0, 10
    msg = _refusal(study)
    assert (f"({LEAD}arm hybrid_0.5's evals (arms.hybrid_0.5.sigmoid.updates, the sigmoid fitted to all its evals "
            "against updates): 26 evals, rmse 1.081852 points in analysis.json; 26 evals, rmse ") in msg


def test_a_lost_eval_is_read_and_the_runs_other_reads_are_compared(tmp_path):
    """A blank accuracy cell at grpo seed 3's read at updates = 10: that read skipped (it would differ because the
    eval is missing), the check passes; the same run's final accuracy edited: refused."""
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    set_runs_cells(study, {("grpo", 3, 10, "accuracy"): ""})
    _check(study)
    set_runs_cells(study, {("grpo", 3, 57, "accuracy"): "0.792"})  # was 0.782
    with pytest.raises(StudyFormatError, match=r"for 1 run\(s\): grpo seed 3 at generated_tokens = 250,000: 78\.2 "
                                               r"points in analysis\.json, 79\.2 from runs\.csv now"):
        _check(study)


def test_calib_rows_reads_a_runs_csv_resaved_with_six_digits_as_the_shipped_one(tmp_path):
    """The FLOPs and device-seconds values rounded (study_tiny's FLOPs budget is one run's final eval, read exactly):
    the rows are the shipped folder's, realized accuracies and forecasts alike."""
    shipped = build_rows(shipped_copy("study_tiny", tmp_path / "shipped" / "study_tiny"))
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    pd.read_csv(study / "runs.csv").to_csv(study / "runs.csv", index=False, float_format="%.6g")
    assert "7.48558e+10" in (study / "runs.csv").read_text()
    rows = build_rows(study)
    cols = ["arm", "seed", "realized", "target", "forecast_probe", "forecast_cost_only", "forecast_first_order"]
    pd.testing.assert_frame_equal(rows[cols], shipped[cols])
    assert len(rows) == 20
