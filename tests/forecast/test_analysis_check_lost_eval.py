"""A read the promised gap refuses (a lost eval) is told as refused by the check of a study folder against its
analysis.json (:func:`gradprobe.forecast.analysis_reads.analysis_differences`, and calib's and the command line's
:func:`gradprobe.study.coverage.stale_analysis`), not by the evals a read across the lost eval would use.

Found on ``data/study_tiny`` with grpo seed 0's eval line at update 10 (the updates budget's exact read) deleted: the
analysis now refuses that read (updates 5 and 14 lie 9 apart, over the promised gap 5 plus one update), and the
check's phrase said ``no read from runs.csv now (update 5: accuracy 0.737, update 14: accuracy 0.762)``, the two
evals across the lost one, as if they were read.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from gradprobe.forecast.analysis_reads import analysis_differences
from gradprobe.forecast.csv_cells import read_csv_checked
from gradprobe.study.coverage import stale_analysis
from gradprobe.study.reading import load_runs
from study_helpers import set_runs_cells, shipped_copy

LEAD = "the accuracy analysis.json reads differs from runs.csv's now for "


def _both(study: Path) -> list[str]:
    """analysis_differences of the folder's runs.csv as a curve reads it, asserted equal to stale_analysis of
    load_runs (calib's and the command line's; its lost-line warning ignored)."""
    path = study / "runs.csv"
    raw = path.read_bytes()
    diffs = analysis_differences(study, read_csv_checked(path, raw), raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert stale_analysis(study, load_runs(study)) == diffs
    return diffs


def _delete_line(study: Path, start: str) -> None:
    """Delete the one line of the folder's runs.csv that begins with ``start``."""
    path = study / "runs.csv"
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(start)]
    assert len(kept) == len(lines) - 1
    path.write_text("".join(kept))


def test_a_read_refused_across_a_lost_eval_is_told_as_refused_not_by_the_evals_across_it(tmp_path):
    """grpo seed 0's read at updates = 10 (73.9 points, the eval at update 10) is refused now: the phrase says why
    and names no accuracy across the lost eval. A read refused because nothing is promised (the FLOPs budget, promised
    gap inf: hybrid_0.5 seed 1's final FLOPs moved off the budget) keeps its phrase."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    _delete_line(study, "grpo,0,10,")
    refused = ("grpo seed 0 at updates = 10: 73.9 points in analysis.json, no read from runs.csv now (refused: the "
               "run's evals around it, at updates 5 and 14, lie 9 apart on updates, more than the 6 allowed (the "
               "promised gap 5 plus one update's cost): the eval promised between them, at an update between 5 and "
               "14, is lost, and the analysis reads no value across a lost eval)")
    diffs = _both(study)
    assert diffs == [f"{LEAD}1 run(s): {refused}"]
    assert "accuracy 0.737" not in diffs[0] and "accuracy 0.762" not in diffs[0]
    set_runs_cells(study, {("hybrid_0.5", 1, 10, "flops"): "843291762264.0"})  # was 833291762264.0, the budget
    assert _both(study) == [
        f"{LEAD}2 run(s): {refused}; hybrid_0.5 seed 1 at flops = 8.33292e+11: 73.5 points in analysis.json, no read "
        "from runs.csv now (update 8: accuracy 0.733, update 10: accuracy 0.735)"]
