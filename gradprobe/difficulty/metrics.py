"""Scores of predicted success probabilities p against 0/1 outcomes (NaN = no outcome, ignored):
the metrics of :func:`gradprobe.difficulty.evaluate.evaluate_estimator`.

Metrics (each over the eval half's target outcomes):

``brier``         (1 / N) sum_ik (p_i - y_ik)^2 over target completions (Brier 1950, "Verification
                  of forecasts expressed in terms of probability", eq. 1, two classes); lower is better;
``auc``           ROC AUC of p_i for the target outcomes (``sklearn.metrics.roc_auc_score``); None
                  when the targets hold one class only;
``spearman_rho``  Spearman rank correlation of p_i with e_i across prompts (``scipy.stats.spearmanr``);
                  None when either is constant (e.g. a constant baseline, or a policy that never
                  succeeds);
``reliability``   10 equal-width bins of p: mean predicted, observed frequency and completion count
                  per non-empty bin (the data of the reliability diagram, Murphy & Winkler 1977);
``flat_auc``      can p_i tell a *flat* (zero-variance, zero-advantage) group before rollout, the
                  question a pre-rollout filter such as GRESO (Zheng et al. 2025, arXiv 2506.02177)
                  answers from history? Each eval prompt's target outcomes are cut into consecutive
                  groups of G completions (``group_size``; default min(8, S - k), 8 being a plan's
                  default ``[train] group``); a group is all-correct when every finite outcome is 1,
                  all-wrong when every finite outcome is 0 (at least one finite outcome; a group with
                  none is left out). Under the estimator, with completions independent Bernoulli(p_i):
                  P(all correct) = p_i^G, P(all wrong) = (1 - p_i)^G, P(flat) = p_i^G + (1 - p_i)^G;
                  each is scored by ROC AUC (``sklearn.metrics.roc_auc_score``) against the realized
                  group outcome (:func:`flat_group_auc`). x -> x^G is increasing, so the all-correct
                  (all-wrong) AUC equals the AUC of p_i (of 1 - p_i) on those labels; G enters through
                  the labels. None with a ``reason`` when the groups hold one class only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["brier_score", "auc_score", "binary_auc", "flat_group_outcomes", "flat_group_auc", "spearman_rho",
           "reliability_bins", "success_rate"]


def _flatten(p, y):
    """Per-prompt predictions (M,) repeated over each prompt's finite outcomes of y (M, K)."""
    y = np.asarray(y, dtype=np.float64)
    rep = np.repeat(np.asarray(p, dtype=np.float64)[:, None], y.shape[1], axis=1)
    ok = np.isfinite(y)
    return rep[ok], y[ok]


def brier_score(p, y) -> float | None:
    """Brier score (Brier 1950: mean squared error of a probability) of p_i (M,) against every finite outcome
    y_ik in {0, 1} (M, K), by ``sklearn.metrics.brier_score_loss``; None without outcomes. Raises scikit-learn's
    ValueError for a p outside [0, 1] or NaN, or an outcome other than 0 or 1 (``evaluate_estimator`` refuses such
    outcomes first, naming them, and its predictions are probabilities)."""
    from sklearn.metrics import brier_score_loss

    pf, yf = _flatten(p, y)
    return float(brier_score_loss(yf, pf, pos_label=1)) if yf.size else None


def auc_score(p, y) -> float | None:
    """ROC AUC of p_i (M,) for the finite outcomes y_ik (M, K); None when they hold one class only."""
    from sklearn.metrics import roc_auc_score

    pf, yf = _flatten(p, y)
    if yf.size == 0 or yf.min() == yf.max():
        return None
    return float(roc_auc_score(yf, pf))


def binary_auc(labels, scores) -> dict:
    """ROC AUC of ``scores`` for 0/1 ``labels`` (``sklearn.metrics.roc_auc_score``), never raising.

    Parameters
    ----------
    labels : array-like of bool or 0/1, shape (N,)
        1 = the event happened (e.g. the group was all correct).
    scores : array-like of float, shape (N,)
        Higher = the event predicted more likely. Ties count 1/2.

    Returns
    -------
    dict
        ``auc`` (float, or None when the labels hold one class only or N = 0), ``positives`` and
        ``negatives`` (counts), ``reason`` (None, or why ``auc`` is None).

    Raises
    ------
    ValueError
        Mismatched lengths or a non-finite score.
    """
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"binary_auc: {y.size} labels but {s.size} scores")
    if not np.all(np.isfinite(s)):
        raise ValueError("binary_auc: scores hold NaN or inf")
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if pos + neg != y.size:
        raise ValueError("binary_auc: labels must be 0 or 1")
    if pos == 0 or neg == 0:
        reason = ("no groups" if y.size == 0 else
                  f"all {y.size} groups {'positive' if neg == 0 else 'negative'}: one class only, AUC undefined")
        return {"auc": None, "positives": pos, "negatives": neg, "reason": reason}
    return {"auc": float(roc_auc_score(y, s)), "positives": pos, "negatives": neg, "reason": None}


def flat_group_outcomes(y, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut each prompt's outcomes into consecutive groups of G and say which groups were flat.

    Parameters
    ----------
    y : ndarray, shape (M, K)
        0/1 outcomes, NaN = missing.
    group_size : int
        G >= 1; floor(K / G) groups per prompt (the last K mod G outcomes are left out).

    Returns
    -------
    prompt : ndarray of int, shape (N,)
        Row of ``y`` of each group (groups without a finite outcome are left out).
    all_correct, all_wrong : ndarray of bool, shape (N,)
        Every finite outcome of the group is 1 (resp. 0).

    Raises
    ------
    ValueError
        G < 1 or ``y`` not 2-D.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"flat_group_outcomes: outcomes must be (M, K), got shape {y.shape}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    n_groups = y.shape[1] // group_size
    g = y[:, : n_groups * group_size].reshape(y.shape[0], n_groups, group_size)
    finite = np.isfinite(g)
    has = finite.any(axis=2)
    ones = np.where(finite, g == 1, True).all(axis=2)
    zeros = np.where(finite, g == 0, True).all(axis=2)
    rows = np.repeat(np.arange(y.shape[0])[:, None], n_groups, axis=1)
    return rows[has], ones[has], zeros[has]


def flat_group_auc(p, y, group_size: int) -> dict:
    """AUC of "this group of G completions will be flat" from p_i (module docstring, ``flat_auc``).

    Parameters
    ----------
    p : array-like, shape (M,)
        Predicted success probability of each prompt.
    y : ndarray, shape (M, K)
        0/1 outcomes (NaN = missing), K >= G.
    group_size : int
        G >= 1.

    Returns
    -------
    dict
        ``group_size``, ``groups`` (N scored), and for each of ``all_correct`` (score p^G),
        ``all_wrong`` (score (1 - p)^G) and ``flat`` (score p^G + (1 - p)^G) the
        :func:`binary_auc` dict (``auc``, ``positives``, ``negatives``, ``reason``).

    Raises
    ------
    ValueError
        G < 1, G > K (no complete group: the message names ``group_size``), or mismatched shapes.
    """
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] != p.size:
        raise ValueError(f"flat_group_auc: {p.size} predictions but outcomes of shape {y.shape}; expected (M, K)")
    if group_size > y.shape[1]:
        raise ValueError(f"group_size ({group_size}) exceeds the {y.shape[1]} target outcomes per prompt, so no "
                         f"group is complete; lower group_size or sample more completions")
    rows, ones, zeros = flat_group_outcomes(y, group_size)
    q = p[rows]
    pc, pw = q ** group_size, (1 - q) ** group_size
    return {"group_size": int(group_size), "groups": int(rows.size),
            "all_correct": binary_auc(ones, pc), "all_wrong": binary_auc(zeros, pw),
            "flat": binary_auc(ones | zeros, pc + pw)}


def spearman_rho(p, e) -> float | None:
    """Spearman rho of p (M,) and e (M,) over prompts where e is finite; None when either is constant."""
    from scipy.stats import spearmanr

    p, e = np.asarray(p, dtype=np.float64), np.asarray(e, dtype=np.float64)
    ok = np.isfinite(e)
    p, e = p[ok], e[ok]
    if p.size < 2 or np.ptp(p) == 0 or np.ptp(e) == 0:
        return None
    return float(spearmanr(p, e).statistic)


def reliability_bins(p, y, n_bins: int = 10) -> dict:
    """Reliability-diagram data: equal-width bins of p over [0, 1], non-empty bins only.

    Returns
    -------
    dict of lists
        ``mean_predicted``, ``observed`` (frequency of y = 1), ``count`` (completions) per bin.
    """
    pf, yf = _flatten(p, y)
    idx = np.clip((pf * n_bins).astype(int), 0, n_bins - 1)
    out = {"mean_predicted": [], "observed": [], "count": []}
    for b in range(n_bins):
        sel = idx == b
        if sel.any():
            out["mean_predicted"].append(float(pf[sel].mean()))
            out["observed"].append(float(yf[sel].mean()))
            out["count"].append(int(sel.sum()))
    return out



def success_rate(y) -> float | None:
    """Mean of the finite outcomes of ``y`` (any shape), None when there is none."""
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(y)
    return float(y[ok].mean()) if ok.any() else None

