"""Study-cluster bootstrap intervals of the mean absolute error (accuracy points) and of paired MAE differences.

The calibration rows of one study share its model, task, grpo curve and probe run, so their errors
are correlated; resampling rows as if independent would understate the uncertainty. The unit of
resampling is therefore the *study* (a cluster or "block" bootstrap: Efron & Tibshirani 1993,
"An Introduction to the Bootstrap", ch. 6 and 8.5 on resampling the independent units of a
structured sample; Davison & Hinkley 1997, "Bootstrap Methods and their Application", sec. 3.8):

- the K studies present are sorted by label; one resample draws K study indices uniformly with
  replacement (``numpy.random.default_rng(seed).integers(0, K, size=(B, K))``), and every row of a
  drawn study comes along, as many times as the study was drawn;
- the statistic of a resample is the mean over its rows, i.e. the ratio
  sum_k c_k S_k / sum_k c_k n_k with c_k the times study k was drawn, S_k the sum of the values over
  its rows and n_k its number of rows (rows of an MAE: |forecast - realized|; of a paired
  difference: |forecast_a - realized| - |forecast_b - realized| on the same rows, whose mean is
  exactly MAE_a - MAE_b);
- the interval at level L is the percentile interval (Efron & Tibshirani 1993, sec. 13.3): the
  (1 - L)/2 and (1 + L)/2 quantiles of the B resampled statistics (``numpy.quantile``, linear
  interpolation, Hyndman & Fan type 7).

Every call with the same ``seed``, ``resamples`` and set of study labels draws the same resamples,
so the MAE intervals of all forecasters and the intervals of their differences on the same rows
come from one shared set of resamples (the difference interval is paired, not a combination of two
separate intervals).

What it is not: an interval, not a p-value or a test. An interval of a difference that excludes 0
says the resampled studies agree on the sign; with few studies it is optimistic: with K studies
there are only C(2K - 1, K) distinct resamples (3 with 2 studies, 1716 with 7), and percentile
cluster-bootstrap intervals with under about 20-50 clusters are known to be too narrow (Cameron,
Gelbach & Miller 2008, "Bootstrap-based improvements for inference with clustered errors").
With fewer than 2 studies no interval is given (``interval`` None, ``reason`` says why): the
study-to-study variation cannot be estimated from one study. Nor under ``min_studies``
(:func:`cluster_mean_interval`; 2 by default here, :data:`MIN_INTERVAL_STUDIES` = 5 in ``calib report``, as for
the pooled tau of :func:`pooled_interval`): with 2 studies the 3 distinct resamples are both studies, the one
twice or the other twice, so the "interval" is little more than the two studies' own values (an MAE of
1.52 [1.51, 1.53] says only that the two studies' MAEs are 1.51 and 1.53, not that the MAE is known to 0.01).

Why numpy rather than :func:`scipy.stats.bootstrap`: scipy resamples the observations of its data
arrays, so a cluster bootstrap needs the study ids as the data and the ratio above as a vectorized
statistic, which works for one statistic, but the report needs the *same* resamples for every
forecaster and every paired difference, and a reference loop that reproduces them draw for draw;
scipy's order of random draws is an implementation detail it does not expose. Drawing the (B, K)
index matrix once here keeps the resamples explicit and reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

RESAMPLES = 5000
LEVEL = 0.95
SEED = 0
MIN_INTERVAL_STUDIES = 5
"""Fewest studies for which the calibration report gives a study-cluster bootstrap interval: the pooled tau's and
rho's (:func:`pooled_interval`), and every MAE's, paired MAE difference's and seed-noise floor's
(``min_studies`` of :func:`cluster_mean_interval`, which ``calib report`` passes). A percentile bootstrap over few
clusters undercovers (module docstring; :func:`pooled_interval`)."""
FEW_CLUSTERS = "a percentile bootstrap over few clusters undercovers: Cameron & Miller 2015"
"""Why an interval is withheld under ``min_studies`` studies (the end of :func:`few_studies_reason`)."""


@dataclass(frozen=True)
class ClusterInterval:
    """A mean over rows with its study-cluster bootstrap interval (accuracy points).

    Attributes
    ----------
    estimate : float
        The mean over all rows as given (NaN with no rows).
    interval : tuple of float or None
        (lower, upper) percentile interval at ``level``; None with fewer than 2 studies.
    reason : str or None
        Why there is no interval (None when there is one).
    n_clusters, rows : int
        Studies and rows the mean is over.
    resamples, level, seed : int, float, int
        The bootstrap settings.
    resampled : numpy.ndarray or None
        Shape (resamples,): the B resampled means the interval is the percentiles of (for
        :func:`detectable_difference`); None when there is no interval. Not part of :meth:`as_dict`.
    """

    estimate: float
    interval: tuple | None
    reason: str | None
    n_clusters: int
    rows: int
    resamples: int
    level: float
    seed: int
    resampled: np.ndarray | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        """``{"estimate", "interval": [lo, hi] or None, "reason", "n_clusters", "rows"}`` (JSON-ready)."""
        return {"estimate": self.estimate, "interval": None if self.interval is None else list(self.interval),
                "reason": self.reason, "n_clusters": self.n_clusters, "rows": self.rows}


def check_settings(resamples: int, level: float) -> None:
    """Check the bootstrap settings.

    Raises
    ------
    ValueError
        ``resamples`` is not a positive integer or ``level`` is not strictly between 0 and 1.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"bootstrap resamples must be a positive integer, got {resamples!r}; "
                         f"the default is {RESAMPLES}")
    if not (isinstance(level, (float, int, np.floating)) and 0.0 < float(level) < 1.0):
        raise ValueError(f"bootstrap level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")


def cluster_counts(clusters, *, resamples: int = RESAMPLES,
                   seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cluster resamples: how often each study is drawn in each resample.

    Parameters
    ----------
    clusters : array-like, shape (n_rows,)
        The study of each row (any sortable labels).
    resamples : int
        B, the number of resamples.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    (labels, codes, counts)
        ``labels``: shape (K,), the sorted distinct studies; ``codes``: shape (n_rows,), each row's
        index into ``labels``; ``counts``: int array, shape (B, K), times study k is drawn in
        resample b (each row sums to K). Drawn as ``default_rng(seed).integers(0, K, size=(B, K))``.

    Raises
    ------
    ValueError
        ``resamples`` is not a positive integer, or a cluster label is missing (NaN/None).
    """
    check_settings(resamples, 0.5)
    s = pd.Series(np.asarray(clusters, dtype=object))
    if s.isna().any():
        raise ValueError("a row has no study (the `study` column is empty): every row needs its cluster label")
    codes, labels = pd.factorize(s, sort=True)
    k = len(labels)
    idx = np.random.default_rng(seed).integers(0, k, size=(resamples, k)) if k else np.zeros((resamples, 0), int)
    counts = np.zeros((resamples, k), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(resamples), k), idx.ravel()), 1)
    return np.asarray(labels), codes, counts


def check_min_studies(min_studies) -> None:
    """Check the fewest studies for an interval (:func:`cluster_mean_interval`, :func:`pooled_interval`).

    Raises
    ------
    ValueError
        ``min_studies`` is not an integer of at least 2.
    """
    if isinstance(min_studies, bool) or not isinstance(min_studies, (int, np.integer)) or min_studies < 2:
        raise ValueError(f"min_studies must be an integer of at least 2 (a bootstrap over studies needs 2), "
                         f"got {min_studies!r}")


def few_studies_reason(k: int, min_studies: int, *, unit: str = "studies", kind: str = "study-cluster") -> str:
    """Why no interval is given over ``k`` studies, fewer than ``min_studies`` (the ``reason`` of an interval).

    E.g. ``"2 studies: no study-cluster bootstrap interval under 5 (a percentile bootstrap over few clusters
    undercovers: Cameron & Miller 2015)"``; :func:`pooled_interval` says ``"ranked studies"`` and ``"study-level"``.
    """
    return f"{k} {unit}: no {kind} bootstrap interval under {min_studies} ({FEW_CLUSTERS})"


def cluster_mean_interval(values, clusters, *, resamples: int = RESAMPLES, level: float = LEVEL,
                          seed: int = SEED, min_studies: int = 2) -> ClusterInterval:
    """Mean of ``values`` over rows, with a 95% (``level``) study-cluster bootstrap percentile interval.

    An interval, not a p-value: it describes the spread of the mean over resampled sets of studies
    (module docstring for the method, its sources and why few studies make it optimistic).

    Parameters
    ----------
    values : array-like of float, shape (n_rows,)
        Per-row values (points), all finite.
    clusters : array-like, shape (n_rows,)
        The study of each row; rows of one study are resampled together.
    resamples, level, seed
        B (default 5000), the interval's level (default 0.95), the seed (default 0).
    min_studies : int
        Fewest studies for an interval (default 2, the least a bootstrap over studies needs; ``calib report``
        passes :data:`MIN_INTERVAL_STUDIES`, 5: module docstring).

    Returns
    -------
    ClusterInterval
        ``interval`` None and a ``reason`` when there are no rows, fewer than 2 studies, or fewer than
        ``min_studies`` (:func:`few_studies_reason`); ``estimate`` is the mean all the same.

    Raises
    ------
    ValueError
        Lengths differ, a value is not finite, or bad ``resamples``/``level``/``min_studies`` (the message names it).
    """
    check_settings(resamples, level)
    check_min_studies(min_studies)
    v = np.asarray(values, dtype=np.float64).ravel()
    c = np.asarray(clusters, dtype=object).ravel()
    if v.shape != c.shape:
        raise ValueError(f"values ({v.size} rows) and clusters ({c.size} rows) must have one entry per row")
    if not np.isfinite(v).all():
        raise ValueError(f"{int((~np.isfinite(v)).sum())} value(s) are not finite: pass only rows with both a "
                         "forecast and a realized gain")
    common = {"resamples": int(resamples), "level": float(level), "seed": int(seed), "rows": int(v.size)}
    if v.size == 0:
        return ClusterInterval(math.nan, None, "no rows", 0, **common)
    labels, codes, counts = cluster_counts(c, resamples=resamples, seed=seed)
    k = len(labels)
    estimate = float(v.mean())
    if k < 2:
        return ClusterInterval(estimate, None, f"{k} study: a study-cluster bootstrap needs at least 2 studies "
                                               "(the study-to-study variation cannot be estimated from one)",
                               k, **common)
    if k < min_studies:
        return ClusterInterval(estimate, None, few_studies_reason(k, min_studies), k, **common)
    sums = np.bincount(codes, weights=v, minlength=k)  # S_k, shape (K,)
    sizes = np.bincount(codes, minlength=k).astype(np.float64)  # n_k, shape (K,)
    stats = (counts @ sums) / (counts @ sizes)  # shape (B,)
    a = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return ClusterInterval(estimate, (float(lo), float(hi)), None, k, **common, resampled=stats)


def per_row_interval(statistic, columns: dict, clusters, **settings) -> ClusterInterval:
    """Mean over rows of a per-row statistic of several aligned columns, with its study-cluster interval.

    The one resampling of :func:`mae_interval` and :func:`mae_difference_interval`: ``statistic`` maps
    the columns (float64 arrays, shape (n_rows,) each, in the order of ``columns``) to one value per
    row, shape (n_rows,), and :func:`cluster_mean_interval` resamples those values by study.

    Parameters
    ----------
    statistic : callable
        ``statistic(*arrays) -> ndarray, shape (n_rows,)`` (points).
    columns : dict[str, array-like of float]
        Name -> column, shape (n_rows,) each; the names appear in the error.
    clusters : array-like, shape (n_rows,)
        The study of each row.
    **settings
        ``resamples``, ``level``, ``seed``, ``min_studies`` of :func:`cluster_mean_interval`.

    Raises
    ------
    ValueError
        Columns of different lengths (named), or as :func:`cluster_mean_interval`.
    """
    arrays = [np.asarray(x, np.float64) for x in columns.values()]
    if len({a.shape for a in arrays}) > 1:
        sizes = [f"{name} ({a.size})" for name, a in zip(columns, arrays)]
        raise ValueError(f"{', '.join(sizes[:-1])} and {sizes[-1]} must have one entry per row (the same rows for "
                         "every column)")
    return cluster_mean_interval(statistic(*arrays), clusters, **settings)


def mae_interval(predicted, realized, clusters, **settings) -> ClusterInterval:
    """Mean absolute error mean|predicted - realized| (points) with its study-cluster bootstrap interval.

    Parameters
    ----------
    predicted, realized : array-like of float, shape (n_rows,)
    clusters, **settings
        As :func:`per_row_interval`.

    Returns
    -------
    ClusterInterval
        An interval, not a p-value; None with a reason below 2 studies (or ``min_studies``).

    Raises
    ------
    ValueError
        As :func:`per_row_interval`.
    """
    return per_row_interval(lambda p, y: np.abs(p - y), {"predicted": predicted, "realized": realized}, clusters,
                            **settings)


def mae_difference_interval(predicted_a, predicted_b, realized, clusters, **settings) -> ClusterInterval:
    """Paired MAE difference MAE(a) - MAE(b) on the same rows (points), with its study-cluster interval.

    Both forecasters are scored on the same rows and every resample carries the same studies for
    both (the per-row differences |a - y| - |b - y| are resampled), so the interval is that of the
    paired difference. Negative: ``a`` errs less than ``b``. An interval, not a p-value.

    Parameters
    ----------
    predicted_a, predicted_b, realized : array-like of float, shape (n_rows,)
    clusters, **settings
        As :func:`per_row_interval`.

    Returns
    -------
    ClusterInterval

    Raises
    ------
    ValueError
        As :func:`per_row_interval` (e.g. arrays of different lengths).
    """
    return per_row_interval(lambda a, b, y: np.abs(a - y) - np.abs(b - y),
                            {"predicted_a": predicted_a, "predicted_b": predicted_b, "realized": realized},
                            clusters, **settings)

DETECTABLE_ALPHA, DETECTABLE_POWER = 0.05, 0.8
"""The test of :func:`detectable_difference`: two-sided at 5%, 80% power (2.80 standard errors)."""


def detectable_difference(resampled, alpha: float = DETECTABLE_ALPHA, power: float = DETECTABLE_POWER) -> float:
    """The smallest difference (points) a two-sided test at ``alpha`` would detect with ``power``, from the
    resampled values of the difference.

    (z_{1-alpha/2} + z_power) x the bootstrap standard error of the difference (the standard deviation, ddof 1, of
    ``resampled``): the normal approximation of the minimal detectable effect (e.g. Cohen 1988, "Statistical Power
    Analysis for the Behavioral Sciences", ch. 12; 2.80 x SE at 5% and 80%). A true difference smaller than it would
    more often than not go unseen. Used for the paired MAE differences of ``calib report`` (study-cluster resamples,
    :attr:`ClusterInterval.resampled`) and of ``benchmarks/unseen_study.py`` (seed resamples within arms).

    Parameters
    ----------
    resampled : array-like of float, shape (B,)
        The difference on each of B resamples (points), B >= 2.
    alpha, power : float
        The test's two-sided level and power (defaults 0.05 and 0.8).

    Returns
    -------
    float
        Points; NaN with fewer than 2 resamples.
    """
    from scipy.stats import norm

    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * np.std(np.asarray(resampled, float), ddof=1))


def pooled_interval(values, weights, studies, *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED,
                    min_studies: int = MIN_INTERVAL_STUDIES) -> tuple[list | None, str | None]:
    """Percentile study-cluster bootstrap interval of a weighted mean of per-study statistics.

    Why: the pooled Kendall tau (or Spearman rho) of :func:`pooled_rank_agreement` is sum_k w_k v_k / sum_k w_k over
    the ranked studies; which studies were run is the main source of its uncertainty, so the studies are resampled
    with replacement (:func:`calib.bootstrap.cluster_counts`: the studies sorted by label, so the order they are given
    in does not matter) and the same weighted mean is recomputed over each resample, sum_k c_k w_k v_k /
    sum_k c_k w_k with c_k the times study k is drawn. The interval is the (1 - level)/2 and (1 + level)/2 quantiles
    of the resampled means (``numpy.quantile``, type 7), as in :mod:`calib.bootstrap`.

    Why a minimum of studies: a percentile bootstrap over few clusters undercovers (its intervals are too narrow:
    Cameron & Miller 2015, "A practitioner's guide to cluster-robust inference", J. Human Resources 50(2), on few
    clusters; Cameron, Gelbach & Miller 2008), and with K studies it has only C(2K - 1, K) distinct resamples (35 with
    4), so below ``min_studies`` no interval is given.

    Parameters
    ----------
    values : array-like of float, shape (K,)
        Each study's statistic (tau-b or rho, unitless in [-1, 1]), all finite.
    weights : array-like of float, shape (K,)
        Each study's weight (arm pairs for tau, arms for rho), positive.
    studies : array-like, shape (K,)
        Each study's label, each once.
    resamples, level, seed
        Bootstrap settings (defaults 5000, 0.95, 0: :mod:`calib.bootstrap`).
    min_studies : int
        Fewest studies for an interval (default :data:`MIN_INTERVAL_STUDIES`, 5).

    Returns
    -------
    (interval, reason)
        ``[lo, hi]`` and None; or None and why there is no interval (fewer than ``min_studies`` studies).

    Raises
    ------
    ValueError
        Lengths differ, a study is named twice, a value is not finite or a weight not positive, bad
        ``resamples``/``level`` (:func:`calib.bootstrap.check_settings`) or ``min_studies`` under 2.
    """
    check_settings(resamples, level)
    check_min_studies(min_studies)
    v, w = np.asarray(values, np.float64).ravel(), np.asarray(weights, np.float64).ravel()
    labels = np.asarray(studies, dtype=object).ravel()
    if not v.size == w.size == labels.size:
        raise ValueError(f"values ({v.size}), weights ({w.size}) and studies ({labels.size}) must have one entry per "
                         "study")
    if not (np.isfinite(v).all() and np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("every study needs a finite statistic and a positive weight: pass only the ranked studies")
    if len(set(labels)) < labels.size:
        raise ValueError("a study is named twice in studies: give each ranked study once")
    if labels.size < min_studies:
        return None, few_studies_reason(labels.size, min_studies, unit="ranked studies", kind="study-level")
    _, codes, counts = cluster_counts(labels, resamples=resamples, seed=seed)
    wk, wv = np.zeros(labels.size), np.zeros(labels.size)
    wk[codes], wv[codes] = w, w * v  # in the sorted order of the labels, as counts' columns
    a = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile((counts @ wv) / (counts @ wk), [a, 1.0 - a])
    return [float(lo), float(hi)], None
