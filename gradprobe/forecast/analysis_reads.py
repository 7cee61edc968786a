"""A study's ``analysis.json`` compared with its ``runs.csv``: the one comparison of gradprobe and calib.

``gradprobe study`` writes ``analysis.json`` from ``runs.csv``: each run's accuracy read at every matched point
(``arms.ARM.AXIS.per_seed`` at ``matched.AXIS.budget``), at update 0 (``initial.per_seed``, the mean over the
arms), and per arm a ScaleRL sigmoid fitted to its evals (``arms.ARM.sigmoid.AXIS``: ``R0``, the arm's mean update-0
accuracy, ``n_points`` and ``rmse``, :func:`~gradprobe.forecast.analysis_sigmoid.fit_sigmoid`). A ``runs.csv``
edited after the analysis no longer gives those. :func:`analysis_differences` tells how they differ, phrased for
the user (arms, seed counts, plan sha256, each changed read with both values and runs.csv's evals read, or why
runs.csv gives no read now: a read refused across a lost eval names no accuracy across it): a
reference curve read from the study refuses it (:meth:`gradprobe.forecast.curve_sources.CurveSources.from_study`),
and so do ``calib`` (``calib.integrity.check_analysis_matches_runs``) and ``gradprobe study --analyze-only``'s
warning, through :func:`gradprobe.study.coverage.stale_analysis`, which calls it. It lives in the forecast layer,
which may not import :mod:`gradprobe.study` (a higher layer; its reader loads the frozen plan through
:mod:`gradprobe.training`). The plan is not needed: a read is re-done by the analysis's rule, the same function
(:func:`gradprobe.forecast.read_rule.read_point`, which :func:`gradprobe.study.reading.read_runs` reads by), with
the promised eval gap ``analysis.json`` records at the point (``matched.AXIS.promised_gap``; an older analysis
without it: any width is interpolated, and a read it refused is not compared). Torch-free; pandas is passed in,
scipy loaded only for a fit (:func:`_fit_changes`).

Rules (:func:`read_differences`)
--------------------------------
Reads at a matched point (``arms.ARM.AXIS.per_seed``)
    Each is re-read from runs.csv now and must agree within :data:`READ_TOL` points. A runs.csv rewritten with 6 to
    8 significant digits (``to_csv(float_format="%.6g")``) moves an axis value (FLOPs, device-seconds, tokens) by up
    to 5e-6 relative, which moves an eval off the point or a read between two evals; so a read also accepts what
    runs.csv reads at any point within :data:`RESAVE_REL` (relative) of the budget: the reads at budget +- that and
    at each eval within it (the curve is linear between evals, so those bound the rest). That loosens a read by its
    slope times 1e-5 of the budget only: one accuracy edited by 0.001 (a tenth of a point) at the eval a read is at
    is still refused.
Blank accuracy cells (a lost or cut eval)
    A read is skipped only where a blank eval could have changed it: a final read (``matched.AXIS.final_eval``) when
    the run's last eval is blank; a read at a point when a blank eval of the run lies between (or at) the two evals
    it uses now, or when it finds no eval around the point now and the run has blank evals; the update-0 mean of a
    seed when any compared run of that seed has a blank update-0 cell. Every other read of such a run is compared
    (a breaker blanked grpo's update-2 cells and edited every final accuracy: those runs were not compared at all).
Update 0 per arm (``arms.ARM.sigmoid.AXIS.R0``)
    ``initial.per_seed`` is a mean over the arms, which an edit raising one arm's update-0 accuracy and lowering
    another's keeps; so each arm's ``R0`` (any fit that records it: all are the same) must be the mean of its runs'
    update-0 accuracies now, within :data:`READ_TOL` points (an arm with a blank update-0 cell is skipped).
Each arm's evals (``arms.ARM.sigmoid.updates``)
    The reads use a few evals only; an edit of another (an accuracy, or an ``update``) is seen by refitting the arm's
    sigmoid against updates from its evals now (each eval with an update and an accuracy, R0 as recorded): the same
    ``n_points`` and ``rmse`` within :data:`FIT_RTOL` relative (the same fit of the same numbers reproduces it to
    1e-15). Skipped for an arm whose fit recorded an ``error`` or no rmse, and for an arm with fewer evals left than
    the fit had where its blank accuracy cells (and cut lines) account for them (evals lost after the analysis, which
    the skipped-cells note tells; an edit of an eval no read uses is then not seen in that arm).
Told once
    An arm's ``R0`` is told only when its seed count (``arms.ARM.seeds``) is runs.csv's and no update-0 mean of one
    of its seeds differs (those phrases tell it), and its fit only when nothing else of the arm differs (seed count,
    reads, R0, update-0 means of its seeds): the fit then means that an eval no matched read uses was edited.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from ..layout import ANALYSIS_JSON, EVAL_ITEMS_GZ, EVAL_ITEMS_JSONL, PLAN_COPY, RUNS_CSV, STUDY_JSON
from ..outputs import is_json_number, shell_word
from .csv_cells import cut_lines
from .read_rule import read_point
from .study_items import run_key

__all__ = ["analysis_differences", "read_differences", "as_analysed", "analysis_damage", "missing_items_clause",
           "CHANGED_READS", "READ_TOL", "RESAVE_REL", "FIT_RTOL", "rebuild_analysis", "LOST_LINES"]


def rebuild_analysis(study) -> str:
    """The fix for an ``analysis.json`` that is damaged or older than ``runs.csv``, for gradprobe's and calib's
    refusals of the same file (:func:`gradprobe.forecast.study.rebuild_analysis` and
    :func:`calib.integrity.rebuild_analysis` are this): re-analyse the study in the folder ``study`` (a path) with
    ``gradprobe study --analyze-only --overwrite-analysis``, the folder and its ``plan.toml`` each written as one word
    of a POSIX shell (:func:`gradprobe.outputs.shell_word`: a space, tab or quote in the path is kept as it is, and the
    command reads back as exactly that path).

    Raises
    ------
    TypeError
        ``study`` is not a path (str or os.PathLike).
    """
    return (f"re-analyse the study with `gradprobe study {shell_word(Path(study) / PLAN_COPY)} --analyze-only "
            f"--overwrite-analysis --out {shell_word(study)}` (it rebuilds analysis.json from runs.csv)")


#: How each changed-read phrase begins (:data:`gradprobe.study.coverage.CHANGED_READS` is this; calib tells them from
#: the other differences by it).
CHANGED_READS = f"the accuracy {ANALYSIS_JSON} reads differs from {RUNS_CSV}'s now"
#: Points a read of ``analysis.json`` may differ from the same read of ``runs.csv`` now: float noise only
#: (:data:`gradprobe.study.coverage.READ_TOL` is this).
READ_TOL = 1e-6
#: Relative distance from a matched point within which runs.csv's evals are read too (module docstring): a runs.csv
#: rewritten with 6 significant digits rounds an axis value by at most 5e-6 relative.
RESAVE_REL = 1e-5
#: Relative difference allowed between an arm's updates-fit rmse now and ``analysis.json``'s.
FIT_RTOL = 1e-6
#: ``DataFrame.attrs`` key of :func:`as_analysed`'s frame: how many lines read as blank (cut) it lacks.
LOST_LINES = "lost_blank_lines"
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


def analysis_differences(study_dir, table, raw: bytes | None = None, *, skip_arms=(),
                         fit_arms=None) -> list[str] | None:
    """How ``study_dir/analysis.json`` differs from the ``runs.csv`` ``table``; None without a readable
    ``analysis.json``.

    Parameters
    ----------
    study_dir : path
        The study folder (its ``analysis.json`` and ``study.json`` are read).
    table : pandas.DataFrame, rows = lines of runs.csv
        ``runs.csv`` as parsed (columns ``arm``, ``seed``, ``update``, ``accuracy`` as fractions and the axis columns
        it has; text cells read as blank), or as :func:`gradprobe.study.reading.load_runs` read it.
    raw : bytes, optional
        The file's bytes, with ``table``'s row ``i`` on line ``i + 2``: a line that looks cut
        (:func:`~gradprobe.forecast.csv_cells.cut_lines`) has its accuracy read as blank, as the analysis reads it.
        None: ``table`` already reads them so (``load_runs`` blanks them).
    skip_arms : iterable of str
        Arms whose reads, R0 and fit are not compared, and whose update-0 evals are not averaged into the
        ``initial.per_seed`` mean (calib names them by another difference).
    fit_arms : iterable of str, optional
        Arms whose updates fit is refitted and compared (:func:`_fit_changes`, about 20 ms each); None: every arm.

    Returns
    -------
    list of str or None
        One phrase per difference: arms only in one of the files, an arm's seed count (``arms.ARM.seeds``) unlike
        runs.csv's, another plan sha256 than ``study.json``'s, then :func:`read_differences`' phrases (each begins
        with :data:`CHANGED_READS`); [] when they agree.
    """
    study_dir = Path(study_dir)
    analysis = _read_json(study_dir / ANALYSIS_JSON)
    if not analysis:
        return None
    df = as_analysed(table, raw)
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    csv = {str(a): {int(s) for s in g["seed"]} for a, g in df.groupby("arm")} if len(df) else {}
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
    return diffs + read_differences(df, analysis, skip_arms=skip_arms, fit_arms=fit_arms)


def as_analysed(table, raw: bytes | None = None, *, blank_rows=()):
    """``table`` (runs.csv, rows = lines) as the analysis reads it: ``arm`` as text and ``seed`` as an integer (rows
    without a text arm, a whole seed or an update left out: the analysis refuses them), ``update``, ``accuracy`` and
    the axis columns as float64 (text: blank), the accuracy of a line that looks cut blank (``raw``: the file's
    bytes, row ``i`` on line ``i + 2``; ``blank_rows``: row labels to read so besides, e.g. calib's cut lines), each
    eval (arm, seed, update) once (the first line). Such lines that ``table`` left out (calib drops its cut lines)
    are counted in ``attrs[LOST_LINES]``: evals the analysis read as blank, which the fits allow for
    (:func:`_fit_changes`). Reading a frame already read so gives it back unchanged."""
    import pandas as pd

    df = table.copy()
    keys = ([run_key(a, s) for a, s in zip(df["arm"], df["seed"])] if {"arm", "seed"} <= set(df.columns)
            else [None] * len(df))
    df = df[[k is not None for k in keys]]
    df = df.assign(arm=[k[0] for k in keys if k is not None], seed=[k[1] for k in keys if k is not None])
    for col in ("update", "accuracy", *_AXIS_COLUMNS.values()):
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(np.float64)
    if "accuracy" in df.columns:
        cut = {line - 2 for line, _ in cut_lines(raw, "header")[1]} if raw is not None else set()
        blank = cut | set(blank_rows)
        df.loc[df.index.isin(sorted(blank)), "accuracy"] = np.nan
        df.attrs[LOST_LINES] = int(table.attrs.get(LOST_LINES, 0)) + len(blank - set(table.index))
    if "update" not in df.columns:
        return df
    return df[df["update"].notna()].drop_duplicates(["arm", "seed", "update"])


def read_differences(df, analysis: dict, *, skip_arms=(), fit_arms=None) -> list[str]:
    """The reads ``analysis`` (``analysis.json``'s content) records that ``df`` (:func:`as_analysed`) no longer gives,
    by the module's rules: each run's read at a matched point (:func:`_axis_changes`) and the update-0 mean of each
    seed (:func:`_initial_changes`), in one phrase, ``"the accuracy analysis.json reads differs from runs.csv's now
    for N run(s): ARM seed S at AXIS = B: X points in analysis.json, Y from runs.csv now (update(s) U: accuracy A);
    ..."`` (the first few runs named, the rest counted); then one phrase per arm whose mean update-0 accuracy is not
    its R0 (:func:`_r0_changes`), and one per arm in ``fit_arms`` (None: all) whose evals no longer give its updates
    fit (:func:`_fit_changes`), each told once (module docstring). ``skip_arms``: as :func:`analysis_differences`.
    [] when they agree."""
    if not {"arm", "seed", "update", "accuracy"} <= set(df.columns) or df.empty:
        return []
    skip = {str(a) for a in skip_arms}
    cols = [c for c in ("update", "accuracy", *_AXIS_COLUMNS.values()) if c in df.columns]
    runs = {(a, int(s)): {c: g[c].to_numpy(np.float64) for c in cols}
            for (a, s), g in df.sort_values("update", kind="stable").groupby(["arm", "seed"], sort=False)
            if str(a) not in skip}  # (arm, seed) -> column -> that run's values (evals,) in update order
    initial = _initial_changes(runs, analysis)
    changed: dict = {}
    for key, text in _axis_changes(runs, analysis, df.columns) + initial:
        changed.setdefault(key, []).append(text)
    out = [_runs_phrase(changed)] if changed else []
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    recounted = {a for a, res in arms.items() if isinstance(res, dict) and is_json_number(res.get("seeds"), finite=True)
                 and int(res["seeds"]) != sum(k == a for k, _ in runs)}  # told by their seed counts
    seeds_told = {seed for (_, seed), _ in initial}
    r0 = _r0_changes(runs, analysis)
    out += [text for arm, text in r0.items()
            if arm not in recounted and not any(s in seeds_told for a, s in runs if a == arm)]
    told = set(r0) | recounted | {a for a, _ in changed if a} | {a for a, s in runs if s in seeds_told}
    wanted = None if fit_arms is None else {str(a) for a in fit_arms}
    fit = [a for a in arms if a not in told and (wanted is None or a in wanted) and any(k == a for k, _ in runs)]
    return out + _fit_changes(df, analysis, fit)


def _runs_phrase(changed: dict) -> str:
    """One phrase for ``changed`` ((arm, seed) -> the texts of its changed reads; arm "" for a seed's update-0
    mean): the first :data:`_SHOWN_READS` runs named, the rest counted."""
    said = [f"{arm + ' ' if arm else ''}seed {seed} " + "; ".join(texts)
            for (arm, seed), texts in list(changed.items())[:_SHOWN_READS]]
    more = f"; and {len(changed) - _SHOWN_READS} more run(s)" if len(changed) > _SHOWN_READS else ""
    return f"{CHANGED_READS} for {len(changed)} run(s): " + "; ".join(said) + more


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


def _point(x, y, u, at: float, gap: float | None, hit_tol: float | None = None) -> dict:
    """One run's read at ``at`` by the analysis's rule, :func:`~gradprobe.forecast.read_rule.read_point` (the
    function :func:`gradprobe.study.reading.read_runs` reads by): the eval at ``at`` (within ``hit_tol``; None: the
    analysis's :data:`~gradprobe.forecast.read_rule.AT_TOL` relative; the nearest when several), else the linear
    interpolation between the evals around it when their width is within the promised gap plus one update's cost
    (``gap`` None: any width), else no read.

    ``x``, ``y``, ``u``: shape (evals,), the run's evals with an accuracy, sorted by update: the axis value, the
    accuracy (points) and the update. Returns ``{"value": points or None, "status", "updates": (lo, hi) or None,
    "span": (x_lo, x_hi) or None, "accepted": [values]}``, and between or at evals ``"promised"`` (``gap``) and
    ``"allowed"`` (read_point's: the promised gap plus one update's cost): ``accepted`` also holds the other outcome
    where the width lies within what rounding the evals to 6 significant digits can change (:data:`RESAVE_REL`)."""
    r = read_point(x, u, at, gap=gap, hit_tol=hit_tol)
    if r["rows"] is None:
        return {"value": None, "status": r["status"], "updates": None, "span": None, "accepted": [None]}
    lo, hi = r["rows"]
    v = float(y[lo]) if lo == hi else float((1.0 - r["w"]) * y[lo] + r["w"] * y[hi])
    out = {"value": v, "status": r["status"], "updates": (int(u[lo]), int(u[hi])), "span": (float(x[lo]), float(x[hi])),
           "accepted": [v], "promised": gap, "allowed": r["allowed"]}
    if r["status"] == "gap_exceeded":
        out.update(value=None, accepted=[None])
    if lo != hi and r["allowed"] is not None and math.isfinite(r["allowed"]) and \
            abs(r["gap"] - r["allowed"] * (1 + 1e-9)) <= 2 * RESAVE_REL * (abs(x[lo]) + abs(x[hi])):
        out["accepted"] = [v, None]  # rounding may have moved the width across the limit
    return out


def _run_read(g: dict, col: str, at: float, *, gap: float | None, final: bool) -> dict | None:
    """The read of the run ``g`` (column -> its values (evals,) in update order, blank accuracies included) at ``at``
    on the axis column ``col`` (its last eval when ``final``): :func:`_point` of its evals with an accuracy, an eval
    within :data:`RESAVE_REL` of ``at`` read as at it, plus ``"evals"`` (update -> accuracy of those evals) and
    ``"accepted"``: every value a read of runs.csv within RESAVE_REL of ``at`` gives (module docstring). None when a
    blank eval could have changed the read (module docstring): it is not compared."""
    blank = np.isnan(g["accuracy"])
    y, u = 100.0 * g["accuracy"][~blank], g["update"][~blank]
    evals = dict(zip(u.astype(int).tolist(), g["accuracy"][~blank].tolist()))
    if final:
        if blank[-1]:
            return None
        return {"value": float(y[-1]), "status": "final", "updates": (int(u[-1]), int(u[-1])), "evals": evals,
                "accepted": [float(y[-1])]}
    x = g[col][~blank]
    if not np.isfinite(x).all():  # an axis cell blanked since: the analysis would not read this axis now
        return {"value": None, "status": f"blank {col} cell", "updates": None, "evals": evals, "accepted": [None]}
    delta = RESAVE_REL * max(1.0, abs(at))
    r = _point(x, y, u, at, gap, hit_tol=delta)
    if blank.any():
        if r["updates"] is None:
            return None
        ub, xb = g["update"][blank], g[col][blank]
        lo, hi = min(r["span"][0], at - delta), max(r["span"][1], at + delta)
        if ((ub >= r["updates"][0]) & (ub <= r["updates"][1])).any() or ((xb >= lo) & (xb <= hi)).any():
            return None
    near = x[np.abs(x - at) <= delta]
    accepted = [v for c in (at - delta, at + delta, *near) for v in _point(x, y, u, float(c), gap)["accepted"]]
    return {**r, "evals": evals, "accepted": r["accepted"] + accepted}


def _accepts(accepted: list, old: float) -> bool:
    """Whether the recorded read ``old`` (points; NaN: no read) is among ``accepted`` (:func:`_run_read`): no read
    when one of them is none, else within :data:`READ_TOL` of the range of their values."""
    if math.isnan(old):
        return any(v is None for v in accepted)
    vals = [v for v in accepted if v is not None]
    return bool(vals) and min(vals) - READ_TOL <= old <= max(vals) + READ_TOL


def _evals_read(r: dict, axis: str) -> str:
    """runs.csv's evals behind the read ``r`` (:func:`_run_read`) on ``axis``, with their accuracies (fractions); for a
    read the promised gap refuses (:func:`_lost_eval`), why, without the accuracies of the evals it would span."""
    if r["updates"] is None:
        return f"no read: {r['status']}"
    if r["status"] == "gap_exceeded" and r.get("allowed") is not None and math.isfinite(r["allowed"]):
        return _lost_eval(r, axis)
    return ", ".join(f"update {u}: accuracy {r['evals'].get(u, math.nan):g}" for u in dict.fromkeys(r["updates"]))


def _lost_eval(r: dict, axis: str) -> str:
    """Why the read ``r`` (:func:`_run_read`, status ``"gap_exceeded"`` under a finite promised gap) is refused: its
    evals around the point lie further apart on ``axis`` than the promised gap plus one update's cost, so the eval
    promised between them is lost (:mod:`gradprobe.forecast.read_rule`); the analysis reads no value across it."""
    (u_lo, u_hi), (x_lo, x_hi) = r["updates"], r["span"]
    return (f"refused: the run's evals around it, at updates {u_lo} and {u_hi}, lie {x_hi - x_lo:,.6g} apart on "
            f"{axis}, more than the {r['allowed']:,.6g} allowed (the promised gap {r['promised']:,.6g} plus one "
            f"update's cost): the eval promised between them, at an update between {u_lo} and {u_hi}, is lost, and "
            "the analysis reads no value across a lost eval")


def _differ(old: float, new) -> bool:
    """Whether two reads (points; NaN / None: no read) differ by more than :data:`READ_TOL`."""
    new = math.nan if new is None else float(new)
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) != math.isnan(new)
    return abs(old - new) > READ_TOL


def _axis_changes(runs: dict, analysis: dict, columns) -> list:
    """[((arm, seed), phrase)] for each ``arms.ARM.AXIS.per_seed`` value that the run's read now (:func:`_run_read`)
    does not accept (``columns``: the axes runs.csv has; an axis ``matched`` marks not recorded, or without a numeric
    budget, is not compared)."""
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
                r = _run_read(g, col, budget, gap=gap, final=final)
                if r is not None and not _accepts(r["accepted"], _number(old)):
                    now = "no read" if r["value"] is None else f"{r['value']:.6g}"
                    out.append(((arm, int(s)), f"at {axis} = {budget:,.6g}: {_number(old):.6g} points in "
                                f"{ANALYSIS_JSON}, {now} from {RUNS_CSV} now ({_evals_read(r, axis)})"))
    return out


def _update0(g: dict) -> float | None:
    """The accuracy (fraction; NaN: a blank cell) of the run ``g``'s (:func:`_run_read`) eval at update 0; None
    without one."""
    at0 = g["accuracy"][g["update"] == 0]
    return float(at0[0]) if at0.size else None


def _initial_changes(runs: dict, analysis: dict) -> list:
    """[(("", seed), phrase)] for each ``initial.per_seed`` value (update 0, the mean over the arms) unlike the mean
    of ``runs``' update-0 accuracies now; a seed with a blank update-0 cell in one of ``runs`` is not compared."""
    per_seed = (analysis.get("initial") or {}).get("per_seed") if isinstance(analysis.get("initial"), dict) else None
    if not isinstance(per_seed, dict):
        return []
    now: dict = {}
    blank = set()
    for (arm, seed), g in runs.items():
        a = _update0(g)
        if a is not None and math.isnan(a):
            blank.add(seed)
        elif a is not None:
            now.setdefault(seed, []).append(100.0 * a)
    out = []
    for s, old in per_seed.items():
        if not str(s).isdigit() or int(s) in blank:
            continue
        vals = now.get(int(s))
        new = math.fsum(vals) / len(vals) if vals else None
        if _differ(_number(old), new):
            out.append((("", int(s)), f"at update 0 (initial.per_seed, the mean over the arms): {_number(old):.6g} "
                        f"points in {ANALYSIS_JSON}, " + ("no update-0 accuracy" if new is None else f"{new:.6g}") +
                        f" from {RUNS_CSV} now"))
    return out


def _r0_changes(runs: dict, analysis: dict) -> dict[str, str]:
    """arm -> a phrase, for each arm of ``analysis`` whose ``R0`` (its mean update-0 accuracy, points, recorded in
    every fit of ``arms.ARM.sigmoid``) is not the mean of its ``runs``' update-0 accuracies now within
    :data:`READ_TOL`; an arm with a blank update-0 cell, or without runs in ``runs``, is not compared."""
    arms = analysis.get("arms") if isinstance(analysis.get("arms"), dict) else {}
    out = {}
    for arm, res in arms.items():
        fits = res.get("sigmoid") if isinstance(res, dict) else None
        axis = next((ax for ax, e in (fits.items() if isinstance(fits, dict) else ())
                     if isinstance(e, dict) and is_json_number(e.get("R0"), finite=True)), None)
        acc = {s: _update0(g) for (a, s), g in runs.items() if a == arm}
        acc = {s: a for s, a in acc.items() if a is not None}
        if axis is None or not any(a == arm for a, _ in runs) or any(math.isnan(a) for a in acc.values()):
            continue
        old = float(fits[axis]["R0"])
        new = math.fsum(100.0 * a for a in acc.values()) / len(acc) if acc else None
        if _differ(old, new):
            evals = ", ".join(f"seed {s}: accuracy {a:g}" for s, a in sorted(acc.items()))
            out[arm] = (f"{CHANGED_READS} for arm {arm} at update 0 (arms.{arm}.sigmoid.{axis}.R0, the mean over its "
                        f"runs): {old:.6g} points in {ANALYSIS_JSON}, " + (f"{new:.6g} from {RUNS_CSV} now ({evals})"
                        if new is not None else f"no update-0 accuracy in {RUNS_CSV} now"))
    return out


def _fit_changes(df, analysis: dict, arms: list) -> list[str]:
    """One phrase per arm of ``arms`` whose updates fit (``arms.ARM.sigmoid.updates``: ``n_points``, ``rmse``)
    is not what :func:`~gradprobe.forecast.analysis_sigmoid.fit_sigmoid` gives from its evals in ``df`` now (each
    with an update and an accuracy, sorted by seed and update as the analysis reads them; R0 as recorded): another
    number of evals, or an rmse more than :data:`FIT_RTOL` relative away. An arm whose fit recorded an ``error`` or
    no rmse is skipped, and so is one with fewer evals left than the fit had, as many or fewer than its blank
    accuracy cells and the cut lines ``df`` lacks (``attrs[LOST_LINES]``) can account for: evals lost since the
    analysis, which the skipped-cells and cut-line notes tell (a line deleted is still refused by its count)."""
    out = []
    for arm in arms:
        fits = analysis["arms"][arm].get("sigmoid") if isinstance(analysis["arms"][arm], dict) else None
        entry = fits.get("updates") if isinstance(fits, dict) else None
        if not isinstance(entry, dict) or "error" in entry or \
                not all(is_json_number(entry.get(k), finite=True) for k in ("rmse", "n_points", "R0")):
            continue
        rows = df[df["arm"] == arm].sort_values(["seed", "update"], kind="stable")
        acc = rows["accuracy"].to_numpy(np.float64)
        n_old, kept, old = int(entry["n_points"]), int(np.isfinite(acc).sum()), float(entry["rmse"])
        if 0 < n_old - kept <= len(acc) - kept + df.attrs.get(LOST_LINES, 0):  # evals lost since: blank or cut
            continue
        x = np.ascontiguousarray(rows["update"].to_numpy(np.float64))
        n_now, rmse, error = _refit(x.tobytes(), np.ascontiguousarray(100.0 * acc).tobytes(), float(entry["R0"]))
        now = f"no fit ({error})" if error else f"{n_now} evals, rmse {rmse:.7g}"
        if n_now != n_old or error or not abs(rmse - old) <= FIT_RTOL * abs(old):
            out.append(f"{CHANGED_READS} for arm {arm}'s evals (arms.{arm}.sigmoid.updates, the sigmoid fitted to "
                       f"all its evals against updates): {n_old} evals, rmse {old:.7g} points in {ANALYSIS_JSON}; "
                       f"{now} from {RUNS_CSV} now: an eval of {arm} that no matched read uses was edited (its "
                       "update or accuracy), added or removed")
    return out


@functools.lru_cache(maxsize=256)
def _refit(x: bytes, y: bytes, R0: float) -> tuple[int, float, str | None]:
    """(n_points, rmse, None) of :func:`~gradprobe.forecast.analysis_sigmoid.fit_sigmoid` against updates of the
    float64 arrays ``x`` (updates) and ``y`` (accuracy points; NaN: a blank cell, left out) given as bytes, or
    (evals with both, NaN, why) when it cannot fit. Cached by the numbers themselves: calib and a curve read the same
    study's arms again and again, and one shipped arm's fit takes 2 s (most take 20 ms)."""
    from .analysis_sigmoid import fit_sigmoid  # scipy: loaded only when a fit is compared

    xs, ys = np.frombuffer(x, dtype=np.float64), np.frombuffer(y, dtype=np.float64)
    try:
        fit = fit_sigmoid(xs, ys, R0=R0, axis="updates")
    except ValueError as e:
        return int((np.isfinite(xs) & np.isfinite(ys)).sum()), math.nan, str(e)
    return int(fit["n_points"]), float(fit["rmse"]), None


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

