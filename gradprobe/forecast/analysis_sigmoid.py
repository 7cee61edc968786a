"""The ScaleRL compute curve and its deterministic least-squares fit (accuracy points against compute).

:func:`scalerl_sigmoid` is Khatri et al. 2025, eq. 1. :func:`fit_sigmoid` fits it by least squares
from a fixed grid of starting points (deterministic for the same data); each parameter is marked
``identified`` (not at a bound, finite standard error) and gets a Wald t-interval only then (Seber
& Wild 1989, "Nonlinear Regression", sec. 5.1). ``gradprobe study``'s analysis fits it per arm
(``analysis.json`` ``arms.ARM.sigmoid``, through :mod:`gradprobe.study.stats`, which re-exports it); it lives in the
forecast layer so that a reference curve read from a study folder can refit it to check the analysis
(:mod:`gradprobe.forecast.analysis_reads`). Not the reference curve's own fit (:mod:`gradprobe.forecast.curve_fit`:
seeds, replicates, a fixed exponent).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit
from scipy.special import expit
from scipy.stats import t as student_t

__all__ = ["scalerl_sigmoid", "fit_sigmoid", "SIGMOID_B_BOUNDS", "SIGMOID_DECADES"]


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
    params = _parameters(popt, pcov, x.size, float(R0), lo, hi, level)
    return {"A": params["A"]["value"], "B": params["B"]["value"], "C_mid": params["C_mid"]["value"],
            "R0": float(R0), "x": axis, "n_points": int(x.size), "rmse": math.sqrt(sse / x.size),
            "identified": all(p["identified"] for p in params.values()), "params": params,
            "at_bound": [k for k, p in params.items() if p["at_bound"]]}


def _parameters(popt, pcov, n_points: int, R0: float, lo, hi, level: float) -> dict:
    """name -> ``{"value", "identified", "at_bound", "se", "ci"}`` of the fitted (A, B, log10 C_mid)
    (identification rules: :func:`fit_sigmoid`); C_mid's value and interval back on its own scale."""
    df = n_points - 3
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
    return params
