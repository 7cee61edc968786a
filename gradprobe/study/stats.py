"""Statistics of a matched-compute study (DESIGN.md, "Matched-compute training", "Analysis").

All effects are in accuracy points (0-100); a *difference* is treatment - control of one seed
(seeds pair arms: same held-out set, same pool order, same eval sampler).

:func:`paired_t`
    Mean paired difference over seeds and its Student-t interval, ``mean +- t_(n-1) * sd / sqrt(n)``
    (Student 1908; ``scipy.stats.t``), sd with ddof = 1. One seed: not testable, no interval.
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
:func:`two_way_bootstrap`
    Bootstrap over seeds x held-out items (Owen 2007, "The pigeonhole bootstrap", Ann. Appl.
    Stat. 1(2)): seeds and items are resampled independently, with replacement, and the mean
    paired difference is recomputed on the resampled items of the resampled seeds; percentile
    interval (Efron & Tibshirani 1993, ch. 13). It adds the sampling error of the held-out set,
    which a seeds-only interval treats as fixed.
:func:`fit_sigmoid`
    ScaleRL curve (Khatri et al. 2025, eq. 1) fitted by least squares from a fixed grid of
    starting points (deterministic for the same data); each parameter is marked ``identified``
    (not at a bound, finite standard error) and gets a Wald t-interval only then (Seber & Wild
    1989, "Nonlinear Regression", sec. 5.1).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np

EXACT_MAX_SEEDS = 16
MC_PATTERNS = 20_000
N_RESAMPLES = 4000
BOOTSTRAP_SEED = 0
ALTERNATIVES = ("greater", "less", "two-sided")
_CHUNK = 256  # resamples drawn at once by the two-way bootstrap


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
        ``note`` (``"not testable (1 seed)"`` or None).

    Raises
    ------
    ValueError
        Empty or non-finite differences, or ``level`` outside (0, 1).
    """
    from scipy.stats import t as student_t

    d = _differences(differences)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = d.size
    out = {"estimate": float(d.mean()), "sd": None, "se": None, "df": n - 1, "ci": None, "level": level,
           "seeds": n, "testable": n >= 2, "note": None if n >= 2 else "not testable (1 seed)"}
    if n >= 2:
        sd = float(d.std(ddof=1))
        se = sd / math.sqrt(n)
        half = float(student_t.ppf(0.5 + level / 2, n - 1)) * se
        out.update(sd=sd, se=se, ci=[out["estimate"] - half, out["estimate"] + half])
    return out


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
        ``p_value`` (None with fewer than 2 seeds or zero spread with the mean on the null),
        ``t``, ``df``, ``seeds``, ``testable`` (n >= 2), ``method`` ("paired t").

    Raises
    ------
    ValueError
        Empty or non-finite differences, or an unknown ``alternative``.
    """
    from scipy.stats import t as student_t

    d = _differences(differences)
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative must be greater, less or two-sided, got {alternative!r}")
    n = d.size
    out = {"p_value": None, "t": None, "df": n - 1, "seeds": n, "testable": n >= 2, "method": "paired t"}
    if n < 2:
        return out
    null = {"greater": min_effect, "less": -min_effect, "two-sided": 0.0}[alternative]
    se = float(d.std(ddof=1)) / math.sqrt(n)
    diff = float(d.mean()) - null
    if se == 0.0:  # every seed agrees exactly: the data are on one side of the null or on it
        t = math.inf if diff > 0 else -math.inf if diff < 0 else 0.0
    else:
        t = diff / se
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
    sided = " two-sided" if alternative == "two-sided" else ""
    if exact and at_floor:
        text = f"p = {floor_frac} (the smallest attainable{sided} with {_seeds(n)})"
    elif exact:
        text = f"p = {p_frac}" + ("" if p_frac.denominator == 1 else f" = {p:.3g}")
    elif at_floor:
        text = f"p <= {floor:.2g} (the Monte Carlo floor{sided} with {total} sign patterns)"
    else:
        text = f"p = {p:.3g} (Monte Carlo, {total} sign patterns)"
    return {"p_value": p, "p_floor": floor, "at_floor": bool(at_floor), "p_text": text, "method": method,
            "seeds": n, "testable": True}


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
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"holm needs a non-empty list of p-values in [0, 1], got {p_values!r}")
    return [float(v) for v in multipletests(p, method="holm")[1]]


# ----------------------------------------------------------------------------- two-way bootstrap

def two_way_indices(n_seeds: int, n_items: int, *, n_resamples: int, seed: int):
    """Yield (seed indices (c, n_seeds), item indices (c, n_items)) in chunks of <= 256 resamples.

    One ``numpy.random.default_rng(seed)``; per chunk the seed indices are drawn first, then the
    item indices (what a slow reference must repeat to get the same resamples).
    """
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, _CHUNK):
        c = min(_CHUNK, n_resamples - start)
        yield rng.integers(0, n_seeds, size=(c, n_seeds)), rng.integers(0, n_items, size=(c, n_items))


def two_way_bootstrap(treatment, control, *, level: float = 0.95, n_resamples: int = N_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> dict:
    """Mean paired difference and its seeds x items bootstrap interval (module docstring).

    Parameters
    ----------
    treatment, control : array, shape (seeds, items)
        Per-item correctness (0/1, or a fraction: mean over samples, or interpolated between
        two evals) of each seed's run; row s of both is the same seed, column i the same item.
    level : float
        Coverage of the percentile interval.
    n_resamples, seed : int
        Resamples and the seed of :func:`two_way_indices`.

    Returns
    -------
    dict
        ``estimate`` (points), ``ci`` [lo, hi] (points; None with one seed), ``level``,
        ``seeds``, ``items``, ``disagreement`` (mean |t - c| over seeds and items: the share of
        items on which the two policies differ, for 0/1 results), ``boot`` (ndarray, shape
        (n_resamples,), points: resample r is
        ``100 * mean(D[s_r][:, i_r])`` with D = treatment - control).

    Raises
    ------
    ValueError
        Shapes differ or are not 2-d, or no items.
    """
    t, c = np.asarray(treatment, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if t.shape != c.shape or t.ndim != 2 or t.size == 0:
        raise ValueError(f"treatment and control must be (seeds, items) arrays of one shape, got {t.shape}, {c.shape}")
    d = 100.0 * (t - c)
    n_s, n_i = d.shape
    out = {"estimate": float(d.mean()), "ci": None, "level": level, "seeds": n_s, "items": n_i,
           "disagreement": float(np.abs(t - c).mean()), "boot": None}
    if n_s < 2:
        return out
    boot = np.empty(n_resamples)
    pos = 0
    for si, ii in two_way_indices(n_s, n_i, n_resamples=n_resamples, seed=seed):
        c_ = si.shape[0]
        ws = np.zeros((c_, n_s))
        np.add.at(ws, (np.repeat(np.arange(c_), n_s), si.ravel()), 1.0)  # seed counts per resample
        wi = np.zeros((c_, n_i))
        np.add.at(wi, (np.repeat(np.arange(c_), n_i), ii.ravel()), 1.0)  # item counts
        boot[pos:pos + c_] = np.einsum("rs,rs->r", ws, wi @ d.T) / (n_s * n_i)
        pos += c_
    a = (1.0 - level) / 2
    out.update(ci=[float(v) for v in np.quantile(boot, [a, 1.0 - a])], boot=boot)
    return out


# ----------------------------------------------------------------------------- sigmoid

def scalerl_sigmoid(C, A: float, B: float, C_mid: float, R0: float):
    """ScaleRL compute curve (Khatri et al. 2025, eq. 1): R0 + (A - R0) / (1 + (C_mid / C)^B).

    Parameters
    ----------
    C : array, shape (points,)
        Compute on the fitted axis (tokens, FLOPs or updates), >= 0; R(0) = R0.
    A, R0 : float
        Asymptote and initial accuracy (points).
    B : float
        Exponent (> 0).
    C_mid : float
        Compute at which half the gain A - R0 is reached (> 0).
    """
    C = np.asarray(C, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = np.where(C > 0, C_mid / np.where(C > 0, C, 1.0), np.inf)
        return R0 + (A - R0) / (1.0 + np.power(ratio, B))


SIGMOID_B_BOUNDS = (0.05, 20.0)
SIGMOID_DECADES = 2.0  # C_mid may lie this many decades outside the evaluated compute


def _sigmoid_and_jacobian(x, R0: float):
    """f(x; A, B, L) = R0 + (A - R0) s, s = expit(-B (L ln10 - ln x)) (= the ScaleRL curve with
    C_mid = 10^L; s = 0 at x = 0), and its analytic Jacobian (points, shape (points, 3)):
    df/dA = s, df/dB = -(A - R0) s (1 - s) (L ln10 - ln x), df/dL = -(A - R0) s (1 - s) B ln10."""
    from scipy.special import expit

    pos = x > 0
    lnx = np.log(np.where(pos, x, 1.0))

    def parts(A, B, L):
        u = L * math.log(10.0) - lnx
        s = np.where(pos, expit(-B * u), 0.0)
        return s, u

    def f(_, A, B, L):
        return R0 + (A - R0) * parts(A, B, L)[0]

    def jac(_, A, B, L):
        s, u = parts(A, B, L)
        ds = -(A - R0) * s * (1.0 - s)
        return np.stack([s, np.where(pos, ds * u, 0.0), ds * B * math.log(10.0)], axis=1)

    return f, jac


def _grid_starts(x, y, R0: float, lo, hi, keep: int = 3) -> list[list[float]]:
    """The ``keep`` best (A, B, L) of a fixed grid: B geometric (15 values), L = log10 C_mid linear
    (25 values) over their bounds, A profiled out (for fixed B, L the curve is linear in A: least
    squares A = R0 + <s, y - R0> / <s, s>, clipped to its bounds). Ties: grid order."""
    from scipy.special import expit

    pos = x > 0
    lnx = np.log(np.where(pos, x, 1.0))
    B = np.geomspace(lo[1], hi[1], 15)[:, None, None]
    L = np.linspace(lo[2], hi[2], 25)[None, :, None]
    S = np.where(pos, expit(-B * (L * math.log(10.0) - lnx)), 0.0)  # (15, 25, points)
    ss = np.einsum("bln,bln->bl", S, S)
    A = R0 + np.einsum("bln,n->bl", S, y - R0) / np.where(ss > 0, ss, 1.0)
    A = np.clip(A, lo[0] + 1e-6 * (hi[0] - lo[0]), hi[0] - 1e-6 * (hi[0] - lo[0]))
    sse = np.sum((R0 + (A - R0)[..., None] * S - y) ** 2, axis=-1)
    order = np.argsort(sse, axis=None, kind="stable")[:keep]
    inner = [lambda v, i=i: float(np.clip(v, lo[i] + 1e-3 * (hi[i] - lo[i]), hi[i] - 1e-3 * (hi[i] - lo[i])))
             for i in range(3)]
    return [[inner[0](A.flat[k]), inner[1](B.ravel()[k // 25]), inner[2](L.ravel()[k % 25])] for k in order]


def _fit_from_grid(x, y, R0: float, lo, hi):
    """Best (SSE, popt, pcov) of curve_fit from each start of :func:`_grid_starts` (ties: first start)."""
    from scipy.optimize import OptimizeWarning, curve_fit

    f, jac = _sigmoid_and_jacobian(x, R0)
    best = None
    for p0 in _grid_starts(x, y, R0, lo, hi):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                popt, pcov = curve_fit(f, x, y, p0=p0, bounds=(lo, hi), method="trf", jac=jac, maxfev=2000)
        except (RuntimeError, ValueError):
            continue
        sse = float(np.sum((f(x, *popt) - y) ** 2))
        if best is None or sse < best[0] * (1 - 1e-9) - 1e-12:
            best = (sse, popt, pcov)
    return best


def fit_sigmoid(x, y, *, R0: float, axis: str = "generated_tokens", level: float = 0.95) -> dict:
    """Fit A, B, C_mid of :func:`scalerl_sigmoid` with R0 fixed; mark what the data identify.

    Least squares (``scipy.optimize.curve_fit``, trf, analytic Jacobian) in (A, B, log10 C_mid)
    from the 3 best points of a fixed grid over (B, log10 C_mid) with A profiled out
    (:func:`_grid_starts`); the smallest residual sum of squares wins (ties within 1e-9
    relative: the earlier start). No randomness: the same data give the same fit. (Fits from
    one start moved with the last bit of R0: a parameter the data do not identify lies on a
    flat valley of the residuals, where the optimizer stops anywhere.)
    Bounds: A in [0, 100], B in :data:`SIGMOID_B_BOUNDS`, C_mid within :data:`SIGMOID_DECADES`
    decades of the evaluated x. A parameter is ``identified`` when it is not within 0.1% of the
    bound range of a bound, its standard error (sqrt of the covariance diagonal) is finite and
    > 0, and its interval value +- t_(n-3) * se lies inside the bounds (C_mid: on log10); B and
    C_mid also need a gain |A - R0| >= 0.1 points. Only identified parameters get ``ci``.

    Parameters
    ----------
    x : array, shape (points,)
        Compute of every eval point (all seeds pooled) on ``axis``.
    y : array, shape (points,)
        Accuracy (points) at those points.
    R0 : float
        Accuracy of the initial policy (points).
    axis : str
        Name of the x axis (recorded).
    level : float
        Coverage of the intervals.

    Returns
    -------
    dict
        ``A``, ``B``, ``C_mid`` (values), ``R0``, ``x`` (= axis), ``n_points``, ``rmse`` (points),
        ``identified`` (all three), ``params``: name -> ``{"value", "identified", "at_bound",
        "se", "ci"}`` (se of C_mid is of log10 C_mid), ``at_bound`` (names; the other parameters'
        intervals are then conditional on those values).

    Raises
    ------
    ValueError
        Fewer than 3 distinct x > 0 (three free parameters; the fix: more evals), or no start
        of the grid converged.
    """
    from scipy.stats import t as student_t

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    pos = np.unique(x[x > 0])
    if pos.size < 3:
        raise ValueError(f"needs eval points at >= 3 distinct {axis} values > 0 (3 free parameters), got "
                         f"{pos.size}; add evals ([eval] at_updates / at_fractions)")
    lo = [0.0, SIGMOID_B_BOUNDS[0], math.log10(pos[0]) - SIGMOID_DECADES]
    hi = [100.0, SIGMOID_B_BOUNDS[1], math.log10(pos[-1]) + SIGMOID_DECADES]
    best = _fit_from_grid(x, y, float(R0), lo, hi)
    if best is None:
        raise ValueError(f"curve_fit did not converge from any start of the grid on {axis}")
    sse, popt, pcov = best
    df = x.size - 3
    tq = float(student_t.ppf(0.5 + level / 2, df)) if df >= 1 else math.nan
    flat = abs(popt[0] - R0) < 0.1
    params = {}
    for i, name in enumerate(("A", "B", "C_mid")):
        span = hi[i] - lo[i]
        at_bound = bool(popt[i] - lo[i] <= 1e-3 * span or hi[i] - popt[i] <= 1e-3 * span)
        var = float(pcov[i, i]) if np.all(np.isfinite(pcov)) else math.nan
        se = math.sqrt(var) if math.isfinite(var) and var > 0 else None
        ci = [float(popt[i] - tq * se), float(popt[i] + tq * se)] if se is not None and math.isfinite(tq) else None
        ident = (not at_bound and ci is not None and lo[i] <= ci[0] and ci[1] <= hi[i]
                 and not (flat and name != "A"))
        ci = ci if ident else None
        value = float(popt[i])
        if name == "C_mid":
            value, ci = 10.0 ** value, [10.0 ** v for v in ci] if ci else None
        params[name] = {"value": value, "identified": bool(ident), "at_bound": at_bound, "se": se, "ci": ci}
    return {"A": params["A"]["value"], "B": params["B"]["value"], "C_mid": params["C_mid"]["value"],
            "R0": float(R0), "x": axis, "n_points": int(x.size), "rmse": math.sqrt(sse / x.size),
            "identified": all(p["identified"] for p in params.values()), "params": params,
            "at_bound": [k for k, p in params.items() if p["at_bound"]]}
