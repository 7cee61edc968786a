"""``calib.metrics.p_value_text``: a Monte Carlo permutation p-value at its floor 1/(1+B) is shown as that floor."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from calib.metrics import p_value_text, pooled_rank_agreement


def test_the_floor_of_a_monte_carlo_p_value_is_a_bound_and_other_values_are_numbers():
    assert p_value_text({"p_kendall": 1 / 10000, "exact": False, "n_permutations": 9999}) == (
        "0.0001 (the floor 1/(1+B): none of 9999 permutations reached it)")
    assert p_value_text({"p_kendall": 2 / 10000, "exact": False, "n_permutations": 9999}) == "0.0002"
    assert p_value_text({"p_kendall": 1 / 720, "exact": True, "n_permutations": 720}) == "0.00139"
    assert p_value_text({"p_kendall": math.nan, "exact": False, "n_permutations": 0}) == "n/a"
    assert p_value_text({"p_spearman": 1 / 100, "exact": False, "n_permutations": 99}, "p_spearman") == (
        "0.01 (the floor 1/(1+B): none of 99 permutations reached it)")


def test_a_perfect_ranking_over_many_studies_reaches_the_floor_of_its_permutations():
    """Ten studies of four arms ranked perfectly: 24^10 permutations, so 99 are drawn and none reaches tau = 1."""
    rows = [dict(study=f"s{k}", arm=f"a{i}", score=float(i), realized=float(i)) for k in range(10) for i in range(4)]
    r = pooled_rank_agreement(pd.DataFrame(rows), "score", n_permutations=99)
    assert r["kendall_tau"] == 1.0 and not r["exact"] and r["p_kendall"] == 1 / 100
    assert p_value_text(r) == "0.01 (the floor 1/(1+B): none of 99 permutations reached it)"
    assert np.isfinite(r["p_spearman"]) and p_value_text(r, "p_spearman").startswith("0.01 (the floor")
