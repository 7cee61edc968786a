"""The interval of the pooled Kendall tau and Spearman rho (calib.bootstrap.pooled_interval, pooled_rank_agreement's
``kendall_tau_interval``): a percentile study-cluster bootstrap, checked draw for draw against a slow explicit loop in
float64 with scipy's tau-b and rho; its invariances, its refusal under 5 ranked studies, and the report's table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calib.metrics import MIN_INTERVAL_STUDIES, pooled_interval, pooled_rank_agreement
from calib_helpers import single_thread_blas  # noqa: F401


def _table(studies: dict) -> pd.DataFrame:
    """studies: {name: (forecasts, realized)} -> a ranking table (study, arm, f, realized)."""
    return pd.DataFrame([{"study": s, "arm": f"a{i}", "f": x, "realized": y}
                         for s, (xs, ys) in studies.items() for i, (x, y) in enumerate(zip(xs, ys))])


def _studies(k: int, seed: int = 0, noise: float = 1.0) -> dict:
    """k studies of 3-6 arms each: realized = forecast + noise (a forecaster that orders arms fairly well)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(k):
        n = 3 + i % 4
        x = rng.normal(size=n)
        out[f"s{i:02d}"] = (x, x + noise * rng.normal(size=n))
    return out


def _slow_interval(studies: dict, statistic, weight, resamples: int, level: float, seed: int) -> list:
    """The documented bootstrap, one resample at a time: the sorted studies drawn by
    default_rng(seed).integers(0, K, size=(B, K)), each drawn study's statistic recomputed with scipy from its arms,
    pooled with its weight, then the (1 -+ level) / 2 quantiles."""
    names = sorted(studies)
    draws = np.random.default_rng(seed).integers(0, len(names), size=(resamples, len(names)))
    pooled = []
    for row in draws:
        num = den = 0.0
        for k in row:
            x, y = (np.asarray(a, np.float64) for a in studies[names[k]])
            num += weight(len(x)) * float(statistic(x, y).statistic)
            den += weight(len(x))
        pooled.append(num / den)
    a = (1 - level) / 2
    return list(np.quantile(np.asarray(pooled, np.float64), [a, 1 - a]))


def test_the_interval_is_the_slow_explicit_bootstrap_draw_for_draw():
    studies = _studies(6, seed=1)
    r = pooled_rank_agreement(_table(studies), "f", n_permutations=99, bootstrap_resamples=300, bootstrap_level=0.9,
                              bootstrap_seed=7)
    tau = _slow_interval(studies, stats.kendalltau, lambda n: n * (n - 1) / 2, 300, 0.9, 7)
    rho = _slow_interval(studies, stats.spearmanr, lambda n: n, 300, 0.9, 7)
    assert r["kendall_tau_interval"] == pytest.approx(tau, rel=1e-12, abs=1e-12)
    assert r["spearman_rho_interval"] == pytest.approx(rho, rel=1e-12, abs=1e-12)
    assert r["kendall_tau_interval_reason"] is None and r["spearman_rho_interval_reason"] is None
    assert r["interval_bootstrap"]["resamples"] == 300 and r["interval_bootstrap"]["level"] == 0.9
    assert tau[0] < tau[1]  # a real spread: the six studies' taus differ


def test_the_defaults_are_calibs_bootstrap_95_percent_5000_resamples_seed_0():
    studies = _studies(5, seed=2)
    r = pooled_rank_agreement(_table(studies), "f", n_permutations=99)
    assert r["interval_bootstrap"] == {"resamples": 5000, "level": 0.95, "seed": 0, "min_studies": 5,
                                       "clusters": "study", "method": "percentile, studies resampled with replacement"}
    explicit = pooled_rank_agreement(_table(studies), "f", n_permutations=99, bootstrap_resamples=5000,
                                     bootstrap_level=0.95, bootstrap_seed=0)
    assert r["kendall_tau_interval"] == explicit["kendall_tau_interval"]
    assert r["kendall_tau_interval"] != pooled_rank_agreement(_table(studies), "f", n_permutations=99,
                                                              bootstrap_seed=1)["kendall_tau_interval"]


def test_permuting_the_studies_order_gives_the_same_interval():
    studies = _studies(7, seed=3)
    table = _table(studies)
    shuffled = table.sample(frac=1.0, random_state=5).reset_index(drop=True)  # rows and studies in another order
    a = pooled_rank_agreement(table, "f", n_permutations=99)
    b = pooled_rank_agreement(shuffled, "f", n_permutations=99)
    assert a["kendall_tau_interval"] == b["kendall_tau_interval"]
    assert a["spearman_rho_interval"] == b["spearman_rho_interval"]
    # pooled_interval itself: the studies given in any order are drawn in their sorted order
    v, w, s = np.array([0.1, 0.5, -0.2, 0.9, 0.3, 0.7]), np.array([3.0, 6, 10, 1, 3, 6]), list("fbdaec")
    order = np.array([4, 2, 0, 5, 1, 3])
    assert pooled_interval(v, w, s) == pooled_interval(v[order], w[order], [s[i] for i in order])


def test_the_interval_contains_the_pooled_tau_of_a_well_behaved_case():
    r = pooled_rank_agreement(_table(_studies(12, seed=4, noise=0.7)), "f", n_permutations=99)
    lo, hi = r["kendall_tau_interval"]
    assert lo < r["kendall_tau"] < hi and 0 < lo < hi < 1
    lo, hi = r["spearman_rho_interval"]
    assert lo < r["spearman_rho"] < hi


def test_equal_taus_in_every_study_give_a_point_interval():
    # every resample averages the same value: the interval is that value, whatever the weights
    studies = {f"s{i}": ([1, 2, 3, 4 + i], [1, 2, 3, 4 + i]) for i in range(6)}
    r = pooled_rank_agreement(_table(studies), "f", n_permutations=99)
    assert r["kendall_tau_interval"] == pytest.approx([1.0, 1.0]) and r["kendall_tau"] == pytest.approx(1.0)


def test_no_interval_under_five_ranked_studies_and_the_reason_says_why():
    assert MIN_INTERVAL_STUDIES == 5
    four = pooled_rank_agreement(_table(_studies(4)), "f", n_permutations=99)
    assert four["kendall_tau_interval"] is None and four["spearman_rho_interval"] is None
    assert four["kendall_tau_interval_reason"] == (
        "4 ranked studies: no study-level bootstrap interval under 5 (a percentile bootstrap over few clusters "
        "undercovers: Cameron & Miller 2015)")
    assert math.isfinite(four["kendall_tau"])  # the pooled tau itself is still given
    # a fifth study that cannot be ranked (constant forecasts) does not count
    flat = {**_studies(4), "zz": ([0.0, 0.0, 0.0], [1.0, 2.0, 3.0])}
    assert pooled_rank_agreement(_table(flat), "f", n_permutations=99)["kendall_tau_interval"] is None
    five = pooled_rank_agreement(_table(_studies(5)), "f", n_permutations=99)
    assert five["kendall_tau_interval"] is not None and five["kendall_tau_interval_reason"] is None
    empty = pooled_rank_agreement(_table({}).reindex(columns=["study", "arm", "f", "realized"]), "f")
    assert empty["kendall_tau_interval"] is None and empty["kendall_tau_interval_reason"].startswith("0 ranked")


@pytest.mark.parametrize("kwargs, says", [
    ({"bootstrap_level": 95}, "bootstrap level must lie strictly between 0 and 1"),
    ({"bootstrap_resamples": 0}, "bootstrap resamples must be a positive integer"),
])
def test_bad_bootstrap_settings_are_refused_naming_the_setting(kwargs, says):
    with pytest.raises(ValueError, match=says):
        pooled_rank_agreement(_table(_studies(5)), "f", n_permutations=99, **kwargs)


@pytest.mark.parametrize("args, kwargs, says", [
    (([0.1, 0.2], [1.0, 1.0], ["a", "a"]), {"min_studies": 2}, "a study is named twice"),
    (([0.1, 0.2], [1.0], ["a", "b"]), {}, r"values \(2\), weights \(1\) and studies \(2\)"),
    (([0.1, math.nan], [1.0, 1.0], ["a", "b"]), {}, "finite statistic and a positive weight"),
    (([0.1, 0.2], [1.0, 0.0], ["a", "b"]), {}, "finite statistic and a positive weight"),
    (([0.1, 0.2], [1.0, 1.0], ["a", "b"]), {"min_studies": 1}, "min_studies must be an integer of at least 2"),
])
def test_pooled_interval_refuses_bad_input_in_one_line(args, kwargs, says):
    with pytest.raises(ValueError, match=says):
        pooled_interval(*args, **kwargs)


def test_the_reports_ranking_table_shows_the_intervals_and_the_reason():
    from calib.report_html import _rank_interval_text, _ranking_table

    five = pooled_rank_agreement(_table(_studies(5, seed=6)), "f", n_permutations=99)
    four = pooled_rank_agreement(_table(_studies(4, seed=6)), "f", n_permutations=99)
    page = _ranking_table({"f": five, "g": four})
    lo, hi = five["kendall_tau_interval"]
    assert f"<td class=n>[{lo:+.2f}, {hi:+.2f}]</td>" in page
    lo, hi = five["spearman_rho_interval"]
    assert f"<td class=n>[{lo:+.2f}, {hi:+.2f}]</td>" in page
    assert page.count(' title="4 ranked studies: no study-level bootstrap interval under 5') == 2
    assert "<th>tau interval</th>" in page and "<th>rho interval</th>" in page
    text = _rank_interval_text({"ranking": {"f": five}})
    assert "95% percentile, study-cluster bootstrap (5000 resamples" in text and "under 5 ranked studies" in text
