"""Would a damped probe efficiency forecast better than cost only? efficiency = rho ** gamma, gamma fitted on studies.

The probe forecaster reads grpo's reference curve at an arm's effective number of updates (T / c_R) rho_R
(:func:`gradprobe.forecast.forecast_rewards`; T the token budget, c_R the arm's generated tokens per update,
rho_R the probe's per-update efficiency vs grpo, shrunk by its SNR); cost only sets rho_R = 1. On
``data/study_tiny`` the probe's first-step ratio overstated a dense reward's per-update efficiency over training
(rho about 3 where the runs gained about 1.1x grpo per update: the notes of issue 12). This script measures the
one-parameter family between the two forecasters,

    forecast_gamma(R) = curve((T / c_R) rho_R ** gamma) - curve(T / c_grpo)     (accuracy points)

(an arm with rho_R <= 0 gets 0 effective updates for gamma != 0, as the forecaster clips them: :func:`efficiency`)

(gamma = 0 is cost only, gamma = 1 the probe forecaster; it reproduces both columns of the calibration rows and
refuses to go on if it does not), with gamma chosen on a grid (``--grid LOW HIGH STEP``, default -1 to 1.5 by 0.05;
ties go to the first) by the mean absolute error of the gain vs grpo at the token budget over single runs
(:func:`calib.dataset.build_rows`' ``target``):

- over the ``--fit`` studies, leaving one study out: gamma fitted on the others, applied to the held-out study;
- over the ``--test`` studies (never used in any fit): gamma fitted on all the ``--fit`` studies.

For each it prints the MAE of cost only, the probe forecaster and the damped one, per held-out study and over all
runs, and the paired differences damped - cost only and damped - probe, each with its 95% study-cluster bootstrap
interval (:func:`calib.bootstrap.mae_difference_interval`: 5000 resamples, seed 0; none under 5 studies, as in
``calib report``: :data:`calib.bootstrap.MIN_INTERVAL_STUDIES`). Runs: the non-grpo runs that have a probe
forecast (learning-rate arms have none); ``--common`` keeps only those the signal proxy covers too (the 71 compared
runs of ``data/calibration/README.md``). Every forecast reads the study's own grpo curve, as ``calib report`` does.
The figures in ``data/calibration/README.md`` come from::

    python benchmarks/efficiency_exponent.py --fit data/study_tiny data/study_tiny_sparse \\
        data/study_tiny_hard_rewards data/study_reward_granularity data/study_tiny_llama data/study_tiny_losses \\
        data/study_tiny_greso data/study_tiny_guided \\
        --test data/study_tiny_heldout4k data/study_tiny_replicate_heldout4k data/study_tiny_replicate2_heldout4k \\
        data/study_tiny_hard_heldout4k data/study_tiny_hard_replicate_heldout4k data/study_tiny_llama_heldout4k \\
        data/study_tiny_llama_replicate_heldout4k data/study_tiny_losses_heldout4k \\
        data/study_tiny_losses_replicate_heldout4k
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from calib.bootstrap import MIN_INTERVAL_STUDIES, mae_difference_interval
from calib.dataset import build_rows
from gradprobe.forecast import ReferenceCurve
from gradprobe.study.folder import StudyError
from gradprobe.study.replicate import read_replicate_record

REPRODUCE_TOL = 1e-9  # points: gamma 0 and 1 must give the rows' cost-only and probe forecasts
MAX_GRID = 10_000  # exponents tried at most


class ExponentError(ValueError):
    """Bad input of this script (a grid without 0 and 1, a study in both --fit and --test, no runs)."""


def gamma_grid(low: float, high: float, step: float) -> np.ndarray:
    """The exponents tried, shape (n_gamma,): low, low + step, ... up to high, rounded to 1e-9.

    Raises ExponentError: step <= 0, over :data:`MAX_GRID` points, or a grid that misses 0 or 1 (the two
    forecasters it is checked against)."""
    if not step > 0 or not high >= low:
        raise ExponentError(f"--grid {low} {high} {step}: need LOW <= HIGH and STEP > 0")
    if (high - low) / step > MAX_GRID:
        raise ExponentError(f"--grid {low} {high} {step} has over {MAX_GRID} points; use a larger STEP")
    grid = np.round(low + step * np.arange(int(np.floor((high - low) / step + 1e-9)) + 1), 9)
    if not (np.any(grid == 0.0) and np.any(grid == 1.0)):
        raise ExponentError(f"--grid {low} {high} {step} must contain 0 and 1 (cost only and the probe forecaster)")
    return grid


def study_runs(study_dir) -> tuple[pd.DataFrame, ReferenceCurve]:
    """One study's non-grpo runs with a probe forecast (:func:`calib.dataset.build_rows`) and its grpo curve.

    Raises ExponentError: the study has no such run; FileNotFoundError / ValueError from the study's reading."""
    curve = ReferenceCurve.from_study(study_dir, arm="grpo")
    rows = build_rows(study_dir, curve=curve)  # the same curve build_rows would fit (it fitted it a second time)
    ref = rows[rows["is_reference"].astype(bool)]
    runs = rows[~rows["is_reference"].astype(bool) & np.isfinite(rows["forecast_probe"].astype(float))
                & np.isfinite(rows["forecast_cost_only"].astype(float))].copy()
    if ref.empty or runs.empty:
        raise ExponentError(f"{study_dir}: no grpo row or no run with a probe forecast; nothing to compare")
    runs["c_grpo"] = float(ref["tokens_per_update"].iloc[0])
    return runs.reset_index(drop=True), curve


def efficiency(rho: np.ndarray, gamma: float) -> np.ndarray:
    """The damped per-update efficiency, shape as ``rho``: rho ** gamma where rho > 0; where rho <= 0 (the reward's
    update moves accuracy down along the reference), 0 for gamma != 0, the forecaster's clip of negative effective
    updates to 0 (:mod:`gradprobe.forecast.budget_forecast`), and 1 (cost only) for gamma = 0."""
    rho = np.asarray(rho, dtype=np.float64)
    out = np.power(np.where(rho > 0, rho, 1.0), gamma)
    return np.where(rho > 0, out, 1.0 if gamma == 0 else 0.0)


def damped_forecasts(runs: pd.DataFrame, curve: ReferenceCurve, grid: np.ndarray) -> np.ndarray:
    """forecast_gamma of every run (module docstring), shape (n_gamma, n_runs), accuracy points.

    Raises ExponentError: gamma 0 or 1 does not reproduce the rows' cost-only or probe forecast (to 1e-9 points)."""
    T, c_r, rho = (runs[k].to_numpy(float) for k in ("budget_value", "tokens_per_update", "rho"))
    base = np.asarray(curve(T / runs["c_grpo"].to_numpy(float)), dtype=float)
    out = np.stack([np.asarray(curve(T / c_r * efficiency(rho, g)), dtype=float) - base for g in grid])
    for g, col in ((0.0, "forecast_cost_only"), (1.0, "forecast_probe")):
        gap = np.max(np.abs(out[np.flatnonzero(grid == g)[0]] - runs[col].to_numpy(float)))
        if gap > REPRODUCE_TOL:
            raise ExponentError(f"gamma {g} is {gap:.3g} points off the rows' {col}: the model here is not the "
                                "forecaster's; update this script")
    return out


def fitted_gamma(errors: np.ndarray, grid: np.ndarray, keep: np.ndarray) -> float:
    """The exponent of the grid with the least MAE over the runs ``keep`` (bool, shape (n_runs,)); ties: first.

    ``errors``: absolute errors, shape (n_gamma, n_runs), accuracy points. Raises ExponentError: no run kept, or
    an error that is not finite."""
    if not keep.any():
        raise ExponentError("no run to fit gamma on (every run is held out)")
    mae = errors[:, keep].mean(axis=1)
    if not np.all(np.isfinite(mae)):
        raise ExponentError(f"a forecast is not finite at gamma {grid[~np.isfinite(mae)][0]:g}; cannot fit gamma")
    return float(grid[int(np.argmin(mae))])


def _read(dirs, grid: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Runs of every study concatenated, and their forecasts at every gamma (columns in run order). Each run's
    ``cell`` is the study its folder replicates (``replicate_of.json``: ``gradprobe study --replicate``, the same
    cell with new seeds and held-out prompts), else its own study. Raises ExponentError: a study given twice."""
    frames, forecasts = [], []
    for d in dirs:
        with warnings.catch_warnings():  # a study's own notes (skipped evals, duplicates) are not this script's
            warnings.simplefilter("ignore")
            runs, curve = study_runs(d)
        try:
            record = read_replicate_record(d)
        except StudyError as e:  # a damaged replicate_of.json: named by the reader
            raise ExponentError(str(e)) from None
        runs["cell"] = record["source_name"] if record else Path(d).resolve().name
        frames.append(runs)
        forecasts.append(damped_forecasts(runs, curve, grid))
    keys = [f["study"].iloc[0] for f in frames]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ExponentError(f"study {twice[0]} is given twice (same folder name and plan sha256); give each once")
    return pd.concat(frames, ignore_index=True), np.concatenate(forecasts, axis=1)


def _report(title: str, runs: pd.DataFrame, damped: np.ndarray, gammas: dict, clusters: str = "study") -> None:
    """Prints the MAE of each forecaster per study and over all runs, and damped - cost only (and - probe) with
    its interval, resampling ``clusters`` (``study``, or ``cell``: the replicates of one plan together)."""
    y = runs["target"].to_numpy(float)
    cols = {"cost only": runs["forecast_cost_only"].to_numpy(float), "probe": runs["forecast_probe"].to_numpy(float),
            "damped": damped}
    print(f"\n{title} ({len(runs)} runs, {runs['study'].nunique()} studies; MAE of the gain vs grpo, points)")
    print(f"  {'study':50s} {'runs':>4s} {'gamma':>6s} " + " ".join(f"{k:>9s}" for k in cols))
    for study, idx in runs.groupby("study", sort=False).indices.items():
        print(f"  {study:50s} {len(idx):4d} {gammas[study]:6.2f} "
              + " ".join(f"{np.mean(np.abs(v[idx] - y[idx])):9.2f}" for v in cols.values()))
    print(f"  {'all':50s} {len(runs):4d} {'':6s} " + " ".join(f"{np.mean(np.abs(v - y)):9.2f}" for v in cols.values()))
    groups = runs[clusters].to_numpy()
    unit = "studies" if clusters == "study" else "cells (replicates of one plan together)"
    for other in ("cost only", "probe"):
        diff = mae_difference_interval(damped, cols[other], y, groups, min_studies=MIN_INTERVAL_STUDIES)
        iv = (f"[{diff.interval[0]:+.2f}, {diff.interval[1]:+.2f}] (95% bootstrap over {diff.n_clusters} {unit}; an "
              "interval, not a p-value)" if diff.interval is not None else f"[no interval: {diff.reason}]")
        print(f"  MAE of damped minus {other}: {diff.estimate:+.3f} {iv}")
    if clusters != "study":
        per = {c: np.mean(np.abs(damped[i] - y[i]) - np.abs(cols["cost only"][i] - y[i]))
               for c, i in runs.groupby(clusters, sort=False).indices.items()}
        print("  per cell, MAE of damped minus cost only: " + ", ".join(f"{c} {v:+.2f}" for c, v in per.items()))


def _shared_probes(test: pd.DataFrame, fit: pd.DataFrame) -> dict:
    """test study -> the fit studies with an arm of the same model, probe entry and efficiency ratio (to 1e-6
    relative: the same probe recomputed in float32), whose ratio gamma was fitted on (the task may be recorded
    differently: another held-out set)."""
    key = ["model", "probe_entry"]
    out = {}
    for study, t in test.groupby("study", sort=False):
        m = t.drop_duplicates(key).merge(fit.drop_duplicates(key + ["study"]), on=key, suffixes=("", "_fit"))
        same = m[np.isclose(m["rho"].astype(float), m["rho_fit"].astype(float), rtol=1e-6, atol=0)]
        out[study] = sorted(set(same["study_fit"]))
    return out


def _fit_part(fit: pd.DataFrame, fit_fc: np.ndarray, grid: np.ndarray) -> float:
    """Leave-one-study-out over the --fit studies (printed); returns gamma fitted on all of them."""
    err = np.abs(fit_fc - fit["target"].to_numpy(float))
    studies = fit["study"].to_numpy()
    loso, gammas = np.empty(len(fit)), {}
    for s in dict.fromkeys(studies):
        gammas[s] = fitted_gamma(err, grid, studies != s)
        loso[studies == s] = fit_fc[np.flatnonzero(grid == gammas[s])[0], studies == s]
    _report("--fit studies, each held out, gamma fitted on the others", fit, loso, gammas)
    g_all = fitted_gamma(err, grid, np.ones(len(fit), bool))
    print(f"  gamma fitted on all --fit studies: {g_all:.2f}")
    return g_all


def _test_part(test: pd.DataFrame, test_fc: np.ndarray, fit: pd.DataFrame, grid: np.ndarray, g_all: float) -> None:
    """The --test studies at gamma ``g_all`` (printed), their intervals over cells (replicates of a plan together),
    and which of them reuse a fit study's probe. Raises ExponentError: a test study with a fit study's plan."""
    fit_plans = {k.rpartition("@")[2]: k for k in fit["study"]}
    for k in dict.fromkeys(test["study"]):
        if k.rpartition("@")[2] in fit_plans:
            raise ExponentError(f"--test study {k} has the plan of --fit study {fit_plans[k.rpartition('@')[2]]} "
                                "(same plan sha256: a copy); a test study must be one never fitted on")
    _report(f"--test studies, gamma {g_all:.2f} fitted on the --fit studies", test,
            test_fc[np.flatnonzero(grid == g_all)[0]], dict.fromkeys(test["study"], g_all), clusters="cell")
    for study, fits in _shared_probes(test, fit).items():
        if fits:
            print(f"  {study} reuses the probe of --fit {', '.join(fits)} (same ratios): new runs, not a new probe")


def main(argv=None) -> int:
    """Command line (module docstring); 0 on success, 2 on bad input or an unreadable study (the message names it)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fit", nargs="+", required=True, metavar="STUDY", help="studies gamma is fitted on")
    p.add_argument("--test", nargs="*", default=[], metavar="STUDY", help="studies never fitted on")
    p.add_argument("--grid", nargs=3, type=float, default=[-1.0, 1.5, 0.05], metavar=("LOW", "HIGH", "STEP"))
    p.add_argument("--common", action="store_true", help="only runs the signal proxy covers too")
    a = p.parse_args(argv)
    try:
        grid = gamma_grid(*a.grid)
        both = sorted({Path(d).resolve() for d in a.fit} & {Path(d).resolve() for d in a.test})
        if both:
            raise ExponentError(f"{both[0]} is in both --fit and --test: a test study must be one never fitted on")
        if len({Path(d).resolve() for d in a.fit}) < 2:
            raise ExponentError("--fit needs 2 or more studies (one is held out at a time)")
        fit, fit_fc = _select(*_read(a.fit, grid), a.common)
        g_all = _fit_part(fit, fit_fc, grid)
        if a.test:
            _test_part(*_select(*_read(a.test, grid), a.common), fit, grid, g_all)
    except (ValueError, OSError) as e:  # ExponentError, a missing or damaged study (named by calib)
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _select(runs: pd.DataFrame, forecasts: np.ndarray, common: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """With ``common``, only the runs with a finite signal-proxy forecast (columns of ``forecasts`` kept alike)."""
    keep = np.isfinite(runs["forecast_signal_proxy"].to_numpy(float)) if common else np.ones(len(runs), bool)
    if not keep.any():
        raise ExponentError("no run has a signal-proxy forecast; leave out --common")
    return runs[keep].reset_index(drop=True), forecasts[:, keep]


if __name__ == "__main__":
    sys.exit(main())
