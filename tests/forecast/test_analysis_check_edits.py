"""Edits of a study's runs.csv that the check against its analysis.json let through, now refused by a reference curve
read from the study (``ReferenceCurve.from_study``) and by calib's comparison
(:func:`gradprobe.study.coverage.stale_analysis`), which is the forecast layer's
(:func:`gradprobe.forecast.analysis_reads.analysis_differences`).

Found by a breaker on ``data/study_tiny`` (per-item results deleted, so no eval is checked against its items):

- grpo's update-2 accuracy cells blanked and every grpo final accuracy raised: a run with a blank cell was not
  compared at all, and mc_value's forecast moved from -3.3 to -9.4 with only a skipped-cells note;
- grpo's update-0 accuracies raised by 0.1 and mc_value's lowered by 0.1: ``initial.per_seed`` (the mean over the
  arms) kept, grpo's R0 moved from 67.6 to 77.6 and a verdict flipped;
- an accuracy (or an ``update``) of an eval no matched read uses: analysis.json recorded nothing to tell it by.

A blank cell itself (a lost eval) is still read with its note, not refused.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from gradprobe.forecast.analysis_reads import analysis_differences
from gradprobe.forecast.csv_cells import read_csv_checked
from gradprobe.forecast.curves import CurveError, ReferenceCurve
from gradprobe.study.coverage import stale_analysis
from gradprobe.study.reading import load_runs
from study_helpers import set_runs_cells, shipped_copy

REPO = Path(__file__).resolve().parents[2]
#: grpo's final evals in study_tiny (seed -> update), read at the generated-token budget (each run's final eval)
GRPO_FINALS = {0: 57, 1: 56, 2: 57, 3: 57}
LEAD = "the accuracy analysis.json reads differs from runs.csv's now for "


def _differences(study: Path, **kwargs) -> list[str]:
    """analysis_differences of the folder's runs.csv, read from its bytes as a curve reads it."""
    path = study / "runs.csv"
    raw = path.read_bytes()
    return analysis_differences(study, read_csv_checked(path, raw), raw, **kwargs)


def _both(study: Path) -> list[str]:
    """:func:`_differences`, asserted equal to stale_analysis of load_runs (calib's and the command line's)."""
    diffs = _differences(study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped-cells warning of a blank cell
        assert stale_analysis(study, load_runs(study)) == diffs
    return diffs


def _curve_refusal(study: Path) -> str:
    with pytest.raises(CurveError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ReferenceCurve.from_study(study)
    assert str(e.value).startswith(f"{study}: analysis.json does not match runs.csv (")
    return str(e.value)


def test_the_breakers_blanked_update_2_cells_do_not_hide_the_edited_final_accuracies(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    cells = {("grpo", s, 2, "accuracy"): "" for s in GRPO_FINALS}
    olds = {0: "0.788", 1: "0.771", 2: "0.794", 3: "0.782"}
    cells.update({("grpo", s, u, "accuracy"): f"{float(olds[s]) + 0.05:.3f}" for s, u in GRPO_FINALS.items()})
    set_runs_cells(study, cells)
    said = "; ".join(f"grpo seed {s} at generated_tokens = 250,000: {100 * float(olds[s]):.3g} points in "
                     f"analysis.json, {100 * float(olds[s]) + 5:.3g} from runs.csv now (update {u}: accuracy "
                     f"{float(olds[s]) + 0.05:.3f})" for s, u in GRPO_FINALS.items())
    assert _both(study) == [f"{LEAD}4 run(s): {said}"]
    assert f"({LEAD}4 run(s): {said}): runs.csv changed after the analysis" in _curve_refusal(study)


def test_a_compensating_update_0_edit_is_refused_naming_each_arm(tmp_path):
    """initial.per_seed (the mean over the 5 arms) stays 67.6 on every seed; each arm's R0 does not."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    set_runs_cells(study, {**{("grpo", s, 0, "accuracy"): "0.776" for s in range(4)},
                          **{("mc_value", s, 0, "accuracy"): "0.576" for s in range(4)}})
    evals = "seed 0: accuracy {a}, seed 1: accuracy {a}, seed 2: accuracy {a}, seed 3: accuracy {a}"
    diffs = [f"{LEAD}arm grpo at update 0 (arms.grpo.sigmoid.updates.R0, the mean over its runs): 67.6 points in "
             f"analysis.json, 77.6 from runs.csv now ({evals.format(a=0.776)})",
             f"{LEAD}arm mc_value at update 0 (arms.mc_value.sigmoid.updates.R0, the mean over its runs): 67.6 points "
             f"in analysis.json, 57.6 from runs.csv now ({evals.format(a=0.576)})"]
    assert _both(study) == diffs
    assert f"({'; '.join(diffs)}): runs.csv changed" in _curve_refusal(study)


@pytest.mark.parametrize("col, new, rmse", [("accuracy", "0.747", "1.396596"), ("update", "6", "1.357297")])
def test_an_edited_eval_that_no_read_uses_is_refused_by_the_arms_fit(tmp_path, col, new, rmse):
    """grpo seed 0's eval at update 5 (accuracy 0.737): no matched point reads it (updates = 10, the final eval,
    the FLOPs and device-seconds budgets read other runs' final evals), so only grpo's sigmoid fit tells it."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    set_runs_cells(study, {("grpo", 0, 5, col): new})
    diff = (f"{LEAD}arm grpo's evals (arms.grpo.sigmoid.updates, the sigmoid fitted to all its evals against "
            f"updates): 36 evals, rmse 1.364574 points in analysis.json; 36 evals, rmse {rmse} from runs.csv now: an "
            "eval of grpo that no matched read uses was edited (its update or accuracy), added or removed")
    assert _both(study) == [diff]
    assert f"({diff}): runs.csv changed" in _curve_refusal(study)


def test_a_curve_refits_only_its_own_arm(tmp_path):
    """A reference curve refits the arm it reads (about 20 ms a fit); calib's comparison refits every arm."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    set_runs_cells(study, {("mc_value", 0, 5, "accuracy"): "0.75"})  # was 0.74; mc_value's updates 0, 2, 5, 10 (finals)
    assert _differences(study, fit_arms=["grpo"]) == []
    [diff] = _both(study)
    assert diff.startswith(f"{LEAD}arm mc_value's evals (arms.mc_value.sigmoid.updates, ")


def test_a_lost_eval_is_read_with_its_note_and_the_runs_other_reads_are_compared(tmp_path):
    """grpo seed 0's eval at update 10 (the updates budget's read) blanked: that read is skipped (the read between
    updates 5 and 14 would differ because the eval is missing, not edited), grpo's fit too (35 evals left of 36),
    and the curve is read with its note; an edit of the same run's final accuracy is still refused."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    set_runs_cells(study, {("grpo", 0, 10, "accuracy"): ""})
    assert _both(study) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        curve = ReferenceCurve.from_study(study)
    assert curve.notes[1] == (f"1 line(s) of {study}/runs.csv skipped for an empty or NaN cell (line 5 column "
                              "'accuracy'): a line without a value is no eval")
    set_runs_cells(study, {("grpo", 0, 57, "accuracy"): "0.8"})  # was 0.788
    assert _both(study) == [f"{LEAD}1 run(s): grpo seed 0 at generated_tokens = 250,000: 78.8 points in "
                            "analysis.json, 80 from runs.csv now (update 57: accuracy 0.8)"]
    _curve_refusal(study)


def test_a_lost_final_or_update_0_eval_skips_only_what_it_could_change(tmp_path):
    """A blank final eval skips the run's final read (the eval before it is no read at the budget); a blank update-0
    cell skips its seed's update-0 mean and its arm's R0 (and fit): the run's read at updates = 10 and the other arms'
    R0 are still compared."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    set_runs_cells(study, {("grpo", 1, 56, "accuracy"): "", ("grpo", 1, 0, "accuracy"): ""})
    assert _both(study) == []
    set_runs_cells(study, {("grpo", 1, 10, "accuracy"): "0.75", ("mc_value", 1, 0, "accuracy"): "0.7"})
    assert _both(study) == [
        f"{LEAD}1 run(s): grpo seed 1 at updates = 10: 73.5 points in analysis.json, 75 from runs.csv now (update 10: "
        "accuracy 0.75)",
        f"{LEAD}arm mc_value at update 0 (arms.mc_value.sigmoid.updates.R0, the mean over its runs): 67.6 points in "
        "analysis.json, 68.2 from runs.csv now (seed 0: accuracy 0.676, seed 1: accuracy 0.7, seed 2: accuracy 0.676, "
        "seed 3: accuracy 0.676)"]
