"""Reference learning curves: grpo's held-out accuracy against updates, as a saturating fit.

Model (Khatri et al. 2025, "The Art of Scaling Reinforcement Learning Compute for LLMs",
arXiv:2510.13786, eq. 1, with compute C replaced by updates n)::

    R(n) = R0 + (A - R0) / (1 + (n_mid / n)^B),      R(0) = R0,

R0 the accuracy at n = 0 (accuracy points), A the asymptote (points), n_mid the number of updates
at which half the gain A - R0 is reached, B > 0 the steepness. R0 is the mean accuracy of the evals
at n = 0 when there are any (then it is not a free parameter), else it is fitted.

Fit (deterministic): least squares (``scipy.optimize.least_squares``, trust-region reflective)
over every eval point of every seed, in the parameters (A, ln n_mid, B[, R0]) inside the bounds
A in [0, 100], ln n_mid in [ln(n_min / 100), ln(100 n_max)] (n_min, n_max the smallest and
largest update count > 0 evaluated), B in [0.1, 10], R0 in [0, 100], from a fixed grid of
starting points (:data:`START_B`, three n_mid, two A); the lowest cost wins and ties go to the
first start, so the same points give the same curve. Each parameter is then marked

- ``at_bound``: the optimum sits on its bound (the data push it out of the allowed range);
- ``identified``: not at a bound, finite standard error (Gauss-Newton covariance
  s^2 (J^T J)^-1, s^2 = residual sum of squares / (points - free parameters)), and the standard
  error below the parameter's scale (|A - R0| for A and R0, 1 for ln n_mid, i.e. within a
  factor e, B for B);
- ``fixed``: not fitted.

B is the parameter sparse evals cannot pin down: with evals at only a few update counts, a step
(B at its upper bound) fits the points as well as a smooth curve, and the forecast at small n then
swings from R0 to A. When B comes out at a bound or not identified, the curve is refitted with
B fixed at 1 (the hyperbolic, Michaelis-Menten saturation R0 + (A - R0) n / (n + n_mid)) and
``notes`` says so; pass ``B=...`` to fix it yourself.

A curve needs evals at at least as many distinct update counts > 0 as it has free parameters
(3: A, n_mid, B, when there are evals at n = 0; 4 without them; one fewer with B fixed): fewer are
refused (:class:`CurveError` names the minimum).

Seed spread: with two or more seeds the curve carries :data:`N_REPLICATES` bootstrap replicates
over seeds (seeds resampled with replacement, R0 re-read and the curve refitted from the main
fit's parameters; ``numpy.random.PCG64(REPLICATE_SEED)``), whose spread the forecaster puts into
its interval. With one seed there are none, and the forecast says its interval lacks the curve's
uncertainty.

Modes: ``sigmoid`` evaluates the fit everywhere. ``empirical`` evaluates, where n lies inside the
range every seed observed, a monotone cubic interpolation (``scipy.interpolate.PchipInterpolator``,
Fritsch & Carlson 1980) of the mean over seeds (each seed linearly interpolated onto the union
of the seeds' update counts, then averaged), and the sigmoid outside it. Either way the value is
clipped to [0, 100] accuracy points.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["ReferenceCurve", "CurveError", "scalerl_sigmoid", "MODES", "task_key"]

MODES = ("sigmoid", "empirical")
PARAMETERS = ("R0", "A", "n_mid", "B")
FORMAT = "gradprobe.reference_curve"
VERSION = 1
#: Fixed starting grid of the fit (B values); n_mid starts at n_min, sqrt(n_min n_max), n_max and
#: A at the accuracy of the last eval level and at R0 + 1.5 x (that - R0).
START_B = (0.5, 1.0, 2.0, 4.0)
B_BOUNDS = (0.1, 10.0)
#: B used when the evals do not identify it: the hyperbolic (Michaelis-Menten) saturation.
B_FALLBACK = 1.0
N_REPLICATES = 200
REPLICATE_SEED = 20251015


class CurveError(ValueError):
    """A reference curve cannot be built or read (the message names the field or file and the fix)."""


def scalerl_sigmoid(n, *, R0: float, A: float, n_mid: float, B: float) -> np.ndarray:
    """ScaleRL sigmoid (Khatri et al. 2025, eq. 1) in updates: R0 + (A - R0) / (1 + (n_mid / n)^B).

    Parameters
    ----------
    n : array_like, shape (points,) or any
        Updates, >= 0; R(0) = R0 exactly.
    R0, A : float
        Accuracy at n = 0 and asymptote (accuracy points).
    n_mid : float
        Updates at which half the gain A - R0 is reached (> 0).
    B : float
        Steepness (> 0).

    Returns
    -------
    ndarray (float64), the shape of ``n``
        Accuracy points (not clipped).
    """
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        # (n_mid / n)^B = exp(B (ln n_mid - ln n)): finite for every n > 0, +inf at n = 0
        z = np.exp(B * (math.log(n_mid) - np.log(np.where(n > 0, n, 1.0))))
        out = R0 + (A - R0) / (1.0 + z)
    return np.where(n > 0, out, R0)


def _sigmoid_params(n, p: np.ndarray) -> np.ndarray:
    """Vectorised over replicates: p (M, 4) = (R0, A, n_mid, B), n (M,) or (M, k) -> same shape as n."""
    n = np.asarray(n, dtype=np.float64)
    r0, a, nm, b = (p[:, i].reshape((-1,) + (1,) * (n.ndim - 1)) for i in range(4))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z = np.exp(b * (np.log(nm) - np.log(np.where(n > 0, n, 1.0))))
        out = r0 + (a - r0) / (1.0 + z)
    return np.where(n > 0, out, r0)


def task_key(task: str | None, config: dict | None = None) -> str | None:
    """A task spec in one canonical form, ``name:k1=v1,k2=v2`` with keys sorted (to compare tasks).

    ``task`` may already carry an inline config (``chain_sum:max_terms=4,min_terms=3``); ``config``
    adds keys. GSM8K paths (``gsm8k:PATH``) are kept as given.
    """
    if task is None:
        return None
    name, _, inline = str(task).partition(":")
    if name == "gsm8k":
        return str(task)
    kv = {}
    for part in filter(None, (x.strip() for x in inline.split(","))):
        k, _, v = part.partition("=")
        kv[k.strip()] = v.strip()
    for k, v in (config or {}).items():
        kv[str(k)] = str(v)
    return name + (":" + ",".join(f"{k}={kv[k]}" for k in sorted(kv)) if kv else "")


def _to_points(values: np.ndarray, scale: str, what: str) -> tuple[np.ndarray, str]:
    """Accuracy values -> points, with a note saying how they were read."""
    v = np.asarray(values, dtype=np.float64)
    if scale not in ("auto", "fraction", "points"):
        raise CurveError(f"accuracy_scale {scale!r} must be 'auto', 'fraction' (values in [0, 1]) or 'points' "
                         "(values in [0, 100])")
    if v.size and not np.all(np.isfinite(v)):
        raise CurveError(f"{what}: {int((~np.isfinite(v)).sum())} accuracy value(s) are not finite; drop those evals")
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
    if scale == "auto":
        if lo >= 0 and hi <= 1.0:
            return 100.0 * v, (f"{what}: accuracy read as fractions in [0, 1] (range {lo:.4g}-{hi:.4g}) and converted "
                               "to points; pass accuracy_scale='points' if they already are points")
        if lo >= 0 and hi <= 100.0:
            return v, f"{what}: accuracy read as points in [0, 100] (range {lo:.4g}-{hi:.4g})"
        raise CurveError(f"{what}: accuracy values range {lo:.4g}-{hi:.4g}, neither fractions in [0, 1] nor points in "
                         "[0, 100]; name the right column or metric")
    out = 100.0 * v if scale == "fraction" else v
    if out.size and (out.min() < 0 or out.max() > 100):
        raise CurveError(f"{what}: accuracy_scale={scale!r} gives values {out.min():.4g}-{out.max():.4g} outside "
                         "[0, 100] points")
    return out, f"{what}: accuracy read as {'fractions' if scale == 'fraction' else 'points'} (accuracy_scale={scale!r})"


class _Fit:
    """Result of one least-squares fit (internal)."""

    def __init__(self, params, cost, status, se):
        self.params, self.cost, self.status, self.se = params, cost, status, se


def _fit(n: np.ndarray, y: np.ndarray, *, r0: float | None, b_fixed: float | None,
         start: dict | None = None) -> _Fit:
    """Least-squares ScaleRL fit; ``r0``/``b_fixed`` None means free. ``start``: one start instead of the grid."""
    from scipy.optimize import least_squares

    pos = np.unique(n[n > 0])
    lo_n, hi_n = float(pos[0]), float(pos[-1])
    names = ["A", "log_n_mid"] + ([] if b_fixed is not None else ["B"]) + ([] if r0 is not None else ["R0"])
    lower = {"A": 0.0, "log_n_mid": math.log(lo_n / 100.0), "B": B_BOUNDS[0], "R0": 0.0}
    upper = {"A": 100.0, "log_n_mid": math.log(hi_n * 100.0), "B": B_BOUNDS[1], "R0": 100.0}
    lb = np.array([lower[k] for k in names])
    ub = np.array([upper[k] for k in names])

    def unpack(theta):
        d = dict(zip(names, theta))
        return (d.get("R0", r0), d["A"], math.exp(d["log_n_mid"]), d.get("B", b_fixed))

    def resid(theta):
        R0, A, nm, B = unpack(theta)
        return scalerl_sigmoid(n, R0=R0, A=A, n_mid=nm, B=B) - y

    zero = n == n.min()
    r0_start = r0 if r0 is not None else float(y[zero].mean())
    last = float(y[n == hi_n].mean())
    if start is not None:
        starts = [[start[k] if k != "log_n_mid" else math.log(start["n_mid"]) for k in names]]
    else:
        a_starts = (last, r0_start + 1.5 * (last - r0_start))
        nm_starts = (lo_n, math.sqrt(lo_n * hi_n), hi_n)
        b_starts = START_B if b_fixed is None else (b_fixed,)
        starts = []
        for b0 in b_starts:
            for nm0 in nm_starts:
                for a0 in a_starts:
                    d = {"A": a0, "log_n_mid": math.log(nm0), "B": b0, "R0": r0_start}
                    starts.append([d[k] for k in names])
    best = None
    for s in starts:
        s = np.clip(np.array(s, dtype=np.float64), lb + 1e-9 * (ub - lb), ub - 1e-9 * (ub - lb))
        res = least_squares(resid, s, bounds=(lb, ub), method="trf", x_scale="jac", max_nfev=2000)
        if best is None or res.cost < best.cost * (1 - 1e-12) - 1e-15:
            best = res
    theta = best.x
    R0, A, nm, B = unpack(theta)
    # standard errors of the free parameters that are not on a bound (Gauss-Newton covariance)
    width = ub - lb
    on_bound = (np.abs(theta - lb) <= 1e-6 * width) | (np.abs(theta - ub) <= 1e-6 * width)
    dof = n.size - len(names)
    se = {k: math.inf for k in names}
    inner = ~on_bound
    if dof > 0 and inner.any():
        J = best.jac[:, inner]
        s2 = 2.0 * best.cost / dof
        try:
            cov = s2 * np.linalg.inv(J.T @ J)
            diag = np.diag(cov)
            for k, v in zip([nm_ for nm_, keep in zip(names, inner) if keep], diag):
                se[k] = math.sqrt(v) if v >= 0 and math.isfinite(v) else math.inf
        except np.linalg.LinAlgError:
            pass
    gain = abs(A - R0)
    scale = {"A": gain, "log_n_mid": 1.0, "B": B, "R0": gain}
    status = {}
    for k, b in zip(names, on_bound):
        key = "n_mid" if k == "log_n_mid" else k
        if b:
            status[key] = "at_bound"
        elif math.isfinite(se[k]) and se[k] < scale[k]:
            status[key] = "identified"
        else:
            status[key] = "not_identified"
    if r0 is not None:
        status["R0"] = "fixed"
    if b_fixed is not None:
        status["B"] = "fixed"
    ses = {("n_mid" if k == "log_n_mid" else k): v for k, v in se.items()}
    if "n_mid" in ses and math.isfinite(ses["n_mid"]):
        ses["n_mid"] = ses["n_mid"] * nm  # delta method: se(n_mid) = n_mid se(ln n_mid)
    return _Fit({"R0": float(R0), "A": float(A), "n_mid": float(nm), "B": float(B)}, float(best.cost), status, ses)


class ReferenceCurve:
    """grpo's held-out accuracy (points) against updates n: a ScaleRL sigmoid fit plus its eval points.

    Build one with a constructor (:meth:`from_study`, :meth:`from_metrics`, :meth:`from_csv`,
    :meth:`from_trl_state`, :meth:`load`) or from points directly. See the module docstring for the
    model, the fit and its source.

    Parameters
    ----------
    updates : array_like, shape (points,)
        Update count n of every eval (>= 0).
    accuracy : array_like, shape (points,)
        Held-out accuracy at those evals, accuracy points in [0, 100].
    seeds : array_like, shape (points,), optional
        Seed (run) label of every eval; default: one seed.
    mode : {"sigmoid", "empirical"}
        How :meth:`__call__` evaluates (module docstring).
    B : float, optional
        Fix the steepness instead of fitting it (default: fitted, 1 when the evals do not identify it).
    source : str
        Where the points came from (printed with every forecast).
    metadata : dict, optional
        What the curve was trained with: ``model``, ``task`` (:func:`task_key` form), ``update_prompts``,
        ``update_group`` (the batch of ONE update: the x axis is in such updates), ``lr``, ``loss_type``.
    notes : sequence of str
        How the points were read (accuracy scale, ...).
    n_replicates : int
        Seed-bootstrap replicates (0: none).

    Attributes
    ----------
    params : dict[str, float]
        ``R0``, ``A`` (points), ``n_mid`` (updates), ``B``.
    status : dict[str, str]
        Per parameter: ``identified``, ``not_identified``, ``at_bound`` or ``fixed``.
    standard_errors : dict[str, float]
        Of the fitted parameters (inf when not estimable).
    rmse : float
        Root mean squared residual of the fit over all points (accuracy points).
    points : pandas.DataFrame
        Columns ``update``, ``accuracy`` (points), ``seed``: what the curve was fitted on.
    replicates : ndarray, shape (replicates, 4)
        (R0, A, n_mid, B) of each seed-bootstrap refit.
    replicate_seed_counts : ndarray, shape (replicates, seeds)
        How many times each seed (in ``seed_labels`` order) was drawn in each replicate.

    Raises
    ------
    CurveError
        No points, negative updates, accuracy outside [0, 100], fewer distinct eval update counts
        than free parameters (the message names the minimum), an unknown mode.
    """

    def __init__(self, *, updates, accuracy, seeds=None, mode: str = "sigmoid", B: float | None = None,
                 source: str = "", metadata: dict | None = None, notes=(), n_replicates: int = N_REPLICATES,
                 _state: dict | None = None):
        if mode not in MODES:
            raise CurveError(f"mode {mode!r} must be one of {MODES}")
        n = np.asarray(updates, dtype=np.float64).ravel()
        y = np.asarray(accuracy, dtype=np.float64).ravel()
        if n.size == 0 or n.size != y.size:
            raise CurveError(f"a reference curve needs eval points: got {n.size} update counts and {y.size} accuracies")
        if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y))):
            raise CurveError("updates and accuracy must be finite (drop evals without a value)")
        if n.min() < 0:
            raise CurveError(f"updates must be >= 0, got {n.min():g}")
        if y.min() < 0 or y.max() > 100:
            raise CurveError(f"accuracy must be in points within [0, 100], got {y.min():.4g}-{y.max():.4g} "
                             "(fractions? multiply by 100, or use a constructor, which detects them)")
        seeds = np.array(["0"] * n.size if seeds is None else [str(s) for s in np.asarray(seeds).ravel()], dtype=object)
        if seeds.size != n.size:
            raise CurveError(f"seeds has {seeds.size} labels for {n.size} points")
        order = np.lexsort((n, seeds))
        self.points = pd.DataFrame({"update": n[order], "accuracy": y[order], "seed": seeds[order]})
        self.mode = mode
        self.source = source
        self.metadata = dict(metadata or {})
        self.notes = list(notes)
        self.seed_labels = sorted(set(self.points["seed"]), key=lambda s: (len(s), s))
        if B is not None and not (B_BOUNDS[0] <= B <= B_BOUNDS[1]):
            raise CurveError(f"B = {B} must lie in [{B_BOUNDS[0]}, {B_BOUNDS[1]}]")
        has_zero = bool((n == 0).any())
        free = 2 + (B is None) + (not has_zero)
        distinct = np.unique(n[n > 0]).size
        if distinct < free:
            raise CurveError(
                f"the curve has evals at {distinct} distinct update count(s) > 0 and the fit has {free} free "
                f"parameters (A, n_mid{', B' if B is None else ''}{', R0' if not has_zero else ''}): it needs evals at "
                f"at least {free} distinct update counts > 0" + ("" if has_zero else ", or an eval at update 0 (R0)")
                + "; evaluate more often (e.g. `[eval] every_tokens` smaller than the budget)")
        if _state is not None:
            self._set_state(_state)
            return
        r0 = float(y[n == 0].mean()) if has_zero else None
        fit = _fit(n, y, r0=r0, b_fixed=B)
        if B is None and fit.status.get("B") != "identified":
            self.notes.append(f"B {fit.status['B'].replace('_', ' ')} (fit B = {fit.params['B']:.3g}): the evals do not "
                              f"pin the curve's steepness, so B is fixed at {B_FALLBACK:g} (hyperbolic saturation)")
            fit = _fit(n, y, r0=r0, b_fixed=B_FALLBACK)
            B = B_FALLBACK
        self.params = fit.params
        self.status = fit.status
        self.standard_errors = {k: v for k, v in fit.se.items()}
        self._b_fixed = B
        self._r0_fixed = r0 is not None
        self.rmse = float(np.sqrt(np.mean((self._sigmoid(n) - y) ** 2)))
        self._fit_replicates(n_replicates)

    # ------------------------------------------------------------------ fitting helpers
    def _sigmoid(self, n) -> np.ndarray:
        return scalerl_sigmoid(n, **self.params)

    def _fit_replicates(self, n_replicates: int) -> None:
        labels = self.seed_labels
        s = len(labels)
        self.replicates = np.zeros((0, 4))
        self.replicate_seed_counts = np.zeros((0, s), dtype=np.int64)
        if s < 2 or n_replicates <= 0:
            if s < 2:
                self.notes.append("one seed: the curve has no seed spread, so forecast intervals leave out the "
                                  "curve's own uncertainty")
            return
        rng = np.random.Generator(np.random.PCG64(REPLICATE_SEED))
        by_seed = {lab: self.points[self.points["seed"] == lab] for lab in labels}
        reps, counts, failed = [], [], 0
        for _ in range(n_replicates):
            draw = rng.integers(0, s, size=s)
            c = np.bincount(draw, minlength=s)
            df = pd.concat([by_seed[labels[i]] for i in draw])
            n, y = df["update"].to_numpy(float), df["accuracy"].to_numpy(float)
            r0 = float(y[n == 0].mean()) if self._r0_fixed else None
            need = 2 + (self._b_fixed is None) + (r0 is None)
            if np.unique(n[n > 0]).size < need:
                failed += 1
                continue
            fit = _fit(n, y, r0=r0, b_fixed=self._b_fixed, start=self.params)
            p = fit.params
            reps.append([p["R0"], p["A"], p["n_mid"], p["B"]])
            counts.append(c)
        self.replicates = np.array(reps, dtype=np.float64).reshape(-1, 4)
        self.replicate_seed_counts = np.array(counts, dtype=np.int64).reshape(-1, s)
        if failed:
            self.notes.append(f"{failed} of {n_replicates} seed-bootstrap replicates had too few distinct evals to "
                              "refit and were left out")

    # ------------------------------------------------------------------ empirical mode
    def _mean_curve(self, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(grid (k,), weighted mean accuracy (k,)) over the range every drawn seed observed, or None."""
        labels = self.seed_labels
        w = np.ones(len(labels)) if weights is None else np.asarray(weights, dtype=np.float64)
        curves = []
        for lab, wi in zip(labels, w):
            if wi <= 0:
                continue
            d = self.points[self.points["seed"] == lab].groupby("update", sort=True)["accuracy"].mean()
            curves.append((d.index.to_numpy(float), d.to_numpy(float), wi))
        lo = max(c[0][0] for c in curves)
        hi = min(c[0][-1] for c in curves)
        grid = np.unique(np.concatenate([c[0] for c in curves]))
        grid = grid[(grid >= lo) & (grid <= hi)]
        if grid.size < 2:
            return None
        total = sum(c[2] for c in curves)
        mean = sum(c[2] * np.interp(grid, c[0], c[1]) for c in curves) / total
        return grid, mean

    @property
    def observed_range(self) -> tuple[float, float]:
        """(lowest, highest) update count every seed observed (the empirical mode's interpolation range)."""
        mc = self._mean_curve()
        if mc is None:
            u = self.points["update"]
            return float(u.min()), float(u.min())
        return float(mc[0][0]), float(mc[0][-1])

    def _interpolator(self, weights=None):
        """(lo, hi, PchipInterpolator) of the weighted seed mean, cached per weights; None if < 2 points."""
        from scipy.interpolate import PchipInterpolator

        cache = self.__dict__.setdefault("_pchip_cache", {})
        key = None if weights is None else tuple(int(w) for w in weights)
        if key not in cache:
            mc = self._mean_curve(weights)
            cache[key] = None if mc is None else (mc[0][0], mc[0][-1], PchipInterpolator(mc[0], mc[1]))
        return cache[key]

    def _empirical(self, n: np.ndarray, sigmoid_values: np.ndarray, weights=None) -> np.ndarray:
        ip = self._interpolator(weights)
        if ip is None:
            return sigmoid_values
        lo, hi, f = ip
        inside = (n >= lo) & (n <= hi)
        out = np.array(sigmoid_values, dtype=np.float64, copy=True)
        if inside.any():
            out[inside] = f(n[inside])
        return out

    # ------------------------------------------------------------------ evaluation
    def __call__(self, n):
        """Accuracy (points, clipped to [0, 100]) after ``n`` updates.

        Parameters
        ----------
        n : float or array_like, any shape
            Updates (>= 0).

        Returns
        -------
        float or ndarray (float64) of the shape of ``n``

        Raises
        ------
        ValueError
            A negative or non-finite ``n``.
        """
        arr = np.asarray(n, dtype=np.float64)
        if not np.all(np.isfinite(arr)) or (arr.size and arr.min() < 0):
            raise ValueError(f"updates n must be finite and >= 0, got {arr.min() if arr.size else arr}")
        flat = arr.ravel()
        vals = self._sigmoid(flat)
        if self.mode == "empirical":
            vals = self._empirical(flat, vals)
        out = np.clip(vals, 0.0, 100.0).reshape(arr.shape)
        return float(out) if np.ndim(n) == 0 else out

    def replicate_values(self, n, index=None) -> np.ndarray:
        """Accuracy (points, clipped) of seed-bootstrap replicates.

        Parameters
        ----------
        n : array_like, shape (draws,) or (draws, k)
            Updates for each draw (>= 0).
        index : array_like of int, shape (draws,), optional
            Which replicate each draw uses (default: draw d uses replicate d mod replicates).

        Returns
        -------
        ndarray, shape of ``n``
            With no replicates (one seed), the main curve's values.
        """
        n = np.asarray(n, dtype=np.float64)
        m = len(self.replicates)
        if m == 0:
            return np.asarray(self(np.maximum(n, 0.0)), dtype=np.float64).reshape(n.shape)
        draws = n.shape[0]
        idx = np.arange(draws) % m if index is None else np.asarray(index, dtype=np.int64)
        p = self.replicates[idx]
        vals = _sigmoid_params(np.maximum(n, 0.0), p)
        if self.mode == "empirical":
            flat_n = np.maximum(n, 0.0).reshape(draws, -1)
            flat_v = vals.reshape(draws, -1).copy()
            for d in range(draws):
                flat_v[d] = self._empirical(flat_n[d], flat_v[d], weights=self.replicate_seed_counts[int(idx[d])])
            vals = flat_v.reshape(n.shape)
        return np.clip(vals, 0.0, 100.0)

    # ------------------------------------------------------------------ description and I/O
    @property
    def n_seeds(self) -> int:
        return len(self.seed_labels)

    @property
    def max_update(self) -> float:
        """The largest update count evaluated: beyond it the curve is an extrapolation."""
        return float(self.points["update"].max())

    def describe(self) -> str:
        """One line: source, mode, parameters with their status, points and seeds."""
        p, s = self.params, self.status
        evals = self.points.groupby("seed").size()
        return (f"{self.source or 'reference curve'} ({self.mode}; ScaleRL sigmoid R0 {p['R0']:.2f} [{s['R0']}], "
                f"A {p['A']:.2f} [{s['A']}], n_mid {p['n_mid']:.3g} updates [{s['n_mid']}], B {p['B']:.3g} [{s['B']}]; "
                f"{len(self.points)} evals, {self.n_seeds} seed(s), {int(evals.min())}-{int(evals.max())} per seed, "
                f"up to update {self.max_update:g}; rmse {self.rmse:.2f} points)")

    def to_dict(self) -> dict:
        """JSON-ready dict (what :meth:`save` writes)."""
        return {
            "format": FORMAT, "version": VERSION, "mode": self.mode, "source": self.source,
            "model": "ScaleRL sigmoid (Khatri et al. 2025, eq. 1) in updates: R0 + (A - R0) / (1 + (n_mid / n)^B)",
            "params": dict(self.params), "status": dict(self.status),
            "standard_errors": {k: (v if math.isfinite(v) else None) for k, v in self.standard_errors.items()},
            "b_fixed": self._b_fixed, "r0_fixed": self._r0_fixed, "rmse": self.rmse,
            "metadata": self.metadata, "notes": list(self.notes),
            "points": {"update": self.points["update"].tolist(), "accuracy": self.points["accuracy"].tolist(),
                       "seed": self.points["seed"].tolist()},
            "seed_labels": list(self.seed_labels),
            "replicates": self.replicates.tolist(), "replicate_seed_counts": self.replicate_seed_counts.tolist(),
        }

    def save(self, path: str | Path) -> Path:
        """Write the curve as JSON (atomically: temporary file, then rename); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, mode: str | None = None) -> "ReferenceCurve":
        """Read a curve written by :meth:`save` (the fit is read, not redone).

        Parameters
        ----------
        path : path
        mode : {"sigmoid", "empirical"}, optional
            Override the saved mode.

        Raises
        ------
        CurveError
            Missing file, invalid JSON, or a file that is not a reference curve or lacks a field
            (the message names the file and the field).
        """
        path = Path(path)
        if not path.is_file():
            raise CurveError(f"reference curve file {str(path)!r} not found; write one with ReferenceCurve.save or "
                             "pass a study folder, metrics.jsonl, CSV or trainer_state.json")
        try:
            d = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CurveError(f"reference curve file {str(path)!r} is not valid JSON ({e}); rewrite it with "
                             "ReferenceCurve.save") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise CurveError(f"{str(path)!r} is not a reference curve (its 'format' is not {FORMAT!r}); write one with "
                             "ReferenceCurve.save")
        try:
            pts = d["points"]
            state = {"params": {k: float(d["params"][k]) for k in PARAMETERS}, "status": dict(d["status"]),
                     "standard_errors": {k: (math.inf if v is None else float(v))
                                         for k, v in d["standard_errors"].items()},
                     "b_fixed": d["b_fixed"], "r0_fixed": bool(d["r0_fixed"]), "rmse": float(d["rmse"]),
                     "replicates": np.array(d["replicates"], dtype=np.float64).reshape(-1, 4),
                     "replicate_seed_counts": np.array(d["replicate_seed_counts"], dtype=np.int64)}
            return cls(updates=pts["update"], accuracy=pts["accuracy"], seeds=pts["seed"], mode=mode or d["mode"],
                       B=d["b_fixed"], source=d.get("source", ""), metadata=d.get("metadata"), notes=d.get("notes", ()),
                       _state=state)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, CurveError):
                raise CurveError(f"{path}: {e}") from None
            raise CurveError(f"reference curve file {str(path)!r} is damaged: field {e} is missing or invalid; "
                             "rewrite it with ReferenceCurve.save") from None

    def _set_state(self, st: dict) -> None:
        self.params, self.status, self.standard_errors = st["params"], st["status"], st["standard_errors"]
        self._b_fixed, self._r0_fixed, self.rmse = st["b_fixed"], st["r0_fixed"], st["rmse"]
        self.replicates = st["replicates"]
        counts = st["replicate_seed_counts"]
        self.replicate_seed_counts = counts.reshape(len(self.replicates), len(self.seed_labels))

    def with_mode(self, mode: str) -> "ReferenceCurve":
        """The same fit evaluated in another mode (no refit)."""
        return ReferenceCurve(updates=self.points["update"], accuracy=self.points["accuracy"], seeds=self.points["seed"],
                              mode=mode, B=self._b_fixed, source=self.source, metadata=self.metadata, notes=self.notes,
                              _state={"params": self.params, "status": self.status,
                                      "standard_errors": self.standard_errors, "b_fixed": self._b_fixed,
                                      "r0_fixed": self._r0_fixed, "rmse": self.rmse, "replicates": self.replicates,
                                      "replicate_seed_counts": self.replicate_seed_counts})

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_study(cls, study_dir: str | Path, *, arm: str = "grpo", accuracy_col: str = "accuracy",
                   mode: str = "sigmoid", B: float | None = None,
                   n_replicates: int = N_REPLICATES) -> "ReferenceCurve":
        """The curve of one arm of a ``gradprobe study`` folder (its ``runs.csv``).

        Parameters
        ----------
        study_dir : path
            Holds ``runs.csv`` (columns ``arm``, ``seed``, ``update``, ``accuracy`` as fractions) and,
            optionally, ``plan.toml`` (model, task, update batch, learning rate: the curve's metadata).
        arm : str
            The arm whose evals are fitted (default ``grpo``).
        accuracy_col : str
            ``accuracy`` (greedy, the study's headline) or ``accuracy_sampled``.
        mode, B, n_replicates
            See :class:`ReferenceCurve`.

        Raises
        ------
        CurveError
            No ``runs.csv``, a missing column, an unknown arm (the message lists the arms), too few evals.
        """
        study_dir = Path(study_dir)
        runs = study_dir / "runs.csv"
        if not runs.is_file():
            raise CurveError(f"{runs} not found; pass the --out folder of a finished `gradprobe study`")
        df = pd.read_csv(runs)
        for col in ("arm", "seed", "update", accuracy_col):
            if col not in df.columns:
                raise CurveError(f"{runs} has no column {col!r} (columns: {list(df.columns)})")
        if arm not in set(df["arm"]):
            raise CurveError(f"{runs} has no arm {arm!r}; its arms are {sorted(set(df['arm']))}")
        d = df[(df["arm"] == arm) & df[accuracy_col].notna()]
        acc, note = _to_points(d[accuracy_col].to_numpy(float), "auto", f"{runs.name} {accuracy_col}")
        meta = {"study": str(study_dir), "arm": arm}
        plan = study_dir / "plan.toml"
        if plan.is_file():
            try:
                p = tomllib.loads(plan.read_text())
                train, task = p.get("train", {}), p.get("task", {})
                arm_spec = (p.get("arms") or {}).get(arm, {})
                meta.update(model=(p.get("model") or {}).get("name"), task=task_key(task.get("name"), task.get("config")),
                            update_prompts=arm_spec.get("prompts_per_update", train.get("prompts_per_update")),
                            update_group=arm_spec.get("group", train.get("group")),
                            lr=float(train.get("lr", math.nan)) * float(arm_spec.get("lr_scale", 1.0)),
                            loss_type=train.get("loss_type"),
                            max_new_tokens=(p.get("sampling") or {}).get("max_new_tokens"))
            except (tomllib.TOMLDecodeError, TypeError, ValueError) as e:
                meta["plan_error"] = f"plan.toml unreadable: {e}"
        seeds = d["seed"].to_numpy()
        src = (f"study {study_dir.name} arm {arm} ({runs}, {len(set(seeds))} seeds x "
               f"{int(d.groupby('seed').size().min())}-{int(d.groupby('seed').size().max())} evals)")
        return cls(updates=d["update"].to_numpy(float), accuracy=acc, seeds=seeds, mode=mode, B=B, source=src,
                   metadata=meta, notes=[note], n_replicates=n_replicates)

    @classmethod
    def from_metrics(cls, paths, *, metric: str = "greedy_accuracy", accuracy_scale: str = "auto",
                     mode: str = "sigmoid", B: float | None = None, metadata: dict | None = None,
                     n_replicates: int = N_REPLICATES) -> "ReferenceCurve":
        """The curve of one or more ``gradprobe train`` runs (one ``metrics.jsonl`` per seed).

        Parameters
        ----------
        paths : path or sequence of paths
            ``metrics.jsonl`` files (or their run folders). Lines with ``"eval": true`` carry ``update``
            and ``metric``. A ``config.json`` beside the file gives the metadata (model, task, batch, lr).
        metric : str
            ``greedy_accuracy`` (fractions; default) or ``sampled_accuracy``.
        accuracy_scale : {"auto", "fraction", "points"}
            ``auto`` detects fractions (all values in [0, 1]) and says so in ``notes``.

        Raises
        ------
        CurveError
            A missing file, a file without eval lines carrying ``metric``, too few evals.
        """
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not paths:
            raise CurveError("from_metrics needs at least one metrics.jsonl")
        n, y, seeds, meta, used = [], [], [], dict(metadata or {}), set()
        for i, path in enumerate(paths):
            path = Path(path)
            if path.is_dir():
                path = path / "metrics.jsonl"
            if not path.is_file():
                raise CurveError(f"{path} not found; pass the metrics.jsonl of a `gradprobe train` run (or its folder)")
            label = str(i)
            cfg = path.parent / "config.json"
            if cfg.is_file():
                try:
                    run = json.loads(cfg.read_text()).get("run") or {}
                    label = str(run.get("seed", i)) if len(paths) > 1 else label
                    train, task = run.get("train") or {}, run.get("task") or {}
                    for k, v in (("model", (run.get("model") or {}).get("name")),
                                 ("task", task_key(task.get("name"), task.get("config"))),
                                 ("update_prompts", train.get("prompts_per_update")), ("update_group", train.get("group")),
                                 ("lr", train.get("lr")), ("loss_type", train.get("loss_type"))):
                        meta.setdefault(k, v)
                except (json.JSONDecodeError, AttributeError):
                    pass
            if label in used:  # two runs with the same seed stay two curves
                label = f"{label}#{i}"
            used.add(label)
            got = 0
            for line_no, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CurveError(f"{path}:{line_no} is not valid JSON ({e})") from None
                if rec.get("eval") is True and rec.get(metric) is not None:
                    if "update" not in rec:
                        raise CurveError(f"{path}:{line_no}: an eval line without 'update'")
                    n.append(float(rec["update"]))
                    y.append(float(rec[metric]))
                    seeds.append(label)
                    got += 1
            if not got:
                raise CurveError(f"{path} has no eval lines ('\"eval\": true') with {metric!r}; was the run evaluated?")
        acc, note = _to_points(np.array(y), accuracy_scale, f"metrics {metric}")
        src = f"metrics.jsonl of {len(paths)} run(s) ({paths[0]}{', ...' if len(paths) > 1 else ''})"
        return cls(updates=n, accuracy=acc, seeds=seeds, mode=mode, B=B, source=src, metadata=meta, notes=[note],
                   n_replicates=n_replicates)

    @classmethod
    def from_csv(cls, path: str | Path, *, update_col: str = "update", accuracy_col: str = "accuracy",
                 seed_col: str | None = None, accuracy_scale: str = "auto", mode: str = "sigmoid",
                 B: float | None = None, metadata: dict | None = None,
                 n_replicates: int = N_REPLICATES) -> "ReferenceCurve":
        """The curve from a CSV of evals: one row per eval.

        Parameters
        ----------
        path : path
        update_col, accuracy_col : str
            Columns of the update count and the accuracy (fractions or points, detected).
        seed_col : str, optional
            Column of the seed/run label (default: one seed).
        accuracy_scale : {"auto", "fraction", "points"}
        metadata : dict, optional
            ``update_prompts``, ``update_group``, ``model``, ``task``, ``lr`` of the run.

        Raises
        ------
        CurveError
            A missing file or column (the message lists the columns), too few evals.
        """
        path = Path(path)
        if not path.is_file():
            raise CurveError(f"CSV {str(path)!r} not found")
        df = pd.read_csv(path)
        for col in [update_col, accuracy_col] + ([seed_col] if seed_col else []):
            if col not in df.columns:
                raise CurveError(f"{path} has no column {col!r} (columns: {list(df.columns)}); pass update_col=, "
                                 "accuracy_col= or seed_col=")
        df = df[df[accuracy_col].notna() & df[update_col].notna()]
        acc, note = _to_points(df[accuracy_col].to_numpy(float), accuracy_scale, f"{path.name} {accuracy_col}")
        return cls(updates=df[update_col].to_numpy(float), accuracy=acc,
                   seeds=df[seed_col].to_numpy() if seed_col else None, mode=mode, B=B, source=f"CSV {path}",
                   metadata=metadata, notes=[note], n_replicates=n_replicates)

    @classmethod
    def from_trl_state(cls, paths, *, metric: str = "eval_accuracy", accuracy_scale: str = "auto",
                       initial_accuracy: float | None = None, mode: str = "sigmoid", B: float | None = None,
                       metadata: dict | None = None, n_replicates: int = N_REPLICATES) -> "ReferenceCurve":
        """The curve from TRL ``trainer_state.json`` file(s) (one per seed).

        TRL's ``Trainer`` writes ``log_history``, a list of dicts; eval entries carry ``step``
        (optimizer steps = updates) and the eval metrics. Steps are read as updates: with gradient
        accumulation one TRL step is one optimizer update, which is what the x axis means.

        Parameters
        ----------
        paths : path or sequence of paths
            ``trainer_state.json`` files (or checkpoint folders holding one).
        metric : str
            The log_history key of the held-out accuracy (default ``eval_accuracy``; e.g.
            ``eval_rewards/accuracy_reward/mean`` for a GRPOTrainer eval of an accuracy reward).
        accuracy_scale : {"auto", "fraction", "points"}
        initial_accuracy : float, optional
            Accuracy of the initial policy (same scale as the metric) when the log has no step-0 eval
            (TRL evaluates at step 0 only with ``eval_on_start=True``); it becomes R0.

        Raises
        ------
        CurveError
            A missing or invalid file, no entry with ``metric`` (the message lists the eval keys found),
            too few evals.
        """
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        n, y, seeds = [], [], []
        for i, path in enumerate(paths):
            path = Path(path)
            if path.is_dir():
                path = path / "trainer_state.json"
            if not path.is_file():
                raise CurveError(f"{path} not found; pass a TRL trainer_state.json (or the checkpoint folder)")
            try:
                hist = json.loads(path.read_text())["log_history"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise CurveError(f"{path} is not a TRL trainer_state.json with a 'log_history' list ({e})") from None
            rows = [(float(h["step"]), float(h[metric])) for h in hist
                    if isinstance(h, dict) and "step" in h and h.get(metric) is not None]
            if not rows:
                keys = sorted({k for h in hist if isinstance(h, dict) for k in h if k.startswith("eval")})
                raise CurveError(f"{path}: no log_history entry has {metric!r}; eval keys found: {keys or 'none'}; "
                                 "pass metric=...")
            if initial_accuracy is not None and not any(s == 0 for s, _ in rows):
                rows.insert(0, (0.0, float(initial_accuracy)))
            for s, v in rows:
                n.append(s)
                y.append(v)
                seeds.append(str(i))
        acc, note = _to_points(np.array(y), accuracy_scale, f"trainer_state {metric}")
        src = f"TRL trainer_state.json of {len(paths)} run(s) ({paths[0]}{', ...' if len(paths) > 1 else ''})"
        return cls(updates=n, accuracy=acc, seeds=seeds, mode=mode, B=B, source=src, metadata=metadata, notes=[note],
                   n_replicates=n_replicates)


def load_reference_curve(spec: str | Path, *, mode: str | None = None) -> ReferenceCurve:
    """A curve from what a user has: a saved curve (``.json`` written by :meth:`ReferenceCurve.save`),
    a TRL ``trainer_state.json``, a ``metrics.jsonl``, a CSV (columns ``update``, ``accuracy``), a study
    folder (its ``grpo`` arm), or ``default`` / ``tiny`` (the shipped tiny-tier frontier curve).

    Raises
    ------
    CurveError
        Nothing at ``spec``, or a file of none of these kinds (the message lists them).
    """
    s = str(spec)
    if s in ("default", "tiny"):
        c = ReferenceCurve.load(default_curve_path())
        return c.with_mode(mode) if mode else c
    p = Path(s)
    kw = {"mode": mode} if mode else {}
    if p.is_dir():
        if (p / "runs.csv").is_file():
            return ReferenceCurve.from_study(p, **kw)
        if (p / "metrics.jsonl").is_file():
            return ReferenceCurve.from_metrics(p, **kw)
        if (p / "trainer_state.json").is_file():
            return ReferenceCurve.from_trl_state(p, **kw)
    elif p.is_file():
        if p.name == "trainer_state.json":
            return ReferenceCurve.from_trl_state(p, **kw)
        if p.suffix == ".jsonl":
            return ReferenceCurve.from_metrics(p, **kw)
        if p.suffix == ".csv":
            return ReferenceCurve.from_csv(p, **kw)
        if p.suffix == ".json":
            return ReferenceCurve.load(p, mode=mode)
    raise CurveError(f"--reference-curve {s!r}: expected a saved curve (.json), a TRL trainer_state.json, a "
                     "metrics.jsonl, a CSV with update,accuracy columns, a study or run folder, or 'default'")


def default_curve_path() -> Path:
    """The shipped tiny-tier curve: grpo of ``data/study_tiny`` on its frontier task (package data)."""
    return Path(__file__).resolve().parent.parent / "data" / "curves" / "tiny_frontier_grpo.json"
