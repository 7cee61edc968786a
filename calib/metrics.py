"""Calibration metrics (accuracy points) and rank agreement between forecasters and training.

- bias = mean(forecast - realized): > 0 means the forecaster (or calibrator) overestimates;
- MAE = mean |forecast - realized|;
- coverage = share of rows whose realized gain lies in its prediction interval (closed);
- rank agreement within each study: Kendall's tau-b and Spearman's rho between the arms' forecast
  and realized mean gains vs grpo (grpo included, at its own 0), pooled over studies with a
  permutation p-value (:func:`pooled_rank_agreement`).

Pooling (a stratified permutation test; e.g. Good 2005, "Permutation, Parametric and Bootstrap
Tests of Hypotheses", sec. 3.5 on tests within blocks): the pooled tau is the mean of the
per-study tau-b weighted by each study's number of arm pairs n(n-1)/2 (without ties, exactly the
tau of all within-study pairs taken together); the pooled rho is the mean of the per-study rho
weighted by the number of arms. Under the null hypothesis that a forecaster orders arms no better
than chance, the realized means are exchangeable among the arms of each study, so the p-value
permutes them within every study independently (never across studies: arms of different studies
are never compared) and counts permutations whose pooled statistic is at least the observed one
(one-sided: agreement above chance). It is exact (every permutation enumerated) when the product
of the studies' n! is at most ``n_permutations``, otherwise Monte Carlo with p = (1 + #{>=}) / (1 + B)
(Phipson & Smyth 2010), seeded.

Ceiling of the rank agreement (:func:`oracle_kendall_tau`): the realized mean gains carry seed
noise, so even a forecaster that knew every arm's true mean would not order the realized means
perfectly. A parametric bootstrap plugs in the observed arm means as the truth and their standard
errors se_a = sd_a / sqrt(n_a) as the noise, draws realized'_a = mean_a + se_a z (z ~ N(0, 1)), and
averages tau-b(mean, realized') over draws (Efron & Tibshirani 1993, ch. 6, the parametric
bootstrap). Observed means are spread wider than the true ones by the same noise, so this is an
upper estimate of the ceiling; pooled over studies with the weights of the pooled tau.

Critical value of the rank agreement (``critical_kendall_tau`` of :func:`pooled_rank_agreement`): the smallest
pooled tau the same permutation test would call significant at one-sided level alpha (5%), read off the permutation
null distribution of the arms and studies ranked (the smallest attained null value v with p(v) <= alpha, p as the
test computes it; with Monte Carlo draws the observed tau is a candidate too, so that it is significant exactly
when it reaches the critical value). It is the smallest agreement these arms can show above chance: an observed
tau below it is not shown above chance whatever its point value; NaN where no attainable tau reaches alpha (too
few arms: e.g. one study of 3 arms, whose best p is 1/6; or arms whose tied forecasts or realized gains let several
permutations share the largest tau: 2 of 24 for one study of 4 arms with a tie, p 1/12), ``critical_reason`` then
saying why, with that smallest attainable p (:func:`_critical_reason`).

Interval of the pooled tau and rho (``kendall_tau_interval``, ``spearman_rho_interval`` of
:func:`pooled_rank_agreement`, :func:`calib.bootstrap.pooled_interval`): a 95% percentile study-cluster bootstrap, the conventions
of :mod:`calib.bootstrap` (5000 resamples, seed 0, the sorted ranked studies drawn with replacement by
:func:`calib.bootstrap.cluster_counts`). Each resample recomputes the same weighted mean of the per-study statistics
over the studies drawn (a study drawn twice counts twice); the arms within a study are not resampled, so the
interval is the spread over studies of the pooled statistic, not a test (the p-value above is the test). With fewer
than :data:`MIN_INTERVAL_STUDIES` ranked studies no interval is given, and a reason says so.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from .bootstrap import LEVEL, MIN_INTERVAL_STUDIES, RESAMPLES, SEED, check_settings, pooled_interval


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
        ``kendall_tau``, ``kendall_p``, ``spearman_rho``, ``spearman_p`` (scipy's two-sided
        p-values), ``n_arms``; NaN with fewer than 2 arms or a constant vector (no ranking).
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


def errors_by_entry(predicted, realized, entries, studies, *, skip=("outcome",)) -> dict:
    """Mean absolute error per probe entry: how far a forecaster was off on the runs of each reward.

    Parameters
    ----------
    predicted, realized : array-like, shape (n,)
        Held-out forecast and realized gain vs grpo per run (accuracy points).
    entries : array-like of str, shape (n,)
        Each run's probe entry key (``REWARD`` under grpo's loss, ``REWARD@LOSS_TYPE`` otherwise;
        :func:`gradprobe.probe_keys.entry_key`).
    studies : array-like of str, shape (n,)
        Each run's study.
    skip : tuple of str
        Entries left out: grpo's own reward under grpo's loss, whose arms (prompt selection, guidance)
        differ from grpo by something other than the reward.

    Returns
    -------
    dict
        entry -> ``{"mae": points, "runs": n, "studies": number of studies}``, sorted by entry; rows with a
        non-finite forecast or realized gain are left out.
    """
    d = pd.DataFrame({"p": np.asarray(predicted, float), "r": np.asarray(realized, float),
                      "e": np.asarray(entries, str), "s": np.asarray(studies, str)})
    d = d[np.isfinite(d["p"]) & np.isfinite(d["r"]) & ~d["e"].isin(skip)]
    return {e: {"mae": round(float((g["p"] - g["r"]).abs().mean()), 4), "runs": int(len(g)),
                "studies": int(g["s"].nunique())} for e, g in sorted(d.groupby("e"), key=lambda kv: kv[0])}


ONE_SEED = "an arm ranked has one seed: its seed noise, and so the ceiling, cannot be estimated"


def oracle_kendall_tau(means, standard_errors, *, draws: int = 2000, seed: int = 0) -> float:
    """Expected Kendall tau-b of the arms' true means with their realized means under seed noise.

    Parameters
    ----------
    means : array-like, shape (n_arms,)
        Realized mean gain of each arm (points), taken as the truth (module docstring).
    standard_errors : array-like, shape (n_arms,)
        Standard error of each mean (points; grpo's is that of its own mean, whose noise moves every other
        arm's gain). NaN (an arm of one seed: its noise is unknown) makes the ceiling NaN.
    draws, seed
        Parametric-bootstrap draws (``numpy.random.default_rng(seed)``).

    Returns
    -------
    float
        Mean tau-b over draws; NaN with fewer than 2 arms, constant means or an unknown standard error.
    """
    m = np.asarray(means, float)
    se = np.asarray(standard_errors, float)
    if m.size < 2 or np.ptp(m) == 0 or not np.isfinite(se).all():
        return math.nan
    y = m + se * np.random.default_rng(seed).standard_normal((draws, m.size))
    return float(np.nanmean(kendall_tau_b(m, y)))


def kendall_tau_b(x, Y) -> np.ndarray:
    """Kendall's tau-b of ``x`` with each row of ``Y`` (ties handled as in tau-b).

    Parameters
    ----------
    x : array-like, shape (n,)
    Y : array-like, shape (B, n) or (n,)

    Returns
    -------
    ndarray, shape (B,)
        sum_{i<j} s_x s_y / sqrt(sum s_x^2 * sum s_y^2) with s = sign of the pair's difference
        (Kendall 1945); NaN where either side is constant.
    """
    x, Y = np.asarray(x, float), np.atleast_2d(np.asarray(Y, float))
    i, j = np.triu_indices(x.size, k=1)
    sx, sy = np.sign(x[i] - x[j]), np.sign(Y[:, i] - Y[:, j])
    den = np.sqrt((sx ** 2).sum() * (sy ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, sy @ sx / np.where(den > 0, den, 1.0), np.nan)


def spearman_rho(x, Y) -> np.ndarray:
    """Spearman's rho (Pearson correlation of average ranks) of ``x`` with each row of ``Y``, shape (B,)."""
    x, Y = np.asarray(x, float), np.atleast_2d(np.asarray(Y, float))
    rx = stats.rankdata(x)
    rx = rx - rx.mean()
    ry = stats.rankdata(Y, axis=1)
    ry = ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx ** 2).sum() * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, ry @ rx / np.where(den > 0, den, 1.0), np.nan)


def ranking_table(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """Per (study, arm): mean of each score column and of the realized gain vs grpo, and ranks.

    Parameters
    ----------
    rows : DataFrame
        Calibration rows (:func:`calib.dataset.build_rows`) with the ``grpo`` rows (an arm of the
        ranking: forecast and realized 0) and the score ``columns`` (forecasts, cross-validated
        calibrated forecasts...); rows without a realized accuracy are left out.
    columns : sequence of str

    Returns
    -------
    DataFrame
        Columns study, arm, each score column, realized, realized_se (standard error of the mean over
        seeds, NaN with one seed), seeds, ``rank_<column>`` and
        ``rank_training`` (1 = best; ties share the lowest rank; NaN where the score is NaN). The score columns
        are rounded to 1e-9 points, so means equal but for float rounding tie (Kendall tau-b counts a tie as
        neither agreement nor disagreement).
    """
    columns = list(columns)
    df = rows[np.isfinite(rows["target"].astype(float))]
    agg = {c: (c, "mean") for c in columns}
    t = df.groupby(["study", "arm"], sort=True).agg(**agg, realized=("target", "mean"),
                                                     realized_se=("target", "sem"),
                                                     seeds=("target", "count")).reset_index()
    t[columns] = t[columns].astype(float).round(9)  # equal but for float rounding (a mean of one value): a tie
    for c in columns + ["realized"]:
        name = "rank_training" if c == "realized" else f"rank_{c}"
        t[name] = t.groupby("study")[c].rank(ascending=False, method="min")
    return t.sort_values(["study", "rank_training", "arm"]).reset_index(drop=True)


def check_n_permutations(n_permutations) -> None:
    """The check of ``n_permutations`` (:func:`pooled_rank_agreement`, ``calib.report_metrics``).

    Raises
    ------
    ValueError
        ``n_permutations`` is not a positive integer (0, -1, 2.5, True).
    """
    if isinstance(n_permutations, (bool, np.bool_)) or not isinstance(n_permutations, (int, np.integer)) \
            or n_permutations < 1:
        raise ValueError(f"n_permutations must be a positive integer (the permutations of the rank tests; e.g. "
                         f"9999), got {n_permutations!r}")


def critical_value(null: np.ndarray, exact: bool, alpha: float = 0.05, observed: float | None = None) -> float:
    """The smallest statistic the one-sided permutation test calls significant at level ``alpha``.

    Parameters
    ----------
    null : ndarray, shape (B,)
        The pooled statistic under each permutation (enumerated when ``exact``, else B Monte Carlo draws).
    exact : bool
        p(v) = #{null >= v} / B when exact, (1 + #{null >= v}) / (1 + B) otherwise (Phipson & Smyth 2010), the
        p-values :func:`pooled_rank_agreement` reports.
    alpha : float
        One-sided level in (0, 1).
    observed : float, optional
        The observed statistic, a candidate beside the null values (p counted against the null alone): with Monte
        Carlo draws it may fall between two drawn values and share the p of the next one up, so without it the
        critical value could lie above a statistic the test calls significant. With it, the observed statistic is
        significant exactly when it reaches the critical value, in both modes.

    Returns
    -------
    float
        min {v in null (and ``observed``) : p(v) <= alpha} (module docstring, critical value); NaN when no value
        reaches ``alpha`` or ``null`` holds no finite value.

    Raises
    ------
    ValueError
        ``alpha`` is not a number in (0, 1) (e.g. 5 for 5%).
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a level in (0, 1) (0.05 for 5%), got {alpha!r}")
    v = np.sort(np.asarray(null, float)[np.isfinite(null)])
    if not v.size:
        return math.nan
    cand = np.unique(np.r_[v, [observed]] if observed is not None and math.isfinite(observed) else v)
    at_least = v.size - np.searchsorted(v, cand - 1e-12, side="left")  # #{null >= c}, float ties counted
    p = at_least / v.size if exact else (1 + at_least) / (1 + v.size)
    ok = cand[p <= alpha * (1 + 1e-9)]
    return float(ok.min()) if ok.size else math.nan


def _intervals(studies, taus, w_tau, rhos, w_rho, boot: dict) -> dict:
    """The pooled tau's and rho's :func:`calib.bootstrap.pooled_interval` and its settings, as :func:`pooled_rank_agreement` gives."""
    tau_iv, tau_why = pooled_interval(taus, w_tau, studies, **boot)
    rho_iv, rho_why = pooled_interval(rhos, w_rho, studies, **boot)
    return {"kendall_tau_interval": tau_iv, "kendall_tau_interval_reason": tau_why, "spearman_rho_interval": rho_iv,
            "spearman_rho_interval_reason": rho_why,
            "interval_bootstrap": {**boot, "min_studies": MIN_INTERVAL_STUDIES, "clusters": "study",
                                   "method": "percentile, studies resampled with replacement"}}


def pooled_rank_agreement(table: pd.DataFrame, column: str, *, n_permutations: int = 9999, seed: int = 0,
                          bootstrap_resamples: int = RESAMPLES, bootstrap_level: float = LEVEL,
                          bootstrap_seed: int = SEED) -> dict:
    """Rank agreement of ``column`` with training within each study, pooled with a permutation p-value.

    Parameters
    ----------
    table : DataFrame
        :func:`ranking_table` (study, arm, ``column``, realized).
    column : str
        The score whose ranking is checked; arms where it is NaN are left out of their study.
    n_permutations : int
        Monte Carlo permutations when the exact enumeration would be larger (module docstring); at least 1.
    seed : int
        Of the Monte Carlo permutations.
    bootstrap_resamples, bootstrap_level, bootstrap_seed
        Of the intervals (:func:`calib.bootstrap.pooled_interval`; defaults 5000, 0.95, 0 as :mod:`calib.bootstrap`).

    Returns
    -------
    dict
        ``studies``: {study: :func:`rank_agreement` of its arms}; ``kendall_tau``, ``spearman_rho``
        (pooled); ``kendall_tau_interval``, ``spearman_rho_interval`` ([lo, hi], the percentile study-cluster
        bootstrap of :func:`calib.bootstrap.pooled_interval`; None with fewer than :data:`MIN_INTERVAL_STUDIES` ranked studies,
        ``kendall_tau_interval_reason``, ``spearman_rho_interval_reason`` then say why), ``interval_bootstrap``
        (its settings); ``p_kendall``, ``p_spearman`` (one-sided, permutation within studies);
        ``n_studies`` (with at least 2 ranked arms), ``n_arms`` (total), ``exact`` (bool),
        ``n_permutations`` (enumerated or drawn), ``oracle_kendall_tau`` (the pooled ceiling over the same
        arms, :func:`oracle_kendall_tau`; NaN when the table has no ``realized_se`` or a ranked arm has one
        seed, ``oracle_reason`` then says why), ``critical_kendall_tau`` (the smallest pooled tau this test calls
        significant at one-sided 5% on these arms, :func:`critical_value`; NaN where none can be, ``critical_reason``
        then saying why: :func:`_critical_reason`, else None). NaN statistics with no study to rank.

    Raises
    ------
    ValueError
        ``n_permutations`` is not a positive integer (:func:`check_n_permutations`), or bad bootstrap settings
        (:func:`calib.bootstrap.check_settings`).
    """
    check_n_permutations(n_permutations)
    check_settings(bootstrap_resamples, bootstrap_level)
    boot = {"resamples": bootstrap_resamples, "level": bootstrap_level, "seed": bootstrap_seed}
    per, blocks, ceilings, ranked = {}, [], [], []
    for study, sub in table.groupby("study", sort=True):
        sub = sub[np.isfinite(sub[column].astype(float)) & np.isfinite(sub["realized"].astype(float))]
        per[study] = rank_agreement(sub[column], sub["realized"])
        if len(sub) >= 2 and np.ptp(sub[column]) > 0 and np.ptp(sub["realized"]) > 0:
            blocks.append((sub[column].to_numpy(float), sub["realized"].to_numpy(float)))
            ranked.append(study)
            ceilings.append(oracle_kendall_tau(sub["realized"], sub["realized_se"]) if "realized_se" in sub
                            else math.nan)
    out = {"studies": per, "kendall_tau": math.nan, "spearman_rho": math.nan, "p_kendall": math.nan,
           "p_spearman": math.nan, "n_studies": len(blocks), "n_arms": int(sum(len(b[0]) for b in blocks)),
           "exact": False, "n_permutations": 0, "oracle_kendall_tau": math.nan, "oracle_reason": None,
           "critical_kendall_tau": math.nan, "critical_reason": NO_RANKED_STUDY, **_intervals([], [], [], [], [], boot)}
    if not blocks:
        return out
    total = math.prod(math.factorial(len(x)) for x, _ in blocks)
    exact = total <= n_permutations
    rng = np.random.default_rng(seed)
    perms = [_perms(y, exact, n_permutations, rng) for _, y in blocks]
    if exact:  # every combination of the studies' permutations (the product is small)
        idx = np.array(list(itertools.product(*[range(len(p)) for p in perms])))
        perms = [p[idx[:, k]] for k, p in enumerate(perms)]
    w_tau = np.array([len(x) * (len(x) - 1) / 2 for x, _ in blocks])
    w_rho = np.array([len(x) for x, _ in blocks], float)
    taus, rhos = [kendall_tau_b(x, y)[0] for x, y in blocks], [spearman_rho(x, y)[0] for x, y in blocks]
    tau_obs, rho_obs = float(np.average(taus, weights=w_tau)), float(np.average(rhos, weights=w_rho))
    tau_null = np.average(np.stack([kendall_tau_b(x, p) for (x, _), p in zip(blocks, perms)]), axis=0, weights=w_tau)
    rho_null = np.average(np.stack([spearman_rho(x, p) for (x, _), p in zip(blocks, perms)]), axis=0, weights=w_rho)
    critical = critical_value(tau_null, exact, observed=tau_obs)
    out.update(kendall_tau=tau_obs, spearman_rho=rho_obs, p_kendall=_p_value(tau_null, tau_obs, exact),
               p_spearman=_p_value(rho_null, rho_obs, exact), exact=exact, n_permutations=int(len(tau_null)),
               critical_kendall_tau=critical, critical_reason=None if math.isfinite(critical) else
               _critical_reason(tau_null, exact, tau_obs, blocks),
               oracle_kendall_tau=float(np.average(ceilings, weights=w_tau)) if np.isfinite(ceilings).all() else math.nan,
               oracle_reason=None if np.isfinite(ceilings).all() else (
                   ONE_SEED if "realized_se" in table else "the ranking table has no realized_se column"),
               **_intervals(ranked, taus, w_tau, rhos, w_rho, boot))
    return out


#: ``critical_reason`` of :func:`pooled_rank_agreement` when no study has two arms to rank.
NO_RANKED_STUDY = ("no study has 2 or more arms with distinct forecasts and realized gains to rank, so there is no "
                   "permutation test")


def _critical_reason(null: np.ndarray, exact: bool, observed: float, blocks: list, alpha: float = 0.05) -> str:
    """Why :func:`critical_value` found no critical tau (``null``: the pooled tau of each permutation, ``blocks``: each
    ranked study's (forecasts, realized) arrays): the smallest p any candidate attains, that of the largest tau, is
    above ``alpha``; said with that p, how many permutations reach it and what limits it (few arms, ties that let
    several permutations share the largest tau, or too few Monte Carlo draws)."""
    values = np.asarray(null, float)[np.isfinite(null)]
    top = max(values.max(), observed) if math.isfinite(observed) else values.max()
    reach = int(np.sum(values >= top - 1e-12))
    p = reach / values.size if exact else (1 + reach) / (1 + values.size)
    arms = sum(len(x) for x, _ in blocks)
    tied = sum(int(len(x) - np.unique(x).size + len(y) - np.unique(y).size) for x, y in blocks)
    why = (f"all {values.size} orderings of {arms} arms in {len(blocks)} stud{'y' if len(blocks) == 1 else 'ies'} "
           f"enumerated, {reach} of them reach{'es' * (reach == 1)} the largest tau" if exact else
           f"{values.size} Monte Carlo permutations drawn, p cannot go below 1/(1 + {values.size})")
    ties = (f"; ties ({tied} forecast or realized value(s) repeat another of their study) let several orderings "
            "share a tau" if exact and tied else "")
    more = "more arms or studies" if exact else "more permutations (n_permutations)"
    return (f"no pooled tau is significant at one-sided {alpha:.0%} on these arms: the smallest p the permutation test "
            f"can give is {p:.3g} > {alpha:g} ({why}{ties}); {more} would be needed")


def p_value_text(r: dict, key: str = "p_kendall", spec: str = ".3g") -> str:
    """How a report shows the permutation p-value ``r[key]`` of :func:`pooled_rank_agreement`'s result ``r``.

    A Monte Carlo p-value is (1 + #{>=}) / (1 + B) (module docstring): when no permutation of the B drawn reached
    the observed statistic it is 1 / (1 + B), the floor of the B permutations: a valid p-value, but the exact
    permutation p-value may lie below or (within Monte Carlo error, up to about 3 / B at 95%) above it, so it is
    shown as the floor it is: ``"0.0001 (the floor 1/(1+B): none of 9999 permutations reached it)"``. An exact
    p-value, or one above the floor, is shown as a number (``spec``); NaN or None as ``"n/a"``.
    """
    p = r.get(key)
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    b = int(r.get("n_permutations") or 0)
    if not r.get("exact") and b and p <= 1.0 / (1 + b) * (1 + 1e-9):
        return f"{format(p, spec)} (the floor 1/(1+B): none of {b} permutations reached it)"
    return format(p, spec)


def _p_value(null: np.ndarray, observed: float, exact: bool) -> float:
    """One-sided permutation p-value of ``observed`` against ``null``: #{>=} / B exact, (1 + #{>=}) / (1 + B) Monte
    Carlo (module docstring); float ties of equal statistics count as ">=" (1e-12)."""
    at_least = int(np.sum(null >= observed - 1e-12))
    return at_least / len(null) if exact else (1 + at_least) / (1 + len(null))


def _perms(y: np.ndarray, exact: bool, n: int, rng) -> np.ndarray:
    if exact:
        return np.array(list(itertools.permutations(y)))
    return np.stack([rng.permutation(y) for _ in range(n)])
