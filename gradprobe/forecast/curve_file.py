"""The saved reference curve: a JSON file holding the fit, its eval points and its seed replicates.

Written by :meth:`~gradprobe.forecast.curves.ReferenceCurve.save` and read back, without refitting, by
:meth:`~gradprobe.forecast.curves.ReferenceCurve.load` (the shipped ``gradprobe/data/curves/*.json``).
Format ``gradprobe.reference_curve``, version 1: ``params``, ``status``, ``standard_errors`` (null where
not estimable), ``b_fixed``, ``r0_fixed``, ``rmse``, ``metadata``, ``notes``, ``points`` (``update``,
``accuracy`` in points, ``seed``: labels, text), ``seed_labels``, ``replicates`` (R0, A, n_mid, B per replicate) and
``replicate_seed_counts``.

Checked on reading (:func:`read_curve_file`, :func:`check_fit`, :func:`check_replicates`), before any compute, as
calib checks an edited ``fitted`` block:

- every field's type and range (:func:`read_curve_file`): the ``version`` must be :data:`VERSION`; every parameter a
  JSON number, finite and in the fit's range (R0 and A in [0, 100] points, n_mid > 0 updates and B in
  :data:`~.curve_fit.B_BOUNDS`; the replicates' too); ``status`` what the fit writes (:data:`FIT_STATUSES`, or
  ``fixed`` exactly for a fixed parameter) and consistent with ``standard_errors`` (finite >= 0, or null where not
  estimable, for the fitted parameters only); ``r0_fixed`` a bool, true exactly when the points have evals at
  update 0; ``points`` three lists of one length (updates >= 0, accuracy in [0, 100] points, seed labels);
  ``seed_labels`` those of the points; one ``replicate_seed_counts`` row per replicate; and the ``metadata`` keys the
  forecast reads (:data:`METADATA_FIELDS`: the update batch positive integers, ``lr`` finite > 0, ``task`` and
  ``model`` text; each may be null or absent: unknown), and ``metadata.initial_accuracy``, the initial accuracy a
  TRL log was read with (:meth:`_Fields.given_r0`: ``value`` and ``points`` finite in [0, 100] and one the other's
  scale, ``seeds`` labels of the points whose update-0 point it is; null or absent: none given);
- the ``params`` must be what the fit of the ``points`` gives (:func:`check_fit`; the model and its fit:
  :mod:`.curve_fit`): R0 the mean at update 0 when fixed, B the fixed B when fixed, ``rmse`` the curve's own
  residual, and no worse than a refit of the points by more than :data:`RMSE_TOLERANCE`;
- the ``replicates`` must be the seed-bootstrap refits (:func:`check_replicates`): the draws are made again and
  each replicate checked against its resample, a few refitted.

A file that fails is refused in one line naming the file, the field (``params.A``, ``points.update[4]``,
``replicates[3]``, ``metadata.update_prompts``), its value and the fix (rebuild it from its source).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from ..outputs import is_json_number, json_number_float, json_number_text, json_short, write_text_atomic
from .curve_fit import (B_BOUNDS, MODES, PARAMETERS, REPLICATE_SEED, CurveError, fit_needs, fit_sigmoid,
                        fit_statuses, free_parameters, scalerl_sigmoid, seed_bootstrap_draws, sigmoid_params)
from .curve_sources import GIVEN_R0_KEY, TRL_RECOPY, not_utf8, read_source_text, truncated_hint
from .text_files import JSONShapeError, parse_curve_json

__all__ = ["FORMAT", "VERSION", "curve_document", "write_curve", "read_curve_file", "not_json", "damaged",
           "check_fit", "check_replicates", "RMSE_TOLERANCE", "METADATA_FIELDS", "FIT_STATUSES", "SEED_LABEL",
           "seed_label_problem"]

FORMAT = "gradprobe.reference_curve"
VERSION = 1
#: How much worse (accuracy points of rmse: absolute, plus the same relative) the saved ``params`` may fit the
#: saved ``points`` than a refit of them (scipy releases differ in the optimizer's last digits, ~1e-6); the same
#: for a replicate and its resampled points.
RMSE_TOLERANCE = 1e-3
#: How to fix a refused saved curve.
REBUILD_HOW = ("rebuild it from its source (ReferenceCurve.from_study / from_metrics / from_csv / from_trl_state, "
               "then .save), or pass --reference-curve default")
#: The fix every refused saved curve names.
REBUILD = "the file was edited or damaged: " + REBUILD_HOW
#: The valid range of each parameter (:mod:`.curve_fit`; n_mid's lower end is open).
RANGES = {"R0": (0.0, 100.0), "A": (0.0, 100.0), "n_mid": (0.0, math.inf), "B": B_BOUNDS}
#: The status the fit gives a fitted parameter (a fixed one's is ``fixed``; :mod:`.curve_fit`).
FIT_STATUSES = ("identified", "not_identified", "at_bound")
#: The ``metadata`` keys the forecast reads (:mod:`.probe_input`, :mod:`.budget_forecast`), each null (unknown) or
#: of its kind: ``count`` a positive integer, ``rate`` a finite number > 0, ``text`` a string.
METADATA_FIELDS = {
    "update_prompts": ("count", "the prompts of one update of the run the curve comes from: the curve's x axis is in "
                                "such updates"),
    "update_group": ("count", "the completions per prompt of one update of the run the curve comes from"),
    "lr": ("rate", "the learning rate of the run the curve comes from"),
    "task": ("text", "the task the curve was trained on"),
    "model": ("text", "the model the curve was trained from"),
}
#: Replicates refitted on load (:func:`check_replicates`): the first ones, and as many more chosen by a hash of
#: the replicates.
REFIT_FIRST, REFIT_HASHED = 3, 3


def curve_document(curve) -> dict:
    """The JSON-ready content of a saved curve (module docstring) of a fitted ``ReferenceCurve``.

    Raises
    ------
    CurveError
        A seed label that is not one (:func:`seed_label_problem`: empty or whitespace-only text, from
        ``ReferenceCurve(seeds=[""])``): :func:`read_curve_file` would refuse the file, so it is not written.
    """
    for label in curve.seed_labels:
        if seed_label_problem(label) is not None:
            raise CurveError(f"seed label {json_short(label)} of the curve is blank: a saved curve's seed label is "
                             f"{SEED_LABEL_TEXT}; give each seed such a label (ReferenceCurve's seeds=), then save")
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
        The document holds a NaN or infinite float (nothing is written); a blank seed label (a ``CurveError``,
        :func:`curve_document`; nothing is written).
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

    Every field is checked for its type and range (module docstring) before anything is built: a JSON number where
    a number belongs (not text, not true/false), the lengths of ``points``' lists, ``replicates`` and
    ``replicate_seed_counts`` matching, ``status`` and ``standard_errors`` as the fit writes them, ``r0_fixed``
    true exactly when the points have evals at update 0, every seed label (``points.seed``, ``seed_labels``) text with
    a visible character (:func:`seed_label_problem`), ``seed_labels`` those of the points, and the ``metadata`` the
    forecast reads (:data:`METADATA_FIELDS`).

    Raises
    ------
    CurveError
        Missing file, invalid JSON (a key given twice in one object or nesting too deep included:
        :func:`~.text_files.parse_curve_json`), or a file that is not a reference curve or lacks a field; a ``version``
        other than :data:`VERSION`; a field of the wrong type or out of its range (a parameter of ``params`` or
        ``replicates`` not finite or outside the fit's range, ...). One line naming the file, the field (``params.A``,
        ``points.update[4]``, ``replicates[3]``, ``metadata.lr``), its value and the fix. That the params fit the
        points, and the replicates their resampled points, is checked once the curve is built: :func:`check_fit`,
        :func:`check_replicates`.
    """
    path = Path(path)
    if not path.is_file():
        raise CurveError(f"reference curve file {str(path)!r} not found; write one with ReferenceCurve.save or "
                         "pass a study folder, metrics.jsonl, CSV or trainer_state.json")
    try:
        d = parse_curve_json(read_source_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError, JSONShapeError) as e:
        raise not_json(path, e) from None
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
    return _Fields(path).read(d)


def _show(value) -> str:
    """A JSON value as the messages quote it: a number as Python's repr (an integer too large for a float: its
    digits shortened and counted, :func:`~gradprobe.outputs.json_number_text`), anything else as JSON (shortened),
    text marked as such."""
    if is_json_number(value):
        text = repr(value)
        return json_number_text(value, text if len(text) <= 60 else text[:57] + "...")
    if isinstance(value, str):
        return f"{json_short(value)} (text)"
    return json_short(value)




#: What a seed label is: what :class:`~.curves.ReferenceCurve` makes of a seed (``str(seed)``) and every source
#: gives (a study's or a ``metrics.jsonl`` run's integer seed, ``"0"``; a TRL file's index; a CSV seed cell, an
#: integer or a run name, a blank cell being no eval).
SEED_LABEL_TEXT = ("text with a visible character (the seed's label: the run's seed as text, e.g. \"0\", or its run "
                   "name)")
#: The predicate of a refused seed label (:func:`seed_label_problem`).
SEED_LABEL = "it must be " + SEED_LABEL_TEXT


def seed_label_problem(value) -> str | None:
    """Why ``value`` is not a seed label of a saved curve (:data:`SEED_LABEL`): None for text holding a character
    other than whitespace; else the predicate of the refusal (``"it must be text with a visible character ..."``). A
    JSON number, a boolean, null, a list or an object is not one (the writer writes every label as text), nor is
    empty or whitespace-only text (no source gives one, and a reader could not tell it from a missing seed)."""
    if isinstance(value, str) and value.strip():
        return None
    return SEED_LABEL


def _as_float(value) -> float:
    """A JSON number as a float (:func:`~gradprobe.outputs.json_number_float`: an integer too large for one is +-inf);
    anything else: NaN."""
    return json_number_float(value) if is_json_number(value) else math.nan


def _plural(k: int, what: str) -> str:
    if k == 1:
        return f"{k} {what}"
    return f"{k} {what[:-1]}ies" if what.endswith("y") else f"{k} {what}s"


class _Fields:
    """The field checks of :func:`read_curve_file`, each error one line naming the file and the field."""

    def __init__(self, path: Path):
        self.path = path

    def bad(self, field: str, problem: str) -> CurveError:
        """A value error: the field holds a value it may not hold (its type is right)."""
        return CurveError(f"reference curve file {str(self.path)!r}: field {field} {problem}; {REBUILD}")

    def damaged(self, field: str, problem: str) -> CurveError:
        """A structural error: the field is missing or of the wrong kind."""
        return CurveError(f"reference curve file {str(self.path)!r} is damaged: field {field} {problem}; "
                          f"{REBUILD_HOW}")

    # ------------------------------------------------------------------ values
    def number(self, field: str, value, lo: float, hi: float, *, open_lo: bool = False, why: str = "",
               slack: float = 1e-9) -> float:
        """``value`` as a float: a JSON number, finite, in [lo, hi] (lo excluded when ``open_lo``; ``slack``: the
        round-off allowed at a parameter's bound)."""
        v = _as_float(value) + 0.0  # -0.0 (``-1e-400`` in the file) is read as 0.0, as every curve source reads it
        if math.isfinite(v) and (lo < v if open_lo else lo - slack <= v) and v <= hi + slack:
            return v
        if math.isinf(hi):
            want = f"> {lo:g}" if open_lo else f">= {lo:g}"
        else:
            want = f"in [{lo:g}, {hi:g}]"
        shown = json_number_text(value, repr(v)) if is_json_number(value) else _show(value)
        raise self.bad(field, f"is {shown}, it must be a finite number {want}{why}")

    def obj(self, field: str, value, what: str) -> dict:
        if not isinstance(value, dict):
            raise self.damaged(field, f"is {_show(value)}, it must be an object ({what})")
        return value

    def array(self, field: str, value, what: str) -> list:
        if not isinstance(value, list):
            raise self.damaged(field, f"is {_show(value)}, it must be a list ({what})")
        return value

    def key(self, d: dict, name: str, field: str):
        if name not in d:
            raise self.damaged(field, "is missing")
        return d[name]

    def seed_label(self, field: str, value) -> str:
        """``value`` when it is a seed label the writer writes (:func:`seed_label_problem`), else raise naming
        ``field``: a non-text value as a damaged field, blank text as an edited one."""
        problem = seed_label_problem(value)
        if problem is None:
            return value
        if isinstance(value, str):
            raise self.bad(field, f"is {json_short(value)}, {problem}")
        raise self.damaged(field, f"is {_show(value)}, {problem}")

    # ------------------------------------------------------------------ the file
    def read(self, d: dict) -> dict:
        for name in ("mode", "params", "status", "standard_errors", "b_fixed", "r0_fixed", "rmse", "points",
                     "replicates", "replicate_seed_counts"):
            self.key(d, name, name)
        mode = d["mode"]
        if not isinstance(mode, str) or mode not in MODES:
            raise self.bad("mode", f"is {json_short(mode)}, it must be one of {', '.join(map(repr, MODES))}")
        source, notes = d.get("source", ""), d.get("notes", [])
        if not isinstance(source, str):
            raise self.damaged("source", f"is {_show(source)}, it must be text (where the points came from)")
        if not isinstance(notes, list) or not all(isinstance(x, str) for x in notes):
            i = None if not isinstance(notes, list) else next(i for i, x in enumerate(notes) if not isinstance(x, str))
            field = "notes" if i is None else f"notes[{i}]"
            raise self.damaged(field, f"is {_show(notes if i is None else notes[i])}, it must be "
                               + ("a list of texts" if i is None else "text"))
        params = self.params(d["params"])
        b_fixed = None if d["b_fixed"] is None else self.number(
            "b_fixed", d["b_fixed"], *B_BOUNDS, why=" (the fixed steepness B), or null when B was fitted")
        if b_fixed is not None and not math.isclose(params["B"], b_fixed, rel_tol=1e-9):
            raise self.bad("params.B", f"is {params['B']!r} but b_fixed is {b_fixed!r} (B is fixed at b_fixed)")
        r0_fixed = d["r0_fixed"]
        if not isinstance(r0_fixed, bool):
            raise self.damaged("r0_fixed", f"is {_show(r0_fixed)}, it must be true or false (whether R0 is the mean "
                                           "of the evals at update 0)")
        rmse = self.number("rmse", d["rmse"], 0.0, math.inf, why=" (accuracy points)", slack=0.0)
        n, y, seeds = self.points(d["points"], r0_fixed, b_fixed)
        labels = sorted(set(seeds), key=lambda s: (len(s), s))  # ReferenceCurve.seed_labels
        if "seed_labels" in d:
            for i, s in enumerate(self.array("seed_labels", d["seed_labels"], "each seed of points.seed once")):
                self.seed_label(f"seed_labels[{i}]", s)
        if "seed_labels" in d and d["seed_labels"] != labels:
            raise self.bad("seed_labels", f"is {json_short(d['seed_labels'])} but the points' seeds are "
                                          f"{json_short(labels)} "
                                          "(it lists each seed of points.seed once, in this order)")
        free = free_parameters(r0_fixed=r0_fixed, b_fixed=b_fixed)
        status = self.status(d["status"], free, r0_fixed, b_fixed)
        errors = self.standard_errors(d["standard_errors"], free)
        replicates, counts = self.replicates(d["replicates"], d["replicate_seed_counts"], len(labels))
        metadata = self.metadata(d.get("metadata"), n, y, seeds)
        state = {"params": params, "status": status,
                 "standard_errors": {k: (math.inf if v is None else v) for k, v in errors.items()},
                 "b_fixed": b_fixed, "r0_fixed": r0_fixed, "rmse": rmse,
                 "replicates": replicates, "replicate_seed_counts": counts}
        return {"updates": n, "accuracy": y, "seeds": seeds, "mode": mode, "B": b_fixed, "source": source,
                "metadata": metadata, "notes": notes, "_state": state}

    def params(self, value) -> dict:
        p = self.obj("params", value, "R0, A, n_mid and B")
        return {k: self.number(f"params.{k}", self.key(p, k, f"params.{k}"), *RANGES[k], open_lo=k == "n_mid",
                               why=" (ScaleRL sigmoid, gradprobe.forecast.curve_fit)") for k in PARAMETERS}

    def points(self, value, r0_fixed: bool, b_fixed) -> tuple[list, list, list]:
        pts = self.obj("points", value, "update, accuracy and seed: one list each, an entry per eval")
        cols = {k: self.array(f"points.{k}", self.key(pts, k, f"points.{k}"), "one entry per eval")
                for k in ("update", "accuracy", "seed")}
        size = len(cols["update"])
        if size == 0:
            raise self.damaged("points.update", "is empty: a curve needs its eval points")
        for k in ("accuracy", "seed"):
            if len(cols[k]) != size:
                raise self.damaged(f"points.{k}", f"has {_plural(len(cols[k]), 'entry')} but points.update has "
                                                  f"{size} (one per eval)")
        n = [self.number(f"points.update[{i}]", v, 0.0, math.inf, why=" (updates)", slack=0.0)
             for i, v in enumerate(cols["update"])]
        y = [self.number(f"points.accuracy[{i}]", v, 0.0, 100.0, why=" (accuracy points)", slack=0.0)
             for i, v in enumerate(cols["accuracy"])]
        for i, s in enumerate(cols["seed"]):
            self.seed_label(f"points.seed[{i}]", s)
        has_zero = any(v == 0 for v in n)
        if r0_fixed != has_zero:
            raise self.bad("r0_fixed", f"is {json.dumps(r0_fixed)} but the points have "
                           + ("evals at update 0, where the fit fixes R0 at their mean" if has_zero else
                              "no eval at update 0, so the fit fits R0"))
        distinct, free = fit_needs(n, b_fixed)  # as ReferenceCurve refuses too few evals
        if distinct < free:
            raise self.bad("points.update", f"has evals at {distinct} distinct update count(s) > 0, but the fit has "
                                            f"{free} free parameters and needs evals at at least {free}")
        return n, y, list(cols["seed"])

    def status(self, value, free: tuple, r0_fixed: bool, b_fixed) -> dict:
        st = self.obj("status", value, "identified, not_identified, at_bound or fixed per parameter")
        for k in st:
            if k not in PARAMETERS:
                raise self.damaged(f"status.{k}", f"is not a parameter of the curve ({', '.join(PARAMETERS)})")
        why = {"R0": "r0_fixed is true: the points have evals at update 0", "B": f"b_fixed is {b_fixed!r}"}
        for k in PARAMETERS:
            v = self.key(st, k, f"status.{k}")
            if k in free and v not in FIT_STATUSES:
                fitted = " (R0 is fitted: r0_fixed is false)" if k == "R0" else (
                    " (B is fitted: b_fixed is null)" if k == "B" else "")
                raise self.bad(f"status.{k}", f"is {json_short(v)}, it must be one of {', '.join(FIT_STATUSES)}, "
                                              f"what the fit writes{fitted}")
            if k not in free and v != "fixed":
                raise self.bad(f"status.{k}", f"is {json_short(v)}, it must be \"fixed\" ({why[k]})")
        return {k: st[k] for k in PARAMETERS}

    def standard_errors(self, value, free: tuple) -> dict:
        se = self.obj("standard_errors", value, "a standard error, or null, per fitted parameter")
        for k in se:
            if k not in free:
                raise self.damaged(f"standard_errors.{k}", "is given, but " + (
                    f"{k} is fixed, and a fixed parameter has none" if k in PARAMETERS else
                    f"{k!r} is not a parameter of the curve ({', '.join(PARAMETERS)})"))
        out = {}
        for k in free:
            v = self.key(se, k, f"standard_errors.{k}")
            out[k] = None if v is None else self.number(
                f"standard_errors.{k}", v, 0.0, math.inf, why=", or null where the fit could not estimate it",
                slack=0.0)
        return out

    def replicates(self, value, counts_value, n_seeds: int) -> tuple[np.ndarray, np.ndarray]:
        reps = self.array("replicates", value, "[R0, A, n_mid, B] per seed-bootstrap replicate")
        counts = self.array("replicate_seed_counts", counts_value, "per replicate, how many times each seed was drawn")
        if n_seeds < 2 and reps:
            raise self.bad("replicates", f"has {_plural(len(reps), 'entry')}, but a curve of one seed has no "
                                         "seed-bootstrap replicates (an empty list)")
        if len(counts) != len(reps):
            raise self.damaged("replicate_seed_counts", f"has {_plural(len(counts), 'row')} but replicates has "
                                                        f"{len(reps)} (one row per replicate)")
        out = np.zeros((len(reps), 4))
        for i, rep in enumerate(reps):
            rep = self.array(f"replicates[{i}]", rep, "R0, A, n_mid, B")
            if len(rep) != 4:
                raise self.damaged(f"replicates[{i}]", f"has {_plural(len(rep), 'value')}, it must have 4 (R0, A, "
                                                       "n_mid, B)")
            for j, (k, v) in enumerate(zip(PARAMETERS, rep)):
                out[i, j] = self.number(f"replicates[{i}] ({k})", v, *RANGES[k], open_lo=k == "n_mid",
                                        why=" (ScaleRL sigmoid, gradprobe.forecast.curve_fit)")
        rows = np.zeros((len(counts), n_seeds), dtype=np.int64)
        for i, row in enumerate(counts):
            row = self.array(f"replicate_seed_counts[{i}]", row, "how many times each seed was drawn")
            if len(row) != n_seeds:
                raise self.damaged(f"replicate_seed_counts[{i}]", f"has {_plural(len(row), 'entry')}, it must have "
                                   f"{n_seeds} (one per seed of seed_labels)")
            for j, c in enumerate(row):
                if not (is_json_number(c) and 0 <= c <= n_seeds and float(c).is_integer()):
                    raise self.bad(f"replicate_seed_counts[{i}][{j}]", f"is {_show(c)}, it must be an integer in "
                                   f"[0, {n_seeds}] (how many times that seed was drawn)")
                rows[i, j] = int(c)
            if rows[i].sum() != n_seeds:
                raise self.bad(f"replicate_seed_counts[{i}]", f"is {row} and sums to {int(rows[i].sum())}, but each "
                                                              f"replicate draws {n_seeds} seeds (as many as the curve "
                                                              "has)")
        return out, rows

    def metadata(self, value, n: list, y: list, seeds: list) -> dict:
        """The metadata (null: none), with every key the forecast reads checked (:data:`METADATA_FIELDS`), and the
        record of an initial accuracy given as R0 (:meth:`given_r0`) against the points (``n`` updates, ``y``
        accuracy points, ``seeds`` labels: one entry per eval)."""
        if value is None:
            return {}
        meta = self.obj("metadata", value, "what the curve was trained with, e.g. update_prompts, update_group, lr")
        for k, (kind, what) in METADATA_FIELDS.items():
            v = meta.get(k)
            if v is None:
                continue
            if kind == "count":
                ok = math.isfinite(_as_float(v)) and v >= 1 and float(v).is_integer()
                want = "a positive integer"
            elif kind == "rate":
                ok = math.isfinite(_as_float(v)) and v > 0
                want = "a finite number > 0"
            else:
                ok = isinstance(v, str)
                want = "text"
            if not ok:
                raise self.bad(f"metadata.{k}", f"is {_show(v)}, it must be {want} ({what}) or null if unknown")
        self.given_r0(meta.get(GIVEN_R0_KEY), n, y, seeds)
        return meta

    def given_r0(self, record, n: list, y: list, seeds: list) -> None:
        """Refuse a ``metadata.initial_accuracy`` record (:data:`~.curve_sources.GIVEN_R0_KEY`: the initial accuracy
        a TRL log was read with, the update-0 point of the seeds it names; null or absent: none) that is not what
        :meth:`~.curves.ReferenceCurve.from_trl_state` writes: ``value`` a finite number in [0, 100] (as given, a
        fraction or points), ``points`` the same in accuracy points (``value`` or 100 x ``value``), ``seeds`` a
        non-empty list of the curve's seed labels, each with its update-0 point(s) equal to ``points``. ``n``, ``y``,
        ``seeds``: the points' updates, accuracies (points) and labels, one entry per eval."""
        if record is None:
            return
        field = f"metadata.{GIVEN_R0_KEY}"
        r = self.obj(field, record, "value, points and seeds of the initial accuracy given as R0; or null: none")
        value = self.number(f"{field}.value", self.key(r, "value", f"{field}.value"), 0.0, 100.0, slack=0.0,
                            why=" (the initial accuracy given: a fraction in [0, 1] or points in [0, 100])")
        points = self.number(f"{field}.points", self.key(r, "points", f"{field}.points"), 0.0, 100.0, slack=0.0,
                             why=" (the initial accuracy given, in accuracy points)")
        if not any(math.isclose(points, x, rel_tol=1e-9, abs_tol=1e-9) for x in (value, 100.0 * value)):
            raise self.bad(f"{field}.value", f"is {value!r} but {field}.points is {points!r}: the value given is those "
                                              "points, or a hundredth of them (a fraction)")
        labels = self.array(f"{field}.seeds", self.key(r, "seeds", f"{field}.seeds"),
                            "the labels of the seeds whose update-0 point is the value given")
        if not labels:
            raise self.bad(f"{field}.seeds", "is [], it must list the seeds whose update-0 point is the value given")
        for i, s in enumerate(labels):
            at_zero = [a for u, a, lab in zip(n, y, seeds) if u == 0 and lab == s]
            if not isinstance(s, str) or s not in seeds:
                shown = json_short(s) if isinstance(s, str) else _show(s)
                raise self.bad(f"{field}.seeds[{i}]", f"is {shown}, it must be a seed label of points.seed "
                                                      f"({json_short(sorted(set(seeds), key=lambda x: (len(x), x)))})")
            if not at_zero:
                raise self.bad(f"{field}.seeds[{i}]", f"is {json_short(s)}, a seed without a point at update 0 "
                                                      "(the value given is its update-0 point)")
            off = [a for a in at_zero if not math.isclose(a, points, rel_tol=1e-9, abs_tol=1e-9)]
            if off:
                raise self.bad(f"{field}.seeds[{i}]", f"is {json_short(s)}, whose point at update 0 is {off[0]!r}, "
                                                      f"not {field}.points {points!r} (the value given)")


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
        fits its points worse than a refit of them by more than :data:`RMSE_TOLERANCE` (+ the same relative);
        a fitted parameter's ``status`` the fit would not give it with these params and standard errors
        (``identified`` with none, or one above its scale, ``at_bound`` off its bounds, ...): the message names
        the file, the field and both values.
    """
    p, pts = curve.params, curve.points
    n, y = pts["update"].to_numpy(np.float64), pts["accuracy"].to_numpy(np.float64)
    head = f"reference curve file {str(path)!r}"
    r0 = float(y[n == 0].mean()) if curve._r0_fixed and (n == 0).any() else None
    if r0 is not None and not math.isclose(p["R0"], r0, rel_tol=1e-9, abs_tol=1e-6):
        raise CurveError(f"{head}: field params.R0 is {p['R0']!r} but the mean accuracy of its points at update 0 is "
                         f"{r0!r} "
                         f"(R0 is fixed there); {REBUILD}")
    b = curve._b_fixed
    if b is not None and not math.isclose(p["B"], float(b), rel_tol=1e-9):
        raise CurveError(f"{head}: field params.B is {p['B']!r} but b_fixed is {b!r}; {REBUILD}")
    pos = n[n > 0]
    lo, hi = float(pos.min()) / 100.0, float(pos.max()) * 100.0
    if not lo * (1 - 1e-6) <= p["n_mid"] <= hi * (1 + 1e-6):
        raise CurveError(f"{head}: field params.n_mid is {p['n_mid']!r}, outside the fit's range [{lo:g}, {hi:g}] "
                         "updates "
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
    _check_status(path, curve)


def _check_status(path, curve) -> None:
    """Refuse a fitted parameter's ``status`` that the fit would not give it with these params and standard errors.

    The rule is the fit's own (:func:`~.curve_fit.fit_statuses`: ``at_bound`` on a bound of the fit's range,
    ``identified`` a finite standard error below the parameter's scale, ``|A - R0|`` for A and R0, n_mid for n_mid,
    B for B, else ``not_identified``), applied within the round-off of the saved values: a parameter within 2e-6 of
    the range's width of a bound (the fit's test is 1e-6) may be on it or not, and the scale may be 1e-9 (relative)
    larger or smaller, so a status the rule gives either way is accepted. An ``at_bound`` parameter has no
    standard error (null: :func:`~.curve_fit.fit_sigmoid` estimates none on a bound)."""
    params, n = curve.params, curve.points["update"].to_numpy(np.float64)
    pos = n[n > 0]
    lo_n, hi_n = float(pos.min()), float(pos.max())
    gain = abs(params["A"] - params["R0"])
    scale = {"A": gain, "R0": gain, "B": params["B"], "n_mid": params["n_mid"]}  # se(ln n_mid) < 1
    bounds = {"A": (0.0, 100.0), "R0": (0.0, 100.0), "B": B_BOUNDS,
              "n_mid": (math.log(lo_n / 100.0), math.log(hi_n * 100.0))}
    names, ses = list(curve.standard_errors), curve.standard_errors
    near = []  # within round-off of a bound (the fit's on_bound: 1e-6 of the width)
    for k in names:
        x, (lo, hi) = (math.log(params[k]) if k == "n_mid" else params[k]), bounds[k]
        near.append(min(abs(x - lo), abs(x - hi)) <= 2e-6 * (hi - lo))
    given = {k: set() for k in names}  # the statuses the fit's rule gives within round-off
    for on_bound in ([False] * len(names), near):
        for slack in (1 - 1e-9, 1 + 1e-9):
            slacked = {k: scale[k] * slack for k in names}
            for k, st in fit_statuses(names, on_bound, ses, slacked, r0=None, b_fixed=None).items():
                given[k].add(st)
    head = f"reference curve file {str(path)!r}"
    for k, se in ses.items():
        st, shown = curve.status[k], "null" if math.isinf(se) else repr(se)
        problem = None
        if st == "at_bound" and st not in given[k]:
            problem = f"is \"at_bound\" but params.{k} {params[k]!r} is not on a bound of the fit's range"
        elif st == "at_bound" and math.isfinite(se):
            problem = f"is \"at_bound\" but standard_errors.{k} is {shown}: the fit estimates none there (null)"
        elif st == "identified" and st not in given[k]:
            problem = (f"is \"identified\" but standard_errors.{k} is {shown}: identified needs a standard error "
                       f"below {scale[k]:.4g}, the parameter's scale")
        elif st == "not_identified" and st not in given[k]:
            problem = (f"is \"not_identified\" but standard_errors.{k} {shown} is below {scale[k]:.4g}, the "
                       "parameter's scale: the fit marks that " + ("at_bound or " if "at_bound" in given[k] else "")
                       + "identified")
        if problem:
            raise CurveError(f"{head}: field status.{k} {problem} (gradprobe.forecast.curve_fit); {REBUILD}")


def check_replicates(path, curve) -> None:
    """Refuse a saved curve whose seed-bootstrap ``replicates`` are not the refits of its resampled points.

    The resampled seed sets are deterministic (:func:`~.curve_fit.fit_seed_replicates`: ``numpy.random.PCG64``
    of :data:`~.curve_fit.REPLICATE_SEED`, draws with too few distinct evals left out), so they are drawn again.
    For every replicate (cheap): its ``replicate_seed_counts`` row is the draw's; R0 the mean of the resample's
    evals at update 0 when R0 is fixed (the main fit's R0 when it has none); B ``b_fixed`` when B is fixed; n_mid in
    the fit's bounds for the resample; and it fits its resampled points no worse than the start of its refit (the
    main fit's params: the optimizer only improves on its start). Then :data:`REFIT_FIRST` replicates and
    :data:`REFIT_HASHED` more (chosen by a hash of the replicates) are refitted, and each must fit its resampled
    points no worse than its refit by more than :data:`RMSE_TOLERANCE` (+ the same relative). About 20 ms for the
    shipped curve (200 replicates of 36 points), most of it the refits.

    Parameters
    ----------
    path : path
        The file (named by the error).
    curve : ReferenceCurve
        As read from it (:func:`read_curve_file`; :func:`check_fit` passed).

    Raises
    ------
    CurveError
        The first replicate that fails, naming the file, the field (``replicate_seed_counts[i]``,
        ``replicates[i]``), both values and the fix.
    """
    reps, counts, labels = curve.replicates, curve.replicate_seed_counts, curve.seed_labels
    if len(reps) == 0:
        return
    head = f"reference curve file {str(path)!r}"
    p, r0_fixed, b_fixed = curve.params, curve._r0_fixed, curve._b_fixed
    pts = curve.points
    seed_of = pts["seed"].map({lab: i for i, lab in enumerate(labels)}).to_numpy(np.int64)
    n, y = pts["update"].to_numpy(np.float64), pts["accuracy"].to_numpy(np.float64)
    positive = [np.unique(n[(seed_of == i) & (n > 0)]) for i in range(len(labels))]
    draws = _redrawn(head, counts, positive, need=len(free_parameters(r0_fixed=r0_fixed, b_fixed=b_fixed)))
    onehot = np.eye(len(labels))[seed_of]  # (points, seeds)
    r0 = _resample_r0(counts, onehot, n, y, p["R0"])
    _check_fixed(head, reps, counts, r0 if r0_fixed else None, b_fixed)
    lo_n, hi_n = _resample_update_range(counts, positive)
    _check_n_mid(head, reps, lo_n, hi_n)
    start = _refit_starts(reps, p, r0 if r0_fixed else None, b_fixed, lo_n, hi_n)
    saved, begin = _resample_rmse(reps, n, y, onehot, counts), _resample_rmse(start, n, y, onehot, counts)
    bad = np.flatnonzero(saved > begin * (1 + RMSE_TOLERANCE) + RMSE_TOLERANCE)
    if bad.size:
        j = int(bad[0])
        raise CurveError(f"{head}: field replicates[{j}] does not fit its resampled points (replicate_seed_counts[{j}]"
                         f" = {counts[j].tolist()}): rmse {saved[j]:.4g} points, worse than the {begin[j]:.4g} of the "
                         f"main fit's params its refit starts from ({_short(dict(zip(PARAMETERS, reps[j])))}); "
                         f"{REBUILD}")
    for j in _refitted(reps, counts):
        take = np.concatenate([np.flatnonzero(seed_of == i) for i in draws[j]])
        refit = fit_sigmoid(n[take], y[take], r0=float(r0[j]) if r0_fixed else None, b_fixed=b_fixed, start=p)
        best = float(np.sqrt(2.0 * refit.cost / take.size))
        if saved[j] > best * (1 + RMSE_TOLERANCE) + RMSE_TOLERANCE:
            raise CurveError(f"{head}: field replicates[{j}] does not fit its resampled points (replicate_seed_counts"
                             f"[{j}] = {counts[j].tolist()}): rmse {saved[j]:.4g} points, where its refit gives "
                             f"{best:.4g} (replicate {_short(dict(zip(PARAMETERS, reps[j])))} vs refit "
                             f"{_short(refit.params)}); {REBUILD}")


def _resample_r0(counts: np.ndarray, onehot: np.ndarray, n: np.ndarray, y: np.ndarray, r0_main: float) -> np.ndarray:
    """Each resample's mean accuracy at update 0 (points, shape (replicates,)): ``counts`` (replicates, seeds) of
    the seeds' points (``onehot`` (points, seeds), updates ``n`` and accuracies ``y``, shape (points,)); the main
    fit's R0 for a resample without an eval at update 0."""
    zero = (n == 0).astype(np.float64)
    at_zero = counts @ (onehot.T @ zero)  # evals at update 0 of each resample
    sum_zero = counts @ (onehot.T @ (zero * y))
    return np.where(at_zero > 0, sum_zero / np.maximum(at_zero, 1), r0_main)


def _resample_update_range(counts: np.ndarray, positive: list) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) eval above update 0 of each resample (shape (replicates,) each): over the seeds drawn
    (``counts`` (replicates, seeds) > 0) of their distinct updates above 0 (``positive``, one sorted array per
    seed; a seed may hold only its update-0 eval)."""
    drawn_pos = counts > 0
    has_pos = np.array([v.size > 0 for v in positive])
    first = np.array([v[0] if v.size else np.inf for v in positive])
    last = np.array([v[-1] if v.size else -np.inf for v in positive])
    lo_n = np.where(drawn_pos & has_pos, first, np.inf).min(axis=1)  # each resample's evals > 0 (at least `need`)
    hi_n = np.where(drawn_pos & has_pos, last, -np.inf).max(axis=1)
    return lo_n, hi_n


def _refit_starts(reps: np.ndarray, p: dict, r0: np.ndarray | None, b_fixed, lo_n: np.ndarray,
                  hi_n: np.ndarray) -> np.ndarray:
    """The start of each replicate's refit, shape of ``reps`` (replicates, 4: R0, A, n_mid, B): the main fit's
    ``p`` clipped into the resample's bounds as :func:`~.curve_fit.fit_sigmoid` with ``start=params`` clips it
    (n_mid in [``lo_n`` / 100, ``hi_n`` x 100]); R0 the resample's ``r0`` when fixed (None: free), B ``b_fixed``
    when fixed."""
    lb_log, ub_log = np.log(lo_n / 100.0), np.log(hi_n * 100.0)
    inset = 1e-9 * (ub_log - lb_log)
    start = np.empty_like(reps)
    start[:, 0] = r0 if r0 is not None else np.clip(p["R0"], 1e-7, 100.0 - 1e-7)
    start[:, 1] = np.clip(p["A"], 1e-7, 100.0 - 1e-7)
    start[:, 2] = np.exp(np.clip(math.log(p["n_mid"]), lb_log + inset, ub_log - inset))
    b_inset = 1e-9 * (B_BOUNDS[1] - B_BOUNDS[0])
    start[:, 3] = float(b_fixed) if b_fixed is not None else np.clip(p["B"], B_BOUNDS[0] + b_inset,
                                                                     B_BOUNDS[1] - b_inset)
    return start


def _resample_rmse(params: np.ndarray, n: np.ndarray, y: np.ndarray, onehot: np.ndarray,
                   counts: np.ndarray) -> np.ndarray:
    """The rmse (points, shape (replicates,)) of each row of ``params`` (replicates, 4) against its resample's
    points: the points of seed i counted ``counts[j, i]`` times (``onehot`` (points, seeds))."""
    size = counts @ onehot.sum(axis=0)  # points of each resample
    sq = (sigmoid_params(np.broadcast_to(n, (len(params), n.size)), params) - y) ** 2
    return np.sqrt(((sq @ onehot) * counts).sum(axis=1) / size)


def _check_fixed(head: str, reps: np.ndarray, counts: np.ndarray, r0: np.ndarray | None, b_fixed) -> None:
    """Raise naming the first replicate whose fixed R0 is not ``r0`` (its resample's mean at update 0, shape
    (replicates,); None: R0 free) or whose B is not ``b_fixed`` (None: B free)."""
    if r0 is not None:
        bad = np.flatnonzero(~np.isclose(reps[:, 0], r0, rtol=1e-9, atol=1e-6))
        if bad.size:
            j = int(bad[0])
            raise CurveError(f"{head}: field replicates[{j}] (R0) is {float(reps[j, 0])!r} but the mean accuracy at "
                             f"update 0 of its resampled seeds (replicate_seed_counts[{j}] = {counts[j].tolist()}) is "
                             f"{float(r0[j])!r} (R0 is fixed there); {REBUILD}")
    if b_fixed is not None:
        bad = np.flatnonzero(~np.isclose(reps[:, 3], float(b_fixed), rtol=1e-9, atol=0.0))
        if bad.size:
            j = int(bad[0])
            raise CurveError(f"{head}: field replicates[{j}] (B) is {float(reps[j, 3])!r} but b_fixed is {b_fixed!r} "
                             f"(B is fixed in every replicate); {REBUILD}")


def _check_n_mid(head: str, reps: np.ndarray, lo_n: np.ndarray, hi_n: np.ndarray) -> None:
    """Raise naming the first replicate whose n_mid lies outside its fit's bounds: 1/100 of its resample's first
    eval above update 0 (``lo_n``, shape (replicates,)) to 100x its last (``hi_n``)."""
    bad = np.flatnonzero((reps[:, 2] < lo_n / 100.0 * (1 - 1e-6)) | (reps[:, 2] > hi_n * 100.0 * (1 + 1e-6)))
    if bad.size:
        j = int(bad[0])
        raise CurveError(f"{head}: field replicates[{j}] (n_mid) is {float(reps[j, 2])!r}, outside the fit's range "
                         f"[{lo_n[j] / 100:g}, {hi_n[j] * 100:g}] updates of its resampled seeds; {REBUILD}")


def _redrawn(head: str, counts: np.ndarray, positive: list, *, need: int) -> list[np.ndarray]:
    """The seed-bootstrap draws of :func:`~.curve_fit.fit_seed_replicates` made again (its generator,
    :func:`~.curve_fit.seed_bootstrap_draws`: a draw with fewer than ``need`` distinct evals above update 0 of the
    seeds' ``positive`` is left out), one per row of ``counts`` (replicates, seeds); raise naming the first row that
    is not its draw's."""
    k, s = counts.shape
    stream = seed_bootstrap_draws(positive, need)  # the draws fit_seed_replicates made, in its order
    draws, tries = [], 0
    while len(draws) < k and tries < 100 * k + 1000:
        draw, refittable = next(stream)
        tries += 1
        if refittable:
            draws.append(draw)
    if len(draws) < k:
        raise CurveError(f"{head}: field replicates has {k} entries, but the seed bootstrap draws only {len(draws)} "
                         f"refittable resamples in {tries} draws; {REBUILD}")
    drawn = np.array([np.bincount(d, minlength=s) for d in draws], dtype=np.int64)
    wrong = np.flatnonzero((drawn != counts).any(axis=1))
    if wrong.size:
        j = int(wrong[0])
        raise CurveError(f"{head}: field replicate_seed_counts[{j}] is {counts[j].tolist()} but the seed bootstrap "
                         f"(numpy PCG64({REPLICATE_SEED}), gradprobe.forecast.curve_fit) draws {drawn[j].tolist()} "
                         f"for replicate {j}; {REBUILD}")
    return draws


def _refitted(reps: np.ndarray, counts: np.ndarray) -> list[int]:
    """The replicates :func:`check_replicates` refits: the first :data:`REFIT_FIRST` and :data:`REFIT_HASHED`
    more, chosen by a sha256 of the replicates and their counts (an edit anywhere moves the choice)."""
    k = len(reps)
    digest = hashlib.sha256(np.ascontiguousarray(reps).tobytes() + np.ascontiguousarray(counts).tobytes()).digest()
    rest = np.arange(REFIT_FIRST, k)
    pick = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "little"))).choice(
        rest, size=min(REFIT_HASHED, rest.size), replace=False) if rest.size else rest
    return sorted(set(range(min(REFIT_FIRST, k))) | {int(i) for i in pick})


def _short(p: dict) -> str:
    return ", ".join(f"{k} {p[k]:.4g}" for k in PARAMETERS)


def not_json(path: Path, e: ValueError, *, trainer_state: bool = False) -> CurveError:
    """The refusal of a curve file ``path`` whose text does not parse as JSON: ``e`` a :class:`json.JSONDecodeError`
    (truncated or damaged, and the fix: :func:`~.curve_sources.truncated_hint`), a :class:`UnicodeDecodeError`
    (not UTF-8 text, which JSON must be: convert it, or rewrite a saved curve) or a
    :class:`~.text_files.JSONShapeError` (a key given twice in one object, or nesting too deep: no writer of a curve
    file writes either, so it was edited or damaged: rebuild a saved curve, re-copy a trainer state).
    ``trainer_state``: the text holds ``"log_history"``, a TRL trainer state's key, so the fix names TRL's own file.
    :func:`read_curve_file` raises it, and ``load_reference_curve`` for a ``.json`` or a trainer state under another
    name before it checks the read options against the file's kind (a file that does not parse has none)."""
    if isinstance(e, JSONShapeError):
        return CurveError(f"reference curve file {str(path)!r}: {e}; "
                          + (TRL_RECOPY if trainer_state else REBUILD))
    if isinstance(e, json.JSONDecodeError):
        return CurveError(f"reference curve file {str(path)!r} is not valid JSON ({e}): {truncated_hint(path, e)}")
    return CurveError(f"reference curve file {str(path)!r} cannot be read as JSON: {not_utf8(path, e, trainer_state)}")


def damaged(path: Path, e: Exception) -> CurveError:
    """The error of a curve file that could not be built (what :func:`read_curve_file` does not catch)."""
    if isinstance(e, CurveError):
        return CurveError(f"reference curve file {str(path)!r}: {e}")
    return CurveError(f"reference curve file {str(path)!r} is damaged ({type(e).__name__}: {e}); {REBUILD_HOW}")
