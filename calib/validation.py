"""Conformal prediction intervals (MAPIE) and grouped cross-validation of a calibrator.

Intervals (for ONE training run's realized gain vs GRPO, accuracy points) come from MAPIE 1.6's
conformal regressors with absolute-residual conformity scores:

- ``cv_plus`` (default): CV+ (Barber, Candes, Ramdas & Tibshirani 2021, "Predictive inference with
  the jackknife+", eq. 3 with K-fold folds), :class:`mapie.regression.CrossConformalRegressor` with
  ``method="plus"`` and folds = :class:`sklearn.model_selection.LeaveOneGroupOut` over the groups
  (studies, arms within a study, or models), so a row's conformity score always comes from a
  model that never saw its group. Coverage >= 1 - 2 alpha in the worst case, about 1 - alpha in
  practice (when groups are exchangeable: a study unlike all the others is not covered by any
  interval learned from them, and the report's held-out coverage is what says so).
- ``split``: split conformal (Lei et al. 2018, "Distribution-free predictive inference for
  regression", Algorithm 2), :class:`mapie.regression.SplitConformalRegressor`, fitted on half of
  the groups and conformalized on the other half (:class:`~sklearn.model_selection.GroupShuffleSplit`);
  coverage >= 1 - alpha, at the cost of half the rows for fitting.

With n conformity scores an interval at level 1 - alpha is finite only when
ceil((n + 1)(1 - alpha)) <= n, i.e. n >= 1/alpha - 1 (9 rows at 90%); otherwise its bounds are
infinite (reported as such, never clipped, with a note naming the rows the level needs and the highest level the
rows allow: :func:`infinite_interval_note`).

Grouped cross-validation (:func:`cross_validate`): leave one group out (a study, the headline;
an arm within its study; or a model); the calibrator and the conformal regressor are refitted on
the other groups only (the interval's own CV+ folds are again leave-one-group-out inside them),
and the held-out rows get the out-of-fold prediction and interval. No row is ever predicted by a
model that saw it or its group.

The fits are tiny (tens to hundreds of rows, one feature): they run with one BLAS
thread (:func:`threadpoolctl.threadpool_limits`), since threads only add contention there
(measured: a 150-row Huber fit took 6 ms with one OpenBLAS thread, 80 ms with two on a busy
2-core machine).
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
from mapie.regression import CrossConformalRegressor, SplitConformalRegressor
from sklearn.base import clone
from sklearn.model_selection import GroupShuffleSplit, LeaveOneGroupOut
from threadpoolctl import threadpool_limits

INTERVALS = ("cv_plus", "split")
CV_GROUPS = ("study", "arm", "model")
PLURAL = {"study": "studies", "arm": "arms", "model": "models"}


def conformal_regressor(estimator, X, y, groups, *, confidence_level: float = 0.9, interval: str = "cv_plus",
                        random_state: int = 0):
    """A MAPIE conformal regressor around ``estimator``, fitted and conformalized.

    Parameters
    ----------
    estimator : sklearn regressor
        Unfitted calibrator (cloned, not modified).
    X : ndarray, shape (n_rows, n_features)
    y : ndarray, shape (n_rows,)
        Realized gains (points).
    groups : array-like, shape (n_rows,)
        Group labels of the folds (:func:`group_labels`).
    confidence_level : float in (0, 1)
    interval : {"cv_plus", "split"}
    random_state : int
        Seed of the ``split`` group shuffle.

    Returns
    -------
    mapie.regression.CrossConformalRegressor or SplitConformalRegressor
        With ``n_conformity_scores_``: the conformity scores its intervals are quantiles of (every row with
        ``cv_plus``, the conformalization half's with ``split``; :func:`infinite_interval_note`).

    Raises
    ------
    TypeError
        ``confidence_level`` is no number (:func:`check_confidence_level`).
    ValueError
        Unknown ``interval``, ``confidence_level`` outside (0, 1), fewer than 2 groups.
    """
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval method {interval!r}; choose one of {INTERVALS}")
    check_confidence_level(confidence_level)
    groups = np.asarray(groups)
    if len(np.unique(groups)) < 2:
        raise ValueError(f"conformal intervals need at least 2 groups to hold out, got {len(np.unique(groups))}")
    X, y = np.asarray(X, float), np.asarray(y, float)
    with threadpool_limits(limits=1, user_api="blas"):
        if interval == "cv_plus":
            reg = CrossConformalRegressor(clone(estimator), confidence_level=confidence_level, method="plus",
                                          cv=LeaveOneGroupOut()).fit_conformalize(X, y, groups=groups)
            reg.n_conformity_scores_ = len(y)  # leave-one-group-out: every row is scored once
            return reg
        train, conf = next(GroupShuffleSplit(n_splits=1, test_size=0.5, random_state=random_state)
                           .split(X, y, groups))
        reg = (SplitConformalRegressor(clone(estimator), confidence_level=confidence_level, prefit=False)
               .fit(X[train], y[train]).conformalize(X[conf], y[conf]))
        reg.n_conformity_scores_ = len(conf)
        return reg


def check_confidence_level(confidence_level) -> None:
    """The check of every ``confidence_level`` (:func:`conformal_regressor`, ``calib.fit``, ``calib.report_metrics``).

    Raises
    ------
    TypeError
        ``confidence_level`` is no number: a string (``"0.9"``, whose fix is the number it spells), a bool (``True``
        is no level, though Python counts it as 1), None...
    ValueError
        ``confidence_level`` is a number not strictly between 0 and 1 (NaN, 5, -1, 0, 1).
    """
    if isinstance(confidence_level, (bool, np.bool_)) or \
            not isinstance(confidence_level, (int, float, np.integer, np.floating)):
        kind = type(confidence_level).__name__
        fix = "pass a number, e.g. 0.9"
        if isinstance(confidence_level, str):
            try:
                fix = f"pass the number it spells, {float(confidence_level)!r}, not a string"
            except ValueError:
                pass
        raise TypeError(f"confidence_level must be a number in (0, 1) (e.g. 0.9 for 90% intervals), got the {kind} "
                        f"{confidence_level!r}; {fix}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")


def level_percent(confidence_level: float) -> str:
    """A confidence level as a percent with the digits it has: ``"90%"``, ``"99.9%"``, ``"99.99%"`` (``:.0%`` printed
    0.999 as "100%", a level no interval has)."""
    return f"{float(confidence_level) * 100:.12g}%"


def rows_for_finite_interval(confidence_level: float) -> int:
    """The fewest conformity scores n with which a conformal interval at ``confidence_level`` L is finite: the
    least n with ceil(L (n + 1)) <= n, i.e. n >= L / (1 - L) (9 at 90%, 19 at 95%, 999 at 99.9%), computed as MAPIE
    does (alpha = 1 - L in decimal, then its corrected quantile level ceil((1 - alpha)(n + 1)) / n <= 1; module
    docstring)."""
    alpha = float(Decimal(1) - Decimal(str(float(confidence_level))))
    level = (1 - 2 * alpha) + alpha  # MAPIE's upper quantile level of a symmetric score
    n = max(1, math.floor(confidence_level / (1 - confidence_level)) - 2)
    while math.ceil(level * (n + 1)) > n:
        n += 1
    return n


def infinite_interval_note(confidence_level: float, scores: int | None, interval: str) -> str | None:
    """Why a calibration's conformal intervals are infinite, and the fix; None when its ``scores`` conformity scores
    (:func:`conformal_regressor`'s ``n_conformity_scores_``; None: unknown) suffice for ``confidence_level``
    (:func:`rows_for_finite_interval`)."""
    need = rows_for_finite_interval(confidence_level)
    if scores is None or scores >= need:
        return None
    top = math.floor(scores / (scores + 1) * 1000) / 1000  # the highest level of 3 decimals these scores allow
    while top > 0 and rows_for_finite_interval(top) > scores:
        top = round(top - 0.001, 3)
    what = "one per calibration row" if interval == "cv_plus" else "the rows of its conformalization half"
    lower = f"a confidence level of at most {top:g} (--confidence {top:g})" if top > 0 else "a lower confidence level"
    return (f"the {level_percent(confidence_level)} conformal intervals are infinite ([-inf, +inf]): a finite one at "
            f"that level needs at least {need} conformity scores, and this calibration has {scores} ({what}); refit "
            f"it with {lower}, or on more rows")


def predict_interval(regressor, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point (the calibrator refitted on all its rows), lower and upper bounds, each shape (n_rows,).

    Bounds are +-inf when there are too few conformity scores for the level (see module docstring).
    """
    X = np.asarray(X, float)
    kw = {"aggregate_point_predictions": None} if isinstance(regressor, CrossConformalRegressor) else {}
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.filterwarnings("ignore", message=".*infinite.*")
        point, iv = regressor.predict_interval(X, allow_infinite_bounds=True, **kw)
    return np.asarray(point, float), np.asarray(iv[:, 0, 0], float), np.asarray(iv[:, 1, 0], float)


def group_labels(rows: pd.DataFrame, cv: str) -> np.ndarray:
    """Fold labels of a grouped cross-validation, shape (n_rows,).

    ``study``: the study; ``arm``: the arm *within* its study (``study/arm``: holding out mc_value of
    one study leaves mc_value of the other studies in; with one study this is plain
    leave-one-arm-out); ``model``: the model.
    """
    if cv not in CV_GROUPS:
        raise ValueError(f"unknown cv {cv!r}; choose one of {CV_GROUPS}")
    if cv == "arm":
        return (rows["study"].astype(str) + "/" + rows["arm"].astype(str)).to_numpy()
    return rows[cv].astype(str).to_numpy()


def cross_validate(estimator, rows: pd.DataFrame, *, forecaster: str = "forecast_probe", cv: str = "study",
                   confidence_level: float = 0.9, interval: str = "cv_plus") -> pd.DataFrame:
    """Leave-one-group-out predictions and conformal intervals for every row.

    Parameters
    ----------
    estimator : sklearn regressor
        Unfitted calibrator (:class:`~calib.estimators.IdentityCalibrator` for the uncorrected
        forecaster).
    rows : DataFrame
        Selected rows (:func:`calib.dataset.select_rows`): ``forecaster``, ``target``, ``study``,
        ``arm``, ``model``.
    forecaster : str
        The forecast column, the calibrator's one feature (accuracy points).
    cv : {"study", "arm", "model"}
        Leave one study out (the headline: does the calibration transfer to a study it never saw?),
        one arm out within its study (to an intervention it has not seen), or one model out.
    confidence_level : float
    interval : {"cv_plus", "split"}

    Returns
    -------
    DataFrame, index of ``rows``
        ``fold`` (the held-out group), ``cv_pred`` (calibrated gain, points), ``cv_lower``,
        ``cv_upper`` (NaN when the training part of the fold has fewer than 2 groups, so no
        conformal interval can be made: e.g. leave-one-study-out with 2 studies), ``cv_pred_at_zero`` (the fold's
        calibration at a forecast of 0, points: what it makes of "no difference from grpo", the forecast grpo
        itself gets; a ranking of calibrated gains that puts grpo at 0 instead orders the arms of a study whose
        forecasts are all 0 against grpo by the calibration's intercept alone).

    Raises
    ------
    ValueError
        Unknown ``cv``, or fewer than 2 groups (nothing to hold out).
    """
    groups = group_labels(rows, cv)
    if len(np.unique(groups)) < 2:
        raise ValueError(f"leave-one-{cv}-out needs at least 2 distinct {PLURAL[cv]}, the rows have "
                         f"{len(np.unique(groups))} ({sorted(set(groups))}); use cv='arm' or add studies")
    X = rows[[forecaster]].to_numpy(float)
    y = rows["target"].to_numpy(float)
    out = pd.DataFrame(index=rows.index, columns=["fold", "cv_pred", "cv_lower", "cv_upper", "cv_pred_at_zero"],
                       dtype=float)
    out["fold"] = out["fold"].astype(object)
    for train, test in LeaveOneGroupOut().split(X, y, groups):
        assert not set(train) & set(test)  # no row predicts itself
        with threadpool_limits(limits=1, user_api="blas"):
            est = clone(estimator).fit(X[train], y[train])
        idx = rows.index[test]
        out.loc[idx, "fold"] = groups[test[0]]
        out.loc[idx, "cv_pred"] = est.predict(X[test])
        out.loc[idx, "cv_pred_at_zero"] = float(est.predict(np.zeros((1, 1)))[0])
        if len(np.unique(groups[train])) >= 2:
            reg = conformal_regressor(estimator, X[train], y[train], groups[train], confidence_level=confidence_level,
                                      interval=interval)
            _, lo, hi = predict_interval(reg, X[test])
            out.loc[idx, "cv_lower"], out.loc[idx, "cv_upper"] = lo, hi
        else:
            out.loc[idx, ["cv_lower", "cv_upper"]] = math.nan
    return out
