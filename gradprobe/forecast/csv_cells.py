"""The cells of a reference curve's CSV (``--reference-curve FILE.csv``, a study's ``runs.csv``), checked.

Row ``i`` of a frame read by :func:`read_csv_checked` is line ``i + 2`` of the file (line 1 the header;
blank lines are kept as all-NaN rows), so every message names the file, the line and the column:

- :func:`numeric_columns` refuses a cell that is text (``abc``) or infinite (``inf``);
- an empty or ``nan``/``NaN``/``NA`` cell is no error: it is skipped on purpose, because logs exported with
  one row per training step (W&B, TensorBoard) carry the accuracy only on the steps that were evaluated.
  It is not skipped unsaid: :func:`skipped_cells` lists such lines (fully blank lines are no data and are
  not listed), :func:`skipped_note` becomes one of the curve's notes, and :func:`with_skipped` adds it to a
  refusal (e.g. too few evals), so a curve whose evals were all blank says why;
- :func:`check_csv_values` refuses a negative update (an accuracy column that mixes fractions and points is
  refused by :func:`gradprobe.forecast.accuracy_values.to_points`);
- a line that looks cut (fewer fields than the header, or the last line of a file without a final line break:
  :func:`cut_lines`) is left out and said (:func:`without_short_lines`);
- a study's ``runs.csv`` is checked as ``gradprobe study --analyze-only`` checks it: one eval on two lines with
  different values and an accuracy outside [0, 1] are refused, and an exact copy of a line is read once
  (:func:`one_line_per_eval`, :func:`repeated_rows`); another CSV's evals are checked the same way by
  :meth:`ReferenceCurve.from_csv` (each (seed, update) once).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from .curve_fit import CurveError
from .study_items import restore_runs_csv_fix
from .text_files import decode_text, not_utf8

__all__ = ["read_csv_checked", "numeric_columns", "skipped_cells", "study_skipped_evals", "skipped_note",
           "with_skipped", "SKIPPED_MARK", "CAUTION_MARK", "UNTERMINATED", "is_skipped_note", "short_lines",
           "cut_lines", "unterminated_line", "name_short_lines", "repeated_rows", "check_csv_values",
           "without_short_lines", "one_line_per_eval"]

_SHOWN = 5  # lines named in a note; the rest are counted
#: In every note that says evals of the source were skipped (a CSV's blank cells, a trainer_state's NaN evals):
#: :func:`is_skipped_note` finds them, so that the forecast prints them (they change the curve).
SKIPPED_MARK = " skipped for "
#: In a note that says an eval was read but may be damaged (:func:`without_short_lines`: a user's CSV whose last
#: line has no line break after it): printed like a skipped eval's note.
CAUTION_MARK = " was read, but "
#: Why :func:`cut_lines` names the last line of a file without a final line break.
UNTERMINATED = "the last line, no line break after it"


def is_skipped_note(note: str) -> bool:
    """Whether a curve note says evals of its source were skipped (:func:`skipped_note`, a TRL NaN eval) or read
    with a caution (:data:`CAUTION_MARK`): the notes a forecast prints."""
    return SKIPPED_MARK in str(note) or CAUTION_MARK in str(note)


def read_csv_checked(path: Path, raw: bytes | None = None) -> pd.DataFrame:
    """``path`` read as a CSV, its blank lines kept as all-NaN rows so that row ``i`` is line ``i + 2``.

    ``raw``: the file's bytes when the caller has read them already (they are parsed instead of reading the
    file again, so the table and :func:`short_lines` see the same bytes).

    Raises
    ------
    CurveError
        The file is empty, not UTF-8 text (what it is instead and the fix: :func:`~.text_files.not_utf8`), or not
        a CSV pandas can parse (pandas' message, with the path). A leading UTF-8 byte-order mark is read as pandas
        reads it (dropped).
    """
    raw = path.read_bytes() if raw is None else raw
    try:
        decode_text(raw)  # a NUL byte too: UTF-16 without a byte-order mark would be read as garbage columns
    except UnicodeDecodeError as e:  # pandas reads in chunks: its position and message would blame the header
        raise CurveError(f"{path} cannot be read as a CSV: {not_utf8(path, e, False)}") from None
    try:
        return pd.read_csv(io.BytesIO(raw), skip_blank_lines=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        why = " ".join(str(e).split())  # pandas' message may span lines: the error is one line
        raise CurveError(f"{path} cannot be read as a CSV ({why}); a header line (e.g. update,accuracy) and one "
                         "line per eval are expected") from None


def numeric_columns(df: pd.DataFrame, cols, path: Path) -> pd.DataFrame:
    """``df`` with ``cols`` as float (empty and ``nan`` cells NaN); a cell that is no finite number is refused.

    Row ``i`` of ``df`` is line ``i + 2`` of the file (read it with :func:`read_csv_checked`).

    Raises
    ------
    CurveError
        Names the file, the line, the column and the cell (text, or ``inf``), and says to fix or delete that line.
    """
    out = df.copy()
    for col in cols:
        blank = df[col].map(lambda x: isinstance(x, str) and not x.strip())  # "   ": an empty cell, not text
        df = df.assign(**{col: df[col].mask(blank)}) if blank.any() else df
        values = pd.to_numeric(df[col], errors="coerce")
        for bad, what in ((values.isna() & df[col].notna(), "a number"),
                          (values.notna() & ~np.isfinite(values.to_numpy(float)), "a finite number")):
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                cell = str(df[col].iloc[row])  # the text as read (a number pandas parsed, inf, as its text)
                raise CurveError(f"{path}, line {row + 2}, column {col!r}: {cell!r} is not {what} "
                                 f"({int(bad.sum())} such cell(s) in that column); fix or delete that line")
        out[col] = values.astype(float)
    return out


def skipped_cells(df: pd.DataFrame, cols) -> list[tuple[int, str]]:
    """(line, column) of every line of ``df`` (a frame of :func:`numeric_columns`) that holds data but an
    empty or NaN cell in one of ``cols`` (its first such column); fully blank lines are left out."""
    data = df.notna().any(axis=1).to_numpy()
    out = []
    for row in np.flatnonzero(data & df[list(cols)].isna().any(axis=1).to_numpy()):
        out.append((int(row) + 2, next(c for c in cols if pd.isna(df[c].iloc[row]))))
    return out


def study_skipped_evals(df: pd.DataFrame, arm: str, accuracy_col: str = "accuracy") -> list[tuple[int, str]]:
    """(line, column) of every line of a study's ``runs.csv`` (a frame of :func:`numeric_columns`, columns ``arm``,
    ``update`` and ``accuracy_col``) of ``arm`` whose ``update`` or greedy ``accuracy`` cell is empty or NaN.

    ``gradprobe study`` writes the update and the greedy accuracy at every eval, so such a line is a damaged or
    hand-edited file; fitted without it, the arm's curve moves (``ReferenceCurve.from_study`` notes it, ``calib
    rows`` warns). ``accuracy_sampled`` is empty wherever the eval schedule skipped sampling, so its empty cells
    are not named."""
    lines = skipped_cells(df, ("update", accuracy_col) if accuracy_col == "accuracy" else ("update",))
    return [(line, col) for line, col in lines if df["arm"].iloc[line - 2] == arm]


def skipped_note(skipped: list[tuple[int, str]], path: Path) -> str | None:
    """The sentence naming the lines :func:`skipped_cells` found (None: none)."""
    if not skipped:
        return None
    where = ", ".join(f"line {line} column {col!r}" for line, col in skipped[:_SHOWN])
    more = f" and {len(skipped) - _SHOWN} more" if len(skipped) > _SHOWN else ""
    return (f"{len(skipped)} line(s) of {path}{SKIPPED_MARK}an empty or NaN cell ({where}{more}): a line without a "
            "value is no eval")


def with_skipped(error: CurveError, note: str | None,
                 fix: str | None = "fill those cells in if they are evals") -> CurveError:
    """``error`` with the evals skipped (``note`` of :func:`skipped_note`, or any note that says its own fix:
    ``fix=None``) and ``fix`` appended; as is if none."""
    if note is None:
        return error
    return CurveError(f"{error}; {note}" + (f" ({fix})" if fix else ""))


def short_lines(raw: bytes, against: str = "header") -> tuple[int, list[tuple[int, int]]]:
    """The lines of a CSV (its bytes ``raw``) that hold fewer fields than its header: a file cut mid-line or
    hand-edited, whose missing cells pandas reads as blank and whose last value may itself be cut.

    ``against="lines"`` compares with the longest data line instead (a user's CSV whose header names optional
    trailing columns that no line fills is not cut; a line shorter than the others is). Whitespace-only lines
    count as blank.

    Returns
    -------
    (n_columns, [(line, fields), ...])
        The field count compared with, and each short line's number in the file (1-based, as an editor shows
        it; quoted line breaks counted) with its field count. Blank lines are not listed.
    """
    reader = csv.reader(io.StringIO(raw.decode("utf-8", errors="replace"), newline=""))
    header = next(reader, None)
    rows = [(reader.line_num, len(row)) for row in reader if row and "".join(row).strip()]
    n = max((k for _, k in rows), default=0) if against == "lines" else len(header or [])
    return n, [(line, k) for line, k in rows if k < n]


def cut_lines(raw: bytes, against: str = "header") -> tuple[int, list[tuple[int, str]]]:
    """The lines of a CSV (its bytes ``raw``) that look cut: those with fewer fields than the header
    (:func:`short_lines`), and the last line when the file does not end with a line break (every writer of a
    CSV ends its last line, so a file that stops mid-line may have lost the end of its last value, ``0.`` for
    ``0.74``, while keeping every field).

    Returns
    -------
    (n_columns, [(line, why), ...])
        The header's field count, and each such line's number (as :func:`short_lines` counts them) with why
        (``"3 of 9 fields"``, :data:`UNTERMINATED`), in file order. ``against``: as :func:`short_lines`.
    """
    n, short = short_lines(raw, against)
    out = [(line, f"{k} of {n} fields") for line, k in short]
    last = unterminated_line(raw)
    if n and last is not None and last > 1 and all(line != last for line, _ in out):
        out.append((last, UNTERMINATED))
    return n, out


def unterminated_line(raw: bytes) -> int | None:
    """The number of a file's last line when no line break follows it (the file may have been cut inside that
    line), else None (an empty or whitespace-only file too). Also :func:`calib.integrity.read_rows_csv`'s."""
    if not raw.strip() or raw.endswith((b"\n", b"\r")):
        return None
    return raw.count(b"\n") + 1


def name_short_lines(cut: list[tuple[int, str]]) -> str:
    """``"line 7 (3 of 9 fields), line 12 (the last line, no line break after it)"`` for the ``(line, why)``
    pairs of :func:`cut_lines`: the first five named, the rest counted (``" and 4 more"``)."""
    where = ", ".join(f"line {line} ({why})" for line, why in cut[:_SHOWN])
    return where + (f" and {len(cut) - _SHOWN} more" if len(cut) > _SHOWN else "")


def repeated_rows(df: pd.DataFrame, keys, lines) -> tuple[list[str], np.ndarray]:
    """Rows of ``df`` that repeat an earlier row's ``keys`` (e.g. arm, seed, update of a study's ``runs.csv``).

    A row that copies an earlier one in every column says nothing new and can be read once; two rows with the
    same keys and different values are one eval recorded twice, and which is right cannot be told, so readers
    refuse them (``gradprobe study --analyze-only``'s :func:`gradprobe.study.reading.load_runs`, and
    :meth:`ReferenceCurve.from_study`).

    Parameters
    ----------
    df : pandas.DataFrame
        Rows in file order; rows with a blank key are not compared.
    keys : sequence of str
        The columns that name one eval.
    lines : sequence of int or None
        Each row's line in the file (None: rows are named without it).

    Returns
    -------
    (conflicts, exact)
        ``conflicts``: one string per repeated key whose rows differ, ``"arm grpo, seed 0, update 57 (lines 19,
        41)"``, the first five then counted; ``exact``: boolean mask (rows,) of the rows that copy an earlier row
        exactly (drop them to read each eval once).
    """
    keys = list(keys)
    named = df[keys].notna().all(axis=1).to_numpy()
    same_key = df.duplicated(keys, keep=False).to_numpy() & named
    exact = df.duplicated(keep="first").to_numpy() & same_key
    rest = df.reset_index(drop=True)[same_key & ~exact]
    conflicts = []
    for key, g in rest.groupby(keys, sort=False):
        if len(g) > 1:
            what = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in zip(keys, key))
            conflicts.append(what + (f" (lines {', '.join(str(lines[i]) for i in g.index)})" if lines is not None
                                     else f" ({len(g)} rows)"))
    if len(conflicts) > _SHOWN:
        conflicts = conflicts[:_SHOWN] + [f"and {len(conflicts) - _SHOWN} more"]
    return conflicts, exact


def check_csv_values(df: pd.DataFrame, path: Path, update_col: str) -> None:
    """Refuse, naming the lines (row ``i`` of ``df`` is line ``i + 2``), a negative update, and an update that is no
    whole number (``2.5``): the column counts optimizer updates, the curve's x axis (``1.0`` reads as 1; a fraction
    is an epoch, a share of training or a typo, and fitted as updates it would move the curve). (An accuracy column
    that mixes fractions and points is refused by :func:`gradprobe.forecast.accuracy_values.to_points`, for every
    source of a curve.)

    Raises
    ------
    CurveError
        Naming the file, the first line, the column, the value and the fix.
    """
    updates = df[update_col].to_numpy(float)
    lines = df.index.to_numpy() + 2
    if (updates < 0).any():
        bad = np.flatnonzero(updates < 0)
        raise CurveError(f"{path}: {update_col} must be an update count >= 0, got {updates[bad[0]]:g} at line "
                         f"{lines[bad[0]]}" + (f" (and {bad.size - 1} more line(s))" if bad.size > 1 else "")
                         + "; fix or delete those lines")
    bad = np.flatnonzero(updates != np.floor(updates))
    if bad.size:
        raise CurveError(f"{path}, line {lines[bad[0]]}, column {update_col!r}: {float(updates[bad[0]])!r} is not a "
                         f"whole number of updates ({bad.size} such cell(s) in that column): the column counts the "
                         "optimizer updates each eval was made after, the curve's x axis; write that update count "
                         "(1.0 reads as 1; an epoch or a share of training is no update count: convert it), or "
                         "delete that line")


def without_short_lines(df: pd.DataFrame, path: Path, raw: bytes, accuracy_col: str, arm: str | None = None,
                        *, trust_last: bool = False) -> tuple[pd.DataFrame, str | None, set[int]]:
    """``df`` (a CSV read by :func:`read_csv_checked` from the bytes ``raw``, row ``i`` line ``i + 2``) with
    ``accuracy_col`` blanked on the lines that look cut (:func:`cut_lines`; a cut value cannot be trusted), only
    those of ``arm`` when given (a study's runs.csv), the note naming them (None: none) and their line numbers.

    ``trust_last`` (a user's CSV, :meth:`ReferenceCurve.from_csv`): short lines are those shorter than the
    longest data line, and a last line with every field but no line break after it is read (editors save files
    that way), with a note that says so (:data:`CAUTION_MARK`); otherwise (a study's runs.csv, which gradprobe
    always ends with a line break) such a line is left out too."""
    _, cut = cut_lines(raw, "lines" if trust_last else "header")
    rows = [(line, why) for line, why in cut
            if 0 <= line - 2 < len(df) and (arm is None or df["arm"].iloc[line - 2] == arm)]
    caution = None
    if trust_last and rows and rows[-1][1] == UNTERMINATED:
        line = rows.pop()[0]
        caution = (f"line {line} of {path}{CAUTION_MARK}it is the last line and no line break follows it: if the "
                   f"file was cut there, its last value ({df[accuracy_col].iloc[line - 2]:g}) may be cut too; check "
                   "it (a whole file ends with a line break)")
    if not rows:
        return df, caution, set()
    df = df.copy()
    df.loc[df.index[[line - 2 for line, _ in rows]], accuracy_col] = np.nan
    fix = (" (a whole last line needs only a line break after it)" if any(w == UNTERMINATED for _, w in rows)
           else "")
    note = (f"{len(rows)} line(s) of {path}{SKIPPED_MARK}looking cut ({name_short_lines(rows)}): the file was cut "
            f"or edited there, so their values cannot be trusted{fix}")
    return df, "; ".join(x for x in (note, caution) if x), {line for line, _ in rows}


def one_line_per_eval(d: pd.DataFrame, runs: Path, accuracy_col: str) -> pd.DataFrame:
    """An arm's rows ``d`` of a study's runs.csv, each (seed, update) once: exact copies of a line are dropped;
    one eval on two lines with different accuracies, or an accuracy outside [0, 1] (runs.csv records fractions),
    is refused.

    Raises
    ------
    CurveError
        Naming the file, the lines and the fix (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix` of
        the study folder holding ``runs``: rebuilt from ``runs/``, else restored from a copy).
    """
    conflicts, exact = repeated_rows(d[["arm", "seed", "update", accuracy_col]], ("arm", "seed", "update"),
                                     [int(i) + 2 for i in d.index])
    fix = restore_runs_csv_fix(Path(runs).parent)
    if conflicts:
        raise CurveError(f"{runs} records the same eval (arm, seed, update) twice with different values: "
                         f"{'; '.join(conflicts)}; which line is right cannot be told: {fix}")
    d = d[~exact]
    bad = (d[accuracy_col] < 0) | (d[accuracy_col] > 1)
    if bad.any():
        raise CurveError(f"{runs}: {accuracy_col} must be a fraction in [0, 1] (runs.csv records fractions), got "
                         f"{d[accuracy_col][bad].iloc[0]:g} at line {int(d.index[bad.to_numpy()][0]) + 2}: {fix}")
    return d
