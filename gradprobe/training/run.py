"""One matched-compute training run: GRPO updates with one reward until a budget is spent.

``gradprobe train --plan PLAN --arm NAME --seed S --out DIR`` (DESIGN.md, "Matched-compute
training"). Each update: B pool prompts x G rollouts (``rollout`` tokens; an arm with ``selection``
chooses its prompts by :mod:`gradprobe.difficulty.select`, charging ``selection``), the arm's reward
(MC rewards add ``continuation`` tokens; an arm with ``guidance`` samples part of each group with a
hint, :mod:`gradprobe.rollout.guided`), policy statistics, one :func:`~gradprobe.grpo.step.grpo_step`.
Before every update the budgets are checked; the run stops before the first update that
would start with a budget spent, so the last update overshoots by less than one update's
cost (reported in ``summary.json``).

Outputs in DIR:

``config.json``    the resolved :class:`~gradprobe.training.plan.RunConfig`, plan sha256, versions
                   (``run.budget_override``: budgets shortened by ``--updates``/``--budget-*``, else null);
``metrics.jsonl``  one line per update, and eval lines (``"eval": true``) on the plan's schedule
                   (:class:`~gradprobe.training.plan.EvalSpec`: update 0, listed updates, fractions
                   of every budget, every ``eval.every_tokens`` charged tokens, the end);
``eval_items.jsonl`` per eval, each held-out item's result (greedy and sampled, '1' = correct);
``summary.json``   stop reason, updates, final accuracy, ledger totals, overshoot, budget (and override);
``checkpoint-*``   see :mod:`gradprobe.training.checkpoint` (every K updates and at the end).

Per-update statistics and their definitions: :mod:`gradprobe.training.metrics`.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import sys
import time
from pathlib import Path

import torch

from ..ledger import CHARGED, Ledger, forward_flops_per_token
from ..outputs import (OutputDirError, json_safe, prepare_output_dir, removed_if_left_empty, versions,
                       write_json_atomic)
from ..streams import pool_indices  # noqa: F401  (the training pool's order; also imported from here)
from .checkpoint import latest_checkpoint, load_checkpoint, rng_states, save_checkpoint, set_rng_states
from .metrics import MetricsFile, batch_stats, evaluate, mean_context
from .plan import BUDGET_FLAGS, PlanError, RunConfig, run_config_from_dict, shorten_budget

EVAL_ITEMS = "eval_items.jsonl"  # per-item results of every eval (gradprobe.training.metrics.evaluate's "items")


class NonFiniteRunError(FloatingPointError):
    """An update produced a NaN/inf loss; the run stopped with its data kept. ``update`` is
    the failed update's number (1-based)."""

    def __init__(self, message: str, update: int):
        super().__init__(message)
        self.update = update


class BudgetTooSmallError(ValueError):
    """The first update alone spent more than the token or FLOP budget (DESIGN.md: every budget
    buys updates); the run stopped after it with its data kept. Fix: a larger ``[budget]``."""


class RunConfigMismatchError(ValueError):
    """DIR holds a run made with a different configuration."""


def load_run_policy(model_spec, *, seed: int = 0):
    """:func:`gradprobe.models.load_policy` for a plan's ``[model]``; ``tiny`` is the tier's folder.

    Raises
    ------
    ModelNotFoundError
        ``tiny`` without a built tier (the message says ``run gradprobe warmstart --tier tiny``).
    """
    import importlib.util

    from ..models import ModelNotFoundError, load_policy

    name = model_spec.name
    if name == "tiny":
        hint = "run `gradprobe warmstart --tier tiny` first"
        if importlib.util.find_spec("gradprobe.tiers") is None:
            raise ModelNotFoundError(f"model 'tiny' is the warm-started tier, which this install lacks; {hint}")
        from .. import tiers

        path = Path(tiers.tier_path("tiny"))
        if not path.exists():
            raise ModelNotFoundError(f"model 'tiny': the tier is not built at {path}; {hint}")
        name = str(path)
    return load_policy(name, dtype=model_spec.dtype, device=model_spec.device, seed=seed)


def enable_gradient_checkpointing(model) -> None:
    """Recompute activations in the backward pass (``[model] gradient_checkpointing = true``).

    ``model.activation_checkpointing_enable`` (transformers >= 5.2x; the older name
    ``gradient_checkpointing_enable`` before) with non-reentrant checkpoints (PyTorch's
    recommended mode; TRL's default too), active only in training mode, so generation,
    evaluation and the probe's jvp (eval mode) are unaffected. Gradients are the same as
    without it (same operations, recomputed); it costs about one extra forward per update.

    Raises
    ------
    PlanError
        The architecture does not support gradient checkpointing (fix: set
        ``gradient_checkpointing = false`` in the plan's ``[model]``).
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise PlanError(f"model.gradient_checkpointing: {type(model).__name__} does not support gradient "
                        "checkpointing; set [model] gradient_checkpointing = false")
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def load_run_task(task_spec):
    """The plan's task; reasoning-gym held-out questions are deduplicated against the pool."""
    from ..tasks import load_task

    config = dict(task_spec.config)
    if not task_spec.name.startswith("gsm8k"):
        config.setdefault("train_size", task_spec.pool)
    return load_task(task_spec.name, **config)


def _spent(ledger: Ledger, updates: int) -> dict[str, float]:
    """Compute spent so far, by budget kind (charged tokens, training seconds, FLOPs, updates).

    Every kind of work training needs counts (:data:`gradprobe.ledger.CHARGED_WORK`): generation,
    the update, prompt selection's own work (:mod:`gradprobe.difficulty.select`) and the reward's
    own compute (:func:`_charged_reward`; a PRM's FLOPs)."""
    return {"generated_tokens": ledger.charged_tokens, "device_seconds": ledger.charged_seconds,
            "flops": ledger.charged_flops, "updates": updates}


def crossed_eval_points(ev, budget, spent: dict[str, float]) -> set[str]:
    """The budget-fraction eval points (``"KIND:FRACTION"``) that ``spent`` has reached.

    Parameters
    ----------
    ev : EvalSpec
        ``at_fractions`` of each set budget.
    budget : BudgetSpec
    spent : dict
        Compute spent so far by budget kind (:func:`_spent`).
    """
    return {f"{kind}:{f:g}" for kind, limit in budget.given().items() for f in ev.at_fractions
            if spent[kind] >= f * limit}


def _exhausted(run: RunConfig, ledger: Ledger, updates: int) -> str | None:
    spent = _spent(ledger, updates)
    for kind, limit in run.budget.given().items():
        if spent[kind] >= limit:
            return kind
    return None


def _charged_reward(reward_fn, batch, ctx, ledger: Ledger):
    """``reward_fn(batch, ctx)`` with all of its wall time on the ledger.

    MC rewards charge their continuations' tokens and seconds (``generation``) and a process
    reward model its FLOPs and seconds (``reward``) themselves; the rest of the call (a
    verifier parsing and checking answers or steps) is added to ``device_seconds["reward"]``, so
    every second of the reward counts once against a seconds budget (:data:`gradprobe.ledger.CHARGED_WORK`).
    """
    before = sum(ledger.device_seconds.values())
    start = time.perf_counter()
    out = reward_fn(batch, ctx)
    elapsed = time.perf_counter() - start
    ledger.add_seconds("reward", max(0.0, elapsed - (sum(ledger.device_seconds.values()) - before)))
    return out


def _check_existing(out: Path, run: RunConfig) -> dict | None:
    """Refuse a folder made by another config; return its summary if that run is complete."""
    cfg = out / "config.json"
    if cfg.exists():
        old = run_config_from_dict(json.loads(cfg.read_text())["run"]).to_dict()  # keys added since: defaults
        new = run.to_dict()
        for label in ("plan_sha256", "plan_name"):  # name the plan only; no computation reads them
            old.pop(label, None), new.pop(label, None)
        if old != new:
            diff = sorted(k for k in new if old.get(k) != new[k])
            raise RunConfigMismatchError(f"{out} holds a run with a different configuration (differs in: "
                                         f"{', '.join(diff)}); use another --out or delete {out}")
    summary = out / "summary.json"
    if summary.exists():
        done = json.loads(summary.read_text())
        if done.get("completed"):
            return done
        summary.unlink()
    return None


def run_training(run: RunConfig, out: str | Path, *, policy=None, task=None, progress: bool = False,
                 after_update=None, report_to: str = "none", tracking_dir: str | Path | None = None) -> dict:
    """Train one run until its budget is spent, resuming from DIR's checkpoint if there is one.

    Parameters
    ----------
    run : RunConfig
        From :meth:`gradprobe.training.plan.Plan.arm`.
    out : path
        The run folder (created; checked for writing before any compute).
    policy, task : optional
        Already loaded policy/task (tests, notebooks); default: from ``run.model``/``run.task``.
        A passed policy must hold the INITIAL weights (they are copied as pi_init).
    progress : bool
        One line per update on stderr.
    after_update : callable(int), optional
        Test hook called after each update's lines and checkpoint (e.g. to simulate a kill).
    report_to : {"none", "tensorboard", "trackio", "wandb"}
        Also send every ``metrics.jsonl`` line to this tracker (:mod:`gradprobe.tracking`; checked first).
    tracking_dir : path, optional
        The tracker's folder (default ``DIR/tb``; a study passes ``STUDY/tb/<arm>/seed<N>``).

    Returns
    -------
    dict
        The content of ``summary.json``.

    Raises
    ------
    NonFiniteRunError
        A NaN/inf loss; metrics, the last checkpoint and ``summary.json`` (``stop_reason``
        ``"non_finite_loss"``) are kept.
    OutputDirError
        DIR unwritable, a file in the way, disk full (names the path and the fix).
    RunConfigMismatchError
        DIR holds another configuration's run.
    TrackerUnavailableError
        ``report_to`` is unknown or its library is not installed (before anything is written).
    """
    from ..grpo.step import NonFiniteLossError, UpdateConfig, grpo_step, old_policy_logprobs
    from ..rewards import RewardContext, get_reward
    from ..rollout import collect_rollouts, make_sampler
    from ..rollout.guided import GuidanceConfig, collect_guided_rollouts, guidance_stats, guided_logprobs, task_kind
    from ..streams import stream_sampler
    from ..tasks import encode_prompt

    from ..tracking import open_tracker, require_tracker

    require_tracker(report_to)  # a missing tracker fails before anything is written or loaded
    out = prepare_output_dir(Path(out))
    done = _check_existing(out, run)
    if done is not None:
        return done
    wall = time.perf_counter()
    say = (lambda m: print(f"[train {run.arm} s{run.seed}] {m}", file=sys.stderr, flush=True)) if progress else (
        lambda m: None)
    torch.manual_seed(run.seed)
    policy = policy or load_run_policy(run.model)
    task = task or load_run_task(run.task)
    model, t = policy.model, run.train
    init_model = copy.deepcopy(model).requires_grad_(False).eval() if t.stats_every > 0 else None
    if getattr(run.model, "gradient_checkpointing", False):
        enable_gradient_checkpointing(model)
    reward_fn = get_reward(run.reward)
    pool = task.problems("train", run.task.pool, seed=run.heldout.seed)
    heldout = task.problems("heldout", run.heldout.prompts, seed=run.heldout.seed)
    heldout_ids = [list(encode_prompt(policy.tokenizer, p.question)) for p in heldout]
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=t.betas, eps=t.eps, weight_decay=t.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / t.warmup) if t.warmup else 1.0)
    # sdpa attention in the update (UpdateConfig default; the model keeps gradprobe_eager for the probe);
    # dr_grpo's constant L_max is the sampler's limit (Liu et al. 2025, Dr. GRPO), as TRL's max_completion_length
    update_config = UpdateConfig(loss_type=t.loss_type, micro_batch_size=t.micro_batch_size,
                                 max_grad_norm=t.max_grad_norm, clip_low=t.clip_low, clip_high=t.clip_high,
                                 max_completion_length=run.sampling.max_new_tokens)
    # off-context guidance: hinted rows' log-probs under the hint are the "sampler's" -> truncated IS weights
    guide = GuidanceConfig(**run.guidance) if run.guidance else None
    collect = collect_rollouts if guide is None else functools.partial(
        collect_guided_rollouts, guidance=guide, kind=task_kind(run.task.name))
    if guide is not None:
        update_config = UpdateConfig(**{**vars(update_config), "importance_sampling": "tis", "is_cap": guide.cap})
    # the rollout stream (gradprobe.streams) on the plan's backend ([sampling] backend)
    sampler = make_sampler(run.sampling.backend, policy, seed=run.seed, progress=False)
    push_weights = getattr(sampler, "push_weights", None)  # an engine with its own copy of the weights (vLLM)
    continuation_sampler = stream_sampler(sampler, run.seed, "continuation")
    from ..difficulty.select import make_selector

    selector = make_selector(run.selection, policy=policy, task=task, pool=pool, sampler=sampler,
                             sampling=run.sampling, group_size=t.group, prompts_per_update=t.prompts_per_update,
                             seed=run.seed)  # None unless the arm sets `selection`
    ledger = Ledger()
    update, next_eval, last_eval, last_ckpt, length, last_cost = 0, 0, None, None, 0, {}
    items_length, passed, last_kl = 0, set(), None  # eval_items.jsonl bytes; budget fractions already evaluated
    ckpt = latest_checkpoint(out)
    if ckpt is not None:
        st = load_checkpoint(ckpt, model)
        optimizer.load_state_dict(st["optimizer"])
        scheduler.load_state_dict(st["scheduler"])
        set_rng_states(st["rng"])
        sampler.calls = st["sampler_calls"]
        continuation_sampler.calls = st.get("continuation_sampler_calls", 0)
        items_length, passed = st.get("items_bytes", 0), set(st.get("eval_points_passed", []))
        last_kl = st.get("last_kl")
        ledger = Ledger.from_dict(st["ledger"])
        update, next_eval, last_eval, length = st["update"], st["next_eval"], st["last_eval"], st["metrics_bytes"]
        last_cost = st["last_cost"]
        if selector is not None:
            selector.load_state_dict(st["selector"])
        last_ckpt = update
        say(f"resuming from {ckpt.name} (update {update})")
    else:
        write_json_atomic(out / "config.json", {"run": run.to_dict(), "plan_sha256": run.plan_sha256,
                                                "versions": versions()})
    tracker = open_tracker(report_to, tracking_dir or out / "tb", run=run,
                           start_step=update + 1 if ckpt is not None else 0)  # resumed: later events purged
    metrics = MetricsFile(out / "metrics.jsonl", length, tracker=tracker)  # closes the tracker with the file
    items_file = MetricsFile(out / EVAL_ITEMS, items_length)

    def checkpoint():
        nonlocal last_ckpt
        state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_states(),
                 "sampler_calls": sampler.calls, "continuation_sampler_calls": continuation_sampler.calls,
                 "items_bytes": items_file.sync(), "eval_points_passed": sorted(passed), "last_kl": last_kl,
                 "ledger": ledger.to_dict(), "update": update,
                 "next_eval": next_eval, "last_eval": last_eval, "last_cost": last_cost, "metrics_bytes": metrics.sync(),
                 "selector": selector.state_dict() if selector is not None else None}
        save_checkpoint(out, update, model, state)
        last_ckpt = update

    def maybe_eval(force: bool = False):
        nonlocal next_eval, last_eval
        spent = _spent(ledger, update)
        crossed = crossed_eval_points(run.eval, run.budget, spent) - passed
        due = force or crossed or update in run.eval.at_updates or ledger.charged_tokens >= next_eval
        if last_eval == update or not due:
            passed.update(crossed)
            return
        final = force or _exhausted(run, ledger, update) is not None
        res = evaluate(policy, task, heldout, heldout_ids, run, ledger,
                       sampled=run.eval.sampled_at == "all" or update == 0 or final)
        items = res.pop("items")
        spent = _spent(ledger, update)
        point = {"update": update, "generated_tokens": spent["generated_tokens"],
                 "device_seconds": spent["device_seconds"], "flops": spent["flops"]}
        metrics.write({"eval": True, **point, **res, "kl_init": last_kl})
        items_file.write({**point, **items})
        say(f"eval at update {update}: greedy {res['greedy_accuracy']} sampled {res['sampled_accuracy']}")
        last_eval = update
        passed.update(crossed)
        every = run.eval.every_tokens
        while every and next_eval <= ledger.charged_tokens:
            next_eval += every
        if not every:
            next_eval = math.inf

    def finish(reason: str, extra: dict | None = None, completed: bool = False) -> dict:
        spent = _spent(ledger, update)
        evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if '"eval": true' in x]
        summary = {"completed": completed, "stop_reason": reason, "updates": update,
                   "initial": evals[0] if evals else None, "final": evals[-1] if evals else None,
                   "final_greedy_accuracy": evals[-1]["greedy_accuracy"] if evals else None,
                   "final_sampled_accuracy": evals[-1]["sampled_accuracy"] if evals else None,
                   "budget": run.budget.given(), "budget_override": run.budget_override, "spent": spent,
                   "overshoot": {k: spent[k] - v if spent[k] > v else 0 for k, v in run.budget.given().items()},
                   "last_update_cost": last_cost, "ledger": ledger.to_dict(), "last_checkpoint": last_ckpt,
                   "continuation_share": ledger.share("continuation"),
                   "wall_seconds": time.perf_counter() - wall, **(extra or {})}
        write_json_atomic(out / "summary.json", json_safe(summary))
        return summary

    try:
        maybe_eval()
        while (reason := _exhausted(run, ledger, update)) is None:
            before = _spent(ledger, update)
            gen_before = dict(ledger.generated_tokens)
            selection = None
            if selector is None:
                problems = [pool[i] for i in pool_indices(update, t.prompts_per_update, len(pool), run.seed)]
                batch = collect(policy, task, problems, group_size=t.group, sampler=sampler,
                                sampling=run.sampling, ledger=ledger, category="rollout")
            else:  # charges its own selection tokens, FLOPs and seconds (gradprobe.difficulty.select)
                batch, selection = selector.next_batch(update, ledger)
            ctx = RewardContext(task=task, sampler=continuation_sampler, sampling=run.sampling, mc=run.mc, ledger=ledger,
                                tokenizer=policy.tokenizer, eos_token_ids=policy.eos_token_ids)
            rout = _charged_reward(reward_fn, batch, ctx, ledger)
            batch = batch.to(model.device)
            adv = rout.advantages.to(torch.float64).to(model.device)
            guided_logp = None if guide is None else guided_logprobs(  # l(y | x, hint); NaN on unguided rows
                model, batch, micro_batch_size=t.micro_batch_size, attention=update_config.attention, ledger=ledger)
            lr = scheduler.get_last_lr()[0]
            try:  # kl_init and entropy from the loss's own forward (+ one of pi_init), timed as "metrics"
                with_stats = init_model is not None and (update + 1) % t.stats_every == 0
                old_logp, old_seconds = None, 0.0
                if t.iterations > 1:  # pi_old for steps 2..mu (one no-grad forward, charged to training)
                    t0 = time.perf_counter()
                    old_logp = old_policy_logprobs(model, batch, update_config)
                    old_seconds = time.perf_counter() - t0
                    ledger.add_seconds("training", old_seconds)
                steps = [grpo_step(model, optimizer, batch, adv, update_config, ledger=ledger,
                                   old_logp=old_logp, sampler_logp=guided_logp,
                                   init_model=init_model if with_stats and k == 0 else None)
                         for k in range(t.iterations)]
                step = {**steps[0], "trained_tokens": sum(x["trained_tokens"] for x in steps),
                        "seconds": old_seconds + sum(x["seconds"] for x in steps)}
                if t.iterations > 1:
                    step["iteration_losses"] = [x["loss"] for x in steps]
                    step["iteration_grad_norms"] = [x["grad_norm"] for x in steps]
            except NonFiniteLossError as e:
                msg = f"update {update + 1}: non-finite loss ({e}); the run stopped, data kept in {out}"
                finish("non_finite_loss", {"failed_update": update + 1, "error": msg})
                raise NonFiniteRunError(msg, update + 1) from e
            scheduler.step()
            update += 1
            if push_weights is not None:  # the next rollouts come from the updated policy
                with ledger.timed("training"):
                    push_weights(model)
            kl, entropy = step.get("kl_init"), step.get("entropy")
            last_kl = kl if kl is not None else last_kl
            fpt = forward_flops_per_token(model, mean_context(batch))
            new_gen = {c: ledger.generated_tokens[c] - gen_before[c] for c in CHARGED}
            ledger.add_flops("generation", (sum(new_gen.values()) - new_gen["selection"]) * fpt)  # selection: own FLOPs
            # mu forward + backward passes (3x forward each) and, with mu > 1, pi_old's forward
            ledger.add_flops("training", (3.0 * step["trained_tokens"] + (batch.generated_tokens if t.iterations > 1 else 0))
                             * fpt)
            spent = _spent(ledger, update)
            last_cost = {k: spent[k] - before[k] for k in spent}
            stats = batch_stats(batch, task, adv, rout.valid)
            metrics.write({
                "update": update, "lr": lr, **stats, "loss": step["loss"], "grad_norm": step["grad_norm"],
                "kl_init": kl, "kl_clamped_tokens": step.get("kl_clamped_tokens"), "entropy": entropy,
                **({k: step[k] for k in ("iteration_losses", "iteration_grad_norms")} if t.iterations > 1 else {}),
                "reward_stats": rout.stats, "update_generated_tokens": new_gen,
                "update_charged_tokens": last_cost["generated_tokens"],
                "update_device_seconds": last_cost["device_seconds"],
                "generated_tokens": spent["generated_tokens"], "device_seconds": spent["device_seconds"],
                "flops": spent["flops"], "ledger": ledger.to_dict(),
                **({"selection": selection} if selection is not None else {}),
                **({"guidance": guidance_stats(batch, step)} if guide is not None else {})})
            say(f"update {update}: reward {stats['reward_mean']} "
                f"tokens {spent['generated_tokens']:,} loss {step['loss']:.4g}" + (f" kl {kl:.3g}" if kl is not None else ""))
            if update == 1:  # a budget smaller than one update cannot compare arms: stop, data kept
                over = {k: (v, spent[k]) for k, v in run.budget.given().items()
                        if k in ("generated_tokens", "flops") and spent[k] > v}
                if over:
                    flags = (run.budget_override or {}).get("flags", {})
                    detail = "; ".join(f"{BUDGET_FLAGS[k] if BUDGET_FLAGS[k] in flags else 'budget.' + k} = {v:,.0f} "
                                       f"but one update of arm {run.arm!r} cost {s:,.0f}" for k, (v, s) in over.items())
                    where = " / ".join(BUDGET_FLAGS[k] if BUDGET_FLAGS[k] in flags else f"budget.{k} in the plan"
                                       for k in over)
                    msg = (f"{detail}: the budget is smaller than one update; raise {where} to "
                           f"many updates' cost (the run stopped after update 1, data kept in {out})")
                    finish("budget_smaller_than_one_update", {"error": msg})
                    raise BudgetTooSmallError(msg)
            maybe_eval()
            if update % t.checkpoint_every == 0:
                checkpoint()
            if after_update is not None:
                after_update(update)
        maybe_eval(force=True)
        if last_ckpt != update:
            checkpoint()
        return finish("budget", {"budget_spent": reason}, completed=True)
    except OutputDirError as e:
        try:
            finish("write_error", {"error": str(e)})
        except Exception:  # the disk may still be full: the error itself is what matters
            pass
        raise
    finally:
        metrics.close()
        items_file.close()


# ----------------------------------------------------------------------------- command line

def add_train_parser(subparsers) -> None:
    """Register ``gradprobe train`` on an argparse sub-parser collection."""
    import argparse

    p = subparsers.add_parser("train", help="one matched-compute training run of a plan's arm and seed",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--plan", required=True, help="plan TOML file (e.g. plans/tiny.toml)")
    p.add_argument("--arm", required=True, help="arm name in the plan's [arms]")
    p.add_argument("--seed", type=int, default=0, help="run seed (rollout sampling, prompt order)")
    p.add_argument("--out", required=True, help="run folder (config.json, metrics.jsonl, summary.json, checkpoints); "
                                                "an existing run there is resumed")
    p.add_argument("--device", default=None, help="override the plan's [model] device")
    p.add_argument("--no-progress", action="store_true", help="no per-update lines on stderr")
    p.add_argument("--report-to", choices=["none", "tensorboard", "trackio", "wandb"], default="none",
                   help="also log per-update metrics, evals and the token ledger to this tracker (tensorboard: RUN/tb; "
                        "wandb: offline unless WANDB_MODE is set)")
    short = p.add_argument_group(
        "shortening a run", "lower the plan's [budget] for this run only (e.g. a quick check: --updates 1); the run "
        "stops at whichever budget is spent first; the override is recorded in config.json and summary.json")
    short.add_argument("--updates", type=int, default=None, metavar="N", help="stop after N updates")
    short.add_argument("--budget-tokens", type=int, default=None, metavar="N",
                       help="charged generated-token budget (rollout + continuation + selection tokens)")
    short.add_argument("--budget-flops", type=float, default=None, metavar="F",
                       help="FLOP budget (generation + training FLOPs; deterministic, unlike seconds)")
    short.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                       help="device-seconds budget (generation + update time, measured)")


def interrupt_message(out, checkpoint_every: int | None = None) -> str:
    """What rerunning an interrupted ``gradprobe train`` will really do, from what ``out`` holds.

    Parameters
    ----------
    out : path
        The run folder.
    checkpoint_every : int, optional
        The plan's ``[train] checkpoint_every`` (updates), named when there is no checkpoint yet.

    Returns
    -------
    str
        With a checkpoint (``checkpoint.json``): the rerun resumes from it, redoing the updates
        after it. Without one: the rerun starts over from update 0 and the updates done so far
        (counted in ``metrics.jsonl``) are discarded. Nothing written: nothing to resume.
    """
    from .checkpoint import POINTER

    out = Path(out)
    done = 0
    try:
        done = sum(1 for line in (out / "metrics.jsonl").read_text().splitlines()
                   if line.strip() and '"eval": true' not in line)
    except (OSError, UnicodeDecodeError):
        pass
    try:
        ckpt = json.loads((out / POINTER).read_text())
        name, at = ckpt["checkpoint"], int(ckpt["update"])
    except (OSError, ValueError, KeyError, TypeError):
        name = at = None
    if name is not None:
        redo = f"; the {done - at} update(s) done after it are redone" if done > at else ""
        return (f"running the same command again resumes from {name} (update {at}) in {out}{redo}")
    every = f" (checkpoint_every = {checkpoint_every} updates)" if checkpoint_every else ""
    if done:
        return (f"it stopped after {done} update(s), before the first checkpoint{every}: there is nothing to "
                f"resume from, so running the same command again starts this run over from update 0 (the "
                f"{done} update(s) in {out} are discarded)")
    return (f"it stopped before the first update and the first checkpoint{every}: running the same command again "
            f"starts the run from update 0")


def train_main(args) -> int:
    """Run ``gradprobe train``; returns the exit status (0 done, 2 bad input / stopped run, 130 Ctrl-C)."""
    import dataclasses

    from .plan import load_plan

    run = None
    try:
        plan = load_plan(args.plan)
        run = plan.arm(args.arm, seed=args.seed)
        if args.device:
            run = dataclasses.replace(run, model=dataclasses.replace(run.model, device=args.device))
        run = shorten_budget(run, {"updates": getattr(args, "updates", None),
                                   "generated_tokens": getattr(args, "budget_tokens", None),
                                   "flops": getattr(args, "budget_flops", None),
                                   "device_seconds": getattr(args, "budget_seconds", None)})
        with removed_if_left_empty(args.out):  # refused input (e.g. an unknown model) leaves no empty folder
            summary = run_training(run, args.out, progress=not args.no_progress,
                                   report_to=getattr(args, "report_to", "none"))
    except NonFiniteRunError as e:
        print(f"gradprobe train: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        every = run.train.checkpoint_every if run is not None else None
        print(f"gradprobe train: interrupted; {interrupt_message(args.out, every)}", file=sys.stderr)
        return 130
    except (PlanError, ValueError, OSError, RuntimeError) as e:
        print(f"gradprobe train: error: {e}", file=sys.stderr)
        return 2
    acc = summary.get("final_greedy_accuracy")
    print(f"{run.arm} seed {run.seed}: {summary['updates']} updates, stop: {summary['stop_reason']} "
          f"({summary.get('budget_spent')}), final greedy accuracy {acc}, overshoot {summary['overshoot']}; "
          f"wrote {args.out}/summary.json")
    if run.budget_override:
        flags = " ".join(f"{f} {v:g}" for f, v in run.budget_override["flags"].items())
        plan = ", ".join(f"{k} {v:,g}" for k, v in run.budget_override["plan_budget"].items())
        print(f"note: shortened from the command line ({flags}); the plan's budget: {plan}; this run is not "
              f"comparable with the plan's full-budget runs")
    return 0
