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
    assert oracle_kendall_tau(m, [float("nan")] * 4) == 1.0  # one seed per arm: no noise estimate, counted 0
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
