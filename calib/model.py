"""A fitted calibration: calibrator + conformal intervals + domain, saved as a versioned JSON file.

The file holds no pickled code: the settings, the versions that fitted it, the fitted parameters
(``fitted``: for people reading it, and verified), its domain (:class:`calib.domain.Domain`: studies,
models and tasks by resolved configuration, budget kind and range, arms, the corrected forecaster
column) and the training rows themselves (``data``; a study gives tens of rows). Loading checks
``data`` cell by cell, refits the calibrator and the MAPIE conformal regressor on those rows
(milliseconds), and checks that the refit uses the stored calibrator settings (``params``) and
reproduces the stored ``fitted`` parameters (relative 1e-6: an edited or damaged ``params`` or
``fitted`` block is refused, never silently ignored) and the stored predictions on the rows
(``check``). A damaged file (a bad ``data`` cell, row or column, or a malformed ``domain`` field is
named), a file whose
``forecaster`` is not its data's forecast column, a file of an unknown format version, or one
whose refit differs (e.g. a scikit-learn/MAPIE change) is refused with :class:`CalibrationFileError`,
which names the file, the field and the fix (:mod:`calib.file_check`: for the shipped default, the
command of ``data/calibration/README.md``).

Format versions: 2 (this one) corrects a forecaster column of :mod:`calib.dataset`
(``forecast_probe`` by default). Version 1 files (the first shipped default,
``calib/data/calibration.json``) corrected the probe's raw first-order gain (``predicted_gain``)
and recorded task names only; they still load (``legacy``), are applied to the first-order gain
as before, and :func:`calib.domain.check_domain` says that their tasks are compared by name.

``calib fit ROWS.csv --out FILE`` writes one; ``calib apply`` and ``gradprobe probe --calibration
FILE|default`` apply one (:mod:`calib.apply`).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import mapie
import numpy as np
import pandas as pd
import scipy
import sklearn
from threadpoolctl import threadpool_limits

from gradprobe import __version__
from gradprobe.forecast.curve_sources import truncated_hint
from gradprobe.forecast.text_files import not_utf8, read_source_text
from gradprobe.outputs import is_json_number, json_number_text, json_short

from .dataset import BUDGET, FORECASTERS, REFERENCE_ARM, rows_header, select_rows
from .domain import BUDGET_KINDS, Domain, domain_of_rows
from .estimators import make_estimator
from .file_check import (FIT_CHOICES, FIT_DEFAULTS, CalibrationFileError, DamagedField, check_domain_matches_data,
                         check_fitted, check_forecaster, check_method, check_params, check_predictions, read_data,
                         read_domain, rebuild_command, unreadable_fix)
from .files import json_safe, write_json
from .validation import (PLURAL, check_confidence_level, conformal_regressor, group_labels, infinite_interval_note,
                         predict_interval)

FORMAT = "gradprobe-calibration"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: the largest ``format_version`` taken for a newer gradprobe's format (upgrade advice); a larger one is damage
PLAUSIBLE_VERSION = 1000
DEFAULT_NAME = "calibration.json"
_DATA_COLUMNS = ("study", "model", "task", "arm", "seed", "budget_value")
#: Columns the data block records after the target where the rows hold them: what each arm trained, so the loader
#: can check ``domain.rewards`` and ``domain.loss_types`` against them (:func:`calib.file_check`).
_RECORD_COLUMNS = ("reward", "loss_type")


@dataclass
class Calibration:
    """A calibrator of one forecaster, fitted on study rows, with conformal intervals and its domain.

    Attributes
    ----------
    forecaster : str
        The corrected forecast column (``forecast_probe``...; ``predicted_gain`` in a version-1 file).
    method : {"linear", "isotonic", "none"}
    cv : {"study", "arm", "model"}
        Grouping of the conformal folds (:func:`calib.validation.group_labels`).
    interval : {"cv_plus", "split"}
    confidence_level : float
    include_reference : bool
    rows : DataFrame
        Training rows (study, model, task, arm, seed, budget_value, the forecast, target).
    counts : dict
        Row counts of :func:`calib.dataset.select_rows`.
    domain : Domain
    estimator : fitted calibrator (all rows)
    regressor : fitted MAPIE conformal regressor
    versions : dict
        Of the software that fitted it (from the file when loaded).
    format_version : int
        1 for a legacy file (see the module docstring).
    features : tuple of str
        The calibrator's input columns: ``(forecaster,)`` (a version-1 file may list more).
    """

    forecaster: str
    method: str
    cv: str
    interval: str
    confidence_level: float
    include_reference: bool
    rows: pd.DataFrame
    counts: dict
    domain: Domain
    estimator: object = None
    regressor: object = None
    versions: dict = field(default_factory=dict)
    created: str = ""
    format_version: int = FORMAT_VERSION
    features: tuple = ()

    def __post_init__(self):
        self.features = tuple(self.features) or (self.forecaster,)

    @property
    def budget(self) -> str:
        """The budget kind the calibration predicts at (``tokens``)."""
        return self.domain.budget_kind

    @property
    def legacy(self) -> bool:
        """A version-1 calibration of the first-order gain."""
        return self.format_version == 1

    def _fit(self) -> "Calibration":
        X, y = self.rows[list(self.features)].to_numpy(float), self.rows["target"].to_numpy(float)
        with threadpool_limits(limits=1, user_api="blas"):  # tiny fit: threads only add contention
            self.estimator = make_estimator(self.method).fit(X, y)
        self.regressor = conformal_regressor(make_estimator(self.method), X, y, group_labels(self.rows, self.cv),
                                             confidence_level=self.confidence_level, interval=self.interval)
        return self

    def predict(self, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Calibrated gain vs GRPO and its interval (accuracy points), each shape (n_rows,).

        Parameters
        ----------
        X : DataFrame with the feature column(s) (:attr:`features`, e.g. ``forecast_probe``; other columns are
            ignored), or a 2-D array, shape (n_rows, n_features), in that order. Every value finite.

        Returns
        -------
        (point, lower, upper)
            ``point``: the calibrator fitted on all rows; bounds: the conformal interval at
            ``confidence_level`` for one training run (+-inf with too few rows for that level).
            No rows (e.g. an empty DataFrame with the column): three empty float arrays.

        Raises
        ------
        TypeError
            ``X`` is neither a DataFrame nor an array-like (e.g. None, a str, a dict).
        ValueError
            A DataFrame without a needed column (named), a non-numeric value, an array that is not 2-D with one
            column per feature (e.g. a flat list), or a NaN or infinite value (its column and rows named: a
            forecaster gives NaN where it cannot say; drop those rows). Each message names the column(s) and
            the fix.
        """
        X = self._feature_matrix(X)
        if not len(X):
            return np.empty(0), np.empty(0), np.empty(0)
        _, lo, hi = predict_interval(self.regressor, X)
        return self.estimator.predict(X), lo, hi

    def _feature_matrix(self, X) -> np.ndarray:
        """``X`` as a finite float array (n_rows, n_features) for :meth:`predict`, or the error it describes."""
        cols = list(self.features)
        need = f"Calibration.predict needs a pandas DataFrame with the column(s) {cols}"
        if isinstance(X, pd.DataFrame):
            missing = [c for c in cols if c not in X.columns]
            if missing:
                raise ValueError(f"{need}; the DataFrame lacks {missing} (it has {list(X.columns)[:8]}): name the "
                                 f"forecast column {missing[0]!r} (the rows of calib.build_rows have it)")
            labels, X = list(X.index), X[cols]
        elif X is None or isinstance(X, (str, bytes, dict)):
            raise TypeError(f"{need}, got {type(X).__name__}: pass e.g. pandas.DataFrame({{{cols[0]!r}: [...]}})")
        else:
            labels = None
        try:
            a = np.asarray(X, dtype=float)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{need}, holding numbers (forecast gains vs GRPO, accuracy points); a value is not a "
                             f"number ({e})") from e
        if a.ndim != 2 or a.shape[1] != len(cols):
            raise ValueError(f"{need} (or a 2-D array of shape (n_rows, {len(cols)})), got a {type(X).__name__} of "
                             f"shape {a.shape}: pass e.g. pandas.DataFrame({{{cols[0]!r}: values}})")
        bad = ~np.isfinite(a)
        if bad.any():
            col = cols[int(np.flatnonzero(bad.any(axis=0))[0])]
            rows = np.flatnonzero(bad.any(axis=1))
            shown = [labels[i] for i in rows[:5]] if labels is not None else rows[:5].tolist()
            raise ValueError(f"{need} holding finite numbers; column {col!r} has {len(rows)} NaN or infinite "
                             f"value(s) (rows {shown}{', ...' if len(rows) > 5 else ''}): a forecaster gives NaN "
                             f"where it cannot say; drop those rows first (for NaN: X.dropna(subset={cols}))")
        return a

    def infinite_interval_note(self) -> str | None:
        """Why this calibration's conformal intervals are infinite, with the fix (a lower confidence level, or more
        rows); None when they are finite (:func:`calib.validation.infinite_interval_note`: a finite interval at level
        L needs at least L / (1 - L) conformity scores, 999 at 99.9%)."""
        return infinite_interval_note(self.confidence_level, getattr(self.regressor, "n_conformity_scores_", None),
                                      self.interval)

    def fitted_parameters(self) -> dict:
        """The fitted map in readable form (slope/intercept, isotonic knots, or nothing for ``none``)."""
        e = self.estimator
        if self.method == "linear":
            return {"coef": dict(zip(self.features, map(float, e.coef_))), "intercept": e.intercept_,
                    "scale": e.scale_}
        if self.method == "isotonic":
            return {"X_thresholds": e.isotonic_.X_thresholds_.tolist(),
                    "y_thresholds": e.isotonic_.y_thresholds_.tolist()}
        return {}

    def to_dict(self) -> dict:
        """The JSON content of the calibration file (format version 2)."""
        if self.legacy:
            raise CalibrationFileError("a version-1 calibration is read-only; refit it with `calib fit` to save it")
        point, lo, hi = self.predict(self.rows)
        data = self.rows[list(_DATA_COLUMNS) + [self.forecaster, "target"]
                         + [c for c in _RECORD_COLUMNS if c in self.rows.columns]]
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "created": self.created or _now(),
            "versions": self.versions or software_versions(),
            "target": f"realized gain vs {REFERENCE_ARM} (accuracy points) of one training run at the study's "
                      f"{self.budget} budget, as f({self.forecaster})",
            "forecaster": self.forecaster, "method": self.method, "params": self.estimator.get_params(),
            "cv": self.cv, "interval": self.interval, "confidence_level": self.confidence_level,
            "include_reference": self.include_reference, "domain": self.domain.to_dict(),
            "training": {"rows": int(len(self.rows)), "counts": self.counts},
            "fitted": self.fitted_parameters(),
            "check": {name: json_safe([float(x) for x in a]) for name, a in (("point", point), ("lower", lo),
                                                                            ("upper", hi))},
            "data": {"columns": list(data.columns), "rows": data.astype(object).values.tolist()},
        }

    def save(self, path: str | Path) -> Path:
        """Write the calibration JSON atomically (:func:`calib.files.write_json`: fsynced temporary file, then
        rename; NaN -> null, +-inf -> "inf"/"-inf"); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_json(path, self.to_dict(), indent=1)


def fit_calibration(rows: pd.DataFrame, *, forecaster: str = FIT_DEFAULTS["forecaster"],
                    method: str = FIT_DEFAULTS["method"], cv: str = FIT_DEFAULTS["cv"],
                    interval: str = FIT_DEFAULTS["interval"],
                    confidence_level: float = FIT_DEFAULTS["confidence_level"],
                    include_reference: bool = FIT_DEFAULTS["include_reference"]) -> Calibration:
    """Select rows (:func:`calib.dataset.select_rows`) and fit a calibrator with conformal intervals.

    Parameters
    ----------
    rows : DataFrame
        :func:`calib.dataset.build_rows_many` (or its CSV).
    forecaster : str
        The forecast column to correct (:data:`calib.dataset.FORECASTERS`).
    method : {"linear", "isotonic", "none"}
    cv : {"auto", "study", "arm", "model"}
        Grouping of the conformal folds; ``auto``: ``study`` with 2 or more studies, else ``arm``.
    interval, confidence_level, include_reference
        See :func:`calib.validation.conformal_regressor` and :func:`calib.dataset.select_rows`.

    Raises
    ------
    TypeError
        ``rows`` is not a pandas DataFrame (e.g. a list of row dicts): the message says to pass one;
        ``confidence_level`` is no number (the string "0.9", True: :func:`calib.validation.check_confidence_level`).
    calib.dataset.RowsError
        Missing columns, an unknown forecaster, one run (study, arm, seed) on two rows, a paired target that
        is not its run's realized accuracy minus grpo's, a single arm with a forecast, no rows.
    ValueError
        Unknown method, interval or cv; ``confidence_level`` not strictly between 0 and 1
        (:func:`calib.validation.check_confidence_level`); fewer than 2 groups for the chosen cv; a forecast
        column with one value over the selected rows (method linear or isotonic: no slope to fit); rows of several
        budget kinds, or of one that is not in :data:`calib.domain.BUDGET_KINDS` (a file fitted on it could not
        be loaded).
    """
    if not isinstance(rows, pd.DataFrame):
        raise TypeError(f"fit_calibration: rows is a {type(rows).__name__}, not a pandas DataFrame; pass the rows "
                        "table as a DataFrame, e.g. calib.dataset.read_rows(PATH) of a `calib rows STUDY_DIR... --out "
                        "ROWS.csv` file (or pandas.DataFrame(rows) of a list of row dicts)")
    make_estimator(method)  # validates the name before any work
    check_confidence_level(confidence_level)  # before float(): 5 is reported as 5, as calib.report_metrics does
    sel, counts = select_rows(rows, forecaster=forecaster, include_reference=include_reference)
    if cv == "auto":
        cv = "study" if sel["study"].nunique() >= 2 else "arm"
    n_groups = len(set(group_labels(sel, cv)))
    if n_groups < 2:
        raise ValueError(f"conformal folds by {cv} need at least 2 distinct {PLURAL[cv]}, the rows have {n_groups}; "
                         "fold by arm (cv='arm' in Python, --cv arm on the command line) or add studies")
    _check_spread(sel, forecaster, method)
    budgets = set(sel["budget"]) if "budget" in sel.columns else {BUDGET}
    if len(budgets) != 1:
        raise ValueError(f"the rows mix budget kinds {sorted(budgets)}; fit one kind at a time")
    if not budgets <= set(BUDGET_KINDS):
        raise ValueError(f"the rows' budget kind {budgets.pop()!r} is not one of {list(BUDGET_KINDS)}; rebuild the "
                         "rows with `calib rows STUDY_DIR... --out ROWS.csv` (its budget column is always tokens)")
    cal = Calibration(forecaster=forecaster, method=method, cv=cv, interval=interval,
                      confidence_level=float(confidence_level), include_reference=include_reference,
                      rows=sel, counts=counts, domain=domain_of_rows(sel, forecaster=forecaster,
                                                                     budget_kind=budgets.pop()),
                      versions=software_versions(), created=_now())
    return cal._fit()


def _check_spread(sel: pd.DataFrame, forecaster: str, method: str) -> None:
    """Refuse fitting a correction (``method`` other than none) on a forecast column with one value: the slope
    of realized on forecast gain is not identified (the fit would be an intercept presented as a map)."""
    values = sel[forecaster].astype(float)
    if method != "none" and values.nunique() < 2:
        raise ValueError(f"the forecast column {forecaster!r} has one value ({values.iloc[0]:g}) on all {len(sel)} "
                         "rows selected for the fit: a correction of it cannot be fitted (no spread of forecasts to "
                         "learn a slope from); rebuild the rows with `calib rows STUDY_DIR... --out ROWS.csv`, or "
                         "choose another --forecaster")


def load_calibration(spec: str | Path) -> Calibration:
    """Load a calibration file (``default``: the one shipped with the package), refit and verify it.

    Parameters
    ----------
    spec : path or "default"

    Raises
    ------
    CalibrationFileError
        No default is shipped, ``spec`` is an empty or blank string, the file is missing, cannot be parsed (empty,
        truncated, not UTF-8 text or not valid JSON: :func:`_parsed` says which, with the fix), is not a
        calibration file, lacks a field (named), has a damaged ``data`` block (a missing column, a row of the wrong
        length, a non-number where a number belongs: the cell is named) or ``domain`` block (a field
        missing or malformed, e.g. ``domain.models`` not a list, a reversed ``domain.budget_range``:
        :func:`calib.file_check.read_domain` names it), a top-level ``confidence_level`` that is no number in
        (0, 1), an ``include_reference`` that is no JSON boolean or disagrees with the rows (false with rows of grpo
        in its ``data``, true with rows of grpo left out by its ``training.counts``) or a ``format_version`` that is
        no integer (by :func:`gradprobe.outputs.is_json_number`: ``"0.9"``, ``true`` and null are no numbers; the
        field and its value are named), has a format version this
        calib does not read (a newer one up to :data:`PLAUSIBLE_VERSION`: upgrade; a larger one is damage) or one
        that does not match its content (:func:`_check_version`), its ``forecaster`` names another forecaster than
        its data's column, its ``params`` (calibrator settings) or ``fitted`` parameters differ from the refit's
        (edited or damaged: the parameter and both values are named; a version-1 file without them still loads),
        or its refit does not reproduce its stored predictions ``check`` (the first differing value is
        named; or scikit-learn/MAPIE versions differ in a way that matters): the message names the
        file, says which, and how to rebuild it.
    """
    path = resolve(spec)
    d = _parsed(path)
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise CalibrationFileError(f"{path} is not a gradprobe calibration file (no \"format\": \"{FORMAT}\"); "
                                   "write one with `calib fit ROWS.csv --out FILE`")
    version = d.get("format_version")
    if not is_json_number(version, integer=True):  # true would read as 1, 2.0 as 2: the field is an integer
        raise CalibrationFileError(f"calibration file {path} is damaged: field 'format_version' "
                                   + ("is missing" if "format_version" not in d else f"is {_json_shown(version)}")
                                   + f", not an integer (the calibration format version: this calib reads versions "
                                   f"{list(READABLE_VERSIONS)}); {rebuild_command(path, d, default=_is_default(path))}")
    _check_version(d, version, path)
    fix = rebuild_command(path, d, default=_is_default(path))
    if version == 2:
        check_forecaster(d, path=path, default=_is_default(path))
    check_method(d, {m: frozenset(make_estimator(m).get_params()) for m in FIT_CHOICES["method"]}, path=path, fix=fix)
    try:
        cal = _from_v1(d) if version == 1 else _from_v2(d)
        stored = d["check"]
        fitted = d["fitted"] if version >= 2 or "fitted" in d else None  # a version-1 file may lack it
        params = d["params"] if version >= 2 or "params" in d else None
    except DamagedField as e:
        raise CalibrationFileError(f"calibration file {path} is damaged: field {e.field} {e.problem}; {fix}") from e
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrationFileError(f"calibration file {path} is damaged: field {_field(e)} is missing or malformed; "
                                   f"{fix}") from e
    try:
        cal._fit()
        point, lo, hi = cal.predict(cal.rows)
    except ValueError as e:  # rows that passed read_data but cannot be fitted (e.g. one arm left for the folds)
        raise CalibrationFileError(f"calibration file {path} is damaged: refitting its data fails ({e}); {fix}") from e
    versions = d.get("versions") if isinstance(d.get("versions"), dict) else {}
    note = "" if _vs(versions) == _vs(software_versions()) else \
        f" (or, if it is intact, the installed libraries fit differently: fitted with {_vs(versions)}; installed " \
        f"{_vs(software_versions())})"
    if params is not None:
        check_params(params, cal.estimator.get_params(), path=path, fix=fix, versions_note=note)
    if fitted is not None:
        check_fitted(fitted, cal.fitted_parameters(), path=path, fix=fix, versions_note=note)
    check_predictions(stored, {"point": point, "lower": lo, "upper": hi}, path=path, fix=fix, versions_note=note)
    return cal


def _parsed(path: Path):
    """The JSON value of calibration file ``path``, read by the shared reader of JSON sources
    (:func:`gradprobe.forecast.text_files.read_source_text`: UTF-8, a leading byte-order mark dropped, a NUL byte
    refused).

    Raises
    ------
    CalibrationFileError
        Naming the file, what is wrong with it and the fix: it cannot be read (OSError); it is calibration rows
        (:func:`_refuse_rows_file`); its bytes are not UTF-8 text, and what they are instead (UTF-16: convert it;
        gzip-compressed: decompress it; a tail of NUL bytes: a write cut short, whose text before them is no
        calibration either, so re-copy it or refit it; binary: :func:`gradprobe.forecast.text_files.not_utf8`); it is
        empty or holds only whitespace (nothing was written to it); its JSON ends mid-value (truncated,
        :func:`gradprobe.forecast.curve_sources.truncated_hint`: re-copy it, or refit it); it is otherwise not valid
        JSON (damaged: refit it). The refit is :func:`calib.file_check.unreadable_fix`'s, in place where ``calib fit
        --out`` would replace the file (one that opens as a calibration, or an empty or whitespace-only one:
        :func:`is_blank_file`).
    """
    def fix() -> str:
        in_place = is_calibration_file(path) or is_blank_file(path)
        return unreadable_fix(path, default=_is_default(path), in_place=in_place)

    try:
        text = read_source_text(path)
    except OSError as e:
        raise CalibrationFileError(f"cannot read calibration file {str(path)!r}: {e}") from e
    except UnicodeDecodeError as e:
        _refuse_rows_file(path)
        what = not_utf8(path, e, False, json_fix="")  # the curve readers' rewrite is no calibration's fix
        if _nul_tail(bytes(getattr(e, "object", b"") or b"")):  # the text before the NULs is a calibration cut short
            raise CalibrationFileError(f"calibration file {path} cannot be read as JSON: {what.split('; ')[0]}; the "
                                       "text before them is a calibration cut short, not one: re-copy it from where "
                                       f"it was copied, or {fix()}") from None
        raise CalibrationFileError(f"calibration file {path} cannot be read as JSON: {what}; or {fix()}") from None
    if not text.strip():
        what = "is empty (0 bytes)" if not text else f"holds only whitespace ({len(text.encode())} bytes)"
        raise CalibrationFileError(f"calibration file {path} {what}: no calibration was written to it (a write that "
                                   f"never happened, or a copy of nothing); re-copy it, or {fix()}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        _refuse_rows_file(path)
        what = truncated_hint(path, e).split("; ")[0]
        if what.startswith("the file is truncated"):
            raise CalibrationFileError(f"calibration file {path} is damaged: not valid JSON ({e}): {what}; re-copy it "
                                       f"from where it was copied, or {fix()}") from e
        raise CalibrationFileError(f"calibration file {path} is damaged: not valid JSON ({e}); {fix()}") from e
    except ValueError as e:  # an integer beyond Python's int-to-text limit
        raise CalibrationFileError(f"calibration file {path} is damaged: not valid JSON ({e}); {fix()}") from e


def _nul_tail(raw: bytes) -> bool:
    """Whether the bytes ``raw`` end in NUL bytes and hold none before them (a write cut short, as
    :func:`gradprobe.forecast.text_files.not_utf8` tells it)."""
    return b"\x00" in raw and not raw[raw.index(b"\x00"):].strip(b"\x00")


#: Largest file :func:`is_blank_file` reads to tell whether it holds only whitespace (bytes).
_BLANK_READ_LIMIT = 1 << 20


def is_blank_file(path: str | Path) -> bool:
    """Whether ``path`` is a file that holds nothing: empty (0 bytes), or only whitespace as UTF-8 text (a leading
    byte-order mark included; read when at most 1 MiB). ``calib fit --out`` writes over one (nothing to lose:
    :func:`calib.cli._check_out_file`), so the refit of such a calibration file is in place, under its own name.
    Never raises: an unreadable file is not one."""
    try:
        path = Path(path)
        size = path.stat().st_size if path.is_file() else -1
        if size < 0 or size > _BLANK_READ_LIMIT:
            return False
        return size == 0 or not path.read_text(encoding="utf-8-sig").strip()
    except (OSError, UnicodeDecodeError):
        return False



def is_calibration_file(path: str | Path) -> bool:
    """Whether ``path`` is a file ``calib fit`` wrote (so ``calib fit --out`` may replace it): a JSON object with
    ``"format": "gradprobe-calibration"`` (:data:`FORMAT`, what :func:`load_calibration` first checks), or a file
    that is no valid JSON (cut short) but opens as ``calib fit`` writes one: ``{`` then that format marker within
    its first 200 characters (the advice of a damaged file is to refit it in place: :func:`calib.file_check.
    unreadable_fix`). Never raises: an unreadable file is not one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        d = json.loads(text)
    except ValueError:
        head = text[:200].lstrip()
        return head.startswith("{") and f'"format": "{FORMAT}"' in head
    return isinstance(d, dict) and d.get("format") == FORMAT


def _refuse_rows_file(path: Path) -> None:
    """CalibrationFileError when ``path`` (no valid JSON) is calibration rows (:func:`calib.dataset.rows_header`):
    a rows CSV passed as ``--calibration`` by mistake; the fix fits a calibration from it into a new file (refitting
    "in place" would overwrite the rows)."""
    if rows_header(path) is None:
        return
    new, given = shlex.quote(str(Path(path).with_name("calibration.json"))), shlex.quote(str(path))
    raise CalibrationFileError(f"{path} looks like calibration rows (a CSV of `calib rows`), not a calibration file "
                               f"(the JSON `calib fit` writes); fit one from it with `calib fit {given} "
                               f"--forecaster FORECASTER --out {new}` (FORECASTER: one of {', '.join(FORECASTERS)}) "
                               f"and pass --calibration {new}, or pass --calibration default")


def _body_version(d: dict) -> int | None:
    """The format version a calibration file's content has: 2 (a ``forecaster`` and a ``domain``, no ``features``),
    1 (``features``, no ``forecaster`` nor ``domain``), else None (neither: its own field checks name what lacks)."""
    if "features" in d:
        return 1 if "forecaster" not in d and "domain" not in d else None
    return 2 if "forecaster" in d and "domain" in d else None


def _check_version(d: dict, version: int, path: Path) -> None:
    """Refuse an integer ``format_version`` this calib does not read, or one whose content is of the other version.

    Raises
    ------
    CalibrationFileError
        A readable version whose content is the other one's (:func:`_body_version`: e.g. ``1`` on a version-2 file
        said "field 'features' is missing"): the field does not match the content, the fix a refit or a restored
        file. A version above :data:`FORMAT_VERSION`, up to :data:`PLAUSIBLE_VERSION`: a newer gradprobe's file
        (upgrade, or refit). One above that (a 400-digit integer, shown shortened) is damage, not a future version;
        one below 1 is none this calib ever wrote (refit).
    """
    body = _body_version(d)  # the refit command of the content's version, which records its settings
    fix = rebuild_command(path, {**d, "format_version": body} if body else d, default=_is_default(path))
    if version in READABLE_VERSIONS and body not in (None, version):
        raise CalibrationFileError(
            f"calibration file {path} is damaged: its field 'format_version' does not match its content: it is "
            f"{version}, but the file holds a version-{body} calibration ("
            + ("'forecaster' and 'domain', no 'features'" if body == 2 else "'features', no 'forecaster' nor 'domain'")
            + f"); restore the file from a copy, or {fix}")
    if version in READABLE_VERSIONS:
        return
    if version > PLAUSIBLE_VERSION:
        raise CalibrationFileError(
            f"calibration file {path} is damaged: field 'format_version' is {_json_shown(version)}, far above any "
            f"calibration format version (this calib reads versions {list(READABLE_VERSIONS)}; a newer gradprobe's "
            f"would be a small whole number); restore the file from a copy, or {fix}")
    written = (d.get("versions") if isinstance(d.get("versions"), dict) else {}).get("gradprobe", "?")
    raise CalibrationFileError(
        f"{path} has calibration format version {_json_shown(version)} (written by gradprobe "
        f"{written if isinstance(written, str) else json_short(written)}); this calib reads versions "
        f"{list(READABLE_VERSIONS)}. "
        + ("Upgrade gradprobe to read it, or refit" if version > FORMAT_VERSION else "Refit")
        + " it with this version: `calib fit ROWS.csv --out FILE` (the rows are in the file's \"data\").")


def _from_v2(d: dict) -> Calibration:
    forecaster = d["forecaster"]
    if forecaster not in FORECASTERS:
        shown = repr(forecaster) if isinstance(forecaster, str) else _json_shown(forecaster)  # true, not True
        raise _FieldError(f"'forecaster' ({shown}, not one of {list(FORECASTERS)})")
    data = _data(d, [forecaster])
    n = d["training"]["rows"]
    if not (is_json_number(n, integer=True) and n == len(data)):  # what `calib fit` writes: the data block's rows
        raise DamagedField("training.rows", f"is {json_short(n)}, not the number of rows of the data block "
                                            f"({len(data)})")
    domain = read_domain(d)
    check_domain_matches_data(domain, data)
    return Calibration(forecaster=forecaster, method=d["method"], cv=d["cv"], interval=d["interval"],
                       confidence_level=_level(d), include_reference=_include_reference(d, data),
                       rows=data, counts=d["training"]["counts"], domain=domain,
                       versions=d["versions"], created=d.get("created", ""), format_version=2)


def _from_v1(d: dict) -> Calibration:
    """A version-1 file: the first-order ``predicted_gain`` corrected at one budget, tasks by name."""
    features = tuple(d["features"])
    data = _data(d, list(features), text=("model", "task", "arm"))
    data.insert(0, "study", "v1")  # one unnamed study: its groups are its arms (or models), as fitted
    t = d["training"]
    domain = Domain(studies=[], models=[{"name": m, "dtype": None, "key": m} for m in t["models"]],
                    tasks=[{"name": x, "config": None, "key": x} for x in t["tasks"]], budget_kind=d["budget"],
                    budget_range=[float(v) for v in t["budget_values"]], arms=list(t["arms"]),
                    forecaster=features[0])
    return Calibration(forecaster=features[0], method=d["method"], cv=d["cv"], interval=d["interval"],
                       confidence_level=_level(d), include_reference=_include_reference(d, data),
                       rows=data, counts=t["counts"], domain=domain, versions=d["versions"],
                       created=d.get("created", ""), format_version=1, features=features)


def _data(d: dict, needed: list, text=("study", "model", "task", "arm")) -> pd.DataFrame:
    """The file's training rows (:func:`calib.file_check.read_data`: DamagedField names a bad cell)."""
    return read_data(d, text_columns=list(text), number_columns=[*needed, "target", "budget_value"],
                     integer_columns=["seed"])


def _level(d: dict) -> float:
    """The file's ``confidence_level``: a finite number strictly between 0 and 1
    (:func:`gradprobe.outputs.is_json_number`: not true/false, not text such as ``"0.9"``, not an integer too large
    for a float), as a float.

    Raises
    ------
    DamagedField
        ``'confidence_level'`` missing, or not such a number (the value is shown as the file holds it).
    """
    if "confidence_level" not in d:
        raise DamagedField("'confidence_level'", "is missing (it must be a number in (0, 1), e.g. 0.9)")
    level = d["confidence_level"]
    if not is_json_number(level, finite=True) or not 0 < level < 1:
        raise DamagedField("'confidence_level'", f"is {_json_shown(level)}, not a number in (0, 1) (the intervals' "
                                                 "coverage, e.g. 0.9)")
    return float(level)


def _include_reference(d: dict, data: pd.DataFrame) -> bool:
    """The file's ``include_reference``: a JSON boolean (``true`` or ``false``; not 1, ``"yes"`` or null) that agrees
    with the rows it was fitted on. The refit on load fits the ``data`` block as it is, whatever the flag says, so
    the flag is checked against that block and the fit's counts instead: ``false`` (grpo's rows left out, the
    default) with rows of the reference arm in ``data``, or ``true`` (grpo's rows fitted) with
    ``training.counts.dropped_reference`` > 0 (rows of it left out), is no file ``calib fit`` writes: an edit, which
    would make the loaded calibration (and the refit command of its messages) claim another fit than its numbers'.

    Raises
    ------
    DamagedField
        ``'include_reference'`` missing, not a boolean, or disagreeing with ``data`` or the counts (both named).
    """
    if "include_reference" not in d:
        raise DamagedField("'include_reference'", "is missing (it must be a JSON boolean, true or false)")
    value = d["include_reference"]
    if not isinstance(value, bool):
        raise DamagedField("'include_reference'", f"is {_json_shown(value)}, not a JSON boolean (true or false)")
    fitted = int((data["arm"].astype(str) == REFERENCE_ARM).sum())
    counts = (d.get("training") or {}).get("counts") if isinstance(d.get("training"), dict) else None
    dropped = counts.get("dropped_reference") if isinstance(counts, dict) else None
    if value and is_json_number(dropped, integer=True) and dropped > 0:
        raise DamagedField("'include_reference'", f"is true ({REFERENCE_ARM}'s rows fitted), but training.counts."
                                                  f"dropped_reference says {json_short(dropped)} {REFERENCE_ARM} "
                                                  f"row(s) were left out of the fit, and its data holds {fitted}: the "
                                                  "flag does not match the rows the calibration was fitted on")
    if not value and fitted:
        raise DamagedField("'include_reference'", f"is false ({REFERENCE_ARM}'s rows left out), but its data holds "
                                                  f"{fitted} row(s) of the arm {REFERENCE_ARM!r}, which the "
                                                  "calibration is fitted on: the flag does not match its rows")
    return value


def _json_shown(value) -> str:
    """A top-level field's value as the file spells it, for a message: ``true``, ``null``, ``NaN``, ``1.5``, the
    string ``"0.9"``, an integer too large for a float shortened (:func:`gradprobe.outputs.json_number_text`), a
    list or an object (cut at 60 characters: :func:`gradprobe.outputs.json_short`)."""
    if is_json_number(value):  # a float as JSON spells it (NaN, Infinity), an integer whole (shortened past a float)
        return json_number_text(value, json.dumps(value) if isinstance(value, float) else None)
    text = json_short(value)
    if isinstance(value, str):
        return f"the string {text}"
    if isinstance(value, (dict, list)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} {text}"
    return text  # true, false, null


class _FieldError(KeyError):
    """A missing field, named by its path in the file."""


def _field(e: Exception) -> str:
    if isinstance(e, _FieldError):
        return str(e.args[0])
    return repr(e.args[0]) if isinstance(e, KeyError) and e.args else f"({e})"


def _is_default(path: Path) -> bool:
    try:
        return path.resolve() == default_path().resolve()
    except OSError:
        return False


def default_path() -> Path:
    """Where the shipped calibration lives: ``calib/data/calibration.json`` (package data)."""
    return Path(str(resources.files("calib") / "data" / DEFAULT_NAME))


def resolve(spec: str | Path) -> Path:
    """``default`` -> the shipped file; else the path. CalibrationFileError when it does not exist or ``spec`` is an
    empty or blank string (which the path would read as the current folder); TypeError (naming
    the argument and what it takes) when ``spec`` is neither text nor a path (``calib.load(123)`` reached pathlib's
    "expected str, bytes or os.PathLike object")."""
    if not isinstance(spec, (str, os.PathLike)) or isinstance(spec, bytes):
        raise TypeError(f"the calibration must be a path to a calibration file (str or os.PathLike) or 'default', got "
                        f"{spec!r} ({type(spec).__name__})")
    if isinstance(spec, str) and not spec.strip():  # Path('') is '.', the current folder: refused as what it is
        raise CalibrationFileError(f"the calibration is {'blank' if spec else 'empty'} ({spec!r}): pass the "
                                   "calibration file `calib fit ROWS.csv --out FILE.json` wrote, or 'default' (the "
                                   "shipped one) (an unset shell variable gives an empty value)")
    if str(spec) == "default":
        path = default_path()
        if not path.is_file():
            raise CalibrationFileError(
                f"no default calibration is shipped yet ({path} does not exist): it will be fitted from the tiny "
                "study; until then fit one from a study with `calib rows STUDY --out rows.csv && calib fit rows.csv "
                "--out calib.json` and pass --calibration calib.json")
        return path
    path = Path(spec)
    if path.is_dir():
        raise CalibrationFileError(f"calibration file {str(path)!r} is a folder; pass the JSON file that `calib fit "
                                   "ROWS.csv --out FILE.json` wrote, or --calibration default")
    if not path.is_file():
        raise CalibrationFileError(f"calibration file {str(path)!r} not found; write one with "
                                   f"`calib fit ROWS.csv --out {path}` or pass --calibration default")
    return path


def software_versions() -> dict:
    """Versions of the packages a calibration depends on."""
    return {"gradprobe": __version__, "format_version": FORMAT_VERSION, "scikit-learn": sklearn.__version__,
            "mapie": mapie.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "pandas": pd.__version__, "python": platform.python_version()}


def _vs(v: dict) -> str:
    return ", ".join(f"{k} {v.get(k)}" for k in ("scikit-learn", "mapie", "numpy"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
