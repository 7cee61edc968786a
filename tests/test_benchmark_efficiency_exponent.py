"""``benchmarks/efficiency_exponent.py``: the damped probe efficiency rho ** gamma, checked on shipped studies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_benchmark

DATA = Path(__file__).resolve().parents[1] / "data"
TINY, SPARSE, LR = (str(DATA / s) for s in ("study_tiny", "study_tiny_sparse", "study_tiny_lr"))


@pytest.fixture(scope="module")
def ee():
    return load_benchmark("efficiency_exponent")


@pytest.fixture(scope="module")
def tiny(ee):
    return ee.study_runs(TINY)


def test_grid_holds_both_forecasters_and_refuses_one_without(ee):
    grid = ee.gamma_grid(-1.0, 1.5, 0.05)
    assert len(grid) == 51 and grid[0] == -1.0 and grid[-1] == 1.5
    assert 0.0 in grid and 1.0 in grid and 0.3 in grid
    with pytest.raises(ee.ExponentError, match="must contain 0 and 1"):
        ee.gamma_grid(0.0, 1.0, 0.3)  # 0, 0.3, 0.6, 0.9: no probe forecaster
    with pytest.raises(ee.ExponentError, match="STEP > 0"):
        ee.gamma_grid(0.0, 1.0, 0.0)


def test_damped_forecasts_reproduce_both_columns_and_lie_between(ee, tiny):
    runs, curve = tiny
    assert len(runs) == 12 and set(runs["arm"]) == {"mc_value", "mc_advantage", "hybrid_0.5"}
    f = ee.damped_forecasts(runs, curve, np.array([0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(f[0], runs["forecast_cost_only"].to_numpy(float))
    np.testing.assert_array_equal(f[2], runs["forecast_probe"].to_numpy(float))
    # slow reference, run by run in float64
    for i, r in runs.iterrows():
        n = float(r["budget_value"]) / float(r["tokens_per_update"]) * float(r["rho"]) ** 0.5
        ref = float(curve(np.array([n], dtype=np.float64))[0]) - float(
            curve(np.array([float(r["budget_value"]) / float(r["c_grpo"])]))[0])
        assert f[1, i] == pytest.approx(ref, abs=1e-12)
    up = runs["rho"].to_numpy(float) > 1  # a faster reward: more effective updates as gamma grows (curve increasing)
    assert up.any() and np.all(f[0, up] < f[1, up]) and np.all(f[1, up] < f[2, up])


def test_a_model_that_is_not_the_forecasters_is_refused(ee, tiny):
    runs, curve = tiny
    off = runs.copy()
    off["rho"] = off["rho"] * 1.01
    with pytest.raises(ee.ExponentError, match="gamma 1.0 is .* off the rows' forecast_probe"):
        ee.damped_forecasts(off, curve, np.array([0.0, 1.0]))


def test_fitted_gamma_is_the_grid_point_of_least_mae(ee):
    rng = np.random.default_rng(3)
    grid = np.array([-0.5, 0.0, 0.5, 1.0])
    errors = rng.random((4, 30))
    keep = rng.random(30) < 0.6
    means = [sum(errors[g, j] for j in range(30) if keep[j]) / keep.sum() for g in range(4)]
    assert ee.fitted_gamma(errors, grid, keep) == grid[int(np.argmin(means))]
    errors[:, :] = 1.0  # ties: the first
    assert ee.fitted_gamma(errors, grid, keep) == -0.5


def test_command_leaves_each_study_out_and_quotes_the_readme_figure(ee, capsys):
    assert ee.main(["--fit", TINY, SPARSE, "--grid", "0", "1", "0.5"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("study_tiny@"))
    runs, gamma, cost, probe, _ = line.split()[1:]
    # data/calibration/README.md's per-study table: study_tiny cost only 0.72, probe 1.53 (12 runs)
    assert (runs, cost, probe) == ("12", "0.72", "1.53") and gamma in {"0.00", "0.50", "1.00"}
    assert "[no interval: " in out and "gamma fitted on all --fit studies: " in out


@pytest.mark.parametrize("argv, message", [
    (["--fit", TINY, SPARSE, "--test", TINY], "is in both --fit and --test"),
    (["--fit", TINY], "--fit needs 2 or more studies"),
    (["--fit", TINY, LR], "no run with a probe forecast"),
    (["--fit", TINY, str(DATA / "no_such_study")], "no_such_study"),
])
def test_bad_input_is_named(ee, capsys, argv, message):
    assert ee.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
