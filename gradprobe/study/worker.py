"""One study task run in a worker: a training run of one (arm, seed), or the study's probe.

:func:`execute_task` is what every executor (:mod:`gradprobe.study.executors`) calls, in a pool worker,
a Ray task or the study process itself; it never raises, it reports. :func:`worker_init` sets a pool
or Ray worker up (torch threads, SIGINT ignored, exit when the study process dies).

torch, the training run and the probe are imported inside the functions that run them: a worker
needs them, the study process that only dispatches does not, and ``gradprobe.study.runner`` stays
importable without torch (``gradprobe.Study`` is a lazy, torch-free public name).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

from ..layout import GUIDED_LEFT_OUT, PROBE_JSON
from ..outputs import json_safe, prepare_output_dir, write_json_atomic
from ..training.budget import reach_silenced
from ..training.plan import Plan, PlanError, load_plan
from .folder import TRAIN_LOG, FolderLock, StudyError
from .probe_plan import guided_probes, pending_probes, probe_settings

__all__ = ["execute_task", "worker_init", "library_bars", "isolated_probe", "left_out_fix", "arms_text"]

#: the exit status of a worker whose study process is gone (:func:`_watch_parent`)
ORPHAN_EXIT = 70

#: what starts each of the study's probe warnings on stderr (:func:`probe_warnings`), as ``gradprobe probe`` and
#: ``gradprobe study``'s own warnings start theirs
PROBE_WARNING_PREFIX = "gradprobe study: warning: probe: "


@contextlib.contextmanager
def probe_warnings(logger: logging.Logger | None = None):
    """While the block runs, print each warning of the probe's notes logger (``gradprobe.probe.run.notes_log``, or
    ``logger``) to this process's ``sys.stderr`` as one line, :data:`PROBE_WARNING_PREFIX` + the note.

    Without it a worker has no handler for that logger and Python's last-resort handler prints the bare note (no
    ``warning:``, unlike every other command's warnings). The logger's propagation is off meanwhile (a handler the
    user configured on the root logger would print each note a second time); its handlers and propagation are restored
    afterwards.
    """
    if logger is None:
        from ..probe.run import notes_log as logger  # torch: see the module docstring
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(PROBE_WARNING_PREFIX + "%(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@contextlib.contextmanager
def library_bars(on: bool):
    """While the block runs, the libraries' progress bars (transformers' "Loading weights", the hub's downloads) are
    hidden unless ``on``, as ``gradprobe --no-progress`` hides them for a command (:func:`gradprobe.cli.main`); their
    settings are restored afterwards. A task's ``progress`` (``gradprobe study --no-progress``) reaches a Ray worker
    on another machine this way, which the command's environment does not."""
    if on:
        yield
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    hub_off, hf_on = are_progress_bars_disabled(), hf_logging.is_progress_bar_enabled()
    with warnings.catch_warnings():  # the hub warns when its environment variable says otherwise: the user's own
        warnings.simplefilter("ignore")
        disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if hf_on:
            hf_logging.enable_progress_bar()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (disable_progress_bars if hub_off else enable_progress_bars)()


def _watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Exit this worker as soon as the study process is gone (a SIGKILLed study leaves no orphan writing)."""

    def loop():
        while True:
            if os.getppid() != parent_pid:
                os._exit(ORPHAN_EXIT)
            time.sleep(interval)

    threading.Thread(target=loop, name="gradprobe-parent-watch", daemon=True).start()


def worker_init(threads: int, parent_pid: int | None) -> None:
    """Set up a worker process: ``threads`` torch threads, offline hub, no tokenizer threads.

    Parameters
    ----------
    threads : int
        Torch intra-op threads (at least 1): the study gives each of its workers
        :func:`gradprobe.study.executors.worker_threads`.
    parent_pid : int or None
        The study process, for a pool worker: SIGINT is then ignored (a terminal's Ctrl-C reaches the
        whole process group; the study process decides what stops) and the worker exits when that
        process is gone. None for a Ray task.
    """
    import torch  # see the module docstring

    if parent_pid is not None:  # a pool worker: Ctrl-C at a terminal reaches it too; the study process decides
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:  # tqdm's default lock is a multiprocessing RLock, a named semaphore a stopped worker would leak
            from tqdm import tqdm

            tqdm.set_lock(threading.RLock())  # the worker's own lock suffices: its stderr goes to train.log
        except ImportError:
            pass
    torch.set_num_threads(max(1, int(threads)))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if parent_pid is not None:
        _watch_parent(parent_pid)


def execute_task(task: dict) -> dict:
    """Run one study task in this process and report, never raise.

    ``task``: ``{"kind": "train", "plan": PATH, "arm", "seed", "out": RUN_DIR}`` or
    ``{"kind": "probe", "plan": PATH, "out": PROBE_DIR, "settings": {...}}``; ``"progress": False`` in either hides
    the libraries' progress bars while it runs (:func:`library_bars`); ``"prompt_lengths_checked": SHA256`` in a
    training task: the study's preflight checked the prompt lengths of the plan of that sha256 (the study's
    ``_lengths_checked``), so a run of that plan does not check them again
    (:func:`gradprobe.training.run.run_training`'s ``prompt_lengths_checked``; absent, or another plan's: the run
    checks them). Returns
    ``{"kind", "arm", "seed", "status": "done"|"failed", "error", "seconds", ...}`` (``seconds``:
    wall-clock seconds of the task; a failed task also ``resume_fix``, the error's own fix that lets the same command
    resume the run, or None: :class:`~gradprobe.training.errors.RunConfigMismatchError`; a failed training run also
    ``traceback`` and, after a
    non-finite loss, a diverged policy or a reward that gave no completion a reward
    (:class:`~gradprobe.training.errors.NonFiniteRunError` and its subclasses), ``failed_update``).
    """
    start = time.perf_counter()  # the task's seconds include importing torch, as a worker's first task does
    from ..training.run import NonFiniteRunError  # torch: see the module docstring

    res = {k: task.get(k) for k in ("kind", "arm", "seed")}
    lock = None
    try:
        out = Path(task["out"])
        lock = FolderLock(out, ".lock", wait=True, what="run folder")  # waits for an orphan of a killed study
        with reach_silenced():  # the study's frozen copy: its out-of-reach budget was warned about when frozen
            plan = load_plan(task["plan"], check_reach=False)
        with library_bars(task.get("progress", True) is not False):
            if task["kind"] == "train":
                res.update(_train(plan, task["arm"], int(task["seed"]), out, task.get("log", True),
                                  task.get("report_to", "none"),
                                  task.get("prompt_lengths_checked") == plan.sha256))
            elif task["kind"] == "probe":
                res.update(_probe(plan, out, task.get("settings") or {}))
            else:
                raise ValueError(f"unknown task kind {task['kind']!r}")
        res["status"] = "done"
    except Exception as e:  # the study records the error and continues with the other runs
        res["status"] = "failed"
        res["error"] = str(e) if isinstance(e, (NonFiniteRunError, OSError, PlanError, StudyError)) else (
            f"{type(e).__name__}: {e}")
        res["traceback"] = traceback.format_exc(limit=8)
        res["resume_fix"] = getattr(e, "resume_fix", None)  # a refused resume that the same command resumes once fixed
        if isinstance(e, NonFiniteRunError):
            res["failed_update"] = e.update
    finally:
        if lock is not None:
            lock.release()
    res["seconds"] = time.perf_counter() - start
    return res


def _train(plan: Plan, arm: str, seed: int, out: Path, log: bool, report_to: str = "none",
           lengths_checked: bool = False) -> dict:
    """Train (or resume) one run in ``out``, its progress and warnings in ``out/train.log`` when ``log``;
    ``lengths_checked``: the study checked the prompt lengths (the run does not check them again)."""
    from ..training.run import run_training  # torch: see the module docstring

    run = plan.arm(arm, seed=seed)
    stream = open(out / TRAIN_LOG, "a") if log else contextlib.nullcontext(None)
    with stream as f:
        ctx = contextlib.redirect_stderr(f) if f is not None else contextlib.nullcontext()
        with ctx:
            summary = run_training(run, out, progress=f is not None, report_to=report_to,
                                   tracking_dir=out.parents[2] / "tb" / arm / f"seed{seed}",  # STUDY/tb/<arm>/seed<N>
                                   prompt_lengths_checked=lengths_checked)
    return {"updates": summary.get("updates"), "final_accuracy": summary.get("final_greedy_accuracy")}


def _probe(plan: Plan, out: Path, overrides: dict) -> dict:
    """The study's probe of every arm's reward on the initial policy, into ``out``, then each guided arm's own
    probe into ``out/guided/<arm>`` (:func:`~gradprobe.study.probe_plan.guided_probes`); each is skipped
    when it is done (its ``probe.json``, or a guided probe's record of its failed rewards:
    :func:`~gradprobe.study.probe_plan.pending_probes`), so a resumed study redoes none.

    One policy (the plan's model at the probe's seed) serves every probe, and one reference update v: the
    shared probe computes it and the guided probes reuse it (``reference.reused`` in their ``probe.json``).
    When the shared probe was done by an earlier invocation, the first guided probe computes v again from
    the same held-out settings, seed and policy (the same v up to the device's nondeterminism). Under Adam
    each probe's u = P v has P from its own batch's second moment, as every probe batch does.

    A reward that fails on a probe's batch (a plug-in that raises) is left out of that probe and the others are
    probed (:func:`isolated_probe`), so one broken reward does not cost every arm its probe entry. A guided probe
    whose every reward failed writes no ``probe.json`` but :data:`~gradprobe.layout.GUIDED_LEFT_OUT` in its
    folder (:func:`_record_failed_probe`; its records have ``every_reward_failed``), so a rerun of the study does not
    load the policy to fail the same way again.

    Returns ``{"skipped": True}`` when nothing was left to do, else ``rewards`` (the shared probe's entries,
    when it ran), ``guided`` (the guided probe folders run, relative to ``out``) and, when a reward was left out,
    ``left_out`` (:func:`isolated_probe`'s records, each with its ``probe`` folder).

    Raises
    ------
    Exception
        What the shared probe raised, when every one of its rewards failed (:func:`isolated_probe`) or it failed
        otherwise; a guided probe whose every reward failed is left out (recorded, not raised).
    """
    from ..probe.batches import ReferenceDirection  # torch: see the module docstring
    from ..probe.run import ProbeConfig, run_probe
    from ..training.run import load_run_policy, load_run_task

    pending = pending_probes(plan, out, overrides)
    if not pending:
        return {"skipped": True}
    guided = guided_probes(plan, overrides)
    todo = {folder: guided[folder] for folder in pending if folder}
    settings = probe_settings(plan, overrides)
    policy = load_run_policy(plan.model, seed=ProbeConfig.from_dict(settings).batch.seed)
    task = load_run_task(plan.task)
    holder, res, left_out = ReferenceDirection(), {"guided": list(todo)}, []
    probes = ([("", settings, list(plan.arms))] if "" in pending else []) + [
        (folder, g["settings"], g["arms"]) for folder, g in todo.items()]
    with probe_warnings():
        for folder, probed, names in probes:

            def probe(config, where=out / folder):
                return run_probe(config, out=where, policy=policy, task=task, reference_direction=holder)

            arms = {n: plan.arms[n].reward for n in names}
            result, dropped = isolated_probe(probed, arms, probe, required=folder == "")
            for record in dropped:
                record.update(probe=folder, fix=left_out_fix(out.parent))
            if dropped and result is not None:
                _record_left_out(out / folder, result, dropped)
            elif result is None:  # a guided probe whose every reward failed: recorded, so a rerun does not redo it
                _record_failed_probe(out / folder, folder, dropped)
            left_out += dropped
            if folder == "":
                res["rewards"] = [r["name"] for r in result["rewards"]]
    if left_out:
        res["left_out"] = left_out
    return res


def left_out_fix(study: Path) -> str:
    """How to get the probe entry of a reward that a study's probe left out (:func:`isolated_probe`): the reward is
    fixed in a new study (a rerun of ``study`` keeps its probe.json, and refuses an edited plug-in reward file while
    runs of it remain: :func:`gradprobe.study.freeze.check_reward_plugins`)."""
    return (f"fix the reward, then run the plan as a new study under a new --out (--reuse-runs {study} copies this "
            "study's finished runs that the fix leaves unchanged)")


def _failed_reward(error: Exception, names) -> str | None:
    """The reward among ``names`` that ``error`` is about: its ``reward`` attribute, which the probe sets on a
    reward's own failure (:func:`gradprobe.probe.stages.reward_outputs`), else None."""
    name = getattr(error, "reward", None)
    return name if name in names else None


def isolated_probe(settings: dict, arms: dict, probe, required: bool = True) -> tuple[dict | None, list]:
    """``probe(config)`` of the rewards of ``settings`` (:class:`~gradprobe.probe.run.ProbeConfig` settings), each
    reward that fails on the batch left out and the rest probed again (the same seed: the same batch, up to the
    device's nondeterminism).

    Plug-in rewards are called first on the probe batch (:func:`gradprobe.probe.stages.reward_outputs`), so a
    failing one costs the rollouts again (the probe batch resampled, the policy already loaded), not the Monte Carlo
    continuations. A failure is told by the reward its error names as its ``reward`` attribute
    (:func:`_failed_reward`); any other error is raised as it was.

    Parameters
    ----------
    settings : dict
        Flat probe settings (``rewards``: the reward names).
    arms : dict[str, str]
        Arm -> its reward, of the arms this probe serves (named in each record).
    probe : callable
        ``ProbeConfig -> probe.json's content`` (:func:`gradprobe.probe.run.run_probe` into the probe's folder).
    required : bool
        When every reward failed: raise (the shared probe), else return ``(None, records)`` (a guided probe).

    Returns
    -------
    (dict or None, list[dict])
        The probe's result (None: every reward failed, ``required`` false), and per reward left out
        ``{"reward", "arms", "error"}`` (``error``: ``TYPE: message``), in the order they failed.

    Raises
    ------
    Exception
        Any error that names none of the rewards; with ``required``, when every reward failed: a probe of one reward
        raises its own error, of several a RewardFunctionError naming each reward and its error.
    """
    from ..probe.run import ProbeConfig  # torch: see the module docstring
    from ..rewards.base import RewardFunctionError

    rewards, left_out = list(settings["rewards"]), []
    while rewards:
        try:
            result = probe(ProbeConfig.from_dict(dict(settings, rewards=tuple(rewards))))
            break
        except Exception as e:  # only a reward's own failure is kept (_failed_reward); the rest is raised again
            name = _failed_reward(e, rewards)
            if name is None or (required and len(settings["rewards"]) == 1):
                raise
            rewards.remove(name)
            left_out.append({"reward": name, "arms": [a for a, r in arms.items() if r == name],
                             "error": f"{type(e).__name__}: {e}"})
    else:
        if required:
            raise RewardFunctionError("every reward of the probe failed on its batch: " + "; ".join(
                f"{r['reward']!r} ({arms_text(r['arms'])}): {r['error']}" for r in left_out))
        return None, left_out
    return result, left_out


def arms_text(arms) -> str:
    """``arm A`` or ``arms A, B``: the arms a left-out reward's record names."""
    return f"arm{'s' if len(arms) != 1 else ''} {', '.join(arms)}"


def _record_left_out(out: Path, result: dict, left_out: list) -> None:
    """Rewrite ``out/probe.json`` (``result``, as :func:`gradprobe.probe.run.run_probe` wrote it) with ``left_out``
    (:func:`isolated_probe`'s records with ``probe`` and ``fix``) and one warning per reward left out."""
    notes = [f"reward {r['reward']!r} ({arms_text(r['arms'])}) is left out of this probe: it failed on the probe "
             f"batch ({r['error']}); {r['fix']}" for r in left_out]
    result["left_out"] = left_out
    result["warnings"] = [*(result.get("warnings") or []), *notes]
    write_json_atomic(out / PROBE_JSON, json_safe(result))


def _record_failed_probe(out: Path, folder: str, left_out: list) -> None:
    """Write ``out/``:data:`~gradprobe.layout.GUIDED_LEFT_OUT` for the guided probe ``folder`` (relative to the
    study's ``probe/``) whose every reward failed: ``{"probe", "left_out", "note"}``, ``left_out`` being
    :func:`isolated_probe`'s records with ``probe`` and ``fix``, each marked ``every_reward_failed`` (in place, so the
    study's record says it too). Atomic (:func:`gradprobe.outputs.write_json_atomic`): the file marks the probe done
    (:func:`~gradprobe.study.probe_plan.pending_probes`)."""
    for record in left_out:
        record["every_reward_failed"] = True
    note = (f"every reward of this guided probe failed on its batch, so it wrote no {PROBE_JSON} and its arms have no "
            "probe entry; a rerun of the study does not probe it again while this file exists (delete it and rerun "
            "the study to probe the same rewards again, for a failure they may not repeat); a fixed reward gets its "
            "entry as each record's fix says")
    write_json_atomic(prepare_output_dir(out) / GUIDED_LEFT_OUT,
                      json_safe({"probe": folder, "left_out": left_out, "note": note}))
