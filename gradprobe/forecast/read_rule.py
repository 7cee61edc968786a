"""Reading a run's curve at a point: the one rule, for the study analysis and for the check of a study folder.

The rule is the study analysis's "Reading a run at a point" (:mod:`gradprobe.study.analysis`, module docstring,
which defines it for the reads ``analysis.json`` records). It lives here, in the forecast layer, because the check
of a study folder (:mod:`gradprobe.forecast.analysis_reads`: ``analysis.json`` against ``runs.csv`` now, for a
reference curve read from a study, ``calib`` and ``gradprobe study --analyze-only``) re-does the analysis's reads
and may not import :mod:`gradprobe.study` (a higher layer). :mod:`gradprobe.study.reading` imports these names
(:data:`AT_TOL`, :func:`promised_gap`, :func:`read_point`), so a change of the rule here changes both.

Rule (:func:`read_point`), for one run's evals x_0 < x_1 < ... on an axis (updates, generated tokens, FLOPs,
device-seconds) with update counts u_0 < u_1 < ..., read at a point ``at`` on that axis:

At an eval
    An eval with |x_i - at| <= tol (:data:`AT_TOL` relative, :func:`_at_tol`) is read as at ``at``
    (``"exact"``); the nearest one when several are (the first of equally near ones).
Between two evals
    x_lo < at < x_hi (neighbours): linear in x, weight w = (at - x_lo) / (x_hi - x_lo) on eval hi, but only
    if x_hi - x_lo <= (gap + (x_hi - x_lo) / max(1, u_hi - u_lo)) (1 + 1e-9), i.e. the promised gap plus one
    update's cost on the axis (a run evaluates at the first update at or after each promised point, so its evals
    around ``at`` may lie that much wider apart than the promise; 1e-9: float noise). Wider: refused
    (``"gap_exceeded"``). An infinite promised gap (nothing promised) allows no interpolation.
Outside
    ``at`` below the first eval or above the last one (beyond tol): ``"outside"``; never extrapolated.

The promised gap at ``at`` (:func:`promised_gap`) is the width of the promised interval (p_(k-1), p_k] that holds
``at`` (p: the plan's promised eval points on the axis, :meth:`gradprobe.training.plan.EvalSpec.promised_points`).
Blank accuracy cells, a decreasing running total and a run's final eval at a plan budget are the analysis's
concern (:func:`gradprobe.study.reading.read_runs`, :func:`gradprobe.study.reading.load_runs`); the study-folder
check passes a wider ``hit_tol`` and ``gap=None`` (an older ``analysis.json`` recorded no promised gap) on top
(:func:`gradprobe.forecast.analysis_reads._point`). Numpy only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AT_TOL", "promised_gap", "read_point"]

#: Relative tolerance of a point ``at`` on an axis (tokens, device-seconds, FLOPs): an eval within it is at ``at``
AT_TOL = 1e-9


def _at_tol(at: float) -> float:
    """The absolute tolerance of the point ``at`` (axis units): :data:`AT_TOL` relative, at least :data:`AT_TOL`
    (``at`` near 0)."""
    return AT_TOL * max(1.0, abs(at))


def promised_gap(points, at: float) -> float:
    """Width of the promised interval (p_(k-1), p_k] holding ``at`` (axis units; module docstring).

    Parameters
    ----------
    points : sequence of float, shape (promised,)
        The plan's promised eval points on one axis, sorted ascending (axis units).
    at : float
        The point on the axis; a promised point within :func:`_at_tol` of ``at`` holds it.

    Returns
    -------
    float
        p_k - p_(k-1) for the first promised point p_k >= ``at`` - tol; 0 when that is the first point (a run
        evaluates there: no interpolation needed); ``math.inf`` past the last point or with no points (nothing
        promised: :func:`read_point` then interpolates nothing).
    """
    tol = _at_tol(at)
    for k, p in enumerate(points):
        if p >= at - tol:
            return 0.0 if k == 0 else float(p - points[k - 1])
    return math.inf


def read_point(x, updates, at: float, *, gap: float | None, hit_tol: float | None = None) -> dict:
    """Where one run's curve is read at ``at`` (module docstring: the analysis's "Reading a run at a point").

    Parameters
    ----------
    x : array-like, shape (evals,)
        The run's eval coordinates on the axis (axis units: updates, tokens, FLOPs or device-seconds), strictly
        increasing (equal values: the first is read).
    updates : array-like, shape (evals,)
        The update count of each eval (the cost of one update on the axis: (x_hi - x_lo) / (u_hi - u_lo)).
    at : float
        The point on the axis (axis units).
    gap : float or None
        Promised gap at ``at`` (:func:`promised_gap`, axis units; ``math.inf``: nothing promised, no interpolation).
        None: any width is interpolated (the study-folder check of an ``analysis.json`` that recorded no gap).
    hit_tol : float, optional
        Absolute distance (axis units) within which an eval is read as at ``at``; None: the analysis's
        (:func:`_at_tol`, :data:`AT_TOL` relative). The nearest eval within it is read (the first of equally near
        ones).

    Returns
    -------
    dict
        ``status``: ``"exact"``, ``"interpolated"``, ``"gap_exceeded"`` or ``"outside"``; ``rows``: (lo, hi) eval
        indices into ``x`` (lo == hi for ``"exact"``; None when ``"outside"``); ``w``: weight of row hi (the value
        read is (1 - w) y[lo] + w y[hi]; None when outside); ``gap``: x_hi - x_lo (axis units; 0 exact, None
        outside); ``allowed``: the promised gap plus one update's cost (axis units) between two evals, else
        ``gap`` as given (inf when nothing is promised, None when ``gap`` is None).

    Raises
    ------
    ValueError
        ``x`` and ``updates`` are not 1-d arrays of one length, or ``hit_tol`` is negative or NaN (give a
        distance >= 0 in axis units, or None for the analysis's tolerance).
    """
    x, u = np.asarray(x, dtype=np.float64), np.asarray(updates, dtype=np.float64)
    if x.ndim != 1 or x.shape != u.shape:
        raise ValueError(f"read_point needs x and updates of shape (evals,), got shapes {x.shape} and {u.shape}: "
                         "pass one run's eval coordinates and their update counts")
    if hit_tol is not None and not hit_tol >= 0:
        raise ValueError(f"read_point: hit_tol = {hit_tol!r} is no distance; give one >= 0 in axis units, or None "
                         "for the analysis's tolerance (AT_TOL relative)")
    tol = _at_tol(at) if hit_tol is None else float(hit_tol)
    hit = np.flatnonzero(np.abs(x - at) <= tol)
    if hit.size:
        i = int(hit[np.argmin(np.abs(x[hit] - at))])  # argmin: the first of equally near ones
        return {"status": "exact", "rows": (i, i), "w": 0.0, "gap": 0.0, "allowed": gap}
    hi = int(np.searchsorted(x, at))
    if hi == 0 or hi == x.size:
        return {"status": "outside", "rows": None, "w": None, "gap": None, "allowed": gap}
    width = float(x[hi] - x[hi - 1])
    if gap is None:
        allowed, ok = None, True
    else:
        allowed = gap + width / max(1.0, float(u[hi] - u[hi - 1]))  # nothing promised (inf): nothing allowed
        ok = math.isfinite(gap) and width <= allowed * (1 + 1e-9)
    return {"status": "interpolated" if ok else "gap_exceeded", "rows": (hi - 1, hi),
            "w": float((at - x[hi - 1]) / width), "gap": width, "allowed": allowed}
