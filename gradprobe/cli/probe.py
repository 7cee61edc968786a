"""``gradprobe probe``: its parser and its command (the probe of one batch, the forecast, the report).

The command replaces an earlier probe in ``--out`` whole (:func:`gradprobe.probe.output.replacing_earlier_probe`:
no stale ``calibrated.json`` or ``report.html`` is left beside the new ``probe.json``; a training run's or a
study's folder is refused; ``probe.json``'s entries say which rewards give no gradient on the batch, as
:func:`gradprobe.probe.result.reward_entries` builds them), and on Ctrl-C removes what it wrote so far, puts the earlier
probe back and exits 130 with one line (:func:`interrupt_message`), as ``gradprobe train`` and ``study`` do. SIGTERM
takes the same path (:class:`Terminated`, raised by a handler installed for the command's duration) and exits 143.
What a probe killed outright (SIGKILL) left in ``--out`` (the earlier probe aside; the files and batch folders it
named as its own, each as it started writing it, as a one-batch probe's ``tokens.jsonl`` and ``alignment.safetensors``
written before its ``probe.json``: :func:`gradprobe.probe.output.claim_probe_file`) is put back or removed by the next
probe there, each in one ``warning:`` line on stderr (:func:`_warn`); a file of a probe's name it never started (a
user's fresh ``report.html``) is refused and kept.
Any other error after the probe started (up to and including formatting what it prints) rolls back the same way
before it is reported: a bad input or I/O error as one line, exit 2; anything else (a bug) with a line saying the
earlier probe was put back, then its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys

from ..config import DTYPE_NAMES, LOSS_TYPE_NAMES, PRECONDITIONER_KINDS, SAMPLER_BACKENDS, MCConfig, SamplingConfig
from ..integrations.trl_config import apply_trl_config, mark_explicit_flags
from ..layout import CALIBRATED_JSON, PROBE_JSON
from ..probe_settings import (DEFAULT_MC, FORECASTERS, BatchSettings, BudgetSettings, ModelSettings, ProbeConfig,
                              ReferenceSettings, RunSettings, TaskSettings, UpdateSettings)
from ..tables import shown
from .args import (HelpFormatter, CALIBRATION_PATH, MODEL_HELP, flag_named, home, in_path, integer, out_path,
                   seed_int, token_count)

__all__ = ["probe_main", "interrupt_message", "Terminated", "terminate_cleanly"]


_GUIDANCE_HELP = ("probe a guided arm's update (off-context guidance, as an arm's guidance table): k = round(F x G) "
                  "completions per group sampled with the first P of the task's reference solution as a hint, all "
                  "trained without it, each token weighted by min(pi(y|x) / pi(y|x,hint), C) (C default 2); needs a "
                  "task with reference solutions and a model whose prompt format keeps the hint; a key left out "
                  "takes its default (fraction 0.25, prefix 0.5, cap 2.0); each key at most once; omit the flag "
                  "for no guidance")


#: What --bootstrap governs: the raw table's intervals only; the forecast draws its own (forecast_rewards' n_draws).
_BOOTSTRAP_HELP = ("bootstrap resamples over prompts of the probe table's 95%% intervals (0: no intervals there); the "
                   "forecast's rho and gain intervals and SNR of rho-1 always come from its own 2000 draws over the "
                   "same per-group contributions, whatever this is")


_CURVE_HELP = ("grpo's accuracy-vs-updates curve the forecast reads: a saved curve (.json), a grpo run's "
               "metrics.jsonl, a TRL trainer_state.json, a CSV (update,accuracy) or a study folder; default: the "
               "shipped curve for --model tiny, none otherwise (raw first-order numbers only)")
_CURVE_METRIC_HELP = ("the eval key holding held-out accuracy in a --reference-curve TRL trainer_state.json (default "
                      "eval_accuracy; a GRPOTrainer logs eval_rewards/<reward function>/mean) or metrics.jsonl "
                      "(default greedy_accuracy)")

_CURVE_SCALE_HELP = ("how a --reference-curve CSV's, metrics.jsonl's or TRL trainer_state.json's accuracies are read: "
                     "fraction (in [0, 1]), points (in [0, 100]) or auto (default: points when the largest value is "
                     "above 5, refused when it lies in (1, 5], where points under 5%% cannot be told from a metric on "
                     "a small scale such as a sum of 0/1 rewards; fractions when every value lies in [0, 1])")
_INITIAL_ACCURACY_HELP = ("the initial policy's accuracy on a --reference-curve TRL trainer_state.json's eval, in the "
                          "curve's scale (--reference-curve-scale), when the log has no eval at step 0 (TRL evaluates "
                          "there only with eval_on_start=True): the curve's R0, else extrapolated by the fit, noted "
                          "under the forecast as given, not an eval (probe.json: forecast.curve_options); a file "
                          "with its own step-0 eval keeps it (noted under the forecast)")


REWARDS_HELP = ("comma-separated reward names: registered ones, or a reward of your own as MODULE:FUNCTION or "
                "path/to/file.py:FUNCTION (a TRL-style function is wrapped); given more than once, the lists are "
                "joined")


class _JoinedRewards(argparse.Action):
    """``--rewards A --rewards B`` probes A and B (the lists joined in order): the last one alone winning, as
    argparse's default store does, dropped A without a word."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        given = before is not None and before is not self.default  # the default object itself: nothing given yet
        setattr(namespace, self.dest, f"{before},{values}" if given else values)


def _home_paths(text: str) -> str:
    """An argparse ``type`` for ``--checkpoints PATH[,PATH...]``: each comma-separated path with a leading ``~``
    expanded (:func:`.args.home`), as the shell does for the first of ``--checkpoints ~/a,~/b`` only and for none of
    ``--checkpoints=~/a``, so that a refusal names the path that was looked for. Raises nothing (an empty list is
    refused by :func:`gradprobe.probe.checkpoints.checkpoint_weights`, naming the fix)."""
    return ",".join(home(part.strip()) for part in text.split(","))


def _add_probe(sub) -> None:
    """The ``probe`` command's parser, its options in the order ``--help`` lists them."""
    p = sub.add_parser("probe", help="probe rewards on one batch: per-token alignment with a reference update",
                       formatter_class=HelpFormatter)
    _add_batch_options(p)
    _add_update_options(p)
    _add_run_options(p)
    _add_forecast_options(p)
    mark_explicit_flags(p)  # --trl-config: explicitly given flags win over the file


def _add_batch_options(p) -> None:
    """What is probed: the model, the task, the rewards, the probe batch and the reference direction."""
    p.add_argument("--model", default=ModelSettings.name, help=MODEL_HELP)
    p.add_argument("--task", default=TaskSettings.spec,
                   help="reasoning-gym dataset name (chain_sum, basic_arithmetic, gsm_symbolic, ...), gsm8k, "
                        "gsm8k:PATH, or your own data: jsonl:PATH or hf:NAME[:CONFIG], options after a last ':' "
                        "(prompt=, question=, answer=, solution= columns; verifier=hash|boxed|exact)")
    p.add_argument("--skip-malformed", action="store_true",
                   help="tasks read from data (gsm8k, jsonl:, hf:): skip malformed rows (counted, warned) instead of "
                        "stopping")
    p.add_argument("--rewards", default=",".join(ProbeConfig.rewards), action=_JoinedRewards, help=REWARDS_HELP)
    p.add_argument("--prompts", type=integer, default=BatchSettings.prompts, help="B, prompts in the probe batch")
    p.add_argument("--group", type=integer, default=BatchSettings.group, help="G, completions per prompt")
    p.add_argument("--reference", default=ReferenceSettings.kind,
                   help="heldout, or direction:PATH (.safetensors vector)")
    p.add_argument("--update-prompts", type=integer, default=UpdateSettings.update_prompts,
                   help="B of the training update the gain is predicted for (default: --prompts); scales tokens per "
                        "update")
    p.add_argument("--update-group", type=integer, default=UpdateSettings.update_group,
                   help="G of the training update the gain is predicted for (default: --group)")
    p.add_argument("--heldout-prompts", type=integer, default=ReferenceSettings.heldout_prompts,
                   help="prompts of the held-out batch whose GRPO update is the reference (--reference heldout)")
    p.add_argument("--heldout-group", type=integer, default=ReferenceSettings.heldout_group,
                   help="completions per held-out prompt (>= 2: the RLOO baseline)")
    p.add_argument("--precondition", choices=list(PRECONDITIONER_KINDS), default=ReferenceSettings.precondition,
                   help="; ".join(f"{k}: {v.help}" for k, v in PRECONDITIONER_KINDS.items()))


def _add_update_options(p) -> None:
    """The update whose gain is predicted, its budget, sampling, MC continuations and guidance."""
    p.add_argument("--lr", type=float, default=UpdateSettings.lr, help="learning rate of the predicted update")
    p.add_argument("--loss-type", choices=list(LOSS_TYPE_NAMES), default=UpdateSettings.loss_type,
                   help="loss of the predicted update (gradprobe.grpo.losses.LOSS_TYPES)")
    p.add_argument("--loss-types", default="", metavar="LOSS,...",
                   help="extra loss types, comma-separated (e.g. bnpo,cispo): every reward is also estimated under "
                        "each, as entries REWARD@LOSS (e.g. outcome@bnpo); under --precondition adam each token-weight "
                        "family (grpo/gspo, dapo/bnpo/cispo, dr_grpo) gets its own preconditioner and alignment pass")
    p.add_argument("--budget-tokens", type=token_count, default=BudgetSettings.tokens, metavar="N",
                   help="generated-token budget of the extrapolation: an integer (250000), with a k, M or G suffix "
                        "(250k, 1.5M) or in scientific notation (2.5e5)")
    p.add_argument("--budget-seconds", type=float, default=BudgetSettings.seconds,
                   help="device-seconds budget of the extrapolation")
    p.add_argument("--temperature", type=float, default=SamplingConfig.temperature,
                   help="sampling temperature of the rollouts")
    p.add_argument("--top-p", type=float, default=SamplingConfig.top_p, help="nucleus sampling p of the rollouts")
    p.add_argument("--max-new-tokens", type=integer, default=SamplingConfig.max_new_tokens,
                   help="longest completion, in tokens (a longer one is cut there and counted as truncated)")
    p.add_argument("--generation-batch-size", type=integer, default=SamplingConfig.batch_size, metavar="N",
                   help="sequences per generate call; the sampled completions depend on it (micro-batch "
                        "composition), so a study's probe is reproduced with its plan's [sampling] batch_size")
    p.add_argument("--backend", choices=list(SAMPLER_BACKENDS), default=SamplingConfig.backend,
                   help="rollout backend (gradprobe.rollout.SAMPLERS): hf = batched generate, hf_paged = "
                        "transformers continuous batching with a paged KV cache, vllm = the optional vLLM engine")
    p.add_argument("--continuations", type=integer, default=DEFAULT_MC.continuations,
                   help="K, MC continuations per step boundary")
    p.add_argument("--max-steps", type=integer, default=DEFAULT_MC.max_steps,
                   help="steps per completion for MC rewards (lines merged)")
    p.add_argument("--guidance", default=None, metavar="fraction=F,prefix=P[,cap=C]", help=_GUIDANCE_HELP)


def _add_run_options(p) -> None:
    """How the probe runs: cosines, intervals, micro-batches, seed, placement and precision, output, threads,
    probe batches and checkpoints."""
    p.add_argument("--cosine", action="store_true", help="also compute cosines (one backward per reward)")
    p.add_argument("--bootstrap", type=integer, default=RunSettings.n_bootstrap, help=_BOOTSTRAP_HELP)
    p.add_argument("--micro-batch-size", type=integer, default=UpdateSettings.micro_batch_size,
                   help="rows per forward/backward (memory; the results do not depend on it)")
    p.add_argument("--seed", type=seed_int, default=BatchSettings.seed,  # as train's: checked before any model loads
                   help="seed of the probe: which prompts are drawn and how they are sampled")
    p.add_argument("--device", default=ModelSettings.device, help="torch device of the model (cpu, cuda, cuda:1...)")
    p.add_argument("--dtype", default=ModelSettings.dtype, choices=list(DTYPE_NAMES),
                   help="the model's weights and compute (float16 is refused on the CPU: non-finite alignments)")
    p.add_argument("--out", type=out_path, default="runs/probe",
                   help="output folder (probe.json, report.html, alignment.safetensors, tokens.jsonl); replaces an "
                        "earlier probe there (a folder with probe.json), keeps other files, refuses a run's, a "
                        "study's, a study's probe, a calib report or a model folder, a folder holding files of a "
                        "probe's names without probe.json, and a batch_K the probe writes that is no earlier probe's "
                        "(a link, a file, a folder of your files)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--threads", type=integer, default=ModelSettings.threads,
                   help="torch CPU threads (default: torch's own; 1 for models under 20M parameters when OpenMP "
                        "threads spin, i.e. OMP_WAIT_POLICY is not PASSIVE, which this command sets)")
    p.add_argument("--probe-batches", type=integer, default=1,
                   help="N probe batches on disjoint training prompts with one shared reference direction; the "
                        "efficiency ratio is averaged over them, so more batches narrow its interval (~1/sqrt(N))")
    p.add_argument("--checkpoints", default=None, metavar="PATH[,PATH...]", type=_home_paths,
                   help="also probe kept weights of a reference GRPO run and pool them with the initial policy's "
                        "batches: a run folder (its weights/, kept by [train] save_weights_at), checkpoint-UUUUUU "
                        "folders or .safetensors files of a run of --model; each policy gets --probe-batches batches "
                        "and its own reference direction")


def _add_forecast_options(p) -> None:
    """The forecast: the reference curve and how it is read, the forecaster, a calibration, a TRL config."""
    p.add_argument("--reference-curve", default=None, metavar="PATH|default", type=home, help=_CURVE_HELP)
    p.add_argument("--reference-curve-metric", default=None, metavar="KEY", help=_CURVE_METRIC_HELP)
    p.add_argument("--reference-curve-scale", choices=("auto", "fraction", "points"), default=None,
                   help=_CURVE_SCALE_HELP)
    p.add_argument("--initial-accuracy", type=float, default=None, metavar="X", help=_INITIAL_ACCURACY_HELP)
    p.add_argument("--forecaster", choices=list(FORECASTERS), default="auto",
                   help="which forecaster makes the verdict (the others are printed beside it): auto (the one that "
                        "validated best on the shipped studies, named in the output), the probe's efficiency ratio "
                        "shrunk by the SNR of rho-1, |rho-1|/se (cost only where it is <= 1), cost only, or verl's "
                        "signal proxy")
    p.add_argument("--calibration", default=None, metavar="default|PATH", type=in_path(CALIBRATION_PATH),
                   help="apply a calibration (calib fit) and add calibrated_gain and calibrated_interval (gain vs "
                        "GRPO, accuracy points) to each reward; 'default' is the one shipped with the package")
    p.add_argument("--trl-config", default=None, metavar="FILE",
                   type=in_path("your TRL GRPOConfig file (YAML or JSON), or omit the option"),
                   help="your TRL GRPOConfig (YAML or JSON): loss_type, scale_rewards, num_generations, "
                        "max_completion_length, learning_rate, beta, temperature, top_p, optim and the batch size set "
                        "the matching options; flags given explicitly on the command line win over the file; "
                        "settings the probe cannot honour are refused, naming the field and the fix "
                        "(gradprobe.integrations.trl_config)")


class Terminated(BaseException):
    """SIGTERM during ``gradprobe probe``, raised by the handler :func:`terminate_cleanly` installs; a
    BaseException (as KeyboardInterrupt) so that no ``except Exception`` in a reward or model swallows it."""


@contextlib.contextmanager
def terminate_cleanly(raise_as: type[BaseException] = Terminated):
    """Within the block SIGTERM raises ``raise_as`` (:class:`Terminated`; ``gradprobe study`` passes its
    :class:`~gradprobe.study.result.StudyTerminated`, a KeyboardInterrupt, to stop as on Ctrl-C), once: a second
    SIGTERM while the command cleans up is ignored; the previous handler is restored after. Outside the main
    thread (no handler can be set) a no-op."""
    raised = []

    def handler(signum, frame):
        if not raised:
            raised.append(signum)
            raise raise_as(signum) if raise_as is Terminated else raise_as()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_message(out, folder=None, how: str = "interrupted") -> str:
    """The line ``gradprobe probe`` prints on Ctrl-C (``how`` "interrupted") or SIGTERM ("terminated (SIGTERM)").

    Parameters
    ----------
    out : path
        ``--out``.
    folder : gradprobe.probe.output.ProbeFolder, optional
        What :func:`~gradprobe.probe.output.replacing_earlier_probe` did (None: the probe had not started).
    how : str
        What stopped the probe, the line's first words after ``gradprobe probe:``.
    """
    out = shown(str(out))  # a newline or tab in the path escaped: one line
    if folder is None:
        return f"gradprobe probe: {how} before the probe started; nothing was written to {out}"
    back = (f"; the earlier probe's files there ({', '.join(folder.earlier)}) were put back" if folder.earlier else "")
    return (f"gradprobe probe: {how}; the unfinished probe's files in {out} were removed{back}, so nothing "
            "partial is left as if complete (run the same command again to probe)")


def _warn(line: str) -> None:
    print(f"gradprobe probe: warning: {line}", file=sys.stderr)


def _reference_curve(args):
    """``--reference-curve`` (with ``--reference-curve-metric``, ``--reference-curve-scale`` and
    ``--initial-accuracy``) read by :func:`~gradprobe.forecast.load_reference_curve`, or None when not given;
    ValueError for an empty one, or a metric, scale or initial accuracy without a curve; CurveError for what that
    loader refuses (an initial accuracy not finite, out of the scale's range or for a curve that is no TRL trainer
    state; a curve that cannot be read), its message naming these options."""
    from ..forecast import load_reference_curve

    if args.reference_curve is not None and not args.reference_curve.strip():  # an unset shell variable
        raise ValueError(f"--reference-curve is empty ({args.reference_curve!r}): give a path or 'default', or "
                         "omit the flag for the model's shipped curve (if any)")
    for flag, value in (("--reference-curve-metric", args.reference_curve_metric),
                        ("--reference-curve-scale", args.reference_curve_scale)):
        if value is not None and not args.reference_curve:
            raise ValueError(f"{flag} says how --reference-curve is read, which is not given: add --reference-curve "
                             "PATH (a TRL trainer_state.json, a metrics.jsonl or a CSV)")
    if args.initial_accuracy is not None and not args.reference_curve:
        raise ValueError("--initial-accuracy gives the initial policy's accuracy on a --reference-curve's eval, which "
                         "is not given: add --reference-curve PATH (a TRL trainer_state.json without a step-0 eval), "
                         "or leave it out")
    if not args.reference_curve:
        return None
    return load_reference_curve(args.reference_curve, metric=args.reference_curve_metric,
                                accuracy_scale=args.reference_curve_scale, initial_accuracy=args.initial_accuracy)


def _probe_command(args) -> int:
    """``gradprobe probe``: build the config, load the calibration first, run, print; 0, 2 (bad input), 130
    (Ctrl-C) or 143 (SIGTERM)."""
    from ..forecast import forecast_section
    from ..probe.batches import run_probe_batches
    from ..probe.output import batch_folder_count, probe_files, replacing_earlier_probe
    from ..probe.run import format_table

    folder = None
    try:
        trl = None
        if args.trl_config:  # fills the options the command line did not give; fails before any compute
            trl = apply_trl_config(args)
        curve = _reference_curve(args)  # fails before compute
        calibration = None
        if args.calibration is not None:  # loaded before any compute, so a bad file fails at once
            from calib.model import load_calibration  # the composition root may use calib; the library never does

            calibration = load_calibration(args.calibration)
        config = _config_from_args(args)
        checkpoint_files = None
        if args.checkpoints is not None:  # a missing or wrong path fails before any compute
            from ..probe.checkpoints import checkpoint_weights

            checkpoint_files = len(checkpoint_weights(args.checkpoints))
        if calibration is not None:
            from calib.apply import check_applicable, format_calibrated

            from ..forecast.forecaster import DEFAULT_CURVES

            check_applicable(calibration, rewards=config.rewards, budget_seconds=config.budget.seconds,
                             model=config.model.name,
                             has_curve=curve is not None or config.model.name in DEFAULT_CURVES)
        # after the checks: a typo keeps the earlier one; the batch_K folders it writes are checked before any compute
        with replacing_earlier_probe(args.out, say=_warn,
                                     batch_folders=batch_folder_count(args.probe_batches, checkpoint_files)) as folder:
            if args.checkpoints is None:
                result = run_probe_batches(config, batches=args.probe_batches, out=args.out)
            else:  # batches at the initial policy and at each checkpoint, pooled
                from ..probe.checkpoints import run_probe_checkpoints

                result = run_probe_checkpoints(config, args.checkpoints, batches=args.probe_batches, out=args.out)
            result["forecast"] = forecast_section(result, curve=curve, curve_spec=args.reference_curve,
                                                  method=args.forecaster,
                                                  reference_reward=trl.reference_reward if trl else "outcome")
            if trl is not None:
                result["trl_config"] = trl.record()  # which fields came from the file, which flags won
            _write_outputs(args, result, calibration)
            # the printout is made inside the block: a failure to format it rolls the probe back as any error does
            printed = format_table(result) + (f"\n{format_calibrated(result)}" if calibration is not None else "")
    except KeyboardInterrupt:
        print(interrupt_message(args.out, folder), file=sys.stderr)
        return 130
    except Terminated:
        print(interrupt_message(args.out, folder, how="terminated (SIGTERM)"), file=sys.stderr)
        return 143
    except (ValueError, OSError, RuntimeError) as e:
        kept = f" (the earlier probe in {shown(args.out)} was kept)" if folder is not None and folder.earlier else ""
        print(f"gradprobe probe: error: {flag_named(str(e))}{kept}", file=sys.stderr)
        return 2
    except Exception:  # a bug: rolled back by replacing_earlier_probe already; say so, then the traceback
        if folder is not None:
            back = f"; the earlier probe's files ({', '.join(folder.earlier)}) were put back" if folder.earlier else ""
            print(f"gradprobe probe: internal error (traceback below, please report it); the unfinished probe's files "
                  f"in {shown(args.out)} were removed{back}", file=sys.stderr)
        raise
    if folder.earlier:
        print(f"replaced the earlier probe in {shown(args.out)}: its files ({', '.join(folder.earlier)}) were removed "
              "before this probe wrote its own")
    print(printed)
    # every file this probe wrote (its batch folders, not a user's batch_K beside them), a newline in --out escaped
    written = [shown(f) for f in probe_files(args.out, folder.batch_folders)]
    print(f"\nwrote {', '.join(written[:-1])} and {written[-1]}" if len(written) > 1 else f"\nwrote {written[0]}")
    return 0


def _write_outputs(args, result: dict, calibration) -> None:
    """Write ``gradprobe probe``'s ``probe.json`` (``result``, its forecast in), ``calibrated.json`` (with
    ``calibration``, :func:`calib.apply.calibrate_probe`, which adds it to ``result``) and ``report.html`` into
    ``--out``, each named in the probe's record once its content is made, just before it is started
    (:func:`gradprobe.probe.output.claim_probe_file`: by :func:`~gradprobe.probe.output.write_probe_json`, here for
    ``calibrated.json`` and by :func:`~gradprobe.probe.report_html.write_probe_report` after it rendered the page),
    so that a probe killed meanwhile leaves none of them unnamed and names none it did not start. Raises what those
    writers raise (OutputDirError, an OSError: the file named)."""
    from ..probe.output import claim_probe_file, write_probe_json
    from ..probe.report_html import write_probe_report  # after the forecast: the page shows its verdicts

    write_probe_json(args.out, result)
    if calibration is not None:
        from calib.apply import calibrate_probe, rewrite_probe_json

        calibrate_probe(result, calibration, source=args.calibration)
        claim_probe_file(args.out, CALIBRATED_JSON)  # calibrated: its document is written at once
        rewrite_probe_json(f"{args.out}/{PROBE_JSON}", result)
    write_probe_report(args.out, result)  # report.html named there once rendered


def _config_from_args(args) -> ProbeConfig:
    """The :class:`~gradprobe.probe_settings.ProbeConfig` of ``gradprobe probe``'s options: flat settings read by
    :meth:`ProbeConfig.from_dict` (sampling fields without a flag, e.g. ``top_k``, keep SamplingConfig's defaults).

    Raises ValueError: a bad value (the message names the field and its flag), e.g. an empty ``--guidance``."""
    if args.guidance is not None and not args.guidance.strip():
        raise ValueError("--guidance is empty; omit the flag for no guidance, or give fraction=F,prefix=P[,cap=C] "
                         "(e.g. --guidance fraction=0.25,prefix=0.5)")
    return ProbeConfig.from_dict(dict(
        model=args.model, task=args.task, skip_malformed=args.skip_malformed, rewards=args.rewards,
        update_prompts=args.update_prompts, update_group=args.update_group, prompts=args.prompts, group=args.group,
        reference=args.reference, heldout_prompts=args.heldout_prompts, heldout_group=args.heldout_group,
        precondition=args.precondition, lr=args.lr, loss_type=args.loss_type, loss_types=args.loss_types,
        budget_tokens=args.budget_tokens, budget_seconds=args.budget_seconds,
        sampling=SamplingConfig(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                                backend=args.backend, batch_size=args.generation_batch_size),
        mc=MCConfig(continuations=args.continuations, max_steps=args.max_steps),
        seed=args.seed, device=args.device, dtype=args.dtype, cosine=args.cosine, threads=args.threads,
        guidance=args.guidance,
        n_bootstrap=args.bootstrap, micro_batch_size=args.micro_batch_size, progress=not args.no_progress))


def probe_main(args) -> int:
    """Run ``gradprobe probe``; the notes are printed once, under the table (``-v``: logged as they come)."""
    from ..probe.run import notes_log  # torch: deferred so that parsing the command line loads none

    level = notes_log.level
    if not args.verbose:
        notes_log.setLevel(logging.ERROR)
    try:
        with terminate_cleanly():  # SIGTERM: rolled back as Ctrl-C is (exit 143)
            return _probe_command(args)
    except Terminated:  # after the probe was complete, while its table was printed
        print(f"gradprobe probe: terminated (SIGTERM) after the probe in {shown(args.out)} was complete; its files are "
              "kept", file=sys.stderr)
        return 143
    finally:
        notes_log.setLevel(level)
