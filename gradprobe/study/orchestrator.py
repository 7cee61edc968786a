"""Run a preregistered matched-compute study: every arm x seed of a frozen plan, then the probe.

``run_study(plan, out)`` (``gradprobe study PLAN --out DIR``), DESIGN.md "Matched-compute training":

1. the plan is validated (:func:`gradprobe.training.plan.load_plan`: unknown keys, arms, rewards,
   a budget smaller than one update all fail here, before anything is written), and its inputs
   are checked (:func:`gradprobe.study.preflight.check_plan_inputs`: the model resolves, its
   tokenizer loads, the task builds and yields a prompt), still before anything is written;
2. it is frozen (:func:`gradprobe.study.freeze.freeze_plan`): copied byte for byte to
   ``DIR/plan.toml`` and its sha256 recorded in ``DIR/study.json``. A study folder whose frozen plan
   has another sha256 is refused (:class:`~gradprobe.study.folder.PlanChangedError` names both
   hashes; the fix is a new ``--out``, or, while no run of the frozen plan has finished,
   ``restart=True`` (``--restart``), which replaces the frozen plan and the partial outputs);
3. every (arm, seed) run goes to an executor (:mod:`gradprobe.study.executors`): a local process
   pool (``spawn`` context, each worker with the torch threads of
   :func:`~gradprobe.study.executors.worker_threads`), Ray (one
   remote task per run with that many ``num_cpus``; on a multi-machine cluster ``DIR`` must be on a
   file system every node mounts at the same path), or ``inline`` (this process, serially;
   debugging and tests). Each run is :func:`gradprobe.training.run.run_training` in
   ``DIR/runs/<arm>/seed<S>/`` (:mod:`gradprobe.study.worker`): a run whose ``summary.json`` says
   completed is never redone, a partial run resumes from its checkpoint;
4. the probe of every arm's reward on the initial policy (``DIR/probe/probe.json``,
   ``DIR/probe/arms.json``; settings from :mod:`gradprobe.study.probe_plan`), and of each guided arm's
   own update into ``DIR/probe/guided/<arm>/``, once (skipped when ``probe.json`` and every guided
   arm's ``probe/guided/<arm>/probe.json``, or its record of a probe whose every reward failed, exist
   (:func:`~gradprobe.study.probe_plan.pending_probes`), or with ``probe=False``);
5. ``DIR/runs.csv`` is rebuilt from the finished run folders after every run
   (:mod:`gradprobe.study.collect`), so a killed study loses nothing; at the end
   :func:`gradprobe.study.analysis.analyze` writes ``DIR/analysis.json`` and ``DIR/figures/``.

Every finished run prints one progress line: runs complete / runs in the plan, this
invocation's elapsed wall time and an ETA (:func:`~gradprobe.study.result.progress_line`).
A run that trained no group in :data:`~gradprobe.training.update.UNTRAINED_WARN_UPDATES` updates in a row (every
advantage 0), which warns in its own ``train.log``, is said there too, once per run and level (that many, ten times as
many), naming the cause and the ``train.log``: while it runs (local pool, Ray) and when it finishes (every executor)
(:class:`UntrainedWatch`).
``study.json`` lists every invocation of the study (:mod:`gradprobe.study.invocations`: start, last
heartbeat, how it ended) and ``wall_seconds``, their total, which includes an invocation killed
with SIGKILL up to its last heartbeat.

A failed run (NaN loss, a crash, a write error) is recorded in ``study.json`` with its error,
its folder is kept, the other runs continue, and :class:`~gradprobe.study.result.StudyResult`
reports it (the command exits non-zero). Concurrency safety: the study folder is locked
(``fcntl.flock``) against a second study process, each run folder is locked by the worker running
it, and pool workers exit when the study process dies, so a restarted study never writes a run
folder at the same time as an orphan of the killed one.

Interrupts (Ctrl-C, SIGINT): pool workers start with SIGINT ignored (a terminal sends it to the
whole process group; only the study process decides what stops). On SIGINT the study starts no
further run, cancels the queued ones, sends SIGTERM to its running workers (a run stopped that
way resumes from its last checkpoint, as after SIGKILL), waits for them (SIGKILL after
:data:`~gradprobe.study.executors.STOP_GRACE_SECONDS`), records ``interrupted`` and the invocation's
wall time in ``study.json``, releases its lock and raises
:class:`~gradprobe.study.result.StudyInterrupted` (``gradprobe study`` then says how to resume and
exits with 130, the shell's status for SIGINT). SIGTERM (``kill``, a scheduler) stops a study the same
way under ``gradprobe study``, whose handler raises :class:`~gradprobe.study.result.StudyTerminated` (a
KeyboardInterrupt); ``study.json`` then records ``terminated (SIGTERM)`` and the command exits with 143.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import backend_unavailable
from ..layout import ARMS_JSON, GUIDED_LEFT_OUT, METRICS_JSONL, PLAN_COPY, STUDY_JSON, probe_dir, run_dir
from ..outputs import OutputDirError, prepare_output_dir, write_json_atomic
from ..tracking import require_tracker
from ..training.budget import reach_warned_once
from ..training.plan import Plan
from ..training.untrained import cause, describe, trained, untrained_tail, update_lines
from .analysis import analyze as run_analysis
from .collect import FinishedRunFiles, check_finished_runs, write_eval_items, write_runs_csv
from .executors import EXECUTORS, RAY_MISSING, default_workers, run_tasks, worker_threads
from .folder import TRAIN_LOG, FolderLock, StudyError, now, refuse_other_output, run_status
from .freeze import check_reward_plugins, check_study_model, check_task_data, freeze_plan, load_study_plan
from .invocations import Invocation
from .never_trained_arms import run_max_new_tokens
from .preflight import check_plan_inputs
from .probe_plan import arms_table, check_probe_settings, pending_probes, recorded_left_out
from .result import StudyInterrupted, StudyResult, StudyTerminated, clock, progress_line
from .reuse import check_reuse_sources, reuse_runs, reused_source
from .worker import arms_text

__all__ = ["UNTRAINED_WATCH_SECONDS", "UntrainedWatch", "run_study"]

#: seconds between two looks of the study process at its running runs' ``metrics.jsonl`` (:class:`UntrainedWatch`)
UNTRAINED_WATCH_SECONDS = 5.0


@dataclass(frozen=True)
class _Options:
    """How :func:`run_study` runs its tasks (its keyword arguments of the same names)."""

    executor: str
    workers: int | None
    ray_address: str | None
    probe: bool
    probe_overrides: dict | None
    analyze: bool
    report_to: str
    progress: bool = True
    lengths_checked: str | None = None  # the plan sha256 whose prompt lengths the study checked (_lengths_checked)
    model_weights: dict | None = None  # the model's identity the caller computed (run_study's model_weights)


def run_study(plan_path: str | Path, out: str | Path, *, executor: str = "local", workers: int | None = None,
              ray_address: str | None = None, probe: bool = True, probe_overrides: dict | None = None,
              analyze: bool = True, say=None, restart: bool = False, check: bool = True,
              report_to: str = "none", reuse_from=(), progress: bool = True,
              model_weights: dict | None = None) -> StudyResult:
    """Run (or resume) a study: every arm x seed of the plan, the probe, ``runs.csv``, the analysis.

    Parameters
    ----------
    plan_path : path
        Plan TOML; frozen into ``out`` (:func:`~gradprobe.study.freeze.freeze_plan`). Read once; a plan ``out`` froze
        before a later check is resumed as it was frozen, its token budget out of reach of its updates warned about
        once (:class:`~gradprobe.training.budget.OutOfReachWarning`; the analysis reads it again silently).
    out : path
        Study folder (format: ``/work/notes/study_format.md``; see the module docstring).
    executor : {"local", "ray", "inline"}
        ``local``: process pool (spawn) of ``workers`` processes; ``ray``: one Ray task per
        run (``ray_address`` or a local ``ray.init()``); ``inline``: serially in this process.
    workers : int, optional
        Parallel runs (default ``min(runs, usable cores)``); each gets ``OMP_NUM_THREADS`` torch threads where
        it is set (at most the usable cores), else ``max(1, usable cores // workers)``
        (:func:`~gradprobe.study.executors.worker_threads`; Ray: that many ``num_cpus``).
    probe : bool
        Run the probe of every arm's reward on the initial policy (skipped if ``probe.json`` exists).
    probe_overrides : dict, optional
        :class:`~gradprobe.probe.run.ProbeConfig` fields over the plan's ``[probe]`` table.
    analyze : bool
        Write ``analysis.json`` and the figures when at least one run is complete.
    say : callable(str), optional
        Progress messages (default: stderr), one line per finished run (:func:`.result.progress_line`).
    restart : bool
        Replace the frozen plan of a study of which no run has finished (:func:`.freeze.freeze_plan`).
    check : bool
        Check the plan's model, tokenizer and task first (:func:`.preflight.check_plan_inputs`).
    report_to : {"none", "tensorboard", "trackio", "wandb"}
        Every run also logs its metrics there (:mod:`gradprobe.tracking`; files in ``out/tb/<arm>/seed<N>``);
        a tracker that is not installed fails first (:class:`~gradprobe.tracking.TrackerUnavailableError`).
    reuse_from : sequence of path
        Other study folders whose finished runs this plan would train identically (same resolved configuration
        and versions) are copied instead of trained (:func:`.reuse.reuse_runs`; ``study.json``: ``reused_from``).
    progress : bool
        False (``--no-progress``): no library progress bars in any task (:func:`.worker.library_bars`), ``say`` kept.
    model_weights : dict, optional
        :func:`~gradprobe.training.run_folder.model_weights_identity` of the plan's ``[model] name`` the caller just
        computed here (``--replicate``'s check): not hashed again; None: computed by :func:`.freeze.check_study_model`,
        which records it in ``study.json`` (``model_weights``) while no run has started.

    Returns
    -------
    StudyResult
        ``ok`` is false when a run or the probe (or a reward in it) failed (``failed``/``probe``, ``study.json``).

    Raises
    ------
    PlanError
        Invalid plan (before anything is written or run).
    gradprobe.study.preflight.PreflightError
        Model, tokenizer or task cannot be loaded (a :class:`StudyError` naming the plan key; nothing written).
    PlanChangedError, StudyError
        The folder holds another plan's study (``restart`` refused or not given), another study process uses
        it, or its record is damaged (:func:`.folder.read_study_json`, :func:`.collect.check_finished_runs`).
    OutputDirError
        The folder cannot be written (unwritable, a file in the way, disk full; nothing done is lost) or holds
        a training run or a probe (:func:`.folder.refuse_other_output`; nothing is written).
    StudyInterrupted
        Ctrl-C / SIGINT (a KeyboardInterrupt), or SIGTERM raised as
        :class:`~gradprobe.study.result.StudyTerminated` (its ``terminated`` true): no further run was started,
        running workers were stopped, ``study.json`` records it and the lock is released; the same call resumes.
    gradprobe.study.reuse.ReuseError
        A ``reuse_from`` folder is not a study folder (checked first) or holds an unreadable run record.
    ValueError
        Unknown executor, workers < 1, or ``ray_address`` without ``executor="ray"``.
    """
    with reach_warned_once():  # a frozen plan out of reach: warned once, not by each read (freeze, analysis)
        plan = _checked_plan(plan_path, executor, workers, ray_address, report_to, check, out)  # nothing written yet
        say = say or (lambda m: print(f"[study] {m}", file=sys.stderr, flush=True))
        return _locked_run(plan, plan_path, out, restart, reuse_from, say,
                           _Options(executor, workers, ray_address, probe, probe_overrides, analyze, report_to,
                                    progress, _lengths_checked(plan, check, executor), model_weights))


def _lengths_checked(plan: Plan, check: bool, executor: str) -> str | None:
    """The sha256 of ``plan`` when this invocation's preflight (``check``: :func:`.preflight.check_plan_inputs`)
    checked every prompt of its runs' training pool and held-out set against the model's context, and the runs read
    the same files as that check did: a ``local`` or ``inline`` run, on this machine from this working directory.
    Each training task carries it (``prompt_lengths_checked``), and a run of that plan does not check the lengths
    again (:func:`gradprobe.training.run.run_training`). None, and every run checks its own: without ``check`` (a
    replicate checked its plan itself, a study run with ``check=False``), or on Ray, whose tasks may run on another
    machine, with its own copies of the data and model files and its own working directory."""
    return plan.sha256 if check and executor in ("local", "inline") else None


def _locked_run(plan: Plan, plan_path, out, restart: bool, reuse_from, say, opts: _Options) -> StudyResult:
    """:func:`run_study` once ``plan`` (read from ``plan_path``) is checked: ``out`` locked (:func:`_locked_folder`),
    the plan frozen (:func:`_frozen`) and the study run (:func:`_run`), the lock released; an interrupt outside the
    runs is raised as :class:`StudyInterrupted` (nothing was running). Raises as :func:`run_study` says."""
    out, lock = _locked_folder(out, reuse_from)
    try:
        plan, study, read = _frozen(plan, plan_path, out, restart, reuse_from, say, opts.model_weights)
        return _run(plan, study, out, opts, say, read)
    except StudyInterrupted:
        raise
    except KeyboardInterrupt as e:  # outside the runs (setting up, the analysis): nothing was running
        done = sum(run_status(run_dir(out, a, s))[0] == "done" for a, s in plan.runs())
        raise StudyInterrupted(out, done, len(plan.runs()), 0, isinstance(e, StudyTerminated)) from None
    finally:
        lock.release()


def _locked_folder(out, reuse_from) -> tuple[Path, FolderLock]:
    """``out`` created and locked (:class:`FolderLock`), once neither it nor a ``reuse_from`` source is refused:
    another command's output (:func:`.folder.refuse_other_output`), a source without runs
    (:func:`.reuse.check_reuse_sources`); a refused folder is not written. Raises as :func:`run_study` says."""
    refuse_other_output(out)
    check_reuse_sources(reuse_from, out)
    out = prepare_output_dir(Path(out))
    return out, FolderLock(out, ".study.lock", wait=False, what="study folder")


def _frozen(plan: Plan, plan_path, out: Path, restart: bool, reuse_from, say,
            weights: dict | None = None) -> tuple[Plan, dict, FinishedRunFiles]:
    """:func:`.freeze.freeze_plan` of ``plan`` (``plan_path`` as :func:`_checked_plan` read it: not read again), then
    damaged run folders refused before anything is run or rewritten (:func:`.collect.check_finished_runs`, whose reads
    of the finished runs are returned, so that ``runs.csv`` and ``eval_items.jsonl.gz`` are rebuilt without reading
    those runs' files again), then the runs of ``reuse_from`` copied (:func:`.reuse.reuse_runs`), compared with the
    model's identity :func:`.freeze.check_study_model` read and recorded in ``study.json`` (its weights are hashed
    once for both, not at all where the caller gave that identity as ``weights``)."""
    plan, study = freeze_plan(plan_path, out, restart=restart, say=say, plan=plan)
    study = check_task_data(plan, out, study)  # the same task data for every run of the study
    study = check_reward_plugins(plan, out, study)  # the same reward code for every run of an arm
    weights = check_study_model(plan, out, weights, study=study)  # the same model for every run; study.json records it
    read = check_finished_runs(plan, out)
    if reuse_from:
        reuse_runs(plan, out, reuse_from, say=say, weights=weights)  # the weights hashed once, not again
    return plan, study, read


def ray_address_refusal(ray_address: str | None, executor: str) -> str | None:
    """Why ``ray_address`` cannot go with ``executor`` (only ``"ray"`` starts or joins a Ray cluster), else None."""
    if ray_address and executor != "ray":
        return (f"--ray-address {ray_address} goes with --executor ray (the {executor} executor starts no Ray): add "
                "--executor ray or drop --ray-address")
    return None


def _checked_plan(plan_path, executor: str, workers: int | None, ray_address: str | None, report_to: str,
                  check: bool, out=None) -> Plan:
    """The plan, once the arguments and (``check``) its model, tokenizer and task are known good; raises
    as :func:`run_study` says (ValueError, TrackerUnavailableError, PlanError, PreflightError: a ``[model] name``
    that resolves to nothing, led by where the runs of the study folder ``out``, or the plan's directory, found it
    when it is a relative path, :func:`.preflight.relative_model_hint`)."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not one of {', '.join(EXECUTORS)}")
    if (why := ray_address_refusal(ray_address, executor)) is not None:
        raise ValueError(why)
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    if executor == "ray" and importlib.util.find_spec("ray") is None:  # before the plan is frozen into the folder
        raise StudyError(RAY_MISSING)
    require_tracker(report_to)
    plan = load_study_plan(plan_path, out)  # a plan this folder froze before a later check resumes
    # vLLM missing: before the plan is frozen (a Ray cluster's workers may have it where the driver does not)
    if executor != "ray" and (why := backend_unavailable(plan.sampling.backend)) is not None:
        raise StudyError(why)
    if check:
        check_plan_inputs(plan, executor=executor, out=out)  # a relative model name: where the runs found it
    return plan


def _run(plan: Plan, study: dict, out: Path, opts: _Options, say, read: FinishedRunFiles) -> StudyResult:
    """:func:`_run_tasks` as one invocation of the study (:class:`~gradprobe.study.invocations.Invocation`):
    earlier invocations killed without an end are accounted for, and this one's end is recorded. ``read``: what
    was read of the finished runs (:class:`~gradprobe.study.collect.FinishedRunFiles`), added to as runs finish."""
    invocation = Invocation(out)
    for entry in invocation.begin(study):
        every = entry.get("heartbeat_seconds")
        say(f"an earlier invocation (pid {entry.get('pid')}, started {entry.get('started')}) ended without "
            f"recording it (killed); its {clock(float(entry.get('seconds') or 0.0))} up to its last heartbeat "
            f"({entry.get('last_seen')}) count in the study's wall time"
            + (f" (it may have run up to {float(every):g} s longer: one heartbeat every {float(every):g} s)"
               if isinstance(every, (int, float)) else ""))
    _save_study(out, study, say, invocation)  # lists this invocation before its first heartbeat
    invocation.start()
    try:
        result = _run_tasks(plan, study, out, opts, say, invocation, read)
    except BaseException as e:
        terminated = isinstance(e, StudyTerminated) or getattr(e, "terminated", False)
        how = "interrupted" if isinstance(e, KeyboardInterrupt) else f"error: {type(e).__name__}"
        invocation.end(study, "terminated (SIGTERM)" if terminated else how)
        if _save_study(out, study, say):
            invocation.clear()
        raise
    result.wall_seconds = invocation.end(study, "normally")
    result.total_wall_seconds = float(study["wall_seconds"])
    _save_study(out, study, say, strict=True)
    invocation.clear()
    return result


def _run_tasks(plan: Plan, study: dict, out: Path, opts: _Options, say, invocation: Invocation,
               read: FinishedRunFiles) -> StudyResult:
    """The runs still to do and the probe, dispatched; then ``runs.csv``, ``eval_items.jsonl.gz`` (from ``read``
    and the runs finished since) and the analysis. ``study`` (``study.json``) records every run's status as it
    changes."""
    result = StudyResult(out=out, plan_sha256=plan.sha256)
    entries = {(r["arm"], r["seed"]): r for r in study.get("runs", [])}
    tasks = _train_tasks(plan, out, entries, result, opts.report_to)
    probe_task = _probe_task(plan, out, opts, result, study)
    if probe_task is not None:
        tasks.insert(0, probe_task)
    for task in tasks:
        task["progress"] = opts.progress
        if task["kind"] == "train" and opts.lengths_checked is not None:
            task["prompt_lengths_checked"] = opts.lengths_checked  # the plan whose lengths the preflight checked
    study["runs"] = [entries[r] for r in plan.runs()]
    _save_study(out, study, say, invocation)
    if result.skipped:
        say(f"{len(result.skipped)} of {len(plan.runs())} runs already complete; not redone")
    if tasks:
        _dispatch(tasks, plan, study, out, entries, result, opts, say, invocation, read)
    _lost_runs(out, entries, result, read, say)
    write_runs_csv(plan, out, read)
    write_eval_items(plan, out, read)
    study["finished"] = now() if not result.failed else None
    _save_study(out, study, say, invocation, strict=True)  # the runs' record first: the analysis may fail
    if opts.analyze and result.done:
        try:
            run_analysis(out, write=True, figures=True)
        except Exception as e:  # the runs are kept; the analysis can be rerun with --analyze-only
            result.analysis_error = f"{type(e).__name__}: {e}"
    return result


def _train_tasks(plan: Plan, out: Path, entries: dict, result: StudyResult, report_to: str) -> list[dict]:
    """The training tasks of the runs not yet complete, in plan order; a complete run is recorded in
    ``result`` (done, skipped) and its ``study.json`` entry instead (``reused_from`` when copied from
    another study: its seconds are not this study's)."""
    frozen = str(out / PLAN_COPY)
    tasks = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        status, summary = run_status(folder)
        entry = entries.setdefault((arm, seed), {"arm": arm, "seed": seed, "dir": str(folder.relative_to(out))})
        if status == "done":
            result.done.append((arm, seed))
            result.skipped.append((arm, seed))
            entry.update(status="done", updates=summary.get("updates"),
                         final_accuracy=summary.get("final_greedy_accuracy"))
            if (source := reused_source(folder)) is not None:
                entry["reused_from"] = source  # trained in another study: its seconds are not this study's
                entry.setdefault("seconds", summary.get("wall_seconds"))
            continue
        entry.update(status="resuming" if status in ("partial", "failed") else "pending")
        tasks.append({"kind": "train", "plan": frozen, "arm": arm, "seed": seed, "out": str(folder),
                      "report_to": report_to})
    return tasks


def _probe_task(plan: Plan, out: Path, opts: _Options, result: StudyResult, study: dict) -> dict | None:
    """Write ``probe/arms.json``; the probe's task when it is asked for and not done yet: the shared
    ``probe/probe.json`` or a guided arm's ``probe/guided/<arm>/probe.json`` missing, and for a guided arm no
    record that its every reward failed (:func:`~gradprobe.study.probe_plan.pending_probes`; ``result.probe``
    says ``off`` / ``skipped`` otherwise, or, when an earlier invocation left rewards out, which:
    :func:`probe_state` of ``study.json``'s probe record, with the guided records it lacks read from their files,
    :func:`~gradprobe.study.probe_plan.recorded_left_out`). A bad ``[probe]`` key or value fails here, before any run
    (:class:`~gradprobe.training.plan.PlanError`)."""
    folder = probe_dir(out)
    write_json_atomic(prepare_output_dir(folder) / ARMS_JSON, arms_table(plan, opts.probe_overrides))
    if not opts.probe:
        result.probe = "off"
        return None
    if not pending_probes(plan, folder, opts.probe_overrides):
        earlier = dict(study["probe"]) if isinstance(study.get("probe"), dict) else {}
        said = earlier.get("left_out") if isinstance(earlier.get("left_out"), list) else []
        known = {(r.get("probe"), r.get("reward")) for r in said if isinstance(r, dict)}
        files = [r for r in recorded_left_out(plan, folder, opts.probe_overrides)
                 if (r.get("probe"), r.get("reward")) not in known]
        if files:  # a study stopped after a guided probe's record was written, before study.json recorded it
            earlier.update(status="done", left_out=[*said, *files])
        result.probe = probe_state(earlier, earlier=True) if earlier.get("left_out") else "skipped"
        return None
    check_probe_settings(plan, opts.probe_overrides)
    return {"kind": "probe", "plan": str(out / PLAN_COPY), "out": str(folder),
            "settings": dict(opts.probe_overrides or {})}


def _dispatch(tasks: list[dict], plan: Plan, study: dict, out: Path, entries: dict, result: StudyResult,
              opts: _Options, say, invocation: Invocation, read: FinishedRunFiles) -> None:
    """Run ``tasks`` on ``opts.executor``, recording each result as it comes (``study.json``, ``runs.csv``
    rebuilt with ``read``, so only the run just finished is read, a progress line, a heartbeat).

    Raises
    ------
    StudyInterrupted
        Ctrl-C: the executor was closed (a pool stops its workers) and ``study["interrupted"]`` set.
    """
    n_runs = sum(t["kind"] == "train" for t in tasks)
    total = len(plan.runs())
    n_workers = opts.workers or default_workers(max(1, n_runs))
    threads, why = worker_threads(n_workers, cluster=opts.executor == "ray" and bool(
        opts.ray_address or os.environ.get("RAY_ADDRESS")))
    say(f"{n_runs} runs to do{' + the probe' if len(tasks) > n_runs else ''} on executor {opts.executor} "
        f"({n_workers} workers x {threads} threads, {why})" if opts.executor != "inline"
        else f"{len(tasks)} tasks inline")
    stopped: list[int] = []
    watch = UntrainedWatch(out, [(t["arm"], t["seed"]) for t in tasks if t["kind"] == "train"], say)
    results = run_tasks(opts.executor, tasks, workers=n_workers, threads=threads, ray_address=opts.ray_address,
                        say=say, stopped=stopped, tick=watch.poll)
    started, finished_here = time.perf_counter(), 0
    try:
        for res in results:
            if res["kind"] == "probe":
                study["probe"] = {k: res.get(k) for k in ("status", "error", "seconds", "left_out") if k in res}
                result.probe = probe_state(study["probe"])
                say(f"probe {result.probe}")
            else:
                finished_here += 1
                what = _record_run(res, entries[(res["arm"], res["seed"])], result)
                say(f"run {res['arm']} seed {res['seed']} {what}; " + progress_line(
                    len(result.done), len(result.failed), total, time.perf_counter() - started, finished_here))
                watch.finished(res["arm"], res["seed"])
                try:
                    write_runs_csv(plan, out, read)
                except OutputDirError as e:
                    say(f"could not update runs.csv: {e}")
            _save_study(out, study, say, invocation)
            invocation.beat()
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM under gradprobe study (StudyTerminated)
        results.close()  # stops the pool if the interrupt came between two results
        study["interrupted"] = now()
        raise StudyInterrupted(out, len(result.done), total, sum(stopped), isinstance(e, StudyTerminated)) from None


def probe_state(record: dict, earlier: bool = False) -> str:
    """:attr:`StudyResult.probe <gradprobe.study.result.StudyResult.probe>` of the probe task's ``study.json`` record
    (``status``, ``error``, ``left_out``: :func:`gradprobe.study.worker.isolated_probe`'s records): ``done``,
    ``failed: ERROR``, or, when rewards were left out of a probe, ``failed for arm A: ERROR; ...``, naming each
    reward's arms, its error, the probe's file, that the other arms' entries are kept and the fix (``earlier``:
    recorded by an earlier invocation, whose files are kept). A guided probe whose every reward failed (records with
    ``every_reward_failed``) is named by its folder and its record, ``probe/guided/ARM/``
    :data:`~gradprobe.layout.GUIDED_LEFT_OUT` (it has no ``probe.json``)."""
    if record.get("status") != "done":
        return f"failed: {record.get('error')}"
    left_out = record.get("left_out") or []
    if not left_out:
        return "done"
    where = {r.get("probe") or "": bool(r.get("every_reward_failed")) for r in left_out}
    files = ", ".join(f"probe/{f} (every reward of that probe failed: no probe.json, its record probe/{f}/"
                      f"{GUIDED_LEFT_OUT})" if where[f] else f"probe/{f}/probe.json" if f else "probe/probe.json"
                      for f in sorted(where))
    failures = "; ".join(f"{arms_text(r.get('arms') or [])}: {r.get('error')}" for r in left_out)
    return (f"failed for {failures}; {'that reward is' if len(left_out) == 1 else 'those rewards are'} left out of "
            f"{files}{' (written by an earlier invocation, kept)' if earlier else ''}, and the other arms' entries "
            f"are kept; {left_out[0].get('fix')}")


def _lost_runs(out: Path, entries: dict, result: StudyResult, read: FinishedRunFiles, say) -> None:
    """Record as failed each run complete in this invocation (done or kept) and read from its folder (``read``)
    whose folder no longer says so at its end (deleted, moved or its ``summary.json`` removed while the study ran):
    its results are no longer on disk (``eval_items.jsonl``, weights), so ``runs.csv`` leaves it out, the study is
    not marked finished, and a rerun of the same command redoes it. Its entry in ``study.json`` says why; a line on
    the progress output names it."""
    for key in [k for k in result.done if (k in read.rows or k in read.items)
                and run_status(run_dir(out, *k))[0] != "done"]:
        folder = run_dir(out, *key)
        what = "was deleted or moved" if not folder.exists() else "lost its summary.json"
        err = (f"its run folder {folder} {what} while the study ran, so its results are gone; rerun the same command "
               "to redo the run (the other runs are kept)")
        entries[key].update(status="failed", error=err)
        result.done.remove(key)
        if key in result.skipped:
            result.skipped.remove(key)
        result.failed[key] = err
        read.rows.pop(key, None)
        read.items.pop(key, None)
        say(f"run {key[0]} seed {key[1]} FAILED: {err}")


def _record_run(res: dict, entry: dict, result: StudyResult) -> str:
    """Record a finished training task's report in its ``study.json`` entry and in ``result``; returns
    what the progress line says of it (``done: ...`` or ``FAILED: ...``)."""
    key = (res["arm"], res["seed"])
    entry.update({k: res.get(k) for k in ("status", "error", "updates", "final_accuracy", "seconds",
                                          "failed_update", "traceback") if res.get(k) is not None})
    if res["status"] == "done":
        for k in ("error", "failed_update", "traceback"):
            entry.pop(k, None)
        result.done.append(key)
        return (f"done: {res.get('updates')} updates, final greedy accuracy "
                f"{res.get('final_accuracy')} ({res.get('seconds', 0):.0f} s)")
    result.failed[key] = res.get("error")
    if res.get("resume_fix"):  # refused with its own resume fix: the same command retries it once that is made
        result.resumable.add(key)
    return f"FAILED: {res.get('error')}"


def _save_study(out: Path, study: dict, say, invocation: Invocation | None = None, strict: bool = False) -> bool:
    """Write ``study.json`` atomically (with ``invocation``'s latest ``last_seen``); True when written.
    A failed write is said and ignored unless ``strict`` (then :class:`OutputDirError`)."""
    if invocation is not None:
        invocation.touch()
    try:
        write_json_atomic(out / STUDY_JSON, study)
        return True
    except OutputDirError as e:
        if strict:
            raise
        say(f"could not update study.json (the runs' own folders are intact): {e}")
        return False


class UntrainedWatch:
    """Says on the study's progress output when a run trained no group in
    :data:`~gradprobe.training.update.UNTRAINED_WARN_UPDATES` (k) updates in a row, and once more at 10 k, as the
    run's own warning (:func:`gradprobe.training.update.warn_untrained`) says in its ``train.log``, which a user
    watching the study does not read: one line per run and level (k, 10 k), the highest level reached, naming the
    updates, the cause (:func:`gradprobe.training.untrained.describe`) and the run's ``train.log`` (where the
    warning says what to change).

    :meth:`poll` (the local pool's and Ray's ticks: :func:`~gradprobe.study.executors.run_tasks`) reads the tail of
    each unfinished run's ``metrics.jsonl`` that changed since it last looked
    (:func:`gradprobe.training.untrained.untrained_tail`, at most 10 k lines), every ``every`` seconds at most;
    :meth:`finished` reads a finished (or failed) run's whole file once for its longest row, so a row that ended
    before the run did, or a run of an executor without ticks (inline), is said too. Lines are read as
    :func:`gradprobe.training.untrained.metrics_line` tells them: a last line still being written is not read yet,
    a damaged line ends a row; a file that cannot be read says nothing. Neither method raises for a file.

    Parameters
    ----------
    out : path
        The study folder (``runs/ARM/seedS/metrics.jsonl``).
    runs : iterable of (str, int)
        The (arm, seed) runs this invocation trains.
    say : callable(str)
        The study's progress messages (:func:`run_study`'s ``say``).
    every : float
        Seconds between two looks of :meth:`poll` (default :data:`UNTRAINED_WATCH_SECONDS`).
    """

    def __init__(self, out, runs, say, every: float | None = None):
        from ..training.update import UNTRAINED_WARN_UPDATES  # torch: the study package stays torch-free on import

        self.out, self.say = Path(out), say
        self.every = UNTRAINED_WATCH_SECONDS if every is None else float(every)
        self.levels = (UNTRAINED_WARN_UPDATES, 10 * UNTRAINED_WARN_UPDATES)
        self.running = {(str(a), int(s)) for a, s in runs}
        self.said: dict[tuple[str, int], int] = {}  # run -> the highest level said
        self._stamps: dict[tuple[str, int], tuple[int, int]] = {}  # run -> (size, mtime) of its file when last read
        self._last = -math.inf

    def poll(self) -> None:
        """Look at the unfinished runs' ``metrics.jsonl`` tails (at most every ``every`` seconds; a file unchanged
        since the last look is not read again) and say each newly reached level."""
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        for key in sorted(self.running):
            path = run_dir(self.out, *key) / METRICS_JSONL
            try:
                st = path.stat()
            except OSError:  # not started yet
                continue
            if self._stamps.get(key) == (st.st_size, st.st_mtime_ns):
                continue
            self._stamps[key] = (st.st_size, st.st_mtime_ns)
            self._tell(key, untrained_tail(path, self.levels[-1]), running=True)

    def finished(self, arm: str, seed: int) -> None:
        """The run (arm, seed) finished (or failed): no more looks at it; say its longest row of updates that trained
        no group when it reached a level not said yet."""
        key = (str(arm), int(seed))
        self.running.discard(key)
        self._tell(key, longest_untrained_row(run_dir(self.out, *key) / METRICS_JSONL), running=False)

    def _tell(self, key: tuple[str, int], row: list[dict], running: bool) -> None:
        level = max((k for k in self.levels if len(row) >= k), default=0)
        if level <= self.said.get(key, 0):
            return
        self.said[key] = level
        folder = run_dir(self.out, *key)
        tokens = run_max_new_tokens(folder) if cause(row) == "truncated" else None
        first, last, goes_on = row[0].get("update"), row[-1].get("update"), "the run goes on; " if running else ""
        self.say(f"warning: run {key[0]} seed {key[1]}: {len(row)} updates in a row trained no group (updates "
                 f"{first}-{last}, every advantage 0): {describe(row, tokens)}; {goes_on}"
                 f"see {(folder / TRAIN_LOG).relative_to(self.out)} for what to change")


def longest_untrained_row(path) -> list[dict]:
    """The longest row of update lines of ``metrics.jsonl`` ``path`` that trained nothing in a row
    (:func:`gradprobe.training.untrained.trained` False; the first of equal ones), oldest first, as
    :func:`~gradprobe.training.untrained.untrained_tail` counts one: the update lines of
    :func:`~gradprobe.training.untrained.update_lines` (eval, blank and unfinished last lines skipped), a line that
    does not say or is damaged ends the row. [] when the file cannot be read; raises nothing else."""
    best, row = [], []
    try:
        for line in update_lines(Path(path)):
            if trained(line) is False:
                row.append(line)
                best = row if len(row) > len(best) else best
            else:
                row = []
    except OSError:
        return []
    return best
