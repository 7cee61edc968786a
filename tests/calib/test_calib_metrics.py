"""Rank agreement: vectorised tau-b / rho equal scipy's; the pooled permutation test permutes within studies."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calib.metrics import bias, coverage, kendall_tau_b, mae, pooled_rank_agreement, ranking_table, spearman_rho
from calib_helpers import single_thread_blas  # noqa: F401


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")  # scipy's own reference on constant rows
def test_tau_b_and_rho_equal_scipy_with_ties():
    rng = np.random.default_rng(0)
    for n in (2, 3, 6, 9):
        x = rng.integers(0, 3, n).astype(float)
        Y = rng.integers(0, 3, (20, n)).astype(float)
        ref_t = [stats.kendalltau(x, y).statistic for y in Y]
        ref_r = [stats.spearmanr(x, y).statistic for y in Y]
        np.testing.assert_allclose(kendall_tau_b(x, Y), ref_t, rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(spearman_rho(x, Y), ref_r, rtol=1e-12, equal_nan=True)


def test_simple_metrics():
    assert bias([1, 3], [0, 0]) == 2.0 and mae([1, -3], [0, 0]) == 2.0
    assert coverage([0, 0, np.nan], [1, 1, 1], [0.5, 2.0, 0.5]) == 0.5  # the NaN-bound row is not counted
    assert math.isnan(mae([], []))


def _table(studies: dict) -> pd.DataFrame:
    return pd.DataFrame([{"study": s, "arm": f"a{i}", "f": f, "realized": r}
                         for s, (fs, rs) in studies.items() for i, (f, r) in enumerate(zip(fs, rs))])


def test_pooled_tau_exact_p_value_one_study():
    t = _table({"s": ([1, 2, 3, 4, 5, 6.0], [1, 2, 3, 4, 5, 6.0])})
    r = pooled_rank_agreement(t, "f")
    assert r["kendall_tau"] == pytest.approx(1.0) and r["spearman_rho"] == pytest.approx(1.0)
    assert r["exact"] and r["n_permutations"] == 720 and r["p_kendall"] == pytest.approx(1 / 720)
    assert r["n_studies"] == 1 and r["n_arms"] == 6


def test_pooled_test_permutes_within_studies_only():
    # two studies of 3 arms: 3! * 3! = 36 within-study permutations (all enumerated). Brute force here.
    fa, ra = [0.0, 1.0, 2.0], [0.5, 0.0, 3.0]
    fb, rb = [5.0, 1.0, 2.0, ], [9.0, 1.0, 4.0]
    r = pooled_rank_agreement(_table({"a": (fa, ra), "b": (fb, rb)}), "f")
    tau = lambda f, y: stats.kendalltau(f, y).statistic  # noqa: E731
    obs = (3 * tau(fa, ra) + 3 * tau(fb, rb)) / 6  # weights: 3 arm pairs each
    null = [(3 * tau(fa, pa) + 3 * tau(fb, pb)) / 6
            for pa in itertools.permutations(ra) for pb in itertools.permutations(rb)]
    assert r["exact"] and r["n_permutations"] == 36
    assert r["kendall_tau"] == pytest.approx(obs)
    assert r["p_kendall"] == pytest.approx(np.mean(np.array(null) >= obs - 1e-12))
    assert r["studies"]["a"]["kendall_tau"] == pytest.approx(tau(fa, ra))


def test_pooled_monte_carlo_and_degenerate_cases():
    rng = np.random.default_rng(3)
    studies = {f"s{k}": (list(range(6)), list(np.arange(6) + rng.normal(0, 0.5, 6))) for k in range(3)}
    r = pooled_rank_agreement(_table(studies), "f", n_permutations=2000, seed=1)
    assert not r["exact"] and r["n_permutations"] == 2000
    assert r["p_kendall"] >= 1 / 2001 and r["p_kendall"] < 0.01 and r["kendall_tau"] > 0.6
    # a study with a constant score ranks nothing: left out of the pooled statistic, its entry NaN
    t = _table({"s": ([0, 0, 0.0], [1, 2, 3.0])})
    r = pooled_rank_agreement(t, "f")
    assert r["n_studies"] == 0 and math.isnan(r["kendall_tau"]) and math.isnan(r["p_kendall"])


def test_ranking_table_includes_grpo_and_skips_missing_accuracies():
    rows = pd.DataFrame({"study": ["s"] * 6, "arm": ["grpo", "grpo", "a", "a", "b", "b"],
                         "f": [0, 0, 2.0, 2.0, -1.0, -1.0], "target": [0, 0, 1.0, np.nan, -2.0, -3.0]})
    t = ranking_table(rows, ["f"])
    by = t.set_index("arm")
    assert by.loc["a", "seeds"] == 1 and by.loc["b", "realized"] == -2.5
    assert list(t["arm"]) == ["a", "grpo", "b"] and list(t["rank_training"]) == [1, 2, 3]
    assert list(t["rank_f"]) == [1, 2, 3]
