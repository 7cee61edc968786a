"""The saved reference curve: a JSON file holding the fit, its eval points and its seed replicates.

Written by :meth:`~gradprobe.forecast.curves.ReferenceCurve.save` and read back, without refitting, by
:meth:`~gradprobe.forecast.curves.ReferenceCurve.load` (the shipped ``gradprobe/data/curves/*.json``).
Format ``gradprobe.reference_curve``, version 1: ``params``, ``status``, ``standard_errors`` (null where
not estimable), ``b_fixed``, ``r0_fixed``, ``rmse``, ``metadata``, ``notes``, ``points`` (``update``,
``accuracy`` in points, ``seed``), ``seed_labels``, ``replicates`` (R0, A, n_mid, B per replicate) and
``replicate_seed_counts``.

Checked on reading (:func:`read_curve_file`, :func:`check_fit`), before any compute, as calib checks an edited
``fitted`` block: the ``version`` must be :data:`VERSION`; every parameter finite and in the fit's range (R0 and A
in [0, 100] points, n_mid > 0 updates and B in :data:`~.curve_fit.B_BOUNDS`; the replicates' too); and the
``params`` must be what the fit of the ``points`` gives (the model and its fit: :mod:`.curve_fit`): R0 the mean at
update 0 when fixed, B the fixed B when fixed, ``rmse`` the curve's own residual, and no worse than a refit of the
points by more than :data:`RMSE_TOLERANCE`. A file that fails is refused, the message naming the file, the field
and the fix (rebuild it from its source).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..outputs import write_text_atomic
from .curve_fit import B_BOUNDS, PARAMETERS, CurveError, fit_sigmoid, scalerl_sigmoid

__all__ = ["FORMAT", "VERSION", "curve_document", "write_curve", "read_curve_file", "damaged", "check_fit",
           "RMSE_TOLERANCE"]

FORMAT = "gradprobe.reference_curve"
VERSION = 1
#: How much worse (accuracy points of rmse: absolute, plus the same relative) the saved ``params`` may fit the
#: saved ``points`` than a refit of them (scipy releases differ in the optimizer's last digits, ~1e-6).
RMSE_TOLERANCE = 1e-3
#: The fix every refused saved curve names.
REBUILD = ("the file was edited or damaged: rebuild it from its source (ReferenceCurve.from_study / from_metrics / "
           "from_csv / from_trl_state, then .save), or pass --reference-curve default")
#: The valid range of each parameter (:mod:`.curve_fit`; n_mid's lower end is open).
RANGES = {"R0": (0.0, 100.0), "A": (0.0, 100.0), "n_mid": (0.0, math.inf), "B": B_BOUNDS}


def curve_document(curve) -> dict:
    """The JSON-ready content of a saved curve (module docstring) of a fitted ``ReferenceCurve``."""
    return {
        "format": FORMAT, "version": VERSION, "mode": curve.mode, "source": curve.source,
        "model": "ScaleRL sigmoid (Khatri et al. 2025, eq. 1) in updates: R0 + (A - R0) / (1 + (n_mid / n)^B)",
        "params": dict(curve.params), "status": dict(curve.status),
        "standard_errors": {k: (v if math.isfinite(v) else None) for k, v in curve.standard_errors.items()},
        "b_fixed": curve._b_fixed, "r0_fixed": curve._r0_fixed, "rmse": curve.rmse,
        "metadata": curve.metadata, "notes": list(curve.notes),
        "points": {"update": curve.points["update"].tolist(), "accuracy": curve.points["accuracy"].tolist(),
                   "seed": curve.points["seed"].tolist()},
        "seed_labels": list(curve.seed_labels),
        "replicates": curve.replicates.tolist(), "replicate_seed_counts": curve.replicate_seed_counts.tolist(),
    }


def write_curve(curve, path: str | Path) -> Path:
    """Write :func:`curve_document` as strict JSON (atomically: :func:`gradprobe.outputs.write_text_atomic`,
    the parent folder created); returns the path.

    Raises
    ------
    ValueError
        The document holds a NaN or infinite float (nothing is written).
    gradprobe.outputs.OutputDirError
        The write failed (the file is unchanged).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(curve_document(curve), indent=1, allow_nan=False))
    return path


def read_curve_file(path: str | Path) -> dict:
    """The constructor arguments of the curve saved at ``path``: ``updates``, ``accuracy``, ``seeds``,
    ``mode``, ``B``, ``source``, ``metadata``, ``notes`` and ``_state`` (the fit, not redone).

    Raises
    ------
    CurveError
        Missing file, invalid JSON, or a file that is not a reference curve or lacks a field; a ``version``
        other than :data:`VERSION`; a parameter (``params`` or ``replicates``) not finite or out of its range
        (module docstring). The message names the file, the field and the fix. That the params fit the points
        is checked once the curve is built: :func:`check_fit`.
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
        trl = "" if not isinstance(d, dict) else (
            "; it holds a 'log_history': a TRL trainer state, read it with ReferenceCurve.from_trl_state or "
            "--reference-curve" if "log_history" in d else
            "; a TRL trainer state is read as a curve (by --reference-curve, under any file name) when it holds a "
            "'log_history' list, and this file has none")
        raise CurveError(f"{str(path)!r} is not a reference curve (its 'format' is not {FORMAT!r}); write one with "
                         f"ReferenceCurve.save{trl}")
    if d.get("version") != VERSION or isinstance(d.get("version"), bool):
        got = "is missing" if "version" not in d else f"is {d['version']!r}"
        raise CurveError(f"reference curve file {str(path)!r}: field 'version' {got}, and this gradprobe reads "
                         f"version {VERSION} only; rebuild the curve from its source with this gradprobe "
                         "(ReferenceCurve.save), or pass --reference-curve default")
    try:
        pts = d["points"]
        state = {"params": {k: float(d["params"][k]) for k in PARAMETERS}, "status": dict(d["status"]),
                 "standard_errors": {k: (math.inf if v is None else float(v)) for k, v in d["standard_errors"].items()},
                 "b_fixed": d["b_fixed"], "r0_fixed": bool(d["r0_fixed"]), "rmse": float(d["rmse"]),
                 "replicates": np.array(d["replicates"], dtype=np.float64).reshape(-1, 4),
                 "replicate_seed_counts": np.array(d["replicate_seed_counts"], dtype=np.int64)}
        kw = {"updates": pts["update"], "accuracy": pts["accuracy"], "seeds": pts["seed"], "mode": d["mode"],
              "B": d["b_fixed"], "source": d.get("source", ""), "metadata": d.get("metadata"),
              "notes": d.get("notes", ()), "_state": state}
    except (KeyError, TypeError, ValueError) as e:
        raise damaged(path, e) from None
    _check_ranges(path, state)
    return kw


def _bad_value(path, field: str, value, lo: float, hi: float) -> CurveError | None:
    """The error of ``field`` = ``value`` outside [lo, hi] (lo excluded when 0 and hi infinite) or not finite."""
    v = float(value)
    open_lo = lo == 0.0 and math.isinf(hi)
    if math.isfinite(v) and (lo < v if open_lo else lo - 1e-9 <= v) and v <= hi + 1e-9:  # 1e-9: round-off
        return None
    want = "> 0" if open_lo else f"in [{lo:g}, {hi:g}]"
    return CurveError(f"reference curve file {str(path)!r}: field {field} is {v!r}, it must be a finite number {want} "
                      f"(ScaleRL sigmoid, gradprobe.forecast.curve_fit); {REBUILD}")


def _check_ranges(path, state: dict) -> None:
    """Raise the :func:`_bad_value` error of the first parameter (``params``, then ``replicates``) out of range."""
    for k in PARAMETERS:
        err = _bad_value(path, f"params.{k}", state["params"][k], *RANGES[k])
        if err is not None:
            raise err
    for i, rep in enumerate(state["replicates"]):
        for k, v in zip(PARAMETERS, rep):
            err = _bad_value(path, f"replicates[{i}] ({k})", v, *RANGES[k])
            if err is not None:
                raise err


def check_fit(path, curve) -> None:
    """Refuse a saved curve whose ``params`` are not the fit of its ``points`` (module docstring).

    Parameters
    ----------
    path : path
        The file (named by the error).
    curve : ReferenceCurve
        As read from it (:func:`read_curve_file`: its points and the saved fit).

    Raises
    ------
    CurveError
        R0 differs from the mean accuracy at update 0 (when fixed), B from ``b_fixed`` (when fixed), n_mid
        lies outside the fit's bounds, ``rmse`` from the curve's residual over the points, or the curve
        fits its points worse than a refit of them by more than :data:`RMSE_TOLERANCE` (+ the same relative):
        the message names the file, the field and both values.
    """
    p, pts = curve.params, curve.points
    n, y = pts["update"].to_numpy(np.float64), pts["accuracy"].to_numpy(np.float64)
    head = f"reference curve file {str(path)!r}"
    r0 = float(y[n == 0].mean()) if curve._r0_fixed and (n == 0).any() else None
    if r0 is not None and not math.isclose(p["R0"], r0, rel_tol=1e-9, abs_tol=1e-6):
        raise CurveError(f"{head}: params.R0 is {p['R0']!r} but the mean accuracy of its points at update 0 is {r0!r} "
                         f"(R0 is fixed there); {REBUILD}")
    b = curve._b_fixed
    if b is not None and not math.isclose(p["B"], float(b), rel_tol=1e-9):
        raise CurveError(f"{head}: params.B is {p['B']!r} but b_fixed is {b!r}; {REBUILD}")
    pos = n[n > 0]
    lo, hi = float(pos.min()) / 100.0, float(pos.max()) * 100.0
    if not lo * (1 - 1e-6) <= p["n_mid"] <= hi * (1 + 1e-6):
        raise CurveError(f"{head}: params.n_mid is {p['n_mid']!r}, outside the fit's range [{lo:g}, {hi:g}] updates "
                         f"(1/100 of the first eval's update count to 100x the last); {REBUILD}")
    rmse = float(np.sqrt(np.mean((scalerl_sigmoid(n, **p) - y) ** 2)))
    if not math.isclose(rmse, curve.rmse, rel_tol=1e-6, abs_tol=1e-6):
        raise CurveError(f"{head}: field rmse is {curve.rmse!r} but the curve through its params has rmse {rmse!r} "
                         f"against its points: params or points were changed; {REBUILD}")
    refit = fit_sigmoid(n, y, r0=r0 if curve._r0_fixed else None, b_fixed=b)
    best = float(np.sqrt(2.0 * refit.cost / n.size))
    if rmse > best * (1 + RMSE_TOLERANCE) + RMSE_TOLERANCE:
        raise CurveError(f"{head}: its params do not fit its points: rmse {rmse:.4g} points, where a refit of the "
                         f"points gives {best:.4g} (params {_short(p)} vs refit {_short(refit.params)}); {REBUILD}")


def _short(p: dict) -> str:
    return ", ".join(f"{k} {p[k]:.4g}" for k in PARAMETERS)


def damaged(path: Path, e: Exception) -> CurveError:
    """The error of a curve file with a missing or invalid field (a CurveError ``e`` is prefixed with the path)."""
    if isinstance(e, CurveError):
        return CurveError(f"{path}: {e}")
    return CurveError(f"reference curve file {str(path)!r} is damaged: field {e} is missing or invalid; "
                      "rewrite it with ReferenceCurve.save")
