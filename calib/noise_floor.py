"""How small a forecast's error can be on given runs: the seed-noise floor, and errors on arm means.

A forecaster scored run by run (``calib report``'s MAE) is compared with one run's realized gain vs
grpo, which carries that run's own seed noise. Model each run of arm a as y = mu_a + e with
e ~ N(0, sigma_a^2) independent across seeds. Then even the ideal forecaster, which knows mu_a exactly,
has a run-level mean absolute error of

    E|y - mu_a| = sigma_a sqrt(2 / pi)                                   (half-normal mean)

so no forecaster's MAE on these runs can be expected below that. It is estimated without assuming
mu_a, from the seeds' pairwise differences (Gini's mean difference; David 1968, "Miscellanea: Gini's
mean difference rediscovered", Biometrika 55(3), E|y_i - y_j| = 2 sigma / sqrt(pi) under normality):

    floor_a = mean_{i<j} |y_i - y_j| / sqrt(2),                           an unbiased estimate of
                                                                           sigma_a sqrt(2/pi)

and the **run-level floor** is the mean of floor_a over the runs (each run carries its arm's value),
with the study-cluster bootstrap interval of :mod:`calib.bootstrap`. Arms with one seed have no
estimate and are counted apart. The floor is a lower bound on what is reachable: it leaves out the
noise of grpo's own mean (the same for every arm of a study) and any error of the forecaster.

On **arm means** (what a study reports: the mean over an arm's seeds), the error of forecaster f on
arm a is |mean_runs forecast - mean_runs realized|, and its floor is floor_a / sqrt(n_a) (the mean of
n_a seeds has standard deviation sigma_a / sqrt(n_a)). :func:`arm_level_errors` gives both, averaged
over arms (each arm once), with study-cluster bootstrap intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .bootstrap import cluster_mean_interval

__all__ = ["arm_seed_noise", "seed_noise_floor", "arm_level_errors", "NO_SEEDS"]

METHOD = ("floor_a = mean over pairs of seeds |y_i - y_j| / sqrt(2) (Gini mean difference), an unbiased estimate "
          "of E|y - mu_a| = sigma_a sqrt(2/pi) for normal seed noise; run level: mean of floor_a over runs; arm "
          "means: floor_a / sqrt(n_a); intervals: study-cluster bootstrap (calib.bootstrap)")


NO_SEEDS = "no arm has 2 or more seeds with a realized gain: the seed noise cannot be estimated"


def arm_seed_noise(realized, arms, studies) -> pd.DataFrame:
    """Per arm: its seeds and floor_a = mean_{i<j} |y_i - y_j| / sqrt(2) (module docstring).

    Parameters
    ----------
    realized : array-like of float, shape (n_runs,)
        Realized gain vs grpo of each run (accuracy points).
    arms, studies : array-like of str, shape (n_runs,)
        Each run's arm and study; an arm is (study, arm).

    Returns
    -------
    DataFrame
        One row per arm: study, arm, seeds (runs with a finite gain), realized (their mean), floor (points;
        NaN for an arm with one seed).

    Raises
    ------
    ValueError
        Lengths differ (the message names the three inputs).
    """
    y = np.asarray(realized, np.float64).ravel()
    a, s = np.asarray(arms, dtype=object).ravel(), np.asarray(studies, dtype=object).ravel()
    if not (y.shape == a.shape == s.shape):
        raise ValueError(f"realized ({y.size}), arms ({a.size}) and studies ({s.size}) must have one entry per run")
    d = pd.DataFrame({"study": s, "arm": a, "y": y})
    d = d[np.isfinite(d["y"])]
    recs = []
    for (study, arm), g in d.groupby(["study", "arm"], sort=True):
        v = g["y"].to_numpy()
        i, j = np.triu_indices(v.size, k=1)
        floor = float(np.abs(v[i] - v[j]).mean() / math.sqrt(2.0)) if v.size >= 2 else math.nan
        recs.append({"study": study, "arm": arm, "seeds": int(v.size), "realized": float(v.mean()), "floor": floor})
    return pd.DataFrame(recs, columns=["study", "arm", "seeds", "realized", "floor"])


def seed_noise_floor(realized, arms, studies, **settings) -> dict:
    """The run-level seed-noise floor of the MAE on these runs, with its study-cluster interval.

    Parameters
    ----------
    realized, arms, studies
        As :func:`arm_seed_noise`.
    **settings
        ``resamples``, ``level``, ``seed`` of :func:`calib.bootstrap.cluster_mean_interval`.

    Returns
    -------
    dict
        ``estimate`` (points; NaN when no arm has 2 seeds), ``interval`` [lo, hi] or None, ``reason``,
        ``runs`` (in the mean), ``arms`` (with 2 or more seeds), ``single_seed_arms`` (left out),
        ``method``.
    """
    per = arm_seed_noise(realized, arms, studies)
    ok = per[np.isfinite(per["floor"])]
    values = np.repeat(ok["floor"].to_numpy(), ok["seeds"].to_numpy())
    clusters = np.repeat(ok["study"].to_numpy(), ok["seeds"].to_numpy())
    ci = cluster_mean_interval(values, clusters, **settings)
    reason = NO_SEEDS if values.size == 0 else ci.reason
    return {"estimate": ci.estimate, "interval": None if ci.interval is None else list(ci.interval),
            "reason": reason, "runs": int(values.size), "arms": int(len(ok)),
            "single_seed_arms": int((per["seeds"] == 1).sum()), "method": METHOD}


def arm_level_errors(predicted, realized, arms, studies, **settings) -> dict:
    """A forecaster's mean absolute error on arm means, beside the arm means' own noise floor.

    Parameters
    ----------
    predicted, realized : array-like of float, shape (n_runs,)
        Held-out forecast and realized gain vs grpo per run (points); runs where either is not finite
        are left out.
    arms, studies : array-like of str, shape (n_runs,)
    **settings
        As :func:`seed_noise_floor`.

    Returns
    -------
    dict
        ``mae`` {estimate, interval, reason} over arms (each arm once: |mean forecast - mean realized|),
        ``floor`` {estimate, interval, reason} over the arms with 2 or more seeds (floor_a / sqrt(n_a)),
        ``arms``, ``floor_arms``.

    Raises
    ------
    ValueError
        Lengths differ.
    """
    p, y = np.asarray(predicted, np.float64).ravel(), np.asarray(realized, np.float64).ravel()
    if p.shape != y.shape:
        raise ValueError(f"predicted ({p.size}) and realized ({y.size}) must have one entry per run")
    ok = np.isfinite(p) & np.isfinite(y)
    a, s = np.asarray(arms, dtype=object).ravel()[ok], np.asarray(studies, dtype=object).ravel()[ok]
    d = pd.DataFrame({"study": s, "arm": a, "p": p[ok], "y": y[ok]})
    means = d.groupby(["study", "arm"], sort=True).agg(p=("p", "mean"), y=("y", "mean")).reset_index()
    noise = arm_seed_noise(y[ok], a, s).set_index(["study", "arm"])
    err = cluster_mean_interval((means["p"] - means["y"]).abs().to_numpy(), means["study"].to_numpy(), **settings)
    fl = noise[np.isfinite(noise["floor"])]
    floor = cluster_mean_interval((fl["floor"] / np.sqrt(fl["seeds"])).to_numpy(),
                                  fl.index.get_level_values("study").to_numpy(), **settings)
    floor = _pack(floor) if len(fl) else {**_pack(floor), "reason": NO_SEEDS}
    return {"mae": _pack(err), "floor": floor, "arms": int(len(means)), "floor_arms": int(len(fl)),
            "method": METHOD}


def _pack(c) -> dict:
    return {"estimate": c.estimate, "interval": None if c.interval is None else list(c.interval), "reason": c.reason}
