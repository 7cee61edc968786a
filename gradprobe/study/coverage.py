"""What a study's ``runs.csv`` lacks: the plan's runs it holds no row of, and an analysis made from another one.

:func:`missing_runs` compares ``runs.csv`` with the plan's arms x seeds (``analysis.json``
``missing_runs``; ``gradprobe study --analyze-only`` prints one line per run); :func:`stale_analysis`
compares a study's own ``analysis.json`` with its ``runs.csv`` (arms, seeds per arm, plan sha256, each run's
accuracy read at every matched point and at update 0, each arm's update-0 mean and its sigmoid fit to its evals,
re-read from ``runs.csv`` by the analysis's own rule), the comparison ``calib`` refuses such a folder with
(``calib.integrity.check_analysis_matches_runs``); gradprobe's library never imports calib. The comparison itself is
the forecast layer's (:func:`gradprobe.forecast.analysis_reads.analysis_differences`, which a reference curve read
from the study runs too): one implementation, one set of phrases. Torch-free; pandas is passed in.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..forecast.analysis_reads import CHANGED_READS, READ_TOL, analysis_differences, as_analysed, read_differences
from ..layout import RUNS_CSV, STUDY_JSON

__all__ = ["missing_runs", "stale_analysis", "changed_reads", "csv_seeds", "CHANGED_READS", "READ_TOL"]


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def csv_seeds(df) -> dict[str, set[int]]:
    """arm -> the seeds ``df`` (runs.csv as a DataFrame with ``arm`` and ``seed`` columns) holds rows of."""
    return {str(a): {int(s) for s in g["seed"]} for a, g in df.groupby("arm")}


def missing_runs(study_dir, df, plan) -> list[dict]:
    """The plan's runs (every arm x seed) that ``runs.csv`` holds no row of, in plan order.

    Parameters
    ----------
    study_dir : path
        The study folder (its ``study.json`` says why a run is missing).
    df : pandas.DataFrame
        ``runs.csv`` (columns ``arm``, ``seed``).
    plan : Plan or None
        The frozen plan; None: nothing to compare with, [] is returned.

    Returns
    -------
    list of dict
        ``{"arm", "seed", "reason"}``: ``reason`` names the run's ``study.json`` status (failed, not
        finished, not run) or, for a run ``study.json`` records as done, that runs.csv lost its rows.
    """
    if plan is None:
        return []
    have = csv_seeds(df)
    status = {(str(r.get("arm")), int(r.get("seed", -1))): r for r in _read_json(Path(study_dir) / STUDY_JSON).get(
        "runs", []) if isinstance(r, dict) and isinstance(r.get("seed"), int)}
    out = []
    for arm, seed in plan.runs():
        if seed in have.get(arm, set()):
            continue
        r = status.get((arm, int(seed)))
        if r is None:
            reason = f"{STUDY_JSON} lists no such run (not run)"
        elif r.get("status") == "done":
            reason = (f"{STUDY_JSON} records it as done, but {RUNS_CSV} holds no row of it ({RUNS_CSV} lost its "
                      "rows or was edited)")
        else:
            reason = f"its status in {STUDY_JSON} is {r.get('status')!r}" + (
                f" ({r['error']})" if r.get("error") else "")
        out.append({"arm": arm, "seed": int(seed), "reason": reason})
    return out


def stale_analysis(study_dir, df, *, skip_arms=()) -> list[str]:
    """How ``study_dir/analysis.json`` differs from the ``runs.csv`` ``df`` (and ``study.json``'s plan sha256):
    :func:`gradprobe.forecast.analysis_reads.analysis_differences` (the rules are in its module's docstring).

    Parameters
    ----------
    study_dir : path
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` as read now (:func:`~gradprobe.study.reading.load_runs`, which blanks the accuracy of a cut line;
        at least ``arm`` and ``seed``; with ``update`` and ``accuracy`` the reads are compared too, on each axis whose
        column it has).
    skip_arms : iterable of str
        Arms whose reads are not compared (:func:`changed_reads`; calib names them by another difference).

    Returns
    -------
    list of str
        One phrase per difference: arms only in one of them, an arm's seed count (``arms.ARM.seeds``)
        unlike runs.csv's, another plan sha256, and the reads analysis.json records that runs.csv no longer gives
        (:func:`changed_reads`); [] when they agree or there is no readable analysis.json.
    """
    return analysis_differences(study_dir, df, skip_arms=skip_arms) or []


def changed_reads(study_dir, df, analysis: dict, *, skip_arms=()) -> list[str]:
    """The reads ``analysis`` (``study_dir/analysis.json``'s content) records that ``runs.csv`` no longer gives:
    :func:`gradprobe.forecast.analysis_reads.read_differences` of ``df`` read as the analysis reads it.

    Each run is read again at ``matched.AXIS.budget`` by the analysis's rule with the promised gap ``analysis.json``
    records there (its final eval where ``final_eval``; update 0, averaged over the arms per seed, for
    ``initial.per_seed``) and compared with ``arms.ARM.AXIS.per_seed`` within :data:`READ_TOL` points (a read now
    refused or missing counts as a difference; a point within 1e-5 relative of the budget is read too, so a runs.csv
    re-saved with 6 significant digits agrees); each arm's ``R0`` with the mean of its runs' update-0 accuracies; and
    each arm's updates fit (``arms.ARM.sigmoid.updates``) is refitted from its evals, which tells an edit of an eval
    no read uses. A blank accuracy cell (a lost or cut eval) skips only the reads it could have changed.

    Parameters
    ----------
    study_dir : path
        The study folder (kept for callers: the plan is not read; the promised gaps come from ``analysis``).
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` (``arm``, ``seed``, ``update``, ``accuracy`` as fractions, and the axis columns it has).
    analysis : dict
        ``analysis.json``'s content.
    skip_arms : iterable of str
        Arms left out: their reads, R0 and fit are not compared, and their update-0 evals not averaged into
        ``initial``.

    Returns
    -------
    list of str
        The phrases, each beginning with :data:`CHANGED_READS`: one for the changed reads of runs, ``"the accuracy
        analysis.json reads differs from runs.csv's now for N run(s): ARM seed S at AXIS = B: X points in
        analysis.json, Y from runs.csv now (update(s) U: accuracy A); ..."`` (the first few runs named, the rest
        counted; a read the promised gap refuses now says ``no read`` and why: the eval lost between its evals, with
        no accuracy across it), then one per arm whose R0 or fit differs; [] when they agree.
    """
    if not {"arm", "seed", "update", "accuracy"} <= set(df.columns) or df.empty:
        return []
    return read_differences(as_analysed(df), analysis, skip_arms=skip_arms)
