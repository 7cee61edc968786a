"""A study's runs.csv lines of grpo without an accuracy are left out of its own curve, and said so."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calib.cli import main
from calib.dataset import SkippedEvalsWarning, build_rows
from gradprobe.forecast import SkippedEvalsWarning as ForecastSkippedEvalsWarning
from calib_helpers import single_thread_blas  # noqa: F401 (fixture)
from gradprobe.forecast import ReferenceCurve, study_forecasts
from gradprobe.forecast.curve_fit import CurveError

DATA = Path(__file__).resolve().parents[2] / "data"


def _copy(tmp_path: Path) -> Path:
    study = tmp_path / "study_tiny"
    shutil.copytree(DATA / "study_tiny", study, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    return study


def _blank(study: Path, arm: str, col: str, n: int | None = None) -> list[int]:
    """Empty ``col`` on the last ``n`` (all: None) lines of ``arm`` past update 0; returns their file lines."""
    df = pd.read_csv(study / "runs.csv")
    rows = np.flatnonzero(((df["arm"] == arm) & (df["update"] > 0)).to_numpy())
    rows = rows if n is None else rows[-n:]
    df.loc[rows, col] = np.nan
    df.to_csv(study / "runs.csv", index=False)
    return [int(r) + 2 for r in rows]


def test_a_blank_grpo_accuracy_moves_the_curve_and_is_noted(tmp_path):
    study = _copy(tmp_path)
    intact = ReferenceCurve.from_study(study)
    assert intact.skipped_notes == []
    lines = _blank(study, "grpo", "accuracy", n=2)
    curve = ReferenceCurve.from_study(study)
    assert len(curve.points) == len(intact.points) - 2
    (note,) = curve.skipped_notes
    assert note.startswith(f"2 line(s) of {study / 'runs.csv'} skipped for an empty or NaN cell (line {lines[0]} "
                           f"column 'accuracy', line {lines[1]} column 'accuracy')")
    assert not np.allclose(curve(np.array([12.0, 57.0])), intact(np.array([12.0, 57.0])))


def test_blank_cells_of_other_arms_and_of_accuracy_sampled_are_not_named(tmp_path):
    study = _copy(tmp_path)
    _blank(study, "mc_value", "accuracy", n=3)
    _blank(study, "grpo", "accuracy_sampled")  # empty wherever the schedule skipped sampling: by design
    assert ReferenceCurve.from_study(study).skipped_notes == []


def test_a_grpo_arm_without_any_accuracy_is_refused_naming_the_lines(tmp_path):
    study = _copy(tmp_path)
    df = pd.read_csv(study / "runs.csv")
    df.loc[df["arm"] == "grpo", "accuracy"] = np.nan
    df.to_csv(study / "runs.csv", index=False)
    with pytest.raises(CurveError, match=r"no line of arm 'grpo' holds both an update and an 'accuracy' value; "
                                         r"\d+ line\(s\) of .*runs.csv skipped for an empty or NaN cell"):
        ReferenceCurve.from_study(study)


def test_calib_rows_warn_when_the_studys_own_grpo_curve_lost_evals(tmp_path, single_thread_blas, capsys):
    study = _copy(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedEvalsWarning)
        before = build_rows(study).set_index(["arm", "seed"])
    lines = _blank(study, "grpo", "accuracy", n=2)
    with pytest.warns(SkippedEvalsWarning) as rec:
        after = build_rows(study).set_index(["arm", "seed"])
    (w,) = [r for r in rec if r.category is SkippedEvalsWarning]
    msg = str(w.message)
    assert f"line {lines[0]} column 'accuracy'" in msg and "the study's own grpo curve" in msg
    assert "where the study's run folders are kept, rewrite runs.csv by running its plan.toml again with --out" in msg
    # the forecasts moved with the curve; the realized gains at the budget (analysis.json) did not
    moved = (after["forecast_cost_only"] - before["forecast_cost_only"]).abs()
    assert moved.loc["mc_value"].min() > 1e-6
    pd.testing.assert_series_equal(after["target"], before["target"])
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 0
    err = capsys.readouterr().err
    assert f"calib: warning: {study}: 2 line(s) of {study / 'runs.csv'} skipped for an empty or NaN cell" in err
    assert (tmp_path / "rows.csv").is_file()


def test_the_study_forecaster_warns_from_its_own_curve_and_not_for_a_given_one(tmp_path, single_thread_blas):
    study = _copy(tmp_path)
    intact = ReferenceCurve.from_study(study)
    lines = _blank(study, "grpo", "accuracy", n=1)
    with pytest.warns(SkippedEvalsWarning) as rec:
        study_forecasts(study, n_draws=100)
    (w,) = [r for r in rec if r.category is SkippedEvalsWarning]
    assert str(w.message).startswith(f"{study}: 1 line(s) of {study / 'runs.csv'} skipped for an empty or NaN cell "
                                     f"(line {lines[0]} column 'accuracy')")
    assert w.filename == __file__  # points at the caller of study_forecasts
    assert SkippedEvalsWarning is ForecastSkippedEvalsWarning  # calib re-exports the forecaster's class
    with warnings.catch_warnings():  # a curve passed in (a leave-out) is not the study's: nothing to say
        warnings.simplefilter("error", SkippedEvalsWarning)
        study_forecasts(study, curve=intact, n_draws=100)


def test_a_blank_update_0_accuracy_of_one_grpo_seed_keeps_the_main_r0_in_its_replicates(tmp_path, capsys):
    """A seed whose update-0 eval is blank: bootstrap draws of only such seeds keep the main fit's R0 (they used to
    fail the fit with non-finite residuals); `calib rows` warns, naming the line, and writes the rows."""
    study = _copy(tmp_path)
    df = pd.read_csv(study / "runs.csv")
    (row,) = np.flatnonzero(((df["arm"] == "grpo") & (df["seed"] == 2) & (df["update"] == 0)).to_numpy())
    df.loc[row, "accuracy"] = np.nan
    df.to_csv(study / "runs.csv", index=False)
    curve = ReferenceCurve.from_study(study)
    assert curve.seed_labels == ["0", "1", "2", "3"]
    assert set(curve.points.loc[curve.points["update"] == 0, "seed"]) == {"0", "1", "3"}
    assert np.isfinite(curve.replicates).all() and len(curve.replicates) > 0
    (note,) = [n for n in curve.notes if "kept the main fit's R0" in n]
    kept = int(note.split(" of ")[0])
    only_seed_2 = (curve.replicate_seed_counts[:, [i for i, s in enumerate(curve.seed_labels) if s != "2"]] == 0).all(1)
    assert kept == int(only_seed_2.sum()) > 0
    assert np.allclose(curve.replicates[only_seed_2, 0], curve.params["R0"])
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 0
    assert f"calib: warning: {study}: 1 line(s) of {study / 'runs.csv'} skipped for an empty or NaN cell (line " \
           f"{row + 2} column 'accuracy')" in capsys.readouterr().err
