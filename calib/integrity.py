"""Checks on what calibration reads: a rows CSV's cells, infinite forecasts, a study's analysis.json
against its runs.csv, and the same training run read from two studies.

:mod:`calib.dataset` calls these; its exceptions live here (re-exported there) so this module needs
nothing from it. Every error is a ``ValueError`` (``calib``'s command line prints it on one line,
exit status 2) naming the file, the column and line or the study, arm and seed, and the fix.

Rules
-----
Rows CSV (:func:`read_rows_csv`)
    UTF-8 text, comma-separated (:func:`_check_comma_separated`), with a header line, ending with a line break
    (``calib rows`` ends every line with one: a file without it was cut short, maybe inside its last cell, e.g. a
    target ``-2.6000000000000085`` cut to ``-2.``, which reads as a valid -2.0); every numeric column
    (:data:`NUMERIC`) holds numbers or empty/NaN cells (only an empty cell, or ``nan``, is missing: pandas'
    default NA words such as ``n/a`` or ``NA`` are refused as non-numbers, like any text); the run's names
    (:data:`IDENTITY`) are never empty;
    ``is_reference`` and ``paired`` hold True/False; a forecast, ``realized`` or ``target``
    (:data:`FINITE`) is never infinite: NaN (an empty cell) means "no forecast" / "no accuracy", an
    infinity is bad data.
analysis.json vs runs.csv (:func:`check_analysis_matches_runs`)
    The same arms, per arm as many seeds (``arms.ARM.seeds``: runs.csv's distinct seeds of that arm
    when the analysis was made) and no seed read that runs.csv no longer holds; the plan sha256 of
    analysis.json and study.json agree; each run's accuracy analysis.json reads at every matched point
    (``arms.ARM.AXIS.per_seed``, calibration's realized accuracy among them) and at update 0 is what runs.csv
    gives there now, read by the analysis's rule (:func:`gradprobe.study.coverage.changed_reads`, within 1e-6
    points; a blank accuracy cell skips only the reads it could have changed; a runs.csv re-saved with 6 or more
    significant digits reads as the same file); each arm's update-0 mean is its sigmoid's recorded ``R0``, and its
    sigmoid refitted to its evals now has the recorded ``n_points`` and ``rmse`` (an edit of an eval no read uses:
    :func:`gradprobe.forecast.analysis_reads.analysis_differences`); each arm's mean accuracy in analysis.json lies
    within the accuracies runs.csv records for that arm (x 100, +- :data:`ROUNDING`). Otherwise runs.csv (or the
    plan) changed after the analysis.
runs.csv vs per-item results (:func:`read_study_runs`)
    Each ``accuracy`` (``accuracy_sampled``) is the mean of its eval's greedy (sampled) per-item results where both
    are recorded (:func:`gradprobe.forecast.study_items.item_accuracy_mismatches`, the analysis's own check).
The same run twice (:func:`duplicate_runs`, :func:`check_duplicate_runs`)
    Two rows of different studies are one run read twice when they share the model, task, reward,
    loss type, probe entry, lr_scale, seed and token budget, have the same realized accuracy there,
    and their runs.csv curves (generated tokens and accuracy per update) agree at every update both
    record, with at least one common update after update 0. A study all of whose runs are read from
    the other studies given (``data/study_tiny_granularity`` beside ``data/study_reward_granularity``)
    is refused: it adds no run, counts each twice and leaks into the fold that holds the other study
    out. Other shared runs get one :class:`DuplicateRunsWarning`: deterministic retraining gives them,
    and the shipped calibration reads such copies of ``grpo`` (left out of fits by default) and
    ``grpo_2xlr`` (forecast by the first-order extrapolation only).
Paired targets (:func:`check_paired_targets`)
    A row with ``paired`` True and a finite ``target`` is a run whose seed the reference arm (``grpo``,
    ``is_reference`` True) also ran in its study: its target is its ``realized`` accuracy minus that
    reference run's, within :data:`PAIRED_ATOL` points (``calib rows`` computes it so; the reference's
    own rows are 0). A row that disagrees was edited or damaged and is refused.
Reference rows (:func:`check_reference_rows`)
    ``is_reference`` is True exactly on the rows of the arm named ``grpo``, and every study with a realized gain has
    such rows; an arm of forecast 0 and gain exactly 0 on every row beside them is warned of (grpo renamed?).
One row per run (:func:`check_one_row_per_run`)
    Within one rows table, two rows of the same (study, arm, seed) are one run given twice (a rows
    file passed twice, two files sharing a study): refused, since it would count double in the fit,
    its conformal folds and the reported run count.

A rows table read from a CSV keeps each run's file and line in ``DataFrame.attrs[ROW_PLACES]``
(:func:`read_rows_csv`, :func:`concat_rows`), so the checks that run later, on the table, name the line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from gradprobe.forecast.analysis_reads import as_analysed
from gradprobe.forecast.csv_cells import cut_lines, name_short_lines, short_lines, unterminated_line
from gradprobe.forecast.study import rebuild_analysis
from gradprobe.layout import ANALYSIS_JSON, RUNS_CSV, STUDY_JSON, rerun_advice
from gradprobe.outputs import is_json_number, json_number_text, json_short
from gradprobe.study.coverage import CHANGED_READS, csv_seeds, stale_analysis
from gradprobe.study.reading import (cut_tail_run, item_accuracy_mismatches, lost_eval_lines, read_item_lines,
                                    restore_runs_csv_fix)

FORECAST_NAMES = ("forecast_probe", "forecast_cost_only", "forecast_signal_proxy", "forecast_first_order")
NUMERIC = ("seed", "budget_value", "lr_scale", "rho", "snr", "tokens_per_update", "token_multiplier") \
    + FORECAST_NAMES + ("realized", "target")
"""Columns of a rows CSV that must hold numbers (empty/NaN allowed)."""
FINITE = FORECAST_NAMES + ("realized", "target")
"""Columns where an infinity is refused (NaN is "none": no forecast, no realized accuracy)."""
POINT_RANGES = {"realized": (0.0, 100.0, "an accuracy"), "target": (-100.0, 100.0, "a gain vs grpo"),
                "forecast_probe": (-100.0, 100.0, "a forecast gain vs grpo"),
                "forecast_cost_only": (-100.0, 100.0, "a forecast gain vs grpo"),
                "forecast_signal_proxy": (-100.0, 100.0, "a forecast gain vs grpo")}
"""Columns in accuracy points and their possible range. The three forecasts read on a reference curve saturate
like an accuracy; the raw first order (``forecast_first_order``) does not (the shipped rows reach 187 points), so
it only has the loose bound :data:`RAW_BOUND`."""
RAW_BOUND = 1e6
"""|forecast_first_order| above this is bad data (an overflowed or edited cell), not an overshoot: refused."""
BOOLEAN = ("is_reference", "paired")
REANALYZE = "gradprobe study --analyze-only --overwrite-analysis --out {}"
_SEED = re.compile(r"\s*\+?\d{1,18}\s*")
"""A runs.csv seed cell: a whole number >= 0 (``gradprobe study`` writes ``0``, ``1``...)."""
_REBUILD = "or rebuild the file with `calib rows STUDY_DIR... --out {}`"
ROUNDING = 0.05
"""Points an analysis.json accuracy may lie outside its arm's runs.csv range (runs.csv may hold rounded fractions)."""
PAIRED_ATOL = 1e-6
"""A paired target may differ from realized minus the reference run's realized by this many points (rounding)."""
ROW_PLACES = "row_places"
"""``DataFrame.attrs`` key of a rows table read from CSV: {(study, arm, seed) as str: ``"FILE, line N"``}."""
_RUN_KEY = ("model", "task", "reward", "loss_type", "probe_entry", "lr_scale", "seed", "budget_value")


class StudyFormatError(ValueError):
    """A study folder lacks a file or field that calibration needs (the message names it and the fix)."""


class RowsError(ValueError):
    """A rows table cannot be calibrated on (missing columns, a single arm, a bad cell, ...)."""


class DuplicateRunsWarning(UserWarning):
    """The same training run is read from two studies given together (it counts twice)."""


class ReferenceLikeArmWarning(UserWarning):
    """An arm not marked ``is_reference`` whose every row has forecast 0 and target exactly 0, as the reference
    arm's own rows have (:func:`check_reference_rows`)."""


def read_rows_csv(path: Path) -> pd.DataFrame:
    """Read and check a rows CSV (the file exists).

    Returns
    -------
    DataFrame
        Numeric columns as floats/ints, ``is_reference``/``paired`` as bools; blank lines dropped.

    Raises
    ------
    RowsError
        An empty, non-UTF-8 or unparseable file (named), a JSON document (:func:`_check_not_json`), a file cut
        short (it does not end with a line break: the last line's number is named), a header naming a column twice
        or a line with more or fewer cells than the header (:func:`_check_fields`), or a bad cell: its column, line
        number (1 = the header) and value, with the fix. Bad cells: a non-number in a numeric column, an infinite
        forecast, accuracy or gain, a value outside :data:`POINT_RANGES` (or beyond :data:`RAW_BOUND` for the raw
        first order), a ``budget_value`` that is not a finite number > 0, a flag that is not True/False.
    """
    raw = Path(path).read_bytes()  # read once: the table and the cut check come from the same bytes
    _check_not_json(path, raw)
    try:
        # only an empty cell is missing: pandas' default NA words ("n/a", "NA", "null"...) would hide a typed
        # word as a run without a forecast or accuracy; they are refused as non-numbers (``_numeric``) instead
        df = pd.read_csv(io.BytesIO(raw), skip_blank_lines=False, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise RowsError(f"{path} is empty (no header line); write the rows with `calib rows STUDY_DIR... "
                        f"--out {path}`") from None
    except UnicodeDecodeError as e:
        raise RowsError(f"{path} is not a UTF-8 text CSV (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                        f"pass the rows CSV that `calib rows STUDY_DIR... --out ROWS.csv` writes") from None
    except pd.errors.ParserError as e:
        _check_complete(path, raw)  # a cut inside a quoted cell: say the file was cut, not just "EOF inside string"
        _check_comma_separated(path, raw, pd.DataFrame())
        _check_fields(path, raw)
        raise RowsError(f"{path} is not a valid CSV ({str(e).strip().splitlines()[0]}); "
                        + _REBUILD.format(path)) from None
    _check_complete(path, raw)
    _check_comma_separated(path, raw, df)
    _check_fields(path, raw)
    df.index = df.index + 2  # the line number of each row (line 1 is the header)
    df = df[~df.isna().all(axis=1)]
    _check_identity_cells(df, path)
    for col in (c for c in NUMERIC if c in df.columns):
        df[col] = _numeric(df[col], path, col)
    for col in (c for c in BOOLEAN if c in df.columns):
        df[col] = _boolean(df[col], path, col)
    places = {}
    if {"study", "arm", "seed"} <= set(df.columns):
        places = {_run_key(*key): f"{path}, line {line}" for line, key in zip(df.index, zip(
            df["study"], df["arm"], df["seed"]))}
    df = df.reset_index(drop=True)
    df.attrs[ROW_PLACES] = places
    return df


IDENTITY = ("study", "model", "task", "arm", "seed", "budget", "reward")
"""Columns of a rows CSV that name a run (``reward``: where the rows have that column): never empty. A blank one
would fit a run of no study, arm or seed (a blank ``reward`` dropped the rewards from the calibration's domain)."""
_SEPARATORS = {";": "semicolons", "\t": "tabs"}


def _check_comma_separated(path: Path, raw: bytes, df: pd.DataFrame) -> None:
    """Refuse a rows CSV (``path``, its bytes ``raw``, read as ``df``) whose header is separated by semicolons or
    tabs, not commas (a spreadsheet saved it so, as Excel does in many locales): read with commas, its header is
    one or a few cells holding every column name, and its rows broke the table apart.

    Raises
    ------
    RowsError
        Naming the file, the separator found and the fix: re-save it as CSV with commas (or rebuild it).
    """
    if "study" in df.columns:
        return
    header = raw.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff").strip()
    for sep, name in _SEPARATORS.items():
        if "study" in [c.strip().strip('"') for c in header.split(sep)]:
            raise RowsError(f"{path} is not comma-separated: its header line (line 1) separates the columns with "
                            f"{name}, as a spreadsheet saves CSV in some locales; re-save it as CSV with commas "
                            "(with '.' as the decimal point), or rebuild the rows with `calib rows STUDY_DIR... "
                            "--out ROWS.csv`")


def _check_not_json(path: Path, raw: bytes) -> None:
    """Refuse a JSON document given as a rows CSV (``path``, its bytes ``raw``): read as a CSV, a calibration
    file would be called cut short or lacking columns, which hides that it is the wrong file.

    Raises
    ------
    RowsError
        Naming the file, what it holds (a calibration file of ``calib fit``, or other JSON) and the fix.
    """
    if raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
        return
    try:
        doc = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark (as Notepad saves) is no part of the JSON
    except (UnicodeDecodeError, ValueError):
        return  # not JSON after all: read as a CSV, its faults are named there
    calibration = isinstance(doc, dict) and doc.get("format") == "gradprobe-calibration"  # calib.model.FORMAT
    what = ("a calibration file (the JSON `calib fit` writes; apply it with `calib apply PROBE_DIR --calibration "
            f"{path}`)" if calibration else "a JSON document")
    raise RowsError(f"{path} is {what}, not a rows CSV; pass the CSV that `calib rows STUDY_DIR... --out ROWS.csv` "
                    "writes")


def _check_fields(path: Path, raw: bytes) -> None:
    """Refuse a rows CSV (``path``, its bytes ``raw``) whose header names a column twice, or with a line that holds
    more or fewer cells than its header names: ``calib rows`` writes one cell per column on every line. pandas reads
    a short line's missing cells as blank (a run without a realized gain, silently left out of the fit), a header
    name twice as a second column ``NAME.1`` that nothing reads, and a table whose every line holds one extra
    cell with its first column as the index (every column shifted by one). A file whose header has no ``study``
    column is no rows CSV: left to the checks that name its missing columns. A cell of any length is read, as
    pandas reads it (the csv module's default limit, 131,072 characters, is raised for this read and restored).

    Raises
    ------
    RowsError
        Naming the file, the line (1 = the header; quoted line breaks counted), the field counts or the repeated
        column, and the fix.
    """
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, min(len(text) + 1, 2**31 - 1)))  # 2**31 - 1: a C long on every platform
    try:
        _check_field_counts(path, csv.reader(io.StringIO(text, newline="")))
    finally:
        csv.field_size_limit(limit)


def _check_field_counts(path: Path, reader) -> None:
    """:func:`_check_fields` on the rows of ``reader`` (a :func:`csv.reader` over the file ``path``)."""
    header = next(reader, None) or []
    if "study" not in header:  # no rows CSV at all (JSON, another tool's CSV): the missing columns are named later
        return
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise RowsError(f"{path}, line 1 (the header): column(s) {repeated} appear more than once, and only the "
                        "first of each would be read; delete the repeated column(s) " + _REBUILD.format(path))
    for row in reader:
        if "".join(row).strip() and len(row) != len(header):
            what = "a cell was deleted or a comma lost" if len(row) < len(header) else "an extra cell or comma"
            raise RowsError(f"{path}, line {reader.line_num} holds {len(row)} cells but the header (line 1) names "
                            f"{len(header)} columns ({what}): every cell would be read under the wrong column or as "
                            "missing; give that line one cell per header column " + _REBUILD.format(path))


def _check_identity_cells(df: pd.DataFrame, path: Path) -> None:
    """Refuse an empty cell in a column of :data:`IDENTITY` (``df``: the rows as read, indexed by line number).

    Raises
    ------
    RowsError
        Naming the file, the line, the column and the fix (write the value, or rebuild the rows).
    """
    for col in (c for c in IDENTITY if c in df.columns):
        blank = df[col].isna() | (df[col].astype(str).str.strip() == "")
        if blank.any():
            line = blank.idxmax()
            raise RowsError(f"{path}, line {line}, column {col!r} is empty: every row names its run (study, model, "
                            f"task, arm, seed, budget, reward); write the {col} of that run "
                            + _REBUILD.format(path))


def concat_rows(frames) -> pd.DataFrame:
    """Rows tables (each from :func:`read_rows_csv`) as one table, index reset, keeping each run's file and line
    (:data:`ROW_PLACES`; ``pandas.concat`` keeps ``attrs`` only when every table has the same)."""
    frames = list(frames)
    rows = pd.concat(frames, ignore_index=True)
    rows.attrs[ROW_PLACES] = {k: v for f in frames for k, v in f.attrs.get(ROW_PLACES, {}).items()}
    return rows


def _run_key(study, arm, seed) -> tuple[str, str, str]:
    """A run's key in :data:`ROW_PLACES`."""
    return str(study), str(arm), str(seed)


def _check_complete(path: Path, raw: bytes) -> None:
    """Refuse a non-empty file (``path``, its bytes ``raw``) whose last byte is not a line break: ``calib rows``
    ends every line with one, so the file was cut short, maybe inside its last cell (a target ``-2.60...`` cut
    to ``-2.`` reads as a valid number; a line cut before its target reads as a run without a realized gain).

    Raises
    ------
    RowsError
        Naming the file, the number of its last (cut) line, and the fix.
    """
    line = unterminated_line(raw)
    if line is not None:
        raise RowsError(f"{path} is cut short: its last line (line {line}) does not end with a line break, so it may "
                        "have lost cells or the end of its last cell (`calib rows` ends every line with one); "
                        + _REBUILD.format(path).removeprefix("or "))


def _numeric(s: pd.Series, path: Path, col: str) -> pd.Series:
    if not pd.api.types.is_numeric_dtype(s) or s.dtype == bool:
        num = pd.to_numeric(s, errors="coerce")
        bad = s.notna() & num.isna() & ~s.astype(str).str.strip().str.lower().isin(["nan", ""])
        if bad.any():
            line = bad.idxmax()
            raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]!r} is not a number; write a number "
                            "(an empty cell means missing; words such as n/a or NA are not read as missing) "
                            + _REBUILD.format(path))
        s = num
    if col in FINITE and s.dtype.kind == "f":
        inf = np.isinf(s.to_numpy())
        if inf.any():
            line = s.index[int(np.argmax(inf))]
            what = "forecast" if col in FORECAST_NAMES else "gain or accuracy"
            raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]} is not a {what} (an infinite value is "
                            "bad data; leave the cell empty for none) " + _REBUILD.format(path))
    if col in POINT_RANGES and s.dtype.kind in "fiu":
        low, high, what = POINT_RANGES[col]
        out = (s < low) | (s > high)
        if out.any():
            line = out.idxmax()
            raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]} is not {what} (accuracy points lie in "
                            f"[{low:g}, {high:g}]; a fraction such as 0.78 is 78 points) " + _REBUILD.format(path))
    if col == "forecast_first_order" and s.dtype.kind in "fiu" and (s.abs() > RAW_BOUND).any():
        line = (s.abs() > RAW_BOUND).idxmax()
        raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]} is not a raw first-order gain (it may "
                        f"overshoot 100 points, but not {RAW_BOUND:g}: an overflowed or edited cell) "
                        + _REBUILD.format(path))
    if col == "budget_value":
        bad = ~(s.astype(float) > 0) | np.isinf(s.astype(float).to_numpy())  # NaN, infinite, 0 or negative
        if bad.any():
            line = bad.idxmax()
            raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]} is not a budget (a finite number of "
                            "tokens > 0; the domain of a calibration fitted on it could not be loaded) "
                            + _REBUILD.format(path))
    return s


def _boolean(s: pd.Series, path: Path, col: str) -> pd.Series:
    if s.dtype == bool:
        return s
    known = {"True": True, "False": False, "true": True, "false": False, True: True, False: False, 1: True, 0: False}
    bad = ~s.isin(list(known))
    if bad.any():
        line = bad.idxmax()
        raise RowsError(f"{path}, line {line}, column {col!r}: {s[line]!r} is not True or False; "
                        "write True or False " + _REBUILD.format(path))
    return s.map(known).astype(bool)


def check_finite_forecasts(fc: pd.DataFrame, study_dir: Path, seeds: dict) -> None:
    """Refuse an infinite forecast of a study's forecaster (NaN stays "no forecast").

    ``fc``: one row per arm with :data:`FORECAST_NAMES`; ``seeds``: arm -> the seeds its rows get.

    Raises
    ------
    StudyFormatError
        Naming the study folder, the arm, its seeds, the column and the fix (:func:`gradprobe.layout.rerun_advice`
        of its probe folder: resume the study, or restore the file from a copy of a study without ``runs/``;
        ``gradprobe probe --out`` refuses a study's probe folder).
    """
    for col in (c for c in FORECAST_NAMES if c in fc.columns):
        vals = pd.to_numeric(fc[col], errors="coerce").to_numpy(np.float64)
        for arm, v in zip(fc["arm"], vals):
            if math.isinf(v):
                raise StudyFormatError(
                    f"{study_dir}: arm {arm!r} (seeds {sorted(seeds.get(arm, []))}) has {col} = {v}: an infinite "
                    f"forecast is bad data (NaN means no forecast); check the arm's probe entry in "
                    f"{study_dir}/probe (tokens_per_update, rho); {rerun_advice(Path(study_dir) / 'probe')}")


def read_runs(study_dir: Path, cols) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """The columns ``cols`` of a study's runs.csv that it has (blank lines and lines with fewer fields than the
    header left out), every cell checked, and the lines that look cut (:func:`gradprobe.forecast.csv_cells.cut_lines`:
    short lines, a last line without a line break). ``seed`` is read as int; ``update``, ``generated_tokens`` and
    ``accuracy`` as floats (an empty cell NaN). Row labels are line numbers (1 = the header).

    Raises
    ------
    StudyFormatError
        One line: runs.csv cannot be read (empty, not UTF-8, not a CSV), or a cell is bad: a seed that is not a
        whole number >= 0 (``True``, empty, ``-1``), a number column holding text or no finite number (``inf``, an
        integer too large for a float); the file, the line, the column and the fix
        (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`) named.
    """
    return _checked_runs(study_dir, *_runs_text(study_dir, cols))


def _runs_text(study_dir: Path, cols) -> tuple[pd.DataFrame, bytes]:
    """runs.csv read once: its columns ``cols`` that it has as text, every line kept (blank lines as empty rows,
    short lines with their cut cells empty; row labels = line numbers, 1 = the header), and the file's bytes. What
    :func:`read_runs` checks, and what :func:`read_study_runs`' lost-line check reads whole (:func:`_lost_lines`).

    Raises
    ------
    StudyFormatError
        runs.csv cannot be read (empty, not UTF-8, not a CSV): the file and the fix
        (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`) named.
    """
    path = Path(study_dir) / RUNS_CSV
    raw = path.read_bytes()
    try:
        df = pd.read_csv(io.BytesIO(raw), usecols=lambda c: c in cols, dtype=str, skip_blank_lines=False)
    except (ValueError, UnicodeDecodeError, pd.errors.EmptyDataError) as e:  # ParserError is a ValueError
        raise StudyFormatError(f"{path} cannot be read ({type(e).__name__}: {(str(e).splitlines() or [''])[0]}); "
                               f"{restore_runs_csv_fix(study_dir)}") from None
    df.index = df.index + 2  # line numbers (runs.csv holds no quoted line break)
    return df, raw


def _checked_runs(study_dir: Path, whole: pd.DataFrame, raw: bytes) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """:func:`read_runs`' result from runs.csv as :func:`_runs_text` read it (``whole``, left as it is; ``raw``):
    blank and short lines left out, every cell checked, and the cut lines."""
    path = Path(study_dir) / RUNS_CSV
    fix = restore_runs_csv_fix(study_dir)
    short = {line for line, _ in short_lines(raw)[1]}
    df = whole[~whole.isna().all(axis=1) & ~whole.index.isin(list(short))].copy()
    for col in (c for c in ("seed", "update", "generated_tokens", "accuracy") if c in df.columns):
        df[col] = _runs_column(df[col], path, col, fix)
    return df, cut_lines(raw)[1]


def _runs_column(s: pd.Series, path: Path, col: str, fix: str) -> pd.Series:
    """runs.csv's column ``col`` (text cells, labels = line numbers) as ints (``seed``) or floats, else
    StudyFormatError naming the file, the line, the column, the cell and ``fix``."""
    def refuse(line, cell, what):
        digits = re.fullmatch(r"\s*[+-]?\d{1,4000}\s*", str(cell))  # within Python's int-from-text limit
        shown = json_number_text(int(cell.strip())) if digits else repr(cell if len(str(cell)) <= 60 else
                                                                           str(cell)[:57] + "...")
        raise StudyFormatError(f"{path}, line {line}, column {col!r}: {shown} is not {what}; {fix}")

    if col == "seed":
        for line, cell in s.items():
            if not (isinstance(cell, str) and _SEED.fullmatch(cell)):
                refuse(line, "" if cell is None or cell != cell else cell, "a seed (a whole number >= 0 such as 0)")
        return s.map(int)
    out = pd.to_numeric(s, errors="coerce")
    for line, cell in s.items():
        value = out[line]
        if isinstance(cell, str) and cell.strip().lower() not in ("", "nan") and not math.isfinite(value):
            refuse(line, cell, "a finite number (an empty cell means missing)")
    return out.astype(float)


def read_study_runs(study_dir: Path) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """A study's runs.csv for calibration: :func:`read_runs` of its arm, seed, update, generated-token and accuracy
    columns (every cell of them checked), and its cut lines. Called before anything is compared with it, so a bad
    cell is blamed on runs.csv, not on analysis.json (whose fix, a re-analysis, would read the bad cell).

    Raises
    ------
    StudyFormatError
        runs.csv is missing (fix: restore it, then re-analyse), cannot be read, lacks its arm or seed column,
        holds a bad cell (:func:`read_runs`): the file, the line, the column and the fix named; or lost
        eval lines (a run lacks an eval its plan, ``study.json`` or per-item results record:
        :func:`gradprobe.study.reading.lost_eval_lines`), which would be read as runs with fewer evals; or an
        ``accuracy`` or ``accuracy_sampled`` that is not the mean of its eval's per-item results (the analysis's own
        check, :func:`gradprobe.forecast.study_items.item_accuracy_mismatches`: line, run, update, both values and
        the fix).
        The per-item results are read once for both checks; ``accuracy_sampled`` is read for the cross-check only
        (the frame returned has the five columns above).
    """
    path = study_dir / RUNS_CSV
    if not path.is_file():
        raise StudyFormatError(f"{path} is missing; calibration checks {ANALYSIS_JSON} against it: restore the "
                               f"study's runs.csv (`gradprobe study` writes it), then re-analyse the study with "
                               f"`{REANALYZE.format(study_dir)}`")
    whole, raw = _runs_text(study_dir, ("arm", "seed", "update", "generated_tokens", "accuracy", "accuracy_sampled"))
    runs, cut = _checked_runs(study_dir, whole, raw)
    sampled = runs.pop("accuracy_sampled") if "accuracy_sampled" in runs.columns else None  # only cross-checked
    missing = [c for c in ("arm", "seed") if c not in runs.columns]
    if missing:
        raise StudyFormatError(f"{path} cannot be read for its arm and seed columns (no column(s) {missing}); "
                               f"{restore_runs_csv_fix(study_dir)}")
    if not {"update", "generated_tokens"} <= set(runs.columns):
        return runs, cut
    items = read_item_lines(study_dir)  # read once: the lost-line check and the accuracy cross-check
    lost = _lost_lines(study_dir, path, whole, raw, items)
    if lost is not None:
        raise StudyFormatError(f"{lost}, which calibration would read as runs with fewer evals; "
                               f"{restore_runs_csv_fix(study_dir)}")
    read = runs[~runs.index.isin([line for line, _ in cut])]  # a value on a cut line may be cut: not compared
    wrong = item_accuracy_mismatches(read if sampled is None else read.assign(accuracy_sampled=sampled), items,
                                     path, list(read.index), study_dir)
    if wrong is not None:
        raise StudyFormatError(f"{wrong}, and calibration reads the accuracies; {restore_runs_csv_fix(study_dir)}")
    return runs, cut


def _lost_lines(study_dir: Path, path: Path, whole: pd.DataFrame, raw: bytes, items=None) -> str | None:
    """:func:`gradprobe.study.reading.lost_eval_lines` of runs.csv read whole (``whole``, :func:`_runs_text`'s text
    frame: its cut lines kept, their cells blank where cut, as the analysis reads them: a cut line is no lost line);
    a cut last line's run is checked to its end like any other, an update study.json or the per-item results record
    after the cut line being lines cut off with the file's end, refused as the analysis refuses it (named so:
    :func:`gradprobe.study.reading.cut_tail_run` of ``raw``, the file's bytes). The caller's read is used: the file
    is not read again, nor the per-item results (``items``, :func:`gradprobe.study.reading.read_item_lines`; None:
    read here)."""
    return lost_eval_lines(whole, study_dir, path, cut_run=cut_tail_run(raw), item_lines=items)


def check_analysis_matches_runs(study_dir: Path, analysis: dict, per_seed: dict, runs=None) -> None:
    """Refuse an ``analysis.json`` made from another ``runs.csv`` (or plan) than the folder holds.

    ``per_seed``: arm -> {seed: accuracy} read from analysis.json at the token budget; ``runs``: what
    :func:`read_study_runs` returned for the folder (read here when None).

    Raises
    ------
    StudyFormatError
        A missing or unreadable runs.csv, a bad cell of it (:func:`read_runs`: its line and column named), or the
        differences (arms, seeds per arm, plan sha256, a run's accuracy at a matched point or update 0 unlike
        runs.csv's read there now, :func:`gradprobe.study.coverage.changed_reads`: the run, the point, both values
        and the evals read; an arm's mean accuracy read outside every accuracy runs.csv records for it), with the
        fix ``gradprobe study --analyze-only --overwrite-analysis --out STUDY`` (for changed reads also how to
        restore runs.csv, :func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`, should runs.csv be the
        edited one); when
        runs.csv looks cut (a line with fewer fields than the header, no line break after its last line) or lacks
        runs the analysis lists, the message first says so and how to restore or rebuild it
        (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`),
        since a re-analysis would read the damaged file.
    """
    path = study_dir / RUNS_CSV
    fix = f"re-analyse the study with `{REANALYZE.format(study_dir)}`"
    runs, cut = read_study_runs(study_dir) if runs is None else runs
    csv = csv_seeds(runs)
    outside = _accuracies_outside_runs(runs, per_seed)  # arm -> phrase; its reads are not told again run by run
    read = as_analysed(runs, blank_rows=[line for line, _ in cut])  # a cut line's accuracy blank: it may be cut
    diffs = stale_analysis(study_dir, read, skip_arms=outside)  # arms, seeds, sha256, reads, R0s, fits
    if any(d.startswith(CHANGED_READS) for d in diffs):  # which file is right is unknown: both fixes named
        fix += (f" if {RUNS_CSV} is the study's own; if it was edited since, "
                f"{restore_runs_csv_fix(study_dir)} instead")
    lost = [a for a in (analysis.get("arms") or {}) if a not in csv]
    for arm in (a for a in (analysis.get("arms") or {}) if a in csv):
        gone = sorted(set(per_seed.get(arm, {})) - csv[arm])
        if gone:
            diffs.append(f"{arm}: {ANALYSIS_JSON} reads seed(s) {gone} that {RUNS_CSV} does not hold")
            lost.append(f"{arm} seed(s) {gone}")
    diffs += list(outside.values())
    if diffs:
        why = (_damaged_runs(study_dir, path, cut, lost) + f"; only if {RUNS_CSV} is whole and the analysis is older, "
               if cut or lost else "runs.csv changed after the analysis: ")
        raise StudyFormatError(f"{study_dir}: {ANALYSIS_JSON} does not match {RUNS_CSV} ({'; '.join(diffs)}); "
                               + why + fix)


def _damaged_runs(study_dir: Path, path: Path, cut: list, lost: list) -> str:
    """The error's part for a runs.csv that looks cut or damaged: what (``cut``: its cut lines, ``lost``: the arms
    and runs ``analysis.json`` lists that it lacks) and how to get it back
    (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`), said before any
    re-analysis, which would read the damaged file."""
    what = [f"cut: {name_short_lines(cut)}"] if cut else []
    what += [f"it lacks runs {ANALYSIS_JSON} lists: {', '.join(lost)}"] if lost else []
    return (f"{path} looks cut or damaged ({'; '.join(what)}): first {restore_runs_csv_fix(study_dir)}"
            " (a re-analysis now would read the damaged file)")


def _accuracies_outside_runs(runs: pd.DataFrame, per_seed: dict) -> dict[str, str]:
    """arm -> a phrase, for each arm whose mean accuracy in analysis.json (over ``per_seed``'s finite values,
    points) lies outside every accuracy runs.csv records for that arm (``runs``: arm, seed, accuracy as a fraction).
    analysis.json reads each run at one eval or between two adjacent ones, so each read, and their mean, lies in the
    arm's [min, max] x 100; outside it, runs.csv's accuracies changed (rescaled, blanked) after the analysis. A cheap
    necessary check, told per arm; :func:`gradprobe.study.coverage.changed_reads` compares each read (the arms named
    here are left out of it). Without an ``accuracy`` column nothing is compared."""
    if "accuracy" not in runs.columns:
        return {}
    acc = 100.0 * pd.to_numeric(runs["accuracy"], errors="coerce")
    span = acc.groupby(runs["arm"].astype(str)).agg(["min", "max"])
    out = {}
    for arm, seeds in per_seed.items():
        vals = [v for v in seeds.values() if math.isfinite(v)]
        if not vals or str(arm) not in span.index:
            continue
        mean, (lo, hi) = float(np.mean(vals)), span.loc[str(arm)]
        if not (lo - ROUNDING <= mean <= hi + ROUNDING):  # NaN bounds (no accuracy left): outside too
            said = f"{lo:g}-{hi:g}" if math.isfinite(lo) else "none"
            out[str(arm)] = (f"{arm}: {ANALYSIS_JSON} reads a mean accuracy of {mean:g} points over its seeds, "
                             f"{RUNS_CSV} records {said} for that arm")
    return out


def check_plan_sha(study_dir: Path, study_sha: str | None, analysis_sha: str | None) -> None:
    """Refuse an ``analysis.json`` whose plan sha256 differs from ``study.json``'s (both recorded).

    Raises
    ------
    StudyFormatError
        Naming both digests and the fix (re-analyse).
    """
    if study_sha and analysis_sha and study_sha != analysis_sha:
        raise StudyFormatError(f"{study_dir}: {ANALYSIS_JSON} was made for plan sha256 {analysis_sha[:12]}, but "
                               f"{STUDY_JSON} records {study_sha[:12]}; re-analyse the study with "
                               f"`{REANALYZE.format(study_dir)}`")


def analysis_error(study_dir: Path, field: str, value, what: str, number: bool = False,
                   fix: str | None = None) -> StudyFormatError:
    """The one-line error for ``analysis.json``'s ``field`` (a dotted path, e.g. ``matched.generated_tokens.budget``)
    holding ``value`` (shown as the file holds it: JSON text, an integer too large for a float by its digits), which
    is not ``what`` (``number``: a number field, where a boolean is said not to be read as 1 or 0); the fix: ``fix``,
    else rebuild analysis.json from runs.csv (:func:`rebuild_analysis`, gradprobe's own wording; runs.csv's cells are
    checked first)."""
    why = " (a boolean is never read as 1 or 0)" if number and isinstance(value, bool) else ""
    return StudyFormatError(f"{study_dir}/{ANALYSIS_JSON} field {field} is {json_number_text(value, json_short(value))}"
                            f"{why}, not {what}; " + (rebuild_analysis(study_dir) if fix is None else fix))


def analysis_number(study_dir: Path, field: str, value, what: str, *, low: float = -math.inf,
                    high: float = math.inf, above: bool = False) -> float:
    """``value``, read from ``analysis.json``'s ``field``, as a float when it is a finite number by gradprobe's one
    rule (:func:`gradprobe.outputs.is_json_number`: never a boolean or text; an integer too large for a float is
    none) within [``low``, ``high``] (``above``: strictly above ``low``). ``what`` says what the field must hold
    (units included), e.g. ``"a finite number > 0 of generated tokens"``.

    Raises
    ------
    StudyFormatError
        Otherwise, one line naming the file, the field, the value, ``what`` and the fix (:func:`analysis_error`).
    """
    if is_json_number(value, finite=True):
        x = float(value)
        if (x > low if above else x >= low) and x <= high:
            return x
    raise analysis_error(study_dir, field, value, what, number=True)


def _curves(study_dir: Path) -> dict:
    """(arm, seed) -> {update: (generated_tokens, accuracy)} from the study's runs.csv ({} without one).

    Raises
    ------
    StudyFormatError
        runs.csv cannot be read, lacks one of those columns, or holds a bad cell (:func:`read_runs`: a seed that is
        no whole number, a number too large for a float): the file, the line, the column and the fix named.
    """
    path = Path(study_dir) / RUNS_CSV
    if not path.is_file():
        return {}
    need = ["arm", "seed", "update", "generated_tokens", "accuracy"]
    df = read_runs(study_dir, need)[0]
    missing = [c for c in need if c not in df.columns]
    if missing:
        header = list(pd.read_csv(path, nrows=0).columns)
        raise StudyFormatError(f"{path} has no column(s) {missing} (it has {header}); calibration compares "
                               "the runs of the studies given by them (a run read twice counts twice): restore the "
                               "study's runs.csv (`gradprobe study` writes it)")
    return {(str(a), int(s)): {float(u): (float(t), float(x)) for u, t, x in
                               zip(g["update"], g["generated_tokens"], g["accuracy"])}
            for (a, s), g in df.groupby(["arm", "seed"])}


def _same_curve(a: dict, b: dict) -> bool:
    """The curves agree at every update both record, and both record one after update 0."""
    common = set(a) & set(b)
    return any(u > 0 for u in common) and all(a[u] == b[u] for u in common)


def _shared_runs(frames: list[pd.DataFrame], curves: list[dict]) -> dict:
    """(i, j) -> [(arm in i, arm in j, seed), ...] for studies i < j sharing runs."""
    seen: dict[tuple, list] = {}
    for i, f in enumerate(frames):
        for r in f.itertuples(index=False):
            if isinstance(r.realized, float) and math.isfinite(r.realized):
                key = tuple(str(getattr(r, c)) for c in _RUN_KEY) + (r.realized,)
                seen.setdefault(key, []).append((i, r.arm, int(r.seed)))
    pairs: dict[tuple, list] = {}
    for hits in seen.values():
        for (i, a, s), (j, b, _) in combinations(hits, 2):
            if i != j and _same_curve(curves[i].get((a, s), {}), curves[j].get((b, s), {})):
                pairs.setdefault((i, j), []).append((a, b, s))
    return pairs


def duplicate_runs(frames: list[pd.DataFrame], study_dirs: list) -> list[tuple[str, str, list[str]]]:
    """The runs read twice across studies (see the module docstring for "the same run").

    ``frames``: :func:`calib.dataset.build_rows` of each of ``study_dirs`` (same order).

    Returns
    -------
    list of (study A, study B, ["ARM/seedS" or "ARM_A=ARM_B/seedS", ...])
        One entry per pair of studies sharing runs, folder names as given.
    """
    return _named(_shared_runs(frames, [_curves(d) for d in study_dirs]), study_dirs)


def _named(pairs: dict, study_dirs: list) -> list[tuple[str, str, list[str]]]:
    return [(str(study_dirs[i]), str(study_dirs[j]), sorted(f"{a}/seed{s}" if a == b else f"{a}={b}/seed{s}"
                                                            for a, b, s in runs))
            for (i, j), runs in sorted(pairs.items())]


def check_duplicate_runs(frames: list[pd.DataFrame], study_dirs: list, reference_arm: str = "grpo") -> list:
    """Refuse a study all of whose runs are read from other studies given; warn about other shared runs.

    A study that is a subset of the others adds no run and would count each twice (and leak into the
    fold that holds the other study out); a few shared runs (deterministic retraining of an arm that
    several studies hold) are named in one :class:`DuplicateRunsWarning`.

    Returns
    -------
    list
        :func:`duplicate_runs` (empty: nothing shared, no warning).

    Raises
    ------
    StudyFormatError
        Naming the study, the studies that hold its runs, and the fix (pass only one of them).
    """
    pairs = _shared_runs(frames, [_curves(d) for d in study_dirs])
    for k, f in enumerate(frames):
        runs = {(a, int(s)) for a, s, x in zip(f["arm"], f["seed"], f["realized"]) if math.isfinite(float(x))}
        mine = {(a if i == k else b, s) for (i, j), rs in pairs.items() if k in (i, j) for a, b, s in rs}
        if runs and runs <= mine:
            others = sorted({str(study_dirs[j if i == k else i]) for (i, j) in pairs if k in (i, j)})
            raise StudyFormatError(
                f"every run of {study_dirs[k]} ({len(runs)} runs) is also read from {', '.join(others)} (same "
                "model, task, arm settings and seed, identical accuracy curve): it would count each twice and "
                f"add nothing; pass only one of them (e.g. drop {study_dirs[k]})")
    dups = _named(pairs, study_dirs)
    if dups:
        text = "; ".join(f"{a} and {b} share {len(r)} run(s): {', '.join(r)}" for a, b, r in dups)
        warnings.warn(f"the same training run is read from two studies (same model, task, arm settings and seed, "
                      f"identical accuracy curve): {text}. Each copy counts as a run of its own (the "
                      f"{reference_arm!r} rows are left out of fits by default; other arms count twice in fits, "
                      "errors and rankings, and leaving one study out holds out only one copy); pass only one "
                      "study of each pair if that is not intended", DuplicateRunsWarning, stacklevel=3)
    return dups


def check_one_row_per_run(rows: pd.DataFrame, source: str = "the rows table") -> None:
    """Refuse rows of one run (study, arm, seed) given twice in ``rows``.

    Fitted twice, a run would count double in the fit, its conformal folds and the reported run count;
    ``calib rows`` writes every study once, so a repeat comes from joining rows files (one passed twice,
    or two files that share a study).

    Parameters
    ----------
    rows : DataFrame
        A rows table (:func:`calib.dataset.build_rows_many`); without a study, arm or seed column nothing
        is checked here (:func:`calib.dataset.select_rows` names the missing columns).
    source : str
        Where the rows came from, named in the error (``calib fit`` names its rows files).

    Raises
    ------
    RowsError
        Naming the first runs repeated, ``source``, and the fix.
    """
    keys = ["study", "arm", "seed"]
    if not set(keys) <= set(rows.columns):
        return
    twice = rows[rows.duplicated(keys, keep="first")]
    if twice.empty:
        return
    named = "; ".join(f"{r.study} {r.arm} seed {r.seed}" for r in twice[keys].head(3).itertuples())
    more = f" and {len(twice) - 3} more" if len(twice) > 3 else ""
    raise RowsError(f"{len(twice)} row(s) repeat a run (study, arm, seed) of an earlier row ({named}{more}) in "
                    f"{source}: a file passed twice, or two files sharing a study; pass each study's rows once "
                    "(`calib rows STUDY_DIR... --out ROWS.csv` writes every study once)")


def check_paired_targets(rows: pd.DataFrame, source: str = "the rows table") -> None:
    """Refuse a paired row whose ``target`` is not its ``realized`` minus the reference run's ``realized``.

    A row with ``paired`` True and a finite target is a run whose seed the reference arm also ran in the
    same study (``calib rows`` sets ``paired`` so): its target is its accuracy minus the accuracy of the
    reference row (``is_reference`` True) of the same study and seed, within :data:`PAIRED_ATOL` points.
    A target that disagrees was edited or damaged; fitted on, it would move the calibration silently.
    Unpaired rows (target vs the mean of the reference's seeds), rows without a finite target and paired
    rows whose reference row is not in ``rows`` (a table that left the reference out) are not checked;
    nor is anything without a study, arm, seed, is_reference, paired, realized or target column.

    Parameters
    ----------
    rows : DataFrame
        A rows table (:func:`calib.dataset.build_rows_many` or its CSV), one row per run
        (:func:`check_one_row_per_run` first).
    source : str
        Where the rows came from, named in the error.

    Raises
    ------
    RowsError
        Naming ``source``, the study, arm and seed (and the file and line the row was read from, when the
        table came from :func:`read_rows_csv`), the target and the realized accuracies it should be
        the difference of, how many paired rows disagree, and the fix (rebuild with ``calib rows``).
    """
    cols = ["study", "arm", "seed", "is_reference", "paired", "realized", "target"]
    if not set(cols) <= set(rows.columns):
        return
    df = rows[cols].copy()
    for c in ("realized", "target"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    ref_mask = df["is_reference"].astype(bool)
    ref = df[ref_mask].drop_duplicates(["study", "seed"]).set_index(["study", "seed"])["realized"]
    ref = ref.rename("reference_realized")
    paired = df[df["paired"].astype(bool) & np.isfinite(df["target"].to_numpy())]
    paired = paired.join(ref, on=["study", "seed"], how="inner")
    if paired.empty:
        return
    expected = paired["realized"] - paired["reference_realized"]
    bad = ~(np.abs(paired["target"] - expected) <= PAIRED_ATOL)  # NaN realized: bad too
    if not bad.any():
        return
    r = paired[bad].iloc[0]
    target, realized, base = float(r["target"]), float(r["realized"]), float(r["reference_realized"])
    ref_arm = df.loc[ref_mask, "arm"].iloc[0]
    more = f" ({int(bad.sum())} paired rows disagree)" if bad.sum() > 1 else ""
    place = rows.attrs.get(ROW_PLACES, {}).get(_run_key(r["study"], r["arm"], r["seed"]))
    raise RowsError(f"{source}, study {r['study']!r}, arm {r['arm']!r}, seed {r['seed']}"
                    + (f" (read from {place})" if place else "") + f": paired target {target!r} "
                    f"is not realized {realized!r} minus {ref_arm}'s realized {base!r} on the same seed "
                    f"({realized - base!r}, tolerance {PAIRED_ATOL:g} points){more}: the rows were edited or damaged; "
                    "rebuild them with `calib rows STUDY_DIR... --out ROWS.csv`")


def check_reference_rows(rows: pd.DataFrame, source: str = "the rows table", reference_arm: str = "grpo",
                         forecasts=FORECAST_NAMES, require_reference: bool = True) -> None:
    """Refuse rows whose ``is_reference`` flags disagree with the rows themselves; warn of an arm that looks like
    the reference arm renamed.

    ``is_reference`` decides which rows are left out of a fit: the reference arm's gain vs itself is 0 by
    definition (forecast 0, paired target exactly 0), so its rows fitted as data pin the fit through (0, 0) and
    shrink the conformal scale (the shipped rows with every flag False: 116 runs of 16 arms, scale 0.954 -> 0.433).
    ``calib rows`` sets the flag from the arm's name, so a disagreement is an edit: refused where it is certain, a
    warning where a real arm may look so.

    Refused (RowsError): a row of the arm named ``reference_arm`` not marked ``is_reference``, or a row of another
    arm marked so; a study with a finite target but no ``is_reference`` row (its gains were measured against a
    reference the rows no longer hold, e.g. the grpo arm renamed). Warned (:class:`ReferenceLikeArmWarning`): in a
    study that has its reference rows, an arm not marked ``is_reference`` whose every row has every finite forecast
    of ``forecasts`` 0 and target exactly 0: the reference renamed, or a copy of grpo trained deterministically
    (a real arm; calib cannot tell them apart, so it is fitted and named).

    Parameters
    ----------
    rows : DataFrame
        A rows table (:func:`read_rows_csv`); without a study, arm, is_reference or target column nothing is
        checked (:func:`calib.dataset.select_rows` names the missing columns).
    source : str
        Where the rows came from, named in the error.
    require_reference : bool
        Refuse a study with targets but no reference row (``calib fit`` on a rows file). False for a table the
        caller may have filtered (rows without grpo's, a subset of arms: :func:`calib.dataset.select_rows`, which
        leaves grpo's rows out anyway); an arm there that looks like the reference renamed is still warned of.

    Raises
    ------
    RowsError
        Naming ``source``, the study and arm (file and line where the table was read from a CSV) and the fix:
        restore the flag, or rebuild the rows with ``calib rows``.
    """
    if not {"study", "arm", "is_reference", "target"} <= set(rows.columns) or rows.empty:
        return
    ref = rows["is_reference"].astype(bool).to_numpy()
    named = (rows["arm"].astype(str) == reference_arm).to_numpy()
    places = rows.attrs.get(ROW_PLACES, {})
    fix = ("rebuild the rows with `calib rows STUDY_DIR... --out ROWS.csv` (it marks the reference arm "
           f"{reference_arm!r} is_reference True, every other arm False)")
    if (ref != named).any():
        r = rows.iloc[int(np.argmax(ref != named))]
        place = places.get(_run_key(r["study"], r["arm"], r.get("seed")))
        raise RowsError(f"{source}, study {r['study']!r}, arm {r['arm']!r}" + (f" (read from {place})" if place
                        else "") + f": is_reference is {bool(r['is_reference'])}, but the reference arm, whose gain "
                        f"vs itself is 0 by definition, is the arm named {reference_arm!r}: the rows were edited; "
                        + fix)
    target = pd.to_numeric(rows["target"], errors="coerce").to_numpy(np.float64)
    with_ref = set(rows.loc[ref, "study"])
    lacking = [st for st in dict.fromkeys(rows.loc[np.isfinite(target), "study"]) if st not in with_ref]
    if lacking and require_reference:
        raise RowsError(f"{source}: study {lacking[0]!r} has no row of the reference arm {reference_arm!r} "
                        "(is_reference True), so its gains were measured against an arm the rows no longer name (a "
                        f"renamed or deleted {reference_arm!r} would be fitted as data, its forecasts and gains 0 by "
                        "definition); " + fix)
    _warn_reference_like_arms(rows, target, ref, with_ref | set(lacking), [c for c in forecasts if c in rows.columns],
                              reference_arm)


def _warn_reference_like_arms(rows, target, ref, with_ref, forecasts, reference_arm) -> None:
    """:class:`ReferenceLikeArmWarning` naming each (study, arm) of :func:`check_reference_rows`'s warned case."""
    if not forecasts:
        return
    fc = rows[forecasts].apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
    zero = (target == 0.0) & np.all(np.isnan(fc) | (fc == 0.0), axis=1) & np.isfinite(fc).any(axis=1) & ~ref
    keys = pd.Series(list(zip(rows["study"], rows["arm"])))
    flagged = [k for k, z in pd.Series(zero).groupby(keys).all().items() if z and k[0] in with_ref]
    if flagged:
        shown = ", ".join(f"{st}/{arm}" for st, arm in flagged)
        warnings.warn(f"arm(s) {shown} have forecast 0 and realized gain exactly 0 vs {reference_arm!r} on every "
                      f"row, as the reference arm's own rows have: if they are {reference_arm!r} renamed, they are "
                      f"fitted as data (pinning the fit through 0); rename them {reference_arm!r} (is_reference "
                      "True) or rebuild the rows with `calib rows`, else ignore this (a copy of grpo trained "
                      "deterministically gives such rows)", ReferenceLikeArmWarning, stacklevel=3)
