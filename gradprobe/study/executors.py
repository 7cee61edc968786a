"""Where a study's tasks run: the executors, one generator each of task results as they finish.

:data:`EXECUTORS` maps ``gradprobe study --executor NAME`` to its generator; every one takes the same
arguments (:func:`run_tasks`) and yields :func:`gradprobe.study.worker.execute_task`'s reports, a
failure of the machinery itself (a dead worker, a failed Ray task) reported the same way:

- ``local``: a ``spawn`` process pool of ``workers`` processes, each with ``threads`` torch threads;
  SIGINT reaches only the study process, which stops the pool (:func:`_stop_pool`);
- ``ray``: one Ray task per run with ``num_cpus = threads`` (Ray, an optional dependency, is imported
  only when this executor runs); on a multi-machine cluster the study folder must be on a file system
  every node mounts at the same path;
- ``inline``: serially in this process (debugging and tests).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from .folder import StudyError
from .worker import execute_task, worker_init

__all__ = ["EXECUTORS", "RAY_MISSING", "STOP_GRACE_SECONDS", "POLL_SECONDS", "default_workers", "run_tasks",
           "usable_cores", "worker_threads"]

#: seconds a stopped worker gets to exit after SIGTERM before it is killed (SIGKILL)
STOP_GRACE_SECONDS = 20.0

#: seconds between two wake-ups of the study process while it waits for runs (so that a Ctrl-C delivered
#: to another thread is seen within this time)
POLL_SECONDS = 0.5

#: the refusal of ``--executor ray`` where Ray cannot be imported: gradprobe's ``ray`` extra installs it
RAY_MISSING = ("--executor ray needs Ray: pip install 'ray[default]', or gradprobe's extra that installs it, "
               "pip install 'gradprobe[ray]' (or use --executor local)")


def usable_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``: a container's or ``taskset``'s limit, where
    ``os.cpu_count`` gives the machine's), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def default_workers(n_tasks: int) -> int:
    """min(tasks, usable CPU cores (:func:`usable_cores`)), at least 1."""
    return max(1, min(int(n_tasks), usable_cores()))


def worker_threads(n_workers: int, environ=None, *, cluster: bool = False) -> tuple[int, str]:
    """``(threads, why)``: the torch threads each of ``n_workers`` workers gets, and where that number came from.

    ``OMP_NUM_THREADS`` set to a whole number of at least 1 is kept (``why`` ``"OMP_NUM_THREADS"``): a user who
    set it, as torch's own setting, was overridden before. It is capped at the usable cores (``why`` then says
    so): Ray gives each run that many ``num_cpus``, and a local ``ray.init()`` would wait forever for a task that
    asks for more CPUs than it has. Otherwise the usable cores are shared, ``max(1, cores // n_workers)``
    (``why`` ``"cores // workers"``). A value torch would not read as one number (``"4,2"``, ``"x"``) is ignored
    here too. ``environ``: the environment (default ``os.environ``). ``cluster``: the runs go to a Ray cluster
    (``--ray-address`` or ``RAY_ADDRESS``), whose nodes' cores this machine cannot count: ``OMP_NUM_THREADS`` is
    kept uncapped."""
    env = os.environ if environ is None else environ
    value = str(env.get("OMP_NUM_THREADS", "")).strip()
    cores = usable_cores()
    if value.isdigit() and int(value) >= 1:
        if int(value) > cores and not cluster:
            return cores, f"OMP_NUM_THREADS={int(value)} capped at the {cores} usable cores"
        return int(value), "OMP_NUM_THREADS"
    return max(1, cores // max(1, int(n_workers))), "cores // workers"


def _failed(task: dict, error: str) -> dict:
    """The report of a task the executor itself could not run (same keys as :func:`execute_task`'s)."""
    return {**{k: task.get(k) for k in ("kind", "arm", "seed")}, "status": "failed", "error": error}


def _stop_pool(pool, say=None, grace: float = STOP_GRACE_SECONDS, unfinished: int | None = None) -> int:
    """Stop a process pool now: cancel queued tasks, SIGTERM the workers, SIGKILL after ``grace`` s.

    SIGINT is ignored meanwhile (a second Ctrl-C cannot leave workers behind). Returns the number
    of worker processes that were alive, idle or running a task (a pool keeps a worker whose task
    finished while no task is left for it). ``unfinished``: the tasks submitted and not finished;
    ``say``'s line then says how many workers were running one, ``min(alive workers, unfinished)``
    (the pool hands a task to a worker as soon as one is free).
    """
    main = threading.current_thread() is threading.main_thread()  # signal.signal works only there
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        procs = [p for p in list((getattr(pool, "_processes", None) or {}).values()) if p.is_alive()]
        if say is not None:
            busy = ("idle or running a run or the probe" if unfinished is None else
                    f"{min(len(procs), int(unfinished))} of them running a run or the probe")
            say(f"interrupted: starting no further run; stopping {len(procs)} worker process(es) ({busy})")
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


def _iter_local(tasks: list[dict], *, workers: int, threads: int, say=None, stopped: list | None = None, tick=None,
                **_):
    """Results of ``tasks`` from a spawn process pool, as they finish; ``tick()`` (when given) is called after each
    wait of up to :data:`POLL_SECONDS` for one (the study's look at its running runs, between two results).

    Workers are spawned with SIGINT ignored and blocked (the disposition survives ``exec``, and
    Python installs no KeyboardInterrupt handler for an ignored SIGINT), so a terminal's Ctrl-C
    reaches only this process: a pending one is delivered here once the pool is up. When the
    generator does not run to its end (KeyboardInterrupt, ``close()``), :func:`_stop_pool` stops
    the pool and appends the number of stopped workers to ``stopped``.
    """
    ctx = multiprocessing.get_context("spawn")
    pool, finished, futures = None, False, {}
    main = threading.current_thread() is threading.main_thread()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        try:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init,
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
            if tick is not None:
                tick()
            for fut in done:
                try:
                    yield fut.result()
                except BrokenProcessPool as e:
                    yield _failed(futures[fut], f"the worker process died ({e}); e.g. out of memory: use fewer "
                                                f"--workers")
                except Exception as e:  # pickling errors and the like
                    yield _failed(futures[fut], f"{type(e).__name__}: {e}")
        finished = True
    finally:
        if pool is not None:
            if finished:
                pool.shutdown(wait=True)
            else:
                n = _stop_pool(pool, say, unfinished=sum(not f.done() for f in futures))
                if stopped is not None:
                    stopped.append(n)


def _ray_execute(task: dict, threads: int) -> dict:
    """A Ray task: :func:`execute_task` in a worker set up with ``threads`` torch threads."""
    worker_init(threads, None)
    return execute_task(task)


def _iter_ray(tasks: list[dict], *, threads: int, ray_address: str | None = None, tick=None, **_):
    """Results of ``tasks`` as Ray tasks (``num_cpus = threads``) finish, on ``ray_address`` or a local
    ``ray.init()``; when not run to its end, the unfinished tasks are cancelled (forced). ``tick()`` (when given) is
    called after each wait of up to :data:`POLL_SECONDS` for one, as the local pool does: the runs write into the
    study folder, which this process reads (a local ``ray.init()`` runs them on this machine; a multi-machine
    cluster needs the folder mounted at the same path on every node, this one included), so the study looks at its
    running runs under Ray too (a network file system may show a run's writes a few seconds late).

    Raises
    ------
    StudyError
        Ray is not installed (:data:`RAY_MISSING`: the fix, ``pip install 'gradprobe[ray]'`` or ``--executor local``).
    """
    try:
        import ray  # optional dependency: only this executor needs it
    except ImportError as e:
        raise StudyError(RAY_MISSING) from e
    started = False
    if not ray.is_initialized():
        ray.init(address=ray_address) if ray_address else ray.init()
        started = True
    pending, finished = [], False
    try:
        remote = ray.remote(num_cpus=threads, max_retries=0)(_ray_execute)
        refs = {remote.remote(t, threads): t for t in tasks}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_SECONDS)
            if tick is not None:
                tick()
            if not ready:
                continue
            try:
                yield ray.get(ready[0])
            except Exception as e:  # RayTaskError, WorkerCrashedError
                yield _failed(refs[ready[0]], f"Ray task failed: {type(e).__name__}: {e}")
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


def _iter_inline(tasks: list[dict], **_):
    """Results of ``tasks`` run one after the other in this process."""
    for t in tasks:
        yield execute_task(t)


#: ``--executor`` name -> generator of task results (:func:`run_tasks`'s arguments)
EXECUTORS = {"local": _iter_local, "ray": _iter_ray, "inline": _iter_inline}


def run_tasks(executor: str, tasks: list[dict], *, workers: int, threads: int, ray_address: str | None = None,
              say=None, stopped: list | None = None, tick=None):
    """A generator of the reports of ``tasks`` (:func:`execute_task`'s) from ``executor``, as they finish.

    Parameters
    ----------
    executor : {"local", "ray", "inline"}
        A key of :data:`EXECUTORS`.
    tasks : list[dict]
        :func:`execute_task`'s tasks.
    workers, threads : int
        Parallel workers (``local``) and torch threads (or Ray ``num_cpus``) per worker.
    ray_address : str, optional
        The Ray cluster (``ray``; default: a local ``ray.init()``).
    say : callable(str), optional
        Progress messages (``local``: the stop of an interrupted pool).
    stopped : list, optional
        ``local``: gains the number of workers stopped when the generator is closed before its end.
    tick : callable(), optional
        ``local`` and ``ray``: called in this process after each wait of up to :data:`POLL_SECONDS` for a result
        while runs are under way (the study's look at its running runs' files in the study folder:
        :class:`gradprobe.study.orchestrator.UntrainedWatch`); ``inline`` does not call it (it runs the runs in this
        process, one after the other: a run's result is the next thing it sees). It should not raise.

    Raises
    ------
    ValueError
        ``executor`` is not a key of :data:`EXECUTORS`.
    StudyError
        ``ray`` without Ray installed (when the generator starts).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not one of {', '.join(EXECUTORS)}")
    return EXECUTORS[executor](tasks, workers=workers, threads=threads, ray_address=ray_address, say=say,
                               stopped=stopped, tick=tick)
