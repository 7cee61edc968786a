"""The flat-group AUCs are scored once per estimator: the bootstrap's groups (``_flat_groups``) and the point AUCs of
``flat_group_auc`` came from two scorings of the same groups (``binary_auc``, i.e. scikit-learn's ``roc_auc_score``,
three times each). Now one scoring serves both (``bootstrap_metrics(..., group_size=G)["flat_auc_point"]``), with
the values of the two scorings before, compared here in float64 with an inline copy of the old code."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.difficulty import metrics
from gradprobe.difficulty.metrics import binary_auc, bootstrap_metrics, flat_group_auc, flat_group_outcomes

KINDS = ("all_correct", "all_wrong", "flat")


def _old_flat_groups(p, y, group_size):
    """The old ``_flat_groups`` (a scoring of its own), verbatim but for the check of G."""
    rows, ones, zeros = flat_group_outcomes(y, group_size)
    q = p[rows]
    pc, pw = q ** group_size, (1 - q) ** group_size
    return {kind: (rows, labels.astype(np.float64), binary_auc(labels, scores)["reason"], scores)
            for kind, labels, scores in (("all_correct", ones, pc), ("all_wrong", zeros, pw),
                                         ("flat", ones | zeros, pc + pw))}


def _old_flat_group_auc(p, y, group_size):
    """The old ``flat_group_auc``'s scoring, verbatim."""
    rows, ones, zeros = flat_group_outcomes(y, group_size)
    q = p[rows]
    pc, pw = q ** group_size, (1 - q) ** group_size
    return {"group_size": int(group_size), "groups": int(rows.size),
            "all_correct": binary_auc(ones, pc), "all_wrong": binary_auc(zeros, pw),
            "flat": binary_auc(ones | zeros, pc + pw)}


def _inputs(seed):
    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(5, 40)), int(rng.integers(2, 10))
    p = rng.uniform(size=m)
    if seed % 2:
        p = np.round(p, 1)  # ties
    y = (rng.uniform(size=(m, k)) < p[:, None]).astype(np.float64)
    y[rng.uniform(size=y.shape) < 0.15] = np.nan
    if seed == 3:
        y[:] = 1.0  # one class only: every AUC undefined, with its reason
    return p, y, int(rng.integers(1, k + 1))


@pytest.mark.parametrize("seed", range(6))
def test_one_scoring_gives_the_old_values(seed):
    p, y, g = _inputs(seed)
    point = bootstrap_metrics(p, y, resamples=50, seed=seed, group_size=g)["flat_auc_point"]
    old = _old_flat_group_auc(p, y, g)
    assert point == old and flat_group_auc(p, y, g) == old  # exact: the same floats, counts and reasons
    new_point, groups = metrics._flat_groups(p, y, g)
    assert new_point == old
    for kind, (rows, labels, reason, scores) in _old_flat_groups(p, y, g).items():
        got = groups[kind]
        assert got[2] == reason and got[1].dtype == labels.dtype == np.float64
        for a, b in zip(got[:2] + got[3:], (rows, labels, scores)):
            np.testing.assert_array_equal(a, b)  # exact, float64


def test_an_estimators_flat_aucs_are_scored_once(monkeypatch):
    """evaluate_estimator's scores of one estimator call roc_auc_score once for its AUC and three times for the flat
    groups (before: 3 more, as bootstrap_metrics and flat_group_auc each scored them)."""
    import sklearn.metrics

    from gradprobe.difficulty.evaluate import _scores

    calls = []
    real = sklearn.metrics.roc_auc_score

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sklearn.metrics, "roc_auc_score", counted)
    p, y, _ = _inputs(0)
    y[0, :], y[1, :] = 1.0, 0.0  # both classes in every kind of group
    got = _scores(p, y, 2, 40, 0.9, 0)
    assert len(calls) == 4
    assert got["flat_auc"] == _old_flat_group_auc(p, y, 2)
