"""The saved reference curve: a JSON file holding the fit, its eval points and its seed replicates.

Written by :meth:`~gradprobe.forecast.curves.ReferenceCurve.save` and read back, without refitting, by
:meth:`~gradprobe.forecast.curves.ReferenceCurve.load` (the shipped ``gradprobe/data/curves/*.json``).
Format ``gradprobe.reference_curve``, version 1: ``params``, ``status``, ``standard_errors`` (null where
not estimable), ``b_fixed``, ``r0_fixed``, ``rmse``, ``metadata``, ``notes``, ``points`` (``update``,
``accuracy`` in points, ``seed``), ``seed_labels``, ``replicates`` (R0, A, n_mid, B per replicate) and
``replicate_seed_counts``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..outputs import write_text_atomic
from .curve_fit import PARAMETERS, CurveError

__all__ = ["FORMAT", "VERSION", "curve_document", "write_curve", "read_curve_file", "damaged"]

FORMAT = "gradprobe.reference_curve"
VERSION = 1


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
        Missing file, invalid JSON, or a file that is not a reference curve or lacks a field (the
        message names the file and the field).
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
    try:
        pts = d["points"]
        state = {"params": {k: float(d["params"][k]) for k in PARAMETERS}, "status": dict(d["status"]),
                 "standard_errors": {k: (math.inf if v is None else float(v)) for k, v in d["standard_errors"].items()},
                 "b_fixed": d["b_fixed"], "r0_fixed": bool(d["r0_fixed"]), "rmse": float(d["rmse"]),
                 "replicates": np.array(d["replicates"], dtype=np.float64).reshape(-1, 4),
                 "replicate_seed_counts": np.array(d["replicate_seed_counts"], dtype=np.int64)}
        return {"updates": pts["update"], "accuracy": pts["accuracy"], "seeds": pts["seed"], "mode": d["mode"],
                "B": d["b_fixed"], "source": d.get("source", ""), "metadata": d.get("metadata"),
                "notes": d.get("notes", ()), "_state": state}
    except (KeyError, TypeError, ValueError) as e:
        raise damaged(path, e) from None


def damaged(path: Path, e: Exception) -> CurveError:
    """The error of a curve file with a missing or invalid field (a CurveError ``e`` is prefixed with the path)."""
    if isinstance(e, CurveError):
        return CurveError(f"{path}: {e}")
    return CurveError(f"reference curve file {str(path)!r} is damaged: field {e} is missing or invalid; "
                      "rewrite it with ReferenceCurve.save")
