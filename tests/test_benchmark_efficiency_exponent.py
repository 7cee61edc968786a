"""``benchmarks/efficiency_exponent.py``: the damped probe efficiency rho ** gamma, checked on shipped studies."""

from __future__ import annotations

import shutil
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
    assert ee.main(["--fit", TINY, SPARSE]) == 0
    out = capsys.readouterr().out
    cells = {x.split()[0]: x.split()[1:] for x in out.splitlines() if x.strip().startswith("study_tiny")}
    tiny = next(v for k, v in cells.items() if k.startswith("study_tiny@"))
    sparse = next(v for k, v in cells.items() if k.startswith("study_tiny_sparse@"))
    # data/calibration/README.md's per-study table: study_tiny cost only 0.72, probe 1.53 (12 runs)
    assert (tiny[0], tiny[2], tiny[3]) == ("12", "0.72", "1.53")
    # each study's gamma is fitted on the other study alone, never on itself
    grid = ee.gamma_grid(-1.0, 1.5, 0.05)
    alone = {}
    for name, path in (("tiny", TINY), ("sparse", SPARSE)):
        runs, curve = ee.study_runs(path)
        err = np.abs(ee.damped_forecasts(runs, curve, grid) - runs["target"].to_numpy(float))
        alone[name] = ee.fitted_gamma(err, grid, np.ones(len(runs), bool))
    assert (float(tiny[1]), float(sparse[1])) == (alone["sparse"], alone["tiny"]) == (0.2, 0.3)
    assert "gamma fitted on all --fit studies: 0.20" in out  # not what either held-out study got both times
    assert out.count("[no interval: 2 studies: ") == 2 and "not a p-value" not in out


def test_a_negative_ratio_is_clipped_as_the_forecaster_clips_it(ee, tiny):
    runs, curve = tiny
    rho = np.array([-0.5, 0.0, 2.0])
    np.testing.assert_array_equal(ee.efficiency(rho, 0.0), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ee.efficiency(rho, 0.5), [0.0, 0.0, np.sqrt(2.0)])
    np.testing.assert_array_equal(ee.efficiency(rho, -1.0), [0.0, 0.0, 0.5])
    neg = runs.copy()
    neg.loc[0, "rho"] = -0.5
    grpo_updates = neg.loc[0, "budget_value"] / neg.loc[0, "c_grpo"]
    start = float(curve(np.array([0.0]))[0]) - float(curve(np.array([grpo_updates]))[0])
    neg.loc[0, "forecast_probe"] = start  # the forecaster's forecast: effective updates clipped to 0
    f = ee.damped_forecasts(neg, curve, np.array([0.0, 0.5, 1.0]))
    assert np.all(np.isfinite(f)) and f[1, 0] == f[2, 0] == start


@pytest.mark.parametrize("argv, message", [
    (["--fit", TINY, SPARSE, "--test", TINY], "is in both --fit and --test"),
    (["--fit", TINY], "--fit needs 2 or more studies"),
    (["--fit", TINY, LR], "no run with a probe forecast"),
    (["--fit", TINY, str(DATA / "no_such_study")], "no_such_study"),
    (["--fit", TINY, TINY + "/"], "--fit needs 2 or more studies"),
    (["--fit", TINY, SPARSE, "--grid", "-1", "1.5", "1e-7"], "has over 10000 points"),
])
def test_bad_input_is_named(ee, capsys, argv, message):
    assert ee.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_a_copy_of_a_fit_study_is_no_test_study(ee, capsys, tmp_path):
    copy = tmp_path / "my_copy"
    shutil.copytree(SPARSE, copy)
    assert ee.main(["--fit", TINY, SPARSE, "--test", str(copy), "--grid", "0", "1", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "--test study my_copy@b30b502e2f0e has the plan of --fit study study_tiny_sparse@b30b502e2f0e" in err


def test_replicates_are_one_cell_and_a_reused_probe_is_said(ee, capsys):
    """The studies on 4,000 held-out prompts replicate one plan with new seeds and prompts, and reuse the probe of
    data/study_tiny, whose ratios gamma was fitted on: one cell, and said."""
    test = [str(DATA / s) for s in ("study_tiny_heldout4k", "study_tiny_replicate_heldout4k")]
    assert ee.main(["--fit", TINY, SPARSE, "--grid", "0", "1", "0.5", "--test", *test]) == 0
    out = capsys.readouterr().out.split("--test studies")[1]
    assert "per cell, MAE of damped minus cost only: study_tiny_heldout4k " in out
    assert out.count("[no interval: 1 study: ") == 2  # two studies, one cell: no interval over cells
    assert out.count("reuses the probe of --fit study_tiny@b6b755233a8f (same ratios): new runs, not a new probe") == 2
