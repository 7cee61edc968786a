"""Calibrators: map a forecaster's forecast gain (accuracy points) to the realized one.

Scikit-learn regressors fitted on rows of :func:`calib.dataset.build_rows` (``X``: one
forecaster's forecast of the gain vs GRPO at the budget, shape (n_rows, 1), accuracy points;
``y``: the realized gain vs GRPO at the same budget, accuracy points, one training run (seed)
per row), i.e. realized ~ f(forecast):

- :class:`LinearCalibrator`: realized = intercept + slope * forecast, fitted
  by Huber regression (Huber 1964; Owen 2007, as in :class:`sklearn.linear_model.HuberRegressor`),
  so one run that collapsed or one arm far off the line does not drag the fit. ``intercept_`` is
  the forecaster's constant bias, sign-flipped, and ``slope_`` its proportional over- (< 1) or
  under-estimate (> 1): the raw first-order extrapolation is expected to overestimate badly
  (DESIGN.md, "The probe"), i.e. a slope far below 1.
- :class:`IdentityCalibrator` (``none``): the forecast uncorrected, so raw forecasters get
  intervals and cross-validated errors from the same code.
- :class:`IsotonicCalibrator`: the monotone non-decreasing map that minimises squared error
  (pool-adjacent-violators, :class:`sklearn.isotonic.IsotonicRegression`), clipped outside the
  fitted range, so it keeps the probe's ranking but not its scale. It reads one column.

All follow scikit-learn's conventions (keyword-only ``__init__`` parameters stored as given,
validation in ``fit``, fitted attributes ending in ``_``) so they work with ``clone``,
cross-validation and MAPIE's conformal regressors.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import HuberRegressor
from sklearn.utils.validation import check_is_fitted, validate_data


class LinearCalibrator(RegressorMixin, BaseEstimator):
    """Huber regression of the realized gain on the probe's features.

    Parameters
    ----------
    epsilon : float, default=1.35
        Huber threshold in units of the fitted residual scale (1.35 gives 95% efficiency under
        Gaussian noise; Huber 1964). Must be >= 1.
    alpha : float, default=0.0
        L2 penalty on the slopes (not the intercept). 0: none, so ``slope_`` is the plain robust fit.
    max_iter : int, default=1000
        L-BFGS iterations of :class:`~sklearn.linear_model.HuberRegressor`.

    Attributes
    ----------
    huber_ : HuberRegressor
        The fitted regressor.
    coef_ : ndarray, shape (n_features,)
        Slopes (accuracy points realized per point predicted, for the predicted-gain feature).
    intercept_ : float
        Realized gain (points) at zero features: the constant bias of the probe, sign-flipped.
    slope_ : float
        ``coef_[0]``, the slope on the first feature (the predicted gain).
    scale_ : float
        Huber's robust residual scale (accuracy points).
    n_iter_ : int
        L-BFGS iterations used.
    n_features_in_ : int

    Raises
    ------
    ValueError
        (from ``fit``/``predict``) NaN or infinite features or targets, fewer than 2 rows,
        or a feature count at ``predict`` that differs from ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-5, 5, 50)[:, None]
    >>> LinearCalibrator().fit(x, 0.5 * x[:, 0] - 1).slope_.round(3)
    np.float64(0.5)
    """

    def __init__(self, *, epsilon: float = 1.35, alpha: float = 0.0, max_iter: int = 1000):
        self.epsilon = epsilon
        self.alpha = alpha
        self.max_iter = max_iter

    def fit(self, X, y):
        """Fit on ``X`` (n_rows, n_features) and ``y`` (n_rows,), accuracy points; returns self."""
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        self.huber_ = HuberRegressor(epsilon=self.epsilon, alpha=self.alpha, max_iter=self.max_iter)
        self.huber_.fit(X, y)
        self.n_iter_ = int(self.huber_.n_iter_)
        self.coef_ = self.huber_.coef_.copy()
        self.intercept_ = float(self.huber_.intercept_)
        self.slope_ = float(self.coef_[0])
        self.scale_ = float(self.huber_.scale_)
        return self

    def predict(self, X):
        """Calibrated gain, shape (n_rows,), accuracy points."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_


class IsotonicCalibrator(RegressorMixin, BaseEstimator):
    """Monotone (non-decreasing) regression of the realized gain on the predicted gain.

    Parameters
    ----------
    increasing : bool or "auto", default=True
        Direction of the fitted map. True keeps the probe's ordering (what a calibration of a
        probe that ranks correctly should do); "auto" picks it from the sign of Spearman's rho.
    feature : int, default=0
        The column of ``X`` that holds the predicted gain; the other columns are ignored, so the
        calibrator takes the same feature matrix as :class:`LinearCalibrator` (whose first column
        is the predicted gain).

    Attributes
    ----------
    isotonic_ : IsotonicRegression
        The fitted regression (``out_of_bounds="clip"``: predictions outside the fitted range of
        predicted gains are those of its end points, never extrapolated).
    X_min_, X_max_ : float
        Fitted range of the predicted gain (points).
    n_features_in_ : int
        Columns of ``X`` at fit (only column ``feature`` is used).

    Raises
    ------
    ValueError
        (from ``fit``/``predict``) ``feature`` outside ``X``'s columns, NaN or infinite values,
        fewer than 2 rows, a column count at ``predict`` that differs from ``fit``.
    """

    def __init__(self, *, increasing: bool | str = True, feature: int = 0):
        self.increasing = increasing
        self.feature = feature

    def __sklearn_tags__(self):
        # scikit-learn's tag for a regressor that cannot reach R^2 > 0.5 on its generic 10-feature
        # check data: this one reads a single column by design, and the checks' signal is spread over all
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags

    def fit(self, X, y):
        """Fit on ``X`` (n_rows, n_features) and ``y`` (n_rows,), accuracy points; returns self."""
        X, y = _validated_column(self, X, y, "predicted-gain")
        self.isotonic_ = IsotonicRegression(increasing=self.increasing, out_of_bounds="clip")
        self.isotonic_.fit(X[:, self.feature], y)
        self.X_min_, self.X_max_ = float(self.isotonic_.X_min_), float(self.isotonic_.X_max_)
        return self

    def predict(self, X):
        """Calibrated gain, shape (n_rows,), accuracy points."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.isotonic_.predict(X[:, self.feature])


class IdentityCalibrator(RegressorMixin, BaseEstimator):
    """No correction: the forecast as it is (the "uncorrected" forecaster of the report).

    Fitting learns nothing, so wrapping it in the same conformal machinery as the real calibrators
    gives the raw forecaster intervals from its own held-out residuals (with CV+ over groups: the
    jackknife+ of a fixed predictor, i.e. split conformal on the other groups' residuals).

    Parameters
    ----------
    feature : int, default=0
        The column of ``X`` that holds the forecast.

    Attributes
    ----------
    n_features_in_ : int
    """

    def __init__(self, *, feature: int = 0):
        self.feature = feature

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()  # one column by design (see IsotonicCalibrator)
        tags.regressor_tags.poor_score = True
        return tags

    def fit(self, X, y):
        """Validate ``X`` (n_rows, n_features) and ``y`` (n_rows,); nothing is learned. Returns self."""
        X, y = _validated_column(self, X, y, "forecast")
        self.fitted_ = True
        return self

    def predict(self, X):
        """The forecast column, shape (n_rows,), accuracy points."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X[:, self.feature].copy()


ESTIMATORS = {"linear": LinearCalibrator, "isotonic": IsotonicCalibrator, "none": IdentityCalibrator}
"""Name -> calibrator class (the ``--method`` of ``calib fit``/``calib report``; ``none``: uncorrected)."""


def make_estimator(method: str) -> BaseEstimator:
    """A fresh calibrator by name; ValueError lists the valid names."""
    try:
        return ESTIMATORS[method]()
    except KeyError:
        raise ValueError(f"unknown calibration method {method!r}; choose one of {sorted(ESTIMATORS)}") from None


def _validated_column(est, X, y, what: str):
    """``validate_data`` of a one-column calibrator's fit: X (n_rows, n_features) and y (n_rows,) as float64.

    Raises
    ------
    ValueError
        ``est.feature`` is not a column of ``X`` (the message names the ``what`` column to point at).
    """
    X, y = validate_data(est, X, y, y_numeric=True, dtype=np.float64)
    if not 0 <= est.feature < X.shape[1]:
        raise ValueError(f"feature={est.feature} is not a column of X ({X.shape[1]} columns); "
                         f"pass the index of the {what} column")
    return X, y
