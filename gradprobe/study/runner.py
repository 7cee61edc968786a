"""Run a preregistered matched-compute study: every arm x seed of a frozen plan, then the probe.

``run_study(plan, out)`` (``gradprobe study PLAN --out DIR``), DESIGN.md "Matched-compute training":

1. the plan is validated (:func:`gradprobe.training.plan.load_plan`: unknown keys, arms, rewards,
   a budget smaller than one update all fail here, before anything is written);
2. it is frozen: copied byte for byte to ``DIR/plan.toml`` and its sha256 recorded in
   ``DIR/study.json``. A study folder whose frozen plan has another sha256 is refused
   (:class:`PlanChangedError` names both hashes; the fix is a new ``--out``);
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

A failed run (NaN loss, a crash, a write error) is recorded in ``study.json`` with its error,
its folder is kept, the other runs continue, and :class:`StudyResult` reports it (the command
exits non-zero). Concurrency safety: the study folder is locked (``fcntl.flock``) against a
second study process, each run folder is locked by the worker running it, and pool workers exit
when the study process dies, so a restarted study never writes a run folder at the same time as
an orphan of the killed one.
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

from ..training.checkpoint import OutputDirError, output_error, prepare_output_dir, write_json_atomic
from ..training.plan import Plan, PlanError, load_plan

EXECUTORS = ("local", "ray", "inline")
PLAN_COPY = "plan.toml"
STUDY_JSON = "study.json"
RUNS_CSV = "runs.csv"
RUNS_CSV_COLUMNS = ("arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled",
                    "reward", "lr_scale")
# probe settings when the plan has no [probe] table: ProbeConfig defaults scaled for a study
PROBE_DEFAULTS = {"prompts": 16, "group": 8, "heldout_prompts": 16, "heldout_group": 16}


class StudyError(RuntimeError):
    """A study folder cannot be used as asked (another study holds it, a frozen plan was edited)."""


class PlanChangedError(StudyError):
    """The study folder was made with a plan of another sha256."""


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


def _versions() -> dict:
    try:
        from ..probe.run import versions

        return versions()
    except Exception as e:  # versions are informative; never block a study on them
        return {"error": repr(e)}


def freeze_plan(plan_path: str | Path, out: str | Path) -> tuple[Plan, dict]:
    """Validate ``plan_path``, then copy it to ``out/plan.toml`` and record it in ``out/study.json``.

    Parameters
    ----------
    plan_path : path
        The plan TOML (validated with :func:`~gradprobe.training.plan.load_plan`).
    out : path
        The study folder (created and checked writable before anything else is written).

    Returns
    -------
    (Plan, dict)
        The plan loaded from the FROZEN copy (every run reads that file) and ``study.json``'s content.

    Raises
    ------
    PlanError
        The plan is invalid (nothing is written).
    PlanChangedError
        ``out`` holds a study of a plan with another sha256 (both hashes named; fix: a new ``--out``).
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
            raise PlanChangedError(
                f"study folder {str(out)!r} was started with a plan of sha256 {old}, but {str(plan_path)!r} has "
                f"sha256 {plan.sha256}: a study's plan is frozen before its first run and cannot change. Run the "
                f"changed plan with a new --out (or restore the original plan, {out / PLAN_COPY}, to resume this study)")
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


def _new_study_json(plan: Plan, plan_path) -> dict:
    return {"plan_sha256": plan.sha256, "plan_path": str(Path(plan_path).resolve()), "created": _now(),
            "versions": _versions(),
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
    return settings


def arms_table(plan: Plan) -> dict:
    """``arms.json``: arm -> {"reward", "lr_scale"} (plus the arm's description)."""
    return {name: {"reward": a.reward, "lr_scale": a.lr_scale, "description": a.description}
            for name, a in plan.arms.items()}


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
    import torch

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
        import fcntl

        if not self.f.closed:
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
            res.update(_train(plan, task["arm"], int(task["seed"]), out, task.get("log", True)))
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


def _train(plan: Plan, arm: str, seed: int, out: Path, log: bool) -> dict:
    import contextlib

    from ..training.run import run_training

    run = plan.arm(arm, seed=seed)
    stream = open(out / "train.log", "a") if log else contextlib.nullcontext(None)
    with stream as f:
        ctx = contextlib.redirect_stderr(f) if f is not None else contextlib.nullcontext()
        with ctx:
            summary = run_training(run, out, progress=f is not None)
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


def _iter_local(tasks: list[dict], workers: int, threads: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(threads, os.getpid())) as pool:
        futures = {pool.submit(execute_task, t): t for t in tasks}
        for fut in as_completed(futures):
            t = futures[fut]
            try:
                yield fut.result()
            except BrokenProcessPool as e:
                yield {**{k: t.get(k) for k in ("kind", "arm", "seed")}, "status": "failed",
                       "error": f"the worker process died ({e}); e.g. out of memory: use fewer --workers"}
            except Exception as e:  # pickling errors and the like
                yield {**{k: t.get(k) for k in ("kind", "arm", "seed")}, "status": "failed",
                       "error": f"{type(e).__name__}: {e}"}


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
    finally:
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
    accuracy_sampled, reward, lr_scale.
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
                         "accuracy_sampled": e.get("sampled_accuracy"), "reward": a.reward, "lr_scale": a.lr_scale})
    return rows


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
              analyze: bool = True, say=None) -> StudyResult:
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
        Progress messages (default: stderr).

    Returns
    -------
    StudyResult
        ``ok`` is false when a run or the probe failed (their errors are in ``failed``/``probe``
        and in ``study.json``); finished runs are kept either way.

    Raises
    ------
    PlanError
        Invalid plan (before anything is written or run).
    PlanChangedError, StudyError
        The folder holds another plan's study, or another study process is using it.
    OutputDirError
        The folder cannot be written (unwritable, a file in the way, disk full); nothing done is lost.
    ValueError
        Unknown executor or workers < 1.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    say = say or (lambda m: print(f"[study] {m}", file=sys.stderr, flush=True))
    plan, study = freeze_plan(plan_path, out)
    out = Path(out)
    lock = _FolderLock(out, ".study.lock", wait=False, what="study folder")
    try:
        return _run(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say)
    finally:
        lock.release()


def _run(plan, study, out, executor, workers, ray_address, probe, probe_overrides, analyze, say) -> StudyResult:
    start = time.perf_counter()
    result = StudyResult(out=out, plan_sha256=plan.sha256)
    frozen = str(out / PLAN_COPY)
    entries = {(r["arm"], r["seed"]): r for r in study.get("runs", [])}
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
            continue
        entry.update(status="resuming" if status in ("partial", "failed") else "pending")
        tasks.append({"kind": "train", "plan": frozen, "arm": arm, "seed": seed, "out": str(folder)})
    probe_dir = out / "probe"
    _write_json_mkdir(probe_dir / "arms.json", arms_table(plan))
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
    _save_study(out, study, say)
    n_runs = sum(t["kind"] == "train" for t in tasks)
    if result.skipped:
        say(f"{len(result.skipped)} of {len(plan.runs())} runs already complete; not redone")
    if tasks:
        n_workers = workers or default_workers(max(1, n_runs))
        threads = max(1, (os.cpu_count() or 1) // n_workers)
        say(f"{n_runs} runs to do{' + the probe' if len(tasks) > n_runs else ''} on executor {executor} "
            f"({n_workers} workers x {threads} threads)" if executor != "inline" else f"{len(tasks)} tasks inline")
        if executor == "local":
            results = _iter_local(tasks, n_workers, threads)
        elif executor == "ray":
            results = _iter_ray(tasks, threads, ray_address)
        else:
            results = _iter_inline(tasks)
        for res in results:
            if res["kind"] == "probe":
                result.probe = "done" if res["status"] == "done" else f"failed: {res.get('error')}"
                study["probe"] = {k: res.get(k) for k in ("status", "error", "seconds")}
                say(f"probe {result.probe}")
            else:
                key = (res["arm"], res["seed"])
                entry = entries[key]
                entry.update({k: res.get(k) for k in ("status", "error", "updates", "final_accuracy", "seconds",
                                                      "failed_update", "traceback") if res.get(k) is not None})
                if res["status"] == "done":
                    for k in ("error", "failed_update", "traceback"):
                        entry.pop(k, None)
                    result.done.append(key)
                    say(f"run {key[0]} seed {key[1]} done: {res.get('updates')} updates, final greedy accuracy "
                        f"{res.get('final_accuracy')} ({res.get('seconds', 0):.0f} s)")
                else:
                    result.failed[key] = res.get("error")
                    say(f"run {key[0]} seed {key[1]} FAILED: {res.get('error')}")
                try:
                    write_runs_csv(plan, out)
                except OutputDirError as e:
                    say(f"could not update runs.csv: {e}")
            _save_study(out, study, say)
    write_runs_csv(plan, out)
    study["finished"] = _now() if not result.failed else None
    _save_study(out, study, say, strict=True)  # the runs' record first: the analysis may fail
    if analyze and result.done:
        from .analysis import analyze as run_analysis

        try:
            run_analysis(out, write=True, figures=True)
        except Exception as e:  # the runs are kept; the analysis can be rerun with --analyze-only
            result.analysis_error = f"{type(e).__name__}: {e}"
    result.wall_seconds = time.perf_counter() - start
    result.total_wall_seconds = float(study.get("wall_seconds", 0.0)) + result.wall_seconds
    study["wall_seconds"] = result.total_wall_seconds
    _save_study(out, study, say, strict=True)
    return result


def _write_json_mkdir(path: Path, data: dict) -> None:
    """:func:`write_json_atomic` after creating the parent folder (errors as :class:`OutputDirError`)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error("creating", path.parent, e) from e
    write_json_atomic(path, data)


def _save_study(out: Path, study: dict, say, strict: bool = False) -> None:
    try:
        write_json_atomic(out / STUDY_JSON, study)
    except OutputDirError as e:
        if strict:
            raise
        say(f"could not update study.json (the runs' own folders are intact): {e}")
