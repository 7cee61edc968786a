"""The cells of a reference curve's CSV (``--reference-curve FILE.csv``, a study's ``runs.csv``), checked.

Row ``i`` of a frame read by :func:`read_csv_checked` is line ``i + 2`` of the file (line 1 the header;
blank lines are kept as all-NaN rows), so every message names the file, the line and the column:

- :func:`numeric_columns` refuses a cell that is text (``abc``) or infinite (``inf``);
- an empty or ``nan``/``NaN``/``NA`` cell is no error: it is skipped on purpose, because logs exported with
  one row per training step (W&B, TensorBoard) carry the accuracy only on the steps that were evaluated.
  It is not skipped unsaid: :func:`skipped_cells` lists such lines (fully blank lines are no data and are
  not listed), :func:`skipped_note` becomes one of the curve's notes, and :func:`with_skipped` adds it to a
  refusal (e.g. too few evals), so a curve whose evals were all blank says why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .curve_fit import CurveError

__all__ = ["read_csv_checked", "numeric_columns", "skipped_cells", "study_skipped_evals", "skipped_note",
           "with_skipped", "SKIPPED_MARK", "is_skipped_note"]

_SHOWN = 5  # lines named in a note; the rest are counted
#: In every note that says evals of the source were skipped (a CSV's blank cells, a trainer_state's NaN evals):
#: :func:`is_skipped_note` finds them, so that the forecast prints them (they change the curve).
SKIPPED_MARK = " skipped for "


def is_skipped_note(note: str) -> bool:
    """Whether a curve note says evals of its source were skipped (:func:`skipped_note`, a TRL NaN eval)."""
    return SKIPPED_MARK in str(note)


def read_csv_checked(path: Path) -> pd.DataFrame:
    """``path`` read as a CSV, its blank lines kept as all-NaN rows so that row ``i`` is line ``i + 2``.

    Raises
    ------
    CurveError
        The file is empty, not text, or not a CSV pandas can parse (pandas' message, with the path).
    """
    try:
        return pd.read_csv(path, skip_blank_lines=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise CurveError(f"{path} cannot be read as a CSV ({e}); a header line (e.g. update,accuracy) and one "
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


def with_skipped(error: CurveError, note: str | None) -> CurveError:
    """``error`` with the lines skipped (``note`` of :func:`skipped_note`) and the fix appended; as is if none."""
    if note is None:
        return error
    return CurveError(f"{error}; {note} (fill those cells in if they are evals)")
