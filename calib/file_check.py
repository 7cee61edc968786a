"""Checks of a calibration file's ``data`` and ``fitted`` blocks, and the command that rebuilds a file.

:func:`calib.model.load_calibration` refits a calibration from the training rows in the file's
``data`` block. This module makes the two ways a file can disagree with itself fail loudly:

- a damaged ``data`` block (not ``{"columns": [...], "rows": [[...], ...]}``, a column missing, a
  row of the wrong length, a string or null where a finite number belongs): :func:`read_data`
  raises :class:`DamagedField` naming the field (``data.columns``, ``data.rows[i]`` and its
  column), which the loader turns into :class:`CalibrationFileError` with the file and the fix;
- a ``fitted`` block that the refit does not reproduce (an edited slope, a damaged knot):
  :func:`check_fitted` raises :class:`CalibrationFileError` naming the parameter and both values.
  calib's numbers come from the refit, so an edit of ``fitted`` would otherwise be silently ignored.

:func:`rebuild_command` says how to rebuild a file: for the shipped default, the command of
``data/calibration/README.md``; for another file, ``calib fit`` with the settings the file records.
"""

from __future__ import annotations

import math
import shlex
from numbers import Real
from pathlib import Path

import pandas as pd

from .files import json_float

__all__ = ["CalibrationFileError", "DamagedField", "read_data", "check_fitted", "rebuild_command", "GENERIC_FIX",
           "FIT_DEFAULTS"]

#: the settings of ``calib fit`` (and :func:`calib.model.fit_calibration`) when none is given: the one place they
#: are written, so that :func:`rebuild_command` names exactly the options that differ from them
FIT_DEFAULTS = {"forecaster": "forecast_probe", "method": "linear", "cv": "auto", "interval": "cv_plus",
                "confidence_level": 0.9, "include_reference": False}

#: the fix when the file's settings cannot be read (not JSON, a version-1 file)
GENERIC_FIX = "refit it with `calib fit ROWS.csv --out FILE` (or pass --calibration default)"
#: ``fitted`` parameters are compared with the refit's within this relative (and tiny absolute) tolerance
FITTED_RTOL, FITTED_ATOL = 1e-6, 1e-12
_DEFAULT_ROWS = "data/calibration/rows.csv"  # where data/calibration/README.md builds the default from


class CalibrationFileError(ValueError):
    """A calibration file that cannot be used: missing, damaged, not a calibration, or an unknown version."""


class DamagedField(Exception):
    """A field of a calibration file that is missing or malformed: ``field`` (its path in the file, e.g.
    ``data.rows[3]``) and ``problem`` (what is wrong, as a predicate: ``has 7 values ...``)."""

    def __init__(self, field: str, problem: str = "is missing or malformed"):
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def read_data(d: dict, *, text_columns, number_columns, integer_columns=()) -> pd.DataFrame:
    """The training rows of a calibration file's ``data`` block, checked cell by cell.

    Parameters
    ----------
    d : dict
        The parsed file.
    text_columns : sequence of str
        Columns that must be present and hold strings (study, model, task, arm).
    number_columns : sequence of str
        Columns that must be present and hold finite numbers (the forecast, target, budget_value).
    integer_columns : sequence of str
        Columns that must be present and hold integers (seed).

    Returns
    -------
    DataFrame, shape (n_rows, n_columns)
        The rows, ``number_columns`` as float.

    Raises
    ------
    DamagedField
        ``data`` missing or not an object with ``columns`` (unique strings) and ``rows`` (a non-empty
        list of lists); a needed column missing; a row whose length differs from ``columns``; a cell
        of a text column that is not a string, or of a number column that is not a finite number.
    """
    if "data" not in d:
        raise DamagedField("'data'")
    data = d["data"]
    if not isinstance(data, dict):
        raise DamagedField("'data'", f"is malformed: it is a {_kind(data)}, not an object "
                                     '{"columns": [...], "rows": [[...], ...]}')
    columns, rows = data.get("columns"), data.get("rows")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) \
            or len(set(columns)) != len(columns):
        raise DamagedField("data.columns", "is missing or malformed (it must be a list of distinct column names)")
    missing = [c for c in [*text_columns, *number_columns, *integer_columns] if c not in columns]
    if missing:
        raise DamagedField(f"data.columns[{missing[0]!r}]", f"is missing (the columns are {columns})")
    if not isinstance(rows, list) or not rows:
        raise DamagedField("data.rows", "is missing, empty or malformed (it must be a list of rows, each a list of "
                                        f"{len(columns)} values in the order of data.columns)")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(columns):
            what = f"has {len(row)} values" if isinstance(row, list) else f"is a {_kind(row)}, not a list"
            raise DamagedField(f"data.rows[{i}]", f"is malformed: it {what}; data.columns names {len(columns)}")
    for c in text_columns:
        j = columns.index(c)
        for i, row in enumerate(rows):
            if not isinstance(row[j], str):
                raise DamagedField(f"data.rows[{i}][{j}]", f"(column {c!r}) is {row[j]!r}, not a string")
    for c, integer in [*((c, False) for c in number_columns), *((c, True) for c in integer_columns)]:
        j = columns.index(c)
        for i, row in enumerate(rows):
            v = row[j]
            if isinstance(v, bool) or not isinstance(v, int if integer else Real) or not math.isfinite(v):
                raise DamagedField(f"data.rows[{i}][{j}]", f"(column {c!r}) is {v!r}, not "
                                                           + ("an integer" if integer else "a finite number"))
    frame = pd.DataFrame(rows, columns=columns)
    for c in number_columns:
        frame[c] = frame[c].astype(float)
    return frame


def check_fitted(stored, refit: dict, *, path, fix: str, versions_note: str = "") -> None:
    """Refuse a file whose ``fitted`` block differs from the parameters refitted from its ``data``.

    Parameters
    ----------
    stored : object
        The file's ``fitted`` block (JSON: numbers, ``null``/``"inf"`` for non-finite ones).
    refit : dict
        :meth:`calib.model.Calibration.fitted_parameters` of the refit.
    path : path
        The file (named in the message).
    fix : str
        How to rebuild it (:func:`rebuild_command`).
    versions_note : str
        Appended when the installed scikit-learn/MAPIE/numpy differ from those that wrote the file.

    Raises
    ------
    CalibrationFileError
        A parameter differs beyond relative 1e-6 (the message names it, e.g.
        ``fitted.coef.forecast_cost_only``, and both values), is missing, extra, or of another shape.
    """
    problem = _first_difference(stored, refit, "fitted")
    if problem is None:
        return
    raise CalibrationFileError(
        f"calibration file {path}: {problem}. Its fitted block does not match its data: the file was edited or "
        "damaged (calib computes its numbers from a refit of data, so an edit of fitted would be silently ignored; "
        f"it is refused instead){versions_note}. To repair or change the file, {fix}")


def _first_difference(stored, refit, where: str) -> str | None:
    """The first parameter where ``stored`` differs from ``refit`` (a sentence), or None."""
    if isinstance(refit, dict):
        if not isinstance(stored, dict):
            return f"{where} is a {_kind(stored)} where the refit has an object of {sorted(refit)}"
        for k in refit:
            if k not in stored:
                return f"{where}.{k} is missing (refitting the file's data gives {refit[k]!r})"
        extra = [k for k in stored if k not in refit]
        if extra:
            return f"{where}.{extra[0]} is not a parameter of this calibration (the refit has {sorted(refit)})"
        return next((p for k in refit if (p := _first_difference(stored[k], refit[k], f"{where}.{k}"))), None)
    if isinstance(refit, (list, tuple)):
        if not isinstance(stored, list) or len(stored) != len(refit):
            n = f"{len(stored)} values" if isinstance(stored, list) else f"a {_kind(stored)}"
            return f"{where} has {n} where refitting the file's data gives {len(refit)}"
        return next((p for i, (a, b) in enumerate(zip(stored, refit))
                     if (p := _first_difference(a, b, f"{where}[{i}]"))), None)
    new = float(refit)
    try:
        if isinstance(stored, bool):
            raise TypeError(stored)
        old = json_float(stored)
    except (TypeError, ValueError):
        return f"{where} is {stored!r}, not a number (refitting the file's data gives {new!r})"
    same = (math.isnan(old) and math.isnan(new)) or old == new \
        or math.isclose(old, new, rel_tol=FITTED_RTOL, abs_tol=FITTED_ATOL)
    return None if same else f"{where} is {old!r} in the file but refitting the file's data gives {new!r}"


def rebuild_command(path, d, *, default: bool) -> str:
    """How to rebuild calibration file ``path`` (parsed: ``d``), as the tail of an error message.

    ``default``: the shipped file, rebuilt from a gradprobe checkout with the command of
    ``data/calibration/README.md``. Another format-2 file: ``calib fit`` with the settings it records
    (forecaster, method, folds, interval, level) and ``--out`` the file. Otherwise :data:`GENERIC_FIX`.
    """
    if not isinstance(d, dict) or d.get("format_version") != 2:
        return GENERIC_FIX
    opts = []
    forecaster, method = d.get("forecaster"), d.get("method")
    if isinstance(forecaster, str) and forecaster != FIT_DEFAULTS["forecaster"]:
        opts += ["--forecaster", forecaster]
    if isinstance(method, str) and method != FIT_DEFAULTS["method"]:
        opts += ["--method", method]
    studies = (d.get("domain") or {}).get("studies") if isinstance(d.get("domain"), dict) else None
    auto = ("study" if len(studies) >= 2 else "arm") if isinstance(studies, list) else None  # what cv "auto" picks
    if isinstance(d.get("cv"), str) and d["cv"] != auto:
        opts += ["--cv", d["cv"]]
    if isinstance(d.get("interval"), str) and d["interval"] != FIT_DEFAULTS["interval"]:
        opts += ["--interval", d["interval"]]
    if isinstance(d.get("confidence_level"), Real) and d["confidence_level"] != FIT_DEFAULTS["confidence_level"]:
        opts += ["--confidence", repr(d["confidence_level"])]
    if d.get("include_reference") is True:  # --include-grpo only turns it on
        opts.append("--include-grpo")
    if default:
        cmd = " ".join(["calib fit", _DEFAULT_ROWS, *opts, "--out calib/data/calibration.json"])
        return (f"refit it in a gradprobe checkout with `{cmd}` (data/calibration/README.md), or reinstall "
                "gradprobe")
    cmd = " ".join(["calib fit ROWS.csv", *map(shlex.quote, opts), "--out", shlex.quote(str(Path(path)))])
    return (f"refit it with `{cmd}` (ROWS.csv: the rows it was fitted from; `calib rows STUDY_DIR... --out "
            "ROWS.csv` rebuilds them from the studies in its domain), or pass --calibration default")


def _kind(x) -> str:
    return {dict: "object", list: "list", str: "string", type(None): "null", bool: "boolean"}.get(
        type(x), "number" if isinstance(x, Real) else type(x).__name__)
