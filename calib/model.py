"""A fitted calibration: calibrator + conformal intervals, saved as a versioned JSON file.

The file holds no pickled code: the settings, the versions that fitted it, the fitted parameters
(for people reading it) and the training rows themselves (a study gives tens of rows). Loading
refits the calibrator and the MAPIE conformal regressor on those rows (milliseconds) and checks
that the refit reproduces the stored predictions on them; a file from another format version, or
whose refit differs (e.g. a scikit-learn/MAPIE change), is refused with the fix.

``calib fit ROWS.csv --out FILE`` writes one; ``gradprobe probe --calibration FILE|default``
applies one (:func:`calib.apply.calibrate_probe`).
"""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .dataset import REFERENCE_ARM, select_rows
from .estimators import make_estimator
from .validation import conformal_regressor, predict_interval

FORMAT = "gradprobe-calibration"
FORMAT_VERSION = 1
DEFAULT_NAME = "calibration.json"
_DATA_COLUMNS = ("model", "task", "arm", "seed", "budget_value")


class CalibrationFileError(ValueError):
    """A calibration file that cannot be used: missing, not a calibration, or an incompatible version."""


@dataclass
class Calibration:
    """A calibrator fitted on study rows, with conformal intervals.

    Attributes
    ----------
    method : {"linear", "isotonic"}
    features : tuple[str, ...]
        Feature columns, ``predicted_gain`` first.
    budget : {"tokens", "time", "updates"}
        The matched budget the rows were taken at; the calibrated gain is for that kind of budget.
    cv : {"arm", "model"}
        Grouping of the conformal folds.
    interval : {"cv_plus", "split"}
    confidence_level : float
    include_reference : bool
    rows : DataFrame
        Training rows (model, task, arm, seed, budget_value, features, target).
    counts : dict
        Row counts of :func:`calib.dataset.select_rows` (``dropped_nan_target``...).
    estimator : fitted calibrator (all rows)
    regressor : fitted MAPIE conformal regressor
    versions : dict
        Of the software that fitted it (from the file when loaded).
    """

    method: str
    features: tuple
    budget: str
    cv: str
    interval: str
    confidence_level: float
    include_reference: bool
    rows: pd.DataFrame
    counts: dict
    estimator: object = None
    regressor: object = None
    versions: dict = field(default_factory=dict)
    created: str = ""

    def _fit(self) -> "Calibration":
        from threadpoolctl import threadpool_limits

        X, y = self.rows[list(self.features)].to_numpy(float), self.rows["target"].to_numpy(float)
        with threadpool_limits(limits=1, user_api="blas"):  # tiny fit: threads only add contention
            self.estimator = make_estimator(self.method).fit(X, y)
        self.regressor = conformal_regressor(make_estimator(self.method), X, y, self.rows[self.cv].astype(str),
                                             confidence_level=self.confidence_level, interval=self.interval)
        return self

    def predict(self, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Calibrated gain vs GRPO and its interval (points), each shape (n_rows,).

        Parameters
        ----------
        X : DataFrame with the feature columns, or ndarray, shape (n_rows, n_features)

        Returns
        -------
        (point, lower, upper)
            ``point``: the calibrator fitted on all rows; bounds: the conformal interval at
            ``confidence_level`` for one training run (+-inf with too few rows for that level).
        """
        X = X[list(self.features)].to_numpy(float) if isinstance(X, pd.DataFrame) else np.asarray(X, float)
        _, lo, hi = predict_interval(self.regressor, X)
        return self.estimator.predict(X), lo, hi

    def fitted_parameters(self) -> dict:
        """The fitted map in readable form (slope/intercept, or isotonic knots)."""
        e = self.estimator
        if self.method == "linear":
            return {"coef": dict(zip(self.features, map(float, e.coef_))), "intercept": e.intercept_,
                    "scale": e.scale_}
        return {"X_thresholds": e.isotonic_.X_thresholds_.tolist(), "y_thresholds": e.isotonic_.y_thresholds_.tolist()}

    def to_dict(self) -> dict:
        """The JSON content of the calibration file."""
        X = self.rows[list(self.features)]
        point, lo, hi = self.predict(X)
        data = self.rows[list(_DATA_COLUMNS) + list(self.features) + ["target"]]
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "created": self.created or _now(),
            "versions": self.versions or software_versions(),
            "target": f"realized gain vs {REFERENCE_ARM} (accuracy points) of one training run at a matched "
                      f"{self.budget} budget",
            "method": self.method, "params": self.estimator.get_params(), "features": list(self.features),
            "budget": self.budget, "cv": self.cv, "interval": self.interval,
            "confidence_level": self.confidence_level, "include_reference": self.include_reference,
            "training": {"rows": int(len(self.rows)), "counts": self.counts,
                         "arms": sorted(set(self.rows["arm"])), "models": sorted(set(self.rows["model"])),
                         "tasks": sorted(set(self.rows["task"])),
                         "budget_values": [float(self.rows["budget_value"].min()),
                                           float(self.rows["budget_value"].max())]},
            "fitted": self.fitted_parameters(),
            "check": {"point": _enc(point), "lower": _enc(lo), "upper": _enc(hi)},
            "data": {"columns": list(data.columns), "rows": data.astype(object).values.tolist()},
        }

    def save(self, path: str | Path) -> Path:
        """Write the calibration JSON atomically (fsynced temporary file, then rename); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1, default=_json_default, allow_nan=False))
        return path


def fit_calibration(rows: pd.DataFrame, *, method: str = "linear", features=("predicted_gain",),
                    budget: str = "tokens", cv: str = "arm", interval: str = "cv_plus",
                    confidence_level: float = 0.9, include_reference: bool = False) -> Calibration:
    """Select rows (:func:`calib.dataset.select_rows`) and fit a calibrator with conformal intervals.

    Raises
    ------
    calib.dataset.RowsError
        Missing columns, a single arm, non-finite features, no rows (see ``select_rows``).
    ValueError
        Unknown method, interval or cv; a leave-one-model-out grouping with fewer than 2 models.
    """
    if list(features)[:1] != ["predicted_gain"]:
        raise ValueError(f"features must start with 'predicted_gain' (the calibrated quantity), got {list(features)}")
    if cv not in ("arm", "model"):
        raise ValueError(f"unknown cv {cv!r}; choose 'arm' or 'model'")
    if method == "isotonic" and len(features) > 1:
        raise ValueError(f"the isotonic calibrator uses predicted_gain only; drop the other features {list(features)[1:]}"
                         " or use method='linear'")
    make_estimator(method)  # validates the name before any work
    sel, counts = select_rows(rows, budget=budget, features=features, include_reference=include_reference)
    if sel[cv].nunique() < 2:
        raise ValueError(f"conformal folds by {cv} need at least 2 distinct {cv}s, the rows have "
                         f"{sel[cv].nunique()}; use cv='arm' or add studies")
    cal = Calibration(method=method, features=tuple(features), budget=budget, cv=cv, interval=interval,
                      confidence_level=float(confidence_level), include_reference=include_reference,
                      rows=sel, counts=counts, versions=software_versions(), created=_now())
    return cal._fit()


def load_calibration(spec: str | Path) -> Calibration:
    """Load a calibration file (``default``: the one shipped with the package), refit and verify it.

    Parameters
    ----------
    spec : path or "default"

    Raises
    ------
    CalibrationFileError
        No default is shipped yet, the file is missing or not a calibration file, its
        ``format_version`` differs from this package's, or the refit does not reproduce its
        stored predictions (scikit-learn/MAPIE versions differ in a way that matters): the message
        says which and how to refit.
    """
    path = resolve(spec)
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CalibrationFileError(f"cannot read calibration file {str(path)!r}: {e}") from e
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise CalibrationFileError(f"{path} is not a gradprobe calibration file (no \"format\": \"{FORMAT}\"); "
                                   "write one with `calib fit ROWS.csv --out FILE`")
    if d.get("format_version") != FORMAT_VERSION:
        raise CalibrationFileError(
            f"{path} has calibration format version {d.get('format_version')!r} (written by "
            f"{d.get('versions', {}).get('gradprobe', '?')}); this calib reads version {FORMAT_VERSION}. Refit it "
            "with this version: `calib fit ROWS.csv --out FILE` (the rows are in the file's \"data\").")
    try:
        data = pd.DataFrame(d["data"]["rows"], columns=d["data"]["columns"])
        data["target"] = data["target"].astype(float)
        cal = Calibration(method=d["method"], features=tuple(d["features"]), budget=d["budget"], cv=d["cv"],
                          interval=d["interval"], confidence_level=float(d["confidence_level"]),
                          include_reference=bool(d["include_reference"]), rows=data,
                          counts=d["training"]["counts"], versions=d["versions"], created=d.get("created", ""))
        stored = d["check"]
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrationFileError(f"{path} is damaged: field {e} is missing or malformed; refit it with `calib fit`") from e
    cal._fit()
    point, lo, hi = cal.predict(data)
    for name, new in (("point", point), ("lower", lo), ("upper", hi)):
        old = np.array([_dec(v) for v in stored[name]], float)
        if old.shape != new.shape or not np.allclose(old, new, rtol=1e-6, atol=1e-6, equal_nan=True):
            raise CalibrationFileError(
                f"{path}: refitting the calibration does not reproduce its stored {name} predictions (fitted with "
                f"{_vs(d['versions'])}; installed {_vs(software_versions())}); refit it with `calib fit` here")
    return cal


def default_path() -> Path:
    """Where the shipped calibration lives: ``calib/data/calibration.json`` (package data)."""
    return Path(str(resources.files("calib") / "data" / DEFAULT_NAME))


def resolve(spec: str | Path) -> Path:
    """``default`` -> the shipped file; else the path. CalibrationFileError when it does not exist."""
    if str(spec) == "default":
        path = default_path()
        if not path.is_file():
            raise CalibrationFileError(
                f"no default calibration is shipped yet ({path} does not exist): it will be fitted from the tiny "
                "study; until then fit one from a study with `calib rows STUDY --out rows.csv && calib fit rows.csv "
                "--out calib.json` and pass --calibration calib.json")
        return path
    path = Path(spec)
    if not path.is_file():
        raise CalibrationFileError(f"calibration file {str(path)!r} not found; write one with "
                                   f"`calib fit ROWS.csv --out {path}` or pass --calibration default")
    return path


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``path.tmp``, fsync, rename onto ``path``: a reader never sees a half-written file.

    (gradprobe.training.checkpoint.write_json_atomic does the same for JSON but imports torch,
    which would add seconds to every ``calib`` command.)
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def software_versions() -> dict:
    """Versions of the packages a calibration depends on."""
    import mapie
    import scipy
    import sklearn

    from gradprobe import __version__

    return {"gradprobe": __version__, "format_version": FORMAT_VERSION, "scikit-learn": sklearn.__version__,
            "mapie": mapie.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "pandas": pd.__version__, "python": platform.python_version()}


def _vs(v: dict) -> str:
    return ", ".join(f"{k} {v.get(k)}" for k in ("scikit-learn", "mapie", "numpy"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _enc(a) -> list:
    return [None if math.isnan(x) else (x if math.isfinite(x) else ("inf" if x > 0 else "-inf")) for x in map(float, a)]


def _dec(x) -> float:
    return math.nan if x is None else float(x)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
