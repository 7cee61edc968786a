"""How good is p_hat? Brier score, AUC, Spearman rho and a reliability diagram vs empirical success.

Protocol (``gradprobe difficulty-eval``; :func:`evaluate_estimator`):

1. Sample S completions of each of M pool prompts from the policy; outcome y_ik in {0, 1} (NaN where
   the verifier gave none: ignored everywhere).
2. Split the prompts in two halves with a seeded permutation: the *fit* half (floor(M / 2) prompts)
   and the *eval* half (the rest); copies of one prompt text stay in one half (:func:`split_halves`).
   The logistic model is fitted on every outcome of the fit half only.
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

Metrics (each over the eval half's target outcomes; formulas and sources in
:mod:`gradprobe.difficulty.metrics`): ``brier``, ``auc``, ``spearman_rho``, each with its 90% interval from a
seeded percentile bootstrap over the eval prompts (``brier_interval``...; :func:`~gradprobe.difficulty.metrics.
bootstrap_metrics`), ``reliability`` (10 bins) and ``flat_auc`` (can p_i tell a flat, zero-advantage group of G
completions before rollout?) with its intervals from the same resamples (``flat_auc_interval``). Every interval
contains its score; it is None, its reason in ``brier_interval_reason``... and in ``notes`` (every estimator's and
baseline's, identical reasons said once), where the bootstrap cannot measure the sampling error: no eval prompt with
a target (every score None too), fewer than 2, every resample drawing the prompts in the same proportions (by
chance, with two or three), or every resample giving the same score (no spread: a width of 0 would read as
precision; the rule of :func:`~gradprobe.difficulty.metrics.bootstrap_metrics`). ``resamples`` is at least 10
(:data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`, as ``gradprobe probe --bootstrap``).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import numbers
import warnings

import numpy as np

from .estimator import (DegenerateOutcomesWarning, DifficultyEstimator, EstimatorConfig, check_features,
                        check_unique_ids)
from .metrics import (BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, auc_score, binary_auc, bootstrap_metrics, brier_score,
                      check_resamples, flat_group_auc, flat_group_outcomes, reliability_bins, spearman_rho,
                      success_rate)
from ..ledger import forward_flops_per_token
from ..tasks.base import prompt_key
from ..tasks.prompts import encode_prompt
from .reliability_plot import plot_reliability


__all__ = ["ESTIMATORS", "BASELINES", "sample_outcomes", "split_halves", "brier_score", "auc_score",
           "spearman_rho", "reliability_bins", "binary_auc", "flat_group_outcomes", "flat_group_auc",
           "evaluate_estimator", "prompt_groups", "plot_reliability"]


#: The scores of every estimator that carry an interval (``brier_interval``...).
SCORES = ("brier", "auc", "spearman_rho")

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
    task : Task or str
        The task that scores the completions, or its spec (:func:`gradprobe.tasks.load_task`: ``"chain_sum"``).
    problems : list[Problem], length M
    samples : int
        S >= 1.
    sampling : SamplingConfig or dict
        A dict is read as ``SamplingConfig(**sampling)``.
    seed : int
        Sampler seed, >= 0.
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

    Raises
    ------
    TypeError
        ``task`` is neither a Task nor a str, ``sampling`` neither a SamplingConfig nor a dict of its fields,
        ``samples`` or ``seed`` not an integer, or ``problems`` not a list of Problems (before any sampling).
    ValueError
        ``samples`` < 1 or ``seed`` < 0; a bad value in a ``sampling`` dict; a ``task`` spec that names no task
        (:func:`gradprobe.tasks.load_task`'s errors).
    """
    import time

    from ..rollout import HFSampler, score_completions

    task, sampling = _outcome_inputs(task, sampling, samples, seed, problems)
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


def _outcome_inputs(task, sampling, samples, seed, problems):
    """(task, sampling) of :func:`sample_outcomes`, its arguments checked before any sampling: a task spec is
    loaded, a dict of sampling fields becomes a SamplingConfig."""
    from ..config import SamplingConfig
    from ..tasks import load_task

    if isinstance(task, str):
        task = load_task(task)
    elif not callable(getattr(task, "score", None)):
        raise TypeError(f"task must be a Task (gradprobe.load_task(...)) or a task spec string, got {task!r} "
                        f"({type(task).__name__})")
    if isinstance(sampling, dict):
        try:
            sampling = SamplingConfig(**sampling)
        except TypeError as e:
            if "unexpected keyword" not in str(e):
                raise
            raise TypeError(f"sampling has an unknown field ({e}); valid: "
                            f"{', '.join(f.name for f in dataclasses.fields(SamplingConfig))}") from None
    elif not isinstance(sampling, SamplingConfig):
        raise TypeError(f"sampling must be a SamplingConfig (gradprobe.SamplingConfig(...)) or a dict of its fields, "
                        f"got {sampling!r} ({type(sampling).__name__})")
    for name, value in (("samples", samples), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if not isinstance(problems, (list, tuple)) or not all(hasattr(p, "question") for p in problems):
        raise TypeError(f"problems must be a list of Problems (task.problems(split, n)), got "
                        f"{type(problems).__name__} {_short(problems)}")
    return task, sampling


def _short(value) -> str:
    """``repr(value)`` cut to 80 characters, for a message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def split_halves(m: int, seed: int = 0, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """(fit, eval) prompt indices: a seeded permutation of range(m) cut at floor(m / 2).

    ``groups`` (a sequence of m hashable keys, e.g. :func:`gradprobe.tasks.base.prompt_key` of each prompt)
    keeps every prompt with the same key in one half: the permutation is walked in order and a prompt
    whose key was already placed follows it, so a repeated prompt is never fitted on and scored. A
    key's whole group goes to the fit half while that half holds fewer than floor(m / 2) prompts, so
    the fit half may exceed floor(m / 2) by a group's size minus one. With distinct keys (or ``groups=None``) the
    split is the plain cut.
    """
    perm = np.random.default_rng([seed, 0xD1FF]).permutation(m)
    if groups is None:
        return np.sort(perm[: m // 2]), np.sort(perm[m // 2:])
    if len(groups) != m:
        raise ValueError(f"groups has {len(groups)} keys for {m} prompts; give one key per prompt")
    size = collections.Counter(groups)
    half: dict = {}  # key -> True (fit) / False (eval), decided at the key's first place in the permutation
    n_fit, in_fit = 0, np.zeros(m, dtype=bool)
    for i in perm:
        if groups[i] not in half:
            half[groups[i]] = n_fit < m // 2
            n_fit += size[groups[i]] if half[groups[i]] else 0
        in_fit[i] = half[groups[i]]
    return np.flatnonzero(in_fit), np.flatnonzero(~in_fit)


def prompt_groups(prompts, m: int) -> list[str]:
    """The split keys of :func:`evaluate_estimator`'s ``prompts``: each text with its whitespace collapsed
    (:func:`gradprobe.tasks.base.prompt_key`), length M.

    Raises
    ------
    ValueError
        ``prompts`` is not of length ``m``, or holds fewer than two distinct texts (copies stay in one
        half, so no eval half would remain).
    """
    keys = [prompt_key(q) for q in prompts]
    if len(keys) != m:
        raise ValueError(f"evaluate_estimator: {len(keys)} prompts for {m} ids; give one prompt text per id")
    if len(set(keys)) < 2:
        raise ValueError(f"the pool's {m} prompts are all one text: copies stay in one half, so no eval half "
                         f"remains; give a pool with at least two distinct prompts")
    return keys


def evaluate_estimator(ids, features, outcomes, *, observed: int, config: EstimatorConfig | None = None,
                       seed: int = 0, group_size: int | None = None, prompts=None,
                       resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL) -> dict:
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
    prompts : sequence of length M, optional
        Each prompt's text (or a Problem's ``question``): prompts whose text is the same after collapsing
        whitespace (:func:`gradprobe.tasks.base.prompt_key`) are kept in one half (:func:`split_halves`),
        so the model is never scored on a prompt it was fitted on; ``notes`` says how many repeats there
        were. Default: every prompt distinct.
    resamples, level : int, float
        The intervals' bootstrap over eval prompts (seeded by ``seed``; :func:`~gradprobe.difficulty.metrics.
        bootstrap_metrics`): resamples >= 10 (:data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`), level in (0, 1).

    Returns
    -------
    dict
        ``estimators`` and ``baselines``: name -> {brier, auc, spearman_rho, each with its ``*_interval`` [lo, hi]
        or None and ``*_interval_reason`` (why None: module docstring), ``undefined_resamples``, mean_p, reliability,
        flat_auc (:func:`flat_group_auc`), ``flat_auc_interval`` {kind: [lo, hi] or None} and its ``_reason``};
        ``bootstrap`` (``resamples``, ``level``, ``seed``, ``unit``, ``method``);
        ``split`` (prompt counts), ``pool_mean_success`` (fit half), ``eval_target_success``,
        ``model_degenerate``, ``flat_group_size`` (G), ``notes`` (why a metric is None).

    Raises
    ------
    ValueError
        M < 2, mismatched shapes, ``observed`` or ``group_size`` not an integer (a bool or the string "1" is
        not), ``observed`` not in [0, S - 1], ``group_size`` not in [1, S - observed], ``seed`` not an integer in
        [0, 2**63 - 1], ``resamples`` not an integer >= 10 or ``level`` not in (0, 1) (these three before any fit), or
        ``prompts`` not of length M or with fewer than two distinct texts (no eval half would remain); outcomes all
        missing (NaN), or one that is not 0 or 1 (partial credit in (0, 1) too: map it to 0/1 first) or infinite;
        ``features`` with no column, an infinite feature or one beyond +-1e150, the limit of ``--metadata-keys``
        values (:func:`~gradprobe.difficulty.estimator.check_features`; a NaN feature is missing: imputed, and
        counted in ``notes``).
    """
    resamples = _checked_bootstrap(seed, resamples, level)
    y = np.asarray(outcomes, dtype=np.float64)
    x = np.asarray(features, dtype=np.float64)
    group_size = _checked_inputs(ids, x, y, observed, group_size)
    observed = int(observed)
    config = config or EstimatorConfig()
    keys = None if prompts is None else prompt_groups(prompts, len(ids))
    fit, ev = split_halves(len(ids), seed, keys)
    est, caught = _fitted_estimator(config, [ids[i] for i in fit], x[fit], y[fit])
    target = y[ev][:, observed:]
    pool_mean = success_rate(y[fit])
    preds = _predictions(est, config, x[ev], y[ev][:, :observed], pool_mean)
    scored = {name: _scores(p, target, group_size, resamples, level, seed) for name, p in preds.items()}
    notes = _notes(target, scored, group_size, caught)
    if keys is not None and len(set(keys)) < len(keys):
        notes.append(f"{len(keys) - len(set(keys))} prompt(s) repeat another prompt's text: each set of copies was "
                     f"kept in one half, so no eval prompt's text was fitted on (fit half {len(fit)}, eval half "
                     f"{len(ev)} prompts)")
    missing = int(np.isnan(x).sum())
    if missing:  # imputed by design (metadata a prompt lacks), said so it is never silent
        notes.append(f"{missing} feature value(s) in {int(np.isnan(x).any(axis=1).sum())} prompt(s) were missing (NaN) "
                     "and imputed with the fit half's column mean (gradprobe.difficulty.estimator)")
    n0 = config.prior_strength
    return {"estimators": {k: scored[k] for k in ESTIMATORS}, "baselines": {k: scored[k] for k in BASELINES},
            "split": {"fit_prompts": int(len(fit)), "eval_prompts": int(len(ev)), "observed_per_eval_prompt": observed,
                      "target_per_eval_prompt": int(y.shape[1] - observed), "seed": seed},
            "pool_mean_success": pool_mean, "eval_target_success": success_rate(target),
            "model_degenerate": bool(est.degenerate_), "prior_strength": n0, "flat_group_size": int(group_size),
            "bootstrap": {"resamples": int(resamples), "level": float(level), "seed": seed, "unit": "eval prompt",
                          "method": "percentile"}, "notes": notes}


def _checked_bootstrap(seed, resamples, level) -> int:
    """:func:`evaluate_estimator`'s ``seed``, ``level`` and ``resamples`` checked before any fit; returns resamples
    as an int (:func:`~gradprobe.difficulty.metrics.check_resamples`)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= 2**63 - 1:
        raise ValueError(f"seed (--seed) must be an integer in [0, 2**63 - 1], got {seed!r}")
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1) (the intervals' coverage), got {level!r}")
    return check_resamples(resamples, level=level, default=BOOTSTRAP_RESAMPLES)


def _scores(p, target, group_size: int, resamples: int, level: float, seed: int) -> dict:
    """One estimator's scores of :func:`evaluate_estimator` (its Returns), p (M_ev,) against target (M_ev, K)."""
    boot = bootstrap_metrics(p, target, resamples=resamples, level=level, seed=seed, group_size=group_size)
    return {**boot["point"],  # brier_score, auc_score and spearman_rho, scored once with the intervals
            **{f"{k}_interval": boot[k] for k in SCORES}, **{f"{k}_interval_reason": boot["reason"][k] for k in SCORES},
            "undefined_resamples": boot["undefined"], "mean_p": float(np.mean(p)),
            "reliability": reliability_bins(p, target), "flat_auc": boot["flat_auc_point"],  # flat_group_auc's
            "flat_auc_interval": boot["flat_auc"], "flat_auc_interval_reason": boot["flat_auc_reason"]}


def _checked_inputs(ids, x, y, observed: int, group_size: int | None) -> int:
    """Validate :func:`evaluate_estimator`'s inputs (its Raises) and return G (the default when None)."""
    m = len(ids)
    if m < 2:
        raise ValueError(f"difficulty evaluation needs at least 2 prompts (a fit half and an eval half), got {m}")
    if y.ndim != 2 or x.ndim != 2 or y.shape[0] != m or x.shape[0] != m:
        raise ValueError(f"evaluate_estimator: {m} ids, features {x.shape}, outcomes {y.shape}; expected (M, F), "
                         "(M, S)")
    check_features(x)
    if isinstance(observed, bool) or not isinstance(observed, numbers.Integral):
        raise ValueError(f"observed must be an integer in [0, S - 1] = [0, {y.shape[1] - 1}] (outcomes per eval prompt "
                         f"given to the posteriors), got {observed!r} ({type(observed).__name__})")
    if group_size is not None and (isinstance(group_size, bool) or not isinstance(group_size, numbers.Integral)):
        raise ValueError(f"group_size must be an integer in [1, S - observed] or None (the default), got "
                         f"{group_size!r} ({type(group_size).__name__})")
    if not 0 <= observed < y.shape[1]:
        raise ValueError(f"observed must lie in [0, S - 1] = [0, {y.shape[1] - 1}] so that a target remains, got "
                         f"{observed}")
    n_target = y.shape[1] - observed
    if group_size is None:
        group_size = min(DEFAULT_GROUP_SIZE, n_target)
    if not 1 <= group_size <= n_target:
        raise ValueError(f"group_size must lie in [1, S - observed] = [1, {n_target}] so that a whole group of target "
                         f"outcomes exists, got {group_size}")
    finite = np.isfinite(y)
    if not finite.any():
        raise ValueError(f"outcomes: all {y.size} are missing (NaN), nothing to fit or score; sample_outcomes gives "
                         "NaN where the task's scorer failed (its warnings name the prompts): fix the scorer or the "
                         "task")
    bad = np.isinf(y) | (finite & (y != 0) & (y != 1))
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        partial = bool((finite & (y > 0) & (y < 1)).any())
        raise ValueError(f"outcomes must be 0/1 (NaN for a missing one), got {y[i, j]:g} at prompt {ids[i]!r}, "
                         f"sample {j} ({int(bad.sum())} such value(s))"
                         + ("; partial credit is no success or failure: the estimators predict the chance that one "
                            "sample succeeds, so map each score to 0/1 first (e.g. success = score == 1)"
                            if partial else ""))
    check_unique_ids(list(ids))
    return group_size


def _fitted_estimator(config: EstimatorConfig, ids, x, y):
    """The estimator fitted on every finite outcome of the fit half (x: (M_fit, F), y: (M_fit, S)) and
    the :class:`DegenerateOutcomesWarning` records of the fit."""
    est = DifficultyEstimator(config)
    ok = np.isfinite(y)
    est.observe(ids, x, np.where(ok, y, 0).sum(1), ok.sum(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateOutcomesWarning)
        est.fit()
    return est, caught


def _predictions(est, config: EstimatorConfig, x_ev, seen, pool_mean: float | None) -> dict:
    """Each estimator's and baseline's p (M_ev,) on the eval half, ``seen`` (M_ev, k) being the
    observed outcomes the posteriors update on (module docstring, step 4)."""
    s_obs = np.where(np.isfinite(seen), seen, 0).sum(1)
    n_obs = np.isfinite(seen).sum(1)
    n0 = config.prior_strength
    c = config.p_clip
    prior_pool = float(np.clip(pool_mean if pool_mean is not None else 0.5, c, 1 - c))
    p_model = est.predict_model(x_ev)
    return {
        "model": p_model,
        "posterior": (n0 * p_model + s_obs) / (n0 + n_obs),
        "pool_mean": np.full(len(x_ev), pool_mean if pool_mean is not None else 0.5),
        "posterior_pool_mean": (n0 * prior_pool + s_obs) / (n0 + n_obs),
    }


def _notes(target, scored: dict, group_size: int, caught) -> list[str]:
    """Why a metric of :func:`evaluate_estimator` is None or uninformative, in words (``scored``: each estimator's and
    baseline's scores, :func:`_scores`; the flat-group AUCs are the posterior's, the ones printed)."""
    head = scored["posterior"]
    flat, flat_reasons = head["flat_auc"], head["flat_auc_interval_reason"]
    notes = []
    tgt = target[np.isfinite(target)]
    if not tgt.size:
        notes.append(f"no eval prompt has a finite target outcome (its last {target.shape[1]} completions): every "
                     "score and interval is None; sample_outcomes gives NaN where the task's scorer failed (its "
                     "warnings name the prompts): fix the scorer or the task")
    elif tgt.min() == tgt.max():
        notes.append(f"every target completion {'succeeded' if tgt[0] == 1 else 'failed'}: AUC and Spearman rho "
                     f"are undefined (None); only the Brier score is meaningful")
    for kind in ("all_correct", "all_wrong", "flat") if tgt.size else ():  # no target: said above
        if flat[kind]["reason"] is not None:
            notes.append(f"flat-group AUC ({kind.replace('_', '-')}, groups of {group_size}) and its interval are "
                         f"None: {flat[kind]['reason']}")
        elif flat_reasons[kind] is not None:
            notes.append(f"flat-group AUC interval ({kind.replace('_', '-')}, groups of {group_size}) is None: "
                         f"{flat_reasons[kind]}")
    notes.extend(_interval_notes(scored))
    if caught:
        notes.append(f"logistic model not fitted: {caught[0].message}")
    notes.append("pool_mean is constant across prompts: its AUC is 0.5 and its Spearman rho undefined by construction")
    return notes


def _interval_notes(scored: dict) -> list[str]:
    """The notes of the Brier, AUC and rho intervals that are None while the score is not (no spread, too few eval
    prompts: :func:`~gradprobe.difficulty.metrics.bootstrap_metrics`), of every estimator and baseline of ``scored``
    (the console prints each as n/a), one per reason: identical reasons are said once, naming every estimator and
    score they hold for (an undefined score has its own note)."""
    names = {"brier": "Brier", "auc": "AUC", "spearman_rho": "Spearman rho"}
    by_reason: dict = {}
    for est, head in scored.items():
        for key in SCORES:
            if head[key] is not None and head[f"{key}_interval"] is None:
                by_reason.setdefault(head[f"{key}_interval_reason"], {}).setdefault(est, []).append(names[key])
    notes = []
    for reason, per_est in by_reason.items():
        by_scores: dict = {}  # estimators missing the same scores' intervals, said together
        for est, scores in per_est.items():
            by_scores.setdefault(tuple(scores), []).append(est)
        parts, many = [], len(by_scores) > 1
        for scores, ests in by_scores.items():
            n = len(scores) * len(ests)
            many = many or n > 1
            owners = _joined([f"{e}'s" for e in ests])
            parts.append(f"the {owners} {' and '.join(scores)} interval{'s' * (n > 1)}")
        notes.append(f"{_joined(parts)} {'are' if many else 'is'} None: {reason}")
    return notes


def _joined(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
