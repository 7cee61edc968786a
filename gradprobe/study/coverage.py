"""What a study's ``runs.csv`` lacks: the plan's runs it holds no row of, and an analysis made from another one.

:func:`missing_runs` compares ``runs.csv`` with the plan's arms x seeds (``analysis.json``
``missing_runs``; ``gradprobe study --analyze-only`` prints one line per run); :func:`stale_analysis`
compares a study's own ``analysis.json`` with its ``runs.csv`` (arms, seeds per arm, plan sha256, and each run's
accuracy read at every matched point and at update 0, re-read from ``runs.csv`` by the analysis's own rule), the
comparison ``calib`` refuses such a folder with (``calib.integrity.check_analysis_matches_runs``); gradprobe's
library never imports calib. Torch-free; pandas is passed in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..layout import ANALYSIS_JSON, RUNS_CSV, STUDY_JSON
from .reading import AXIS_COLUMNS, _load_plan, _runs, initial_reads, read_runs

__all__ = ["missing_runs", "stale_analysis", "changed_reads", "csv_seeds", "CHANGED_READS"]


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
    """How ``study_dir/analysis.json`` differs from the ``runs.csv`` ``df`` (and ``study.json``'s plan sha256).

    Parameters
    ----------
    study_dir : path
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` as read now (:func:`~gradprobe.study.reading.load_runs`; at least ``arm`` and ``seed``; with
        ``update`` and ``accuracy`` the reads are compared too, on each axis whose column it has).
    skip_arms : iterable of str
        Arms whose reads are not compared (:func:`changed_reads`; calib names them by another difference).

    Returns
    -------
    list of str
        One phrase per difference: arms only in one of them, an arm's seed count (``arms.ARM.seeds``)
        unlike runs.csv's, another plan sha256, and the runs whose accuracy analysis.json reads (``arms.ARM.AXIS
        .per_seed`` at ``matched.AXIS.budget``, ``initial.per_seed`` at update 0) is not what runs.csv gives there
        now (:func:`changed_reads`: the run, the point, both values in points and runs.csv's evals read); [] when
        they agree or there is no readable analysis.json.
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
    return diffs + changed_reads(study_dir, df, analysis, skip_arms=skip_arms)


CHANGED_READS = f"the accuracy {ANALYSIS_JSON} reads differs from {RUNS_CSV}'s now"
"""How :func:`changed_reads`' phrase begins (``calib`` tells it from the other differences by it)."""
#: Points an ``analysis.json`` read may differ from the same read of runs.csv now: the reads are recomputed by the
#: same code from the same numbers, so only float noise (a mean over arms summed in another order) is allowed.
READ_TOL = 1e-6
_SHOWN_READS = 4  # runs named by changed_reads; the rest are counted


def changed_reads(study_dir, df, analysis: dict, *, skip_arms=()) -> list[str]:
    """The runs whose accuracy ``analysis`` (``study_dir/analysis.json``) reads is not what ``runs.csv`` gives now.

    Each run is read again from ``df`` as the analysis reads it (:func:`~gradprobe.study.reading.read_runs` at
    ``matched.AXIS.budget`` with the frozen plan's promised gaps, its final eval where ``final_eval``; update 0,
    averaged over the arms per seed, for ``initial.per_seed``) and compared with ``arms.ARM.AXIS.per_seed`` within
    :data:`READ_TOL` points (a read now refused or missing counts as a difference). ``analysis.json`` records reads
    at those points only, not every eval: an edit of an eval no read uses is not seen here (the per-item cross-check,
    :func:`~gradprobe.forecast.study_items.item_accuracy_mismatches`, sees it where the study saved per-item results).
    A run with a blank accuracy cell (a lost or cut eval) is not compared: its reads move because an eval is missing,
    not edited, which the skipped-evals warning and the lost-line check tell (the analysis's realized values stand).

    Parameters
    ----------
    study_dir : path
        Its frozen ``plan.toml`` is read (none, or unreadable: nothing is compared; the analysis refuses it).
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` (``arm``, ``seed``, ``update``, ``accuracy`` as fractions, and the axis columns it has).
    analysis : dict
        ``analysis.json``'s content.
    skip_arms : iterable of str
        Arms left out: their reads are not compared, and their update-0 evals not averaged into ``initial``.

    Returns
    -------
    list of str
        One phrase for the changed reads, ``"accuracy read from runs.csv changed: ARM seed S at AXIS = B: X points
        in analysis.json, Y from runs.csv now (update(s) U: accuracy A); ..."`` (the first few runs named, the rest
        counted), or [].
    """
    if not {"arm", "seed", "update", "accuracy"} <= set(df.columns) or df.empty:
        return []
    try:
        plan = _load_plan(Path(study_dir))
    except (OSError, ValueError):
        return []
    if plan is None:
        return []
    skip = {str(a) for a in skip_arms}
    runs = {key: g for key, g in _runs(df).items()
            if str(key[0]) not in skip and not _pd_numeric(g["accuracy"]).isna().any()}
    changed: dict = {}
    for (arm, seed), text in _axis_changes(runs, plan, analysis, df.columns) + _initial_changes(runs, analysis):
        changed.setdefault((arm, seed), []).append(text)
    if not changed:
        return []
    said = [f"{arm + ' ' if arm else ''}seed {seed} " + "; ".join(texts)
            for (arm, seed), texts in list(changed.items())[:_SHOWN_READS]]
    more = f"; and {len(changed) - _SHOWN_READS} more run(s)" if len(changed) > _SHOWN_READS else ""
    return [f"{CHANGED_READS} for {len(changed)} run(s): " + "; ".join(said) + more]


def _pd_numeric(col):
    """``col`` as numbers (text and blanks: NaN)."""
    import pandas as pd

    return pd.to_numeric(col, errors="coerce")


def _number(v) -> float:
    """An ``analysis.json`` value as a float (NaN for null, text or anything else)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _differ(old: float, new) -> bool:
    """Whether two reads (points; NaN / None: no read) differ by more than :data:`READ_TOL`."""
    new = math.nan if new is None else float(new)
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) != math.isnan(new)
    return abs(old - new) > READ_TOL


def _evals_read(r: dict) -> str:
    """runs.csv's evals behind a read (:func:`~gradprobe.study.reading.read_runs`), with their accuracies."""
    if r.get("updates") is None:
        return f"no read: {r['status']}"
    lo, hi = r["updates"]
    g = r["frame"]
    acc = {int(u): a for u, a in zip(g["update"], g["accuracy"])}
    return ", ".join(f"update {u}: accuracy {acc.get(u, math.nan):g}" for u in dict.fromkeys((lo, hi)))


def _axis_changes(runs: dict, plan, analysis: dict, columns) -> list:
    """[((arm, seed), phrase)] for each ``arms.ARM.AXIS.per_seed`` value unlike the run's read now (columns: the axes
    runs.csv has)."""
    matched = analysis.get("matched") if isinstance(analysis.get("matched"), dict) else {}
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    out = []
    for axis, m in matched.items():
        if axis not in AXIS_COLUMNS or AXIS_COLUMNS[axis] not in columns or not isinstance(m, dict) or \
                not m.get("recorded") or math.isnan(budget := _number(m.get("budget"))):
            continue
        reads = read_runs(runs, axis, budget, plan=plan, final=bool(m.get("final_eval")))
        for arm, res in arms.items():
            per_seed = (res.get(axis) or {}).get("per_seed") if isinstance(res, dict) and \
                isinstance(res.get(axis), (dict, type(None))) else None
            for s, old in (per_seed.items() if isinstance(per_seed, dict) else ()):
                r = reads.get((arm, int(s))) if str(s).isdigit() else None
                if r is not None and _differ(_number(old), r["value"]):
                    now = "no read" if r["value"] is None else f"{r['value']:.6g}"
                    out.append(((arm, int(s)), f"at {axis} = {budget:,.6g}: {_number(old):.6g} points in "
                                f"{ANALYSIS_JSON}, {now} from {RUNS_CSV} now ({_evals_read(r)})"))
    return out


def _initial_changes(runs: dict, analysis: dict) -> list:
    """[(("", seed), phrase)] for each ``initial.per_seed`` value (update 0, mean over the arms) unlike runs.csv's
    update-0 accuracies now."""
    per_seed = (analysis.get("initial") or {}).get("per_seed") if isinstance(analysis.get("initial"), dict) else None
    if not isinstance(per_seed, dict):
        return []
    now: dict = {}
    for (arm, seed), r in initial_reads(runs).items():
        now.setdefault(seed, []).append(r["value"])
    out = []
    for s, old in per_seed.items():
        vals = now.get(int(s)) if str(s).isdigit() else None
        new = math.fsum(vals) / len(vals) if vals else None
        if str(s).isdigit() and _differ(_number(old), new):
            out.append((("", int(s)), f"at update 0 (initial.per_seed, the mean over the arms): {_number(old):.6g} "
                        f"points in {ANALYSIS_JSON}, " + ("no update-0 accuracy" if new is None else f"{new:.6g}") +
                        f" from {RUNS_CSV} now"))
    return out
