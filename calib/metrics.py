"""Calibration metrics (accuracy points) and rank agreement between the probe and training.

- bias = mean(predicted - realized): > 0 means the probe (or calibrator) overestimates;
- MAE = mean |predicted - realized|;
- coverage = share of rows whose realized gain lies in its prediction interval (closed);
- Kendall's tau-b and Spearman's rho (:func:`scipy.stats.kendalltau`, :func:`scipy.stats.spearmanr`)
  between the arms' predicted and realized mean gains, per (model, task, budget).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats


def bias(predicted, realized) -> float:
    """Mean of predicted - realized (points); NaN for no rows."""
    d = np.asarray(predicted, float) - np.asarray(realized, float)
    return float(d.mean()) if d.size else math.nan


def mae(predicted, realized) -> float:
    """Mean absolute error (points); NaN for no rows."""
    d = np.abs(np.asarray(predicted, float) - np.asarray(realized, float))
    return float(d.mean()) if d.size else math.nan


def coverage(lower, upper, realized) -> float:
    """Share of rows with lower <= realized <= upper; rows with a NaN bound are not counted."""
    lo, hi, y = (np.asarray(a, float) for a in (lower, upper, realized))
    ok = ~(np.isnan(lo) | np.isnan(hi))
    return float(((lo <= y) & (y <= hi))[ok].mean()) if ok.any() else math.nan


def rank_agreement(predicted, realized) -> dict:
    """Kendall's tau-b and Spearman's rho of two score vectors over the same arms.

    Parameters
    ----------
    predicted, realized : array-like, shape (n_arms,)

    Returns
    -------
    dict
        ``kendall_tau``, ``kendall_p``, ``spearman_rho``, ``spearman_p``, ``n_arms``; NaN with fewer
        than 2 arms or a constant vector (no ranking to compare).
    """
    p, r = np.asarray(predicted, float), np.asarray(realized, float)
    out = {"kendall_tau": math.nan, "kendall_p": math.nan, "spearman_rho": math.nan, "spearman_p": math.nan,
           "n_arms": int(p.size)}
    if p.size < 2 or np.ptp(p) == 0 or np.ptp(r) == 0:
        return out
    kt = stats.kendalltau(p, r)
    sr = stats.spearmanr(p, r)
    out.update(kendall_tau=float(kt.statistic), kendall_p=float(kt.pvalue),
               spearman_rho=float(sr.statistic), spearman_p=float(sr.pvalue))
    return out


def ranking_table(rows: pd.DataFrame, *, calibrated: pd.Series | None = None) -> pd.DataFrame:
    """Per (model, task, budget, arm): mean predicted, calibrated and realized gain vs GRPO, and ranks.

    Parameters
    ----------
    rows : DataFrame
        Calibration rows (:func:`calib.dataset.build_rows`), the ``grpo`` rows included (it is an arm
        of the ranking: predicted 0, realized 0 when paired).
    calibrated : Series, optional
        Calibrated gain per row (same index as ``rows``, e.g. cross-validated); NaN rows (grpo, which
        is not calibrated) count as 0, its gain vs itself.

    Returns
    -------
    DataFrame
        Columns model, task, budget, arm, predicted, calibrated, realized, seeds, rank_probe,
        rank_calibrated, rank_training (1 = best; ties share the lowest rank).
    """
    df = rows.copy()
    df["calibrated"] = np.nan if calibrated is None else calibrated.reindex(df.index)
    df.loc[df["is_reference"].astype(bool), "calibrated"] = 0.0
    g = df.groupby(["model", "task", "budget", "arm"], sort=True)
    t = g.agg(predicted=("predicted_gain", "mean"), calibrated=("calibrated", "mean"),
              realized=("target", "mean"), seeds=("target", "count")).reset_index()
    keys = ["model", "task", "budget"]
    for col, name in (("predicted", "rank_probe"), ("calibrated", "rank_calibrated"), ("realized", "rank_training")):
        t[name] = t.groupby(keys)[col].rank(ascending=False, method="min")
    return t.sort_values(keys + ["rank_training"]).reset_index(drop=True)


def ranking_metrics(table: pd.DataFrame, column: str = "predicted") -> dict:
    """Rank agreement of ``column`` with ``realized`` per (model, task, budget), and their mean.

    Returns
    -------
    dict
        ``groups``: {"model|task|budget": :func:`rank_agreement`}; ``kendall_tau``, ``spearman_rho``:
        means over groups with a defined value (NaN if none).
    """
    groups = {}
    for (m, t, b), sub in table.groupby(["model", "task", "budget"], sort=True):
        ok = sub[column].notna()
        groups[f"{m}|{t}|{b}"] = rank_agreement(sub.loc[ok, column], sub.loc[ok, "realized"])
    taus = [g["kendall_tau"] for g in groups.values() if not math.isnan(g["kendall_tau"])]
    rhos = [g["spearman_rho"] for g in groups.values() if not math.isnan(g["spearman_rho"])]
    return {"groups": groups, "kendall_tau": float(np.mean(taus)) if taus else math.nan,
            "spearman_rho": float(np.mean(rhos)) if rhos else math.nan}
