"""``gradprobe train``: the command line of one training run (:func:`gradprobe.training.run.run_training`).

:func:`add_train_parser` registers the sub-command, :func:`train_main` runs it, and
:func:`interrupt_message` says what rerunning an interrupted run will do (printed on Ctrl-C, exit 130, and on
SIGTERM, exit 143, as ``gradprobe probe`` does). ``--out`` holding a probe, a study, a calib report or a model
(a tier, ``save_pretrained`` weights), or naming a file, is refused before the plan is read
(:mod:`gradprobe.training.run_folder`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from pathlib import Path

from ..layout import CHECKPOINT_POINTER, METRICS_JSONL, SUMMARY_JSON
from ..outputs import removed_if_left_empty
from ..tables import shown
from ..training.budget import budget_text
from ..training.errors import BudgetTooSmallError, NonFiniteRunError
from ..training.plan import PlanError, RunConfig, run_in_folder, shorten_budget
from ..training.run_folder import refuse_other_output
from ..training.specs import BUDGET_FLAGS
from .args import HelpFormatter, add_report_to, home, integer, out_path, seed_int, token_count
from .probe import Terminated, terminate_cleanly

__all__ = ["add_train_parser", "interrupt_message", "train_main"]


def add_train_parser(subparsers) -> None:
    """Register ``gradprobe train`` on an argparse sub-parser collection."""
    p = subparsers.add_parser("train", help="one matched-compute training run of a plan's arm and seed",
                              formatter_class=HelpFormatter)
    p.add_argument("--plan", required=True, type=home, help="plan TOML file (e.g. plans/tiny.toml)")
    p.add_argument("--arm", required=True, help="arm name in the plan's [arms]")
    p.add_argument("--seed", type=seed_int, default=0, help="run seed (rollout sampling, prompt order)")
    p.add_argument("--out", type=out_path, required=True,
                   help="run folder (config.json, metrics.jsonl, summary.json, checkpoints); an existing run there is "
                        "resumed")
    p.add_argument("--device", default=None, help="override the plan's [model] device")
    p.add_argument("--no-progress", action="store_true", help="no per-update lines on stderr")
    add_report_to(p, "also log per-update metrics, evals and the token ledger to this tracker (tensorboard: RUN/tb; "
                     "wandb: offline unless WANDB_MODE is set)")
    short = p.add_argument_group(
        "shortening a run", "lower the plan's [budget] for this run only (e.g. a quick check: --updates 1); the run "
        "stops at whichever budget is spent first; the override is recorded in config.json and summary.json")
    short.add_argument("--updates", type=integer, default=None, metavar="N", help="stop after N updates")
    short.add_argument("--budget-tokens", type=token_count, default=None, metavar="N",
                       help="charged generated-token budget (rollout + continuation + selection tokens): an integer "
                            "(250000), with a k, M or G suffix (250k, 1.5M) or in scientific notation (2.5e5)")
    short.add_argument("--budget-flops", type=float, default=None, metavar="F",
                       help="FLOP budget (generation, training, prompt selection and the reward's FLOPs; "
                            "deterministic, unlike seconds)")
    short.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                       help="device-seconds budget (generation, updates, prompt selection and the reward's own "
                            "compute, measured)")


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
    out = Path(out)
    done = 0
    try:
        done = sum(1 for line in (out / METRICS_JSONL).read_text().splitlines()
                   if line.strip() and '"eval": true' not in line)
    except (OSError, UnicodeDecodeError):
        pass
    try:
        ckpt = json.loads((out / CHECKPOINT_POINTER).read_text())
        name, at = ckpt["checkpoint"], int(ckpt["update"])
    except (OSError, ValueError, KeyError, TypeError):
        name = at = None
    where = shown(str(out))  # a newline or tab in the path escaped: one line
    if name is not None:
        redo = f"; the {done - at:,} update(s) done after it are redone" if done > at else ""
        return f"running the same command again resumes from {shown(str(name))} (update {at:,}) in {where}{redo}"
    every = f" (checkpoint_every = {checkpoint_every:,} updates)" if checkpoint_every else ""
    if done:
        return (f"it stopped after {done:,} update(s), before the first checkpoint{every}: there is nothing to "
                f"resume from, so running the same command again starts this run over from update 0 (the "
                f"{done:,} update(s) in {where} are discarded)")
    return (f"it stopped before the first update and the first checkpoint{every}: running the same command again "
            f"starts the run from update 0")


def _after_reward_error(error: Exception, out, run) -> str:
    """What a rerun does after a reward raised during training (``RewardFunctionError``, matched by name: the class
    lives with torch): the run folder keeps its updates, a rerun resumes only with the reward's file unchanged (a
    resume checks its sha256: :func:`gradprobe.training.run_folder.check_reward_identity`), so a fixed reward
    starts a new run; a run that kept no checkpoint starts from update 0 whatever the file holds (the check is made
    only for a checkpoint to resume), so a fixed reward is rerun into the same folder. '' for any other error."""
    if type(error).__name__ != "RewardFunctionError" or run is None:
        return ""
    if not (Path(out) / CHECKPOINT_POINTER).is_file():
        return ("; the run kept no checkpoint: after fixing the reward (or as it is, if the failure was transient), "
                "running the same command again starts the run from update 0")
    every = run.train.checkpoint_every
    return (f"; if the failure was transient (the reward's file unchanged), {interrupt_message(out, every)}; after "
            "fixing the reward, start the run under a new --out (a resume with an edited reward file is refused: its "
            "first updates were trained with the old one)")


def train_main(args) -> int:
    """Run ``gradprobe train``; returns the exit status (0 done, 2 bad input / stopped run, 130 Ctrl-C,
    143 SIGTERM). Ctrl-C and SIGTERM print one line saying what rerunning the command will do
    (:func:`interrupt_message`)."""
    try:
        with terminate_cleanly():  # SIGTERM raises Terminated: the run stops as on Ctrl-C
            return _train_command(args)
    except Terminated:  # outside the run: while the modules loaded, or after it finished, while its lines printed
        if _finished(args.out):
            print(f"gradprobe train: terminated (SIGTERM) after the run in {shown(str(args.out))} had finished; its "
                  "files are kept", file=sys.stderr)
        else:
            print(f"gradprobe train: terminated (SIGTERM); {interrupt_message(args.out)}", file=sys.stderr)
        return 143


def _finished(out) -> bool:
    """Whether the run folder ``out`` holds a finished run (``summary.json`` with ``completed`` true)."""
    try:
        return json.loads((Path(out) / SUMMARY_JSON).read_text()).get("completed") is True
    except (OSError, ValueError, AttributeError):
        return False


def _resolve(args, plan, resumed_flags) -> RunConfig:
    """The run of ``args`` (``--arm``, ``--seed``, ``--device``, the budget flags) in ``plan``; ``resumed_flags``: as
    :func:`~gradprobe.training.budget.shorten_budget` takes them (:func:`~gradprobe.training.plan.run_in_folder`)."""
    run = plan.arm(args.arm, seed=args.seed)
    if args.device:
        run = dataclasses.replace(run, model=dataclasses.replace(run.model, device=args.device))
    return shorten_budget(run, {"updates": getattr(args, "updates", None),
                                "generated_tokens": getattr(args, "budget_tokens", None),
                                "flops": getattr(args, "budget_flops", None),
                                "device_seconds": getattr(args, "budget_seconds", None)}, resumed_flags=resumed_flags)


def _train_command(args) -> int:
    """``gradprobe train`` inside :func:`train_main`'s SIGTERM handler."""
    from ..study.folder import hold_run_folder  # the study package loads pandas: deferred as torch is
    from ..training.run import run_training  # torch: deferred so that parsing the command line loads none

    run = None
    try:
        refuse_other_output(args.out, outside_studies=True)  # a probe's or a study's folder: refused before the plan
        # a plan or flags out of reach: refused, but warned where --out holds this very run (started before the check)
        run = run_in_folder(args.plan, args.out, functools.partial(_resolve, args))
        # refused input (e.g. an unknown model) leaves no empty folder; another live process's folder is refused
        with removed_if_left_empty(args.out), hold_run_folder(args.out):
            summary = run_training(run, args.out, progress=not args.no_progress,
                                   report_to=getattr(args, "report_to", "none"))
    except NonFiniteRunError as e:
        print(f"gradprobe train: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        every = run.train.checkpoint_every if run is not None else None
        print(f"gradprobe train: interrupted; {interrupt_message(args.out, every)}", file=sys.stderr)
        return 130
    except Terminated:
        every = run.train.checkpoint_every if run is not None else None
        print(f"gradprobe train: terminated (SIGTERM); {interrupt_message(args.out, every)}", file=sys.stderr)
        return 143
    except (PlanError, ValueError, OSError, RuntimeError) as e:
        said = shown(str(e)) if isinstance(e, BudgetTooSmallError) else e  # one line: a tab in --out escaped
        print(f"gradprobe train: error: {said}{_after_reward_error(e, args.out, run)}", file=sys.stderr)
        return 2
    acc = summary.get("final_greedy_accuracy")
    print(f"{run.arm} seed {run.seed}: {summary['updates']:,} updates, stop: {summary['stop_reason']} "
          f"({summary.get('budget_spent')}), final greedy accuracy {acc}, overshoot {summary['overshoot']}; "
          f"wrote {shown(f'{args.out}/{SUMMARY_JSON}')}")  # a newline in --out escaped: one line
    if run.budget_override:
        kind_of = {flag: kind for kind, flag in BUDGET_FLAGS.items()}
        flags = " ".join(f"{f} {budget_text(kind_of[f], v)}" for f, v in run.budget_override["flags"].items())
        plan = ", ".join(f"{k} {budget_text(k, v)}" for k, v in run.budget_override["plan_budget"].items())
        print(f"note: shortened from the command line ({flags}); the plan's budget: {plan}; this run is not "
              f"comparable with the plan's full-budget runs")
    return 0
