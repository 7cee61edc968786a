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
``*_interval``    [lo, hi] of brier, auc and spearman_rho, and ``flat_auc_interval`` {all_correct, all_wrong,
                  flat: [lo, hi]} of flat_auc: a seeded percentile bootstrap over the eval prompts, the same
                  resamples for every score (:func:`bootstrap_metrics`). None, with its reason, where the
                  bootstrap cannot measure the score's sampling error (the rule of the flat-group AUCs
                  extended to every score): the score is undefined; fewer than :data:`MIN_INTERVAL_PROMPTS`
                  eval prompts have a target outcome (one prompt is drawn alone in every resample); fewer than
                  half the resamples define the score; every resample drew the same prompts in the same
                  proportions (by chance, with two or three eval prompts: nothing was resampled); or the
                  resamples differ but every one gives the same score up to rounding (relative spread at most
                  :data:`NO_SPREAD`: the prompts do not differ in it, e.g. copies of one prompt), where a width
                  of 0 would read as a precision the data do not give. The one
                  exception is the AUC of a prediction constant over the prompts: 0.5 by construction on
                  every sample, so its [0.5, 0.5] is exact. Every interval given contains its score: an end
                  the score lies beyond is moved to it. The score is computed by scikit-learn or scipy on the
                  arrays and the resamples from counts, so a resample equal to the sample can differ from it
                  by an ulp, and a skewed bootstrap can put more than (1 - level) / 2 of its resamples on one
                  side of the score; the percentile interval then excludes its own estimate, and widening it
                  to the estimate can only raise its coverage. At least :data:`MIN_RESAMPLES` resamples
                  (:func:`check_resamples`);
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

import numbers

import numpy as np

from ..probe_settings.stages import MIN_BOOTSTRAP

__all__ = ["brier_score", "auc_score", "binary_auc", "flat_group_outcomes", "flat_group_auc", "spearman_rho",
           "reliability_bins", "success_rate", "bootstrap_metrics", "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_LEVEL",
           "MIN_INTERVAL_PROMPTS", "MIN_RESAMPLES", "check_resamples"]

#: Resamples and coverage of :func:`bootstrap_metrics` (``difficulty-eval``'s defaults).
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.90
#: The fewest bootstrap resamples of an interval (``--resamples`` of ``difficulty-eval`` and ``rank-prompts``): the
#: minimum of ``gradprobe probe --bootstrap``, for the same reason (:func:`check_resamples`).
MIN_RESAMPLES = MIN_BOOTSTRAP
#: Eval prompts with a target outcome below which :func:`bootstrap_metrics` gives no interval: one prompt is drawn
#: alone in every resample, so the resamples cannot vary with the sample of prompts.
MIN_INTERVAL_PROMPTS = 2
#: Relative spread (max - min over max(1, |value|)) of the resampled scores at or below which they count as all
#: equal: a few float64 ulps of rounding, far below any sampling error.
NO_SPREAD = 1e-12


def check_resamples(resamples, *, level: float, default: int, unit: str = "resamples", estimate: str = "the score",
                    where: str = "resamples (--resamples)") -> int:
    """``resamples`` (``--resamples``) as an int, checked: an integer of at least :data:`MIN_RESAMPLES`.

    A percentile interval at ``level`` is the (1 - level) / 2 and (1 + level) / 2 quantiles of the resamples (Efron &
    Tibshirani 1993, *An Introduction to the Bootstrap*, sec. 13.3): with a handful of resamples each bound is one or
    two resamples' values (with one, both bounds are the same value), which need not contain the estimate they bound
    and are no interval. ``gradprobe probe --bootstrap`` refuses fewer for the same reason
    (:class:`gradprobe.probe_settings.stages.RunSettings`). ``level`` (in (0, 1)), ``default``, ``unit`` (what a
    resample is called: ``"bootstrap refits"``), ``estimate`` (what the interval bounds) and ``where`` (the setting
    and its flag) word the message.

    Raises
    ------
    ValueError
        Naming ``where`` (``resamples (--resamples)``), the value and the minimum: not an integer (a bool is not),
        or fewer than :data:`MIN_RESAMPLES`.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, numbers.Integral):
        raise ValueError(f"{where} must be an integer, got {resamples!r}")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"{where} must be at least {MIN_RESAMPLES} {unit} (default {default}: a {level * 100:g}% "
                         f"percentile interval needs enough {unit} in each {(1 - level) * 50:g}% tail; with fewer its "
                         f"bounds are single {unit}, which need not contain {estimate}), got {resamples}")
    return int(resamples)


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
    return _flat_scored(p, y, group_size)[0]


def _flat_scored(p: np.ndarray, y: np.ndarray, group_size: int) -> tuple[dict, dict]:
    """One scoring of the flat groups, for :func:`flat_group_auc` and the bootstrap (:func:`_flat_groups`): (its
    dict, {kind: (rows (N,), labels (N,) 0/1 float64, reason of the point AUC or None, scores (N,))}), each group's
    prompt row, realized label and score (p^G, (1 - p)^G, p^G + (1 - p)^G); p (M,) and y (M, K) float64, G checked."""
    rows, ones, zeros = flat_group_outcomes(y, group_size)
    q = p[rows]
    pc, pw = q ** group_size, (1 - q) ** group_size
    point, groups = {"group_size": int(group_size), "groups": int(rows.size)}, {}
    for kind, labels, scores in (("all_correct", ones, pc), ("all_wrong", zeros, pw), ("flat", ones | zeros, pc + pw)):
        point[kind] = binary_auc(labels, scores)
        groups[kind] = (rows, labels.astype(np.float64), point[kind]["reason"], scores)
    return point, groups


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


def bootstrap_metrics(p, y, *, resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                      seed: int = 0, group_size: int | None = None) -> dict:
    """Percentile-bootstrap intervals of :func:`brier_score`, :func:`auc_score` and :func:`spearman_rho` over prompts,
    and of the three AUCs of :func:`flat_group_auc` when ``group_size`` is given.

    Each resample draws M prompts with replacement (a prompt with all its outcomes: the prompt is the unit, as its
    completions share its difficulty) and recomputes the three scores; the interval is the (1 - level) / 2 and
    (1 + level) / 2 quantiles of the resamples where the score is defined (Efron & Tibshirani 1993, *An Introduction
    to the Bootstrap*, ch. 6 and sec. 13.3). The predictions are held fixed, so an interval measures the eval set's
    sampling error given the fitted model. The same ``seed`` draws the same resamples for every estimator (paired).

    A resample is a count w_i of each prompt, so each score is computed from the counts, for all resamples at once
    (:func:`_resampled_scores`): the Brier score sum_i w_i L_i / sum_i w_i n_i (L_i the prompt's squared errors,
    n_i its outcomes: ``sklearn.metrics.brier_score_loss`` of the resampled completions); the AUC as the
    Mann-Whitney statistic of the resampled completions, ties 1/2 (what ``sklearn.metrics.roc_auc_score`` gives); rho
    as the Pearson correlation of the resampled prompts' average ranks (what ``scipy.stats.spearmanr`` gives); each
    equals the named function on the resampled arrays (tests/difficulty/test_difficulty_intervals_eval.py), at
    O(M) per resample instead of a scikit-learn call of a few ms. The flat-group AUCs are resampled the same way, on
    the same draws: a prompt drawn w_i times brings each of its groups w_i times, and each AUC is the Mann-Whitney
    statistic of the resampled groups (:func:`_resampled_flat_aucs`; equal to :func:`flat_group_auc` of the resampled
    prompts, tests/difficulty/test_flat_auc_interval.py).

    Parameters
    ----------
    p : array-like, shape (M,)
        Predicted success probability of each prompt.
    y : ndarray, shape (M, K)
        0/1 target outcomes, NaN = missing.
    resamples : int
        B >= :data:`MIN_RESAMPLES` (:func:`check_resamples`).
    level : float
        Coverage in (0, 1).
    seed : int
        Seeds the resampling.
    group_size : int, optional
        G in [1, K] of :func:`flat_group_auc`; None (default): no flat-group intervals.

    An interval is None, with its reason, where the bootstrap cannot measure the score's sampling error, and every
    interval given contains its score (the rule, and why, in the module docstring, ``*_interval``).

    Returns
    -------
    dict
        ``brier``, ``auc``, ``spearman_rho``: each [lo, hi] or None (the rule above); ``reason``: {score: None, or
        why its interval is None}; ``point``: {score: :func:`brier_score`, :func:`auc_score`, :func:`spearman_rho` of
        ``p`` and ``y`` (rho against each prompt's :func:`success_rate`), None where undefined}; ``undefined``:
        {score: resamples where it was not defined}. With ``group_size``, also ``flat_auc``: {``all_correct``,
        ``all_wrong``, ``flat``: [lo, hi] or None, by the same rule}, ``flat_auc_reason``: {kind: None, or why the
        interval is None: the point AUC's own :func:`binary_auc` reason (e.g. one class only) when it is undefined,
        else the rule's}, ``undefined["flat_auc"]``: {kind: resamples where it was not defined}, and
        ``flat_auc_point``: :func:`flat_group_auc` of ``p`` and ``y`` (the point AUCs, scored once for their reasons
        and the intervals).

    Raises
    ------
    ValueError
        ``level`` outside (0, 1), ``p`` and ``y`` of different lengths, ``group_size`` not in [1, K], or ``resamples``
        not an integer of at least :data:`MIN_RESAMPLES` (:func:`check_resamples`).
    """
    p, y = np.asarray(p, dtype=np.float64).reshape(-1), np.asarray(y, dtype=np.float64)
    if not 0 < level < 1 or y.ndim != 2 or len(y) != len(p):
        raise ValueError(f"bootstrap_metrics: need level in (0, 1) and y of shape (M, K) for M = {len(p)} predictions; "
                         f"got {level} and {y.shape}")
    resamples = check_resamples(resamples, level=level, default=BOOTSTRAP_RESAMPLES)
    point, groups = (None, None) if group_size is None else _flat_groups(p, y, group_size)
    rule = _Rule(resamples, level, int(np.isfinite(y).any(axis=1).sum()), bool(p.size == 0 or np.ptp(p) == 0))
    if rule.prompts:
        got, flat, rule.varied = _resampled(p, y, groups, resamples, seed)
    else:  # nothing to resample (M = 0 too): every score is undefined, its reason NO_OUTCOME (_Rule.interval)
        got = {name: [np.full(resamples, np.nan)] for name in _LABELS}
        flat = {kind: [np.full(resamples, np.nan)] for kind in FLAT_KINDS}
    out = {"undefined": {}, "reason": {}, "point": _point_scores(p, y)}
    for name, parts in got.items():
        out[name], out["undefined"][name], out["reason"][name] = rule.interval(
            np.concatenate(parts), out["point"][name], _LABELS[name], *_UNDEFINED[name], by_construction=name == "auc")
    if groups is not None:
        out["flat_auc"], out["flat_auc_reason"], out["undefined"]["flat_auc"] = _flat_intervals(groups, flat, rule,
                                                                                                 point)
        out["flat_auc_point"] = point
    return out


def _resampled(p: np.ndarray, y: np.ndarray, groups: dict | None, resamples: int,
               seed: int) -> tuple[dict, dict, bool]:
    """({score: list of arrays}, {flat kind: list of arrays}, varied): each score of :func:`bootstrap_metrics`'s
    ``resamples`` resamples, seeded by ``seed``, drawn in blocks of at most ~4M prompt counts; the flat-group AUCs
    only with ``groups`` (:func:`_flat_groups`); ``varied``: whether the resamples drew the prompts with an outcome
    in more than one set of proportions (:func:`_draws_vary`; else every score is the same in every resample,
    whatever the prompts are)."""
    rng = np.random.default_rng([seed, 0xB007])
    block = max(1, 4_000_000 // max(len(p), 1))  # resamples per block: at most ~4M counts in memory
    got = {"brier": [], "auc": [], "spearman_rho": []}
    flat = {kind: [] for kind in FLAT_KINDS}
    scored, first, varied = np.isfinite(y).any(axis=1), None, False
    for lo in range(0, resamples, block):
        b = min(block, resamples - lo)
        pick = rng.integers(0, len(p), (b, len(p)))
        w = np.bincount((np.arange(b)[:, None] * len(p) + pick).ravel(), minlength=b * len(p)).reshape(b, len(p))
        first, varied = _draws_vary(w[:, scored], first, varied)
        for name, values in _resampled_scores(p, y, w.astype(np.float64)).items():
            got[name].append(values)
        if groups is not None:
            for kind, values in _resampled_flat_aucs(groups, w.astype(np.float64)).items():
                flat[kind].append(values)
    return got, flat, varied


def _draws_vary(w: np.ndarray, first: np.ndarray | None, varied: bool) -> tuple[np.ndarray | None, bool]:
    """(the first draw, whether the draws vary) after the resamples ``w`` (b, M') of :func:`_resampled`: each row
    the counts of the prompts with an outcome in one resample. Every score is a function of the proportions of the
    counts (the Brier score a ratio of weighted sums, the AUC a ratio of weighted pair counts, rho a correlation of
    ranks that copying every prompt k times moves linearly), so draws of the same proportions give the same scores;
    the draws vary when one row is not proportional to ``first`` (a row of all zeros defines no score and is
    skipped). Compared in integers: exact."""
    w = w[w.sum(axis=1) > 0]
    if w.size == 0:
        return first, varied
    if first is None:
        first = w[0]
    return first, varied or bool((w * first.sum() != first[None, :] * w.sum(axis=1, keepdims=True)).any())


def _point_scores(p: np.ndarray, y: np.ndarray) -> dict:
    """:func:`bootstrap_metrics`'s ``point``: the Brier score, AUC and Spearman rho (against each prompt's
    :func:`success_rate`, NaN where it has no finite outcome) of ``p`` (M,) and ``y`` (M, K)."""
    e = np.array([np.nan if success_rate(r) is None else success_rate(r) for r in y])
    return {"brier": brier_score(p, y), "auc": auc_score(p, y), "spearman_rho": spearman_rho(p, e)}


#: Why every score, and so every interval, of :func:`bootstrap_metrics` is None when no prompt has an outcome.
NO_OUTCOME = "no prompt has a finite outcome"
#: Each score's name in a reason.
_LABELS = {"brier": "Brier score", "auc": "AUC", "spearman_rho": "Spearman rho"}
#: Each score's (reason of an undefined score, why a resample leaves it undefined).
_UNDEFINED = {
    "brier": (f"the Brier score is undefined: {NO_OUTCOME}",
              "they draw only prompts without a finite outcome"),
    "auc": ("the AUC is undefined: the outcomes hold one class only", "their outcomes hold one class only"),
    "spearman_rho": ("Spearman rho is undefined: the predictions or the prompts' success rates are constant",
                     "their predictions or success rates are constant"),
}


class _Rule:
    """When :func:`bootstrap_metrics` gives an interval, and the interval (the module docstring, ``*_interval``): the
    resamples B, the level, the prompts with a finite outcome, and whether the prediction is constant over them."""

    def __init__(self, resamples: int, level: float, prompts: int, constant: bool):
        self.resamples, self.level, self.prompts, self.constant = resamples, level, prompts, constant
        self.varied = False  # whether the resamples drew the prompts in more than one set of proportions

    def interval(self, values: np.ndarray, point, label: str, undefined_reason: str, why: str, *,
                 by_construction: bool = False) -> tuple[list | None, int, str | None]:
        """([lo, hi] or None, resamples where the score was undefined, reason or None) of one score: ``values`` (B,)
        its resamples (NaN where undefined), ``point`` its value on the sample (None where undefined),
        ``undefined_reason`` why the point is undefined, ``why`` why a resample leaves it undefined;
        ``by_construction``: an AUC, fixed at 0.5 by a constant prediction."""
        values = values[np.isfinite(values)]
        undefined = int(self.resamples - values.size)
        if self.prompts == 0:  # before the score's own reason (e.g. "one class only"): there is no outcome at all
            return None, undefined, f"the {label} is undefined: {NO_OUTCOME}"
        if point is None:
            return None, undefined, undefined_reason
        if self.prompts < MIN_INTERVAL_PROMPTS:
            drawn = "that prompt alone" if self.prompts == 1 else "the same prompts"
            return None, undefined, (f"only {self.prompts} prompt{'s' * (self.prompts != 1)} with an outcome: every "
                                     f"resample draws {drawn}, so the bootstrap cannot measure the sampling error; an "
                                     f"interval needs at least {MIN_INTERVAL_PROMPTS} prompts")
        if values.size * 2 < self.resamples:
            return None, undefined, (f"the {label} is undefined in {undefined} of {self.resamples} resamples ({why}); "
                                     "an interval needs it defined in at least half")
        if np.ptp(values) <= NO_SPREAD * max(1.0, float(np.abs(values).max())) and not (by_construction
                                                                                        and self.constant):
            if not self.varied:  # the same draw every time says nothing about the prompts
                return None, undefined, (f"every one of the {self.resamples} resamples drew the {self.prompts} "
                                         "prompts with an outcome in the same proportions (by chance: so few prompts "
                                         f"have few ways to be drawn), so each gives the same {label} and the "
                                         "bootstrap cannot measure its sampling error; give more resamples "
                                         "(--resamples) or more eval prompts")
            return None, undefined, (f"every resample gives the same {label} (the sample's) up to rounding: the "
                                     "prompts do not differ in it, so the bootstrap cannot measure its sampling error "
                                     "(a width of 0 would claim a precision the data do not give)")
        a = (1.0 - self.level) / 2.0
        lo, hi = np.quantile(values, [a, 1.0 - a]).tolist()
        return [min(lo, point), max(hi, point)], undefined, None


def _flat_intervals(groups: dict, flat: dict, rule: _Rule, point: dict) -> tuple[dict, dict, dict]:
    """({kind: [lo, hi] or None}, {kind: reason or None}, {kind: undefined resamples}) of :func:`bootstrap_metrics`
    from each flat-group AUC's resampled values (``flat``: kind -> list of arrays), by ``rule``; ``point``:
    :func:`flat_group_auc`'s dict, ``groups`` its groups (:func:`_flat_groups`)."""
    ivs, reasons, undefined = {}, {}, {}
    for kind, parts in flat.items():
        ivs[kind], undefined[kind], reasons[kind] = rule.interval(
            np.concatenate(parts), point[kind]["auc"], "AUC", groups[kind][2], "their groups hold one class only",
            by_construction=True)
    return ivs, reasons, undefined


#: The three AUCs of :func:`flat_group_auc`, in its order.
FLAT_KINDS = ("all_correct", "all_wrong", "flat")


def _flat_groups(p: np.ndarray, y: np.ndarray, group_size: int) -> tuple[dict, dict]:
    """:func:`_flat_scored` of the bootstrap's G, checked: ({:func:`flat_group_auc`'s dict}, {kind: (rows (N,), labels
    (N,) 0/1, reason of the point AUC or None, scores (N,))}); the point AUCs are scored once, here, and reused."""
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or \
            not 1 <= group_size <= y.shape[1]:
        raise ValueError(f"bootstrap_metrics: group_size must be an integer in [1, K] = [1, {y.shape[1]}] (outcomes "
                         f"per prompt), got {group_size!r}")
    return _flat_scored(p, y, group_size)


def _resampled_flat_aucs(groups: dict, w: np.ndarray) -> dict:
    """Each flat-group AUC (:func:`_flat_groups`) of each resample, NaN where one class only: w (B, M) the prompts'
    counts; a group counts as often as its prompt is drawn; the Mann-Whitney statistic, ties 1/2 (what
    ``sklearn.metrics.roc_auc_score`` gives). Computed over slices of resamples: at most ~4M group counts at once."""
    out = {}
    for kind, (rows, labels, _, scores) in groups.items():
        values = np.full(len(w), np.nan)
        if rows.size:
            step = max(1, 4_000_000 // rows.size)
            for lo in range(0, len(w), step):
                wg = w[lo: lo + step][:, rows]  # (b, N) each group's count
                values[lo: lo + step] = _weighted_auc(wg * labels, wg * (1.0 - labels), scores)
        out[kind] = values
    return out


def _tie_groups(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): the stable ascending order of ``v`` and where each run of equal values starts in it."""
    order = np.argsort(v, kind="stable")
    sv = v[order]
    return order, np.flatnonzero(np.r_[True, sv[1:] != sv[:-1]])


def _average_ranks(w: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based, ties averaged) of the prompts of each resample, w (B, M) counts of the M values v, as
    scipy.stats.rankdata gives for the resampled array, shape (B, M); and the distinct values drawn per resample."""
    order, starts = _tie_groups(v)
    wg = np.add.reduceat(w[:, order], starts, axis=1)  # (B, G) prompts drawn per tie group
    ranks_g = np.cumsum(wg, axis=1) - wg + (wg + 1.0) / 2.0
    ranks = np.empty_like(w)
    ranks[:, order] = np.repeat(ranks_g, np.diff(np.r_[starts, len(v)]), axis=1)
    return ranks, (wg > 0).sum(1)


def _weighted_auc(pos_w: np.ndarray, neg_w: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The Mann-Whitney AUC of each row (B,): ``pos_w``, ``neg_w`` (B, N) the positive and negative weights of N items
    (counts of resampled outcomes or groups), ``scores`` (N,) their scores; ties count 1/2 (what
    ``sklearn.metrics.roc_auc_score`` gives on the expanded arrays); NaN where a row has one class only."""
    order, starts = _tie_groups(scores)
    pos = np.add.reduceat(pos_w[:, order], starts, axis=1)
    neg = np.add.reduceat(neg_w[:, order], starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + 0.5 * neg)).sum(1) / (pos.sum(1) * neg.sum(1))


def _resampled_scores(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> dict:
    """Brier, AUC and Spearman rho of each resample (NaN where undefined), w (B, M) the prompts' counts
    (:func:`bootstrap_metrics`)."""
    ok = np.isfinite(y)
    n, s = ok.sum(1).astype(np.float64), np.where(ok, y, 0.0).sum(1)
    loss = np.where(ok, (p[:, None] - np.where(ok, y, 0.0)) ** 2, 0.0).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        brier = (w @ loss) / (w @ n)
        auc = _weighted_auc(w * s, w * (n - s), p)
        has = n > 0  # rho: prompts with a finite empirical success e_i
        e = s[has] / n[has]
        wk = w[:, has]
        rp, kp = _average_ranks(wk, p[has])
        re, ke = _average_ranks(wk, e)
        total = wk.sum(1)
        dp = rp - ((wk * rp).sum(1) / total)[:, None]
        de = re - ((wk * re).sum(1) / total)[:, None]
        rho = (wk * dp * de).sum(1) / np.sqrt((wk * dp ** 2).sum(1) * (wk * de ** 2).sum(1))
    rho = np.where((kp >= 2) & (ke >= 2), np.clip(rho, -1.0, 1.0), np.nan)
    return {"brier": brier, "auc": auc, "spearman_rho": rho}
