"""The progress of ``rank-prompts`` and ``difficulty-eval`` building their pool (the task builds it in one call):
:func:`pool_problems` shows a bar with the total, rate and ETA where the task reports its progress through the public
hook of :class:`gradprobe.tasks.base.Task` (``progress_unit``, ``report_progress``) and the pool's size is known, and
:func:`building`, the elapsed seconds only, where not. Imports tqdm only when shown; no torch, pandas or scipy."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

__all__ = ["building", "pool_problems"]


@contextlib.contextmanager
def building(desc: str, progress: bool) -> Iterator[None]:
    """A tqdm line on stderr counting the seconds of its body (``desc: 12s``), refreshed every second by a daemon
    thread, for a step that cannot report its progress (a task builds its pool in one call); nothing when not
    ``progress``. The thread stops and the line is cleared when the body ends, an exception (Ctrl-C) included."""
    if not progress:
        yield
        return
    with _elapsed_bar(desc):
        yield


@contextlib.contextmanager
def _elapsed_bar(desc: str):
    """:func:`building`'s line, yielded: a tqdm bar of total None showing ``desc: {elapsed}``, refreshed every second
    by a daemon thread, closed (the thread stopped first) when the body ends."""
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False)
    stop = threading.Event()

    def tick():
        while not stop.wait(1.0):
            bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield bar
    finally:
        stop.set()
        thread.join()
        bar.close()


def pool_problems(task, n: int, *, seed: int, desc: str, progress: bool) -> list:
    """``task.problems("train", n, seed=seed)``, its progress shown on stderr (tqdm) when ``progress``.

    The task reports its progress through its public hook (:attr:`gradprobe.tasks.base.Task.progress_unit`,
    :meth:`~gradprobe.tasks.base.Task.report_progress`), which this sets for the call (``task.on_progress``, on the
    task itself or, inside a wrapper such as few-shot prompts, on the wrapped task) and removes after:

    * unit ``"prompt"`` (a reasoning-gym task, :class:`gradprobe.tasks.reasoning_gym.ReasoningGymTask`, also inside a
      few-shot wrapper): the train pool is exactly ``n`` items; the bar shows done / n, rate and ETA, counting only
      the items of the pool itself: those reported for split ``"train"`` and the data seed ``seed`` (or with no
      split and seed), at most ``n`` of them. A few-shot wrapper (:class:`gradprobe.tasks.fewshot.FewShotTask`) makes
      its K + 8 example candidates with :data:`~gradprobe.tasks.fewshot.FEWSHOT_SEED`, so they are not counted (and
      were the data seed that very seed, the cap at ``n`` still ends the bar at ``(n, n)``);
    * unit ``"line"`` (a JSONL data task, :class:`gradprobe.tasks.dataset.DatasetTask` ``kind="jsonl"``, or local
      GSM8K): the total is the lines of the files read (:func:`gradprobe.tasks.base.file_lines`, counted before the
      parse: cheap next to it), the lines counted as they are parsed; a file already read by this task is not read
      again (the bar then stays at 0);
    * unit ``"row"`` (a hub dataset, ``hf:NAME``, or GSM8K's hub copy): the elapsed seconds until the loaded split
      tells its length (``len(ds)``), then done / total, rate and ETA over its rows as they are parsed; a split
      without a length (a streamed dataset) keeps the elapsed seconds.

    Elsewhere (a task with no ``progress_unit``: a plug-in task that does not report) the line shows the elapsed
    seconds only (:func:`building`).

    Parameters
    ----------
    task : gradprobe.tasks.base.Task
    n : int
        N, pool prompts.
    seed : int
        The data seed.
    desc : str
        The bar's label.
    progress : bool
        False: nothing is shown (``--no-progress``, which also sets tqdm's ``TQDM_DISABLE``).

    Returns
    -------
    list of Problem
        What ``task.problems`` returns; its errors propagate (the bar is closed first).
    """
    reporter = _reporter(task) if progress else None
    if reporter is None:
        with building(desc, progress):
            return task.problems("train", n, seed=seed)
    unit = reporter.progress_unit
    if unit == "row":
        with _elapsed_bar(desc) as bar:
            with _listening(reporter, _hook(bar, unit, seed)):
                return task.problems("train", n, seed=seed)
    from tqdm.auto import tqdm

    bar = tqdm(total=n if unit == "prompt" else None, desc=desc, unit=unit, leave=False)
    try:
        with _listening(reporter, _hook(bar, unit, seed)):
            return task.problems("train", n, seed=seed)
    finally:
        bar.close()


def _reporter(task):
    """The task that reports the building of ``task``'s pool (its ``progress_unit`` one of
    :data:`~gradprobe.tasks.base.PROGRESS_UNITS`): ``task`` itself, or the task a wrapper holds as ``task.task``
    (few-shot prompts: the wrapper builds its wrapped task's pool, one problem each); None when none reports."""
    from ..tasks.base import PROGRESS_UNITS

    for _ in range(8):
        if getattr(task, "progress_unit", None) in PROGRESS_UNITS:
            return task
        task = getattr(task, "task", None)
        if task is None:
            return None
    return None


def _hook(bar, unit: str, pool_seed: int):
    """The ``on_progress`` hook of a pool of data seed ``pool_seed`` (:func:`pool_problems`): reports of another split
    or seed are not the pool's; ``total`` adds to a ``line`` or ``row`` bar's total (a ``row`` bar turns from the
    elapsed seconds to done / total at its first); ``done`` advances the bar, at most to its total where known (a
    ``prompt`` bar's n, a ``line`` or ``row`` bar's totals so far), so a bar never shows past 100%. The arguments
    were checked by :meth:`gradprobe.tasks.base.Task.report_progress` (whole numbers >= 0)."""
    def on_progress(done: int = 0, total=None, split=None, seed=None):
        if split not in (None, "train") or seed not in (None, pool_seed):
            return
        if total is not None and unit != "prompt":
            with bar.get_lock():  # the elapsed line's thread refreshes it too
                if unit == "row" and getattr(bar, "bar_format", None) is not None:  # a disabled bar has none
                    bar.bar_format, bar.unit = None, "row"
                bar.total = (bar.total or 0) + total
                bar.refresh()
        if bar.total is not None:
            done = min(done, bar.total - bar.n)
        if done > 0:
            bar.update(done)
    return on_progress


@contextlib.contextmanager
def _listening(task, hook) -> Iterator[None]:
    """``task.on_progress`` is ``hook`` while the body runs, and what it was after (an instance attribute only: the
    class is not touched)."""
    own = task.__dict__.get("on_progress", _UNSET)
    task.on_progress = hook
    try:
        yield
    finally:
        if own is _UNSET:
            task.__dict__.pop("on_progress", None)
        else:
            task.on_progress = own


_UNSET = object()
