"""What a study's ``runs.csv`` lacks: the plan's runs it holds no row of, and an analysis made from another one.

:func:`missing_runs` compares ``runs.csv`` with the plan's arms x seeds (``analysis.json``
``missing_runs``; ``gradprobe study --analyze-only`` prints one line per run); :func:`stale_analysis`
compares a study's own ``analysis.json`` with its ``runs.csv`` (arms, seeds per arm, plan sha256), the
comparison ``calib`` refuses such a folder with (``calib.integrity.check_analysis_matches_runs``),
reimplemented here because gradprobe's library never imports calib. Torch-free; pandas is passed in.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..layout import ANALYSIS_JSON, RUNS_CSV, STUDY_JSON

__all__ = ["missing_runs", "stale_analysis", "csv_seeds"]


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


def stale_analysis(study_dir, df) -> list[str]:
    """How ``study_dir/analysis.json`` differs from the ``runs.csv`` ``df`` (and ``study.json``'s plan sha256).

    Parameters
    ----------
    study_dir : path
    df : pandas.DataFrame
        ``runs.csv`` as read now.

    Returns
    -------
    list of str
        One phrase per difference: arms only in one of them, an arm's seed count (``arms.ARM.seeds``)
        unlike runs.csv's, another plan sha256; [] when they agree or there is no readable analysis.json.
    """
    study_dir = Path(study_dir)
    analysis = _read_json(study_dir / ANALYSIS_JSON)
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    if not analysis:
        return []
    csv = csv_seeds(df)
    diffs = [f"arm(s) {sorted(set(x) - set(y))} only in {name}"
             for x, y, name in ((arms, csv, ANALYSIS_JSON), (csv, arms, RUNS_CSV)) if set(x) - set(y)]
    for arm in (a for a in arms if a in csv):
        n = arms[arm].get("seeds") if isinstance(arms[arm], dict) else None
        if n is not None and int(n) != len(csv[arm]):
            diffs.append(f"{arm}: {int(n)} seed(s) in {ANALYSIS_JSON}, {len(csv[arm])} in {RUNS_CSV} "
                         f"(seeds {sorted(csv[arm])})")
    study_sha = _read_json(study_dir / STUDY_JSON).get("plan_sha256")
    if study_sha and analysis.get("plan_sha256") and study_sha != analysis["plan_sha256"]:
        diffs.append(f"plan sha256 {str(analysis['plan_sha256'])[:12]} in {ANALYSIS_JSON}, {str(study_sha)[:12]} "
                     f"in {STUDY_JSON}")
    return diffs
