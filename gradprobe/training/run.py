"""One matched-compute training run: GRPO updates with one reward until a budget is spent.

``gradprobe train --plan PLAN --arm NAME --seed S --out DIR`` (DESIGN.md, "Matched-compute
training"; the command line: :mod:`gradprobe.cli.train`). Each update
(:func:`gradprobe.training.update.run_update`) is rollout -> reward -> step -> record: B pool
prompts x G rollouts (``rollout`` tokens; an arm with ``selection`` chooses its prompts by
:mod:`gradprobe.difficulty.select`, charging ``selection``), the arm's reward (MC rewards add
``continuation`` tokens; an arm with ``guidance`` samples part of each group with a hint,
:mod:`gradprobe.rollout.guided`), one :func:`~gradprobe.grpo.step.grpo_step` per iteration, one
``metrics.jsonl`` line. Before every update the budgets are checked; the run stops before the first
update that would start with a budget spent, so the last update overshoots by less than one update's
cost (reported in ``summary.json``).

Outputs in DIR (names: :mod:`gradprobe.layout`; a folder holding a probe, a study, a calib report or a
model is refused first, :mod:`gradprobe.training.run_folder`):

``config.json``    the resolved :class:`~gradprobe.training.plan.RunConfig`, plan sha256, versions
                   (``run.budget_override``: budgets shortened by ``--updates``/``--budget-*``, else null),
                   and for a plug-in reward its module file and sha256 and its helper modules' (``reward_plugin``:
                   a resume with other code is refused, :func:`~gradprobe.training.run_folder.check_reward_identity`);
                   for a task read from data files (``jsonl:PATH``, ``gsm8k:PATH``) each file's path and sha256
                   (``task_data``: a resume on edited data is refused,
                   :func:`~gradprobe.training.run_folder.check_task_data`); the initial weights the model name
                   resolved to (``model_weights``: a tier's build and sha256, a folder's or GGUF file's weights; a
                   resume that would load other ones is refused,
                   :func:`~gradprobe.training.run_folder.check_model_weights`);
``metrics.jsonl``  one line per update, and eval lines (``"eval": true``) on the plan's schedule
                   (:class:`~gradprobe.training.plan.EvalSpec`: update 0, listed updates, fractions
                   of every budget, every ``eval.every_tokens`` charged tokens, the end);
``eval_items.jsonl`` per eval, each held-out item's result (greedy and sampled, '1' = correct);
``summary.json``   stop reason, updates, final accuracy, ledger totals, overshoot, budget (and override),
                   wall time of every invocation together and of this one, the updates resumed from;
``checkpoint-*``   see :mod:`gradprobe.training.checkpoint` (every K updates and at the end).

Per-update statistics and their definitions: :mod:`gradprobe.training.metrics`; evals, checkpoints
and the summary: :mod:`gradprobe.training.records`; the run's parts and counters:
:mod:`gradprobe.training.state`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import sys
import time
import warnings
from pathlib import Path

import torch

from ..difficulty.select import make_selector
from ..grpo.step import UpdateConfig
from ..layout import CONFIG_JSON, EVAL_ITEMS_JSONL, METRICS_JSONL, SUMMARY_JSON
from ..outputs import OutputDirError, error_text, prepare_output_dir, versions, write_json_atomic
from ..rewards import UnknownRewardError, get_reward
from ..rewards.plugin import plugin_identity
from ..rollout import NonFiniteSamplingError, check_backend, collect_rollouts, make_sampler
from ..rollout.base import context_limit
from ..rollout.guided import GuidanceConfig, collect_guided_rollouts, task_kind
from ..streams import pool_indices, stream_sampler  # noqa: F401  (pool_indices: also imported from here)
from ..tasks import encode_prompt, task_data_identity
from ..tracking import open_tracker, require_tracker
from .checkpoint import current_checkpoint, latest_checkpoint, load_checkpoint, save_weights, set_rng_states
from .errors import (BudgetTooSmallError, DamagedRunFolderError, NonFiniteRunError, NoValidRewardError,
                     PolicyDivergedError, RunConfigMismatchError)
from .loading import (enable_gradient_checkpointing, load_run_context_limit, load_run_policy, load_run_task,
                      load_run_tokenizer, training_pool)
from .metrics import MetricsFile
from .plan import RunConfig, run_config_from_dict
from .plan_checks import check_mc
from .specs import PlanError
from .preflight import GuidancePreflightError, check_run_guidance, check_run_prompt_lengths
from .records import end_invocation, finish, maybe_eval, record_end, save, start_invocation
from .run_folder import (MODEL_WEIGHTS, REWARD_PLUGIN, TASK_DATA, check_model_weights, check_reward_identity,
                         check_task_data, comparable_config, config_differences, model_weights_identity,
                         refuse_other_output, refuse_unimportable_reward)
from .state import RunSession, RunState, crossed_eval_points, exhausted, resumed_invocations
from .update import check_first_update, run_update

__all__ = ["run_training", "NonFiniteRunError", "PolicyDivergedError", "NoValidRewardError", "BudgetTooSmallError",
           "RunConfigMismatchError", "DamagedRunFolderError", "load_run_policy", "load_run_task",
           "enable_gradient_checkpointing", "crossed_eval_points", "pool_indices"]


def _check_existing(out: Path, run: RunConfig) -> dict | None:
    """Refuse a folder made by another config; return its summary if that run is complete; else check the
    checkpoint a resume would load (:func:`~gradprobe.training.checkpoint.current_checkpoint`), all before
    anything is loaded.

    Raises
    ------
    RunConfigMismatchError
        ``config.json`` holds another configuration.
    DamagedRunFolderError
        ``config.json``, ``summary.json``, ``checkpoint.json`` or the current checkpoint's files cannot be read
        (one line naming the file and the fix).
    """
    cfg = out / CONFIG_JSON
    if cfg.exists():
        try:
            old = run_config_from_dict(json.loads(cfg.read_text())["run"]).to_dict()  # keys added since: defaults
        except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise DamagedRunFolderError(
                f"{cfg} is damaged ({error_text(e)}): the run's configuration is lost, so a resume cannot be checked "
                f"against the plan; restore the file from a copy, or delete {out} to start the run over") from None
        old, new = comparable_config(old), comparable_config(run.to_dict())  # the plan's labels are not compared
        if old != new:
            diff = sorted(k for k in new if old.get(k) != new[k])
            raise RunConfigMismatchError(f"{out} holds a run with a different configuration (differs in: "
                                         f"{', '.join(diff)}: {config_differences(old, new)}); use another --out "
                                         f"or delete {out}")
    summary = out / SUMMARY_JSON
    if summary.exists():
        try:
            done = json.loads(summary.read_text())
            if not isinstance(done, dict):
                raise ValueError(f"a JSON {type(done).__name__}, not an object")
        except (UnicodeDecodeError, ValueError) as e:
            raise DamagedRunFolderError(
                f"{summary} is damaged ({error_text(e)}): whether the run finished cannot be told; delete the file to "
                f"resume the run from its last checkpoint (a finished run is only finished again), or delete {out} "
                "to start the run over") from None
        if done.get("completed"):
            return done
    current_checkpoint(out)  # a damaged checkpoint: refused before the model is loaded (and anything removed)
    return None


def run_training(run: RunConfig, out: str | Path, *, policy=None, task=None, progress: bool = False,
                 after_update=None, report_to: str = "none", tracking_dir: str | Path | None = None,
                 prompt_lengths_checked: bool = False) -> dict:
    """Train one run until its budget is spent, resuming from DIR's checkpoint if there is one.

    Parameters
    ----------
    run : RunConfig
        From :meth:`gradprobe.training.plan.Plan.arm`.
    out : path
        The run folder (created; checked for writing before any compute). The prompts and a guided run's
        task and model are checked first (:mod:`gradprobe.training.preflight`): refused, nothing is created.
    policy, task : optional
        Already loaded policy/task (tests, notebooks; default: ``run.model``/``run.task``): INITIAL weights.
    progress : bool
        One line per update on stderr.
    after_update : callable(int), optional
        Test hook called after each update's lines and checkpoint (a simulated kill).
    report_to : {"none", "tensorboard", "trackio", "wandb"}
        Also send every ``metrics.jsonl`` line to this tracker (:mod:`gradprobe.tracking`; checked first).
    tracking_dir : path, optional
        The tracker's folder (default ``DIR/tb``; a study passes ``STUDY/tb/<arm>/seed<N>``).
    prompt_lengths_checked : bool
        True only when the caller checked this run's pool and held-out prompt lengths on the same plan and files (a
        study's preflight, :func:`gradprobe.study.preflight.check_plan_inputs`): not checked again (the reward, mc
        and guidance checks are made either way, :func:`_preflight`). Default False: checked (``gradprobe train``).

    Returns
    -------
    dict
        The content of ``summary.json``.

    Raises
    ------
    NonFiniteRunError
        A NaN/inf loss; metrics, the last checkpoint and ``summary.json`` (``stop_reason``
        ``"non_finite_loss"``) are kept. Its subclass PolicyDivergedError: NaN/inf logits while sampling (the
        policy diverged; ``"policy_diverged"``; one line: the update, the learning rate, what DIR keeps, the fix);
        NoValidRewardError: the reward scored no completion (``"no_valid_reward"``,
        :func:`~.update.check_untrained_stop`).
    BudgetTooSmallError
        The first update cost more than the token or FLOP budget (data kept).
    OutputDirError
        DIR unwritable, a file in the way, disk full (names the path and the fix); or DIR holds a
        study, a probe, a study's probe, a calibration report or a model (:mod:`gradprobe.training.run_folder`;
        before anything is loaded or written).
    RunConfigMismatchError, DamagedRunFolderError
        DIR holds another configuration's run, or one whose plug-in reward is now other code (moved, edited, a helper
        module edited) or cannot be imported, or whose task's data file was edited or is missing, or whose model
        now resolves to other initial weights (a rebuilt tier in the cache, replaced weights:
        :func:`~gradprobe.training.run_folder.check_model_weights`) (:mod:`~gradprobe.training.run_folder`); or a
        damaged ``config.json``,
        ``summary.json``, ``checkpoint.json`` or current checkpoint file (named, with the fix; before anything loads).
    GuidancePreflightError
        A guided arm whose pool has a problem without a reference solution, or whose model's
        prompt format drops the hint (a ValueError; before DIR is created or anything loaded
        beyond the task and the tokenizer).
    gradprobe.rollout.PromptTooLongError
        A pool or held-out prompt too long for the context (named by its data line; before DIR is created).
    TrackerUnavailableError
        ``report_to`` is unknown or its library is not installed (before anything is written).
    PlanError
        An unknown reward, or ``run.mc`` out of range (``arms.NAME.mc.continuations`` >= 1...; before DIR
        is created).
    """
    require_tracker(report_to)  # a missing tracker fails before anything is written or loaded
    out = Path(out)
    refuse_other_output(out)  # another command's folder (a probe, a study): refused before anything is loaded
    if out.is_dir() and (done := _check_existing(out, run)) is not None:  # a completed run: nothing to check or load
        return done
    task, identity, data, weights = _checked_inputs(run, out, policy=policy, task=task,
                                                    lengths_checked=prompt_lengths_checked)
    out = prepare_output_dir(out)
    s = _open_session(run, out, policy=policy, task=task, progress=progress)
    resumed = _resume_or_start(s, identity, data, weights)
    tracker = open_tracker(report_to, tracking_dir or out / "tb", run=run,
                           start_step=s.state.update + 1 if resumed else 0)  # resumed: later events purged
    s.metrics = MetricsFile(out / METRICS_JSONL, s.state.metrics_bytes, tracker=tracker)  # closes the tracker too
    s.items = MetricsFile(out / EVAL_ITEMS_JSONL, s.state.items_bytes)
    return _train_recorded(s, after_update)


def _checked_inputs(run: RunConfig, out: Path, *, policy, task, lengths_checked: bool) -> tuple:
    """:func:`run_training`'s checks of a run's inputs, before ``out`` is created: the task's data and the initial
    weights against a resumed run's records, :func:`_preflight`, then the plug-in reward's code against the record.
    Returns ``(task, reward identity, task data identity, weights identity)``; raises as :func:`run_training` says."""
    data = task_data_identity(run.task.name)  # the task's data files and sha256s ({}: read from no file)
    check_task_data(out, run.task.name, data)  # a resume on edited data: refused before anything is loaded
    weights = _initial_weights(run, policy)  # what the initial policy (kl_init's frozen copy) is loaded from
    check_model_weights(out, str(run.model.name), weights)  # other weights than the run started from: refused
    task = _preflight(run, out, policy=policy, task=task, lengths_checked=lengths_checked)  # before out is made
    identity = _checked_reward_identity(run, out)  # a resume whose plug-in reward is other code: refused here
    return task, identity, data, weights


def _train_recorded(s: RunSession, after_update) -> dict:
    """:func:`_train`, with how this invocation ends recorded (``DIR/.invocation.json``,
    :func:`~gradprobe.training.records.start_invocation`: still unfinished on resume, it was killed), a write error's
    ``summary.json`` (``"write_error"``) and the run's JSONL files closed whatever happens."""
    try:
        start_invocation(s)  # ended null until it ends: a resume finding it so records this invocation as killed
        return _train(s, after_update)
    except OutputDirError as e:
        try:
            finish(s, "write_error", {"error": str(e)})
        except Exception:  # the disk may still be full: the error itself is what matters
            pass
        record_end(s, "write_error")  # also where summary.json could not be written (finish records it after)
        raise
    except BaseException as e:  # Ctrl-C, SIGTERM, an error: recorded for the next resume's invocations
        end_invocation(s, e)
        raise
    finally:
        s.metrics.close()
        s.items.close()


def _initial_weights(run: RunConfig, policy) -> dict | None:
    """The identity of the initial weights the run loads (:func:`~gradprobe.training.run_folder.model_weights_identity`
    of ``[model] name``), or, for a ``policy`` passed in code, ``{"source": "given", ...}`` without a digest (its
    weights are the caller's, not read from the name: not checked on resume)."""
    if policy is not None:
        return {"source": "given", "path": str(run.model.name), "files": [], "method": None, "digest": None}
    return model_weights_identity(str(run.model.name))


def _checked_reward_identity(run: RunConfig, out: Path) -> dict | None:
    """The plug-in reward's identity (:func:`~gradprobe.rewards.plugin.plugin_identity`; None: a built-in reward),
    checked against the one a run to resume in ``out`` recorded (RunConfigMismatchError:
    :func:`~gradprobe.training.run_folder.check_reward_identity`). Called after :func:`_preflight` imported it."""
    identity = plugin_identity(run.reward)
    check_reward_identity(out, run.reward, identity)
    return identity


def _preflight(run: RunConfig, out: Path, *, policy, task, lengths_checked: bool = False):
    """The checks of :mod:`gradprobe.training.preflight` (every prompt of the training pool and held-out set fits
    the model's context with ``[sampling] max_new_tokens``; a guided arm's reference solutions and prompt format),
    on the tokenizer and the model's config alone, before ``out`` is created (and the ``mc`` settings' range,
    :func:`~gradprobe.training.plan_checks.check_mc`); returns the task it built (or ``task``), for the run to
    reuse. Its reward is resolved first (a reward by import path is imported here, so a bad module stops the run
    before ``out``). ``lengths_checked`` (:func:`run_training`'s ``prompt_lengths_checked``): the prompt lengths
    were checked by the caller, so they are not checked here, and a run without guidance loads no tokenizer or
    config and builds no pool here."""
    check_mc(run.mc, f"arms.{run.arm}.mc")  # the plan's rule (a RunConfig built in code skips load_plan)
    try:
        get_reward(run.reward)
    except UnknownRewardError as e:
        refuse_unimportable_reward(out, run.reward, e)  # a resume: how to get the recorded reward back
        raise PlanError(f"arms.{run.arm}.reward: {e} (checked before the run folder {str(out)!r} was written; "
                        "nothing was)") from None
    task = task or load_run_task(run.task)
    if lengths_checked and not run.guidance:
        return task  # the tokenizer and the pool were needed for the length check alone
    tokenizer = policy.tokenizer if policy is not None else load_run_tokenizer(run.model)
    pool = training_pool(task, run.task, run.heldout)  # the run's pool, as _open_session
    if not lengths_checked:
        heldout = task.problems("heldout", run.heldout.prompts, seed=run.heldout.seed)  # its held-out set, as there
        limit = context_limit(policy.model.config) if policy is not None else load_run_context_limit(run.model)
        check_run_prompt_lengths(run.sampling.max_new_tokens, tokenizer, pool, heldout, limit=limit,
                                 runs=[run], task=task,
                                 when=f"checked before update 0 and before the run folder {str(out)!r} was "
                                      "written; nothing was")
    if not run.guidance:
        return task
    try:
        check_run_guidance([run], task, tokenizer, pool)
    except GuidancePreflightError as e:
        raise GuidancePreflightError(e.key, f"{e.reason} (checked before the run folder {str(out)!r} was "
                                            f"written; nothing was)") from None
    return task


def _train(s: RunSession, after_update) -> dict:
    """The run loop: eval at update 0, then updates until a budget is spent, then the final eval,
    checkpoint and ``summary.json``. Returns the summary.

    Raises
    ------
    PolicyDivergedError
        Sampling (rollouts, MC continuations, selection or a sampled eval) met NaN/inf probabilities
        (:func:`_diverged`; ``summary.json`` written first).
    """
    st, every = s.state, s.run.train.checkpoint_every
    with _diverging(s, "the held-out eval"):
        maybe_eval(s)
    while (reason := exhausted(s.run.budget, st.ledger, st.update)) is None:
        with _diverging(s, "its rollouts", next_update=True):
            run_update(s)  # rollout -> reward -> step -> record
        if st.update == 1:
            check_first_update(s)
        with _diverging(s, "the held-out eval"):
            maybe_eval(s)
        if st.update in s.run.train.save_weights_at:
            save_weights(s.out, st.update, s.model)
        if st.update % every == 0:
            save(s)
        if after_update is not None:
            after_update(st.update)
    with _diverging(s, "the held-out eval"):
        maybe_eval(s, force=True)
    if st.last_ckpt != st.update:
        save(s)
    _warn_unreached_weights(s.run, st.update, s.out)
    return finish(s, "budget", {"budget_spent": reason}, completed=True)


@contextlib.contextmanager
def _diverging(s: RunSession, what: str, *, next_update: bool = False):
    """Turn a :class:`~gradprobe.rollout.base.NonFiniteSamplingError` raised in the block into
    :func:`_diverged`'s error; ``next_update``: the block does update ``s.state.update + 1`` (else it samples
    with the weights of update ``s.state.update``, an eval)."""
    try:
        yield
    except NonFiniteSamplingError as e:
        raise _diverged(s, s.state.update + 1 if next_update else s.state.update, what) from e


def _diverged(s: RunSession, update: int, what: str) -> PolicyDivergedError:
    """Write ``summary.json`` (``stop_reason`` ``"policy_diverged"``, ``failed_update``, ``error``) and return the
    one-line error for a policy whose samples for update ``update`` (``what``: its rollouts, the held-out eval)
    met NaN/inf probabilities: the update, the learning rate, what the folder keeps and the fix (a lower
    learning rate; the initial policy itself: its ``[model]``)."""
    run, st = s.run, s.state
    kept = f"{s.out} keeps metrics.jsonl and summary.json (stop_reason \"policy_diverged\")"
    if st.update == 0:  # no update was made: the model itself gives NaN/inf logits, not the learning rate
        msg = (f"update 0: sampling {what} from the initial policy met non-finite logits/probabilities (NaN/inf) "
               f"before any update; {kept}; check [model] name and dtype (float16 can overflow: use bfloat16 or "
               "float32) and rerun with a new --out")
        finish(s, "policy_diverged", {"failed_update": update, "error": msg})
        return PolicyDivergedError(msg, update)
    scale = f" ([train] lr x arms.{run.arm}.lr_scale {run.lr_scale:g})" if run.lr_scale != 1 else ""
    ckpt = st.last_ckpt
    if ckpt is None:
        kept += ", and no checkpoint was written before it (nothing to resume)"
    elif ckpt == st.update:
        kept += (f"; its last checkpoint, checkpoint-{ckpt:06d} (update {ckpt}), already holds these diverged "
                 "weights (resuming it diverges again)")
    else:
        since = f"update {st.update}" if ckpt + 1 == st.update else f"updates {ckpt + 1}-{st.update}"
        kept += (f"; its last checkpoint, checkpoint-{ckpt:06d} (update {ckpt}), holds the weights from before "
                 f"{since} (resuming it with this learning rate repeats them)")
    msg = (f"update {update}: the policy diverged: sampling {what} from the weights of update {st.update} met "
           f"non-finite logits/probabilities (NaN/inf) at learning rate {run.train.lr:g}{scale}; {kept}; lower "
           f"[train] lr (or arms.{run.arm}.lr / lr_scale; RL fine-tuning uses about 1e-6 to 1e-4) and rerun with a "
           "new --out")
    finish(s, "policy_diverged", {"failed_update": update, "error": msg})
    return PolicyDivergedError(msg, update)


def _warn_unreached_weights(run: RunConfig, updates: int, out: Path) -> None:
    """Warn (``RuntimeWarning``, one line) when the finished run never reached some ``save_weights_at`` updates:
    no weights were written for them (a budget in tokens, FLOPs or seconds, or one shortened from the command
    line, that ran out first; a plan whose ``budget.updates`` is below them is refused when read)."""
    missed = [u for u in run.train.save_weights_at if u > updates]
    if missed:
        warnings.warn(f"arm {run.arm!r} seed {run.seed}: the run ended after {updates:,} update(s), so "
                      f"save_weights_at update(s) {', '.join(map(str, missed))} were never reached and no weights "
                      f"were written for them in {out / 'weights'}; list updates the budget reaches or raise the "
                      "budget",
                      RuntimeWarning, stacklevel=2)


def _open_session(run: RunConfig, out: Path, *, policy, task, progress: bool) -> RunSession:
    """Build the run's parts from its config: policy (and a frozen copy for ``kl_init``), task, reward,
    training pool and held-out set, optimizer and warmup schedule, update settings, samplers, selector.

    Seeds torch with ``run.seed`` first, so the run's random streams do not depend on what ran before.
    """
    wall = time.perf_counter()
    say = (lambda m: print(f"[train {run.arm} s{run.seed}] {m}", file=sys.stderr, flush=True)) if progress else (
        lambda m: None)
    torch.manual_seed(run.seed)
    check_backend(run.sampling.backend)  # vllm not installed: before the model is loaded
    policy = policy or load_run_policy(run.model)
    task = task or load_run_task(run.task)
    model, t = policy.model, run.train
    init_model = copy.deepcopy(model).requires_grad_(False).eval() if t.stats_every > 0 else None
    if getattr(run.model, "gradient_checkpointing", False):
        enable_gradient_checkpointing(model)
    reward_fn = get_reward(run.reward)
    pool = training_pool(task, run.task, run.heldout)
    heldout = task.problems("heldout", run.heldout.prompts, seed=run.heldout.seed)
    heldout_ids = [list(encode_prompt(policy.tokenizer, p.question)) for p in heldout]
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=t.betas, eps=t.eps, weight_decay=t.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(  # linear warmup over t.warmup updates
        optimizer, lambda s: min(1.0, (s + 1) / t.warmup) if t.warmup else 1.0)
    # off-context guidance: hinted rows' log-probs under the hint are the "sampler's" -> truncated IS weights
    guide = GuidanceConfig(**run.guidance) if run.guidance else None
    collect = collect_rollouts if guide is None else functools.partial(
        collect_guided_rollouts, guidance=guide, kind=task_kind(run.task.name))
    # the rollout stream (gradprobe.streams) on the plan's backend ([sampling] backend)
    sampler = make_sampler(run.sampling.backend, policy, seed=run.seed, progress=False)
    continuation_sampler = stream_sampler(sampler, run.seed, "continuation")
    selector = make_selector(run.selection, policy=policy, task=task, pool=pool, sampler=sampler,
                             sampling=run.sampling, group_size=t.group, prompts_per_update=t.prompts_per_update,
                             seed=run.seed, collect=collect)  # the `plain` rule unless the arm sets `selection`
    return RunSession(run=run, out=out, policy=policy, task=task, reward_fn=reward_fn, pool=pool, heldout=heldout,
                      heldout_ids=heldout_ids, optimizer=optimizer, scheduler=scheduler,
                      update_config=_update_config(run, guide), collect=collect, sampler=sampler,
                      continuation_sampler=continuation_sampler, selector=selector,
                      guide=guide, init_model=init_model,
                      push_weights=getattr(sampler, "push_weights", None),  # an engine with its own weights (vLLM)
                      say=say, wall=wall)


def _update_config(run: RunConfig, guide: GuidanceConfig | None) -> UpdateConfig:
    """The settings of every :func:`~gradprobe.grpo.step.grpo_step` of the run.

    sdpa attention in the update (UpdateConfig default; the model keeps gradprobe_eager for the probe);
    dr_grpo's constant L_max is the sampler's limit (Liu et al. 2025, Dr. GRPO), as TRL's
    max_completion_length; with guidance, truncated importance sampling capped at ``guide.cap``.
    """
    t = run.train
    config = UpdateConfig(loss_type=t.loss_type, micro_batch_size=t.micro_batch_size,
                          max_grad_norm=t.max_grad_norm, clip_low=t.clip_low, clip_high=t.clip_high,
                          max_completion_length=run.sampling.max_new_tokens)
    if guide is not None:
        config = UpdateConfig(**{**vars(config), "importance_sampling": "tis", "is_cap": guide.cap})
    return config


def _resume_or_start(s: RunSession, identity: dict | None = None, data: dict | None = None,
                     weights: dict | None = None) -> bool:
    """Restore the run from DIR's current checkpoint (weights, optimizer, scheduler, RNG states, sampler
    counters, selector, counters; the earlier invocations' wall time:
    :func:`~gradprobe.training.state.resumed_invocations`) and return True; without one, write ``config.json`` and
    return False (with ``reward_plugin``: ``identity``, the plug-in reward's file and sha256 and its helper modules'
    sha256s, for a later resume to check, :func:`~gradprobe.training.run_folder.check_reward_identity`; none for a
    built-in reward; with ``task_data``: ``data``, the task's data files and their sha256s,
    :func:`~gradprobe.tasks.task_data_identity`, for :func:`~gradprobe.training.run_folder.check_task_data`; none for
    a task read from no file; with ``model_weights``: ``weights``, the initial weights' identity,
    :func:`~gradprobe.training.run_folder.check_model_weights`; none for a generated model). A stopped run's
    ``summary.json`` is removed first (written again when this invocation ends)."""
    (s.out / SUMMARY_JSON).unlink(missing_ok=True)  # a stopped run's summary: rewritten when this invocation ends
    ckpt = latest_checkpoint(s.out)
    if ckpt is None:
        config = {"run": s.run.to_dict(), "plan_sha256": s.run.plan_sha256, "versions": versions()}
        if identity is not None:
            config[REWARD_PLUGIN] = identity
        if data:
            config[TASK_DATA] = {k: v for k, v in data.items() if v["sha256"]}  # a missing file: load_task refused it
        if weights is not None:
            config[MODEL_WEIGHTS] = weights
        write_json_atomic(s.out / CONFIG_JSON, config)
        return False
    st = load_checkpoint(ckpt, s.model)
    s.optimizer.load_state_dict(st["optimizer"])
    s.scheduler.load_state_dict(st["scheduler"])
    set_rng_states(st["rng"])
    s.sampler.calls = st["sampler_calls"]
    s.continuation_sampler.calls = st.get("continuation_sampler_calls", 0)
    s.state = RunState.from_checkpoint(st)
    s.state.invocations = resumed_invocations(st, s.out / METRICS_JSONL)  # before metrics.jsonl is truncated
    s.selector.load_state_dict(st.get("selector"))  # None: a run on the plain prompt stream
    s.say(f"resuming from {ckpt.name} (update {s.state.update})")
    return True
