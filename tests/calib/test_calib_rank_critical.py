"""The critical value of the pooled rank agreement (calib.metrics.critical_value): the smallest pooled Kendall tau the
permutation test of calib.metrics.pooled_rank_agreement calls significant at one-sided 5%, checked against a brute
enumeration with scipy's tau-b and against the test's own p-values."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calib.metrics import critical_value, pooled_rank_agreement


def _table(studies: dict) -> pd.DataFrame:
    """studies: {name: (forecasts, realized)} -> a ranking table (study, arm, f, realized)."""
    return pd.DataFrame([{"study": s, "arm": f"a{i}", "f": x, "realized": y}
                         for s, (xs, ys) in studies.items() for i, (x, y) in enumerate(zip(xs, ys))])


def test_critical_value_follows_each_p_value_formula():
    # 0.01 .. 1.00: exact p(v) = #{>= v} / 100 <= 0.05 from 0.96; Monte Carlo (1 + #) / 101 <= 0.05 from 0.97
    null = np.arange(1, 101) / 100
    assert critical_value(null, exact=True) == pytest.approx(0.96)
    assert critical_value(null, exact=False) == pytest.approx(0.97)
    assert critical_value(null, exact=True, alpha=0.10) == pytest.approx(0.91)
    # ties count as >=: ten values at the top make p(top) = 10/100 > 5%, so nothing is significant
    tied = np.r_[np.arange(1, 91) / 100, np.ones(10)]
    assert math.isnan(critical_value(tied, exact=True))
    assert math.isnan(critical_value(np.array([np.nan, np.nan]), exact=True))


def test_a_monte_carlo_tau_between_drawn_null_values_is_its_own_critical_value():
    """A tau between two drawn null values shares the p of the next one up: when that p is significant, the critical
    value is the observed tau itself, not the drawn value above it (a review's case: tau 0.347, p 0.0398, and
    "significant from 0.388" before)."""
    null = np.r_[np.linspace(-1, 0.3, 95), [0.388, 0.4, 0.5, 0.6]]  # 99 draws, 4 above 0.347
    assert critical_value(null, exact=False) == pytest.approx(0.388)  # (1 + 4) / 100 at 0.388 itself
    assert critical_value(null, exact=False, observed=0.347) == pytest.approx(0.347)  # (1 + 4) / 100 too
    assert critical_value(null, exact=False, observed=0.2) == pytest.approx(0.388)  # 0.2 has p (1 + 12) / 100
    for alpha in (5, 0, 1, True, "0.05"):
        with pytest.raises(ValueError, match=r"alpha must be a level in \(0, 1\) \(0.05 for 5%\)"):
            critical_value(null, exact=False, alpha=alpha)


def test_pooled_critical_tau_matches_a_brute_enumeration_of_two_studies():
    a = ([0.3, -1.2, 2.0, 0.7], [1.0, 0.1, -0.4, 2.2])
    b = ([5.0, 1.0, 3.0, 2.0, 4.0], [0.2, 0.9, 0.4, 0.1, 0.3])
    r = pooled_rank_agreement(_table({"A": a, "B": b}), "f")
    assert r["exact"] and r["n_permutations"] == 24 * 120
    null = []
    for pa in itertools.permutations(a[1]):
        ta = stats.kendalltau(a[0], pa).statistic
        for pb in itertools.permutations(b[1]):
            null.append((6 * ta + 10 * stats.kendalltau(b[0], pb).statistic) / 16)  # weights: arm pairs
    null = np.array(null)
    share = np.array([np.mean(null >= v - 1e-12) for v in null])
    assert r["critical_kendall_tau"] == pytest.approx(null[share <= 0.05].min(), abs=1e-12)
    assert 0.3 < r["critical_kendall_tau"] < 0.7


def test_one_study_of_four_arms_is_significant_only_at_perfect_agreement_and_three_never():
    four = pooled_rank_agreement(_table({"A": ([1, 2, 3, 4], [0.1, 0.5, 0.2, 0.9])}), "f")
    assert four["critical_kendall_tau"] == pytest.approx(1.0)  # 1/24 <= 5% < 4/24
    three = pooled_rank_agreement(_table({"A": ([1, 2, 3], [0.1, 0.5, 0.2])}), "f")
    assert math.isnan(three["critical_kendall_tau"]) and three["p_kendall"] > 0.05  # the best p is 1/6
    assert math.isnan(pooled_rank_agreement(_table({}).reindex(columns=["study", "arm", "f", "realized"]),
                                            "f")["critical_kendall_tau"])


@pytest.mark.parametrize("n_permutations", [9999, 500])
def test_a_tau_is_significant_when_it_reaches_the_critical_value(n_permutations):
    """Enumerated (2 studies of 3-4 arms: at most 576 permutations) or drawn (500 Monte Carlo permutations of 5-6
    arms), a tau is significant exactly when it reaches the critical value (drawn: the observed tau is a candidate
    too, since it may fall between two drawn null values and share the p of the next one up)."""
    rng, significant = np.random.default_rng(3), 0
    sizes = (3, 5) if n_permutations == 9999 else (5, 7)
    for noise in np.linspace(0.0, 2.0, 16):  # from perfect agreement to mostly noise
        x = [rng.normal(size=n) for n in rng.integers(*sizes, size=2)]
        studies = {f"S{k}": (xk, xk + noise * rng.normal(size=xk.size)) for k, xk in enumerate(x)}
        r = pooled_rank_agreement(_table(studies), "f", n_permutations=n_permutations)
        assert r["exact"] == (n_permutations == 9999)
        reaches = r["kendall_tau"] >= r["critical_kendall_tau"] - 1e-12
        significant += r["p_kendall"] <= 0.05
        assert (r["p_kendall"] <= 0.05) == reaches, (noise, r["kendall_tau"], r["critical_kendall_tau"])
    assert 2 <= significant <= 14  # both sides of the critical value are visited


def test_the_calibration_readme_ranking_table_is_the_shipped_rows_ranking():
    """data/calibration/README.md's "Ranking within each study" rows of the raw forecasters and rho: tau, its 95%
    study-cluster bootstrap interval, p and the critical value ("significant from") as calib report computes them on
    the shipped rows (report/rows.csv)."""
    import re
    from pathlib import Path

    from calib.metrics import ranking_table

    data = Path(__file__).resolve().parents[2] / "data" / "calibration"
    rows = pd.read_csv(data / "report" / "rows.csv")
    rows = rows[np.isfinite(rows["target"].astype(float))]
    cols = {"cost only": "forecast_cost_only", "probe": "forecast_probe", "signal proxy": "forecast_signal_proxy",
            "first order": "forecast_first_order", "raw per-update ratio rho": "rho"}
    table = ranking_table(rows, list(cols.values()))
    readme = (data / "README.md").read_text()
    for name, col in cols.items():
        m = re.search(rf"^\| {re.escape(name)} \| ([+-][\d.]+) \| (\[\S+, \S+\]) \| ([\d.]+) \| (\d+) / (\d+) \| "
                      rf"([+-][\d.]+) \| ([+-][\d.]+) \|$", readme, re.M)
        assert m, name
        r = pooled_rank_agreement(table, col)
        lo, hi = r["kendall_tau_interval"]
        assert f"{r['kendall_tau']:+.2f}" == m[1] and m[2] == f"[{lo:+.2f}, {hi:+.2f}]"
        assert float(m[3]) == pytest.approx(r["p_kendall"], abs=0.006)
        assert (r["n_arms"], r["n_studies"]) == (int(m[4]), int(m[5]))
        assert f"{r['oracle_kendall_tau']:+.2f}" == m[6] and f"{r['critical_kendall_tau']:+.2f}" == m[7]
    quoted = {}
    for col in ("forecast_cost_only", "forecast_probe"):
        r = pooled_rank_agreement(table, col)
        lo, hi = r["kendall_tau_interval"]
        quoted[col] = f"{r['kendall_tau']:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    top = " ".join((data.parents[1] / "README.md").read_text().split())
    for text in (f"probe {quoted['forecast_probe']}, cost only {quoted['forecast_cost_only']}",  # the shipped row
                 f"cost only's pooled Kendall tau within studies is {quoted['forecast_cost_only']} (95% study-cluster"):
        assert text in top, text
    assert f"Cost only's {quoted['forecast_cost_only']} (95% study-cluster" in " ".join(readme.split())
