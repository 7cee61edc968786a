"""The reference curve's model and its deterministic least-squares fit (used by :class:`~.curves.ReferenceCurve`).

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
first start, so the same points give the same curve. Evals at the same update count (several seeds, or one
eval set scored twice) are pooled before the fit when there are any (:func:`_pooled`): the residual sum of squares
over every eval is sum_x n_x (ybar_x - R(x))^2 + W, with n_x the evals at update count x, ybar_x their mean and W
their sum of squares about it (a constant of the parameters), so the fit runs on the distinct update counts with
residuals sqrt(n_x) (R(x) - ybar_x) plus one constant residual sqrt(W): the same cost, gradient and J^T J as the
fit over every eval, in exact arithmetic, hence the same minimiser and standard errors, at the cost of the
distinct update counts instead of the evals. Each parameter is then marked

- ``at_bound``: the optimum sits on its bound (the data push it out of the allowed range);
- ``identified``: not at a bound, finite standard error (Gauss-Newton covariance
  s^2 (J^T J)^-1, s^2 = residual sum of squares / (points - free parameters)), and the standard
  error below the parameter's scale (|A - R0| for A and R0, 1 for ln n_mid, i.e. within a
  factor e, B for B);
- ``fixed``: not fitted.

Seed spread (:func:`fit_seed_replicates`): with two or more seeds, :data:`N_REPLICATES` bootstrap
replicates over seeds (seeds resampled with replacement, R0 re-read and the curve refitted from the
main fit's parameters; the draws: :func:`seed_bootstrap_draws`). A replicate whose drawn seeds have no eval
at update 0 (a seed whose update-0 line was skipped) keeps the main fit's R0, read from every seed's update-0
evals: the initial policy is the same for every seed, and the curve's notes count such replicates.

Eval noise of one seed (:func:`eval_noise_sd`, :func:`fit_noise_replicates`): a curve of one seed has no seed
spread, but its evals still carry noise (a finite eval set), which the fit's residuals estimate: s = sqrt(residual
sum of squares / (points - parameters)), the unbiased residual variance of least squares, with R0 counted among the
parameters when it is read from the evals at update 0 (its eval's residual is 0 by construction). Its
:data:`N_REPLICATES` replicates are a parametric bootstrap of the fit (Efron & Tibshirani 1993, "An Introduction to
the Bootstrap", sec. 6.5; for a regression, ch. 9): every eval redrawn as the fitted value plus N(0, s^2) noise
(clipped to [0, 100]), R0 re-read from the redrawn evals at update 0, the curve refitted from the main fit's
parameters. It carries the noise of one run's evals, not the run-to-run spread a second seed would show.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import islice

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

__all__ = ["CurveError", "TooFewEvalsError", "scalerl_sigmoid", "sigmoid_params", "SigmoidFit", "fit_sigmoid",
           "fit_seed_replicates", "seed_bootstrap_draws", "eval_noise_sd", "fit_noise_replicates", "fit_statuses",
           "fit_needs", "free_parameters", "too_few_evals", "fit_misfit", "MISFIT_RMSE", "MISFIT_EVAL",
           "PARAMETERS", "MODES", "START_B", "B_BOUNDS", "B_FALLBACK", "N_REPLICATES",
           "REPLICATE_SEED"]

PARAMETERS = ("R0", "A", "n_mid", "B")
#: How a :class:`~gradprobe.forecast.curves.ReferenceCurve` reads accuracy off its points: the fit, or the
#: monotone interpolation of the seed mean inside the observed range.
MODES = ("sigmoid", "empirical")
#: Fixed starting grid of the fit (B values); n_mid starts at n_min, sqrt(n_min n_max), n_max and
#: A at the accuracy of the last eval level and at R0 + 1.5 x (that - R0).
START_B = (0.5, 1.0, 2.0, 4.0)
B_BOUNDS = (0.1, 10.0)
#: The order the fit takes its free parameters in (its parameter vector, n_mid as ln n_mid) and names them in.
_FIT_ORDER = ("A", "n_mid", "B", "R0")
#: B used when the evals do not identify it: the hyperbolic (Michaelis-Menten) saturation.
B_FALLBACK = 1.0
N_REPLICATES = 200
REPLICATE_SEED = 20251015
#: A fit whose root mean squared residual over every eval exceeds this many accuracy points does not describe its
#: curve (:func:`fit_misfit`).
MISFIT_RMSE = 4.0
#: A fit from which the seed mean at some update count lies more than this many accuracy points does not describe
#: its curve (:func:`fit_misfit`).
MISFIT_EVAL = 10.0


class CurveError(ValueError):
    """A reference curve cannot be built or read (the message names the field or file and the fix)."""


class TooFewEvalsError(CurveError):
    """The refusal of evals at fewer distinct update counts > 0 than the fit's free parameters, raised by
    :func:`too_few_evals`: the marker a reader matches on (not the message's text).

    Attributes
    ----------
    updates : ndarray (float64), shape (points,)
        The update counts of the evals judged.
    B : float or None
        The fixed B they were judged with (None: B fitted).
    eval_hint : str
        The fix the refusal names.
    """

    def __init__(self, message: str, *, updates=(), B: float | None = None, eval_hint: str = ""):
        super().__init__(message)
        self.updates = np.asarray(updates, dtype=np.float64).ravel()
        self.B, self.eval_hint = B, eval_hint

    def naming(self, source: str) -> TooFewEvalsError:
        """The same refusal naming the evals' ``source`` (``"metrics.jsonl of 1 run(s) (PATH)"``) after their
        count: for a reader, whose files the curve's own refusal does not name."""
        return _too_few(self.updates, self.B, self.eval_hint, source) or self  # enough (a hand-made error): as is


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


def sigmoid_params(n, p: np.ndarray) -> np.ndarray:
    """:func:`scalerl_sigmoid` vectorised over replicates.

    Parameters
    ----------
    n : array_like, shape (M,) or (M, k)
        Updates of each replicate (>= 0).
    p : ndarray, shape (M, 4)
        (R0, A, n_mid, B) of each replicate.

    Returns
    -------
    ndarray (float64), the shape of ``n``
        Accuracy points (not clipped).
    """
    n = np.asarray(n, dtype=np.float64)
    r0, a, nm, b = (p[:, i].reshape((-1,) + (1,) * (n.ndim - 1)) for i in range(4))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z = np.exp(b * (np.log(nm) - np.log(np.where(n > 0, n, 1.0))))
        out = r0 + (a - r0) / (1.0 + z)
    return np.where(n > 0, out, r0)


class SigmoidFit:
    """Result of one least-squares fit: ``params`` (R0, A, n_mid, B), ``cost`` (half the residual sum of
    squares, points^2), ``status`` and ``se`` (standard errors) per parameter (module docstring)."""

    def __init__(self, params, cost, status, se):
        self.params, self.cost, self.status, self.se = params, cost, status, se


def _starting_points(names, n, y, *, r0, b_fixed, start, lo_n, hi_n) -> list[list[float]]:
    """The fixed grid of starting points (module docstring), or the one ``start`` given."""
    if start is not None:
        return [[start[k] if k != "log_n_mid" else math.log(start["n_mid"]) for k in names]]
    zero = n == n.min()
    r0_start = r0 if r0 is not None else float(y[zero].mean())
    last = float(y[n == hi_n].mean())
    a_starts = (last, r0_start + 1.5 * (last - r0_start))
    nm_starts = (lo_n, math.sqrt(lo_n * hi_n), hi_n)
    b_starts = START_B if b_fixed is None else (b_fixed,)
    starts = []
    for b0 in b_starts:
        for nm0 in nm_starts:
            for a0 in a_starts:
                d = {"A": a0, "log_n_mid": math.log(nm0), "B": b0, "R0": r0_start}
                starts.append([d[k] for k in names])
    return starts


def _standard_errors(best, names, on_bound, n_points: int) -> dict:
    """Gauss-Newton standard errors of the free parameters off their bounds (inf where not estimable)."""
    dof = n_points - len(names)
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
    return se


def free_parameters(*, r0_fixed: bool, b_fixed: float | None) -> tuple[str, ...]:
    """The parameters a ScaleRL sigmoid fit fits, in :data:`PARAMETERS` order: A and n_mid always, R0 unless it is
    fixed (``r0_fixed``: the evals have some at update 0, whose mean it is), B unless ``b_fixed`` is given.

    The one count of the fit's free parameters: :func:`fit_sigmoid` fits these, :func:`fit_needs` and the seed
    replicates (:func:`fit_seed_replicates`) need as many distinct update counts > 0, and :mod:`.curve_file`
    checks a saved curve's ``status`` and ``standard_errors`` against them."""
    return tuple(k for k in PARAMETERS if not (k == "R0" and r0_fixed) and not (k == "B" and b_fixed is not None))


def fit_needs(updates, B: float | None = None) -> tuple[int, int]:
    """(distinct update counts > 0, free parameters) of a ScaleRL sigmoid fit to evals at ``updates`` (shape
    (points,), any order): A and n_mid, B unless ``B`` is given, R0 unless an eval sits at update 0
    (:func:`free_parameters`). :class:`~gradprobe.forecast.curves.ReferenceCurve` refuses a curve with fewer such
    counts than free parameters (each needs an update count > 0 to pin it)."""
    n = np.asarray(updates, dtype=np.float64).ravel()
    return int(np.unique(n[n > 0]).size), len(free_parameters(r0_fixed=bool((n == 0).any()), b_fixed=B))


def too_few_evals(updates, B: float | None, eval_hint: str, source: str | None = None) -> None:
    """Refuse evals at ``updates`` (shape (points,)) at fewer distinct update counts > 0 than the fit's free
    parameters (:func:`fit_needs`; ``B`` given: fixed). :class:`~gradprobe.forecast.curves.ReferenceCurve` calls it
    before fitting.

    Raises
    ------
    TooFewEvalsError
        One line naming the count, the minimum, the parameters and the fix ``eval_hint``, and the evals' ``source``
        when given (``"metrics.jsonl of 1 run(s) (PATH)"``: a reader's refusal that names no file otherwise;
        :meth:`TooFewEvalsError.naming`). Nothing is raised, and None returned, when there are enough.
    """
    error = _too_few(updates, B, eval_hint, source)
    if error is not None:
        raise error


def _too_few(updates, B: float | None, eval_hint: str, source: str | None) -> TooFewEvalsError | None:
    """The refusal :func:`too_few_evals` raises (None when there are enough evals)."""
    distinct, free = fit_needs(updates, B)
    if distinct >= free:
        return None
    has_zero = bool((np.asarray(updates, dtype=np.float64) == 0).any())
    named = [k for k in _FIT_ORDER if k in free_parameters(r0_fixed=has_zero, b_fixed=B)]
    return TooFewEvalsError(
        f"the curve has evals at {distinct} distinct update count(s) > 0{f' in {source}' if source else ''} and the "
        f"fit has {free} free parameters ({', '.join(named)}): it needs evals at at least {free} distinct update "
        "counts > 0" + ("" if has_zero else ", or an eval at update 0 (R0)") + f"; {eval_hint}",
        updates=updates, B=B, eval_hint=eval_hint)


def fit_statuses(names, on_bound, se: dict, scale: dict, *, r0, b_fixed) -> dict:
    """The status the fit gives each parameter (module docstring): ``at_bound`` when on a bound, else
    ``identified`` when its standard error is finite and below its scale, else ``not_identified``; ``fixed`` for R0
    and B when held fixed. The one rule: :func:`fit_sigmoid` marks its fit with it and
    :mod:`.curve_file` checks a saved curve's ``status`` with it.

    Parameters
    ----------
    names : sequence of str, length k
        The fitted parameters (``A``, ``B``, ``R0``, and ``n_mid`` or ``log_n_mid``: written as ``n_mid``).
    on_bound : sequence of bool, length k
        Whether each sits on a bound of the fit's range.
    se, scale : dict
        Per name: the standard error (``math.inf``: not estimable) and the scale it must be below, in the same
        units (accuracy points for A and R0; for n_mid updates, or 1 with ``log_n_mid``'s standard error).
    r0, b_fixed : float or None
        Not None: R0 / B are held fixed (status ``fixed``).

    Returns
    -------
    dict
        Parameter name (``n_mid`` for ``log_n_mid``) -> status.
    """
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
    return status


def _pooled(n: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """The evals ``y`` (points) at updates ``n`` (shape (points,)) pooled by update count for the fit (module
    docstring): (distinct update counts (k,), mean accuracy at each (k,), sqrt of the evals at each (k,), sqrt of the
    evals' sum of squares about their update count's mean); None when every update count occurs once (nothing to
    pool: the fit runs on the evals as they are)."""
    levels, inverse, counts = np.unique(n, return_inverse=True, return_counts=True)
    if levels.size == n.size:
        return None
    mean = np.bincount(inverse, weights=y) / counts
    return levels, mean, np.sqrt(counts), math.sqrt(float(np.sum((y - mean[inverse]) ** 2)))


def fit_sigmoid(n: np.ndarray, y: np.ndarray, *, r0: float | None, b_fixed: float | None,
                start: dict | None = None, pool: bool = True) -> SigmoidFit:
    """Least-squares ScaleRL fit of accuracy ``y`` (points) at updates ``n`` (module docstring).

    Parameters
    ----------
    n, y : ndarray, shape (points,)
        Update counts (>= 0, at least one > 0) and accuracies (points).
    r0, b_fixed : float or None
        R0 and B held fixed at these values; None: fitted.
    start : dict, optional
        One starting point (``R0``, ``A``, ``n_mid``, ``B``) instead of the grid (the seed replicates).
    pool : bool
        Pool evals at the same update count before the fit (default; :func:`_pooled`, module docstring: the same
        minimiser, cost and standard errors); False fits every eval as it is, the fit pooling is checked against.

    Returns
    -------
    SigmoidFit
    """
    pos = np.unique(n[n > 0])
    lo_n, hi_n = float(pos[0]), float(pos[-1])
    free = free_parameters(r0_fixed=r0 is not None, b_fixed=b_fixed)
    names = ["log_n_mid" if k == "n_mid" else k for k in _FIT_ORDER if k in free]  # n_mid fitted as ln n_mid
    lower = {"A": 0.0, "log_n_mid": math.log(lo_n / 100.0), "B": B_BOUNDS[0], "R0": 0.0}
    upper = {"A": 100.0, "log_n_mid": math.log(hi_n * 100.0), "B": B_BOUNDS[1], "R0": 100.0}
    lb = np.array([lower[k] for k in names])
    ub = np.array([upper[k] for k in names])

    def unpack(theta):
        d = dict(zip(names, theta))
        return (d.get("R0", r0), d["A"], math.exp(d["log_n_mid"]), d.get("B", b_fixed))

    pooled = _pooled(n, y) if pool else None
    if pooled is None:  # every update count once: the evals as they are
        def resid(theta):
            R0, A, nm, B = unpack(theta)
            return scalerl_sigmoid(n, R0=R0, A=A, n_mid=nm, B=B) - y
    else:
        levels, mean, weight, spread = pooled

        def resid(theta):
            R0, A, nm, B = unpack(theta)
            return np.append(weight * (scalerl_sigmoid(levels, R0=R0, A=A, n_mid=nm, B=B) - mean), spread)

    best = None
    for s in _starting_points(names, n, y, r0=r0, b_fixed=b_fixed, start=start, lo_n=lo_n, hi_n=hi_n):
        s = np.clip(np.array(s, dtype=np.float64), lb + 1e-9 * (ub - lb), ub - 1e-9 * (ub - lb))
        res = least_squares(resid, s, bounds=(lb, ub), method="trf", x_scale="jac", max_nfev=2000)
        if best is None or res.cost < best.cost * (1 - 1e-12) - 1e-15:
            best = res
    theta = best.x
    R0, A, nm, B = unpack(theta)
    width = ub - lb
    on_bound = (np.abs(theta - lb) <= 1e-6 * width) | (np.abs(theta - ub) <= 1e-6 * width)
    se = _standard_errors(best, names, on_bound, n.size)
    gain = abs(A - R0)
    status = fit_statuses(names, on_bound, se, {"A": gain, "log_n_mid": 1.0, "B": B, "R0": gain}, r0=r0,
                          b_fixed=b_fixed)
    ses = {("n_mid" if k == "log_n_mid" else k): v for k, v in se.items()}
    if "n_mid" in ses and math.isfinite(ses["n_mid"]):
        ses["n_mid"] = ses["n_mid"] * nm  # delta method: se(n_mid) = n_mid se(ln n_mid)
    return SigmoidFit({"R0": float(R0), "A": float(A), "n_mid": float(nm), "B": float(B)}, float(best.cost), status,
                      ses)


def seed_bootstrap_draws(positive: list, need: int) -> Iterator[tuple[np.ndarray, bool]]:
    """The seed-bootstrap draws of :func:`fit_seed_replicates`, in order and without end (the caller stops): an
    iterator (a generator the call returns once ``positive`` is checked, so a bad one is refused at the call).

    The one draw loop: :func:`fit_seed_replicates` takes its first ``n_replicates`` draws and refits the refittable
    ones; :mod:`.curve_file` draws again to check a saved curve's ``replicate_seed_counts``. Resampling: the
    nonparametric bootstrap (Efron 1979) with the seed as the unit, every draw ``s`` seed indices uniform with
    replacement, ``numpy.random.Generator(numpy.random.PCG64(REPLICATE_SEED)).integers(0, s, size=s)``.

    Parameters
    ----------
    positive : list of ndarray, length s (seeds)
        Per seed (in the order of the seed labels), its distinct update counts > 0 (updates); empty for a seed
        with evals at update 0 only.
    need : int
        Distinct update counts > 0 a resample needs to be refitted (its free parameters: 2, + 1 if B is fitted,
        + 1 if R0 is).

    Returns
    -------
    iterator of (draw, refittable)
        ``draw``: int64 ndarray, shape (s,), the drawn seed indices in draw order; ``refittable``: whether the
        drawn seeds' evals cover at least ``need`` distinct update counts > 0 (a draw that does not is left out).

    Raises
    ------
    ValueError
        ``positive`` is empty (no seeds to draw): at the call, not at the first ``next()``.
    """
    s = len(positive)
    if s == 0:
        raise ValueError("seed_bootstrap_draws: positive is empty; pass one array of update counts per seed")

    def draws() -> Iterator[tuple[np.ndarray, bool]]:
        rng = np.random.Generator(np.random.PCG64(REPLICATE_SEED))
        while True:
            draw = rng.integers(0, s, size=s)
            yield draw, bool(np.unique(np.concatenate([positive[i] for i in draw])).size >= need)

    return draws()


def fit_seed_replicates(points: pd.DataFrame, labels: list, params: dict, *, r0_fixed: bool,
                        b_fixed: float | None, n_replicates: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Seed-bootstrap refits of the curve (module docstring).

    Parameters
    ----------
    points : DataFrame
        Columns ``update``, ``accuracy`` (points), ``seed`` (labels of ``labels``).
    labels : list
        The seed labels, in the order of the returned counts' columns.
    params : dict
        The main fit's parameters: every refit starts there.
    r0_fixed, b_fixed
        As in the main fit (R0 re-read from each replicate's evals at n = 0 when fixed; the main fit's
        ``params["R0"]`` when the replicate's seeds have none).
    n_replicates : int
        Replicates to draw (0: none).

    Returns
    -------
    (replicates, counts, notes)
        ``replicates``: shape (replicates, 4), (R0, A, n_mid, B) of each refit; ``counts``: shape
        (replicates, seeds), times each seed was drawn; ``notes``: one seed, replicates left out
        for too few distinct evals, replicates that kept the main fit's R0.
    """
    s = len(labels)
    if s < 2 or n_replicates <= 0:
        notes = ["one seed: the curve has no seed spread, so forecast intervals carry only its eval noise (the fit's "
                 "residuals), not the run-to-run spread of another seed"] if s < 2 else []
        return np.zeros((0, 4)), np.zeros((0, s), dtype=np.int64), notes
    by_seed = {lab: points[points["seed"] == lab] for lab in labels}
    positive = [np.unique(u[u > 0]) for u in (by_seed[lab]["update"].to_numpy(float) for lab in labels)]
    need = len(free_parameters(r0_fixed=r0_fixed, b_fixed=b_fixed))
    draws = islice(seed_bootstrap_draws(positive, need=need), n_replicates)
    reps, counts, failed, main_r0 = [], [], 0, 0
    for draw, refittable in draws:
        df = pd.concat([by_seed[labels[i]] for i in draw])
        n, y = df["update"].to_numpy(float), df["accuracy"].to_numpy(float)
        r0 = None
        if r0_fixed:
            at_zero = n == 0
            main_r0 += not at_zero.any()
            r0 = float(y[at_zero].mean()) if at_zero.any() else float(params["R0"])
        if not refittable:  # too few distinct evals for the free parameters
            failed += 1
            continue
        p = fit_sigmoid(n, y, r0=r0, b_fixed=b_fixed, start=params).params
        reps.append([p["R0"], p["A"], p["n_mid"], p["B"]])
        counts.append(np.bincount(draw, minlength=s))
    notes = [f"{failed} of {n_replicates} seed-bootstrap replicates had too few distinct evals to refit and were "
             "left out"] if failed else []
    if main_r0:
        notes.append(f"{main_r0} of {n_replicates} seed-bootstrap replicates drew no seed with an eval at update 0 "
                     f"and kept the main fit's R0 ({float(params['R0']):.2f})")
    return (np.array(reps, dtype=np.float64).reshape(-1, 4), np.array(counts, dtype=np.int64).reshape(-1, s), notes)


def eval_noise_sd(updates, accuracy, fitted, *, r0_fixed: bool, b_fixed: float | None) -> tuple[float | None, int]:
    """The eval noise a fit's residuals estimate (module docstring): s = sqrt(RSS / (points - parameters)).

    Parameters
    ----------
    updates, accuracy, fitted : array_like, shape (points,)
        Every eval's update count, accuracy and the fit's value there (accuracy points).
    r0_fixed, b_fixed
        As in the fit: R0 read from the evals at update 0 still counts as a parameter estimated from the evals (its
        residual there is 0 by construction); a fixed B does not.

    Returns
    -------
    (s, dof)
        ``s`` in accuracy points, None when there is no estimate: no residual degrees of freedom (``dof`` =
        points - parameters <= 0: the fit has as many parameters as evals, so it passes through them whatever
        their noise); ``dof`` the residual degrees of freedom. A fit through evals it does not have to pass through
        (a flat curve at 0 or 100 points, whose evals have no binomial noise either) estimates s = 0.
    """
    y = np.asarray(accuracy, dtype=np.float64).ravel()
    res = y - np.asarray(fitted, dtype=np.float64).ravel()
    dof = int(y.size - len(free_parameters(r0_fixed=r0_fixed, b_fixed=b_fixed)) - int(r0_fixed))
    if dof <= 0:
        return None, dof
    return math.sqrt(float(np.sum(res ** 2)) / dof), dof


def fit_noise_replicates(updates, params: dict, sd: float, *, r0_fixed: bool, b_fixed: float | None,
                         n_replicates: int) -> tuple[np.ndarray, np.ndarray]:
    """Parametric-bootstrap refits of a one-seed curve with eval noise ``sd`` (module docstring).

    Parameters
    ----------
    updates : array_like, shape (points,)
        The curve's eval update counts (>= 0).
    params : dict
        The main fit's ``R0``, ``A``, ``n_mid``, ``B``: the redrawn evals' centre and every refit's start.
    sd : float
        Eval noise, accuracy points (:func:`eval_noise_sd`).
    r0_fixed, b_fixed
        As in the main fit (R0 re-read from the redrawn evals at update 0 when fixed).
    n_replicates : int
        Replicates (0: none). Draws: ``numpy.random.Generator(numpy.random.PCG64(REPLICATE_SEED))``, normal.

    Returns
    -------
    (replicates, accuracy)
        ``replicates``: shape (replicates, 4), (R0, A, n_mid, B) of each refit; ``accuracy``: shape (replicates,
        points), the redrawn evals (points), which an ``empirical`` curve interpolates.
    """
    n = np.asarray(updates, dtype=np.float64).ravel()
    centre = scalerl_sigmoid(n, **params)
    m = max(int(n_replicates), 0)
    if sd == 0:  # no noise: every redraw is the fit itself, and so is every refit
        return np.tile([[params[k] for k in PARAMETERS]], (m, 1)).astype(np.float64), np.tile(centre, (m, 1))
    rng = np.random.Generator(np.random.PCG64(REPLICATE_SEED))
    reps, ys = [], []
    for _ in range(m):
        y = np.clip(centre + rng.normal(0.0, sd, size=n.size), 0.0, 100.0)
        r0 = float(y[n == 0].mean()) if r0_fixed else None
        p = fit_sigmoid(n, y, r0=r0, b_fixed=b_fixed, start=params).params
        reps.append([p["R0"], p["A"], p["n_mid"], p["B"]])
        ys.append(y)
    return np.array(reps, dtype=np.float64).reshape(-1, 4), np.array(ys, dtype=np.float64).reshape(-1, n.size)


def fit_misfit(updates, accuracy, fitted, *, rmse_limit: float = MISFIT_RMSE,
               eval_limit: float = MISFIT_EVAL) -> str | None:
    """Why a fitted curve does not describe its evals, or None when it does: the reference curve's adequacy check.

    The rule: the fit fails when the root mean squared residual of the seed means (the evals averaged over seeds at
    each update count, each update count once) exceeds ``rmse_limit`` (4 accuracy points), or when at some update
    count that seed mean lies more than ``eval_limit`` (10 points) from the fit. Seed means, not single evals: a
    curve with many seeds and ordinary eval noise would otherwise be judged by its noise, which its seed bootstrap
    already carries (with one seed the two are the same). Why these limits: every grpo arm of the shipped studies
    (``data/study_*``) and the shipped default curve fit with an rmse of at most 2.5 points over every eval (seed
    noise included, less over the seed means; a single run's seed-noise floor is 1.6 points,
    ``gradprobe/data/curves/forecast_validation.json``) and a largest seed-mean miss of 5.1 points, while a curve
    that collapses or turns down after its peak is fitted with an rmse of 4.8 (a peak at update 20, then 13 points
    lost by update 60) to 23 points (a final eval 73 points below the one before). A fit off by 4 points rms is off
    by more than the forecasts' validated mean absolute error (2.8 points) and than most gains they resolve, so its
    verdicts would rest on the fit's shape rather than on the evals. Relative limits (rmse over the curve's range)
    are not used: a flat shipped curve (a hard task, 3 points of range) fits within eval noise that is a third of
    its range. A one-seed curve with eval noise larger than 4 points (an eval set of under about 150 problems,
    binomial sd sqrt(p (1 - p) / problems)) trips the rule too: a one-seed curve's verdict intervals do not carry
    that noise.

    Parameters
    ----------
    updates, accuracy, fitted : array_like, shape (points,)
        Every eval's update count, accuracy (points) and the fit's value there (points).
    rmse_limit, eval_limit : float
        The limits above, accuracy points.

    Returns
    -------
    str or None
        E.g. ``"the reference curve is not described by its fit (rmse 23.0 points; the eval at update 80 is 52.7
        points below it)"``: the rmse and the update count whose seed-mean eval lies furthest from the fit.
    """
    n = np.asarray(updates, dtype=np.float64).ravel()
    res = np.asarray(accuracy, dtype=np.float64).ravel() - np.asarray(fitted, dtype=np.float64).ravel()
    if res.size == 0:
        return None
    levels, inverse, counts = np.unique(n, return_inverse=True, return_counts=True)
    mean_res = np.bincount(inverse, weights=res) / counts
    rmse = float(np.sqrt(np.mean(mean_res ** 2)))  # over the seed means: seeds average their eval noise away
    worst = int(np.argmax(np.abs(mean_res)))
    miss = float(mean_res[worst])
    if rmse <= rmse_limit and abs(miss) <= eval_limit:
        return None
    what = "the eval" if counts[worst] == 1 else f"the mean of the {counts[worst]} evals"
    side = "below" if miss < 0 else "above"
    return (f"the reference curve is not described by its fit (rmse {rmse:.1f} points; {what} at update "
            f"{levels[worst]:g} is {abs(miss):.1f} points {side} it)")
