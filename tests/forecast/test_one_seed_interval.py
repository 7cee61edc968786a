"""A reference curve of one seed (one run's metrics.jsonl, a one-seed CSV) has no seed spread, but its evals still
carry noise: the forecast's interval carries the eval noise its fit's residuals estimate (a parametric bootstrap of
the fit) instead of coming out zero width ([-2.5, -2.5] before), and a one-seed fit with no residual degrees of
freedom gets no interval and no verdict ("one seed: no interval"), not [x, x]. grpo's own row keeps [0, 0]."""

from __future__ import annotations

import math

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_points

from gradprobe.forecast import ReferenceCurve, forecast_rewards
from gradprobe.forecast.curve_fit import eval_noise_sd
from gradprobe.forecast.curves import load_reference_curve

# the default job's costs (README): 4,480 generated tokens per grpo update, 15,029 per mc update; 250k tokens
TOKENS = {"outcome": 4480.0, "mc": 15029.0}


def _probe():
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "mc": 2.0 * o}, TOKENS)


def _seed0_csv(tmp_path, updates=None):
    """Seed 0 of the shipped curve (data/study_tiny's grpo arm) as a user's one-seed CSV (points)."""
    pts = load_reference_curve("default").points
    s0 = pts[pts["seed"] == "0"]
    if updates is not None:
        s0 = s0[s0["update"].isin(updates)]
    path = tmp_path / "one_seed.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u:g},{a:.4f}\n" for u, a in zip(s0["update"], s0["accuracy"])))
    return path


def test_a_one_seed_curve_gives_an_interval_that_carries_its_eval_noise(tmp_path):
    curve = load_reference_curve(_seed0_csv(tmp_path), accuracy_scale="points")
    assert curve.n_seeds == 1 and len(curve.replicates) == 0  # no seed spread
    sd, dof = curve.eval_noise
    assert dof == 9 - 4  # 9 evals; A, n_mid, B fitted, R0 read from the eval at update 0
    assert sd == pytest.approx(curve.rmse * math.sqrt(9 / 5), rel=1e-9) and sd == pytest.approx(1.12, abs=0.01)
    assert curve.interval_source == "eval_noise" and curve.interval_replicates == 200
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=1000)
    rows = res.table.set_index("arm")
    assert rows.loc["outcome", "gain_interval"] == (0.0, 0.0)  # grpo vs itself: 0 exactly
    gain, (lo, hi) = rows.loc["mc", "forecast_gain"], rows.loc["mc", "gain_interval"]
    assert gain == pytest.approx(-2.49, abs=0.01)
    assert lo < gain < hi and hi - lo > 2.0  # was [-2.49, -2.49]: zero width
    assert (lo, hi) == pytest.approx((-4.08, -0.79), abs=0.02)
    [note] = [n for n in res.notes if n.startswith("the reference curve has one seed")]
    assert note.startswith("the reference curve has one seed: intervals carry its eval noise (residual sd 1.12 "
                           "points of its fit, 5 degree(s) of freedom; a parametric bootstrap of the fit) but not the "
                           "run-to-run spread a second seed would show")
    assert res.no_verdict_reason is None and rows.loc["mc", "verdict"].startswith("not worth its tokens at 250k")
    # the probe forecaster's interval carries it too: here rho is 2 in every draw (mc = 2 x outcome in every group),
    # so all of its width is the curve's (zero before)
    probe_iv = forecast_rewards(curve, _probe(), method="probe", n_draws=1000).table.set_index("arm")
    assert probe_iv.loc["outcome", "gain_interval"] == (0.0, 0.0)
    assert probe_iv.loc["mc", "gain_interval"] == pytest.approx((-1.86, -0.18), abs=0.02)


def test_the_interval_grows_with_the_eval_noise_and_is_reproducible(tmp_path):
    widths = []
    for noise in (0.5, 2.0):
        n, y, s = synthetic_points(seeds=1, noise=noise, rng_seed=3)
        curve = ReferenceCurve(updates=n, accuracy=y, seeds=s, source=f"noise {noise}")
        lo, hi = forecast_rewards(curve, _probe(), method="cost_only", n_draws=500).table.set_index("arm").loc[
            "mc", "gain_interval"]
        widths.append(hi - lo)
        # a saved and reloaded curve draws the same replicates (fixed seed): the same interval
        curve.save(tmp_path / "c.json")
        again = forecast_rewards(ReferenceCurve.load(tmp_path / "c.json"), _probe(), method="cost_only", n_draws=500)
        assert again.table.set_index("arm").loc["mc", "gain_interval"] == (lo, hi)
    assert 0 < widths[0] < widths[1]


def test_an_empirical_one_seed_curve_reads_the_redrawn_evals(tmp_path):
    curve = load_reference_curve(_seed0_csv(tmp_path), accuracy_scale="points", mode="empirical")
    values = curve.interval_values(np.full(200, 10.0), np.arange(200))
    # centred on the eval at update 10 (73.9 points), spread by the eval noise (1.12 points), not one value
    assert curve(10.0) == pytest.approx(73.9) and values.mean() == pytest.approx(73.9, abs=0.2)
    assert values.shape == (200,) and values.std() == pytest.approx(curve.eval_noise[0], rel=0.2)
    lo, hi = forecast_rewards(curve, _probe(), method="cost_only", n_draws=500).table.set_index("arm").loc[
        "mc", "gain_interval"]
    assert hi - lo > 1.0


def test_a_one_seed_fit_without_residual_degrees_of_freedom_gets_no_interval(tmp_path):
    """Evals at updates 0, 5, 20 and 57: R0 and three fitted parameters, no residual left to estimate noise."""
    curve = load_reference_curve(_seed0_csv(tmp_path, updates=(0, 5, 20, 57)), accuracy_scale="points")
    assert curve.eval_noise == (None, 0) and curve.interval_source == "none"
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300)
    rows = res.table.set_index("arm")
    assert rows.loc["outcome", "gain_interval"] == (0.0, 0.0) and rows.loc["outcome", "verdict"] == "reference (grpo)"
    assert all(math.isnan(x) for x in rows.loc["mc", "gain_interval"])  # was [x, x]
    for meth in ("probe", "cost_only", "signal_proxy"):
        assert all(math.isnan(x) for x in rows.loc["mc", f"gain_{meth}_interval"])
    assert math.isfinite(rows.loc["mc", "forecast_gain"])  # the point forecast stays, marked
    why = ("one seed: no interval: the reference curve has one seed (no seed spread) and its fit has as many "
           "parameters as evals (no residual degrees of freedom), so nothing estimates its noise; give a curve of 2 "
           "or more seeds, or more evals")
    assert res.no_verdict_reason == why
    assert rows.loc["mc", "verdict"] == f"no verdict at 250k: {why}" and rows.loc["mc", "no_verdict_reason"] == why


def test_a_fit_through_every_eval_it_need_not_pass_estimates_no_noise():
    """Exact sigmoid values (5 residual degrees of freedom, residuals 0): the estimate is 0 noise, not none, so the
    interval is the point; a flat curve at 100 points (evals with no binomial noise) keeps +0.0 [+0.0, +0.0]."""
    n, y, s = synthetic_points(seeds=1, noise=0.0)
    curve = ReferenceCurve(updates=n, accuracy=y, seeds=s)
    assert curve.eval_noise == (pytest.approx(0.0, abs=1e-6), 8 - 4) and curve.interval_source == "eval_noise"
    row = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300).table.set_index("arm").loc["mc"]
    assert row["gain_interval"] == pytest.approx((row["forecast_gain"],) * 2, abs=1e-4)


def test_eval_noise_sd_is_the_residual_standard_deviation_over_its_degrees_of_freedom():
    fitted = np.linspace(60.0, 80.0, 8)
    y = fitted + np.array([1.0, -1.0] * 4)  # RSS 8
    # R0 read from an eval at 0, A, n_mid, B fitted: 4 parameters, 4 degrees of freedom
    assert eval_noise_sd(np.arange(8), y, fitted, r0_fixed=True, b_fixed=None) == (pytest.approx(math.sqrt(2)), 4)
    # B fixed: 3 parameters; R0 fitted too, B fixed: 3
    assert eval_noise_sd(np.arange(8), y, fitted, r0_fixed=True, b_fixed=1.0) == (pytest.approx(math.sqrt(8 / 5)), 5)
    assert eval_noise_sd(np.arange(8), y, fitted, r0_fixed=False, b_fixed=1.0)[1] == 5
    assert eval_noise_sd(np.arange(4), y[:4], fitted[:4], r0_fixed=True, b_fixed=None) == (None, 0)
    assert eval_noise_sd(np.arange(8), fitted, fitted, r0_fixed=True, b_fixed=None) == (0.0, 4)


def test_a_curve_of_several_seeds_reads_its_seed_replicates_as_before():
    curve = load_reference_curve("default")
    assert curve.interval_source == "seeds" and curve.eval_noise is None
    n = np.full(200, 16.6)
    np.testing.assert_array_equal(curve.interval_values(n, np.arange(200)), curve.replicate_values(n, np.arange(200)))
