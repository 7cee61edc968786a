"""Intervals of each pool prompt's predicted success (``gradprobe rank-prompts``, ``ranking.csv``).

Every interval is equal-tailed at :data:`LEVEL` = 90% (5% in each tail). What p_hat is decides how its
interval is made (:mod:`gradprobe.difficulty.estimator`): an unprobed prompt's p_hat is the logistic model's
prediction p_model(x); a probed prompt's is the mean of its Beta posterior Beta(n0 p_model + S, n0 (1 - p_model) + F).

``p_model_lo, p_model_hi``
    The fit's uncertainty: a nonparametric bootstrap of the logistic model (Efron & Tibshirani 1993, *An
    Introduction to the Bootstrap*, ch. 6; the percentile interval of sec. 13.3). The probed prompts are
    resampled with replacement, each with all its outcomes (the prompt is the unit: its completions share its
    difficulty), the model is refitted on each of :data:`RESAMPLES` resamples as the point fit is (the same
    :class:`~gradprobe.difficulty.estimator.EstimatorConfig`), and the interval is the 5% and 95% quantiles of the
    refits' p_model for the prompt. A resample whose outcomes are all equal fits no model (the estimator's constant,
    the smoothed rate) and a bootstrap cannot vary a 0/n rate, so such a refit draws its constant from the Jeffreys
    posterior Beta(S + 1/2, F + 1/2) of the resample's pooled counts.
``p_lo, p_hi``
    The estimator's own interval for the prompt's success probability: its Beta (the posterior of a probed prompt;
    the prior Beta(n0 p_model, n0 (1 - p_model)) of an unprobed one, which says how far a prompt's rate may lie
    from the model's mean for its features) with p_model varying over the bootstrap refits: the 5% and 95%
    quantiles of the mixture over refits b of Beta(n0 p_b + S, n0 (1 - p_b) + F), taken from :data:`DRAWS` seeded
    draws of each refit's Beta.
``rate_lo, rate_hi`` (probed prompts only)
    The observed success rate S / n of the prompt's own completions alone: the Jeffreys interval, the quantiles
    of Beta(S + 1/2, n - S + 1/2), with the lower bound 0 when S = 0 and the upper bound 1 when S = n (Brown, Cai &
    DasGupta 2001, "Interval estimation for a binomial proportion", *Statistical Science* 16(2), sec. 4.1.2).

The verdict's mean p_hat gets the percentile interval of the pool mean of the posterior means over the refits.

The bounds are Monte Carlo estimates, seeded (the same seed gives the same bounds): a 5% quantile of B refits has a
standard error of sqrt(0.05 x 0.95 / B) / f, f the density at the bound, so with B = :data:`RESAMPLES` = 200 a bound
moves by a few hundredths between seeds where the refits spread widely (few probed prompts); ``--resamples`` raises B
(the error shrinks as 1 / sqrt(B), the cost grows as B).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, EstimatorConfig
from .metrics import check_resamples

__all__ = ["LEVEL", "RESAMPLES", "DRAWS", "FitBootstrap", "bootstrap_fit", "chunk_intervals", "jeffreys_interval",
           "percentile_interval"]

#: Coverage of every interval (equal-tailed).
LEVEL = 0.90
#: Bootstrap refits of the logistic model.
RESAMPLES = 200
#: Draws from each refit's Beta for the quantiles of p_hat's mixture (RESAMPLES x DRAWS draws per prompt).
DRAWS = 5


def percentile_interval(values, level: float = LEVEL, axis=None) -> np.ndarray:
    """The (1 - level) / 2 and (1 + level) / 2 quantiles of ``values`` (finite) along ``axis``, stacked first: shape
    (2, ...) (the percentile interval, Efron & Tibshirani 1993, sec. 13.3)."""
    a = (1.0 - level) / 2.0
    return np.quantile(np.asarray(values, dtype=np.float64), [a, 1.0 - a], axis=axis)


def jeffreys_interval(successes, attempts, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys interval of a binomial rate (Brown, Cai & DasGupta 2001, sec. 4.1.2): the (1 - level) / 2 and
    (1 + level) / 2 quantiles of Beta(s + 1/2, n - s + 1/2), lower bound 0 at s = 0, upper bound 1 at s = n.

    Parameters
    ----------
    successes, attempts : array-like, shape (M,)
        s and n per prompt (0 <= s <= n); n = 0 gives NaN bounds (nothing observed).
    level : float
        In (0, 1).

    Returns
    -------
    lo, hi : ndarray (float64), shape (M,)
    """
    from scipy.special import betaincinv

    s = np.asarray(successes, dtype=np.float64).reshape(-1)
    n = np.asarray(attempts, dtype=np.float64).reshape(-1)
    a = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):
        lo = np.where(s <= 0, 0.0, betaincinv(s + 0.5, n - s + 0.5, a))
        hi = np.where(s >= n, 1.0, betaincinv(s + 0.5, n - s + 0.5, 1.0 - a))
    none = n <= 0
    return np.where(none, np.nan, lo), np.where(none, np.nan, hi)


class FitBootstrap(NamedTuple):
    """B bootstrap refits of the logistic model as linear forms (:meth:`DifficultyEstimator.linear_predictor`):
    p_b(x) = clip(sigmoid(w_b . x' + c_b)) with x' = x, NaN -> fill_b. A refit without a model (a constant p) has
    w_b = 0 and c_b = logit(p)."""

    weights: np.ndarray   # (F, B)
    fills: np.ndarray     # (F, B)
    offsets: np.ndarray   # (B,)
    p_clip: float
    constant: int         # refits whose resample fitted no model (all outcomes equal)

    def predict(self, features) -> np.ndarray:
        """p_model of every refit for each row of ``features`` (M, F): shape (M, B)."""
        x = np.asarray(features, dtype=np.float64)
        missing = np.isnan(x)
        z = np.where(missing, 0.0, x) @ self.weights + missing.astype(np.float64) @ (self.fills * self.weights)
        p = 0.5 * (1.0 + np.tanh((z + self.offsets) / 2.0))  # sigmoid, without overflow
        return np.clip(p, self.p_clip, 1.0 - self.p_clip)


def bootstrap_fit(config: EstimatorConfig, features, successes, attempts, *, resamples: int = RESAMPLES,
                  seed: int = 0) -> FitBootstrap:
    """Refit the logistic model on ``resamples`` resamples of the probed prompts (module docstring).

    Parameters
    ----------
    config : EstimatorConfig
        The point fit's settings.
    features : ndarray, shape (n, F)
        The probed prompts' features.
    successes, attempts : array-like, shape (n,)
        Each probed prompt's correct completions and completions with a reward.
    resamples : int
        B >= 1 (the intervals of :func:`chunk_intervals` need at least
        :data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`).
    seed : int
        Seeds the resampling (and the Jeffreys draws of constant refits): the same seed gives the same refits.

    Returns
    -------
    FitBootstrap
    """
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    x = np.asarray(features, dtype=np.float64)
    s = np.asarray(successes, dtype=np.float64).reshape(-1)
    a = np.asarray(attempts, dtype=np.float64).reshape(-1)
    n, width = x.shape
    rng = np.random.default_rng([seed, 0xB0075])
    w, fill, c, constant = np.zeros((width, resamples)), np.zeros((width, resamples)), np.zeros(resamples), 0
    names = [str(k) for k in range(n)]
    with threadpool_limits(1), warnings.catch_warnings():  # small fits: one BLAS thread is the fastest
        warnings.simplefilter("ignore", DegenerateOutcomesWarning)
        for b in range(resamples):
            pick = rng.integers(0, n, n)
            est = DifficultyEstimator(config)
            est.observe(names, x[pick], s[pick], a[pick])
            form = est.fit().linear_predictor()
            if form is None:  # all outcomes equal: the constant drawn from its Jeffreys posterior
                p = rng.beta(s[pick].sum() + 0.5, (a[pick] - s[pick]).sum() + 0.5)
                p = min(max(p, config.p_clip), 1.0 - config.p_clip)
                c[b], constant = np.log(p / (1.0 - p)), constant + 1
            else:
                w[:, b], c[b], fill[:, b] = form
    return FitBootstrap(w, fill, c, config.p_clip, constant)


def chunk_intervals(boot: FitBootstrap, features, successes, failures, *, prior_strength: float, rng,
                    level: float = LEVEL, draws: int = DRAWS) -> dict:
    """The bootstrap intervals of a chunk of M prompts (module docstring).

    Parameters
    ----------
    boot : FitBootstrap
    features : ndarray, shape (M, F)
    successes, failures : ndarray, shape (M,)
        S and F of each prompt's posterior (0 for an unprobed prompt).
    prior_strength : float
        n0.
    rng : numpy.random.Generator
        For the Beta draws (seed it per chunk for a result independent of the run's other chunks).
    level : float
    draws : int
        D >= 1, draws per refit.

    Returns
    -------
    dict of ndarray
        ``p_lo``, ``p_hi``, ``p_model_lo``, ``p_model_hi`` (M,) and ``mean_sums`` (B,): each refit's sum over
        the chunk of the posterior means (for the interval of the pool's mean p_hat).

    Raises
    ------
    ValueError
        ``boot`` of fewer than :data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES` refits: its bounds would be single
        refits' values, no interval (:func:`~gradprobe.difficulty.metrics.check_resamples`).
    """
    check_resamples(int(boot.offsets.shape[0]), level=level, default=RESAMPLES, unit="bootstrap refits",
                    estimate="p_hat")
    p = boot.predict(features)  # (M, B)
    alpha = prior_strength * p + np.asarray(successes, dtype=np.float64)[:, None]
    beta = prior_strength * (1.0 - p) + np.asarray(failures, dtype=np.float64)[:, None]
    model_lo, model_hi = percentile_interval(p, level, axis=1)
    sample = rng.beta(alpha[:, :, None], beta[:, :, None], size=(*p.shape, draws)).reshape(len(p), -1)
    p_lo, p_hi = percentile_interval(sample, level, axis=1)
    return {"p_lo": p_lo, "p_hi": p_hi, "p_model_lo": model_lo, "p_model_hi": model_hi,
            "mean_sums": (alpha / (alpha + beta)).sum(axis=0)}
