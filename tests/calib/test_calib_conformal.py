"""Conformal intervals reach nominal coverage; grouped cross-validation never predicts a row from itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calib.dataset import build_rows, build_rows_many, select_rows
from calib.estimators import IdentityCalibrator, IsotonicCalibrator, LinearCalibrator
from calib.validation import conformal_regressor, cross_validate, predict_interval
from calib_helpers import default_arms, single_thread_blas, synthetic_forecasts, write_study  # noqa: F401

LEVEL = 0.9


def _draw(rng, n):
    x = rng.uniform(-6, 6, n)
    return x, -1.0 + 0.6 * x + rng.normal(0, 0.5, n)


def test_cv_plus_reaches_nominal_coverage_on_held_out_rows():
    # R training sets of n rows (one arm per row, so CV+ over arms = jackknife+), each checked on m
    # fresh rows. The coverage of one training set varies around its expectation with SD about
    # sqrt(a(1-a)/n) (the conformity quantile's own sampling error); the m test rows add a
    # binomial SE sqrt(a(1-a)/m). The mean over R sets has SD sqrt((a(1-a)/n + a(1-a)/m) / R):
    # with n=150, m=2000, R=4: 0.0127; we allow 3 of them (CV+ may also over-cover slightly).
    rng = np.random.default_rng(0)
    n, m, reps = 150, 2000, 4
    covs = []
    for _ in range(reps):
        x, y = _draw(rng, n)
        reg = conformal_regressor(LinearCalibrator(), x[:, None], y, np.arange(n), confidence_level=LEVEL)
        xt, yt = _draw(rng, m)
        _, lo, hi = predict_interval(reg, xt[:, None])
        covs.append(np.mean((lo <= yt) & (yt <= hi)))
    a = LEVEL * (1 - LEVEL)
    sd = math.sqrt((a / n + a / m) / reps)
    assert abs(np.mean(covs) - LEVEL) < 3 * sd, (covs, sd)


def test_split_conformal_reaches_nominal_coverage():
    # split conformal on n/2 = 200 conformity scores: E[coverage] = ceil(201 * 0.9) / 201 = 0.9005
    rng = np.random.default_rng(1)
    n, m = 400, 4000
    x, y = _draw(rng, n)
    reg = conformal_regressor(LinearCalibrator(), x[:, None], y, np.arange(n), confidence_level=LEVEL,
                              interval="split")
    xt, yt = _draw(rng, m)
    _, lo, hi = predict_interval(reg, xt[:, None])
    a = LEVEL * (1 - LEVEL)
    sd = math.sqrt(a / (n // 2) + a / m)
    assert abs(np.mean((lo <= yt) & (yt <= hi)) - math.ceil(201 * LEVEL) / 201) < 3 * sd


def test_too_few_rows_give_infinite_not_clipped_bounds():
    x = np.arange(6.0)
    reg = conformal_regressor(LinearCalibrator(), x[:, None], 0.5 * x, np.arange(6), confidence_level=LEVEL)
    _, lo, hi = predict_interval(reg, np.array([[1.0]]))
    assert lo[0] == -np.inf and hi[0] == np.inf  # 6 < 1/0.1 - 1 rows: no finite 90% interval exists


def test_conformal_needs_two_groups_and_a_valid_level():
    x = np.arange(10.0)[:, None]
    with pytest.raises(ValueError, match="at least 2 groups"):
        conformal_regressor(LinearCalibrator(), x, x[:, 0], np.zeros(10))
    with pytest.raises(ValueError, match="confidence_level must be in"):
        conformal_regressor(LinearCalibrator(), x, x[:, 0], np.arange(10), confidence_level=1.0)
    with pytest.raises(ValueError, match="unknown interval method"):
        conformal_regressor(LinearCalibrator(), x, x[:, 0], np.arange(10), interval="bootstrap")


@pytest.mark.parametrize("estimator", [LinearCalibrator(), IsotonicCalibrator()], ids=["linear", "isotonic"])
def test_leave_one_arm_out_never_uses_the_held_out_arm(tmp_path, estimator):
    arms = default_arms(n_extra=4, rng=np.random.default_rng(5))
    sel, _ = select_rows(build_rows(write_study(tmp_path / "s", arms=arms, noise=0.2), forecast_fn=synthetic_forecasts))
    cv = cross_validate(estimator, sel, cv="arm")
    assert (cv["fold"] == sel["study"] + "/" + sel["arm"]).all()  # each row is predicted in its own arm's fold
    # reference: refit by hand without the arm, in float64
    for arm in ["mc_value", "user2"]:
        train = sel[sel["arm"] != arm]
        ref = type(estimator)().fit(train[["forecast_probe"]].to_numpy(), train["target"].to_numpy())
        test = sel["arm"] == arm
        np.testing.assert_allclose(cv.loc[test, "cv_pred"], ref.predict(sel.loc[test, ["forecast_probe"]].to_numpy()),
                                   rtol=1e-10, atol=1e-10)
    # a change to one arm's targets moves no prediction of that arm (it never sees itself)
    moved = sel.copy()
    moved.loc[moved["arm"] == "mc_value", "target"] += 100.0
    cv2 = cross_validate(estimator, moved, cv="arm")
    mask = sel["arm"] == "mc_value"
    np.testing.assert_allclose(cv2.loc[mask, "cv_pred"], cv.loc[mask, "cv_pred"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(cv2.loc[mask, "cv_lower"], cv.loc[mask, "cv_lower"], rtol=1e-10, atol=1e-10)
    assert (cv["cv_lower"] < cv["cv_upper"]).all()


def _three_studies(tmp_path):
    rows = build_rows_many([write_study(tmp_path / n, seed=i, slope=0.5 + 0.1 * i) for i, n in enumerate("abc")],
                           forecast_fn=synthetic_forecasts)
    return select_rows(rows)[0]


def test_leave_one_study_out_never_sees_the_held_out_study(tmp_path):
    sel = _three_studies(tmp_path)
    cv = cross_validate(LinearCalibrator(), sel, cv="study")
    assert (cv["fold"] == sel["study"]).all() and cv["cv_lower"].notna().all()  # 2 studies left: CV+ over them
    a = sel["study"].str.startswith("a@")
    ref = LinearCalibrator().fit(sel.loc[~a, ["forecast_probe"]].to_numpy(), sel.loc[~a, "target"].to_numpy())
    np.testing.assert_allclose(cv.loc[a, "cv_pred"], ref.predict(sel.loc[a, ["forecast_probe"]].to_numpy()), rtol=1e-10)
    moved = sel.copy()
    moved.loc[a, "target"] -= 50.0  # the held-out study's own results cannot move its predictions or intervals
    cv2 = cross_validate(LinearCalibrator(), moved, cv="study")
    for c in ("cv_pred", "cv_lower", "cv_upper"):
        np.testing.assert_allclose(cv2.loc[a, c], cv.loc[a, c], rtol=1e-10)
    two = sel[~sel["study"].str.startswith("c@")].reset_index(drop=True)
    cv3 = cross_validate(LinearCalibrator(), two, cv="study")
    assert cv3["cv_lower"].isna().all() and cv3["cv_pred"].notna().all()  # 1 study left: no interval, said as NaN
    with pytest.raises(ValueError, match="leave-one-study-out needs at least 2 distinct studies"):
        cross_validate(LinearCalibrator(), sel[a], cv="study")
    with pytest.raises(ValueError, match="unknown cv 'seed'"):
        cross_validate(LinearCalibrator(), sel, cv="seed")


def test_identity_calibrator_intervals_come_from_other_groups_residuals(tmp_path):
    sel = _three_studies(tmp_path)
    cv = cross_validate(IdentityCalibrator(), sel, cv="study")
    np.testing.assert_array_equal(cv["cv_pred"].to_numpy(float), sel["forecast_probe"].to_numpy(float))
    # CV+ of a fixed predictor: the interval is forecast +- a quantile of the training studies' |residuals|
    a = sel["study"].str.startswith("a@")
    r = np.sort(np.abs(sel.loc[~a, "forecast_probe"] - sel.loc[~a, "target"]).to_numpy())
    # Barber et al. 2021 eq. 3: upper = the ceil((1 - a)(n + 1))-th smallest of x + r_i, lower = the
    # floor(a (n + 1))-th smallest of x - r_i; n = 24 training rows at a = 0.1: the 23rd smallest |residual|
    q = math.ceil(round(LEVEL * (r.size + 1), 9))
    x = sel.loc[a, "forecast_probe"].to_numpy()
    assert r.size == 24 and q == 23
    np.testing.assert_allclose(cv.loc[a, "cv_upper"], x + r[q - 1], rtol=1e-9)
    np.testing.assert_allclose(cv.loc[a, "cv_lower"], x - r[r.size - math.floor(round((1 - LEVEL) * (r.size + 1), 9))],
                               rtol=1e-9)
