"""Checks of a calibration file's ``data``, ``forecaster``, ``params`` and ``fitted`` fields, and its rebuild command.

:func:`calib.model.load_calibration` refits a calibration from the training rows in the file's
``data`` block. This module makes the two ways a file can disagree with itself fail loudly:

- a damaged ``data`` block (not ``{"columns": [...], "rows": [[...], ...]}``, a column missing, a
  row of the wrong length, a string or null where a finite number belongs): :func:`read_data`
  raises :class:`DamagedField` naming the field (``data.columns``, ``data.rows[i]`` and its
  column), which the loader turns into :class:`CalibrationFileError` with the file and the fix;
- a ``fitted`` block that the refit does not reproduce (an edited slope, a damaged knot):
  :func:`check_fitted` raises :class:`CalibrationFileError` naming the parameter and both values.
  calib's numbers come from the refit, so an edit of ``fitted`` would otherwise be silently ignored;
- a ``params`` block (the calibrator's settings, e.g. ``params.epsilon`` of the Huber regression) that
  differs from the settings the refit uses: :func:`check_params` refuses it the same way (calib fit
  has no option for them, so an edit would otherwise be silently ignored);
- a damaged ``domain`` block (a field missing, ``models`` not a list of objects with a string ``key``, an
  unknown ``budget_kind``, a reversed ``budget_range``...): :func:`read_domain` raises :class:`DamagedField`
  naming the field (``domain.models``, ``domain.tasks[1].key``), refused at load instead of crashing (or
  misjudging) the domain check of a probe after its compute;
- a top-level ``forecaster`` (or ``domain.forecaster``) that names another forecaster than the
  forecast column its ``data`` holds: :func:`data_forecaster` finds the column, and the loader
  refuses the file naming both fields and the rebuild command for the data's forecaster.

:func:`rebuild_command` says how to rebuild a file: for the shipped default, the command of
``data/calibration/README.md`` (:data:`DEFAULT_COMMAND` when the file cannot even be parsed); for
another file, ``calib fit`` with the settings the file records (:func:`unreadable_fix` when it cannot
be parsed: the command must then name the forecaster the file was fitted for).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from numbers import Real
from pathlib import Path

import numpy as np
import pandas as pd

from gradprobe.outputs import beyond_float, is_json_number, json_number_text, json_short

from .dataset import FORECASTERS
from .domain import BUDGET_KINDS, Domain
from .files import json_float

__all__ = ["CalibrationFileError", "DamagedField", "read_data", "read_domain", "check_domain_matches_data",
           "check_fitted", "check_method", "check_params", "check_forecaster", "check_predictions", "data_forecaster",
           "rebuild_command", "unreadable_fix", "json_spelled", "GENERIC_FIX", "DEFAULT_COMMAND", "FIT_DEFAULTS"]

#: the settings of ``calib fit`` (and :func:`calib.model.fit_calibration`) when none is given: the one place they
#: are written, so that :func:`rebuild_command` names exactly the options that differ from them
FIT_DEFAULTS = {"forecaster": "forecast_probe", "method": "linear", "cv": "auto", "interval": "cv_plus",
                "confidence_level": 0.9, "include_reference": False}
#: the values ``calib fit`` accepts for its choice options (``calib report`` offers a subset: no ``none``, no ``model``)
FIT_CHOICES = {"method": ("linear", "isotonic", "none"), "cv": ("auto", "study", "arm", "model"),
               "interval": ("cv_plus", "split")}

#: the fix for a version-1 file (its forecaster, the first-order gain, is no longer one calib fit corrects)
GENERIC_FIX = "refit it with `calib fit ROWS.csv --out FILE` (or pass --calibration default)"
#: how the shipped default is built (data/calibration/README.md; used when the default cannot be parsed)
DEFAULT_COMMAND = ("calib fit data/calibration/rows.csv --forecaster forecast_cost_only "
                   "--out calib/data/calibration.json")
#: ``fitted`` parameters are compared with the refit's within this relative (and tiny absolute) tolerance
FITTED_RTOL, FITTED_ATOL = 1e-6, 1e-12
_DEFAULT_ROWS = "data/calibration/rows.csv"  # where data/calibration/README.md builds the default from
_AS_GIVEN = object()  # rebuild_command's option(): no recorded value apart from the one given (which may be null)


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
    data = _block(d, "data", '{"columns": [...], "rows": [[...], ...]}')
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
                raise DamagedField(f"data.rows[{i}][{j}]", f"(column {c!r}) is {json_spelled(row[j])}, not a string")
    for c, integer in [*((c, False) for c in number_columns), *((c, True) for c in integer_columns)]:
        j = columns.index(c)
        for i, row in enumerate(rows):
            v = row[j]
            if not is_json_number(v, finite=True, integer=integer):
                huge = integer and beyond_float(v)  # an integer too large for a float: said so
                want = "" if huge else ", not " + ("an integer" if integer else "a finite number")
                raise DamagedField(f"data.rows[{i}][{j}]", f"(column {c!r}) is {json_spelled(v)}{want}")
    frame = pd.DataFrame(rows, columns=columns)
    for c in number_columns:
        frame[c] = frame[c].astype(float)
    return frame


def _block(d: dict, name: str, shape: str) -> dict:
    """``d[name]``, an object; :class:`DamagedField` naming it when it is missing or not an object (``shape``
    says what the object holds)."""
    if name not in d:
        raise DamagedField(f"'{name}'")
    block = d[name]
    if not isinstance(block, dict):
        raise DamagedField(f"'{name}'", f"is malformed: it is a {_kind(block)}, not an object {shape}")
    return block


def read_domain(d: dict) -> Domain:
    """The domain of a format-2 calibration file (its ``domain`` block), checked field by field.

    Every field of :class:`calib.domain.Domain` is checked as ``calib fit`` writes it: ``studies``,
    ``models`` and ``tasks`` non-empty lists of objects with a string ``key`` (and ``name``; a study's
    ``plan_sha256``, a task's ``config`` object, a model's ``dtype`` string or null), ``budget_kind``
    one of :data:`calib.domain.BUDGET_KINDS`, ``budget_range`` two finite positive numbers, low <= high,
    ``arms`` a non-empty list of strings, ``forecaster`` one of :data:`calib.dataset.FORECASTERS`,
    ``rewards`` and ``loss_types`` null (or missing: files fitted before they were recorded) or lists of
    strings. A damaged block would otherwise load and crash :func:`calib.domain.check_domain` (``models``
    a string) or misjudge a probe's domain (a reversed range) after the probe's compute.

    Parameters
    ----------
    d : dict
        The parsed file.

    Returns
    -------
    Domain

    Raises
    ------
    DamagedField
        ``domain`` missing or not an object, or one of its fields missing or malformed: the field is
        named by its path (``domain.models``, ``domain.tasks[1].key``, ``domain.budget_range``).
    """
    dom = _block(d, "domain", "(studies, models, tasks, budget_kind, budget_range, arms, forecaster, rewards, "
                              "loss_types)")
    for f in dataclasses.fields(Domain):
        optional = f.default is not dataclasses.MISSING
        if f.name not in dom:
            if optional:
                continue
            raise DamagedField(f"domain.{f.name}")  # "is missing or malformed", as for the file's other fields
        _DOMAIN_CHECKS[f.name](dom[f.name], f"domain.{f.name}")
    return Domain.from_dict(dom)


def check_domain_matches_data(domain: Domain, data: pd.DataFrame) -> None:
    """Refuse a domain block that disagrees with the file's own training rows: ``calib fit`` records the domain
    of the rows it fits (:func:`calib.domain.domain_of_rows`), so its studies, models, tasks (their keys), arms
    and budget range are those of ``data``. A hand-widened range ([250000, 300000] for rows all at 250000) would
    otherwise pass a probe's budget as inside the domain. Its ``rewards`` and ``loss_types`` are compared with the
    data's ``reward`` and ``loss_type`` columns where the data holds them (a reward added by hand would otherwise be
    judged inside the domain by :func:`calib.domain.check_rewards`); data without them (files written before
    they were) cannot say which reward each arm trained, and leaves the two fields unchecked.

    Parameters
    ----------
    domain : Domain
        :func:`read_domain` of the file.
    data : DataFrame
        :func:`read_data` of the file (columns ``study``, ``model``, ``task``, ``arm``, ``budget_value``).

    Raises
    ------
    DamagedField
        Naming the field, its value and the data's.
    """
    recorded = {"studies": sorted(x["key"] for x in domain.studies), "models": sorted(x["key"] for x in domain.models),
                "tasks": sorted(x["key"] for x in domain.tasks), "arms": sorted(domain.arms)}
    column = {"studies": "study", "models": "model", "tasks": "task", "arms": "arm"}
    for field, keys in recorded.items():
        held = sorted(set(data[column[field]].astype(str)))
        if keys != held:
            name = f"domain.{field}" + ("" if field == "arms" else " keys")
            raise DamagedField(name, f"is {_shown(keys)}, but the file's data rows hold {_shown(held)}: the domain "
                                     "block was edited")
    for field, column in (("rewards", "reward"), ("loss_types", "loss_type")):
        _check_recorded(getattr(domain, field), data, field, column)
    values = data["budget_value"].to_numpy(np.float64)
    if values.size and [float(values.min()), float(values.max())] != [float(v) for v in domain.budget_range]:
        raise DamagedField("domain.budget_range", f"is {list(domain.budget_range)!r}, but the file's data rows span "
                                                  f"[{values.min():g}, {values.max():g}]: the domain block was edited")


def _check_recorded(recorded, data: pd.DataFrame, field: str, column: str) -> None:
    """Refuse ``domain.<field>`` (rewards, loss_types) when the data rows hold ``column`` (reward, loss_type) and its
    distinct values, sorted (null when a row has none: :func:`calib.domain.domain_of_rows`), are not ``recorded``.
    Data without the column (files written before it was written) leaves the field unchecked."""
    if column not in data.columns:
        return
    cells = data[column]
    held = None if cells.isna().any() else sorted({str(v) for v in cells})
    if recorded == held:
        return
    if recorded is None or held is None:
        differ = ""
    else:  # the lists are long (ten rewards): shown cut, so the difference is named
        extra, lost = sorted(set(recorded) - set(held)), sorted(set(held) - set(recorded))
        differ = "; ".join([*([f"it adds {extra}"] if extra else []), *([f"it lacks {lost}"] if lost else [])])
        differ = f" ({differ})" if differ else ""
    raise DamagedField(f"domain.{field}", f"is {_shown(recorded)}, but the file's data rows hold {_shown(held)} in "
                                          f"their {column!r} column{differ}: the domain block was edited")


def _records(value, field: str, what: str, text: tuple, nullable: tuple = (), objects: tuple = ()) -> None:
    """``value`` is a non-empty list of objects (``what``s) whose ``text`` fields are strings, ``nullable``
    fields strings or null (or missing) and ``objects`` fields objects."""
    if not isinstance(value, list) or not value:
        plural = what[:-1] + "ies" if what.endswith("y") else what + "s"
        raise DamagedField(field, f"is {_shown(value)}, not a non-empty list of {plural} (objects with a string "
                                  '"key")')
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DamagedField(f"{field}[{i}]", f"is {_shown(item)}, not a {what} (an object with a string \"key\")")
        for name in text:
            if not isinstance(item.get(name), str):
                raise DamagedField(f"{field}[{i}].{name}", "is missing (it must be a string)" if name not in item
                                   else f"is {_shown(item[name])}, not a string")
        for name in nullable:
            if item.get(name) is not None and not isinstance(item[name], str):
                raise DamagedField(f"{field}[{i}].{name}", f"is {_shown(item[name])}, not a string or null")
        for name in objects:
            if not isinstance(item.get(name), dict):
                raise DamagedField(f"{field}[{i}].{name}", ("is missing" if name not in item else
                                                            f"is {_shown(item[name])}, not an object")
                                   + " (it must be the resolved configuration, an object)")


def _strings(value, field: str, *, nullable: bool = False) -> None:
    """``value`` is a list of strings (non-empty unless ``nullable``, which also takes null)."""
    if nullable and value is None:
        return
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value) or (not nullable and not value):
        what = "null or a list of strings" if nullable else "a non-empty list of strings"
        raise DamagedField(field, f"is {_shown(value)}, not {what}")


def _budget_range(value, field: str) -> None:
    numbers = isinstance(value, list) and len(value) == 2 and all(
        is_json_number(v, finite=True) and v > 0 for v in value)
    if not numbers:
        raise DamagedField(field, f"is {_shown(value)}, not two finite positive numbers [low, high] (the smallest "
                                  "and largest budget of the training rows)")
    if value[0] > value[1]:
        raise DamagedField(field, f"is {value!r}, reversed: its low {value[0]!r} exceeds its high {value[1]!r}")


def _choice(choices: tuple):
    def check(value, field: str) -> None:
        if not isinstance(value, str) or value not in choices:
            raise DamagedField(field, f"is {_shown(value)}, not one of {list(choices)}")
    return check


_DOMAIN_CHECKS = {  # one per field of calib.domain.Domain (read_domain fails loudly on a field without one)
    "studies": lambda v, f: _records(v, f, "study", text=("name", "plan_sha256", "key")),
    "models": lambda v, f: _records(v, f, "model", text=("name", "key"), nullable=("dtype",)),
    "tasks": lambda v, f: _records(v, f, "task", text=("name", "key"), objects=("config",)),
    "budget_kind": _choice(BUDGET_KINDS),
    "budget_range": _budget_range,
    "arms": _strings,
    "forecaster": _choice(FORECASTERS),
    "rewards": lambda v, f: _strings(v, f, nullable=True),
    "loss_types": lambda v, f: _strings(v, f, nullable=True),
}


def json_spelled(value) -> str:
    """A value read from a JSON file as an error message shows it, so that a search of the file finds it: text
    quoted as Python quotes it (``'tiny'``, cut at 60 characters), anything else as JSON spells it (``true``,
    ``null``, ``NaN``, ``Infinity``, ``[true, 2.0]``, ``{"key": "s"}``, cut at 60 characters by
    :func:`gradprobe.outputs.json_short`; never Python's ``True``, ``None``, ``nan``), an integer too large for a
    float as its digits shortened and counted (:func:`gradprobe.outputs.json_number_text`)."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    if beyond_float(value):  # before json_short: Python cannot write an integer of over 4300 digits as text
        return json_number_text(value)
    return json_short(value)


def _shown(value) -> str:
    """A value as an error message shows it (:func:`json_spelled`), a list or an object introduced by its kind:
    ``'tiny'``, ``3``, ``null``, ``true``, ``a list [true, 2.0]``."""
    text = json_spelled(value)
    if isinstance(value, (list, dict)):
        kind = _kind(value)
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} {text}"
    return text


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


def check_method(d: dict, param_names: dict, *, path, fix: str) -> None:
    """Refuse a file whose ``method`` is no calibrator ``calib fit`` fits, or another one than its ``params`` are of.

    Checked before the refit, which fits the method the file names: an edited ``method`` (``"isotonic"`` on a
    linear fit) used to be refused as ``params.feature is missing``, which does not name the field edited.

    Parameters
    ----------
    d : dict
        The calibration file's content (``method``; ``params``, when a dict, is compared by its keys).
    param_names : dict[str, frozenset[str]]
        Each method of :data:`FIT_CHOICES` -> the names of its calibrator's settings (``get_params()``).
    path : path
        The file (named in the message).
    fix : str
        How to rebuild it (:func:`rebuild_command`).

    Raises
    ------
    CalibrationFileError
        ``method`` is missing or not one of :data:`FIT_CHOICES` ``["method"]`` (its value and the allowed ones
        named), or it names a calibrator whose settings are not the ``params`` block's while another method's are
        (both methods named: restore ``method``, or refit with ``calib fit --method``).
    """
    allowed = list(FIT_CHOICES["method"])
    method = d.get("method")
    if not (isinstance(method, str) and method in allowed):
        shown = "missing" if "method" not in d else json_spelled(method)
        raise CalibrationFileError(
            f"calibration file {path} is damaged: field 'method' is {shown}, not one of {allowed} (the calibrator "
            f"`calib fit --method` fitted); to repair or change the file, {fix}")
    params = d.get("params")
    if not isinstance(params, dict) or set(params) == set(param_names[method]):
        return
    owners = [m for m in allowed if set(params) == set(param_names[m])]
    if owners:
        raise CalibrationFileError(
            f"calibration file {path} is damaged: field 'method' is {method!r}, but its params block "
            f"({', '.join(sorted(params))}) is a {owners[0]!r} calibrator's ({method!r} has "
            f"{', '.join(sorted(param_names[method]))}): 'method' was edited (calib refits the method the file "
            f"names, so the edit would change every number it gives; it is refused instead). Restore "
            f"\"method\": \"{owners[0]}\" (the method it was fitted with; one of {allowed}), or, to use {method!r}, "
            f"{fix}")


def check_params(stored, refit: dict, *, path, fix: str, versions_note: str = "") -> None:
    """Refuse a file whose ``params`` block differs from the calibrator settings the refit uses.

    Parameters
    ----------
    stored : object
        The file's ``params`` block (e.g. ``{"alpha": 0.0, "epsilon": 1.35, "max_iter": 1000}``).
    refit : dict
        ``get_params()`` of the refitted calibrator (:func:`calib.estimators.make_estimator`).
    path : path
        The file (named in the message).
    fix : str
        How to rebuild it (:func:`rebuild_command`).
    versions_note : str
        Appended when the installed scikit-learn/MAPIE/numpy differ from those that wrote the file (a
        new scikit-learn may add or change a calibrator setting).

    Raises
    ------
    CalibrationFileError
        A setting differs (numbers beyond relative 1e-6; the message names it, e.g. ``params.epsilon``,
        and both values), is missing, extra, or of another kind.
    """
    problem = _first_difference(stored, refit, "params", gives="the refit uses")
    if problem is None:
        return
    raise CalibrationFileError(
        f"calibration file {path}: {problem}. Its params block does not match the calibrator calib refits: the file "
        "was edited or damaged (calib fit has no option for these settings and the refit always uses its own, so an "
        f"edit of params would be silently ignored; it is refused instead){versions_note}. To repair or change the "
        f"file, {fix}")


def data_forecaster(d: dict) -> str | None:
    """The forecaster whose column the file's ``data`` holds: the one name of
    :data:`calib.dataset.FORECASTERS` among ``data.columns``; None when there is not exactly one (or
    ``data.columns`` is malformed: :func:`read_data` names that)."""
    columns = d.get("data", {}).get("columns") if isinstance(d.get("data"), dict) else None
    held = [c for c in FORECASTERS if isinstance(columns, list) and c in columns]
    return held[0] if len(held) == 1 else None


def check_forecaster(d: dict, *, path, default: bool) -> None:
    """Refuse a format-2 file whose ``forecaster`` (or ``domain.forecaster``) is not the forecaster its data holds.

    Raises
    ------
    CalibrationFileError
        ``data.columns`` holds exactly one forecast column of :data:`calib.dataset.FORECASTERS` and
        ``forecaster`` or ``domain.forecaster`` names another: the message names both fields and gives
        :func:`rebuild_command` for the data's forecaster. (Nothing is raised when the data holds no or
        several forecast columns, or a field is not a string: the loader's field checks name those.)
    """
    held = data_forecaster(d)
    dom = d.get("domain") if isinstance(d.get("domain"), dict) else {}
    for name, value in (("forecaster", d.get("forecaster")), ("domain.forecaster", dom.get("forecaster"))):
        if held is None or not isinstance(value, str) or value == held:
            continue
        raise CalibrationFileError(
            f"calibration file {path} is damaged: its forecaster and its data disagree: field {name} is {value!r} "
            f"but data.columns holds the forecast column {held!r} (the forecaster the calibration was fitted on); "
            f"the file was edited or damaged (a calibration corrects the forecaster it was fitted on, and changing "
            f"{name} cannot refit it for another). To repair it, "
            f"{rebuild_command(path, d, default=default, forecaster=held)}"
            + ("" if default else f"; to calibrate {value}, fit a new file with --forecaster {value}"))


def check_predictions(stored, predictions: dict, *, path, fix: str, versions_note: str = "") -> None:
    """Refuse a file whose ``check`` block differs from the refit's predictions on its training rows.

    Parameters
    ----------
    stored : object
        The file's ``check`` block: ``{"point": [...], "lower": [...], "upper": [...]}``, one value per
        row of ``data`` (accuracy points; ``null``/``"inf"`` for non-finite ones).
    predictions : dict
        name -> ndarray, shape (n_rows,): the refit's ``point``, ``lower`` and ``upper``.
    path, fix, versions_note
        As for :func:`check_fitted`.

    Raises
    ------
    CalibrationFileError
        ``check.NAME`` is missing, malformed, has another length than ``data.rows``, or a value differs
        beyond 1e-6 (the message names it, e.g. ``check.point[0]``, and both values).
    """
    for name, new in predictions.items():
        try:
            values = list(stored[name])
            old = np.array([json_float(v) for v in values], float)
        except (KeyError, TypeError, ValueError) as e:
            raise CalibrationFileError(f"calibration file {path} is damaged: field check.{name} is missing or "
                                       f"malformed; {fix}") from e
        if old.shape != new.shape:
            raise CalibrationFileError(f"calibration file {path} is damaged: field check.{name} has {old.size} values "
                                       f"for the {new.size} rows of data (rows were added or removed); {fix}")
        off = ~np.isclose(old, new, rtol=1e-6, atol=1e-6, equal_nan=True)
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise CalibrationFileError(
                f"calibration file {path}: check.{name}[{i}] is {json_number_text(values[i], repr(float(old[i])))} "
                f"in the file but refitting the file's data gives {float(new[i])!r} ({int(off.sum())} of its "
                f"{old.size} values differ): refitting the calibration does not reproduce its stored {name} "
                f"predictions, so the file was edited or damaged{versions_note}; {fix}")


def _first_difference(stored, refit, where: str, gives: str = "refitting the file's data gives") -> str | None:
    """The first parameter where ``stored`` differs from ``refit`` (a sentence), or None. ``gives``: how the
    sentence introduces the refit's value."""
    if isinstance(refit, dict):
        if not isinstance(stored, dict):
            return f"{where} is a {_kind(stored)} where the refit has an object of {sorted(refit)}"
        for k in refit:
            if k not in stored:
                return f"{where}.{k} is missing ({gives} {json_spelled(refit[k])})"
        extra = [k for k in stored if k not in refit]
        if extra:
            return f"{where}.{extra[0]} is not a parameter of this calibration (the refit has {sorted(refit)})"
        return next((p for k in refit if (p := _first_difference(stored[k], refit[k], f"{where}.{k}", gives))), None)
    if isinstance(refit, (list, tuple)):
        if not isinstance(stored, list) or len(stored) != len(refit):
            n = f"{len(stored)} values" if isinstance(stored, list) else f"a {_kind(stored)}"
            return f"{where} has {n} where {gives} {len(refit)}"
        return next((p for i, (a, b) in enumerate(zip(stored, refit))
                     if (p := _first_difference(a, b, f"{where}[{i}]", gives))), None)
    if isinstance(refit, (bool, str)) or refit is None:  # a setting (params.increasing...): compared as it is
        same = type(stored) is type(refit) and stored == refit
        return None if same else f"{where} is {json_spelled(stored)} in the file but {gives} {json_spelled(refit)}"
    new = float(refit)
    try:
        old = json_float(stored)
    except ValueError:
        return f"{where} is {json_spelled(stored)}, not a number ({gives} {refit if type(refit) is int else new!r})"
    same = (math.isnan(old) and math.isnan(new)) or old == new \
        or math.isclose(old, new, rel_tol=FITTED_RTOL, abs_tol=FITTED_ATOL)
    if same and isinstance(refit, int) and not float(stored).is_integer():  # max_iter 1000.5 is not 1000
        same = False
    return None if same else (f"{where} is {json_number_text(stored, repr(old))} in the file but {gives} "
                              f"{refit if type(refit) is int else new!r}")


def rebuild_command(path, d, *, default: bool, forecaster: str | None = None) -> str:
    """How to rebuild calibration file ``path`` (parsed: ``d``), as the tail of an error message.

    ``default``: the shipped file, rebuilt from a gradprobe checkout with the command of
    ``data/calibration/README.md`` (:data:`DEFAULT_COMMAND` when ``d`` is not a format-2 file); no
    ``--calibration default`` alternative is offered, since that is this file. Another format-2 file:
    ``calib fit`` with the settings it records (forecaster, method, folds, interval, level) and
    ``--out`` the file. A version-1 file: :data:`GENERIC_FIX`. ``forecaster``: the forecaster to name
    instead of the file's ``forecaster`` field (the one its data holds, when the two disagree). A ``forecaster``
    field that is not text (true, null, a list) is replaced by the forecaster whose column the data holds
    (:func:`data_forecaster`; without ``--forecaster`` calib fit would fit its default, another calibration), or,
    when the data does not say, by the placeholder ``--forecaster FORECASTER``. A recorded value ``calib fit``
    would refuse (``method`` "isotonicx", ``confidence_level`` 1.5) is not repeated: the command names a
    placeholder (``--method METHOD``) and says which value was bad, as the file spells it (``true``, not ``True``).
    """
    if not isinstance(d, dict) or d.get("format_version") != 2:
        return unreadable_fix(path, default=True) if default else GENERIC_FIX
    opts, invalid = [], []

    def option(flag: str, value, valid, recorded=_AS_GIVEN) -> None:  # a value calib fit would refuse: a placeholder
        if valid(value):
            opts.extend([flag, value])
        else:  # the note shows the file's value as the file spells it (true, not True): ``recorded`` when given
            opts.extend([flag, flag[2:].upper()])
            shown = json_spelled(value if recorded is _AS_GIVEN else recorded)
            invalid.append(f"{flag[2:].upper()}: the file's {shown} is not a valid {flag}")

    method = d.get("method")
    if forecaster is None and "forecaster" in d and not isinstance(d["forecaster"], str):
        # true, null, a list: the data's forecast column says which forecaster the file was fitted on (without
        # --forecaster, calib fit would fit its default, another calibration); a placeholder when it does not say
        forecaster = data_forecaster(d)
        if forecaster is None:
            option("--forecaster", d["forecaster"], lambda v: False)
    forecaster = forecaster or d.get("forecaster")
    if isinstance(forecaster, str) and forecaster != FIT_DEFAULTS["forecaster"]:
        option("--forecaster", forecaster, lambda v: v in FORECASTERS)
    if isinstance(method, str) and method != FIT_DEFAULTS["method"]:
        option("--method", method, lambda v: v in FIT_CHOICES["method"])
    studies = (d.get("domain") or {}).get("studies") if isinstance(d.get("domain"), dict) else None
    auto = ("study" if len(studies) >= 2 else "arm") if isinstance(studies, list) else None  # what cv "auto" picks
    if isinstance(d.get("cv"), str) and d["cv"] != auto:
        option("--cv", d["cv"], lambda v: v in FIT_CHOICES["cv"])
    if isinstance(d.get("interval"), str) and d["interval"] != FIT_DEFAULTS["interval"]:
        option("--interval", d["interval"], lambda v: v in FIT_CHOICES["interval"])
    level = d.get("confidence_level")
    # any recorded level other than the default is repeated; one calib fit would refuse (true, "0.9", null, a
    # huge integer) is shown as an invalid --confidence (placeholder CONFIDENCE, "the file's true is not a
    # valid --confidence"), not dropped: the command would refit at the default level
    if "confidence_level" in d and level != FIT_DEFAULTS["confidence_level"]:
        shown = json_number_text(level) if is_json_number(level) else repr(level)
        option("--confidence", shown, lambda v: is_json_number(level, finite=True) and 0 < level < 1, level)
    if d.get("include_reference") is True:  # --include-grpo only turns it on
        opts.append("--include-grpo")
    which = f" ({'; '.join(invalid)}: give the value it was fitted with, see `calib fit --help`)" if invalid else ""
    if default:
        cmd = " ".join(["calib fit", _DEFAULT_ROWS, *opts, "--out calib/data/calibration.json"])
        return (f"refit it in a gradprobe checkout with `{cmd}`{which} (data/calibration/README.md), or reinstall "
                "gradprobe")
    cmd = " ".join(["calib fit ROWS.csv", *map(shlex.quote, opts), "--out", shlex.quote(str(Path(path)))])
    return (f"refit it with `{cmd}`{which} (ROWS.csv: the rows it was fitted from; `calib rows STUDY_DIR... --out "
            "ROWS.csv` rebuilds them from the studies in its domain), or pass --calibration default")


def unreadable_fix(path, *, default: bool, in_place: bool = True) -> str:
    """How to rebuild a calibration file whose settings cannot be read (not valid JSON), as the tail of an error.

    ``default``: the shipped file: :data:`DEFAULT_COMMAND` (data/calibration/README.md), run in a
    gradprobe checkout, or reinstall. Another file: ``calib fit`` with ``--out`` the file's own path when
    ``in_place`` (it opens as a calibration file, which ``calib fit --out`` replaces:
    :func:`calib.model.is_calibration_file`), else a new ``calibration.json`` beside it (``calib fit`` refuses to
    overwrite a file it did not write), and a ``--forecaster`` that must be the one it was fitted for (the choices
    listed: calib fit's default, ``forecast_probe``, would silently fit a calibration of another forecaster).
    """
    if default:
        return (f"refit it in a gradprobe checkout with `{DEFAULT_COMMAND}` (data/calibration/README.md), or "
                "reinstall gradprobe")
    path = Path(path)
    if not in_place:
        path = path.with_name("calibration.json" if path.name != "calibration.json" else "calibration_refit.json")
    out = shlex.quote(str(path))
    return (f"refit it with `calib fit ROWS.csv --forecaster FORECASTER --out {out}`, where FORECASTER is the "
            f"forecaster it was fitted for (one of {', '.join(FORECASTERS)}; without --forecaster calib fit fits "
            f"{FIT_DEFAULTS['forecaster']}, a different calibration) and with the other options it was fitted with "
            "(ROWS.csv: the rows it was fitted from; `calib rows STUDY_DIR... --out ROWS.csv` rebuilds them), "
            "or pass --calibration default")


def _kind(x) -> str:
    return {dict: "object", list: "list", str: "string", type(None): "null", bool: "boolean"}.get(
        type(x), "number" if isinstance(x, Real) else type(x).__name__)
