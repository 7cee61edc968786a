"""The ceiling of the rank agreement under seed noise (calib.metrics.oracle_kendall_tau) and its pooling."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from calib.metrics import oracle_kendall_tau, pooled_rank_agreement, ranking_table


def slow_oracle(means, ses, draws, seed) -> float:
    """Loop reference: the same draws, tau-b from scipy per draw."""
    from scipy import stats

    z = np.random.default_rng(seed).standard_normal((draws, len(means)))
    taus = [stats.kendalltau(means, np.asarray(means) + np.asarray(ses) * z[b]).statistic for b in range(draws)]
    return float(np.nanmean(taus))


def test_oracle_tau_equals_a_loop_over_draws_in_float64():
    m, se = [0.0, -4.3, -4.1, 1.5, -0.8], [0.4, 0.5, 0.3, 0.9, 0.0]
    assert oracle_kendall_tau(m, se, draws=300, seed=3) == pytest.approx(slow_oracle(m, se, 300, 3), rel=1e-12)


def test_oracle_tau_limits():
    m = [0.0, -1.0, 2.0, 5.0]
    assert oracle_kendall_tau(m, [0, 0, 0, 0]) == 1.0  # no noise: the true order is the realized order
    assert math.isnan(oracle_kendall_tau(m, [0.1, float("nan"), 0.2, 0.3]))  # an arm of one seed: noise unknown
    assert abs(oracle_kendall_tau(m, [1e6] * 4, draws=20000)) < 0.02  # noise swamps the order: about 0
    # invariant to a common shift and scale of means and errors
    assert oracle_kendall_tau(np.array(m) * 3 + 7, [3.0] * 4, seed=1) == oracle_kendall_tau(m, [1.0] * 4, seed=1)
    assert math.isnan(oracle_kendall_tau([1.0], [0.1])) and math.isnan(oracle_kendall_tau([2.0, 2.0], [0.1, 0.1]))


def test_pooled_ceiling_weights_studies_by_arm_pairs():
    rng = np.random.default_rng(0)
    recs = []
    for study, arms in (("s1", {"grpo": 0.0, "a": -3.0, "b": -2.5, "c": 1.0}), ("s2", {"grpo": 0.0, "x": 0.3})):
        for arm, mu in arms.items():
            for seed in range(4):
                recs.append({"study": study, "arm": arm, "seed": seed, "target": mu + rng.normal(0, 1),
                             "score": mu + rng.normal(0, 0.1)})
    table = ranking_table(pd.DataFrame(recs), ["score"])
    sems = pd.DataFrame(recs).groupby(["study", "arm"])["target"].sem()
    assert table.set_index(["study", "arm"])["realized_se"].to_dict() == pytest.approx(sems.to_dict(), rel=1e-12)
    got = pooled_rank_agreement(table, "score", n_permutations=99)
    per = [oracle_kendall_tau(g["realized"], g["realized_se"]) for _, g in table.groupby("study")]
    assert got["oracle_kendall_tau"] == pytest.approx((6 * per[0] + 1 * per[1]) / 7, rel=1e-12)
    assert 0 < got["oracle_kendall_tau"] < 1
    # a table without standard errors (an older ranking table) has no ceiling, and nothing else changes
    older = pooled_rank_agreement(table.drop(columns="realized_se"), "score", n_permutations=99)
    assert math.isnan(older["oracle_kendall_tau"]) and older["kendall_tau"] == got["kendall_tau"]


def test_a_ranked_arm_of_one_seed_leaves_the_pooled_ceiling_undefined_with_its_reason(capsys):
    from calib.cli import _print_floor
    from calib.metrics import ONE_SEED

    recs = [{"study": "s1", "arm": a, "seed": k, "target": mu + 0.5 * k, "score": mu}
            for a, mu, n in (("grpo", 0.0, 3), ("a", -2.0, 3), ("b", 1.0, 1)) for k in range(n)]
    table = ranking_table(pd.DataFrame(recs), ["score"])
    got = pooled_rank_agreement(table, "score", n_permutations=99)
    assert math.isnan(got["oracle_kendall_tau"]) and got["oracle_reason"] == ONE_SEED
    assert got["kendall_tau"] == 1.0  # the rank agreement itself is still given
    # the floor line says which arms it is over when some had one seed
    arm = {"mae": {"estimate": 1.0, "interval": None}, "floor": {"estimate": 0.5, "interval": None},
           "arms": 3, "floor_arms": 2}
    m = {"seed_noise_floor": {"estimate": 0.4, "interval": [0.3, 0.5], "reason": None, "arms": 2, "runs": 6,
                              "single_seed_arms": 1},
         "errors": {"study": {"forecast_cost_only": {"raw": {"common": {"arm_level": arm}}}}}}
    _print_floor(m, "study")
    out = capsys.readouterr().out
    assert "seed noise of 2 study-arms; 1 arm(s) of one seed left out" in out
    assert "(3 study-arms, floor over 2, as forecast)" in out


def test_coverage_of_infinite_intervals_is_marked():
    from calib.cli import _cov

    assert _cov({"coverage": 1.0, "mean_interval_width": math.inf}) == "1.00 (infinite intervals)"
    assert _cov({"coverage": 0.875, "mean_interval_width": 7.5}) == "0.88"
