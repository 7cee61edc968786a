"""``gradprobe rank-prompts`` and ``gradprobe difficulty-eval``.

``rank-prompts --model M --task T --pool N --out DIR``
    Features of the N pool prompts under the policy (one batched forward, charged ``selection``);
    ``--probe-samples k`` completions of each of ``--fit-prompts`` prompts (charged ``selection``:
    tokens the rule generated) give the observed outcomes the logistic model is fitted on (and the
    posterior of those prompts); every pool prompt gets p_hat. Writes ``DIR/ranking.csv`` (nearest
    1/2 first: rank, prompt_id, p_hat, distance = |p_hat - 1/2|, attempts, successes, p_model) and
    ``DIR/rank.json`` (settings, verdict, ledger, versions) and prints the rule's verdict. When every
    probe outcome is equal (a random model: success 0) the logistic model has no signal: a warning
    says so, ``rank.json`` records ``"no_signal": true``, and the ranking is still written (p_hat then
    differs only through the probed prompts' posteriors).

``difficulty-eval --model M --task T --pool N --samples S --out DIR``
    The protocol of :mod:`gradprobe.difficulty.evaluate`; writes ``DIR/metrics.json`` (Brier, AUC,
    Spearman rho of the estimator and the baselines, reliability data, ledger) and
    ``DIR/reliability.png``.

Both use the training pool ``task.problems("train", N, seed=--data-seed)`` (the pool a plan with
``[heldout] seed`` = data seed trains on), and show a progress bar of the sampled completions on
stderr (tqdm: completions done, rate, ETA; sampling is most of their time), hidden by ``--no-progress``.
"""

from __future__ import annotations

import argparse
import sys
import warnings

_COMMON_HELP = {
    "rank-prompts": "predict each pool prompt's success under the policy and rank the pool nearest 1/2 first",
    "difficulty-eval": "score the success predictor (Brier, AUC, Spearman, reliability) against sampled outcomes",
}


#: Below these sizes the commands still run but add a note that their figures are rough.
SMALL_FIT_PROMPTS = 32
SMALL_EVAL_PROMPTS = 50


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def add_difficulty_parsers(subparsers) -> None:
    """Register ``rank-prompts`` and ``difficulty-eval`` on an argparse sub-parser collection."""
    for name in ("rank-prompts", "difficulty-eval"):
        p = subparsers.add_parser(name, help=_COMMON_HELP[name], description=_COMMON_HELP[name],
                                  formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        p.add_argument("--model", required=True,
                       help="tiny (the warm-started tier), tiny-qwen2, smollm2-135m, a folder, .gguf file or hub id")
        p.add_argument("--task", required=True, help="task spec, e.g. chain_sum:min_terms=2,max_terms=4")
        p.add_argument("--skip-malformed", action="store_true",
                       help="GSM8K only: skip (count and warn about) malformed rows instead of stopping at the first")
        p.add_argument("--pool", type=_positive_int, required=True, help="N, pool prompts (train split)")
        p.add_argument("--out", required=True, help="output folder")
        if name == "rank-prompts":
            p.add_argument("--probe-samples", type=_positive_int, default=4,
                           help="k, completions sampled per fit prompt to observe outcomes")
            p.add_argument("--fit-prompts", type=_positive_int, default=64,
                           help="prompts probed to fit the model (at most the pool)")
        else:
            p.add_argument("--samples", type=_positive_int, default=16, help="S, completions per prompt")
            p.add_argument("--observed", type=_nonneg_int, default=None,
                           help="outcomes per eval prompt given to the posteriors (default S // 4); the rest "
                                "are the target")
        p.add_argument("--prior-strength", type=float, default=8.0, help="n0, pseudo-counts of the model's prior")
        p.add_argument("--decay", type=float, default=0.9, help="gamma, per-update decay of observed counts")
        p.add_argument("--metadata-keys", default="num_terms,num_digits",
                       help="comma-separated Problem.metadata keys used as features (missing -> imputed)")
        p.add_argument("--data-seed", type=int, default=0, help="data seed of the pool")
        p.add_argument("--seed", type=int, default=0, help="sampling seed and the fit/eval split seed")
        p.add_argument("--max-new-tokens", type=_positive_int, default=128)
        p.add_argument("--temperature", type=float, default=1.0)
        p.add_argument("--batch-size", type=_positive_int, default=64, help="sequences per generate call")
        p.add_argument("--feature-batch-size", type=_positive_int, default=32, help="prompts per feature forward")
        p.add_argument("--device", default="cpu")
        p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16", "float16"])
        p.add_argument("--no-progress", action="store_true",
                       help="hide the progress bar (completions sampled, rate and ETA on stderr)")


def _setup(args):
    """Output folder (checked first), policy, task, pool, sampling config."""
    from pathlib import Path

    from ..config import SamplingConfig
    from ..tasks import load_task
    from ..training.checkpoint import prepare_output_dir
    from ..training.plan import ModelSpec
    from ..training.run import load_run_policy
    from .estimator import EstimatorConfig, check_unique_ids

    est_config = EstimatorConfig(prior_strength=args.prior_strength, decay=args.decay)  # settings first,
    sampling = SamplingConfig(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                              batch_size=args.batch_size)
    task = load_task(args.task, **({"skip_malformed": True} if args.skip_malformed else {}))  # then the data,
    pool = task.problems("train", args.pool, seed=args.data_seed)
    if not pool:
        raise ValueError(f"task {args.task!r} returned an empty pool for --pool {args.pool}")
    check_unique_ids([p.id for p in pool])
    out = prepare_output_dir(Path(args.out))  # then the folder (nothing is created for refused input), then the compute
    policy = load_run_policy(ModelSpec(name=args.model, dtype=args.dtype, device=args.device), seed=args.seed)
    keys = tuple(k.strip() for k in args.metadata_keys.split(",") if k.strip())
    present = sorted({k for p in pool for k in (p.metadata or {})})
    absent = [k for k in keys if k not in present]
    if absent:
        warnings.warn(f"--metadata-keys {', '.join(absent)}: in no prompt of this pool, so imputed as a constant "
                      f"that carries no information (keys present: {', '.join(present) or 'none'})", stacklevel=2)
    return out, policy, task, pool, sampling, est_config, keys


def _settings(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("func",)}


def rank_prompts(args) -> int:
    """``gradprobe rank-prompts``; returns the exit status."""
    import numpy as np
    import pandas as pd

    from ..ledger import Ledger
    from ..probe.run import versions
    from ..training.checkpoint import write_json_atomic
    from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, rank_half, verdict
    from .evaluate import sample_outcomes
    from .features import prompt_features

    out, policy, task, pool, sampling, est_config, keys = _setup(args)
    ledger = Ledger()
    ids = [p.id for p in pool]
    feats = prompt_features(policy, pool, metadata_keys=keys, batch_size=args.feature_batch_size, ledger=ledger)
    n_fit = min(args.fit_prompts, len(pool))
    fit = np.sort(np.random.default_rng([args.seed, 0xF17]).permutation(len(pool))[:n_fit])
    y = sample_outcomes(policy, task, [pool[i] for i in fit], samples=args.probe_samples, sampling=sampling,
                        seed=args.seed, ledger=ledger, category="selection", progress=not args.no_progress,
                        desc=f"rank-prompts: sampling {args.probe_samples} x {n_fit} prompts")
    ok = np.isfinite(y)
    est = DifficultyEstimator(est_config)
    est.observe([ids[i] for i in fit], feats[fit], np.where(ok, y, 0).sum(1), ok.sum(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateOutcomesWarning)
        est.fit()
    p_model = est.predict_model(feats)
    p_hat = est.p_hat(ids, feats)
    order = rank_half(ids, p_hat)
    succ = np.zeros(len(pool))
    att = np.zeros(len(pool))
    succ[fit], att[fit] = np.where(ok, y, 0).sum(1), ok.sum(1)
    table = pd.DataFrame({"rank": np.arange(1, len(pool) + 1), "prompt_id": [ids[i] for i in order],
                          "p_hat": p_hat[order], "distance": np.abs(p_hat[order] - 0.5),
                          "attempts": att[order].astype(int), "successes": succ[order].astype(int),
                          "p_model": p_model[order]})
    table.to_csv(out / "ranking.csv", index=False)
    v = verdict(p_hat)
    no_signal = bool(est.degenerate_)
    notes = []
    if n_fit < SMALL_FIT_PROMPTS and not no_signal:
        notes.append(f"the logistic model is fitted on only {n_fit} probed prompts; its p_model for unprobed prompts is "
                     f"rough (use --fit-prompts >= {SMALL_FIT_PROMPTS} and a pool at least that large)")
    write_json_atomic(out / "rank.json", {
        "command": "rank-prompts", "settings": _settings(args), "skipped_rows": int(getattr(task, "skipped", 0)), "verdict": v, "no_signal": no_signal,
        "warning": str(caught[0].message) if caught else None, "notes": notes, "fit_prompts": int(n_fit),
        "probe_success": float(y[ok].mean()) if ok.any() else None, "ledger": ledger.to_dict(),
        "versions": versions()})
    if caught:
        print(f"gradprobe rank-prompts: warning: {caught[0].message}; the ranking carries no model signal "
              f"(p_hat differs only through the probed prompts' posteriors)", file=sys.stderr)
    for note in notes:
        print(f"note: {note}")
    print(f"verdict: {v['text']} over the {len(pool)} pool prompts")
    print(f"nearest 1/2: {table.prompt_id.iloc[0]} (p_hat {table.p_hat.iloc[0]:.3f}); selection cost: "
          f"{ledger.generated_tokens['selection']:,} tokens, {ledger.flops.get('selection', 0):.3g} FLOPs, "
          f"{ledger.device_seconds.get('selection', 0):.1f} s")
    print(f"wrote {out / 'ranking.csv'} and {out / 'rank.json'}")
    return 0


def difficulty_eval(args) -> int:
    """``gradprobe difficulty-eval``; returns the exit status."""
    from ..ledger import Ledger
    from ..probe.run import versions
    from ..training.checkpoint import write_json_atomic
    from ..training.metrics import json_safe
    from .evaluate import evaluate_estimator, plot_reliability, sample_outcomes
    from .features import prompt_features

    if args.pool < 2:
        raise ValueError(f"--pool must be >= 2 (a fit half and an eval half), got {args.pool}")
    observed = args.samples // 4 if args.observed is None else args.observed
    if observed >= args.samples:
        raise ValueError(f"--observed ({observed}) must be smaller than --samples ({args.samples}) so a target remains")
    out, policy, task, pool, sampling, est_config, keys = _setup(args)
    ledger = Ledger()
    ids = [p.id for p in pool]
    feats = prompt_features(policy, pool, metadata_keys=keys, batch_size=args.feature_batch_size, ledger=ledger)
    y = sample_outcomes(policy, task, pool, samples=args.samples, sampling=sampling, seed=args.seed, ledger=ledger,
                        category="eval", progress=not args.no_progress,
                        desc=f"difficulty-eval: sampling {args.samples} x {len(pool)} prompts")
    result = evaluate_estimator(ids, feats, y, observed=observed, config=est_config, seed=args.seed)
    n_eval = len(pool) - len(pool) // 2
    if n_eval < SMALL_EVAL_PROMPTS:
        result["notes"].append(
            f"only {n_eval} eval prompts: Brier, AUC and rho carry a large sampling error at this size (an AUC's standard "
            f"error is ~0.1 with 20 prompts); use --pool >= {2 * SMALL_EVAL_PROMPTS} for a comparison between estimators")
    plot_reliability(result, out / "reliability.png")
    summary = {"command": "difficulty-eval", "settings": {**_settings(args), "observed": observed},
               "skipped_rows": int(getattr(task, "skipped", 0)),
               "protocol": ("fit the logistic model on every outcome of a seeded half of the pool; on the other "
                            f"half give the posteriors the first {observed} outcomes per prompt and score every "
                            f"estimator on the remaining {args.samples - observed} (the target)"),
               # headline: the posterior (the estimator a training run uses); every estimator and baseline below
               "brier": result["estimators"]["posterior"]["brier"], "auc": result["estimators"]["posterior"]["auc"],
               "spearman_rho": result["estimators"]["posterior"]["spearman_rho"],
               **result,
               "ledger": ledger.to_dict(), "versions": versions()}
    write_json_atomic(out / "metrics.json", json_safe(summary))
    fmt = lambda x: "  n/a" if x is None else f"{x:.3f}"  # noqa: E731
    print(f"{'':22s} {'brier':>6s} {'auc':>6s} {'rho':>6s} {'mean p':>7s}")
    for group in ("estimators", "baselines"):
        for name, r in result[group].items():
            print(f"{name:22s} {fmt(r['brier']):>6s} {fmt(r['auc']):>6s} {fmt(r['spearman_rho']):>6s} "
                  f"{fmt(r['mean_p']):>7s}")
    fa = result["estimators"]["posterior"]["flat_auc"]  # can p_hat tell a zero-variance group before rollout?
    print(f"posterior AUC of a flat group of {fa['group_size']} ({fa['groups']} groups): all-correct "
          f"{fmt(fa['all_correct']['auc'])}, all-wrong {fmt(fa['all_wrong']['auc'])}, either {fmt(fa['flat']['auc'])}")
    print(f"pool mean success (fit half) {fmt(result['pool_mean_success'])}, eval target success "
          f"{fmt(result['eval_target_success'])}")
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wrote {out / 'metrics.json'} and {out / 'reliability.png'}")
    return 0


def difficulty_main(args) -> int:
    """Dispatch ``rank-prompts`` / ``difficulty-eval``; 0 on success, 2 on bad input (message on stderr)."""
    from ..models import ModelNotFoundError
    from ..training.checkpoint import removed_if_left_empty

    try:
        with removed_if_left_empty(args.out):  # refused input leaves no empty folder behind
            return rank_prompts(args) if args.command == "rank-prompts" else difficulty_eval(args)
    except (ValueError, OSError, RuntimeError, ModelNotFoundError) as e:
        print(f"gradprobe {args.command}: error: {e}", file=sys.stderr)
        return 2
