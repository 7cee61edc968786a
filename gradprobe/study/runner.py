"""Run a preregistered matched-compute study: every arm x seed of a frozen plan, then the probe.

``run_study(plan, out)`` (``gradprobe study PLAN --out DIR``), DESIGN.md "Matched-compute training":

1. the plan is validated (:func:`gradprobe.training.plan.load_plan`: unknown keys, arms, rewards,
   a budget smaller than one update all fail here, before anything is written), and its inputs
   are checked (:func:`gradprobe.study.preflight.check_plan_inputs`: the model resolves, its
   tokenizer loads, the task builds and yields a prompt), still before anything is written;
2. it is frozen: copied byte for byte to ``DIR/plan.toml`` and its sha256 recorded in
   ``DIR/study.json``. A study folder whose frozen plan has another sha256 is refused
   (:class:`PlanChangedError` names both hashes; the fix is a new ``--out``, or, while no run of
   the frozen plan has finished, ``restart=True`` (``--restart``), which replaces the frozen plan
   and the partial outputs);
3. every (arm, seed) run goes to an executor: a local process pool (``spawn`` context, each
   worker with ``max(1, cores // workers)`` torch threads), Ray (one remote task per run with
   that many ``num_cpus``; on a multi-machine cluster ``DIR`` must be on a file system every
   node mounts at the same path), or ``inline`` (this process, serially; debugging and tests). Each run
   is :func:`gradprobe.training.run.run_training` in ``DIR/runs/<arm>/seed<S>/``: a run whose
   ``summary.json`` says completed is never redone, a partial run resumes from its checkpoint;
4. the probe of every arm's reward on the initial policy (``DIR/probe/probe.json``,
   ``DIR/probe/arms.json``), once (skipped when ``probe.json`` exists, or with ``probe=False``);
5. ``DIR/runs.csv`` is rebuilt from the finished run folders after every run, so a killed
   study loses nothing; at the end :func:`gradprobe.study.analysis.analyze` writes
   ``DIR/analysis.json`` and ``DIR/figures/``.

Every finished run prints one progress line: runs complete / runs in the plan, this
invocation's elapsed wall time and an ETA (:func:`progress_line`). ``study.json`` lists every
invocation of the study (:mod:`gradprobe.study.invocations`: start, last heartbeat, how it
ended) and ``wall_seconds``, their total, which includes an invocation killed with SIGKILL up to
its last heartbeat.

A failed run (NaN loss, a crash, a write error) is recorded in ``study.json`` with its error,
its folder is kept, the other runs continue, and :class:`StudyResult` reports it (the command
exits non-zero). Concurrency safety: the study folder is locked (``fcntl.flock``) against a
second study process, each run folder is locked by the worker running it, and pool workers exit
when the study process dies, so a restarted study never writes a run folder at the same time as
an orphan of the killed one.

Interrupts (Ctrl-C, SIGINT): pool workers start with SIGINT ignored (a terminal sends it to the
whole process group; only the study process decides what stops). On SIGINT the study starts no
further run, cancels the queued ones, sends SIGTERM to its running workers (a run stopped that
way resumes from its last checkpoint, as after SIGKILL), waits for them (SIGKILL after
``STOP_GRACE_SECONDS``), records ``interrupted`` and the invocation's wall time in ``study.json``,
releases its lock and raises :class:`StudyInterrupted` (``gradprobe study`` then says how to
resume and exits with 130, the shell's status for SIGINT).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import hashlib
import io
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..outputs import OutputDirError, output_error, prepare_output_dir, versions, write_json_atomic
from ..training.plan import Plan, PlanError, load_plan
from .invocations import HEARTBEAT_JSON, Invocation

EXECUTORS = ("local", "ray", "inline")
PLAN_COPY = "plan.toml"
STUDY_JSON = "study.json"
RUNS_CSV = "runs.csv"
RUNS_CSV_COLUMNS = ("arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled",
                    "reward", "lr_scale", "flops", "response_length", "format_rate", "kl_init",
                    "step_validity_rate", "step_count_deviation")
EVAL_ITEMS_GZ = "eval_items.jsonl.gz"  # every finished run's eval_items.jsonl, with arm and seed on each line
# probe settings when the plan has no [probe] table: ProbeConfig defaults scaled for a study
PROBE_DEFAULTS = {"prompts": 16, "group": 8, "heldout_prompts": 16, "heldout_group": 16}


class StudyError(RuntimeError):
    """A study folder cannot be used as asked (another study holds it, a frozen plan was edited)."""


class PlanChangedError(StudyError):
    """The study folder was made with a plan of another sha256."""


#: seconds a stopped worker gets to exit after SIGTERM before it is killed (SIGKILL)
STOP_GRACE_SECONDS = 20.0


#: seconds between two wake-ups of the study process while it waits for runs (so that a Ctrl-C delivered
#: to another thread is seen within this time)
POLL_SECONDS = 0.5


class StudyInterrupted(KeyboardInterrupt):
    """A study stopped by Ctrl-C / SIGINT: no run was started after it, running runs were stopped.

    Attributes
    ----------
    out : Path
        The study folder (its lock is released; the same command resumes it).
    done, total : int
        Runs complete (kept, never redone) and runs in the plan.
    stopped : int
        Pool workers (``local`` executor) that were running a run or the probe and were told to
        stop (SIGTERM); 0 for the other executors (``inline``: the interrupt stopped its run).
    """

    def __init__(self, out, done: int, total: int, stopped: int = 0):
        self.out, self.done, self.total, self.stopped = Path(out), int(done), int(total), int(stopped)
        super().__init__(f"study {self.out} interrupted: {self.done} of {self.total} runs complete (kept, never "
                         "redone); no further run was started, and a run stopped mid-way resumes from its last "
                         "checkpoint (or from update 0 if it had none)")


@dataclass
class StudyResult:
    """What :func:`run_study` did.

    Attributes
    ----------
    out : Path
    plan_sha256 : str
    done : list[tuple[str, int]]
        (arm, seed) runs that are complete (now or before).
    skipped : list[tuple[str, int]]
        Runs that were already complete when the study started (never redone).
    failed : dict[tuple[str, int], str]
        Runs that stopped with an error, and the error.
    probe : str
        ``"done"``, ``"skipped"`` (``probe.json`` existed), ``"off"``, or ``"failed: ..."``.
    analysis_error : str or None
        Why the analysis could not be written, if it could not.
    wall_seconds, total_wall_seconds : float
        Wall-clock seconds of this invocation (runs, probe, analysis), and of every invocation of
        the study so far (``study.json`` ``wall_seconds``; a resumed study adds to it).
    """

    out: Path
    plan_sha256: str
    done: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    probe: str = "off"
    analysis_error: str | None = None
    wall_seconds: float = 0.0
    total_wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.probe.startswith("failed") and self.analysis_error is None

    def summary(self) -> str:
        """Plain-text summary (what ``gradprobe study`` prints at the end)."""
        lines = [f"study {self.out}: {len(self.done)} runs complete ({len(self.skipped)} were already), "
                 f"{len(self.failed)} failed; probe: {self.probe}; wall time {_clock(self.wall_seconds)}"
                 + (f" (all invocations {_clock(self.total_wall_seconds)})"
                    if self.total_wall_seconds > self.wall_seconds + 0.5 else "")]
        for (arm, seed), err in sorted(self.failed.items()):
            lines.append(f"  FAILED {arm} seed {seed}: {err}")
        if self.analysis_error:
            lines.append(f"  analysis not written: {self.analysis_error}")
        if self.failed:
            lines.append(f"  failed runs keep their data in {self.out}/runs/<arm>/seed<S>/; rerun the same command to "
                         f"retry them (completed runs are not redone)")
        return "\n".join(lines)


def _clock(seconds: float) -> str:
    """``1369.2`` -> ``"22 min 49 s"``."""
    m, sec = divmod(int(round(seconds)), 60)
    return f"{m} min {sec} s" if m else f"{sec} s"


def run_dir(out: str | Path, arm: str, seed: int) -> Path:
    """``out/runs/<arm>/seed<S>``: the folder of one run."""
    return Path(out) / "runs" / arm / f"seed{int(seed)}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise output_error("writing", path, e) from e


def freeze_plan(plan_path: str | Path, out: str | Path, *, restart: bool = False, say=None) -> tuple[Plan, dict]:
    """Validate ``plan_path``, then copy it to ``out/plan.toml`` and record it in ``out/study.json``.

    Parameters
    ----------
    plan_path : path
        The plan TOML (validated with :func:`~gradprobe.training.plan.load_plan`).
    out : path
        The study folder (created and checked writable before anything else is written).
    restart : bool
        When ``out`` holds a study of another plan of which no run has finished: delete its
        frozen plan and every study output (:data:`STUDY_OUTPUTS`: runs, probe, runs.csv,
        analysis...) and freeze ``plan_path`` instead (said on stderr, even when ``say`` is
        silent: data is deleted). The caller must hold the study folder's lock.
    say : callable(str), optional
        Progress messages.

    Returns
    -------
    (Plan, dict)
        The plan loaded from the FROZEN copy (every run reads that file) and ``study.json``'s content.

    Raises
    ------
    PlanError
        The plan is invalid (nothing is written).
    PlanChangedError
        ``out`` holds a study of a plan with another sha256 (both hashes named; the fix: a new
        ``--out``, or ``--restart`` when no run of it has finished), or ``restart`` was asked
        but runs of the frozen plan have finished (how many is named).
    StudyError
        ``out/plan.toml`` was edited after freezing.
    OutputDirError
        ``out`` cannot be created or written (names the path and the fix).
    """
    plan = load_plan(plan_path)
    out = prepare_output_dir(Path(out))
    raw = Path(plan_path).read_bytes()
    frozen, sj = out / PLAN_COPY, out / STUDY_JSON
    if sj.exists() or frozen.exists():
        study = json.loads(sj.read_text()) if sj.exists() else {}
        old = study.get("plan_sha256") or _sha256(frozen.read_bytes())
        if old != plan.sha256:
            finished = finished_runs(out)
            if not finished and restart:
                _restart_study(out, old, plan, plan_path)
                return freeze_plan(plan_path, out, say=say)
            head = (f"study folder {str(out)!r} was started with a plan of sha256 {old}, but {str(plan_path)!r} has "
                    f"sha256 {plan.sha256}: a study's plan is frozen before its first run and cannot change. ")
            if finished and restart:
                raise PlanChangedError(
                    head + f"--restart refused: {len(finished)} run(s) of the frozen plan have finished "
                    f"({', '.join(str(f.relative_to(out)) for f in finished[:4])}{', ...' if len(finished) > 4 else ''}) "
                    f"and would be lost. Run the changed plan with a new --out")
            if finished:
                raise PlanChangedError(
                    head + f"{len(finished)} run(s) of the frozen plan have finished, so it cannot be replaced: run "
                    f"the changed plan with a new --out (or restore the original plan, {out / PLAN_COPY}, to resume "
                    f"this study)")
            raise PlanChangedError(
                head + f"No run of the frozen plan has finished: rerun with --restart to replace the frozen plan and "
                f"its partial outputs with this plan, or run it with a new --out (or restore the original plan, "
                f"{out / PLAN_COPY}, to resume this study)")
        if restart and say is not None:
            say("--restart: the plan is the frozen one; nothing to replace, resuming the study")
        if not frozen.exists():
            _write_bytes_atomic(frozen, raw)
        elif _sha256(frozen.read_bytes()) != old:
            raise StudyError(f"{frozen} was edited after the study froze it (study.json records sha256 {old}, the "
                             f"file has {_sha256(frozen.read_bytes())}); restore it or start a new --out")
        if not study:
            study = _new_study_json(plan, plan_path)
            write_json_atomic(sj, study)
    else:
        _write_bytes_atomic(frozen, raw)
        study = _new_study_json(plan, plan_path)
        write_json_atomic(sj, study)
    return load_plan(frozen), study


#: what ``--restart`` deletes from a study folder (nothing else in it is touched)
STUDY_OUTPUTS = (PLAN_COPY, STUDY_JSON, RUNS_CSV, EVAL_ITEMS_GZ, "analysis.json", "figures", "reanalysis", "probe",
                 "runs", HEARTBEAT_JSON)


def finished_runs(out: str | Path) -> list[Path]:
    """Run folders under ``out/runs/`` whose ``summary.json`` says completed (any plan's), sorted."""
    return sorted(f for f in Path(out).glob("runs/*/seed*") if f.is_dir() and run_status(f)[0] == "done")


def _restart_study(out: Path, old_sha: str, plan: Plan, plan_path) -> None:
    """Delete the study outputs of ``out`` (:data:`STUDY_OUTPUTS`); each run folder only once its
    lock is free (an orphaned worker of a killed study exits within a second)."""
    import shutil

    folders = [f for f in out.glob("runs/*/seed*") if f.is_dir()]
    print(f"[study] --restart: no run of the frozen plan (sha256 {old_sha}) has finished; deleting its frozen plan "
          f"and partial outputs in {out} ({len(folders)} run folder(s), probe, study.json) and freezing "
          f"{plan_path} (sha256 {plan.sha256})", file=sys.stderr, flush=True)
    for folder in folders:
        _FolderLock(folder, ".lock", wait=True, what="run folder").release()
    for name in STUDY_OUTPUTS:
        path = out / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError as e:
            raise output_error("deleting (--restart)", path, e) from e


def _new_study_json(plan: Plan, plan_path) -> dict:
    return {"plan_sha256": plan.sha256, "plan_path": str(Path(plan_path).resolve()), "created": _now(),
            "versions": versions(),
            "runs": [{"arm": a, "seed": s, "dir": str(Path("runs") / a / f"seed{s}"), "status": "pending"}
                     for a, s in plan.runs()]}


def run_status(folder: Path) -> tuple[str, dict | None]:
    """(status, summary) of a run folder: ``done`` (summary completed), ``failed`` (a summary with
    ``completed`` false: NaN loss, write error), ``partial`` (data, no summary) or ``pending``."""
    s = folder / "summary.json"
    if s.exists():
        try:
            summary = json.loads(s.read_text())
        except (OSError, json.JSONDecodeError):
            return "partial", None
        return ("done" if summary.get("completed") else "failed"), summary
    if (folder / "metrics.jsonl").exists():
        return "partial", None
    return "pending", None


# ----------------------------------------------------------------------------- probe settings

def probe_settings(plan: Plan, overrides: dict | None = None) -> dict:
    """Keyword arguments of :class:`gradprobe.probe.run.ProbeConfig` for the study's probe.

    Order of precedence: ``overrides`` > the plan's ``[probe]`` table (``plan.probe`` when the
    plan format has it, else ``plan.raw["probe"]``) > :data:`PROBE_DEFAULTS` > values from the
    plan (model, task name, rewards, ``[train]`` lr and loss type, token/seconds budgets,
    ``[sampling]``, ``[mc]``, micro-batch size, and the ``[train]`` batch as ``update_prompts`` /
    ``update_group``, so tokens per update are the training update's even when the ``[probe]``
    batch is smaller). The probe's ``lr`` is the plan's ``[train]``
    lr: arms that differ only by ``lr_scale`` share one reward entry (``calib`` scales it).

    Loss types: the probe's ``loss_type`` is the plan's ``[train]`` one (or ``[probe]``'s); the other
    loss types of the arms (``[arms.NAME] loss_type``) become ``loss_types`` (after any the ``[probe]``
    table lists), so every arm's (reward, loss type) pair has an entry, keyed as :func:`arms_table`
    records (:func:`gradprobe.probe_keys.entry_key`); one alignment pass serves them all.

    Raises
    ------
    PlanError
        A ``[probe]`` key that :class:`ProbeConfig` does not have (the valid keys are listed).
    """
    from ..probe.run import ProbeConfig

    table = getattr(plan, "probe", None)
    if table is None:
        table = (getattr(plan, "raw", None) or {}).get("probe")
    if table is not None and dataclasses.is_dataclass(table):
        table = dataclasses.asdict(table)
    table = dict(table or {})
    rewards = tuple(dict.fromkeys(a.reward for a in plan.arms.values()))
    settings = {"model": plan.model.name, "task": plan.task.name, "rewards": rewards, "lr": plan.train.lr,
                "loss_type": plan.train.loss_type, "budget_tokens": int(plan.budget.generated_tokens or 1_000_000),
                "budget_seconds": plan.budget.device_seconds, "sampling": plan.sampling, "mc": plan.mc,
                "device": plan.model.device, "dtype": plan.model.dtype,
                "micro_batch_size": plan.train.micro_batch_size, "progress": False,
                "update_prompts": plan.train.prompts_per_update, "update_group": plan.train.group, **PROBE_DEFAULTS}
    valid = [f.name for f in dataclasses.fields(ProbeConfig)]
    for key, value in {**table, **(overrides or {})}.items():
        if key == "continuations":  # [probe] continuations = K: the probe's MC continuations per step boundary
            settings["mc"] = dataclasses.replace(settings["mc"], continuations=int(value))
            continue
        if key not in valid:
            raise PlanError(f"unknown key 'probe.{key}'; valid keys in [probe]: continuations, {', '.join(valid)}")
        settings[key] = value
    settings["rewards"] = tuple(settings["rewards"])
    given = settings.get("loss_types") or ()
    given = tuple(x.strip() for x in given.split(",") if x.strip()) if isinstance(given, str) else tuple(given)
    arm_losses = [_arm_loss_type(plan, a) for a in plan.arms.values()]
    extra = tuple(x for x in dict.fromkeys((*given, *arm_losses)) if x != settings["loss_type"])
    if extra:
        settings["loss_types"] = extra
    return settings


def _arm_loss_type(plan: Plan, arm) -> str:
    """The loss type an arm trains with: its ``[arms.NAME] loss_type``, else the plan's ``[train]`` one."""
    return str((arm.train or {}).get("loss_type", plan.train.loss_type))


def arms_table(plan: Plan, overrides: dict | None = None) -> dict:
    """``arms.json``: arm -> {"reward", "loss_type", "probe_entry", "lr_scale", "description"}.

    ``loss_type`` is the loss the arm trains with; ``probe_entry`` the key of its (reward, loss type)
    in the study probe's ``probe.json`` (:func:`gradprobe.probe_keys.entry_key` against the probe's
    ``loss_type``, from :func:`probe_settings` with the same ``overrides``): ``outcome`` for grpo,
    ``outcome@bnpo`` for an arm with reward outcome and ``loss_type = "bnpo"`` under a grpo plan.
    Readers take ``probe_entry`` and fall back to ``reward`` for an ``arms.json`` written before it
    (:func:`gradprobe.probe_keys.arm_entry`).

    Raises
    ------
    PlanError
        A ``[probe]`` key :class:`~gradprobe.probe.run.ProbeConfig` does not have (:func:`probe_settings`).
    """
    from ..probe_keys import entry_key

    probe_loss = probe_settings(plan, overrides)["loss_type"]
    out = {}
    for name, a in plan.arms.items():
        lt = _arm_loss_type(plan, a)
        out[name] = {"reward": a.reward, "loss_type": lt, "probe_entry": entry_key(a.reward, lt, probe_loss),
                     "lr_scale": a.lr_scale, "description": a.description}
    return out


# ----------------------------------------------------------------------------- tasks (run in workers)

def _watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Exit this worker as soon as the study process is gone (a SIGKILLed study leaves no orphan writing)."""

    def loop():
        while True:
            if os.getppid() != parent_pid:
                os._exit(70)
            time.sleep(interval)

    threading.Thread(target=loop, name="gradprobe-parent-watch", daemon=True).start()


def _worker_init(threads: int, parent_pid: int | None) -> None:
    import signal

    import torch

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


class _FolderLock:
    """Exclusive ``fcntl.flock`` on ``folder/name`` (released by the kernel when the process dies)."""

    def __init__(self, folder: Path, name: str, *, wait: bool, what: str):
        import fcntl

        folder.mkdir(parents=True, exist_ok=True)
        self.f = open(folder / name, "a+")
        flags = fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(self.f.fileno(), flags)
        except BlockingIOError:
            self.f.seek(0)
            holder = self.f.read().strip()
            self.f.close()
            raise StudyError(f"{what} {folder} is in use by another process ({holder or 'unknown pid'}); wait for "
                             f"it to finish or stop it") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"pid {os.getpid()}")
        self.f.flush()

    def release(self) -> None:
        """Empty the file (no stale pid is left behind), unlock and close it; idempotent."""
        import fcntl

        if not self.f.closed:
            try:
                self.f.seek(0)
                self.f.truncate()
                self.f.flush()
            except OSError:  # a full disk must not keep the lock
                pass
            fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)
            self.f.close()


def execute_task(task: dict) -> dict:
    """Run one study task in this process and report, never raise.

    ``task``: ``{"kind": "train", "plan": PATH, "arm", "seed", "out": RUN_DIR}`` or
    ``{"kind": "probe", "plan": PATH, "out": PROBE_DIR, "settings": {...}}``. Returns
    ``{"kind", "arm", "seed", "status": "done"|"failed", "error", "seconds", ...}``.
    """
    start = time.perf_counter()
    res = {k: task.get(k) for k in ("kind", "arm", "seed")}
    lock = None
    try:
        out = Path(task["out"])
        lock = _FolderLock(out, ".lock", wait=True, what="run folder")  # waits for an orphan of a killed study
        plan = load_plan(task["plan"])
        if task["kind"] == "train":
            res.update(_train(plan, task["arm"], int(task["seed"]), out, task.get("log", True),
                              task.get("report_to", "none")))
        elif task["kind"] == "probe":
            res.update(_probe(plan, out, task.get("settings") or {}))
        else:
            raise ValueError(f"unknown task kind {task['kind']!r}")
        res["status"] = "done"
    except Exception as e:  # the study records the error and continues with the other runs
        from ..training.run import NonFiniteRunError

        res["status"] = "failed"
        res["error"] = str(e) if isinstance(e, (NonFiniteRunError, OSError, PlanError, StudyError)) else (
            f"{type(e).__name__}: {e}")
        res["traceback"] = traceback.format_exc(limit=8)
        if isinstance(e, NonFiniteRunError):
            res["failed_update"] = e.update
    finally:
        if lock is not None:
            lock.release()
    res["seconds"] = time.perf_counter() - start
    return res


def _train(plan: Plan, arm: str, seed: int, out: Path, log: bool, report_to: str = "none") -> dict:
    import contextlib

    from ..training.run import run_training

    run = plan.arm(arm, seed=seed)
    stream = open(out / "train.log", "a") if log else contextlib.nullcontext(None)
    with stream as f:
        ctx = contextlib.redirect_stderr(f) if f is not None else contextlib.nullcontext()
        with ctx:
            summary = run_training(run, out, progress=f is not None, report_to=report_to,
                                   tracking_dir=out.parents[2] / "tb" / arm / f"seed{seed}")  # STUDY/tb/<arm>/seed<N>
    return {"updates": summary.get("updates"), "final_accuracy": summary.get("final_greedy_accuracy")}


def _probe(plan: Plan, out: Path, overrides: dict) -> dict:
    from ..probe.run import ProbeConfig, run_probe
    from ..training.run import load_run_policy, load_run_task

    if (out / "probe.json").exists():
        return {"skipped": True}
    config = ProbeConfig(**probe_settings(plan, overrides))
    policy = load_run_policy(plan.model, seed=config.seed)
    task = load_run_task(plan.task)
    result = run_probe(config, out=out, policy=policy, task=task)
    return {"rewards": [r["name"] for r in result["rewards"]]}


# ----------------------------------------------------------------------------- executors

def default_workers(n_tasks: int) -> int:
    """min(tasks, CPU cores), at least 1."""
    return max(1, min(int(n_tasks), os.cpu_count() or 1))


def _stop_pool(pool, say=None, grace: float = STOP_GRACE_SECONDS) -> int:
    """Stop a process pool now: cancel queued tasks, SIGTERM the workers, SIGKILL after ``grace`` s.

    SIGINT is ignored meanwhile (a second Ctrl-C cannot leave workers behind). Returns the number
    of workers that were alive (each was running a task, or about to).
    """
    import signal

    main = threading.current_thread() is threading.main_thread()  # signal.signal works only there
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        procs = [p for p in list((getattr(pool, "_processes", None) or {}).values()) if p.is_alive()]
        if say is not None:
            say(f"interrupted: starting no further run; stopping {len(procs)} running worker(s)")
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)  # dispatch nothing more
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: the run resumes from its last checkpoint, as after SIGKILL
        deadline = time.monotonic() + grace
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5.0)
        if manager is not None:  # it sees the dead workers, fails the futures and closes the pool's queues
            manager.join(5.0)
        return len(procs)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _iter_local(tasks: list[dict], workers: int, threads: int, say=None, stopped: list | None = None):
    """Results of ``tasks`` from a spawn process pool, as they finish.

    Workers are spawned with SIGINT ignored and blocked (the disposition survives ``exec``, and
    Python installs no KeyboardInterrupt handler for an ignored SIGINT), so a terminal's Ctrl-C
    reaches only this process: a pending one is delivered here once the pool is up. When the
    generator does not run to its end (KeyboardInterrupt, ``close()``), :func:`_stop_pool` stops
    the pool and appends the number of stopped workers to ``stopped``.
    """
    import multiprocessing
    import signal
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")
    pool, finished = None, False
    main = threading.current_thread() is threading.main_thread()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        try:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                                       initargs=(threads, os.getpid()))
            futures = {pool.submit(execute_task, t): t for t in tasks}  # spawns the workers (SIGINT ignored)
        finally:
            if main:
                signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C meanwhile is raised here
        # Wait in slices of POLL_SECONDS rather than blocking until a run ends: the kernel may hand a
        # Ctrl-C to any thread that does not block SIGINT (a library's monitor thread, say), and then
        # only a main thread that wakes up runs Python's handler and sees its KeyboardInterrupt.
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            for fut in done:
                t = futures[fut]
                try:
                    yield fut.result()
                except BrokenProcessPool as e:
                    yield {**{k: t.get(k) for k in ("kind", "arm", "seed")}, "status": "failed",
                           "error": f"the worker process died ({e}); e.g. out of memory: use fewer --workers"}
                except Exception as e:  # pickling errors and the like
                    yield {**{k: t.get(k) for k in ("kind", "arm", "seed")}, "status": "failed",
                           "error": f"{type(e).__name__}: {e}"}
        finished = True
    finally:
        if pool is not None:
            if finished:
                pool.shutdown(wait=True)
            else:
                n = _stop_pool(pool, say)
                if stopped is not None:
                    stopped.append(n)


def _ray_execute(task: dict, threads: int) -> dict:
    _worker_init(threads, None)
    return execute_task(task)


def _iter_ray(tasks: list[dict], threads: int, address: str | None):
    try:
        import ray
    except ImportError as e:
        raise StudyError("--executor ray needs Ray: pip install 'ray[default]' (or use --executor local)") from e
    started = False
    if not ray.is_initialized():
        ray.init(address=address) if address else ray.init()
        started = True
    pending, finished = [], False
    try:
        remote = ray.remote(num_cpus=threads, max_retries=0)(_ray_execute)
        refs = {remote.remote(t, threads): t for t in tasks}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            t = refs[ready[0]]
            try:
                yield ray.get(ready[0])
            except Exception as e:  # RayTaskError, WorkerCrashedError
                yield {**{k: t.get(k) for k in ("kind", "arm", "seed")}, "status": "failed",
                       "error": f"Ray task failed: {type(e).__name__}: {e}"}
        finished = True
    finally:
        if not finished:  # interrupted: cancel what has not finished (force: stop the running tasks too)
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:
                    pass
        if started:
            ray.shutdown()


def _iter_inline(tasks: list[dict]):
    for t in tasks:
        yield execute_task(t)


# ----------------------------------------------------------------------------- runs.csv

def collect_runs(plan: Plan, out: str | Path) -> list[dict]:
    """Rows of ``runs.csv``: one per eval point of every COMPLETED run of the plan (failed and
    partial runs are left out; ``study.json`` lists them), in plan order.

    Columns (:data:`RUNS_CSV_COLUMNS`): arm, seed, update, generated_tokens (charged tokens),
    device_seconds (training device-seconds), accuracy (greedy held-out accuracy in [0, 1]),
    accuracy_sampled (empty where the schedule skipped it), reward, lr_scale, flops
    (generation + training FLOPs), response_length (mean greedy held-out completion, tokens),
    format_rate (greedy held-out completions in the task's format), kl_init (KL to the
    initial policy at the last update before the eval; empty where not measured),
    step_validity_rate and step_count_deviation (trace fidelity of the greedy held-out
    completions, :func:`gradprobe.rewards.process.trace_fidelity`; empty for a task without a
    step verifier). Columns a run of an older version did not record are empty.
    """
    rows = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        status, _ = run_status(folder)
        if status != "done":
            continue
        a = plan.arms[arm]
        for line in (folder / "metrics.jsonl").read_text().splitlines():
            if '"eval": true' not in line:
                continue
            e = json.loads(line)
            rows.append({"arm": arm, "seed": seed, "update": e["update"], "generated_tokens": e["generated_tokens"],
                         "device_seconds": e["device_seconds"], "accuracy": e.get("greedy_accuracy"),
                         "accuracy_sampled": e.get("sampled_accuracy"), "reward": a.reward, "lr_scale": a.lr_scale,
                         "flops": e.get("flops"), "response_length": e.get("response_length"),
                         "format_rate": e.get("format_rate"), "kl_init": e.get("kl_init"),
                         "step_validity_rate": e.get("step_validity_rate"),
                         "step_count_deviation": e.get("step_count_deviation")})
    return rows


def write_eval_items(plan: Plan, out: str | Path) -> int:
    """Rebuild ``out/eval_items.jsonl.gz`` atomically from the finished runs' ``eval_items.jsonl``
    (each line gains ``arm`` and ``seed``; format: :func:`gradprobe.training.metrics.evaluate`).
    Returns the number of lines; writes nothing when no finished run has per-item results."""
    import gzip

    lines = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        path = folder / "eval_items.jsonl"
        if run_status(folder)[0] != "done" or not path.exists():
            continue
        for line in path.read_text().splitlines():
            lines.append(json.dumps({"arm": arm, "seed": seed, **json.loads(line)}))
    if lines:
        _write_bytes_atomic(Path(out) / EVAL_ITEMS_GZ, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return len(lines)


def write_runs_csv(plan: Plan, out: str | Path) -> int:
    """Rebuild ``out/runs.csv`` atomically from the run folders; returns the number of rows."""
    rows = collect_runs(plan, out)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RUNS_CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in RUNS_CSV_COLUMNS})
    _write_bytes_atomic(Path(out) / RUNS_CSV, buf.getvalue().encode())
    return len(rows)


# ----------------------------------------------------------------------------- the study

def run_study(plan_path: str | Path, out: str | Path, *, executor: str = "local", workers: int | None = None,
              ray_address: str | None = None, probe: bool = True, probe_overrides: dict | None = None,
              analyze: bool = True, say=None, restart: bool = False, check: bool = True,
              report_to: str = "none", reuse_from=()) -> StudyResult:
    """Run (or resume) a study: every arm x seed of the plan, the probe, ``runs.csv``, the analysis.

    Parameters
    ----------
    plan_path : path
        Plan TOML; frozen into ``out`` (see :func:`freeze_plan`).
    out : path
        Study folder (format: ``/work/notes/study_format.md``; see the module docstring).
    executor : {"local", "ray", "inline"}
        ``local``: process pool (spawn) of ``workers`` processes; ``ray``: one Ray task per
        run (``ray_address`` or a local ``ray.init()``); ``inline``: serially in this process.
    workers : int, optional
        Parallel runs (default ``min(runs, cpu cores)``); each gets ``max(1, cores // workers)``
        torch threads (Ray: that many ``num_cpus``).
    probe : bool
        Run the probe of every arm's reward on the initial policy (skipped if ``probe.json`` exists).
    probe_overrides : dict, optional
        :class:`~gradprobe.probe.run.ProbeConfig` fields over the plan's ``[probe]`` table.
    analyze : bool
        Write ``analysis.json`` and the figures when at least one run is complete.
    say : callable(str), optional
        Progress messages (default: stderr), one line per finished run with :func:`progress_line`.
    restart : bool
        Replace the frozen plan of a study of which no run has finished (see :func:`freeze_plan`).
    check : bool
        Check the plan's model, tokenizer and task first
        (:func:`gradprobe.study.preflight.check_plan_inputs`).
    report_to : {"none", "tensorboard", "trackio", "wandb"}
        Every run also logs its metrics there (:mod:`gradprobe.tracking`; TensorBoard and W&B files
        in ``out/tb/<arm>/seed<N>``); a tracker that is not installed fails first
        (:class:`~gradprobe.tracking.TrackerUnavailableError`, a ValueError).
    reuse_from : sequence of path
        Other study folders whose finished runs this plan would train identically (same resolved
        configuration and versions) are copied instead of trained
        (:func:`gradprobe.study.reuse.reuse_runs`; ``study.json`` marks them ``reused_from``).

    Returns
    -------
    StudyResult
        ``ok`` is false when a run or the probe failed (their errors are in ``failed``/``probe``
        and in ``study.json``); finished runs are kept either way.

    Raises
    ------
    PlanError
        Invalid plan (before anything is written or run).
    gradprobe.study.preflight.PreflightError
        The model, its tokenizer or the task cannot be loaded (a :class:`StudyError`; the plan key
        is named; nothing is written).
    PlanChangedError, StudyError
        The folder holds another plan's study (``restart`` refused or not given), or another
        study process is using it.
    OutputDirError
        The folder cannot be written (unwritable, a file in the way, disk full); nothing done is lost.
    StudyInterrupted
        Ctrl-C / SIGINT (a KeyboardInterrupt): no further run was started, running workers were
        stopped, ``study.json`` records it and the lock is released; the same call resumes.
    gradprobe.study.reuse.ReuseError
        A ``reuse_from`` folder is not a study folder or holds an unreadable run record (a ValueError).
    ValueError
        Unknown executor or workers < 1.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    from ..tracking import require_tracker

    require_tracker(report_to)  # before anything is written or run
    say = say or (lambda m: print(f"[study] {m}", file=sys.stderr, flush=True))
    plan = load_plan(plan_path)
    if check:
        from .preflight import check_plan_inputs

        check_plan_inputs(plan, executor=executor)
    out = prepare_output_dir(Path(out))
    lock = _FolderLock(out, ".study.lock", wait=False, what="study folder")
    try:
        plan, study = freeze_plan(plan_path, out, restart=restart, say=say)
        if reuse_from:
            from .reuse import reuse_runs

            reuse_runs(plan, out, reuse_from, say=say)
        return _run(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say,
                    report_to)
    except StudyInterrupted:
        raise
    except KeyboardInterrupt:  # outside the runs (setting up, the analysis): nothing was running
        done = sum(run_status(run_dir(out, a, s))[0] == "done" for a, s in plan.runs())
        raise StudyInterrupted(out, done, len(plan.runs()), 0) from None
    finally:
        lock.release()


def progress_line(done: int, failed: int, total: int, elapsed: float, finished_here: int) -> str:
    """``"3/8 runs complete (1 failed), elapsed 2 min 5 s, ETA 3 min 10 s"``: the study's progress.

    Parameters
    ----------
    done, failed, total : int
        Runs complete (this invocation or before), runs that failed in this invocation (not
        retried before the next one), runs in the plan.
    elapsed : float
        Wall-clock seconds since this invocation started its runs.
    finished_here : int
        Runs this invocation finished (complete or failed).

    The ETA is the mean wall time per run finished so far in this invocation times the runs
    left: ``elapsed / finished_here * (total - done - failed)`` (seconds). Measured on the wall
    clock, it already accounts for parallel workers; it is ``?`` before the first run finishes.
    """
    left = max(0, int(total) - int(done) - int(failed))
    if left == 0:
        eta = "0 s"
    elif finished_here > 0:
        eta = _clock(elapsed / finished_here * left)
    else:
        eta = "?"
    fail = f" ({failed} failed)" if failed else ""
    return f"{done}/{total} runs complete{fail}, elapsed {_clock(elapsed)}, ETA {eta}"


def _run(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say,
         report_to="none") -> StudyResult:
    invocation = Invocation(out)
    for entry in invocation.begin(study):
        say(f"an earlier invocation (pid {entry.get('pid')}, started {entry.get('started')}) ended without "
            f"recording it (killed); its {_clock(float(entry.get('seconds') or 0.0))} up to its last heartbeat "
            f"({entry.get('last_seen')}) count in the study's wall time")
    _save_study(out, study, say, invocation)  # lists this invocation before its first heartbeat
    invocation.start()
    try:
        result = _run_tasks(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say,
                            invocation, report_to)
    except BaseException as e:
        invocation.end(study, "interrupted" if isinstance(e, KeyboardInterrupt) else f"error: {type(e).__name__}")
        if _save_study(out, study, say):
            invocation.clear()
        raise
    result.wall_seconds = invocation.end(study, "normally")
    result.total_wall_seconds = float(study["wall_seconds"])
    _save_study(out, study, say, strict=True)
    invocation.clear()
    return result


def _run_tasks(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say,
               invocation, report_to="none") -> StudyResult:
    result = StudyResult(out=out, plan_sha256=plan.sha256)
    frozen = str(out / PLAN_COPY)
    entries = {(r["arm"], r["seed"]): r for r in study.get("runs", [])}
    tasks = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        status, summary = run_status(folder)
        entry = entries.setdefault((arm, seed), {"arm": arm, "seed": seed, "dir": str(folder.relative_to(out))})
        if status == "done":
            from .reuse import reused_source

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
    probe_dir = out / "probe"
    _write_json_mkdir(probe_dir / "arms.json", arms_table(plan, probe_overrides))
    if not probe:
        result.probe = "off"
    elif (probe_dir / "probe.json").exists():
        result.probe = "skipped"
    else:
        from ..probe.run import ProbeConfig

        try:  # a bad [probe] key or value fails here, before any run
            ProbeConfig(**probe_settings(plan, probe_overrides))
        except (TypeError, ValueError) as e:
            raise PlanError(f"[probe]: {e}") from None
        tasks.insert(0, {"kind": "probe", "plan": frozen, "out": str(probe_dir),
                         "settings": dict(probe_overrides or {})})
    study["runs"] = [entries[r] for r in plan.runs()]
    _save_study(out, study, say, invocation)
    n_runs = sum(t["kind"] == "train" for t in tasks)
    total = len(plan.runs())
    if result.skipped:
        say(f"{len(result.skipped)} of {total} runs already complete; not redone")
    if tasks:
        n_workers = workers or default_workers(max(1, n_runs))
        threads = max(1, (os.cpu_count() or 1) // n_workers)
        say(f"{n_runs} runs to do{' + the probe' if len(tasks) > n_runs else ''} on executor {executor} "
            f"({n_workers} workers x {threads} threads)" if executor != "inline" else f"{len(tasks)} tasks inline")
        stopped: list[int] = []
        if executor == "local":
            results = _iter_local(tasks, n_workers, threads, say=say, stopped=stopped)
        elif executor == "ray":
            results = _iter_ray(tasks, threads, ray_address)
        else:
            results = _iter_inline(tasks)
        started, finished_here = time.perf_counter(), 0
        try:
            for res in results:
                if res["kind"] == "probe":
                    result.probe = "done" if res["status"] == "done" else f"failed: {res.get('error')}"
                    study["probe"] = {k: res.get(k) for k in ("status", "error", "seconds")}
                    say(f"probe {result.probe}")
                else:
                    key = (res["arm"], res["seed"])
                    entry = entries[key]
                    finished_here += 1
                    entry.update({k: res.get(k) for k in ("status", "error", "updates", "final_accuracy", "seconds",
                                                          "failed_update", "traceback") if res.get(k) is not None})
                    if res["status"] == "done":
                        for k in ("error", "failed_update", "traceback"):
                            entry.pop(k, None)
                        result.done.append(key)
                        what = (f"done: {res.get('updates')} updates, final greedy accuracy "
                                f"{res.get('final_accuracy')} ({res.get('seconds', 0):.0f} s)")
                    else:
                        result.failed[key] = res.get("error")
                        what = f"FAILED: {res.get('error')}"
                    say(f"run {key[0]} seed {key[1]} {what}; " + progress_line(
                        len(result.done), len(result.failed), total, time.perf_counter() - started, finished_here))
                    try:
                        write_runs_csv(plan, out)
                    except OutputDirError as e:
                        say(f"could not update runs.csv: {e}")
                _save_study(out, study, say, invocation)
                invocation.beat()
        except KeyboardInterrupt:
            results.close()  # stops the pool if the interrupt came between two results
            study["interrupted"] = _now()
            raise StudyInterrupted(out, len(result.done), total, sum(stopped)) from None
    write_runs_csv(plan, out)
    write_eval_items(plan, out)
    study["finished"] = _now() if not result.failed else None
    _save_study(out, study, say, invocation, strict=True)  # the runs' record first: the analysis may fail
    if analyze and result.done:
        from .analysis import analyze as run_analysis

        try:
            run_analysis(out, write=True, figures=True)
        except Exception as e:  # the runs are kept; the analysis can be rerun with --analyze-only
            result.analysis_error = f"{type(e).__name__}: {e}"
    return result


def _write_json_mkdir(path: Path, data: dict) -> None:
    """:func:`write_json_atomic` after creating the parent folder (errors as :class:`OutputDirError`)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error("creating", path.parent, e) from e
    write_json_atomic(path, data)


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


# ----------------------------------------------------------------------------- replication

REPLICATE_SOURCE = "replicate_of.json"


def replicate_plan_text(text: str, *, seeds, heldout_seed: int, source: str, source_sha256: str) -> str:
    """The TOML text of a replicate: ``text`` with its ``seeds`` and ``[heldout] seed`` replaced.

    Edited with tomlkit (a style-preserving TOML parser), so everything else of the plan is kept
    byte for byte: comments (a comment on the ``seeds`` or ``[heldout] seed`` line stays on its
    line), key order, blank lines. ``seeds`` may span several lines (it is rewritten on one,
    keeping the comment after its closing bracket; comments between the old seeds go with them);
    a plan without ``seeds`` gains it at the top level, one without ``[heldout] seed`` gains it.

    Parameters
    ----------
    text : str
        The original study's frozen ``plan.toml``.
    seeds : sequence of int
        The replicate's seeds.
    heldout_seed : int
        The replicate's data seed (held-out set and training pool).
    source, source_sha256 : str
        The original study folder and its plan's sha256 (written as a header comment).

    Raises
    ------
    StudyError
        ``text`` is not valid TOML, or its ``heldout`` is not a table.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as e:
        raise StudyError(f"the frozen plan is not valid TOML ({e}); the replicate cannot be written") from None
    new_seeds = tomlkit.array()
    new_seeds.extend(int(s) for s in seeds)
    doc["seeds"] = new_seeds  # tomlkit keeps the old value's end-of-line comment (and adds the key if missing)
    if "heldout" not in doc:
        heldout = tomlkit.table()
        heldout.add("seed", int(heldout_seed))
        doc.add(tomlkit.nl())
        doc.add("heldout", heldout)
    else:
        heldout = doc["heldout"]
        if not isinstance(heldout, dict):
            raise StudyError("the frozen plan's heldout is not a table; the replicate cannot be written")
        heldout["seed"] = int(heldout_seed)
    head = (f"# Replicate of the study in {source} (plan sha256 {source_sha256}): the same plan on fresh seeds\n"
            f"# {list(seeds)} and a fresh held-out set (data seed {int(heldout_seed)}); written by gradprobe study --replicate.\n")
    return head + tomlkit.dumps(doc)


def replicate_study(source: str | Path, out: str | Path, *, plan: Plan, executor: str = "local",
                    workers: int | None = None, ray_address: str | None = None, probe: bool = True,
                    analyze: bool = True, say=None, report_to: str = "none") -> StudyResult:
    """Run a replicate of the finished study ``source`` in ``out`` (``gradprobe study --replicate``).

    The replicate's plan is the source's frozen ``plan.toml`` with the seeds and held-out seed of
    ``plan`` (:func:`gradprobe.training.plan.replicate_plan`); it is frozen in ``out`` like any plan
    (a killed replicate resumes), ``out/replicate_of.json`` records the source, and at the end
    :func:`compare_replicate` prints each arm's gain vs grpo at matched tokens in both studies.

    Raises
    ------
    StudyError
        The generated plan does not read back as ``plan`` (seeds or held-out seed differ).
    gradprobe.study.preflight.PreflightError
        The plan's model, tokenizer or task cannot be loaded (nothing is written into ``out``).
    """
    import tempfile

    source, out = Path(source), Path(out)
    text = (source / PLAN_COPY).read_text()
    src_sha = _sha256((source / PLAN_COPY).read_bytes())
    rep_text = replicate_plan_text(text, seeds=plan.seeds, heldout_seed=plan.heldout.seed, source=str(source),
                                   source_sha256=src_sha)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{plan.name}.toml"
        path.write_text(rep_text)
        check = load_plan(path)
        if check.seeds != plan.seeds or check.heldout.seed != plan.heldout.seed:
            raise StudyError(f"the replicate plan written from {source / PLAN_COPY} reads back with seeds "
                             f"{list(check.seeds)} and held-out seed {check.heldout.seed}, expected "
                             f"{list(plan.seeds)} and {plan.heldout.seed}")
        from .preflight import check_plan_inputs

        check_plan_inputs(check, executor=executor)  # before anything is written into out
        prepare_output_dir(out)
        write_json_atomic(out / REPLICATE_SOURCE, {"source": str(source.resolve()), "source_plan_sha256": src_sha,
                                                   "seeds": list(plan.seeds), "heldout_seed": plan.heldout.seed})
        result = run_study(path, out, executor=executor, workers=workers, ray_address=ray_address, probe=probe,
                           analyze=analyze, say=say, check=False, report_to=report_to)
    if analyze and (out / "analysis.json").exists() and (source / "analysis.json").exists():
        (say or (lambda m: print(m, file=sys.stderr)))(compare_replicate(source, out))
    return result


def compare_replicate(original: str | Path, replicate: str | Path, *, axis: str = "generated_tokens") -> str:
    """A table of each arm's gain vs grpo (points, t interval over seeds) in the original study and
    its replicate at matched ``axis``, and whether the replicate's estimate falls inside the
    original's interval. Reads both ``analysis.json`` files (old ones keyed ``tokens`` too)."""
    def gains(folder: Path) -> dict:
        a = json.loads((Path(folder) / "analysis.json").read_text())
        out = {}
        for arm, entry in (a.get("arms") or {}).items():
            block = entry.get(axis) or (entry.get("tokens") if axis == "generated_tokens" else None) or {}
            if block.get("gain_vs_grpo") is not None:
                out[arm] = (block["gain_vs_grpo"], block.get("gain_ci"))
        return out

    def fmt(g) -> str:
        if g is None:
            return "n/a"
        est, ci = g
        return f"{est:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")

    a, b = gains(original), gains(replicate)
    lines = [f"replication at matched {axis} (gain vs grpo, points, 95% t interval over seeds):",
             f"  {'arm':<14} {'original':<24} {'replicate':<24} replicate inside original's interval"]
    for arm in [x for x in a if x != "grpo"] + [x for x in b if x not in a and x != "grpo"]:
        inside = "n/a"
        if arm in a and arm in b and a[arm][1]:
            inside = "yes" if a[arm][1][0] <= b[arm][0] <= a[arm][1][1] else "no"
        lines.append(f"  {arm:<14} {fmt(a.get(arm)):<24} {fmt(b.get(arm)):<24} {inside}")
    return "\n".join(lines)
