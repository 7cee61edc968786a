"""A study's runs.csv re-saved with fewer digits (``df.to_csv(float_format="%.6g")``, ``%.7g``, ``%.8g``) is the same
file to the check against its analysis.json (:func:`gradprobe.forecast.analysis_reads.analysis_differences`, and
calib's :func:`gradprobe.study.coverage.stale_analysis`), while an accuracy edited by 0.001 (one item in 1000) at any
read is still refused.

Found by a trial user: every shipped study re-saved so was refused, by a reference curve read from it and by
``calib rows``, on its FLOPs and device-seconds reads: the matched point (a run's final value) no longer hit that
eval within 1e-9 relative, so the run was no read there (the other runs are refused by the promised gap).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradprobe.forecast.analysis_reads import CHANGED_READS, analysis_differences
from gradprobe.forecast.csv_cells import read_csv_checked
from gradprobe.forecast.curves import ReferenceCurve
from gradprobe.study.coverage import stale_analysis
from gradprobe.study.reading import AXIS_COLUMNS, load_runs
from study_helpers import shipped_copy

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (REPO / "data").glob("study_*") if (p / "analysis.json").is_file())


def _resaved(name: str, dest: Path, fmt: str) -> Path:
    """A copy of the shipped study ``name`` (no per-item results) whose runs.csv pandas re-saved with ``fmt``."""
    study = shipped_copy(name, dest)
    pd.read_csv(study / "runs.csv").to_csv(study / "runs.csv", index=False, float_format=fmt)
    return study


def _differences(study: Path) -> list[str]:
    path = study / "runs.csv"
    raw = path.read_bytes()
    return analysis_differences(study, read_csv_checked(path, raw), raw)


@pytest.mark.parametrize("fmt", ["%.6g", "%.7g", "%.8g"])
@pytest.mark.parametrize("name", SHIPPED)
def test_a_resaved_shipped_study_agrees_with_its_analysis(tmp_path, name, fmt):
    study = _resaved(name, tmp_path / name, fmt)
    assert (study / "runs.csv").read_bytes() != (REPO / "data" / name / "runs.csv").read_bytes()
    assert _differences(study) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stale_analysis(study, load_runs(study)) == []


@pytest.mark.parametrize("name", ["study_tiny", "study_tiny_hard", "study_tiny_sparse"])  # a curve fit: seconds
def test_the_default_curve_of_a_resaved_study_is_the_shipped_one(tmp_path, name):
    """The curve read from the re-saved folder (its grpo arm, refitted to check analysis.json) is the shipped one:
    study_tiny's FLOPs budget is an exact read, study_tiny_hard's its runs' final evals, study_tiny_sparse has no
    FLOPs column."""
    assert len(SHIPPED) == 20 and "study_tiny_llama_replicate_heldout4k" in SHIPPED  # heldout ones included
    study = _resaved(name, tmp_path / name, "%.6g")
    assert ReferenceCurve.from_study(study).params == ReferenceCurve.from_study(REPO / "data" / name).params


def _at_read(run: pd.DataFrame, col: str, at: float, final: bool):
    """The row label of the eval a read of ``run`` (its evals sorted by update) is at: the last for a final read,
    else the eval within 1e-5 relative of ``at`` (asserted: every read with a value in the shipped studies is one)."""
    if final:
        return run.index[-1]
    i = run.index[int(np.argmin(np.abs(run[col].to_numpy() - at)))]
    assert abs(run.loc[i, col] - at) <= 1e-5 * at
    return i


@pytest.mark.parametrize("name", SHIPPED)
def test_after_a_resave_an_accuracy_edited_by_a_thousandth_at_any_read_is_refused(tmp_path, name):
    """Each read with a value (every run at every matched point, and at update 0), its eval's accuracy moved by
    0.001: the read is refused, named with both values (the fits left out: the reads alone tell it)."""
    from gradprobe.forecast.analysis_reads import as_analysed, read_differences

    study = _resaved(name, tmp_path / name, "%.6g")
    analysis = json.loads((study / "analysis.json").read_text())
    raw = (study / "runs.csv").read_bytes()
    df = as_analysed(read_csv_checked(study / "runs.csv", raw), raw)
    assert read_differences(df, analysis) == []
    edits = []
    for axis, m in analysis["matched"].items():
        for arm, res in analysis["arms"].items():
            for s, old in (res[axis]["per_seed"].items() if m["recorded"] else ()):
                run = df[(df["arm"] == arm) & (df["seed"] == int(s))].sort_values("update")
                if old is not None:
                    edits.append((_at_read(run, AXIS_COLUMNS[axis], m["budget"], m["final_eval"]), arm, s, axis))
    edits += [(g.index[0], "", s, "update 0") for (_, s), g in df.groupby(["arm", "seed"]) if g["update"].iloc[0] == 0]
    assert len(edits) >= 3 * len(analysis["arms"]) * 2
    for i, arm, s, where in edits:
        edited = df.copy()
        a = edited.loc[i, "accuracy"]
        edited.loc[i, "accuracy"] = a + 0.001 if a <= 0.999 else a - 0.001
        [diff] = read_differences(edited, analysis, fit_arms=[])
        assert diff.startswith(f"{CHANGED_READS} for 1 run(s): {arm + ' ' if arm else ''}seed {s} at "), diff
        assert f" at {where}" in diff and f"{100 * a:.6g} from runs.csv now" not in diff
