"""A study's per-item eval results, and the check that each ``runs.csv`` accuracy is the mean of its eval's items.

``gradprobe study`` writes ``runs.csv`` (one line per eval of every run) and the per-item results of the same evals
(``eval_items.jsonl.gz``, else each run folder's ``runs/ARM/seedS/eval_items.jsonl``: one line per eval with
``update``, ``generated_tokens``, ``greedy`` ("0110...", one character per held-out item, '1' = correct) and
``sampled`` (one such string per sample), :func:`gradprobe.training.metrics.evaluate`). A run computed each accuracy
from those very items, so an accuracy that is not their mean is an edited or damaged ``runs.csv``
(:func:`item_accuracy_mismatches`).

Every reader of a study's accuracies refuses such a file with the same message and fix
(:func:`restore_runs_csv_fix`): the analysis (:func:`gradprobe.study.reading.load_runs`), calibration
(``calib.integrity.read_study_runs``) and a reference curve read from a study
(:meth:`gradprobe.forecast.curve_sources.CurveSources.from_study`). The check lives here, in the forecast layer,
so that the curve reader can use it without importing :mod:`gradprobe.study` (a higher layer);
:mod:`gradprobe.study.reading` imports it from here.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path

import numpy as np

from ..layout import EVAL_ITEMS_GZ, PLAN_COPY, keeps_runs
from ..layout import EVAL_ITEMS_JSONL as EVAL_ITEMS
from ..outputs import error_text, shell_word

__all__ = ["EVAL_ITEMS", "EVAL_ITEMS_GZ", "ITEM_ACCURACY_TOL", "SHOWN", "ItemsFileError", "restore_runs_csv_fix",
           "rows_named", "run_key", "csv_run_evals", "is_number", "same_training", "items_name", "item_lines",
           "read_item_lines", "item_evals", "item_accuracy_mismatches"]

#: Largest difference (a fraction) between a runs.csv accuracy and the mean of its eval's per-item results. Both come
#: from one eval: training writes the mean of the 0/1 items (``float(correct.mean())``) and runs.csv prints it in full
#: (Python's repr), so they agree to the last bit; 1e-9 leaves room for float noise only, far below one item in 10^6.
ITEM_ACCURACY_TOL = 1e-9
#: runs.csv column, per-item mode, what the message counts
_ITEM_MODES = (("accuracy", "greedy", "items"), ("accuracy_sampled", "sampled", "item samples"))
SHOWN = 5  # rows named in a message; the rest are counted


class ItemsFileError(ValueError):
    """A study's ``eval_items.jsonl.gz`` cannot be read (cut, not gzip, not JSON lines); the message names the file
    and the fix. :mod:`gradprobe.study.reading` raises it as its ``AnalysisError``."""


def restore_runs_csv_fix(study_dir: str | Path | None) -> str:
    """How to get ``runs.csv`` back when it is empty, edited or damaged: rebuilt from the run folders
    (``gradprobe study PLAN --out DIR`` rewrites it from every finished ``runs/ARM/seedS/metrics.jsonl``
    without redoing those runs; ``--analyze-only`` only reads it), else from a copy. ``study_dir`` None:
    the advice without the folder's paths."""
    if study_dir is None:
        return ("rebuild it from the run folders: `gradprobe study DIR/plan.toml --out DIR` rewrites runs.csv from "
                "DIR/runs/ARM/seedS/metrics.jsonl without redoing the finished runs (--analyze-only only reads "
                "runs.csv), or restore it from a copy")
    d = Path(study_dir)
    if keeps_runs(d):
        return (f"rebuild it from the run folders: `gradprobe study {shell_word(d / PLAN_COPY)} --out {shell_word(d)}` "
                f"rewrites runs.csv from {d / 'runs'}/ARM/seedS/metrics.jsonl without redoing the finished runs "
                "(--analyze-only only reads runs.csv)")
    return (f"restore it from a copy: {d} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out DIR` "
            "rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")


def rows_named(df, mask, lines) -> str:
    """The rows of ``df`` (a runs.csv table, columns ``arm``, ``seed``, ``update``) where ``mask`` (boolean, shape
    (rows,)) holds, as ``line L (arm A, seed S, update U)``: the first :data:`SHOWN`, the rest counted (``lines``: each
    row's line in the file; None: without the line)."""
    idx = np.flatnonzero(np.asarray(mask, dtype=bool))
    parts = []
    for i in idx[:SHOWN]:
        r = df.iloc[i]
        key = ", ".join(f"{c} {r[c]:g}" if isinstance(r[c], float) else f"{c} {r[c]}"
                        for c in ("arm", "seed", "update"))
        parts.append(f"line {lines[i]} ({key})" if lines is not None else f"({key})")
    return ", ".join(parts) + (f" and {idx.size - SHOWN} more" if idx.size > SHOWN else "")


def run_key(arm, seed) -> tuple[str, int] | None:
    """(arm, seed) of a runs.csv row as the checks against the per-item results key runs; None for a row without a
    text arm or a whole seed."""
    try:
        s = float(seed)
    except (TypeError, ValueError):
        return None
    return (arm, int(s)) if isinstance(arm, str) and math.isfinite(s) and s == int(s) else None


def csv_run_evals(df) -> dict:
    """(arm, seed) -> {update: generated_tokens (NaN when blank)} of ``df``'s rows (a runs.csv table) with an arm, a
    whole seed and an update (other rows are refused elsewhere)."""
    import pandas as pd

    seeds = pd.to_numeric(df["seed"], errors="coerce")
    updates = pd.to_numeric(df["update"], errors="coerce")
    tokens = (pd.to_numeric(df["generated_tokens"], errors="coerce") if "generated_tokens" in df.columns
              else pd.Series(np.nan, index=df.index))
    out: dict = {}
    for arm, s, u, t in zip(df["arm"], seeds, updates, tokens):
        if (key := run_key(arm, s)) is not None and math.isfinite(u):
            out.setdefault(key, {})[float(u)] = float(t)
    return out


def is_number(v) -> bool:
    """Whether ``v`` is a finite JSON number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def same_training(csv_evals: dict, item_evals: dict) -> bool:
    """Whether a run's per-item evals come from the training ``runs.csv`` records: some eval in common, and the
    ``generated_tokens`` of every common eval agree where both are recorded (a run trained again after its
    per-item file was written spends otherwise). Both: {update: generated_tokens} (:func:`csv_run_evals`,
    :func:`item_evals`)."""
    common = set(csv_evals) & set(item_evals)
    if not common:
        return False
    return all(math.isclose(csv_evals[u], item_evals[u], rel_tol=1e-9, abs_tol=1e-6) for u in common
               if math.isfinite(csv_evals[u]) and math.isfinite(item_evals[u]))


def items_name(study_dir) -> str:
    """The per-item results' file as messages name it: ``eval_items.jsonl.gz``, else the run folders' files."""
    return EVAL_ITEMS_GZ if (Path(study_dir) / EVAL_ITEMS_GZ).exists() else f"runs/ARM/seedS/{EVAL_ITEMS}"


def item_lines(study_dir: str | Path) -> list[dict] | None:
    """Lines of ``eval_items.jsonl.gz`` (arm and seed on each), else of every run's
    ``runs/ARM/seedS/eval_items.jsonl`` (arm and seed from the path); None when there are none.

    Raises
    ------
    ItemsFileError
        ``eval_items.jsonl.gz`` or a run's ``eval_items.jsonl`` is cut, not gzip or not JSON lines, or holds a line
        that is no JSON object (the message names the file and the fix).
    """
    study_dir = Path(study_dir)
    gz = study_dir / EVAL_ITEMS_GZ
    if gz.exists():
        try:
            return _objects(gzip.decompress(gz.read_bytes()).decode(), gz)
        except (OSError, EOFError, UnicodeDecodeError, ValueError, zlib.error) as e:  # cut, not gzip, not JSON lines
            raise ItemsFileError(f"{gz} cannot be read ({error_text(e)}): the "
                                 "per-item results were cut or damaged; restore the file from the study, or, where its "
                                 f"run folders are kept, `gradprobe study {shell_word(study_dir / PLAN_COPY)} --out "
                                 f"{shell_word(study_dir)}` "
                                 "rewrites it from runs/ARM/seedS/eval_items.jsonl (finished runs are not redone)"
                                 ) from None
    lines = []
    for path in sorted(study_dir.glob(f"runs/*/seed*/{EVAL_ITEMS}")):
        try:
            arm, seed = path.parent.parent.name, int(path.parent.name[4:])
            lines += [{"arm": arm, "seed": seed, **e} for e in _objects(path.read_text(), path)]
        except (OSError, UnicodeDecodeError, ValueError) as e:  # unreadable, not JSON lines, a seed folder seedX
            raise ItemsFileError(f"{path} cannot be read ({error_text(e)}): the run's per-item results were cut or "
                                 "damaged; rerun that run (delete its folder and run the study again: finished runs "
                                 "are not redone)") from None
    return lines or None


def _objects(text: str, path: Path) -> list[dict]:
    """The JSON objects of the non-blank lines of ``text`` (JSON lines read from ``path``).

    Raises ValueError: a line that is not JSON, or JSON but no object (named by its line and the file)."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            value = json.loads(line)
            if not isinstance(value, dict):
                raise ValueError(f"line {i} of {path.name} is JSON {type(value).__name__}, not an object")
            out.append(value)
    return out


def read_item_lines(study_dir) -> list[dict]:
    """The study's per-item result lines (:func:`item_lines`) for the checks of ``runs.csv`` against them; [] when
    there are none or they cannot be read (the analysis refuses a damaged ``eval_items.jsonl.gz`` itself)."""
    try:
        return item_lines(study_dir) or []
    except (OSError, ValueError, KeyError):  # ItemsFileError is a ValueError
        return []


def item_evals(study_dir, lines=None) -> tuple[dict, str]:
    """((arm, seed) -> {update: generated_tokens} of every eval the per-item results record, and the file named
    for them); {} when there are none or they cannot be read (the analysis reports that itself). ``lines``: the
    per-item lines already read (:func:`item_lines`, e.g. by the analysis: one read of the file); None: read here."""
    name = items_name(study_dir)
    lines = read_item_lines(study_dir) if lines is None else lines
    out: dict = {}
    for e in lines:
        try:
            key, u, t = (str(e["arm"]), int(e["seed"])), float(e["update"]), e.get("generated_tokens")
            out.setdefault(key, {})[u] = float(t) if isinstance(t, (int, float)) else math.nan
        except (KeyError, TypeError, ValueError):
            continue
    return out, name


def _item_means(line: dict) -> dict:
    """runs.csv column -> (items correct, items) of one per-item line: ``greedy`` for ``accuracy``, every ``sampled``
    string together for ``accuracy_sampled`` (training's mean over items x samples); a mode without items is left
    out."""
    out = {}
    for col, mode, _ in _ITEM_MODES:
        strings = [line.get(mode)] if mode == "greedy" else line.get(mode)
        strings = [x for x in (strings if isinstance(strings, list) else []) if isinstance(x, str) and x]
        if strings:
            out[col] = (sum(x.count("1") for x in strings), sum(len(x) for x in strings))
    return out


def item_accuracy_mismatches(df, item_lines, path, lines=None, study_dir=None) -> str | None:
    """The evals whose ``runs.csv`` accuracy is not the mean of the per-item results the study wrote at that eval.

    ``accuracy`` must equal the mean of the eval's ``greedy`` items and ``accuracy_sampled`` that of its ``sampled``
    items (every sample), within :data:`ITEM_ACCURACY_TOL`, wherever both are recorded: the run computed the accuracy
    from those very items (:func:`gradprobe.training.metrics.evaluate`), so a difference is an edited or damaged file.
    Checked only for a run whose per-item results come from the training runs.csv records (:func:`same_training`,
    as :func:`gradprobe.study.reading.lost_eval_lines` checks); a blank cell (a cut line's accuracy, read as blank)
    is not compared, nor a column ``df`` lacks. The analysis (:func:`gradprobe.study.reading.load_runs`), calibration
    (``calib.integrity.read_study_runs``) and a study's reference curve
    (:meth:`~gradprobe.forecast.curve_sources.CurveSources.from_study`) refuse with this one line.

    Parameters
    ----------
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` as read (columns ``arm``, ``seed``, ``update``, ``generated_tokens``, ``accuracy`` and/or
        ``accuracy_sampled``; fractions, text cells read as blank).
    item_lines : list of dict
        The per-item result lines (:func:`read_item_lines`, or the caller's read); none: nothing is compared.
    path : path
        The runs.csv named in the message.
    lines : list of int, optional
        Each row's line in runs.csv (named in the message); None: the rows are named without it.
    study_dir : path, optional
        Names the per-item file (``eval_items.jsonl.gz`` or the run folders' ``eval_items.jsonl``).

    Returns
    -------
    str or None
        ``"PATH: N eval(s) record an accuracy that is not the mean of the per-item results ...: line L (arm A, seed
        S, update U): accuracy X in runs.csv, Y in FILE (K of N items correct), ...: runs.csv was edited or damaged
        ..."`` (the first few named, the rest counted), without the fix (:func:`restore_runs_csv_fix`, which the
        caller adds); None when every compared eval agrees.
    """
    import pandas as pd

    if not item_lines or df.empty:
        return None
    items, name = item_evals(Path(study_dir or "."), item_lines)[0], items_name(study_dir or ".")
    means = {}
    for e in item_lines:
        if (key := run_key(e.get("arm"), e.get("seed"))) is not None and is_number(e.get("update")):
            means[(*key, float(e["update"]))] = _item_means(e)
    csv_evals = csv_run_evals(df)
    seeds, updates = (pd.to_numeric(df[c], errors="coerce").to_numpy(np.float64) for c in ("seed", "update"))
    wrong = []  # (row, column, runs.csv value, (items correct, items), unit)
    for col, _, unit in _ITEM_MODES:
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64) if col in df.columns else None
        for i in range(len(df) if values is not None else 0):
            key = run_key(df["arm"].iat[i], seeds[i])
            got = means.get((*key, updates[i]), {}).get(col) if key is not None else None
            if got is None or math.isnan(values[i]) or not same_training(csv_evals[key], items.get(key, {})):
                continue
            if abs(values[i] - got[0] / got[1]) > ITEM_ACCURACY_TOL:
                wrong.append((i, col, values[i], got, unit))
    if not wrong:
        return None
    said = [f"{rows_named(df, np.arange(len(df)) == i, lines)}: {col} {v:.10g} in runs.csv, {k / n:.10g} in "
            f"{name} ({k} of {n} {unit} correct)" for i, col, v, (k, n), unit in wrong[:SHOWN]]
    more = f" and {len(wrong) - SHOWN} more" if len(wrong) > SHOWN else ""
    return (f"{path}: {len(wrong)} accuracy cell(s) are not the mean of the per-item results the study wrote at "
            f"that eval: {'; '.join(said)}{more}; the run computed each accuracy from those items and the study "
            f"writes both files from the same evals, so they agree to 1e-9 (unless {name} was changed: then restore "
            "that from the study): runs.csv was edited or damaged")
