"""``is_reference`` flags are checked wherever rows are selected for a fit, not only by ``calib fit``'s command line:
``fit_calibration`` and ``report_metrics`` on rows with every flag False fitted grpo's rows (forecast 0, gain 0 by
definition) as data (116 runs of 16 arms instead of 83 of 15 on the shipped rows). A table filtered in Python (grpo's
rows left out, a subset of arms) is still fitted. The warning for an arm that looks like grpo renamed is given once
per ``calib fit`` or ``report_metrics`` call, not once per check (a first version of this check warned 17 times in one
``report_metrics`` call).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from calib.cli import main
from calib.dataset import RowsError, read_rows, select_rows
from calib.integrity import ReferenceLikeArmWarning
from calib.model import fit_calibration
from calib import report_metrics
from calib_helpers import shipped_rows_copy, single_thread_blas  # noqa: F401 (fixture)

ROWS = Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv"


def _edited(tmp_path: Path, edit) -> Path:
    return shipped_rows_copy(tmp_path, edit)


def _all_false(rows):
    for r in rows:
        r["is_reference"] = "False"


def _zeros(rows):
    for r in rows:
        if r["arm"] == "mc_value" and r["study"] == "study_tiny@b6b755233a8f":
            r.update(paired="False", target="0.0", forecast_probe="0.0", forecast_cost_only="0.0",
                     forecast_signal_proxy="", forecast_first_order="0.0")


@pytest.mark.parametrize("call", [
    lambda rows: fit_calibration(rows, forecaster="forecast_cost_only"),
    lambda rows: select_rows(rows, forecaster="forecast_cost_only"),
    lambda rows: report_metrics(rows, forecaster="forecast_cost_only"),
], ids=["fit_calibration", "select_rows", "report_metrics"])
def test_every_is_reference_false_is_refused_by_the_python_api(tmp_path, call):
    rows = read_rows(_edited(tmp_path, _all_false))
    with pytest.raises(RowsError, match=r"study 'study_tiny@b6b755233a8f', arm 'grpo' \(read from .*rows\.csv, "
                                        r"line 2\): is_reference is False, but the reference arm"):
        call(rows)


def test_the_shipped_rows_still_fit_the_same_runs():
    cal = fit_calibration(read_rows(ROWS), forecaster="forecast_cost_only")
    assert (cal.counts["rows"], cal.counts["dropped_reference"]) == (83, 33)


def test_a_table_filtered_in_python_is_still_fitted():
    """A first version refused these (a study with gains but no grpo row), as ``calib fit`` refuses such a file."""
    rows = read_rows(ROWS)
    no_grpo = rows[~rows["is_reference"].astype(bool)].reset_index(drop=True)
    assert fit_calibration(no_grpo, forecaster="forecast_cost_only").counts["rows"] == 83
    two = rows[rows["arm"].isin(["mc_value", "hybrid_0.5"])].reset_index(drop=True)
    assert fit_calibration(two, forecaster="forecast_cost_only").counts["rows"] == 28


def test_grpo_renamed_in_a_filtered_table_is_warned(tmp_path):
    def edit(rows):
        _zeros(rows)
        rows[:] = [r for r in rows if r["arm"] != "grpo"]
    with pytest.warns(ReferenceLikeArmWarning, match=r"study_tiny@b6b755233a8f/mc_value have forecast 0"):
        select_rows(read_rows(_edited(tmp_path, edit)), forecaster="forecast_cost_only")


def test_calib_fit_warns_of_a_reference_like_arm_once(tmp_path, capsys):
    rows = _edited(tmp_path, _zeros)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["fit", str(rows), "--forecaster", "forecast_cost_only", "--out", str(tmp_path / "c.json")]) == 0
    texts = [str(w.message) for w in seen if issubclass(w.category, ReferenceLikeArmWarning)]
    err = capsys.readouterr().err
    assert len(texts) + err.count("study_tiny@b6b755233a8f/mc_value have forecast 0") == 1


def test_report_metrics_warns_of_a_reference_like_arm_once(tmp_path):
    rows = read_rows(_edited(tmp_path, _zeros))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        report_metrics(rows, forecaster="forecast_cost_only", bootstrap_resamples=200, n_permutations=50)
    assert sum(issubclass(w.category, ReferenceLikeArmWarning) for w in seen) == 1
