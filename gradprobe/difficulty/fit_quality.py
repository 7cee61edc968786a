"""How well the logistic model of ``gradprobe rank-prompts`` predicts prompts it was not fitted on.

K-fold cross-validation over the probed prompts (K = min(:data:`FOLDS`, n); Hastie, Tibshirani & Friedman 2009,
*The Elements of Statistical Learning*, 2nd ed., sec. 7.10): the probed prompts are cut into K seeded folds; each
fold's p_model comes from a model fitted (as the point fit, the same EstimatorConfig) on the other folds' outcomes
only. Scored by the Brier score over the held-out completions (Brier 1950; ``sklearn.metrics.brier_score_loss``)
beside the base rate's (every held-out prompt predicted at the other folds' mean success, the ``pool_mean``
baseline of ``difficulty-eval``), and their difference (model - base rate: below 0, the model beats the base rate).
Each figure carries a 90% percentile interval from a seeded bootstrap over the probed prompts (a prompt and all
its completions are the unit; the held-out predictions are kept, so the interval is that of the scoring sample,
given the folds' fits).
"""

from __future__ import annotations

import warnings

import numpy as np

from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, EstimatorConfig
from .intervals import LEVEL, percentile_interval
from .metrics import check_resamples

__all__ = ["FOLDS", "MIN_PROMPTS", "RESAMPLES", "heldout_fit_quality"]

#: Folds of the cross-validation (fewer when fewer prompts were probed).
FOLDS = 5
#: Fewest probed prompts (with an outcome) to cross-validate.
MIN_PROMPTS = 4
#: Bootstrap resamples of the intervals.
RESAMPLES = 1000


def heldout_fit_quality(config: EstimatorConfig, features, successes, attempts, *, seed: int = 0,
                        level: float = LEVEL, resamples: int = RESAMPLES) -> dict:
    """Cross-validated Brier score of p_model on the probed prompts (module docstring).

    Parameters
    ----------
    config : EstimatorConfig
    features : ndarray, shape (n, F)
        The probed prompts' features.
    successes, attempts : array-like, shape (n,)
        Correct completions and completions with a reward of each probed prompt.
    seed : int
        Seeds the folds and the bootstrap.
    level : float
        Interval coverage.
    resamples : int
        Bootstrap resamples, at least :data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`.

    Returns
    -------
    dict
        ``method``, ``folds`` (K), ``prompts`` (n with an outcome), ``completions``, ``brier``,
        ``base_rate_brier``, ``difference`` (each a float, with its ``*_interval`` [lo, hi]), ``level``,
        ``resamples``, ``reason`` (None; or why nothing was scored: fewer than :data:`MIN_PROMPTS` prompts, or every
        outcome equal, when the brier figures are None).

    Raises
    ------
    ValueError
        ``resamples`` not an integer of at least :data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`
        (:func:`~gradprobe.difficulty.metrics.check_resamples`).
    """
    from sklearn.metrics import brier_score_loss

    resamples = check_resamples(resamples, level=level, default=RESAMPLES, where="resamples")
    s = np.asarray(successes, dtype=np.float64).reshape(-1)
    n = np.asarray(attempts, dtype=np.float64).reshape(-1)
    keep = n > 0
    x, s, n = np.asarray(features, dtype=np.float64)[keep], s[keep], n[keep]
    out = {"method": "K-fold cross-validation over the probed prompts", "folds": None, "prompts": int(len(s)),
           "completions": int(n.sum()), "brier": None, "brier_interval": None, "base_rate_brier": None,
           "base_rate_brier_interval": None, "difference": None, "difference_interval": None, "level": level,
           "resamples": resamples, "reason": None}
    if len(s) < MIN_PROMPTS:
        return {**out, "reason": f"{len(s)} probed prompt(s) with an outcome: at least {MIN_PROMPTS} are needed to "
                                 "hold some out (raise --fit-prompts)"}
    if s.sum() in (0, n.sum()):
        return {**out, "reason": f"every probed completion {'failed' if s.sum() == 0 else 'succeeded'}: no model "
                                 "to score (no signal)"}
    k = min(FOLDS, len(s))
    rng = np.random.default_rng([seed, 0xCF01D])
    fold = np.empty(len(s), dtype=int)
    fold[rng.permutation(len(s))] = np.arange(len(s)) % k
    p, q = np.zeros(len(s)), np.zeros(len(s))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateOutcomesWarning)  # a fold of one class: its constant is scored
        for f in range(k):
            train = fold != f
            est = DifficultyEstimator(config)
            est.observe([str(i) for i in np.flatnonzero(train)], x[train], s[train], n[train])
            p[~train] = est.fit().predict_model(x[~train])
            q[~train] = s[train].sum() / n[train].sum()
    y, weight = np.r_[np.ones(len(s)), np.zeros(len(s))], np.r_[s, n - s]
    brier = float(brier_score_loss(y, np.r_[p, p], sample_weight=weight))
    base = float(brier_score_loss(y, np.r_[q, q], sample_weight=weight))
    loss_p, loss_q = s * (1 - p) ** 2 + (n - s) * p ** 2, s * (1 - q) ** 2 + (n - s) * q ** 2  # per prompt
    pick = rng.integers(0, len(s), (resamples, len(s)))
    total = n[pick].sum(1)
    bp, bq = loss_p[pick].sum(1) / total, loss_q[pick].sum(1) / total
    return {**out, "folds": k, "brier": brier, "brier_interval": percentile_interval(bp, level).tolist(),
            "base_rate_brier": base, "base_rate_brier_interval": percentile_interval(bq, level).tolist(),
            "difference": brier - base, "difference_interval": percentile_interval(bp - bq, level).tolist()}
