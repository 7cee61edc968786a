"""Reference learning curves: grpo's held-out accuracy against updates, as a saturating fit.

The curve is the ScaleRL sigmoid (Khatri et al. 2025, "The Art of Scaling Reinforcement Learning
Compute for LLMs", arXiv:2510.13786, eq. 1, with compute replaced by updates n)::

    R(n) = R0 + (A - R0) / (1 + (n_mid / n)^B),      R(0) = R0,

fitted by deterministic least squares over every eval of every seed (:mod:`.curve_fit`: the
bounds, the starting grid, which parameters count as identified, the seed-bootstrap replicates).

B is the parameter sparse evals cannot pin down: with evals at only a few update counts, a step
(B at its upper bound) fits the points as well as a smooth curve, and the forecast at small n then
swings from R0 to A. When B comes out at a bound or not identified, the curve is refitted with
B fixed at 1 (the hyperbolic, Michaelis-Menten saturation R0 + (A - R0) n / (n + n_mid)) and
``notes`` says so; pass ``B=...`` to fix it yourself.

A curve needs evals at at least as many distinct update counts > 0 as it has free parameters
(3: A, n_mid, B, when there are evals at n = 0; 4 without them; one fewer with B fixed): fewer are
refused (:class:`CurveError` names the minimum).

Seed spread: with two or more seeds the curve carries :data:`N_REPLICATES` bootstrap replicates
over seeds, whose spread the forecaster puts into its interval. With one seed there are none; the
interval then carries the eval noise the fit's residuals estimate (:attr:`ReferenceCurve.eval_noise`: a
parametric bootstrap of the fit, :func:`~.curve_fit.fit_noise_replicates`), not the run-to-run spread a
second seed would add, and the forecast says so; a one-seed fit with no residual degrees of freedom (as
many evals as parameters) has no noise estimate, and the forecast gives no interval
(:meth:`ReferenceCurve.interval_values`).

Modes: ``sigmoid`` evaluates the fit everywhere. ``empirical`` evaluates, where n lies inside the
range every seed observed, a monotone cubic interpolation (``scipy.interpolate.PchipInterpolator``,
Fritsch & Carlson 1980) of the mean over seeds (each seed linearly interpolated onto the union
of the seeds' update counts, then averaged), and the sigmoid outside it. Either way the value is
clipped to [0, 100] accuracy points.

Where the points come from: :mod:`.curve_sources` (a study, ``metrics.jsonl``, a CSV, TRL's
``trainer_state.json``); the saved curve file: :mod:`.curve_file`.
"""

from __future__ import annotations

import codecs
import json
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import PchipInterpolator

from ..layout import METRICS_JSONL, RUNS_CSV
from ..outputs import is_json_number
from .accuracy_values import read_points, to_points
from .curve_file import (FORMAT, VERSION, check_fit, check_replicates, curve_document, damaged, not_json,
                         read_curve_file, write_curve)
from .curve_fit import (B_BOUNDS, B_FALLBACK, MODES, N_REPLICATES, PARAMETERS, REPLICATE_SEED, START_B, CurveError,
                        eval_noise_sd, fit_misfit, fit_noise_replicates, fit_seed_replicates, fit_sigmoid,
                        scalerl_sigmoid, sigmoid_params, too_few_evals)
from .csv_cells import is_skipped_note
from .curve_sources import (GIVEN_R0_KEY, PLAN_EVAL_HINT, TRL_STATE, CurveSources, initial_accuracy_value,
                            last_checkpoint_state, read_source_text, task_key)
from .text_files import JSONShapeError, parse_curve_json, utf16_without_bom

__all__ = ["ReferenceCurve", "CurveError", "scalerl_sigmoid", "MODES", "task_key", "load_reference_curve",
           "default_curve_path",
           # importable from here as before the split (curve_file, curve_fit)
           "FORMAT", "VERSION", "PARAMETERS", "START_B", "B_BOUNDS", "B_FALLBACK", "N_REPLICATES", "REPLICATE_SEED"]

#: What ``--reference-curve`` / :func:`load_reference_curve` accepts, quoted by its errors.
ACCEPTED = ("a saved curve (.json written by ReferenceCurve.save), a TRL trainer_state.json (or its checkpoint "
            "folder, or a TRL output_dir: its last checkpoint-N's, or a trainer state under another name: a JSON "
            "object with a 'log_history' list), a metrics.jsonl (or its `gradprobe train` run folder), a CSV with "
            "update,accuracy columns, a `gradprobe study` folder (its grpo arm), or 'default' (the shipped tiny-tier "
            "curve)")


class ReferenceCurve(CurveSources):
    """grpo's held-out accuracy (points) against updates n: a ScaleRL sigmoid fit plus its eval points.

    Build one with a constructor (:meth:`from_study`, :meth:`from_metrics`, :meth:`from_csv`,
    :meth:`from_trl_state`, :meth:`load`) or from points directly. See the module docstring for the
    model, the fit and its source.

    Parameters
    ----------
    updates : array_like, shape (points,)
        Update count n of every eval (>= 0).
    accuracy : array_like, shape (points,)
        Held-out accuracy at those evals: accuracy points in [0, 100], or fractions in [0, 1] (``accuracy_scale``).
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
        ``update_group`` (the batch of ONE update: the x axis is in such updates), ``lr``, ``loss_type``; and
        ``initial_accuracy`` when update-0 points are a TRL log's ``initial_accuracy``, not evals
        (:data:`~gradprobe.forecast.curve_sources.GIVEN_R0_KEY`, :attr:`given_r0`).
    notes : sequence of str
        How the points were read (accuracy scale, ...).
    n_replicates : int
        Seed-bootstrap replicates (0: none).
    accuracy_scale : {"auto", "fraction", "points"}
        How ``accuracy`` is read, as every file reader reads its values (:func:`~.accuracy_values.to_points`):
        ``auto`` (default) reads values that all lie in [0, 1] (not all 0) as fractions, converts them to points
        and says so in ``notes``, and refuses values that mix the scales (0.676 among points, naming
        ``accuracy[i]``) and, as the file readers do, values whose largest lies in (1, 5], whose scale cannot be
        told (accuracy points under 5, or another metric on a small scale: :func:`~.accuracy_values.read_points`;
        the message names ``accuracy[i]`` of the largest and the fix, ``accuracy_scale='points'``); values in points
        are read as given, with no note. ``points`` reads the values as given
        (a curve truly under 1 point; the readers and :meth:`load` pass their points so), ``fraction`` multiplies
        them by 100. Why ``auto``: ``accuracy=df["accuracy"]`` straight from a log of fractions, fitted as points,
        would be a curve under 1 point whose forecast gains are 100 x too small, a wrong verdict with no word,
        where the same values in a CSV are read as fractions.
    eval_hint : str
        The fix named when there are too few evals (default: a gradprobe plan's ``[eval]``; a TRL trainer
        state passes TRL's settings, :data:`~gradprobe.forecast.curve_sources.TRL_EVAL_HINT`, a CSV
        :data:`~gradprobe.forecast.curve_sources.CSV_EVAL_HINT`, a study its arm's and folder's
        (:func:`~gradprobe.forecast.curve_sources.study_eval_hint`); a metrics.jsonl's or TRL reader, when
        the evals it skipped for a null or NaN value are what leaves too few, that those evals hold no value and the
        fix for them instead of evaluating more often).

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
    read_options : dict or None
        How :func:`load_reference_curve` read the curve: ``metric``, ``accuracy_scale``, ``initial_accuracy`` as
        passed (None: the default), recorded in ``probe.json``'s forecast section; None for a curve built otherwise.

    Raises
    ------
    CurveError
        Negative updates, accuracy outside [0, 100], unequal numbers of updates and accuracies, an unknown
        ``accuracy_scale``, values that mix fractions and points under ``auto`` (:func:`~.accuracy_values.to_points`;
        the message names ``accuracy[i]`` and the fix), values whose largest lies in (1, 5] under ``auto``
        (:func:`~.accuracy_values.read_points`: pass ``accuracy_scale='points'``), ``fraction`` values above 1,
        fewer distinct eval update counts than free parameters, none included (a
        :class:`~.curve_fit.TooFewEvalsError` naming the minimum and ``eval_hint``; a reader names its file in it), an
        unknown mode.
    """

    read_options: dict | None = None
    #: Whether the curve is a shipped one (read by :meth:`load` from the package's ``data/curves``, the folder of
    #: :func:`default_curve_path`): its model and task are gradprobe's, not the user's, so a forecast for another
    #: model or task gives no verdict off it (:func:`~gradprobe.forecast.budget_forecast.no_verdict_reasons`).
    shipped: bool = False

    def __init__(self, *, updates, accuracy, seeds=None, mode: str = "sigmoid", B: float | None = None,
                 source: str = "", metadata: dict | None = None, notes=(), n_replicates: int = N_REPLICATES,
                 eval_hint: str = PLAN_EVAL_HINT, accuracy_scale: str = "auto", _state: dict | None = None):
        if mode not in MODES:
            raise CurveError(f"mode {mode!r} must be one of {MODES}")
        n = np.asarray(updates, dtype=np.float64).ravel()
        y = np.asarray(accuracy, dtype=np.float64).ravel()
        if n.size == 0 and y.size == 0:  # no evals: the refusal for too few, with its minimum and fix
            too_few_evals(n, B, eval_hint)
        if n.size != y.size:
            raise CurveError(f"a reference curve needs one accuracy per update count: got {n.size} update counts and "
                             f"{y.size} accuracies")
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
        y, scale_note = _given_points(y, n, seeds, accuracy_scale)
        notes = [scale_note, *notes] if scale_note else notes
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
        too_few_evals(n, B, eval_hint)  # raises TooFewEvalsError; the readers judge their skipped evals by it too
        self._n_replicates = int(n_replicates)  # a one-seed curve's eval-noise replicates too (drawn when read)
        if _state is not None:
            self._set_state(_state)
            return
        r0 = float(y[n == 0].mean()) if has_zero else None
        fit = fit_sigmoid(n, y, r0=r0, b_fixed=B)
        if B is None and fit.status.get("B") != "identified":
            self.notes.append(f"B {fit.status['B'].replace('_', ' ')} (fit B = {fit.params['B']:.3g}): the evals do "
                              f"not pin the curve's steepness, so B is fixed at {B_FALLBACK:g} (hyperbolic saturation)")
            fit = fit_sigmoid(n, y, r0=r0, b_fixed=B_FALLBACK)
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
        self.replicates, self.replicate_seed_counts, notes = fit_seed_replicates(
            self.points, self.seed_labels, self.params, r0_fixed=self._r0_fixed, b_fixed=self._b_fixed,
            n_replicates=n_replicates)
        self.notes.extend(notes)

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
        vals = sigmoid_params(np.maximum(n, 0.0), p)
        if self.mode == "empirical":
            flat_n = np.maximum(n, 0.0).reshape(draws, -1)
            flat_v = vals.reshape(draws, -1).copy()
            for d in range(draws):
                flat_v[d] = self._empirical(flat_n[d], flat_v[d], weights=self.replicate_seed_counts[int(idx[d])])
            vals = flat_v.reshape(n.shape)
        return np.clip(vals, 0.0, 100.0)

    # ------------------------------------------------------------------ one seed: eval noise
    @property
    def eval_noise(self) -> tuple[float | None, int] | None:
        """A one-seed curve's eval noise (s, dof): s the residual standard deviation of its sigmoid fit, accuracy
        points, None when the fit has no residual degrees of freedom (:func:`~.curve_fit.eval_noise_sd`); dof the
        residual degrees of freedom. None for a curve of several seeds (its seed bootstrap carries its noise)."""
        if self.n_seeds > 1:
            return None
        n, y = self.points["update"].to_numpy(float), self.points["accuracy"].to_numpy(float)
        return eval_noise_sd(n, y, self._sigmoid(n), r0_fixed=self._r0_fixed, b_fixed=self._b_fixed)

    def _noise_replicates(self) -> tuple[np.ndarray, np.ndarray]:
        """(replicates (m, 4), redrawn evals (m, points)) of a one-seed curve's eval noise, drawn once and kept
        (:func:`~.curve_fit.fit_noise_replicates`); m = 0 without a noise estimate or with several seeds."""
        if "_noise" not in self.__dict__:
            e = self.eval_noise
            noise = (np.zeros((0, 4)), np.zeros((0, len(self.points))))
            if e is not None and e[0] is not None:
                noise = fit_noise_replicates(self.points["update"].to_numpy(float), self.params, e[0],
                                             r0_fixed=self._r0_fixed, b_fixed=self._b_fixed,
                                             n_replicates=self.__dict__.get("_n_replicates", N_REPLICATES))
            self.__dict__["_noise"] = noise
        return self.__dict__["_noise"]

    @property
    def interval_source(self) -> str:
        """What :meth:`interval_values` draws on: ``"seeds"`` (the seed-bootstrap replicates), ``"eval_noise"``
        (one seed: the parametric bootstrap of its fit's eval noise, :attr:`eval_noise`) or ``"none"`` (the main
        curve only: one seed without a noise estimate, or several seeds built with ``n_replicates=0``)."""
        if len(self.replicates):
            return "seeds"
        return "eval_noise" if len(self._noise_replicates()[0]) else "none"

    @property
    def interval_replicates(self) -> int:
        """How many replicates :meth:`interval_values` draws on (0 for :attr:`interval_source` ``"none"``)."""
        return len(self.replicates) or len(self._noise_replicates()[0])

    def interval_values(self, n, index=None) -> np.ndarray:
        """Accuracy (points, clipped) of the replicates a forecast interval reads: the seed-bootstrap replicates
        (:meth:`replicate_values`) when there are any, else a one-seed curve's eval-noise replicates
        (:attr:`interval_source`), else the main curve's values.

        Parameters
        ----------
        n : array_like, shape (draws,) or (draws, k)
            Updates for each draw (>= 0).
        index : array_like of int, shape (draws,), optional
            Which replicate each draw uses, modulo :attr:`interval_replicates` (default: draw d uses replicate d).

        Returns
        -------
        ndarray, shape of ``n``
            An ``empirical`` curve's eval-noise replicate reads, inside its evals' range, the monotone cubic
            interpolation of its evals plus that replicate's noise draws (redrawn eval minus fitted value; their mean
            at each update count), as the main curve reads its evals: centred on the evals, not on the fit.
        """
        m = self.interval_replicates
        idx = None if index is None or m == 0 else np.asarray(index, dtype=np.int64) % m
        if self.interval_source != "eval_noise":
            return self.replicate_values(n, idx)
        n = np.maximum(np.asarray(n, dtype=np.float64), 0.0)
        reps, ys = self._noise_replicates()
        idx = np.arange(n.shape[0]) % m if idx is None else idx
        vals = sigmoid_params(n, reps[idx])
        if self.mode == "empirical":
            flat_n, flat_v = n.reshape(n.shape[0], -1), vals.reshape(n.shape[0], -1).copy()
            for d in range(n.shape[0]):
                ip = self._noise_interpolator(int(idx[d]), ys)
                inside = (flat_n[d] >= ip[0]) & (flat_n[d] <= ip[1]) if ip else None
                if inside is not None and inside.any():
                    flat_v[d, inside] = ip[2](flat_n[d, inside])
            vals = flat_v.reshape(n.shape)
        return np.clip(vals, 0.0, 100.0)

    def _noise_interpolator(self, i: int, ys: np.ndarray):
        """(lo, hi, PchipInterpolator) of the evals plus eval-noise replicate ``i``'s noise draws (``ys[i]``, the
        redrawn evals, minus the fit; mean per update count, clipped to [0, 100]), cached; None with fewer than 2
        update counts."""
        cache = self.__dict__.setdefault("_noise_pchip", {})
        if i not in cache:
            n, y = self.points["update"].to_numpy(float), self.points["accuracy"].to_numpy(float)
            levels, inverse = np.unique(n, return_inverse=True)
            noisy = np.clip(y + ys[i] - self._sigmoid(n), 0.0, 100.0)
            mean = np.bincount(inverse, weights=noisy) / np.bincount(inverse)
            cache[i] = (levels[0], levels[-1], PchipInterpolator(levels, mean)) if levels.size >= 2 else None
        return cache[i]

    # ------------------------------------------------------------------ description and I/O
    @property
    def n_seeds(self) -> int:
        return len(self.seed_labels)

    @property
    def max_update(self) -> float:
        """The largest update count evaluated: beyond it the curve is an extrapolation."""
        return float(self.points["update"].max())

    @property
    def first_eval(self) -> float:
        """The smallest update count > 0 evaluated (updates): between 0 and it the curve rests on no eval, only on
        R0 and the fit's shape (:func:`~gradprobe.forecast.budget_forecast.forecast_rewards` gives no verdict
        there)."""
        u = self.points["update"]
        return float(u[u > 0].min())  # a curve has evals at >= 2 update counts > 0 (too_few_evals)

    @property
    def misfit(self) -> str | None:
        """Why the fit does not describe the curve's evals, or None when it does (the adequacy check,
        :func:`~.curve_fit.fit_misfit`: rmse over 4 accuracy points, or a seed-mean eval over 10 points from the
        fit); judged once per curve, on the sigmoid fit, and kept. A forecast read off such a curve gives no
        verdict. An ``empirical`` curve is not judged (None): inside its evals it reads their seed means, not the
        fit (the mode exists for curves a sigmoid does not describe); beyond its last eval the forecast's
        extrapolation note says it reads the fit."""
        if "_misfit" not in self.__dict__:
            n, y = self.points["update"].to_numpy(float), self.points["accuracy"].to_numpy(float)
            self.__dict__["_misfit"] = None if self.mode == "empirical" else fit_misfit(n, y, self._sigmoid(n))
        return self.__dict__["_misfit"]

    @property
    def given_r0(self) -> dict | None:
        """The ``initial_accuracy`` a TRL log's curve was read with, where it is the update-0 point of seeds
        (``metadata["initial_accuracy"]``, kept by :meth:`save`): ``{"value": X as given, "points": X in points,
        "seeds": [seed labels]}``; None when no point is (a curve read without it, or a record that does not name
        seeds of the curve with a point at update 0)."""
        g = self.metadata.get(GIVEN_R0_KEY)
        if not isinstance(g, dict) or not isinstance(g.get("seeds"), list):
            return None
        at_zero = set(self.points.loc[self.points["update"] == 0, "seed"])
        seeds = [str(x) for x in g["seeds"] if str(x) in at_zero]
        value, points = g.get("value"), g.get("points")  # finite numbers (checked by load: read_curve_file)
        numbers = is_json_number(value, finite=True) and is_json_number(points, finite=True)
        return {"value": float(value), "points": float(points), "seeds": seeds} if seeds and numbers else None

    def describe(self) -> str:
        """One line: source, mode, parameters with their status, evals and seeds (an update-0 point that is the
        ``initial_accuracy`` given is no eval: it is named apart, :attr:`given_r0`)."""
        p, s, g = self.params, self.status, self.given_r0
        given = (self.points["update"] == 0) & self.points["seed"].isin(g["seeds"] if g else [])
        evals = self.points[~given].groupby("seed").size().reindex(self.seed_labels, fill_value=0)
        count = f"{int(evals.sum())} evals" + (" + the given initial accuracy as R0" if g else "")
        return (f"{self.source or 'reference curve'} ({self.mode}; ScaleRL sigmoid R0 {p['R0']:.2f} [{s['R0']}], "
                f"A {p['A']:.2f} [{s['A']}], n_mid {p['n_mid']:.3g} updates [{s['n_mid']}], B {p['B']:.3g} [{s['B']}]; "
                f"{count}, {self.n_seeds} seed(s), {int(evals.min())}-{int(evals.max())} per seed, "
                f"up to update {self.max_update:g}; rmse {self.rmse:.2f} points)")

    def to_dict(self) -> dict:
        """JSON-ready dict (what :meth:`save` writes; :mod:`.curve_file`)."""
        return curve_document(self)

    @property
    def skipped_notes(self) -> list[str]:
        """The notes that say evals of the source were skipped (a CSV's empty or NaN cells, a
        ``trainer_state.json``'s NaN evals), naming their lines or steps: what a command loading the curve
        should print (``gradprobe probe`` prints them under the forecast, as ``note:`` lines)."""
        return [n for n in self.notes if is_skipped_note(n)]

    def save(self, path: str | Path) -> Path:
        """Write the curve as JSON (atomically: :func:`gradprobe.outputs.write_text_atomic`); returns the path."""
        return write_curve(self, path)

    @classmethod
    def load(cls, path: str | Path, *, mode: str | None = None) -> "ReferenceCurve":
        """Read a curve written by :meth:`save` (the fit is read, not redone, but checked against its points).

        Parameters
        ----------
        path : path
        mode : {"sigmoid", "empirical"}, optional
            Override the saved mode.

        Raises
        ------
        CurveError
            Missing file, invalid JSON, or a file that is not a reference curve or lacks a field; an unknown
            ``version``; a field of the wrong type or out of its range (a parameter, ``status``,
            ``standard_errors``, the ``metadata`` the forecast reads, ...:
            :func:`~gradprobe.forecast.curve_file.read_curve_file`); ``params`` that are not the fit of its
            ``points`` (:func:`~gradprobe.forecast.curve_file.check_fit`); ``replicates`` that are not the
            seed-bootstrap refits of its points (:func:`~gradprobe.forecast.curve_file.check_replicates`). One line
            naming the file, the field and the fix.
        """
        kw = read_curve_file(path)
        kw["mode"] = mode or kw["mode"]
        kw["accuracy_scale"] = "points"  # a saved curve holds points, whatever their range
        try:
            curve = cls(**kw)
        except (KeyError, TypeError, ValueError) as e:
            raise damaged(Path(path), e) from None
        check_fit(path, curve)
        check_replicates(path, curve)
        curve.shipped = Path(path).resolve().parent == default_curve_path().parent
        return curve

    def _set_state(self, st: dict) -> None:
        self.params, self.status, self.standard_errors = st["params"], st["status"], st["standard_errors"]
        self._b_fixed, self._r0_fixed, self.rmse = st["b_fixed"], st["r0_fixed"], st["rmse"]
        self.replicates = st["replicates"]
        counts = st["replicate_seed_counts"]
        self.replicate_seed_counts = counts.reshape(len(self.replicates), len(self.seed_labels))

    def with_mode(self, mode: str) -> "ReferenceCurve":
        """The same fit evaluated in another mode (no refit; :attr:`read_options` kept)."""
        curve = ReferenceCurve(updates=self.points["update"], accuracy=self.points["accuracy"],
                               seeds=self.points["seed"], mode=mode, B=self._b_fixed, source=self.source,
                               metadata=self.metadata, notes=self.notes, accuracy_scale="points",
                               _state={"params": self.params, "status": self.status,
                                       "standard_errors": self.standard_errors, "b_fixed": self._b_fixed,
                                       "r0_fixed": self._r0_fixed, "rmse": self.rmse, "replicates": self.replicates,
                                       "replicate_seed_counts": self.replicate_seed_counts})
        curve.read_options, curve.shipped = self.read_options, self.shipped
        return curve


def _given_points(y: np.ndarray, n: np.ndarray, seeds: np.ndarray,
                  accuracy_scale: str) -> tuple[np.ndarray, str | None]:
    """The :class:`ReferenceCurve` constructor's ``accuracy`` (shape (points,), checked in [0, 100]) in points, and
    the note saying how it was read (None: points as given), by ``accuracy_scale`` (its docstring);
    ``n``, ``seeds``: shape (points,), the evals' updates and seed labels, by which a mix of scales is judged.

    Raises
    ------
    CurveError
        An unknown ``accuracy_scale``, values that mix fractions and points under ``auto``, ``fraction`` values
        above 1 (:func:`~.accuracy_values.to_points`), values whose largest lies in (1, 5] under ``auto`` (their
        scale cannot be told: :func:`~.accuracy_values.read_points`, the file readers' rule and message).
    """
    what = "ReferenceCurve(accuracy=...)"
    if accuracy_scale == "points":
        return y, None
    if accuracy_scale == "fraction" or (accuracy_scale == "auto" and 0.0 < y.max() <= 1.0):
        out, note = to_points(y, accuracy_scale, what)
        return out, note.replace(" (--reference-curve-scale points)", "")
    try:  # as the file readers read theirs: values in (1, 5] are refused, their scale cannot be told
        read_points(y, accuracy_scale, what, [f"accuracy[{i}]" for i in range(y.size)], updates=n, seeds=seeds)
    except CurveError as e:  # the command line's option is no fix here
        raise CurveError(str(e).replace(" (on the command line, --reference-curve-scale points)", "")) from None
    return y, None  # points (or every value 0: the same in either scale), read as given, as documented


def load_reference_curve(spec: str | Path, *, mode: str | None = None, metric: str | None = None,
                         accuracy_scale: str | None = None, initial_accuracy: float | None = None) -> ReferenceCurve:
    """A curve from what a user has: a saved curve (``.json`` written by :meth:`ReferenceCurve.save`),
    a TRL ``trainer_state.json`` (or a JSON object with a ``log_history`` under any other name), a
    ``metrics.jsonl``, a CSV (columns ``update``, ``accuracy``), a study
    folder (its ``grpo`` arm), or ``default`` / ``tiny`` (the shipped tiny-tier frontier curve). The curve's
    :attr:`~ReferenceCurve.read_options` records ``metric``, ``accuracy_scale`` and ``initial_accuracy`` as passed.

    Parameters
    ----------
    spec : str or path
        As above (``--reference-curve``).
    mode : str, optional
        The curve's mode (:data:`MODES`).
    metric : str, optional
        The eval key holding held-out accuracy (``--reference-curve-metric``), for a TRL trainer state
        (default ``eval_accuracy``; a GRPOTrainer logs ``eval_rewards/<reward function>/mean``) or a
        ``metrics.jsonl`` (default ``greedy_accuracy``). A TRL key must be an eval metric (``eval_...``).
    accuracy_scale : {"auto", "fraction", "points"}, optional
        How a CSV's, a ``metrics.jsonl``'s or a TRL state's accuracies are read (``--reference-curve-scale``;
        default ``auto``: fractions when every value lies in [0, 1], points when the largest lies above 5, and
        refused in between, where points of an accuracy under 5% cannot be told from another metric on a small
        scale: :func:`~.accuracy_values.read_points`).
    initial_accuracy : float, optional
        The initial policy's accuracy on a TRL trainer state's eval, in the metric's scale (a fraction in [0, 1]
        or points in [0, 100], as ``accuracy_scale`` reads it), for a log without an eval at step 0 (TRL evaluates
        there only with ``eval_on_start=True``): it becomes R0, which is otherwise the fit's extrapolation
        (``--initial-accuracy``; :meth:`ReferenceCurve.from_trl_state`, whose notes name a file that keeps its own
        step-0 eval). A TRL trainer state only: any other source holds its update-0 eval itself.

    Raises
    ------
    CurveError
        Nothing at ``spec`` (the message says it does not exist), a folder holding none of
        ``runs.csv``, ``metrics.jsonl``, ``trainer_state.json``, or a file of none of these kinds (each
        message lists what is accepted); a ``.json`` file, or one holding ``"log_history"``, that does not parse
        (called truncated or damaged, with the fix: :func:`~.curve_file.not_json`), names a key twice in one object
        or nests too deep (:func:`~.text_files.parse_curve_json`; before the options below are
        checked against its kind, which such a file has none of); a ``metric`` for a source without eval keys (a
        saved curve, a CSV, a study, ``default``), an empty one, a TRL key that is not ``eval_...``; an
        ``accuracy_scale`` not among the three, or for a source whose scale is fixed (a saved curve, a study,
        ``default``); an ``initial_accuracy`` that is no finite number or outside ``accuracy_scale``'s range
        (checked before any file is read: :func:`~.curve_sources.initial_accuracy_value`; under auto, on another
        scale than a TRL trainer state's evals, whether or not a file's own step-0 eval is read instead), or given
        for a source that is no TRL trainer state (after that source's own refusals: the message says whether the
        source has its own eval at update 0); anything the reader of that kind raises (a bad cell names its file,
        line and column). The messages name the keywords' ``gradprobe probe`` options.
    TypeError
        ``metric`` not a string.
    """
    s = str(spec)
    _check_read_options(metric, accuracy_scale)
    initial_accuracy_value(initial_accuracy, accuracy_scale or "auto")
    curve, is_trl = _read_spec(s, mode, metric, accuracy_scale, initial_accuracy)
    if initial_accuracy is not None and not is_trl:
        if (curve.points["update"] == 0).any():
            raise CurveError(f"initial_accuracy (--initial-accuracy) applies to a TRL trainer_state.json without a "
                             f"step-0 eval only, and --reference-curve {s!r} (read as {curve.source}) has its own "
                             "eval at update 0, which is its R0: leave the option out")
        raise CurveError(f"initial_accuracy (--initial-accuracy) gives the step-0 eval a TRL trainer_state.json "
                         f"lacks, but --reference-curve {s!r} is read as {curve.source}: put the initial policy's "
                         "eval at update 0 in that source, or leave it out")
    curve.read_options = {"metric": metric, "accuracy_scale": accuracy_scale, "initial_accuracy": initial_accuracy}
    return curve


def _read_spec(s: str, mode: str | None, metric: str | None, accuracy_scale: str | None,
               initial_accuracy: float | None) -> tuple[ReferenceCurve, bool]:
    """(the curve :func:`load_reference_curve` reads ``s`` as, whether that is a TRL trainer state's), by the
    kind of source ``s`` names; ``initial_accuracy`` goes to the TRL reader, the other kinds take none."""
    if s in ("default", "tiny"):
        _no_read_options(s, "the shipped curve", metric, accuracy_scale)
        c = ReferenceCurve.load(default_curve_path())
        return (c.with_mode(mode) if mode else c), False
    p = Path(s)
    if not p.exists():
        raise CurveError(f"--reference-curve {s!r} does not exist (no such file or folder); expected {ACCEPTED}")
    kw = {"mode": mode} if mode else {}
    kw_scaled = dict(kw, accuracy_scale=accuracy_scale) if accuracy_scale is not None else kw
    keyed = dict(kw_scaled, metric=metric) if metric is not None else kw_scaled  # logs with eval keys
    if p.is_dir():
        if (p / RUNS_CSV).is_file():
            _no_read_options(s, "a study folder (its runs.csv's accuracy column)", metric, accuracy_scale)
            return ReferenceCurve.from_study(p, **kw), False
        if (p / METRICS_JSONL).is_file():
            return ReferenceCurve.from_metrics(p, **keyed), False
        if (p / TRL_STATE).is_file() or last_checkpoint_state(p)[0] is not None:  # a TRL output_dir too
            _eval_key(metric, s)
            return ReferenceCurve.from_trl_state(p, initial_accuracy=initial_accuracy, **keyed), True
        raise CurveError(f"--reference-curve {s!r} is a folder without {RUNS_CSV} (a study), {METRICS_JSONL} (a "
                         f"`gradprobe train` run) or {TRL_STATE} (a TRL checkpoint, or a TRL output_dir's last "
                         f"checkpoint-N); expected {ACCEPTED}")
    elif p.is_file():
        suffix = p.suffix.lower()  # RESULTS.CSV is a CSV
        if suffix == ".gz":  # metrics.jsonl.gz, curve.csv.gz: read uncompressed only
            raise CurveError(f"--reference-curve {s!r} is gzip-compressed: decompress it (`gunzip -k "
                             f"{shlex.quote(s)}`) and pass the file it gives ({p.stem}); expected {ACCEPTED}")
        if p.name == TRL_STATE or (suffix not in (".jsonl", ".csv") and _is_trl_state(p, suffix)):
            _eval_key(metric, s)  # a trainer state under another name: by its content
            return ReferenceCurve.from_trl_state(p, initial_accuracy=initial_accuracy, **keyed), True
        if suffix == ".jsonl":
            return ReferenceCurve.from_metrics(p, **keyed), False
        if suffix == ".csv":
            _no_read_options(s, "a CSV (its accuracy column)", metric, None)  # a CSV's scale may be given
            return ReferenceCurve.from_csv(p, **kw_scaled), False
        if suffix == ".json":
            _no_read_options(s, "a saved curve", metric, accuracy_scale)
            return ReferenceCurve.load(p, mode=mode), False
    raise CurveError(f"--reference-curve {s!r}: unknown kind of file; expected {ACCEPTED}")


def _eval_key(metric: str | None, spec: str) -> None:
    """Refuse a TRL key that is not an eval metric (TRL prefixes every eval metric with ``eval_``): a training
    batch's reward (``rewards/<fn>/mean``), ``epoch`` or ``loss`` is not held-out accuracy."""
    if metric is not None and not metric.startswith("eval_"):
        raise CurveError(f"--reference-curve-metric {metric!r} is not an eval metric of the TRL trainer state "
                         f"{spec!r} (TRL names those eval_...): the forecast reads held-out accuracy, not the training "
                         "batch's reward, the loss or the epoch; give an eval key such as "
                         "eval_rewards/accuracy_reward/mean (evaluate with an eval_dataset and eval_strategy)")


def _check_read_options(metric, accuracy_scale) -> None:
    """:func:`load_reference_curve`'s checks of ``metric`` (a non-empty string) and ``accuracy_scale``."""
    if metric is not None and not isinstance(metric, str):
        raise TypeError(f"metric must be a string (an eval key such as 'eval_rewards/accuracy_reward/mean'), got "
                        f"{metric!r} ({type(metric).__name__})")
    if metric is not None and not metric.strip():
        raise CurveError(f"--reference-curve-metric {metric!r} is empty: give the eval key that holds held-out "
                         "accuracy (e.g. eval_rewards/accuracy_reward/mean), or leave it out")
    if accuracy_scale is not None and accuracy_scale not in ("auto", "fraction", "points"):
        raise CurveError(f"--reference-curve-scale {accuracy_scale!r} must be auto, fraction (values in [0, 1]) or "
                         "points (values in [0, 100])")


def _no_read_options(spec: str, kind: str, metric: str | None, accuracy_scale: str | None) -> None:
    """Refuse ``--reference-curve-metric`` for a source without eval keys to choose from, and
    ``--reference-curve-scale`` for one whose scale is fixed (a saved curve and the shipped one hold points, a
    study's runs.csv fractions, checked where it is read); ``kind`` names the source."""
    if metric is not None:
        raise CurveError(f"--reference-curve-metric {metric!r} picks an eval key of a TRL trainer_state.json or a "
                         f"metrics.jsonl, but --reference-curve {spec!r} is {kind}, which has none; leave it out")
    if accuracy_scale is not None:
        raise CurveError(f"--reference-curve-scale {accuracy_scale} says how a CSV's, a metrics.jsonl's or a TRL "
                         f"trainer state's accuracies are read, but --reference-curve {spec!r} is {kind}, whose scale "
                         "is fixed; leave it out")


def _is_trl_state(path: Path, suffix: str) -> bool:
    """Whether ``path`` holds a TRL trainer state under another name: a JSON object with a ``log_history``
    (and no saved curve's ``format``).

    Raises
    ------
    CurveError
        A text that does not parse as JSON yet is meant as JSON: a ``.json`` file (``suffix``), or one holding
        ``"log_history"`` (a trainer state under another name, UTF-8 or not); the message says whether it is
        truncated, damaged, not UTF-8, names a key twice in one object or nests too deep
        (:func:`~.text_files.parse_curve_json`), with the fix (:func:`~.curve_file.not_json`). It comes before the read
        options are checked against the file's kind: such a file has no kind, and ``--reference-curve-metric``'s
        refusal for a saved curve would hide the cause. Any other text that does not parse is no trainer state (False).
    """
    try:
        text = read_source_text(path)
        d = parse_curve_json(text)
    except (UnicodeDecodeError, json.JSONDecodeError, JSONShapeError) as e:
        if isinstance(e, UnicodeDecodeError):
            text = _as_text(bytes(e.object))
        # meant as JSON (a key twice or deep nesting: JSON all the same), or a trainer state that is not UTF-8
        if suffix == ".json" or '"log_history"' in text:
            raise not_json(path, e, trainer_state='"log_history"' in text) from None
        return False
    except OSError:
        return False
    return isinstance(d, dict) and "log_history" in d and d.get("format") != FORMAT


def _as_text(raw: bytes) -> str:
    """Bytes that are not UTF-8, decoded as well as can be to look for a trainer state's key: UTF-16 by its
    byte-order mark, or without one (:func:`~.text_files.utf16_without_bom`), else UTF-8 with replacement
    characters."""
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return raw.decode("utf-16", "replace")
    return raw.decode(utf16_without_bom(raw) or "utf-8", "replace")


def default_curve_path() -> Path:
    """The shipped tiny-tier curve: grpo of ``data/study_tiny`` on its frontier task (package data)."""
    return Path(__file__).resolve().parent.parent / "data" / "curves" / "tiny_frontier_grpo.json"
