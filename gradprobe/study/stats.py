"""Statistics of a matched-compute study (DESIGN.md, "Matched-compute training", "Analysis").

All effects are in accuracy points (0-100); a *difference* is treatment - control of one seed
(seeds pair arms: same held-out set, same pool order, same eval sampler).

:func:`paired_t`
    Mean paired difference over seeds and its Student-t interval, ``mean +- t_(n-1) * sd / sqrt(n)``
    (Student 1908; ``scipy.stats.t``), sd with ddof = 1. One seed: not testable, no interval.
:func:`accuracy_interval`
    The same t interval of a mean *accuracy* over seeds, its bounds clipped to [0, 100] points
    (:data:`ACCURACY_RANGE`): a mean accuracy cannot leave that range, so clipping drops only values it cannot take
    and keeps the interval's coverage; an interval inside the range is returned unchanged. A difference of
    accuracies (a gain, [-100, 100]) keeps its t interval as computed.
:func:`sign_flip_test`
    Exact one-sample permutation test of the differences (Fisher 1935, sec. 21; Good 2005,
    "Permutation, Parametric and Bootstrap Tests of Hypotheses", sec. 3.7): under H0 the
    differences, shifted by the null effect, are symmetric about 0, so every sign pattern is
    equally likely. All 2^n patterns are enumerated for n <= :data:`EXACT_MAX_SEEDS`, else
    :data:`MC_PATTERNS` random ones (p = (1 + hits) / (1 + patterns), Phipson & Smyth 2010).
    The smallest attainable p (``p_floor``) is reported beside p, and a p at the floor is
    written as such, never as an ordinary value.
:func:`holm`
    Holm (1979) step-down adjustment of a family of p-values
    (``statsmodels.stats.multitest.multipletests(method="holm")``).
:func:`two_way_bootstrap` (:mod:`gradprobe.study.bootstrap`)
    Bootstrap over seeds x held-out items (Owen 2007, "The pigeonhole bootstrap", Ann. Appl.
    Stat. 1(2)): seeds and items are resampled independently, with replacement, and the mean
    paired difference is recomputed on the resampled items of the resampled seeds; percentile
    interval (Efron & Tibshirani 1993, ch. 13). It adds the sampling error of the held-out set,
    which a seeds-only interval treats as fixed.
:func:`fit_sigmoid` (:mod:`gradprobe.forecast.analysis_sigmoid`)
    ScaleRL curve (Khatri et al. 2025, eq. 1) fitted by least squares from a fixed grid of
    starting points (deterministic for the same data); each parameter is marked ``identified``
    (not at a bound, finite standard error) and gets a Wald t-interval only then (Seber & Wild
    1989, "Nonlinear Regression", sec. 5.1).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy.stats import t as student_t
from statsmodels.stats.multitest import multipletests

# the two-way bootstrap and the sigmoid fit live in their own modules; importable from here as before
from .bootstrap import BOOTSTRAP_SEED, N_RESAMPLES, two_way_bootstrap, two_way_indices
from ..forecast.analysis_sigmoid import SIGMOID_B_BOUNDS, SIGMOID_DECADES, fit_sigmoid, scalerl_sigmoid

__all__ = ["ACCURACY_RANGE", "CLIPPED_NOTE", "accuracy_interval", "clip_accuracy", "EXACT_MAX_SEEDS", "MC_PATTERNS",
           "N_RESAMPLES", "BOOTSTRAP_SEED", "ALTERNATIVES", "NO_SPREAD_RTOL",
           "NO_SPREAD_ATOL", "NO_SPREAD", "no_spread", "paired_t",
           "paired_t_test", "sign_patterns", "sign_flip_test", "min_seeds_for_floor", "holm", "two_way_indices",
           "two_way_bootstrap", "scalerl_sigmoid", "fit_sigmoid", "SIGMOID_B_BOUNDS", "SIGMOID_DECADES"]

EXACT_MAX_SEEDS = 16
MC_PATTERNS = 20_000
ALTERNATIVES = ("greater", "less", "two-sided")
#: relative tolerance under which the per-seed differences count as equal: :func:`math.isclose`'s default ``rel_tol``
#: (1e-9, "about 9 decimal digits"; Python docs, ``math.isclose``), far above the float rounding a difference of two
#: accuracy values carries (~1e-14 points); beside :data:`NO_SPREAD_ATOL` it matters only for values above 1000
NO_SPREAD_RTOL = 1e-9
#: absolute floor (accuracy points) under which the per-seed differences' sd counts as no spread. An eval over n
#: prompts gives accuracies on a grid of 100/n points (k completions per prompt: 100/(n k)), and the smallest nonzero
#: sd (ddof 1) of s seeds' differences on that grid is (100/n) / sqrt(s) (one seed off by one item; the sum of squared
#: deviations of m values one step from the other s - m is step^2 m (s - m) / s, least at m = 1): with n k <= 10^6
#: graded completions and s <= 100 seeds, >= 1e-5 points. A read between two evals (a matched point) interpolates
#: them and leaves that grid, so a smaller real sd is possible, not a theorem's impossibility: the floor is a
#: plausibility threshold, seeds agreeing to a millionth of a point, ten times under that grid's least sd and eight
#: orders over float64 rounding of a difference of two accuracies in [0, 100] (~100 * 2^-52 ~ 2e-14 points, IEEE 754
#: double, ``numpy.finfo(float).eps``). An sd under it is float noise or data edited by hand, not evidence: its t
#: statistic (e.g. 4e7 for 1, 1, 1, 1.0000001) would pass any alpha. An sd a little over it (3e-6) is still tested
NO_SPREAD_ATOL = 1e-6
#: why a paired t test (and the detectable effect, and a claim resting on the t interval) is not computed
NO_SPREAD = "the seeds' differences have no spread: a t test is undefined"
#: the values an accuracy (and a mean of accuracies) can take, in points
ACCURACY_RANGE = (0.0, 100.0)
#: what a printed accuracy interval whose t bounds were clipped to :data:`ACCURACY_RANGE` says after it
CLIPPED_NOTE = "(t interval clipped to [0, 100])"


def no_spread(sd: float | None, estimate: float) -> bool:
    """Whether per-seed differences with standard deviation ``sd`` and mean ``estimate`` (accuracy points) have no
    spread: ``sd < NO_SPREAD_ATOL`` (:data:`NO_SPREAD_ATOL`, 1e-6 points: far below the resolution of any eval, far
    above float rounding) or ``sd <= NO_SPREAD_RTOL * max(|estimate|, 1)`` (:data:`NO_SPREAD_RTOL`; the floor of 1
    point keeps a mean near 0 from shrinking the tolerance below float rounding). Such differences leave a t
    statistic of mean / 0, of float-rounding noise or of a hand edit, not evidence: no t test, no detectable effect
    and no t interval rests on them (the hypotheses, :mod:`gradprobe.study.power`, :mod:`gradprobe.study.lr_sweep`
    and the report's gains all ask this function). None (one seed) is not "no spread"."""
    return sd is not None and (sd < NO_SPREAD_ATOL or sd <= NO_SPREAD_RTOL * max(abs(estimate), 1.0))


def _differences(differences) -> np.ndarray:
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(f"needs a non-empty 1-d array of finite per-seed differences, got {d!r}")
    return d


def _seeds(n: int) -> str:
    return f"{n} seed" + ("" if n == 1 else "s")


# ----------------------------------------------------------------------------- t interval

def paired_t(differences, *, level: float = 0.95) -> dict:
    """Mean of the per-seed differences and its two-sided Student-t interval.

    Parameters
    ----------
    differences : array, shape (seeds,)
        Treatment - control per seed (points).
    level : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    dict
        ``estimate`` (mean, points), ``sd`` (ddof 1; None with one seed), ``se``, ``df`` (n - 1),
        ``ci`` ``[lo, hi]`` (None with one seed), ``level``, ``seeds``, ``testable`` (n >= 2),
        ``note`` (``"not testable (1 seed)"`` or None), ``no_spread`` (:func:`no_spread`: the sd is below
        any eval's resolution, the interval has no width worth the name, and no t test is computed on it).

    Raises
    ------
    ValueError
        Empty or non-finite differences, or ``level`` outside (0, 1).
    """
    d = _differences(differences)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = d.size
    out = {"estimate": float(d.mean()), "sd": None, "se": None, "df": n - 1, "ci": None, "level": level,
           "seeds": n, "testable": n >= 2, "note": None if n >= 2 else "not testable (1 seed)", "no_spread": False}
    if n >= 2:
        sd = float(d.std(ddof=1))
        se = sd / math.sqrt(n)
        half = float(student_t.ppf(0.5 + level / 2, n - 1)) * se
        out.update(sd=sd, se=se, ci=[out["estimate"] - half, out["estimate"] + half],
                   no_spread=no_spread(sd, out["estimate"]))
    return out


def accuracy_interval(accuracies, *, level: float = 0.95) -> dict:
    """Mean accuracy over seeds and its Student-t interval (:func:`paired_t`), the bounds clipped to
    :data:`ACCURACY_RANGE` ([0, 100] points).

    The t interval mean +- t * sd / sqrt(n) assumes unbounded data: seeds near a ceiling (98, 99.5, 100) give an
    upper bound above 100. The mean accuracy lies in [0, 100], so clipping removes only impossible values and the
    clipped interval covers the mean exactly when the t interval does (the same coverage); bounds inside the range
    are not touched. Differences of accuracies are not clipped here (:func:`paired_t`).

    Parameters
    ----------
    accuracies : array, shape (seeds,)
        One accuracy per seed (points, in [0, 100]).
    level : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    dict
        :func:`paired_t`'s fields, ``ci`` clipped, and ``ci_unclipped``: the t interval before clipping where a bound
        was moved, else None.

    Raises
    ------
    ValueError
        Empty or non-finite accuracies, or ``level`` outside (0, 1) (:func:`paired_t`).
    """
    out = paired_t(accuracies, level=level)
    out["ci_unclipped"] = None
    ci = out["ci"]
    if ci is not None and (ci[0] < ACCURACY_RANGE[0] or ci[1] > ACCURACY_RANGE[1]):
        out.update(ci=[clip_accuracy(ci[0]), clip_accuracy(ci[1])], ci_unclipped=list(ci))
    return out


def clip_accuracy(value: float) -> float:
    """``value`` (points) moved into :data:`ACCURACY_RANGE`, [0, 100]: the one clip of every accuracy bound
    (:func:`accuracy_interval`, the lr-sweep report, the study API, the figures' band); NaN stays NaN."""
    lo, hi = ACCURACY_RANGE
    return value if value != value else min(max(value, lo), hi)


def paired_t_test(differences, *, min_effect: float = 0.0, alternative: str = "greater") -> dict:
    """Paired Student-t test over seeds of H0 "effect <= min_effect" (``greater``), ">= -min_effect"
    (``less``) or "= 0" (``two-sided``, ``min_effect`` ignored).

    The parametric companion of :func:`sign_flip_test`: it assumes the per-seed differences are
    roughly normal, and in exchange it can reject with few seeds, where the exact test's floor
    2^-n (1/16 with 4 seeds) lies above any usual alpha. A plan chooses it with ``test =
    "paired_t"``; the analysis reports the exact sign-flip p beside it either way.

    Parameters
    ----------
    differences : array, shape (seeds,)
        Treatment - control per seed (accuracy points).
    min_effect : float
        Margin of the one-sided null (points).
    alternative : str
        ``greater``, ``less`` or ``two-sided``.

    Returns
    -------
    dict
        ``p_value`` (None with fewer than 2 seeds, or with differences that have no spread:
        :func:`no_spread`, whose t statistic is mean / 0 or mean / float rounding), ``t`` (None then),
        ``df``, ``seeds``, ``testable`` (n >= 2), ``method`` ("paired t"), ``why`` (why p is None:
        ``"one seed"`` or :data:`NO_SPREAD`; None with a p).

    Raises
    ------
    ValueError
        Empty or non-finite differences, or an unknown ``alternative``.
    """
    d = _differences(differences)
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative must be greater, less or two-sided, got {alternative!r}")
    n = d.size
    out = {"p_value": None, "t": None, "df": n - 1, "seeds": n, "testable": n >= 2, "method": "paired t",
           "why": None if n >= 2 else "one seed"}
    if n < 2:
        return out
    null = {"greater": min_effect, "less": -min_effect, "two-sided": 0.0}[alternative]
    sd = float(d.std(ddof=1))
    if no_spread(sd, float(d.mean())):  # every seed agrees (below any eval's resolution): t = mean / 0 is no test
        out["why"] = NO_SPREAD
        return out
    t = (float(d.mean()) - null) / (sd / math.sqrt(n))
    if alternative == "greater":
        p = float(student_t.sf(t, n - 1))
    elif alternative == "less":
        p = float(student_t.cdf(t, n - 1))
    else:
        p = float(2 * student_t.sf(abs(t), n - 1))
    out.update(p_value=min(1.0, p), t=t)
    return out


# ----------------------------------------------------------------------------- sign-flip test

def sign_patterns(n: int) -> np.ndarray:
    """All 2^n sign patterns, shape (2^n, n), entries +-1; row k has -1 where bit j of k is set."""
    k = np.arange(2 ** n, dtype=np.int64)[:, None]
    return 1.0 - 2.0 * ((k >> np.arange(n)) & 1).astype(np.float64)


def sign_flip_test(differences, *, min_effect: float = 0.0, alternative: str = "greater",
                   max_exact: int = EXACT_MAX_SEEDS, n_patterns: int = MC_PATTERNS, seed: int = 0) -> dict:
    """Sign-flip permutation test of the mean paired difference (module docstring).

    H0 for ``greater``: effect <= ``min_effect``; statistic mean(d - min_effect), p = share of
    sign patterns s with mean(s * (d - min_effect)) >= the observed one. ``less``: H0 effect >=
    -``min_effect``, statistic mean(d + min_effect), p = share <= observed. ``two-sided``:
    ``min(1, 2 * min(p_greater, p_less))``. Patterns whose statistic equals the observed one
    (ties, zero differences) count as at least as extreme.

    Parameters
    ----------
    differences : array, shape (seeds,)
        Treatment - control per seed (points).
    min_effect : float
        Null effect (points, >= 0).
    alternative : {"greater", "less", "two-sided"}
    max_exact : int
        Enumerate all 2^n patterns up to this many seeds, else Monte Carlo.
    n_patterns, seed : int
        Monte Carlo patterns and the seed of their ``numpy.random.default_rng``.

    Returns
    -------
    dict
        ``p_value`` (None with one seed), ``p_floor`` (smallest attainable p: 1/2^n one-sided,
        2/2^n two-sided; Monte Carlo: 1/(1 + n_patterns), twice that two-sided), ``at_floor``,
        ``p_text`` (e.g. ``"p = 1/16 (the smallest attainable with 4 seeds)"``), ``method``,
        ``seeds``, ``testable``.

    Raises
    ------
    ValueError
        Empty or non-finite differences, an unknown alternative, or a negative ``min_effect``.
    """
    d = _differences(differences)
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative {alternative!r} is not one of {', '.join(ALTERNATIVES)}")
    if min_effect < 0:
        raise ValueError(f"min_effect is a size in points and must be >= 0, got {min_effect}")
    n = d.size
    if n < 2:
        return {"p_value": None, "p_floor": None, "at_floor": False, "p_text": "not testable (1 seed)",
                "method": None, "seeds": n, "testable": False}
    exact = n <= max_exact
    signs = sign_patterns(n) if exact else np.where(
        np.random.default_rng(seed).random((n_patterns, n)) < 0.5, -1.0, 1.0)
    counts = {}
    for side, shift in (("greater", -min_effect), ("less", min_effect)):
        x = d + shift
        obs, null = x.mean(), signs @ x / n
        tol = 1e-12 * max(1.0, float(np.abs(x).sum()))
        counts[side] = int(np.sum(null >= obs - tol) if side == "greater" else np.sum(null <= obs + tol))
    total = signs.shape[0]
    factor = 2 if alternative == "two-sided" else 1
    hits = counts[alternative] if alternative != "two-sided" else min(counts.values())
    if exact:
        p_frac = min(Fraction(1), Fraction(factor * hits, total))
        floor_frac = Fraction(factor, total)
        p, floor = float(p_frac), float(floor_frac)
    else:
        p, floor = min(1.0, factor * (1 + hits) / (1 + total)), factor / (1 + total)
    at_floor = p <= floor * (1 + 1e-12)
    method = (f"exact sign-flip, {total} patterns" if exact else f"Monte Carlo sign-flip, {total} patterns")
    text = _p_text(p, floor, at_floor, p_frac if exact else None, floor_frac if exact else None,
                   two_sided=alternative == "two-sided", n=n, total=total)
    return {"p_value": p, "p_floor": floor, "at_floor": bool(at_floor), "p_text": text, "method": method,
            "seeds": n, "testable": True}


def _p_text(p: float, floor: float, at_floor: bool, p_frac: Fraction | None, floor_frac: Fraction | None, *,
            two_sided: bool, n: int, total: int) -> str:
    """How a sign-flip p is written: exact (fractions given) or Monte Carlo, at its floor or not."""
    sided = " two-sided" if two_sided else ""
    if p_frac is not None and at_floor:
        return f"p = {floor_frac} (the smallest attainable{sided} with {_seeds(n)})"
    if p_frac is not None:
        return f"p = {p_frac}" + ("" if p_frac.denominator == 1 else f" = {p:.3g}")
    if at_floor:
        return f"p <= {floor:.2g} (the Monte Carlo floor{sided} with {total} sign patterns)"
    return f"p = {p:.3g} (Monte Carlo, {total} sign patterns)"


def min_seeds_for_floor(alpha: float, alternative: str = "greater") -> int:
    """Smallest seed count whose exact sign-flip floor (1/2^n, or 2/2^n two-sided) is <= ``alpha``."""
    factor = 2 if alternative == "two-sided" else 1
    return max(2, math.ceil(math.log2(factor / alpha) - 1e-12))


# ----------------------------------------------------------------------------- multiplicity

def holm(p_values) -> list[float]:
    """Holm-adjusted p-values (same order), ``multipletests(p, method="holm")[1]``.

    Parameters
    ----------
    p_values : sequence of float, length k >= 1
        Raw p-values of one family.

    Raises
    ------
    ValueError
        An empty family or a p outside [0, 1].
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"holm needs a non-empty list of p-values in [0, 1], got {p_values!r}")
    return [float(v) for v in multipletests(p, method="holm")[1]]
