"""A study's ``analysis.json`` compared with its ``runs.csv``, for a reference curve read from the study.

``gradprobe study`` writes ``analysis.json`` from ``runs.csv``: each run's accuracy read at every matched point
(``arms.ARM.AXIS.per_seed`` at ``matched.AXIS.budget``) and at update 0 (``initial.per_seed``, the mean over the
arms). A ``runs.csv`` edited after the analysis (a grpo accuracy at a matched point changed) no longer gives those
reads. ``calib`` refuses such a folder (``calib.integrity.check_analysis_matches_runs``, by
:func:`gradprobe.study.coverage.stale_analysis`), and so does a reference curve read from it
(:meth:`gradprobe.forecast.curve_sources.CurveSources.from_study`), by :func:`analysis_differences` here: the same
comparison, phrased the same way (arms, seed counts, plan sha256, each changed read with both values and runs.csv's
evals read), in the forecast layer, which may not import :mod:`gradprobe.study` (a higher layer; its reader loads
the frozen plan through :mod:`gradprobe.training`). The plan is not needed: a read is re-done by the analysis's rule
(:func:`gradprobe.study.reading.read_runs`) with the promised eval gap ``analysis.json`` records at the point
(``matched.AXIS.promised_gap``). Torch-free; pandas is passed in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..layout import ANALYSIS_JSON, EVAL_ITEMS_GZ, EVAL_ITEMS_JSONL, RUNS_CSV, STUDY_JSON
from ..outputs import is_json_number
from .csv_cells import cut_lines
from .study_items import run_key

__all__ = ["analysis_differences", "analysis_damage", "missing_items_clause", "CHANGED_READS", "READ_TOL",
           "REBUILD_ANALYSIS"]

#: The fix for an ``analysis.json`` that is damaged or older than ``runs.csv`` (``{study}``: the study folder), for
#: gradprobe's and calib's refusals of the same file (:data:`gradprobe.forecast.study.REBUILD_ANALYSIS` and
#: :data:`calib.integrity.REBUILD_ANALYSIS` are this).
REBUILD_ANALYSIS = ("re-analyse the study with `gradprobe study {study}/plan.toml --analyze-only --overwrite-analysis "
                    "--out {study}` (it rebuilds analysis.json from runs.csv)")
#: How the changed-reads phrase begins (:data:`gradprobe.study.coverage.CHANGED_READS` is the same text).
CHANGED_READS = f"the accuracy {ANALYSIS_JSON} reads differs from {RUNS_CSV}'s now"
#: Points a read of ``analysis.json`` may differ from the same read of ``runs.csv`` now: float noise only
#: (:data:`gradprobe.study.coverage.READ_TOL`).
READ_TOL = 1e-6
#: Relative tolerance of a point on an axis (:data:`gradprobe.study.reading.AT_TOL`).
_AT_TOL = 1e-9
#: runs.csv column of each matched axis (:data:`gradprobe.study.reading.AXIS_COLUMNS`)
_AXIS_COLUMNS = {"updates": "update", "generated_tokens": "generated_tokens", "flops": "flops",
                 "device_seconds": "device_seconds"}
_SHOWN_READS = 4  # runs named; the rest are counted


def _read_json(path: Path) -> dict:
    """``path``'s JSON object; {} when it is missing, unreadable or no object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def analysis_damage(study_dir) -> str | None:
    """Why ``study_dir/analysis.json`` cannot be read (not UTF-8, not JSON, not a JSON object), or None when it is
    absent (a study still running, or stopped before its analysis) or reads as an object. ``gradprobe study`` writes it
    whole (atomically), so a file that does not read was damaged after: calib refuses it too."""
    path = Path(study_dir) / ANALYSIS_JSON
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'unreadable'}"
    return None if isinstance(data, dict) else f"it holds a JSON {type(data).__name__}, not an object"


def analysis_differences(study_dir, table, raw: bytes) -> list[str] | None:
    """How ``study_dir/analysis.json`` differs from the ``runs.csv`` ``table``, as
    :func:`gradprobe.study.coverage.stale_analysis` phrases it; None without a readable ``analysis.json``.

    Parameters
    ----------
    study_dir : path
        The study folder (its ``analysis.json`` and ``study.json`` are read).
    table : pandas.DataFrame, rows = lines of runs.csv
        ``runs.csv`` as parsed (row ``i`` on line ``i + 2``; columns ``arm``, ``seed``, ``update``, ``accuracy`` as
        fractions and the axis columns it has; text cells read as blank).
    raw : bytes
        The file's bytes: a line that looks cut (:func:`~gradprobe.forecast.csv_cells.cut_lines`) has its accuracy
        read as blank, as the analysis reads it.

    Returns
    -------
    list of str or None
        One phrase per difference: arms only in one of the files, an arm's seed count (``arms.ARM.seeds``) unlike
        runs.csv's, another plan sha256 than ``study.json``'s, and the runs whose accuracy ``analysis.json`` reads is
        not what runs.csv gives there now, within :data:`READ_TOL` points (:func:`_changed_reads`); [] when they agree.
    """
    study_dir = Path(study_dir)
    analysis = _read_json(study_dir / ANALYSIS_JSON)
    if not analysis:
        return None
    df = _as_analysed(table, raw)
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    csv = {str(a): {int(s) for s in g["seed"]} for a, g in df.groupby("arm")}
    diffs = [f"arm(s) {sorted(set(x) - set(y))} only in {name}"
             for x, y, name in ((arms, csv, ANALYSIS_JSON), (csv, arms, RUNS_CSV)) if set(x) - set(y)]
    for arm in (a for a in arms if a in csv):
        n = arms[arm].get("seeds") if isinstance(arms[arm], dict) else None
        if is_json_number(n, finite=True) and int(n) != len(csv[arm]):
            diffs.append(f"{arm}: {int(n)} seed(s) in {ANALYSIS_JSON}, {len(csv[arm])} in {RUNS_CSV} "
                         f"(seeds {sorted(csv[arm])})")
    study_sha = _read_json(study_dir / STUDY_JSON).get("plan_sha256")
    if study_sha and analysis.get("plan_sha256") and study_sha != analysis["plan_sha256"]:
        diffs.append(f"plan sha256 {str(analysis['plan_sha256'])[:12]} in {ANALYSIS_JSON}, {str(study_sha)[:12]} "
                     f"in {STUDY_JSON}")
    return diffs + _changed_reads(df, analysis)


def _as_analysed(table, raw: bytes):
    """``table`` as the analysis reads it: ``arm`` as text and ``seed`` as an integer (rows without a text arm, a
    whole seed or an update left out: the analysis refuses them), ``update``, ``accuracy`` and the axis columns as
    numbers (text: blank), the accuracy of a line that looks cut blank, each eval (arm, seed, update) once (the
    first line)."""
    import pandas as pd

    df = table.copy()
    keys = [run_key(a, s) for a, s in zip(df["arm"], df["seed"])] if {"arm", "seed"} <= set(df.columns) else []
    df = df[[k is not None for k in keys]]
    df = df.assign(arm=[k[0] for k in keys if k is not None], seed=[k[1] for k in keys if k is not None])
    for col in ("update", "accuracy", *_AXIS_COLUMNS.values()):
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(np.float64)
    if "accuracy" in df.columns:
        cut = {line - 2 for line, _ in cut_lines(raw, "header")[1]}
        df.loc[df.index.isin(cut), "accuracy"] = np.nan
    if "update" not in df.columns:
        return df
    return df[df["update"].notna()].drop_duplicates(["arm", "seed", "update"])


def _changed_reads(df, analysis: dict) -> list[str]:
    """:func:`gradprobe.study.coverage.changed_reads` without the plan: the runs of ``df`` (:func:`_as_analysed`)
    whose read at a matched point (:func:`_axis_changes`) or at update 0 (:func:`_initial_changes`) is not the one
    ``analysis`` records. A run with a blank accuracy cell (a lost or cut eval) is not compared: its reads move
    because an eval is missing, not edited. One phrase, ``"the accuracy analysis.json reads differs from runs.csv's
    now for N run(s): ARM seed S at AXIS = B: X points in analysis.json, Y from runs.csv now (update(s) U: accuracy
    A); ..."`` (the first few runs named, the rest counted), or []."""
    if not {"arm", "seed", "update", "accuracy"} <= set(df.columns) or df.empty:
        return []
    runs = {(a, int(s)): g.sort_values("update") for (a, s), g in df.groupby(["arm", "seed"], sort=False)}
    runs = {key: g for key, g in runs.items() if not g["accuracy"].isna().any()}
    changed: dict = {}
    for key, text in _axis_changes(runs, analysis, df.columns) + _initial_changes(runs, analysis):
        changed.setdefault(key, []).append(text)
    if not changed:
        return []
    said = [f"{arm + ' ' if arm else ''}seed {seed} " + "; ".join(texts)
            for (arm, seed), texts in list(changed.items())[:_SHOWN_READS]]
    more = f"; and {len(changed) - _SHOWN_READS} more run(s)" if len(changed) > _SHOWN_READS else ""
    return [f"{CHANGED_READS} for {len(changed)} run(s): " + "; ".join(said) + more]


def _number(v) -> float:
    """An ``analysis.json`` value as a float (NaN for null, text or anything else)."""
    return float(v) if is_json_number(v) else math.nan


def _gap(m: dict) -> float | None:
    """``matched.AXIS.promised_gap`` (a number, or ``"inf"``: nothing promised); None when it is not recorded
    (an older analysis): then a read between two evals is not judged by its width."""
    g = m.get("promised_gap")
    if is_json_number(g):
        return float(g)
    return math.inf if isinstance(g, str) and g.strip().lower() in ("inf", "infinity") else None


def _read(g, col: str, at: float, *, gap: float | None, final: bool) -> dict:
    """One run's read at ``at`` on the axis column ``col`` by the analysis's rule
    (:func:`gradprobe.study.reading.read_point`, :func:`~gradprobe.study.reading.read_runs`): the final eval when
    ``final``; else the eval at ``at`` (relative tolerance 1e-9), else the linear interpolation between the evals
    around it when their width is within the promised gap plus one update's cost (``gap`` None: any width), else no
    read. ``g``: the run's evals sorted by update (no blank accuracy). ``{"value": points or None, "status",
    "updates": (lo, hi) or None}``."""
    y, u = 100.0 * g["accuracy"].to_numpy(np.float64), g["update"].to_numpy(np.float64)
    if final:
        return {"value": float(y[-1]), "status": "final", "updates": (int(u[-1]), int(u[-1]))}
    x = g[col].to_numpy(np.float64)
    hit = np.flatnonzero(np.abs(x - at) <= _AT_TOL * max(1.0, abs(at)))
    if hit.size:
        return {"value": float(y[hit[0]]), "status": "exact", "updates": (int(u[hit[0]]), int(u[hit[0]]))}
    hi = int(np.searchsorted(x, at))
    if hi == 0 or hi == x.size or not np.isfinite(x[[hi - 1, hi]]).all():
        return {"value": None, "status": "outside", "updates": None}
    width, ups = float(x[hi] - x[hi - 1]), (int(u[hi - 1]), int(u[hi]))
    if gap is not None:
        allowed = gap + width / max(1.0, float(u[hi] - u[hi - 1]))
        if not (math.isfinite(gap) and width <= allowed * (1 + 1e-9)):
            return {"value": None, "status": "gap_exceeded", "updates": ups}
    w = (at - x[hi - 1]) / width
    return {"value": float((1.0 - w) * y[hi - 1] + w * y[hi]), "status": "interpolated", "updates": ups}


def _evals_read(g, r: dict) -> str:
    """runs.csv's evals behind the read ``r`` of the run ``g``, with their accuracies (fractions)."""
    if r["updates"] is None:
        return f"no read: {r['status']}"
    acc = {int(u): a for u, a in zip(g["update"], g["accuracy"])}
    return ", ".join(f"update {u}: accuracy {acc.get(u, math.nan):g}" for u in dict.fromkeys(r["updates"]))


def _differ(old: float, new) -> bool:
    """Whether two reads (points; NaN / None: no read) differ by more than :data:`READ_TOL`."""
    new = math.nan if new is None else float(new)
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) != math.isnan(new)
    return abs(old - new) > READ_TOL


def _axis_changes(runs: dict, analysis: dict, columns) -> list:
    """[((arm, seed), phrase)] for each ``arms.ARM.AXIS.per_seed`` value unlike the run's read now (``columns``: the
    axes runs.csv has; an axis ``matched`` marks not recorded, or without a numeric budget, is not compared)."""
    matched = analysis.get("matched") if isinstance(analysis.get("matched"), dict) else {}
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    out = []
    for axis, m in matched.items():
        col = _AXIS_COLUMNS.get(axis)
        if col not in columns or not isinstance(m, dict) or not m.get("recorded") or \
                math.isnan(budget := _number(m.get("budget"))):
            continue
        gap, final = _gap(m), bool(m.get("final_eval"))
        for arm, res in arms.items():
            block = res.get(axis) if isinstance(res, dict) else None
            per_seed = block.get("per_seed") if isinstance(block, dict) else None
            for s, old in (per_seed.items() if isinstance(per_seed, dict) else ()):
                g = runs.get((arm, int(s))) if str(s).isdigit() else None
                if g is None or (gap is None and math.isnan(_number(old))):  # refused then: its gap is unknown now
                    continue
                r = _read(g, col, budget, gap=gap, final=final)
                if _differ(_number(old), r["value"]):
                    now = "no read" if r["value"] is None else f"{r['value']:.6g}"
                    out.append(((arm, int(s)), f"at {axis} = {budget:,.6g}: {_number(old):.6g} points in "
                                f"{ANALYSIS_JSON}, {now} from {RUNS_CSV} now ({_evals_read(g, r)})"))
    return out


def _initial_changes(runs: dict, analysis: dict) -> list:
    """[(("", seed), phrase)] for each ``initial.per_seed`` value (update 0, the mean over the arms) unlike runs.csv's
    update-0 accuracies now."""
    per_seed = (analysis.get("initial") or {}).get("per_seed") if isinstance(analysis.get("initial"), dict) else None
    if not isinstance(per_seed, dict):
        return []
    now: dict = {}
    for (arm, seed), g in runs.items():
        if len(g) and int(g["update"].iloc[0]) == 0:
            now.setdefault(seed, []).append(100.0 * float(g["accuracy"].iloc[0]))
    out = []
    for s, old in per_seed.items():
        vals = now.get(int(s)) if str(s).isdigit() else None
        new = math.fsum(vals) / len(vals) if vals else None
        if str(s).isdigit() and _differ(_number(old), new):
            out.append((("", int(s)), f"at update 0 (initial.per_seed, the mean over the arms): {_number(old):.6g} "
                        f"points in {ANALYSIS_JSON}, " + ("no update-0 accuracy" if new is None else f"{new:.6g}") +
                        f" from {RUNS_CSV} now"))
    return out


def missing_items_clause(study_dir) -> str | None:
    """The clause for per-item results the analysis was made with (``analysis.json`` ``two_way.items``, a count of
    held-out items > 0, as :mod:`gradprobe.study.analysis` reads it) that the folder no longer holds (no
    ``eval_items.jsonl.gz``, no ``runs/ARM/seedS/eval_items.jsonl``): without them an edited runs.csv accuracy is not
    seen eval by eval. None when they are there or the analysis was made without them."""
    d = Path(study_dir)
    two_way = _read_json(d / ANALYSIS_JSON).get("two_way")
    items = two_way.get("items") if isinstance(two_way, dict) else None
    if not (is_json_number(items, integer=True) and items > 0):
        return None
    if (d / EVAL_ITEMS_GZ).exists() or any(d.glob(f"runs/*/seed*/{EVAL_ITEMS_JSONL}")):
        return None
    return (f"the per-item results the analysis was made with ({int(items)} held-out items) are missing too "
            f"({d / EVAL_ITEMS_GZ}, or the run folders' {EVAL_ITEMS_JSONL}), so runs.csv's accuracies cannot be "
            f"checked eval by eval: restore {EVAL_ITEMS_GZ} from a copy of the study")
