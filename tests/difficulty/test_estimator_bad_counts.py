"""The public estimator API (``gradprobe.difficulty``: DifficultyEstimator.observe, rank_half, verdict) against counts
and probabilities that are no such thing, and the ranking's invariance to the order the prompts come in.

Before: a NaN success count passed ``observe`` (NaN fails the range test) and made that prompt's p_hat NaN; an
infinite attempt count reached scikit-learn ("Input sample_weight contains infinity", no prompt named); ``verdict``
of a NaN p_hat said "candidates are NOT predicted to fail more often than not (mean p_hat nan >= 1/2)"; ``rank_half``
and ``verdict`` took 1.5 as a probability.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gradprobe.difficulty import DifficultyEstimator, rank_half, verdict

IDS = ["a", "b", "c", "d"]


def _features(n=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3))


@pytest.mark.parametrize("successes, attempts, shown", [
    ([1, 0, np.nan, 1], [2, 2, 2, 2], "prompt 'c' has successes nan of attempts 2 (1 prompt(s)"),
    ([1, 0, 1, 1], [2, 2, np.inf, np.inf], "prompt 'c' has successes 1 of attempts inf (2 prompt(s)"),
])
def test_observe_refuses_non_finite_counts_naming_the_prompt(successes, attempts, shown):
    est = DifficultyEstimator()
    with pytest.raises(ValueError) as err:
        est.observe(IDS, _features(), successes, attempts)
    assert str(err.value) == (f"observe: {shown} with a count that is NaN or infinite): give finite counts of "
                              "completions, 0 <= successes <= attempts (0 attempts for a prompt with no outcome)")
    assert est.counts(IDS)[0].tolist() == [0.0, 0.0, 0.0, 0.0]  # nothing recorded


@pytest.mark.parametrize("p, shown, count", [([0.2, float("nan"), 0.5], "nan", 1), ([0.2, 1.5, -0.1], "1.5", 2),
                                             ([0.2, float("inf"), 0.5], "inf", 1)])
def test_rank_half_and_verdict_refuse_what_is_no_probability(p, shown, count):
    with pytest.raises(ValueError) as err:
        rank_half(["x", "y", "z"], p)
    assert str(err.value) == (f"rank_half: prompt 'y' has p_hat {shown} ({count} value(s) NaN, infinite or outside "
                              "[0, 1]): p_hat must be a success probability in [0, 1]; pass the estimator's p_hat "
                              "(DifficultyEstimator.p_hat), not a logit or a count")
    with pytest.raises(ValueError, match=rf"^verdict: p_hat\[1\] has p_hat {shown} \({count} value\(s\) NaN"):
        verdict(p)
    assert verdict([0.0, 1.0, 0.25])["mean_p_hat"] == pytest.approx(5 / 12)  # the bounds are probabilities


def _ranked(order, ids, x, s, n):
    est = DifficultyEstimator()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a degenerate fit would make the comparison vacuous
        est.observe([ids[i] for i in order], x[order], s[order], n[order])
        est.fit()
    everyone = sorted(ids)
    feats = x[[ids.index(i) for i in everyone]]
    p = est.p_hat(everyone, feats)
    return dict(zip(everyone, p)), [everyone[i] for i in rank_half(everyone, p)]


def test_ranking_is_invariant_to_the_order_of_the_observations():
    rng = np.random.default_rng(3)
    ids = [f"p{i:02d}" for i in range(24)]
    x = rng.normal(size=(24, 3))
    n = np.full(24, 4.0)
    s = rng.binomial(4, 1 / (1 + np.exp(-x[:, 0]))).astype(float)
    p1, order1 = _ranked(np.arange(24), ids, x, s, n)
    p2, order2 = _ranked(rng.permutation(24), ids, x, s, n)
    assert order1 == order2
    assert np.allclose([p1[i] for i in ids], [p2[i] for i in ids], rtol=0, atol=1e-9)
    assert 0.0 < min(p1.values()) < max(p1.values()) < 1.0 and len({round(v, 6) for v in p1.values()}) > 20
