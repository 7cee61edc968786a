"""Reading a study folder: runs.csv, per-item eval results, matched points and gap-checked reads.

The definitions (matched point of an axis, reading a run at a point, the promised gap) are in
:mod:`gradprobe.study.analysis`; the rule of reading a run at a point (:func:`read_point`, :func:`promised_gap`) is
:mod:`gradprobe.forecast.read_rule`'s, which the check of a study folder reads by too; per-item results follow the
run format of :func:`gradprobe.training.metrics.evaluate` (``eval_items.jsonl``: one line per eval with
``update``, ``generated_tokens``, ``flops``, ``device_seconds``, ``greedy`` ("0110...", one
character per held-out item, '1' = correct) and ``sampled`` (one such string per sample)).
"""

from __future__ import annotations

import io
import json
import math
import warnings
from pathlib import Path

import numpy as np

from ..forecast.csv_cells import cut_lines, name_short_lines, repeated_rows
# The rule of reading a run at a point lives in the forecast layer (the check of a study folder re-does the analysis's
# reads by it, and may not import gradprobe.study); its names here stay importable.
from ..forecast.read_rule import AT_TOL, _at_tol, promised_gap, read_point  # noqa: F401
# The per-item results and the check of runs.csv's accuracies against them live in the forecast layer (a study's
# reference curve checks them too, and may not import gradprobe.study); their old names here stay importable.
from ..forecast.study_items import (EVAL_ITEMS, EVAL_ITEMS_GZ, ITEM_ACCURACY_TOL, ItemsFileError,  # noqa: F401
                                    item_accuracy_mismatches, item_evals, item_lines, restore_runs_csv_fix)
from ..forecast.study_items import SHOWN as _SHOWN, csv_run_evals as _csv_run_evals, rows_named as _rows_named
from ..forecast.study_items import run_key as _run_key, same_training as _same_training
from ..layout import OUTPUT_KINDS, PLAN_COPY, keeps_runs, output_kind
from ..outputs import shell_word
from ..training.plan import load_plan


AXIS_COLUMNS = {"updates": "update", "generated_tokens": "generated_tokens", "flops": "flops",
                "device_seconds": "device_seconds"}
CORE_COLUMNS = ("arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled",
                "reward", "lr_scale")
SIDE_EFFECTS = ("response_length", "format_rate", "kl_init")
METRIC_COLUMNS = {"greedy_accuracy": "accuracy", "sampled_accuracy": "accuracy_sampled"}
ITEM_MODES = {"greedy_accuracy": "greedy", "sampled_accuracy": "sampled"}


class AnalysisError(ValueError):
    """The study folder cannot be analysed (no runs.csv, missing columns, no completed run)."""


# ----------------------------------------------------------------------------- reading a curve

def interpolate(x, y, at: float) -> float:
    """Linear interpolation of y at ``at`` between eval points (x strictly increasing); no
    extrapolation (relative tolerance 1e-9 at the ends). Raises ValueError otherwise."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape:
        raise ValueError(f"interpolate needs matching non-empty x and y, got shapes {x.shape} and {y.shape}")
    if x.size > 1 and not np.all(np.diff(x) > 0):
        raise ValueError(f"eval points must be strictly increasing in x, got {x.tolist()}")
    tol = 1e-9 * max(1.0, abs(float(x[-1])))
    if at < x[0] - tol or at > x[-1] + tol:
        raise ValueError(f"x = {at:g} is outside the run's eval range [{x[0]:g}, {x[-1]:g}]; no extrapolation")
    return float(np.interp(min(max(at, x[0]), x[-1]), x, y))


def _combine(y, read: dict):
    """The value (or item vector) at a read: (1 - w) y[lo] + w y[hi]; None if refused or missing."""
    if read.get("rows") is None or read["status"] in ("gap_exceeded", "outside"):
        return None
    lo, hi = read["rows"]
    w = read["w"]
    parts = [(1.0 - w, y[lo]), (w, y[hi])] if lo != hi else [(1.0, y[lo])]
    vals = [(c, v) for c, v in parts if c > 0]
    if any(v is None or (np.ndim(v) == 0 and not np.isfinite(v)) for _, v in vals):
        return None
    return sum(c * np.asarray(v, dtype=np.float64) for c, v in vals)


# ----------------------------------------------------------------------------- reading a study

def blank_cells(df, col: str, mask=None) -> str | None:
    """The rows of ``df`` (:func:`load_runs`) with a blank ``col`` cell while others have a value, named with
    their runs.csv lines, arm, seed and update; None when none (or when the whole column is blank).

    ``mask``: boolean (rows,), the blank cells to name when only some count (:func:`recorded_axes` names a
    blank cell only within a run that records ``col`` at its other evals); default: every blank cell."""
    blank = df[col].isna().to_numpy()
    if mask is not None:
        blank = blank & np.asarray(mask, dtype=bool)
    elif blank.all():
        return None
    if not blank.any():
        return None
    lines = df.attrs.get("csv_lines")
    return _rows_named(df, blank, lines if lines is not None and len(lines) == len(df) else None)


def load_runs(study_dir: str | Path, *, item_lines=None):
    """``runs.csv`` as a DataFrame (accuracies stay fractions), sorted by arm, seed and update.

    Optional columns (``flops``, the side effects) absent in older studies are added empty. ``attrs["csv_lines"]``
    holds every row's line in the file (named by :func:`blank_cells`), ``attrs["study_dir"]`` the folder.

    Parameters
    ----------
    study_dir : str or Path
        The study folder (``gradprobe study --out DIR``).
    item_lines : list of dict, optional
        The study's per-item result lines when the caller has read them (the analysis: the file is read once);
        None: read here (:func:`read_item_lines`) for the lost-line check (:func:`lost_eval_lines`) and the
        accuracy cross-check (:func:`item_accuracy_mismatches`).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    AnalysisError
        No ``runs.csv``; an empty (0 bytes) or unparsable one, missing core columns, no rows, a blank ``arm``, ``seed``
        or ``update`` cell, an ``arm`` or ``seed`` that is none of the frozen plan's, an ``update`` that is no whole
        number >= 0 (:func:`_checked_identity`: the file, lines, cells and fix named), one eval (arm, seed, update) on
        two lines with different values, an ``accuracy`` or
        ``accuracy_sampled`` outside [0, 1] (points, not fractions; inf too), a ``generated_tokens``, ``device_seconds``
        or ``flops`` value infinite or negative, or one that decreases from a run's eval to its next (by update: each is
        the run's running total, :func:`running_total_decreases`), or no accuracy on any line (both accuracy columns
        blank) (the message names the file, the lines and the fix: rebuild runs.csv from the run folders,
        :func:`restore_runs_csv_fix`). A run's final eval line deleted whole, or cut off with the file's end (the file
        cut inside or right after an earlier line of the run, :func:`cut_tail_run`), i.e. an update ``study.json`` or
        the run's per-item results record after its last line (:func:`lost_eval_lines`): the run's end is unknown, and
        read as it is the run would end earlier, moving the matched budgets; one line names the file, each such run, its
        last update left, the missing update(s) and the fix (:func:`_check_lost_lines`). An ``accuracy`` or
        ``accuracy_sampled`` that is not the mean of the per-item results of its eval (:func:`item_accuracy_mismatches`:
        the file, line, run, update, both values and the fix).

    Warns
    -----
    UserWarning
        Evals with a blank ``accuracy`` cell while others have one (the file was edited or damaged): the
        analysis reads those runs without them (a run whose last eval's cell is blank is no read at a budget read at
        the runs' final evals, :func:`read_runs`); the warning names their lines, arm, seed and update. Lines with
        fewer fields than the header (a file cut mid-line), or the last line of a file without a final line
        break: one warning names them; their missing cells, and their ``accuracy`` and ``accuracy_sampled``
        cells (a value at a cut may be cut: ``0.`` for ``0.74``), read as blank. Lines that copy an earlier line
        exactly: one warning names them, and each eval is read once. Lines deleted whole before a run's last line (a
        run lacks an eval its plan or per-item results record, :func:`lost_eval_lines`): one warning names the runs,
        the updates and the fix, and the analysis reads those runs with the evals left (a read across a lost eval is
        refused by the promised gap).
    """
    import pandas as pd

    path, raw = _runs_csv_bytes(study_dir)  # read once: the table, each row's line and the short lines
    df = _parsed_runs_csv(path, raw, study_dir)
    text_lines = [n for n, line in enumerate(raw.splitlines(), 1) if line.strip()][1:]
    cut = _warn_short_lines(path, raw, study_dir)
    lines_known = len(text_lines) == len(df)  # pandas skips blank lines; a quoted line break would shift them
    if lines_known:
        df.index = pd.Index(text_lines)  # each row's line in the file
    df = df[df.notna().any(axis=1)]  # a line of empty cells is no row
    _check_rows(df, path, list(df.index) if lines_known else None, study_dir)
    plan = _readable_plan(study_dir)  # read once: the identity cells and the lost-line check use it
    df = _checked_identity(df, path, list(df.index) if lines_known else None, study_dir, plan)
    df = _read_each_eval_once(df, path, list(df.index) if lines_known else None, study_dir)
    _check_fractions(df, path, list(df.index) if lines_known else None, study_dir)
    _check_costs(df, path, list(df.index) if lines_known else None, study_dir)
    _check_some_accuracy(df, path, study_dir)
    tail = cut_tail_run(raw)  # the run of a cut last line, whose later lines may have gone with the cut
    df = _sorted_runs(df, lines_known, study_dir)
    _check_running_totals(df, path, cut, study_dir)  # a cost typo (256359 -> 25635) would move every matched point
    item_lines = read_item_lines(study_dir) if item_lines is None else item_lines  # read once, for both checks
    _check_lost_lines(df, study_dir, path, tail, item_lines, plan)  # lines deleted or cut off (a lost end: refused)
    _blank_accuracy_at_cuts(df, cut, path, study_dir)
    if (wrong := item_accuracy_mismatches(df, item_lines, path, df.attrs.get("csv_lines"), study_dir)) is not None:
        raise AnalysisError(f"{wrong}; {restore_runs_csv_fix(study_dir)}")
    return df


def _runs_csv_bytes(study_dir) -> tuple[Path, bytes]:
    """(path, bytes) of ``study_dir/runs.csv`` for :func:`load_runs`.

    Raises
    ------
    AnalysisError
        No ``runs.csv``: the folder holds another command's output (named, with the fix: give a study's folder), or
        the study has not been run (the fix: ``gradprobe study PLAN --out DIR``), or an analysed study without its
        ``runs/`` (a shipped study's tables: the fix restores runs.csv from a copy,
        :func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`).
    """
    path = Path(study_dir) / "runs.csv"
    if not path.exists():
        found = output_kind(study_dir)
        if found is not None and found[0] != "study":
            raise AnalysisError(f"{study_dir} holds {OUTPUT_KINDS[found[0]]} ({found[1]}), not a study (no runs.csv): "
                                "give the folder of a study, the --out of `gradprobe study PLAN --out DIR`")
        d = Path(study_dir)
        if (d / "analysis.json").is_file() and not keeps_runs(d):  # analysed, its runs not kept: shipped
            raise AnalysisError(f"{path} does not exist; {restore_runs_csv_fix(study_dir)}")
        raise AnalysisError(f"{path} does not exist; run `gradprobe study PLAN --out {shell_word(study_dir)}` first")
    return path, path.read_bytes()


def _parsed_runs_csv(path: Path, raw: bytes, study_dir):
    """``raw`` (the bytes of ``path``, a ``runs.csv``) as a DataFrame (``pandas.read_csv``, every row kept).

    Raises
    ------
    AnalysisError
        An empty file (no header line) or one pandas cannot parse as a CSV (the file and
        :func:`restore_runs_csv_fix` are named).
    """
    import pandas as pd

    try:
        return pd.read_csv(io.BytesIO(raw))
    except pd.errors.EmptyDataError:
        raise AnalysisError(f"{path} is empty ({len(raw)} bytes: no header line, no rows); "
                            f"{restore_runs_csv_fix(study_dir)}") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise AnalysisError(f"{path} cannot be read as a CSV ({e}); {restore_runs_csv_fix(study_dir)}") from None


def _check_rows(df, path: Path, lines, study_dir) -> None:
    """Refuse a ``runs.csv`` (``df``, its rows on the file's ``lines``, None when unknown) that lacks a core column
    (:data:`CORE_COLUMNS`), has no row, or has a blank ``arm``, ``seed`` or ``update`` cell (the rows named by
    :func:`_rows_named`): an :class:`AnalysisError` naming ``path`` and :func:`restore_runs_csv_fix`."""
    missing = [c for c in CORE_COLUMNS if c not in df.columns]
    if missing:
        raise AnalysisError(f"{path} lacks the column(s) {', '.join(missing)} (its header line was cut or edited); "
                            f"{restore_runs_csv_fix(study_dir)}")
    if df.empty:
        raise AnalysisError(f"{path} has no rows: no run of the study has completed yet")
    for c in ("arm", "seed", "update"):
        if df[c].isna().any():
            rows = _rows_named(df, df[c].isna().to_numpy(), lines)
            raise AnalysisError(f"{path} has a blank {c!r} cell at {rows}: runs.csv was edited or damaged; "
                                f"{restore_runs_csv_fix(study_dir)}")


def _readable_plan(study_dir):
    """The study's frozen ``plan.toml`` (:func:`_load_plan`), or None when there is none or it cannot be read (the
    analysis refuses that itself: :func:`frozen_plan`); what :func:`load_runs` checks the rows against."""
    try:
        return _load_plan(Path(study_dir))
    except (ValueError, OSError):
        return None


#: The largest whole number a runs.csv seed or update cell is read as exactly (a float64 holds every integer up to it).
_WHOLE_MAX = 2.0 ** 53


def _checked_identity(df, path: Path, lines, study_dir, plan):
    """``df`` (a ``runs.csv`` read by :func:`load_runs`, its rows on the file's ``lines``, None when unknown) with its
    ``seed`` and ``update`` read as integers, after refusing a row whose cells naming its eval are no eval of a run of
    the study: an ``arm`` that is not one of ``plan``'s arms, a ``seed`` that is not one of its seeds and an
    ``update`` that is no whole number >= 0 (``plan`` None: the frozen plan cannot be read, and a ``seed`` that is no
    whole number >= 0 is refused instead).

    ``gradprobe study`` writes one row per eval of each run (arm, seed) of the frozen plan
    (:func:`gradprobe.study.collect.collect_runs`; a replicate has its own plan, with its own seeds), so such a cell
    is a typo or damage. Read as it is, a seed 1 typed ``1.5`` would be a run of its own (keyed as seed 1, its one
    eval replacing the run's others), and a seed or arm the plan does not run an extra run or arm (ranked as any
    other): each moves the matched points, the rankings and the tests with no word.

    Raises
    ------
    AnalysisError
        One line naming ``path``, each kind of wrong cell with the values allowed and the first rows that hold one
        (line, arm, seed and update: :func:`_rows_named`), and the fix (:func:`restore_runs_csv_fix`).
    """
    import pandas as pd

    seeds = pd.to_numeric(df["seed"], errors="coerce").to_numpy(np.float64)  # text: NaN
    updates = pd.to_numeric(df["update"], errors="coerce").to_numpy(np.float64)
    found = []
    if plan is not None:
        arms = ", ".join(plan.arms)
        found.append((~df["arm"].astype(str).isin(list(plan.arms)).to_numpy(),
                      f"an arm that is not one of the plan's arms ({arms})"))
        found.append((~np.isin(seeds, np.asarray(plan.seeds, dtype=np.float64)),
                      f"a seed that is not one of the plan's seeds ({', '.join(map(str, plan.seeds))})"))
    else:
        found.append((~_whole(seeds), "a seed that is no whole number >= 0"))
    found.append((~_whole(updates), "an update that is no whole number >= 0 (the optimizer updates at that eval)"))
    said = [f"{what} at {_rows_named(df, bad, lines)}" for bad, what in found if bad.any()]
    if said:
        source = f"its frozen plan {path.parent / PLAN_COPY}" if plan is not None else "its frozen plan"
        raise AnalysisError(f"{path} has cells that name no eval of the study's runs: {'; '.join(said)}; runs.csv "
                            f"holds one row per eval of each run (arm x seed) of {source}, so it was edited or "
                            "damaged (read as it is, such a row would be another run's eval or a run of its own, "
                            "moving the matched points, rankings and tests); put the cell back to the run's own arm, "
                            f"seed or update, or {restore_runs_csv_fix(study_dir)}")
    return df.assign(seed=seeds.astype(np.int64), update=updates.astype(np.int64))


def _whole(values) -> np.ndarray:
    """Whether each of ``values`` (float64, NaN for text or a blank cell) is a whole number in [0, 2**53]."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values >= 0) & (values <= _WHOLE_MAX) & (values == np.floor(values))


def _check_some_accuracy(df, path: Path, study_dir) -> None:
    """Refuse a ``runs.csv`` (``df``) with no accuracy on any line (``accuracy`` and ``accuracy_sampled`` blank, NaN
    or text everywhere; every eval records one of them): an :class:`AnalysisError` naming ``path`` and the fix."""
    import pandas as pd

    if all(pd.to_numeric(df[c], errors="coerce").isna().all() for c in ("accuracy", "accuracy_sampled")):
        raise AnalysisError(f"{path}: no eval records an accuracy (the accuracy and accuracy_sampled columns are "
                            f"blank or NaN on every line; every eval records one of them): runs.csv was edited or "
                            f"damaged; {restore_runs_csv_fix(study_dir)}")


def _sorted_runs(df, lines_known: bool, study_dir):
    """``df`` with the optional columns it lacks added empty (``flops``, :data:`SIDE_EFFECTS`), ``arm`` as text,
    sorted by arm, seed and update (stable) on a 0..n-1 index; ``attrs``: ``csv_lines`` (each row's line in the
    file, from the old index, when ``lines_known``; else None) and ``study_dir``."""
    for c in ("flops", *SIDE_EFFECTS):
        if c not in df.columns:
            df[c] = np.nan
    df["arm"] = df["arm"].astype(str)
    df = df.sort_values(["arm", "seed", "update"], kind="stable")
    lines = [int(i) for i in df.index] if lines_known else None
    df = df.reset_index(drop=True)
    df.attrs.update(csv_lines=lines, study_dir=str(study_dir))
    return df


def _blank_accuracy_at_cuts(df, cut: set[int], path: Path, study_dir) -> None:
    """Blank, in place, ``accuracy`` and ``accuracy_sampled`` of ``df``'s rows on the lines ``cut`` (a value on
    a cut line may itself be cut), then warn once about the other rows with a blank accuracy cell."""
    lines = df.attrs.get("csv_lines")
    at_cut = np.isin(lines, sorted(cut)) if lines is not None else np.zeros(len(df), dtype=bool)
    df.loc[at_cut, ["accuracy", "accuracy_sampled"]] = np.nan
    blank = blank_cells(df, "accuracy", ~at_cut if at_cut.any() else None)  # cut lines: named by their own warning
    if blank is not None:
        n = int((df["accuracy"].isna().to_numpy() & ~at_cut).sum())
        warnings.warn(f"{path}: {n} eval(s) have a blank accuracy cell ({blank}): the analysis reads those runs "
                      "without these evals (a value between their neighbours is interpolated only within the plan's "
                      "promised eval gap; a run without its update-0 accuracy has no initial read, and one without "
                      "its final eval's accuracy no read at a budget read at the runs' final evals); every eval "
                      f"records its accuracy, so runs.csv was edited or damaged; {restore_runs_csv_fix(study_dir)}",
                      stacklevel=3)


def _read_each_eval_once(df, path: Path, lines, study_dir):
    """``df`` without the rows that copy an earlier row exactly (warned); refuses an eval recorded twice with
    different values (:func:`gradprobe.forecast.csv_cells.repeated_rows`)."""
    conflicts, exact = repeated_rows(df, ("arm", "seed", "update"), lines)
    if conflicts:
        raise AnalysisError(f"{path} records the same eval (arm, seed, update) twice with different values: "
                            f"{'; '.join(conflicts)}; runs.csv was edited or damaged and which line is right cannot "
                            f"be told; {restore_runs_csv_fix(study_dir)}")
    if exact.any():
        where = ", ".join(f"line {lines[i]}" for i in np.flatnonzero(exact)[:_SHOWN]) if lines is not None else ""
        warnings.warn(f"{path}: {int(exact.sum())} line(s) copy an earlier line exactly ({where or 'lines unknown'}): "
                      f"each eval is read once; {restore_runs_csv_fix(study_dir)}", stacklevel=3)
        df = df[~exact]
    return df


def _check_fractions(df, path: Path, lines, study_dir) -> None:
    """Refuse an ``accuracy`` or ``accuracy_sampled`` value outside [0, 1]: runs.csv records fractions (reports
    print points, 100 x), so 78.4 is a value in points or a damaged cell, and would be read as 7840 points."""
    import pandas as pd

    for col in ("accuracy", "accuracy_sampled"):
        if col not in df.columns:
            continue
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)  # text cells are refused elsewhere
        bad = ~np.isnan(values) & ((values < 0) | (values > 1))  # inf too; a blank (NaN) cell is a skipped eval
        if bad.any():
            raise AnalysisError(f"{path}: {col} must be a fraction in [0, 1] (runs.csv records fractions; reports "
                                f"print points), got {values[bad][0]:g} at {_rows_named(df, bad, lines)}; "
                                f"{restore_runs_csv_fix(study_dir)}")


def _check_costs(df, path: Path, lines, study_dir) -> None:
    """Refuse a ``generated_tokens``, ``device_seconds`` or ``flops`` value that is infinite or negative: each is the
    cost charged by that eval (:func:`gradprobe.study.collect.collect_runs`), which the matched-compute reads
    (budgets, tokens per update) take as it is. A blank cell is left to :func:`recorded_axes` (the analysis then
    compares at updates and says why)."""
    import pandas as pd

    for col in ("generated_tokens", "device_seconds", "flops"):
        if col not in df.columns:
            continue
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)  # text cells are refused elsewhere
        bad = np.isinf(values) | (values < 0)
        if bad.any():
            raise AnalysisError(f"{path}: {col} must be a finite number >= 0 (the {_COST_UNITS[col]} charged up to "
                                f"that eval), got {values[bad][0]:g} at {_rows_named(df, bad, lines)}; "
                                f"{restore_runs_csv_fix(study_dir)}")


_COST_UNITS = {"generated_tokens": "generated tokens", "device_seconds": "training device-seconds",
               "flops": "FLOPs"}


#: runs.csv columns each eval records as its run's running total up to that eval (the budgets the analysis matches
#: at): along a run's evals, ordered by ``update`` (the fourth budget, the order itself), they never decrease.
RUNNING_TOTALS = ("generated_tokens", "device_seconds", "flops")


def running_total_decreases(df, lines=None, cut=()) -> list[str]:
    """Where a run's running totals (:data:`RUNNING_TOTALS`) decrease from one eval to its next, each as
    ``"generated_tokens 205437 at line 42 (arm A, seed S, update 8), then 25635 at line 43 (arm A, seed S, update
    10)"`` (values as ``%.10g``; a line in ``cut``: followed by ``" (a cut line: its value may be cut too)"``); []
    when none.

    Parameters
    ----------
    df : pandas.DataFrame, rows = evals
        ``runs.csv`` as read (columns ``arm``, ``seed``, ``update`` and those of :data:`RUNNING_TOTALS` it has).
    lines : list of int, optional
        Each row's line in the file (named); None: the rows are named without it.
    cut : set of int
        Lines that look cut (:func:`_warn_short_lines`).

    Blank cells are skipped (each value is compared with the run's previous value in that column), and so are rows
    whose update is no number (refused elsewhere). Each eval records what its run spent up to it
    (:func:`gradprobe.training.records.maybe_eval`: ``generated_tokens``, ``device_seconds`` and ``flops`` of
    ``spent()``), so a decrease is a damaged cell; which of the two cannot be told: both are named.
    """
    import pandas as pd

    updates = pd.to_numeric(df["update"], errors="coerce").to_numpy(np.float64)
    found = []
    for col in (c for c in RUNNING_TOTALS if c in df.columns):
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)
        for idx in df.groupby(["arm", "seed"], sort=False).indices.values():
            idx = idx[~np.isnan(values[idx]) & ~np.isnan(updates[idx])]
            idx = idx[np.argsort(updates[idx], kind="stable")]
            for a, b in zip(idx[:-1], idx[1:]):
                if values[b] < values[a]:
                    found.append(f"{col} {_said_value(df, lines, cut, values, a)}, then "
                                 f"{_said_value(df, lines, cut, values, b)}")
    return found


def _said_value(df, lines, cut, values, i: int) -> str:
    """``"256359 at line 43 (arm A, seed S, update U)"`` for row ``i`` of ``df`` (:func:`running_total_decreases`)."""
    on_cut = lines is not None and lines[i] in cut
    return (f"{values[i]:.10g} at {_rows_named(df, np.arange(len(df)) == i, lines)}"
            f"{' (a cut line: its value may be cut too)' if on_cut else ''}")


def _check_running_totals(df, path: Path, cut, study_dir) -> None:
    """Refuse a ``runs.csv`` (``df``, sorted by arm, seed and update, :func:`_sorted_runs`) where a run's
    ``generated_tokens``, ``device_seconds`` or ``flops`` decreases from one eval to its next
    (:func:`running_total_decreases`; ``cut``: the lines that look cut). Read as it is, one such typo moves a run's
    final value, hence every arm's matched point (a final 256359 typed 25635 read every arm at 25,635 tokens, blaming
    "a run stopped on another budget"), or a read between evals.

    Raises
    ------
    AnalysisError
        One line naming ``path``, the first few decreases (column, both values, their lines, arm, seed and update)
        and the fix (:func:`restore_runs_csv_fix`).
    """
    found = running_total_decreases(df, df.attrs.get("csv_lines"), cut)
    if found:
        more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        raise AnalysisError(f"{path}: a run's running total decreases from one eval to the next: "
                            f"{'; '.join(found[:_SHOWN])}{more}; each eval records the generated tokens, training "
                            "device-seconds and FLOPs its run spent up to it, so along a run's evals (by update) none "
                            "decreases: runs.csv was edited or damaged (one of the two cells is wrong, which cannot be "
                            "told, and read as it is it would move the run's reads and the matched budgets); "
                            f"{restore_runs_csv_fix(study_dir)}")


def _warn_short_lines(path: Path, raw: bytes, study_dir) -> set[int]:
    """One UserWarning naming the lines of ``path`` (a CSV whose bytes are ``raw``) that look cut
    (:func:`gradprobe.forecast.csv_cells.cut_lines`: fewer fields than the header, or the last line of a file
    without a final line break), if any; returns their line numbers (:func:`load_runs` blanks their accuracy
    cells, as :meth:`gradprobe.forecast.ReferenceCurve.from_study` leaves them out)."""
    _, cut = cut_lines(raw)
    if cut:
        warnings.warn(f"{path}: {name_short_lines(cut)} look(s) cut: the file was cut or edited, missing cells are "
                      "read as blank, and a value at a cut may itself be cut, so their accuracy cells are read as "
                      "blank too (the analysis reads those runs without these evals); "
                      f"{restore_runs_csv_fix(study_dir)}", stacklevel=3)
    return {line for line, _ in cut}


# ----------------------------------------------------------------------------- lines lost from runs.csv

def lost_eval_lines(df, study_dir: str | Path, path: str | Path | None = None, *, cut_run=None,
                    item_lines=None) -> str | None:
    """What a ``runs.csv`` lost of its eval lines (deleted whole, they read as runs with fewer evals), or None.

    Each run (arm, seed) of ``df`` must hold a line for every eval its study records elsewhere:

    - update 0 and each ``[eval] at_updates`` update (and each ``at_fractions`` point of a ``[budget] updates``,
      at the first update reaching it) up to the run's last eval: a run evaluates there whatever it spends
      (:func:`gradprobe.training.records.maybe_eval`), and stops only after its last eval, so an update of the
      plan's list below that eval with no line was deleted (the frozen ``plan.toml``; skipped without one);
    - its final eval, at the update ``study.json`` records for a finished run (``updates``): the run's last
      line is that eval, so lines lost at the end are caught too;
    - every eval the per-item results record for that same run (``eval_items.jsonl.gz``, else the run folders'
      ``eval_items.jsonl``; written at the same evals, and skipped for a run whose shared evals differ in
      ``generated_tokens``, i.e. from another training of it). Evals at a budget fraction or every
      ``[eval] every_tokens`` depend on each run's spend, so only these files tell them.

    Runs ``df`` does not hold are :func:`gradprobe.study.coverage.missing_runs`'s business, not this one's.

    Parameters
    ----------
    df : pandas.DataFrame
        ``runs.csv`` as read (columns ``arm``, ``seed``, ``update``, ``generated_tokens``).
    study_dir : str or Path
        The study folder (its ``plan.toml``, ``study.json`` and per-item results are read; any missing or
        unreadable one is left out of the check).
    path : str or Path, optional
        The file named in the message (default ``study_dir/runs.csv``).
    item_lines : list of dict, optional
        The per-item result lines already read (:func:`_item_lines`); None: read here.
    cut_run : (str, int), optional
        The run (arm, seed) of the file's last line when the file looks cut (:func:`_warn_short_lines`, warned
        already). Checked like any run: only the cut line's own cells are unknown, not where the run ends, so an
        update ``study.json`` or the per-item results record after that line is a lost end (the lines after the
        cut went with it; a file cut there would read the run as ending earlier); the message says so for it.

    Returns
    -------
    str or None
        One line, ``"PATH lost eval lines: arm A, seed S lacks update(s) U (source), ... (why each source expects
        them): lines were deleted from runs.csv"``, the first few runs named and the rest counted, without the fix
        (:func:`restore_runs_csv_fix`), which the caller adds with what it does (:func:`load_runs` refuses a run's
        lost final eval and warns about the others, ``calib report`` refuses any); None when nothing is missing.
    """
    path = Path(path) if path is not None else Path(study_dir) / "runs.csv"
    lost, items_file = _lost_by_run(df, study_dir, item_lines)
    if not lost:
        return None
    return _lost_text(path, lost, items_file, cut_run)


_CUT_OFF = ", its later lines gone with the file's cut last line (this run's)"
_UNREAD = object()  # a plan argument not given: the function reads the frozen plan itself


def _lost_text(path: Path, lost: dict, items_file: str, cut_run=None) -> str:
    """:func:`lost_eval_lines`' line for ``lost`` and ``items_file`` (:func:`_lost_by_run`, ``lost`` not empty);
    ``cut_run``'s lost updates after its last line are said to have gone with the cut."""
    said = [f"arm {arm}, seed {seed} lacks update(s) {_said_updates(why)}"
            f"{_CUT_OFF if (arm, seed) == cut_run and max(why) > last else ''}"
            for (arm, seed), (last, why) in lost.items()]
    return (f"{path} lost eval lines: {_first_runs(said)} ({_legend(lost, items_file)}): lines were "
            f"{_gone(lost, cut_run)} runs.csv")


def _gone(lost: dict, cut_run) -> str:
    """How ``lost``'s lines (:func:`_lost_by_run`) left runs.csv: "deleted from", or "deleted from or cut off the end
    of" when ``cut_run`` lost updates after its last line."""
    last, why = lost.get(cut_run, (math.inf, {}))
    return "deleted from or cut off the end of" if why and max(why) > last else "deleted from"


def _lost_by_run(df, study_dir, item_lines, plan=_UNREAD) -> tuple[dict, str]:
    """(arm, seed) -> (the last update ``df`` holds for the run, {lost update: the source expecting it ("plan",
    "study.json" or the per-item file's name)}) for each run of ``df`` that lost eval lines, in ``df``'s run order;
    and the per-item file's name. The rules and ``item_lines``: :func:`lost_eval_lines` (a cut last line's run is
    checked as any other: its end after the cut line is lost, the cut line's own update being in ``df``). ``plan``: the
    frozen plan already read (:func:`_readable_plan`; None: none readable); by default read here."""
    d = Path(study_dir)
    runs = _csv_run_evals(df)
    if not runs:
        return {}, EVAL_ITEMS_GZ
    plan = _readable_plan(d) if plan is _UNREAD else plan
    promised, finals, (items, items_file) = _plan_eval_updates(plan), _final_updates(d), _item_evals(d, item_lines)
    lost = {}
    for (arm, seed), evals in runs.items():
        last = max(evals)
        why = {u: "plan" for u in promised if u <= last and u not in evals}
        if _same_training(evals, items.get((arm, seed), {})):
            why |= {u: items_file for u in items[(arm, seed)] if u not in evals and u not in why}
        if finals.get((arm, seed), -1) > last:
            why[finals[(arm, seed)]] = "study.json"
        if why:
            lost[(arm, seed)] = (last, why)
    return lost, items_file


def _first_runs(said: list[str]) -> str:
    """The first :data:`_SHOWN_RUNS` of ``said`` (one text per run) joined by "; ", the rest counted."""
    more = f" and {len(said) - _SHOWN_RUNS} more run(s)" if len(said) > _SHOWN_RUNS else ""
    return "; ".join(said[:_SHOWN_RUNS]) + more


def _legend(lost: dict, items_file: str) -> str:
    """Why each source named in ``lost`` (:func:`_lost_by_run`) expects its updates, "; "-joined."""
    used = {k for _, why in lost.values() for k in why.values()}
    legend = {"plan": "every run evaluates at update 0, at the plan's [eval] at_updates and, under a [budget] "
                      "updates, at its at_fractions, up to its last eval",
              items_file: "the per-item results, written at every eval, record an eval of the run there",
              "study.json": "a finished run's final eval is at the update study.json records"}
    return "; ".join(f"{k}: {v}" for k, v in legend.items() if k in used)


def cut_tail_run(raw: bytes):
    """The run (arm, seed) of a runs.csv's last line when it looks cut (:func:`gradprobe.forecast.csv_cells.cut_lines`;
    read from the line's own ``arm`` and ``seed`` fields), else None: that run's evals after its last line may have
    gone with the cut, which :func:`lost_eval_lines` (``cut_run``) then says, refused by the analysis as a lost end;
    a cut line elsewhere leaves the file's end whole.

    Parameters
    ----------
    raw : bytes
        The file as read.
    """
    import csv

    _, cut = cut_lines(raw)
    lines = [(n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
    if len(lines) < 2 or lines[-1][0] not in {line for line, _ in cut}:
        return None
    try:
        header, fields = (next(csv.reader([text.decode("utf-8")])) for _, text in (lines[0], lines[-1]))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None
    if not {"arm", "seed"} <= set(header) or max(header.index("arm"), header.index("seed")) >= len(fields):
        return None
    return _run_key(fields[header.index("arm")], fields[header.index("seed")])


def _check_lost_lines(df, study_dir, path: Path, cut_run, item_lines=None, plan=_UNREAD) -> None:
    """Refuse a ``runs.csv`` (``df``) whose run lost its final eval line, else warn once when it lost other eval
    lines (:func:`lost_eval_lines`; ``cut_run``: the run of a cut last line, :func:`cut_tail_run`; ``plan``: the frozen
    plan already read, as :func:`_lost_by_run` takes it).

    A lost final eval (an update ``study.json`` or the run's per-item results record after the run's last line) leaves
    the run's end unknown: read as it is, the run would end at its last line left, moving its last read and the
    matched budgets earlier, with a reason blaming another budget. A file cut off after a line (its last line cut,
    the lines after it gone: the commonest damage) is such a loss for the cut line's run: only the cut line's own
    cells are unknown, not where the run ends, so it is refused too, the message saying those lines went with the
    cut (the cut line's own update is read, so it is no lost update). Lost evals before a run's last line are a warning,
    as for a cut line: the analysis reads those runs with the evals left (a read across a lost eval is refused, being
    wider than the promised gap).

    Raises
    ------
    AnalysisError
        A run lost its final eval: one line naming ``path``, each such run (arm, seed), its last update left and the
        missing update(s) with their source (for a cut last line's run, that they went with the cut), and the fix
        (:func:`restore_runs_csv_fix`).
    """
    lost, items_file = _lost_by_run(df, study_dir, item_lines, plan)
    ended = {key: (last, {u: k for u, k in why.items() if u > last}) for key, (last, why) in lost.items()}
    ended = {key: v for key, v in ended.items() if v[1]}
    if ended:
        said = [f"arm {arm}, seed {seed} ends at update {last:g} but lacks update(s) {_said_updates(why)} after it"
                f"{_CUT_OFF if (arm, seed) == cut_run else ''}" for (arm, seed), (last, why) in ended.items()]
        raise AnalysisError(f"{path} lost the final eval line(s) of run(s): {_first_runs(said)} "
                            f"({_legend(ended, items_file)}): lines were {_gone(ended, cut_run)} runs.csv, so where "
                            "these runs end is unknown (read as they are, they would end at their last line left, "
                            "moving their last reads and the matched budgets earlier); the analysis refuses to guess; "
                            f"{restore_runs_csv_fix(study_dir)}")
    if lost:
        warnings.warn(f"{_lost_text(path, lost, items_file, cut_run)}, so the analysis reads these runs with fewer "
                      "evals (a read across a lost eval is refused, being wider than the promised eval gap); "
                      f"{restore_runs_csv_fix(study_dir)}", stacklevel=3)


_SHOWN_RUNS = 3  # runs named by lost_eval_lines; the rest are counted


def _said_updates(why: dict) -> str:
    """The missing updates of one run (update -> the source that expects it), as ``2, 10 (plan), 57 (study.json)``:
    grouped by source, in the order the sources first appear by update."""
    by: dict = {}
    for u in sorted(why):
        by.setdefault(why[u], []).append(u)
    return ", ".join(f"{', '.join(f'{u:g}' for u in ups)} ({key})" for key, ups in by.items())


def _plan_eval_updates(plan) -> list[float]:
    """The updates at which every run of the study's frozen plan (``plan``, :func:`_readable_plan`) evaluates, whatever
    it spends: 0, ``[eval] at_updates`` and, with a ``[budget] updates``, the first update reaching each
    ``at_fractions`` point of it; [] for ``plan`` None (no readable ``plan.toml``: the analysis reports that itself)."""
    if plan is None:
        return []
    pts = {0.0, *(float(u) for u in plan.eval.at_updates)}
    if plan.budget.updates is not None:
        # training's own rule (gradprobe.training.state.crossed_eval_points): the first update u with
        # u >= f * limit, the product as Python computes it (0.55 * 100 = 55.00000000000001: update 56)
        pts |= {float(math.ceil(f * plan.budget.updates)) for f in plan.eval.at_fractions}
    return sorted(pts)


def _final_updates(study_dir: Path) -> dict:
    """(arm, seed) -> the update of the final eval of each finished run ``study.json`` records (its ``updates``);
    {} without a readable ``study.json``."""
    try:
        record = json.loads((study_dir / "study.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for r in (record.get("runs") if isinstance(record, dict) else None) or []:
        if isinstance(r, dict) and r.get("status") == "done" and type(r.get("updates")) is int and \
                isinstance(r.get("arm"), str) and type(r.get("seed")) is int:
            out[(r["arm"], r["seed"])] = float(r["updates"])
    return out


def _item_evals(study_dir: Path, lines=None) -> tuple[dict, str]:
    """:func:`gradprobe.forecast.study_items.item_evals` of ``lines``, read here (:func:`read_item_lines`) when None."""
    return item_evals(study_dir, read_item_lines(study_dir) if lines is None else lines)


def read_item_lines(study_dir) -> list[dict]:
    """The study's per-item result lines (:func:`_item_lines`) for the checks of ``runs.csv`` against them; [] when
    there are none or they cannot be read (the analysis refuses a damaged ``eval_items.jsonl.gz`` itself)."""
    try:
        return _item_lines(Path(study_dir)) or []
    except (AnalysisError, OSError, ValueError, KeyError):
        return []


def _item_lines(study_dir: Path) -> list[dict] | None:
    """Lines of ``eval_items.jsonl.gz`` (arm and seed on each), else of every run's
    ``runs/ARM/seedS/eval_items.jsonl`` (arm and seed from the path); None when there are none
    (:func:`gradprobe.forecast.study_items.item_lines`).

    Raises
    ------
    AnalysisError
        ``eval_items.jsonl.gz`` or a run's ``eval_items.jsonl`` is cut, not gzip or not JSON lines, or holds a
        line that is no JSON object (the message names the file and the fix).
    """
    try:
        return item_lines(study_dir)
    except ItemsFileError as e:
        raise AnalysisError(str(e)) from None


def load_eval_items(study_dir: str | Path):
    """Per-item eval results of a study, one row per (run, eval, mode, sample, item).

    Returns
    -------
    pandas.DataFrame
        Columns arm, seed, update, generated_tokens, flops, device_seconds, mode ("greedy" or
        "sampled"), sample (0 for greedy), item (held-out index), correct (0/1). Empty (those
        columns) when the study saved no per-item results.
    """
    import pandas as pd

    cols = ["arm", "seed", "update", "generated_tokens", "flops", "device_seconds", "mode", "sample", "item", "correct"]
    frames = []
    for e in _item_lines(Path(study_dir)) or []:
        strings = ([("greedy", 0, e["greedy"])] if e.get("greedy") else []) + [
            ("sampled", j, s) for j, s in enumerate(e.get("sampled") or [])]
        for mode, j, s in strings:
            c = np.frombuffer(s.encode(), dtype=np.uint8) - ord("0")
            frames.append(pd.DataFrame({**{k: e.get(k) for k in cols[:6]}, "mode": mode, "sample": j,
                                        "item": np.arange(c.size), "correct": c.astype(np.int8)}))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def _item_index(lines) -> dict:
    """(arm, seed, update) -> {"greedy": (items,) 0/1, "sampled": (items,) mean over samples or None}."""
    def vec(s):
        return (np.frombuffer(s.encode(), dtype=np.uint8) - ord("0")).astype(np.float64)

    out = {}
    for e in lines:
        sampled = [vec(s) for s in e.get("sampled") or []]
        out[(str(e["arm"]), int(e["seed"]), int(e["update"]))] = {
            "greedy": vec(e["greedy"]) if e.get("greedy") else None,
            "sampled": np.mean(sampled, axis=0) if sampled else None}
    return out


def _runs(df) -> dict:
    """(arm, seed) -> that run's eval rows, sorted by update."""
    return {(a, int(s)): g.sort_values("update") for (a, s), g in df.groupby(["arm", "seed"], sort=False)}


#: Axis columns every run of this gradprobe writes for every eval: a blank cell among values is damage, not age.
ALWAYS_RECORDED = ("update", "generated_tokens", "device_seconds")


def recorded_axes(df) -> dict:
    """axis -> None if runs.csv records it for every eval, else why not.

    A column with no value at all was not recorded (runs made before it was); blank cells among values of
    a column every run records (:data:`ALWAYS_RECORDED`), or within a run that records the column at its
    other evals, mean an edited or damaged runs.csv, and the reason names those rows (:func:`blank_cells`)
    and how to rebuild the file from the run folders."""
    out = {}
    for a, c in AXIS_COLUMNS.items():
        blank = blank_cells(df, c) if c in ALWAYS_RECORDED else _blank_within_runs(df, c)
        if df[c].notna().all():
            out[a] = None
        elif blank is not None:
            out[a] = (f"runs.csv has blank {c} cells at {blank}: every eval records {c}, so runs.csv was edited or "
                      f"damaged; {restore_runs_csv_fix(df.attrs.get('study_dir'))}, then analyse again to "
                      f"compare at {a}")
        else:
            out[a] = (f"runs.csv has no {c} values{' for some evals' if df[c].notna().any() else ''} (runs made "
                      f"before it was recorded); re-run the study to compare at {a}")
    return out


def _blank_within_runs(df, col: str) -> str | None:
    """The rows of ``df`` (:func:`load_runs`) with a blank ``col`` cell in a run (arm, seed) that records ``col``
    at other evals (a column added in a later version is blank for a whole run, never for one eval), named by
    :func:`blank_cells`; None when none."""
    return blank_cells(df, col, df[col].notna().groupby([df["arm"], df["seed"]]).transform("any").to_numpy())


def _promised(plan, axis: str) -> list[float]:
    return plan.eval.promised_points(plan.budget).get(axis, []) if plan is not None else []


def matched_budgets(df, plan=None) -> dict:
    """The matched point of every axis (module docstring) with its source; token overshoot."""
    runs, out = _runs(df), {}
    for axis, why in recorded_axes(df).items():
        col = AXIS_COLUMNS[axis]
        if why:
            out[axis] = {"budget": None, "recorded": False, "final_eval": False, "source": why}
            continue
        finals = np.array([float(g[col].iloc[-1]) for g in runs.values()])
        limit = getattr(getattr(plan, "budget", None), axis, None)
        if limit is not None and finals.min() >= limit:
            over = finals - limit
            out[axis] = {"budget": float(limit), "recorded": True, "final_eval": True,
                         "source": "plan budget; each run's final eval",
                         "overshoot": {"mean": float(over.mean()), "max": float(over.max()), "min": float(over.min())},
                         "overshoot_fraction_max": float(over.max() / limit)}
            continue
        below = [p for p in _promised(plan, axis) if 0 < p <= finals.min()]
        why = ("the plan sets no such budget" if limit is None else
               f"a run stopped on another budget before {axis} = {limit:g}")
        out[axis] = {"budget": float(max(below)) if below else float(finals.min()), "recorded": True,
                     "final_eval": False,
                     "source": (f"largest promised eval point <= the smallest final {col} ({why})" if below else
                                f"smallest final {col} over all runs ({why})")}
    return out


def read_runs(runs: dict, axis: str, at: float, *, plan=None, final: bool = False,
              metric: str = "greedy_accuracy") -> dict:
    """(arm, seed) -> :func:`read_point` dict plus ``value`` (points or None) for every run.

    ``runs``: :func:`_runs`. Evals with a blank ``metric`` cell are left out (a value between their neighbours is
    interpolated only within the promised gap); a run with none left: status ``"missing"``. ``final``: read each
    run's last eval (the plan budget every run reached), status ``"final"``. A run whose eval at an end of its range
    has a blank ``metric`` cell is not read beyond the evals left: status ``"blank_accuracy"`` (value None) for a
    final read when its last eval's cell is blank (the eval before it is no read at the budget), and for a point
    outside the evals left but within all its evals, where :func:`read_point` says ``"outside"``; so a run without
    its update-0 accuracy has no initial read (:func:`initial_reads`). A read between two evals with an update the
    plan promises every run evaluates at (:func:`_plan_eval_updates`) strictly between them, of which the run has no
    line (a lost eval: :func:`lost_eval_lines` warns of it), is refused as ``"gap_exceeded"`` (value None) whatever
    its width: DESIGN.md, "never read a value across missing evals"."""
    col, mcol = AXIS_COLUMNS[axis], METRIC_COLUMNS[metric]
    gap = promised_gap(_promised(plan, axis), at)
    promised_updates = _plan_eval_updates(plan)
    out = {}
    for key, g in runs.items():
        full, g = g, g[g[mcol].notna()]
        if g.empty or (final and full[mcol].isna().iloc[-1]):
            out[key] = {"status": "missing" if g.empty else "blank_accuracy", "rows": None, "w": None, "gap": None,
                        "allowed": gap, "value": None}
            continue
        if final:
            r = {"status": "final", "rows": (len(g) - 1, len(g) - 1), "w": 0.0, "gap": 0.0, "allowed": gap}
        else:
            r = read_point(g[col].to_numpy(np.float64), g["update"].to_numpy(np.float64), at, gap=gap)
            if r["status"] == "outside" and _within(full[col].to_numpy(np.float64), at):
                r = {**r, "status": "blank_accuracy"}
            elif r["status"] == "interpolated" and _across_lost_eval(g, full, r["rows"], promised_updates):
                r = {**r, "status": "gap_exceeded"}
        y = 100.0 * g[mcol].to_numpy(np.float64)
        v = _combine(y, r)
        ups = g["update"].to_numpy()
        out[key] = {**r, "value": None if v is None else float(v),
                    "updates": None if r["rows"] is None else [int(ups[i]) for i in r["rows"]], "frame": g}
    return out


def _across_lost_eval(g, full, rows: tuple[int, int], promised_updates: list[float]) -> bool:
    """Whether the evals ``rows`` (lo, hi) of ``g`` (the run's evals with a ``metric`` value) bracket an update of
    ``promised_updates`` that no eval line of the run (``full``, blank cells included) holds: a lost eval."""
    ups = g["update"].to_numpy(np.float64)
    lo, hi = float(ups[rows[0]]), float(ups[rows[1]])
    have = set(full["update"].to_numpy(np.float64).tolist())
    return any(lo < u < hi and u not in have for u in promised_updates)


def _within(x, at: float) -> bool:
    """Whether ``at`` lies within [min, max] of the run's eval coordinates ``x`` (shape (evals,), NaN: blank, left
    out), with :func:`read_point`'s tolerance (:func:`_at_tol`)."""
    x = x[~np.isnan(x)]
    tol = _at_tol(at)
    return bool(x.size) and float(x.min()) - tol <= at <= float(x.max()) + tol


def initial_reads(runs: dict, metric: str = "greedy_accuracy") -> dict:
    """(arm, seed) -> the read of the run's eval at update 0 (the initial policy)."""
    out = {}
    for key, g in runs.items():
        g = g[g[METRIC_COLUMNS[metric]].notna()]
        if len(g) and int(g["update"].iloc[0]) == 0:
            out[key] = {"status": "exact", "rows": (0, 0), "w": 0.0, "updates": [0, 0], "frame": g,
                        "value": 100.0 * float(g[METRIC_COLUMNS[metric]].iloc[0])}
    return out


def items_at(index: dict | None, arm: str, seed: int, read: dict, mode: str = "greedy"):
    """Per-item results (items,) of one run at a read (same weights as its value), or None."""
    if index is None or read is None or read.get("value") is None:
        return None
    lo, hi = read["updates"]
    vecs = [(index.get((arm, seed, lo)) or {}).get(mode), (index.get((arm, seed, hi)) or {}).get(mode)]
    return _combine(vecs, {**read, "rows": (0, 1) if lo != hi else (0, 0)})


def _load_plan(study_dir: Path):
    p = study_dir / "plan.toml"  # frozen before the schedule check, maybe: its reads are checked instead
    return load_plan(p, check_schedule=False) if p.exists() else None


def frozen_plan(study_dir: str | Path, record: dict | None = None):
    """The study's frozen ``plan.toml`` (read as :func:`_load_plan` reads it), which the analysis cannot do without.

    ``record``: the study's ``study.json`` content, whose ``plan_path`` and ``plan_sha256`` the refusal names.

    Raises
    ------
    AnalysisError
        ``study_dir/plan.toml`` does not exist: one line naming it, what is lost without it (the plan's budgets,
        so matched points fall back to the runs' smallest final values; the promised eval gaps, so reads between
        evals are refused; the hypotheses) and how to restore it.
    """
    d = Path(study_dir)
    p = d / PLAN_COPY
    if p.exists():
        return _load_plan(d)
    record = record if isinstance(record, dict) else {}
    src, sha = record.get("plan_path"), record.get("plan_sha256")
    which = "the plan file the study ran" + (f" ({src} per study.json, sha256 {sha})" if src and sha else
                                             f" (study.json: sha256 {sha})" if sha else "")
    plan = shell_word(str(src)) if src else "PLAN"  # quoted for a shell (a damaged record's value as text)
    rerun = (f", or run `gradprobe study {plan} --out {shell_word(d)}`, which writes it back when that plan has the "
             "frozen sha256 (finished runs are not redone)") if keeps_runs(d) else ""
    raise AnalysisError(f"{p} does not exist: the analysis needs the study's frozen plan (without it the budgets, "
                        "the promised eval gaps and the hypotheses are lost: matched points fall back to the runs' "
                        f"smallest final values and reads between evals are refused); restore it: copy {which} to "
                        f"{p}{rerun}, or restore the study folder from a copy")


def finished_study(path, *, key: str) -> Path:
    """``path`` as the folder of a finished study, else :class:`AnalysisError` naming ``key``.

    Finished: a folder with ``plan.toml``, ``runs.csv`` and a ``study.json`` whose ``finished``
    is set (:func:`gradprobe.study.runner.run_study` sets it when every run completed)."""
    p = Path(path)
    fix = "give the folder of a study that `gradprobe study PLAN --out DIR` ran to the end"
    if not p.is_dir():
        raise AnalysisError(f"{key}: {str(p)!r} is not a folder; {fix}")
    missing = [f for f in ("plan.toml", "runs.csv", "study.json") if not (p / f).is_file()]
    if missing:
        raise AnalysisError(f"{key}: {str(p)!r} is not a finished study (no {', '.join(missing)}); {fix}")
    try:
        finished = json.loads((p / "study.json").read_text()).get("finished")
    except (OSError, json.JSONDecodeError) as e:
        raise AnalysisError(f"{key}: {p / 'study.json'} cannot be read ({e}); {fix}") from None
    if not finished:
        raise AnalysisError(f"{key}: {str(p)!r} is not a finished study (study.json has no 'finished': a run failed or "
                            f"is unfinished); finish it by re-running its `gradprobe study` command, or {fix}")
    return p
