"""The reference curve's fit pools evals at the same update count (several seeds) before the least-squares fit
(:func:`gradprobe.forecast.curve_fit._pooled`): the same minimiser, cost and standard errors as the fit over every
eval, on the distinct update counts only; with every update count once, the fit is the one over the evals as given,
bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradprobe.forecast import ReferenceCurve
from gradprobe.forecast import curve_fit
from gradprobe.forecast.curve_fit import fit_sigmoid, scalerl_sigmoid

TRUE = {"R0": 30.0, "A": 72.0, "n_mid": 40.0, "B": 1.3}
LEVELS = np.array([5.0, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480])


def _seeds(k: int, *, zero: bool, sd: float = 2.0, rng_seed: int = 7):
    """(updates, accuracy, seeds) of ``k`` seeds evaluated at LEVELS (and at update 0 when ``zero``), float64."""
    rng = np.random.default_rng(rng_seed)
    levels = np.concatenate([[0.0], LEVELS]) if zero else LEVELS
    n = np.tile(levels, k)
    y = np.clip(scalerl_sigmoid(n, **TRUE) + rng.normal(0.0, sd, n.size), 0.0, 100.0)
    return n, y, np.repeat(np.arange(k), levels.size)


def _recorded_sizes(monkeypatch) -> list[int]:
    """The sizes of the update arrays the fit evaluates its model on (scalerl_sigmoid as curve_fit calls it)."""
    sizes, real = [], curve_fit.scalerl_sigmoid

    def recording(n, **p):
        sizes.append(int(np.asarray(n).size))
        return real(n, **p)

    monkeypatch.setattr(curve_fit, "scalerl_sigmoid", recording)
    return sizes


@pytest.mark.parametrize("r0_given, b_fixed", [(False, None), (True, None), (False, 1.0)])
def test_pooled_fit_matches_the_fit_over_every_eval(monkeypatch, r0_given, b_fixed):
    n, y, _ = _seeds(40, zero=False)  # 480 evals at 12 update counts
    r0 = 30.5 if r0_given else None
    sizes = _recorded_sizes(monkeypatch)
    pooled = fit_sigmoid(n, y, r0=r0, b_fixed=b_fixed)
    assert set(sizes) == {LEVELS.size}  # the model evaluated on the 12 distinct update counts only
    sizes.clear()
    slow = fit_sigmoid(n, y, r0=r0, b_fixed=b_fixed, pool=False)
    assert set(sizes) == {n.size}
    for k in ("R0", "A", "n_mid", "B"):
        assert pooled.params[k] == pytest.approx(slow.params[k], rel=1e-7, abs=1e-9), k
    assert pooled.status == slow.status
    assert set(pooled.se) == set(slow.se)
    for k, v in slow.se.items():
        assert math.isfinite(v) and pooled.se[k] == pytest.approx(v, rel=1e-6), k
    # the cost is half the residual sum of squares over every eval (what check_fit turns into an rmse), not over
    # the pooled means
    fitted = scalerl_sigmoid(n, **pooled.params)
    assert pooled.cost == pytest.approx(0.5 * float(np.sum((y - fitted) ** 2)), rel=1e-12)
    assert pooled.cost == pytest.approx(slow.cost, rel=1e-12)
    assert pooled.params["A"] == pytest.approx(TRUE["A"], abs=3.0)  # a real fit (B = 1 fixed: 74.5), not degenerate


def test_unique_update_counts_fit_exactly_as_before(monkeypatch):
    n, y, _ = _seeds(1, zero=True)  # one seed: every update count once, nothing to pool
    sizes = _recorded_sizes(monkeypatch)
    fast = fit_sigmoid(n, y, r0=float(y[n == 0][0]), b_fixed=None)
    assert set(sizes) == {n.size}  # the evals as given
    slow = fit_sigmoid(n, y, r0=float(y[n == 0][0]), b_fixed=None, pool=False)
    assert fast.params == slow.params and fast.cost == slow.cost  # bit for bit
    assert fast.se == slow.se and fast.status == slow.status
    # a free R0 and the grid's 24 starts: the same
    fast, slow = fit_sigmoid(n[1:], y[1:], r0=None, b_fixed=None), fit_sigmoid(n[1:], y[1:], r0=None, b_fixed=None,
                                                                               pool=False)
    assert fast.params == slow.params and fast.cost == slow.cost and fast.se == slow.se


def test_curve_of_several_seeds_reports_the_statistics_of_every_eval(monkeypatch, tmp_path):
    n, y, s = _seeds(6, zero=True)
    pooled = ReferenceCurve(updates=n, accuracy=y, seeds=s, n_replicates=8)
    back = ReferenceCurve.load(pooled.save(tmp_path / "curve.json"))  # check_fit and check_replicates refit it
    assert back.params == pooled.params and back.rmse == pooled.rmse
    monkeypatch.setattr(curve_fit, "_pooled", lambda n, y: None)  # the fit over every eval
    slow = ReferenceCurve(updates=n, accuracy=y, seeds=s, n_replicates=8)
    for k in ("R0", "A", "n_mid", "B"):
        assert pooled.params[k] == pytest.approx(slow.params[k], rel=1e-7), k
    assert pooled.params["R0"] == slow.params["R0"] == pytest.approx(float(np.mean(y[n == 0])), rel=1e-15)
    assert pooled.status == slow.status
    assert pooled.standard_errors == pytest.approx(slow.standard_errors, rel=1e-6)
    assert pooled.rmse == pytest.approx(slow.rmse, rel=1e-9)
    assert pooled.rmse == pytest.approx(float(np.sqrt(np.mean((scalerl_sigmoid(n, **pooled.params) - y) ** 2))),
                                        rel=1e-12)
    np.testing.assert_allclose(pooled.replicates, slow.replicates, rtol=1e-6)  # the seed-bootstrap refits pool too
    np.testing.assert_array_equal(pooled.replicate_seed_counts, slow.replicate_seed_counts)

