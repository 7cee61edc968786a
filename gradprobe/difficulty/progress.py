"""A progress line for a step that cannot report its progress (``rank-prompts`` and ``difficulty-eval`` building
their pool: the task builds it in one call). Imports tqdm only when shown; no torch."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

__all__ = ["building"]


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
