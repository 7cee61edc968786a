"""``gradprobe rank-prompts`` and ``gradprobe difficulty-eval``.

``rank-prompts --model M --task T --pool N --out DIR``
    Parses the flags and calls :func:`gradprobe.difficulty.rank.rank_prompts` (what
    ``gradprobe.rank_prompts`` calls too; the flags' defaults are those of its
    :class:`~gradprobe.difficulty.rank.RankSettings`), printing its summary lines. Features of the N
    pool prompts under the policy (one batched forward in chunks, charged ``selection``: prompt tokens read);
    ``--probe-samples k`` completions of each of ``--fit-prompts`` prompts (charged ``selection``: tokens the
    rule generated) give the observed outcomes the logistic model is fitted on (and the posterior of those
    prompts); every pool prompt gets p_hat with its 90% intervals (:mod:`gradprobe.difficulty.intervals`,
    ``--resamples`` bootstrap refits). Writes ``DIR/ranking.csv`` (nearest 1/2 first: rank, prompt_id, data_id
    when the data has an ``id`` column, p_hat, p_lo, p_hi, distance = |p_hat - 1/2|, attempts, successes,
    rate_lo, rate_hi, p_model, p_model_lo, p_model_hi) and ``DIR/rank.json`` (settings, the model's weights as a
    training run records them, verdict with its interval, held-out fit quality, ledger, versions) and prints
    the model, the rule's verdict, the held-out fit, the prompt nearest 1/2 with its intervals and the cost
    (tokens generated or read). A ``--pool`` over 1,000,000 (a plan's limit) is refused first. When every
    probe outcome is equal (a random model: success 0) the logistic model has no signal: a warning
    says so, ``rank.json`` records ``"no_signal": true``, and the ranking is still written (p_hat then
    differs only through the probed prompts' posteriors).

``difficulty-eval --model M --task T --pool N --samples S --out DIR``
    The protocol of :mod:`gradprobe.difficulty.evaluate`; writes ``DIR/metrics.json`` (Brier, AUC,
    Spearman rho of the estimator and the baselines, each with its 90% interval from a seeded percentile
    bootstrap over the eval prompts, ``--resamples`` resamples; reliability data, the model's weights, ledger)
    and ``DIR/reliability.png``; the posterior's flat-group AUCs (all-correct, all-wrong, either) are printed with
    their intervals from the same resamples (``flat_auc_interval``); under 50 eval prompts a note gives the intervals'
    widths. An interval the bootstrap cannot measure prints ``n/a``, and a note says why for every estimator and
    baseline it holds for (identical reasons once). Copies of one prompt
    text stay in one half of the fit/eval split (``evaluate_estimator(..., prompts=)``); a pool of one text is
    refused before any compute.

Both use the training pool ``task.problems("train", N, seed=--data-seed)`` (the pool a plan with
``[heldout] seed`` = data seed trains on), and show progress on stderr (tqdm), hidden by ``--no-progress``: the
pool's building (prompts made of N, rate, ETA for a reasoning-gym task; lines parsed of the file's for a JSONL file;
else the seconds only: :func:`gradprobe.difficulty.progress.pool_problems`), the feature forward (prompts read,
rate, ETA) and the sampled completions (done, rate, ETA).
Ctrl-C stops either with one line and exit status 130, as ``gradprobe train`` does. Both write their files
only at the end, and the writers themselves (:func:`gradprobe.difficulty.rank_pool.write_ranking`,
:func:`_write_eval`) remove the pair when the last write does not finish, so nothing partial is left as
if complete, from the CLI and the Python API alike. Each refuses, before any compute, an ``--out`` holding
another command's output (a study, a training run, a probe, a calibration report, or the other of these two) or
a file named as its own that is not its complete earlier output (a user's ``metrics.json``), and says in one line,
just before it writes, when it replaces its own earlier output there
(:func:`gradprobe.difficulty.folder.check_output_folder`); and an ``--out`` that cannot be a writable folder (a file
in the way, a broken link or a symlink loop, an unwritable parent: :func:`gradprobe.outputs.prepare_output_dir`),
before the pool is built (minutes for a large pool) or the model loaded
(:func:`gradprobe.difficulty.rank.prepare_pool`). A refused ``--out`` leaves nothing created.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..difficulty.folder import check_output_folder, refuse_looping_outputs
from ..difficulty.metrics import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, check_resamples
from ..difficulty.rank import DTYPES, PoolSettings, PreparedPool, RankSettings, prepare_pool, rank_prompts
from ..difficulty.rank_report import weights_text
from ..ledger import Ledger
from ..outputs import json_safe, removed_if_left_empty, versions, write_json_atomic
from ..tables import shown
from ..token_counts import echo_text
from ..difficulty.evaluate import evaluate_estimator, plot_reliability, prompt_groups, sample_outcomes
from ..training.run_folder import model_weights_identity
from .args import MODEL_HELP, HelpFormatter, flag_named, integer, nonneg_int, out_path, positive_int


_COMMON_HELP = {
    "rank-prompts": "predict each pool prompt's success under the policy and rank the pool nearest 1/2 first",
    "difficulty-eval": "score the success predictor (Brier, AUC, Spearman, reliability) against sampled outcomes",
}


#: Below this many eval prompts difficulty-eval still runs but adds a note that its figures are rough
#: (rank-prompts' SMALL_FIT_PROMPTS lives with its work in gradprobe.difficulty.rank).
SMALL_EVAL_PROMPTS = 50

#: The flags' defaults: the settings' own (gradprobe.difficulty.rank), never restated here.
_RANK = RankSettings.defaults()


def add_difficulty_parsers(subparsers) -> None:
    """Register ``rank-prompts`` and ``difficulty-eval`` on an argparse sub-parser collection."""
    for name in ("rank-prompts", "difficulty-eval"):
        p = subparsers.add_parser(name, help=_COMMON_HELP[name], description=_COMMON_HELP[name],
                                  formatter_class=HelpFormatter)
        p.add_argument("--model", required=True, help=MODEL_HELP)
        p.add_argument("--task", required=True, help="task spec, e.g. chain_sum:min_terms=2,max_terms=4")
        p.add_argument("--skip-malformed", action="store_true",
                       help="tasks read from data (gsm8k, jsonl:, hf:): skip (count and warn about) malformed rows "
                       "instead of stopping at the first")
        # difficulty-eval's least pool (2: a fit half and an eval half) is checked in difficulty_eval, so that 0 and 1
        # get the same one message naming it, not the parser's ">= 1" first
        p.add_argument("--pool", type=positive_int if name == "rank-prompts" else integer, required=True,
                       help="N, pool prompts (train split)" + ("" if name == "rank-prompts" else "; at least 2"))
        p.add_argument("--out", type=out_path, required=True, help="output folder")
        if name == "rank-prompts":
            p.add_argument("--probe-samples", type=positive_int, default=_RANK["probe_samples"],
                           help="k, completions sampled per fit prompt to observe outcomes")
            p.add_argument("--fit-prompts", type=positive_int, default=_RANK["fit_prompts"],
                           help="prompts probed to fit the model (at most the pool)")
            p.add_argument("--resamples", type=positive_int, default=_RANK["resamples"],
                           help="bootstrap refits of the model behind the 90%% intervals of p_hat and p_model")
        else:
            p.add_argument("--samples", type=positive_int, default=16, help="S, completions per prompt")
            p.add_argument("--observed", type=nonneg_int, default=None,
                           help="outcomes per eval prompt given to the posteriors (default S // 4); the rest "
                                "are the target")
            p.add_argument("--resamples", type=positive_int, default=BOOTSTRAP_RESAMPLES,
                           help=f"bootstrap resamples (over eval prompts) of the {BOOTSTRAP_LEVEL * 100:.0f}%% "
                                "intervals of Brier, AUC and rho")
        p.add_argument("--prior-strength", type=float, default=_RANK["prior_strength"],
                       help="n0, pseudo-counts of the model's prior")
        p.add_argument("--decay", type=float, default=_RANK["decay"], help="gamma, per-update decay of observed counts")
        p.add_argument("--metadata-keys", default=_RANK["metadata_keys"],
                       help="comma-separated Problem.metadata keys used as features (missing -> imputed)")
        p.add_argument("--data-seed", type=integer, default=_RANK["data_seed"], help="data seed of the pool")
        p.add_argument("--seed", type=integer, default=_RANK["seed"], help="sampling seed and the fit/eval split seed")
        p.add_argument("--max-new-tokens", type=positive_int, default=_RANK["max_new_tokens"],
                       help="longest sampled completion, in tokens")
        p.add_argument("--temperature", type=float, default=_RANK["temperature"],
                       help="sampling temperature of the completions whose outcomes are counted")
        p.add_argument("--batch-size", type=positive_int, default=_RANK["batch_size"],
                       help="sequences per generate call; the sampled completions depend on it (micro-batch "
                            "composition), so give the same value with the same --seed to reproduce a run")
        p.add_argument("--feature-batch-size", type=positive_int, default=_RANK["feature_batch_size"],
                       help="prompts per feature forward")
        p.add_argument("--device", default=_RANK["device"], help="torch device of the model (cpu, cuda...)")
        p.add_argument("--dtype", default=_RANK["dtype"], choices=list(DTYPES), help="the model's weights and compute")
        p.add_argument("--no-progress", action="store_true",
                       help="hide the progress bars on stderr (the pool's building, the feature forward, the "
                            "completions sampled: rate and ETA)")


def _setup(args) -> tuple[PreparedPool, str | None]:
    """``difficulty-eval``'s settings (checked first), output folder (another command's refused), policy, task, pool,
    sampling and estimator config (:func:`gradprobe.difficulty.rank.prepare_pool`, shared with ``rank-prompts``),
    and the line saying that its own earlier evaluation there is replaced (None: there is none), printed by the
    caller when it writes, not before: a refused setting or a failed compute replaces nothing."""
    settings = PoolSettings.from_args(args)
    replacing = check_output_folder(args.out, "difficulty-eval")
    return prepare_pool(args.model, args.task, args.pool, args.out, settings, command="difficulty-eval"), replacing


def _settings(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("func",)}


def rank_prompts_main(args) -> int:
    """``gradprobe rank-prompts``: :func:`gradprobe.difficulty.rank.rank_prompts` on the parsed flags, its
    summary printed on stdout, the model recorded as a training run records it
    (:func:`gradprobe.training.run_folder.model_weights_identity`); returns the exit status (errors propagate to
    :func:`difficulty_main`)."""
    rank_prompts(args.model, args.task, args.pool, out=args.out, settings=RankSettings.from_args(args),
                 say=_say, model_identity=model_weights_identity)
    return 0


def _say(line: str) -> None:
    """Print one summary line of a command (each is one line: the model, the verdict, ``wrote OUT/ranking.csv``),
    a control character in it escaped (:func:`gradprobe.tables.shown`): a newline or tab in ``--out`` or the model's
    path would break the line or push its columns."""
    print(shown(line))


def difficulty_eval(args) -> int:
    """``gradprobe difficulty-eval``; returns the exit status."""
    from ..difficulty.features import prompt_features

    if args.pool < 2:
        raise ValueError(f"--pool must be >= 2 (a fit half and an eval half), got {echo_text(str(args.pool), str)}")
    observed = args.samples // 4 if args.observed is None else args.observed
    if observed >= args.samples:
        raise ValueError(f"--observed ({observed}) must be smaller than --samples ({args.samples}) so a target remains")
    check_resamples(args.resamples, level=BOOTSTRAP_LEVEL, default=BOOTSTRAP_RESAMPLES)  # before any model loads
    (out, policy, task, pool, sampling, est_config, keys), replacing = _setup(args)
    weights = model_weights_identity(str(args.model))
    ledger = Ledger()
    ids = [p.id for p in pool]
    texts = [p.question for p in pool]
    prompt_groups(texts, len(ids))  # a pool of one text is refused before the compute, not after it
    feats = prompt_features(policy, pool, metadata_keys=keys, batch_size=args.feature_batch_size, ledger=ledger,
                            progress=not args.no_progress, desc=f"difficulty-eval: features of {len(pool):,} prompts")
    read = ledger.generated_tokens["selection"]  # prompt tokens the feature forward read
    y = sample_outcomes(policy, task, pool, samples=args.samples, sampling=sampling, seed=args.seed, ledger=ledger,
                        category="eval", progress=not args.no_progress,
                        desc=f"difficulty-eval: sampling {args.samples} x {len(pool)} prompts")
    result = evaluate_estimator(ids, feats, y, observed=observed, config=est_config, seed=args.seed,
                                prompts=texts, resamples=args.resamples)
    n_eval = result["split"]["eval_prompts"]
    if n_eval < SMALL_EVAL_PROMPTS:
        result["notes"].append(_small_eval_note(result, n_eval))
    head = result["estimators"]["posterior"]  # headline: the posterior (the estimator a training run uses)
    summary = {"command": "difficulty-eval", "settings": {**_settings(args), "observed": observed},
               "model_weights": weights, "skipped_rows": int(getattr(task, "skipped", 0)),
               "protocol": ("fit the logistic model on every outcome of a seeded half of the pool; on the other "
                            f"half give the posteriors the first {observed} outcomes per prompt and score every "
                            f"estimator on the remaining {args.samples - observed} (the target)"),
               **{k: head[k] for k in ("brier", "auc", "spearman_rho", "brier_interval", "auc_interval",
                                       "spearman_rho_interval", "flat_auc_interval")},
               **result, "feature_tokens_read": read,
               "ledger": ledger.to_dict(), "versions": versions()}
    if replacing:  # said when it happens
        _say(replacing)
    _write_eval(out, result, summary)
    _print_eval(args.model, weights, result, read)
    _say(f"wrote {out / 'metrics.json'} and {out / 'reliability.png'}")
    return 0


def _small_eval_note(result: dict, n_eval: int) -> str:
    """The note of an eval set under :data:`SMALL_EVAL_PROMPTS` prompts, with the widths of the posterior's
    intervals (the sampling error at this size, in numbers; "no interval" where the bootstrap gives none, its
    reason in the notes: :func:`gradprobe.difficulty.metrics.bootstrap_metrics`)."""
    head, level = result["estimators"]["posterior"], result["bootstrap"]["level"]
    widths = ", ".join(f"{name} {'no interval' if iv is None else f'{iv[1] - iv[0]:.2f}'}" for name, iv in
                       (("Brier", head["brier_interval"]), ("AUC", head["auc_interval"]),
                        ("rho", head["spearman_rho_interval"])))
    return (f"only {n_eval} eval prompts: the posterior's {level:.0%} bootstrap intervals are this wide: {widths}; "
            f"use --pool >= {2 * SMALL_EVAL_PROMPTS} for a comparison between estimators")


def _print_eval(model: str, weights, result: dict, read: int) -> None:
    """``difficulty-eval``'s console: the model, every estimator's and baseline's scores with their intervals, the
    flat-group AUC, the success rates and the notes."""
    fmt = lambda x: "  n/a" if x is None else f"{x:.3f}"  # noqa: E731
    iv = lambda pair: "[  n/a,   n/a]" if pair is None else f"[{fmt(pair[0])}, {fmt(pair[1])}]"  # noqa: E731
    boot = result["bootstrap"]
    _say(f"model: {weights_text(model, weights)}")
    print(f"{'':20s} {'brier':>5s} {'[' + format(boot['level'], '.0%') + ' interval]':16s} {'auc':>5s} "
          f"{'[interval]':16s} {'rho':>5s} {'[interval]':16s} {'mean p':>6s}")
    for group in ("estimators", "baselines"):
        for name, r in result[group].items():
            print(f"{name:20s} {fmt(r['brier'])} {iv(r['brier_interval'])} {fmt(r['auc'])} {iv(r['auc_interval'])} "
                  f"{fmt(r['spearman_rho'])} {iv(r['spearman_rho_interval'])} {fmt(r['mean_p']):>6s}")
    print(f"intervals: {boot['method']} bootstrap over the {result['split']['eval_prompts']} eval prompts, "
          f"{boot['resamples']} resamples, seed {boot['seed']}")
    post = result["estimators"]["posterior"]
    fa, fiv = post["flat_auc"], post["flat_auc_interval"]  # can p_hat tell a zero-variance group before rollout?
    print(f"posterior AUC of a flat group of {fa['group_size']} ({fa['groups']} groups): all-correct "
          f"{fmt(fa['all_correct']['auc'])} {iv(fiv['all_correct'])}, all-wrong {fmt(fa['all_wrong']['auc'])} "
          f"{iv(fiv['all_wrong'])}, either {fmt(fa['flat']['auc'])} {iv(fiv['flat'])}")
    print(f"pool mean success (fit half) {fmt(result['pool_mean_success'])}, eval target success "
          f"{fmt(result['eval_target_success'])}")
    print(f"feature forward: {read:,} prompt tokens read, counted in the ledger's generated_tokens.selection "
          "(tokens a selection rule generated or read, DESIGN.md)")
    for note in result["notes"]:
        print(f"note: {note}")


def _write_eval(out: Path, result: dict, summary: dict) -> None:
    """``reliability.png`` (from ``result``), then ``metrics.json`` (``summary``, written last) in ``out``.

    When either write does not finish (an error, or Ctrl-C: any exception) both files are removed, the
    earlier ones included, since the figure is written in place and an earlier ``metrics.json`` would no
    longer describe it; the exception propagates.

    Raises
    ------
    OSError
        A file cannot be written.
    """
    refuse_looping_outputs(out, "difficulty-eval")  # a loop made during the compute: refused, not removed below
    try:
        plot_reliability(result, out / "reliability.png")
        write_json_atomic(out / "metrics.json", json_safe(summary))
    except BaseException:
        for name in ("reliability.png", "metrics.json"):
            (out / name).unlink(missing_ok=True)
        raise


def difficulty_main(args) -> int:
    """Dispatch ``rank-prompts`` / ``difficulty-eval``; 0 on success, 2 on bad input (message on stderr), 130 on
    Ctrl-C (one line: the writers leave nothing partial, see the module docstring)."""
    from ..models import ModelNotFoundError

    try:
        with removed_if_left_empty(args.out):  # refused input leaves no empty folder behind
            return rank_prompts_main(args) if args.command == "rank-prompts" else difficulty_eval(args)
    except KeyboardInterrupt:
        print(f"gradprobe {args.command}: interrupted; its files are written only at the end, so nothing partial "
              "is left as if complete", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError, ModelNotFoundError) as e:
        print(f"gradprobe {args.command}: error: {flag_named(str(e))}", file=sys.stderr)
        return 2
