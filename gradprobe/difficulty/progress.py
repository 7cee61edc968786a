"""The progress of ``rank-prompts`` and ``difficulty-eval`` building their pool (the task builds it in one call):
:func:`pool_problems` shows a bar with the total, rate and ETA where the pool's size is known in advance and its items
can be counted as they are made, and :func:`building`, the elapsed seconds only, where not. Imports tqdm only when
shown; no torch, pandas or scipy."""

from __future__ import annotations

import contextlib
import functools
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
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False)
    stop = threading.Event()

    def tick():
        while not stop.wait(1.0):
            bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


def pool_problems(task, n: int, *, seed: int, desc: str, progress: bool) -> list:
    """``task.problems("train", n, seed=seed)``, its progress shown on stderr (tqdm) when ``progress``.

    Where the pool's size is known in advance a bar shows done / total, rate and ETA:

    * a reasoning-gym task (:class:`gradprobe.tasks.reasoning_gym.ReasoningGymTask`, also inside a few-shot wrapper):
      the train pool is exactly ``n`` procedurally generated items, counted as each is made. Counted are only the
      items of the pool itself: a ``_make`` of split ``"train"`` with the data seed ``seed``, at most ``n`` of them.
      A few-shot wrapper (:class:`gradprobe.tasks.fewshot.FewShotTask`) makes its K + 8 example candidates with the
      same ``_make`` but with :data:`~gradprobe.tasks.fewshot.FEWSHOT_SEED`, so they are not counted (and were the
      data seed that very seed, the cap at ``n`` still ends the bar at ``(n, n)``);
    * a JSONL data task (:class:`gradprobe.tasks.dataset.DatasetTask`, ``kind="jsonl"``): the total is the file's
      line count (a byte count of newlines, read before parsing: cheap next to the JSON parse, plus 1 for a last line
      without a final newline, which the parse reads too), the lines counted as they are parsed; a file already read
      by this task is not read again (the bar then stays at 0).

    Elsewhere (a hub dataset, GSM8K, a plug-in task: the size or the progress is not known before the task returns)
    the line shows the elapsed seconds only (:func:`building`).

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
    hooks = _count_hooks(task) if progress else None
    if not hooks:
        with building(desc, progress):
            return task.problems("train", n, seed=seed)
    from tqdm.auto import tqdm

    kind, target = hooks
    bar = tqdm(total=n if kind == "items" else None, desc=desc, unit="prompt" if kind == "items" else "line",
               leave=False)
    try:
        with _counting(target, kind, bar, seed=seed):
            return task.problems("train", n, seed=seed)
    finally:
        bar.close()


def _count_hooks(task):
    """(kind, object) of a task whose pool can be counted as it is built (:func:`pool_problems`), or None."""
    from ..tasks.dataset import DatasetTask
    from ..tasks.reasoning_gym import ReasoningGymTask

    for _ in range(8):  # a wrapper (few-shot prompts) builds its wrapped task's pool, one problem each
        if isinstance(task, (ReasoningGymTask, DatasetTask)) or getattr(task, "task", None) is None:
            break
        task = task.task
    if isinstance(task, ReasoningGymTask):
        return "items", task
    if isinstance(task, DatasetTask) and task.kind == "jsonl":
        return "lines", task
    return None


@contextlib.contextmanager
def _counting(task, kind: str, bar, *, seed: int) -> Iterator[None]:
    """While the body runs, ``bar`` counts the items ``task`` makes (``items``: each :meth:`_make` of a reasoning-gym
    task for the train pool of data seed ``seed``, up to ``bar.total``: not a few-shot wrapper's examples, made with
    another seed) or the lines it parses (``lines``: a JSONL file's total set as it is opened); the task's own methods
    are restored after (instance attributes only: the class is not touched)."""
    own = dict(task.__dict__)
    if kind == "items":
        make = task._make

        @functools.wraps(make)
        def counted_make(*args, **kwargs):
            problem = make(*args, **kwargs)
            split, item_seed = (*args, None, None)[:2]  # _make(split, seed, index, item, rg_seed)
            split, item_seed = kwargs.get("split", split), kwargs.get("seed", item_seed)
            if split == "train" and item_seed == seed and bar.n < bar.total:
                bar.update(1)
            return problem

        task._make = counted_make
    else:
        read, parse = task._read_file, task._parse

        def counted_read(file):
            lines, last = 0, b"\n"
            with open(file, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    lines, last = lines + chunk.count(b"\n"), chunk[-1:]
            lines += last != b"\n"  # a last line without a final newline (the parse reads it as a row too)
            bar.total = (bar.total or 0) + lines
            bar.refresh()
            return read(file)

        def counted_parse(records, *args, **kwargs):
            def rows():
                for record in records:
                    yield record
                    bar.update(1)
            return parse(rows(), *args, **kwargs)

        task._read_file, task._parse = counted_read, counted_parse
    try:
        yield
    finally:
        for name in ("_make", "_read_file", "_parse"):
            if name in own:
                task.__dict__[name] = own[name]
            else:
                task.__dict__.pop(name, None)
