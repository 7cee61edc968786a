"""How good is p_hat? Brier score, AUC, Spearman rho and a reliability diagram vs empirical success.

Protocol (``gradprobe difficulty-eval``; :func:`evaluate_estimator`):

1. Sample S completions of each of M pool prompts from the policy; outcome y_ik in {0, 1} (NaN where
   the verifier gave none: ignored everywhere).
2. Split the prompts in two halves with a seeded permutation: the *fit* half (floor(M / 2) prompts)
   and the *eval* half (the rest). The logistic model is fitted on every outcome of the fit half only.
3. On each eval prompt, the first ``observed`` = k outcomes play the role of a training run's
   attempts (they update the Beta posterior); the remaining S - k outcomes are the *target*: the
   empirical success e_i = mean of the target outcomes. Nothing an estimator sees is in its target.
4. Estimators scored on the eval half:

   ``model``                p_model from the hidden-state + metadata logistic model (a never-attempted
                            prompt's p_hat);
   ``posterior``            the Beta posterior with the model as prior (n0 pseudo-counts) after the
                            k observed outcomes;
   ``pool_mean``            baseline: the fit half's mean success, the same for every prompt;
   ``posterior_pool_mean``  baseline: the Beta posterior with prior mean = pool mean (no hidden-state
                            model), same n0 and k observed outcomes.

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

import math
import warnings

import numpy as np

from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, EstimatorConfig

__all__ = ["ESTIMATORS", "BASELINES", "sample_outcomes", "split_halves", "brier_score", "auc_score",
           "spearman_rho", "reliability_bins", "binary_auc", "flat_group_outcomes", "flat_group_auc",
           "evaluate_estimator", "plot_reliability"]

#: G of :func:`flat_group_auc` when not given (a plan's default ``[train] group``), capped at the target size.
DEFAULT_GROUP_SIZE = 8

ESTIMATORS = ("model", "posterior")
BASELINES = ("pool_mean", "posterior_pool_mean")


def sample_outcomes(policy, task, problems, *, samples: int, sampling, seed: int = 0, ledger=None,
                    category: str = "eval", progress: bool = False, desc: str | None = None) -> np.ndarray:
    """0/1 outcomes of ``samples`` completions per problem.

    Parameters
    ----------
    policy : gradprobe.models.Policy
    task : Task
    problems : list[Problem], length M
    samples : int
        S >= 1.
    sampling : SamplingConfig
    seed : int
        Sampler seed.
    ledger : Ledger, optional
        Completion tokens to ``generated_tokens[category]``, generation FLOPs to ``flops[category]``
        and the wall time to ``device_seconds[category]``.
    category : str
        ``eval`` (measurement) or ``selection`` (probe samples of a selection rule).
    progress : bool
        A tqdm bar on stderr (completions done of M x S, rate and ETA); off for library callers.
    desc : str, optional
        The bar's label (default: ``category``).

    Returns
    -------
    ndarray (float64), shape (M, S)
        1.0 where the completion was scored correct, 0.0 where wrong, NaN where the scorer raised.
    """
    import time

    from ..ledger import forward_flops_per_token
    from ..rollout import HFSampler, score_completions
    from ..tasks.prompts import encode_prompt

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if not problems:
        return np.zeros((0, samples))
    prompt_ids = [list(encode_prompt(policy.tokenizer, p.question)) for p in problems]
    sampler = HFSampler(policy, seed=seed, progress=progress)  # tqdm on stderr, one bar over all M x S completions
    start = time.perf_counter()
    out = sampler.sample(prompt_ids, num_samples=samples, sampling=sampling, desc=desc or category)
    seconds = time.perf_counter() - start
    texts = policy.tokenizer.batch_decode([s.token_ids for s in out], skip_special_tokens=True)
    scores, _ = score_completions(task, texts, [p for p in problems for _ in range(samples)])
    y = np.array([1.0 if s == 1.0 else (math.nan if not math.isfinite(s) else 0.0) for s in scores])
    if ledger is not None:
        tokens = sum(len(s.token_ids) for s in out)
        ctx = float(np.mean([len(p) for p in prompt_ids])) + tokens / len(out) / 2
        ledger.add_generated(category, tokens)
        ledger.add_flops(category, tokens * forward_flops_per_token(policy.model, ctx))
        ledger.add_seconds(category, seconds)
    return y.reshape(len(problems), samples)


def split_halves(m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(fit, eval) prompt indices: a seeded permutation of range(m) cut at floor(m / 2)."""
    perm = np.random.default_rng([seed, 0xD1FF]).permutation(m)
    return np.sort(perm[: m // 2]), np.sort(perm[m // 2:])


def _flatten(p, y):
    """Per-prompt predictions (M,) repeated over each prompt's finite outcomes of y (M, K)."""
    y = np.asarray(y, dtype=np.float64)
    rep = np.repeat(np.asarray(p, dtype=np.float64)[:, None], y.shape[1], axis=1)
    ok = np.isfinite(y)
    return rep[ok], y[ok]


def brier_score(p, y) -> float | None:
    """Mean squared error of p_i (M,) against every finite outcome y_ik (M, K); None without outcomes."""
    pf, yf = _flatten(p, y)
    return float(np.mean((pf - yf) ** 2)) if yf.size else None


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


def _rate(y) -> float | None:
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(y)
    return float(y[ok].mean()) if ok.any() else None


def evaluate_estimator(ids, features, outcomes, *, observed: int, config: EstimatorConfig | None = None,
                       seed: int = 0, group_size: int | None = None) -> dict:
    """Score the estimator and the baselines on a held-out half of the prompts (module docstring).

    Parameters
    ----------
    ids : sequence of str, length M
        Unique prompt ids.
    features : ndarray, shape (M, F)
    outcomes : ndarray, shape (M, S)
        0/1 outcomes (NaN = missing), S > ``observed``.
    observed : int
        k >= 0, outcomes per eval prompt given to the posteriors (the rest are the target).
    config : EstimatorConfig, optional
    seed : int
        Seed of the fit/eval split.
    group_size : int, optional
        G of the flat-group AUC (default min(:data:`DEFAULT_GROUP_SIZE`, S - observed)).

    Returns
    -------
    dict
        ``estimators`` and ``baselines``: name -> {brier, auc, spearman_rho, mean_p, reliability,
        flat_auc (:func:`flat_group_auc`)};
        ``split`` (prompt counts), ``pool_mean_success`` (fit half), ``eval_target_success``,
        ``model_degenerate``, ``flat_group_size`` (G), ``notes`` (why a metric is None).

    Raises
    ------
    ValueError
        M < 2, mismatched shapes, ``observed`` not in [0, S - 1], or ``group_size`` not in
        [1, S - observed].
    """
    from .estimator import check_unique_ids

    y = np.asarray(outcomes, dtype=np.float64)
    x = np.asarray(features, dtype=np.float64)
    m = len(ids)
    if m < 2:
        raise ValueError(f"difficulty evaluation needs at least 2 prompts (a fit half and an eval half), got {m}")
    if y.ndim != 2 or y.shape[0] != m or x.shape[0] != m:
        raise ValueError(f"evaluate_estimator: {m} ids, features {x.shape}, outcomes {y.shape}; expected (M, F), (M, S)")
    if not 0 <= observed < y.shape[1]:
        raise ValueError(f"observed must lie in [0, S - 1] = [0, {y.shape[1] - 1}] so that a target remains, got {observed}")
    n_target = y.shape[1] - observed
    if group_size is None:
        group_size = min(DEFAULT_GROUP_SIZE, n_target)
    if not 1 <= group_size <= n_target:
        raise ValueError(f"group_size must lie in [1, S - observed] = [1, {n_target}] so that a whole group of target "
                         f"outcomes exists, got {group_size}")
    check_unique_ids(list(ids))
    config = config or EstimatorConfig()
    fit, ev = split_halves(m, seed)
    est = DifficultyEstimator(config)
    ok = np.isfinite(y[fit])
    est.observe([ids[i] for i in fit], x[fit], np.where(ok, y[fit], 0).sum(1), ok.sum(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateOutcomesWarning)
        est.fit()
    seen, target = y[ev][:, :observed], y[ev][:, observed:]
    s_obs = np.where(np.isfinite(seen), seen, 0).sum(1)
    n_obs = np.isfinite(seen).sum(1)
    n0 = config.prior_strength
    pool_mean = _rate(y[fit])
    c = config.p_clip
    prior_pool = float(np.clip(pool_mean if pool_mean is not None else 0.5, c, 1 - c))
    p_model = est.predict_model(x[ev])
    preds = {
        "model": p_model,
        "posterior": (n0 * p_model + s_obs) / (n0 + n_obs),
        "pool_mean": np.full(len(ev), pool_mean if pool_mean is not None else 0.5),
        "posterior_pool_mean": (n0 * prior_pool + s_obs) / (n0 + n_obs),
    }
    e = np.array([_rate(r) if _rate(r) is not None else math.nan for r in target])
    scored = {}
    for name, p in preds.items():
        scored[name] = {"brier": brier_score(p, target), "auc": auc_score(p, target),
                        "spearman_rho": spearman_rho(p, e), "mean_p": float(np.mean(p)),
                        "reliability": reliability_bins(p, target), "flat_auc": flat_group_auc(p, target, group_size)}
    notes = []
    tgt = target[np.isfinite(target)]
    if tgt.size and tgt.min() == tgt.max():
        notes.append(f"every target completion {'succeeded' if tgt[0] == 1 else 'failed'}: AUC and Spearman rho "
                     f"are undefined (None); only the Brier score is meaningful")
    flat = scored["posterior"]["flat_auc"]
    for kind in ("all_correct", "all_wrong", "flat"):
        if flat[kind]["reason"] is not None:
            notes.append(f"flat-group AUC ({kind.replace('_', '-')}, groups of {group_size}) is None: {flat[kind]['reason']}")
    if caught:
        notes.append(f"logistic model not fitted: {caught[0].message}")
    notes.append("pool_mean is constant across prompts: its AUC is 0.5 and its Spearman rho undefined by construction")
    return {"estimators": {k: scored[k] for k in ESTIMATORS}, "baselines": {k: scored[k] for k in BASELINES},
            "split": {"fit_prompts": int(len(fit)), "eval_prompts": int(len(ev)), "observed_per_eval_prompt": observed,
                      "target_per_eval_prompt": int(y.shape[1] - observed), "seed": seed},
            "pool_mean_success": pool_mean, "eval_target_success": _rate(target),
            "model_degenerate": bool(est.degenerate_), "prior_strength": n0, "flat_group_size": int(group_size),
            "notes": notes}


def plot_reliability(result: dict, path) -> None:
    """Reliability diagram (PNG) of every estimator and baseline in ``result`` (:func:`evaluate_estimator`).

    x: mean predicted p per bin, y: observed success frequency; marker area ~ completions in the bin;
    the diagonal is perfect calibration.
    """
    import seaborn as sns

    from ..figures import subplots

    fig, ax = subplots(figsize=(5.5, 5))  # off-screen: no backend switch (gradprobe.figures)
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    rows = {**result["estimators"], **result["baselines"]}
    for (name, r), color in zip(rows.items(), sns.color_palette("deep", len(rows))):
        rel = r["reliability"]
        if not rel["count"]:
            continue
        sizes = 20 + 180 * np.asarray(rel["count"]) / max(rel["count"])
        ax.plot(rel["mean_predicted"], rel["observed"], color=color, lw=1)
        brier = "n/a" if r["brier"] is None else f"{r['brier']:.3f}"
        ax.scatter(rel["mean_predicted"], rel["observed"], s=sizes, color=color, label=f"{name} (Brier {brier})")
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="predicted success p_hat (bin mean)",
           ylabel="observed success frequency", title="Reliability of p_hat on the eval half")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
