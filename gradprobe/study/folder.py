"""A study folder's shared pieces: its errors, its locks and the status of its run folders.

The lowest module of the study runner (:mod:`gradprobe.study.runner`): freezing the plan, the workers,
the collection of ``runs.csv`` and reuse all read a run folder's status here, and every part that can
refuse a folder raises :class:`StudyError`. File names come from :mod:`gradprobe.layout`.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
from pathlib import Path

from ..layout import METRICS_JSONL, SUMMARY_JSON

__all__ = ["StudyError", "PlanChangedError", "FolderLock", "run_status", "finished_runs", "sha256", "now"]


class StudyError(RuntimeError):
    """A study folder cannot be used as asked (another study holds it, a frozen plan was edited)."""


class PlanChangedError(StudyError):
    """The study folder was made with a plan of another sha256."""


def sha256(data: bytes) -> str:
    """The hex sha256 of ``data`` (a plan's identity in ``study.json``)."""
    return hashlib.sha256(data).hexdigest()


def now() -> str:
    """The current UTC time as an ISO string to the second (``study.json``'s ``created``, ``finished``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class FolderLock:
    """Exclusive ``fcntl.flock`` on ``folder/name`` (released by the kernel when the process dies).

    The file holds ``pid <PID>`` of the holder while it is held (named in the refusal) and is emptied
    on :meth:`release`.

    Parameters
    ----------
    folder : Path
        Created when missing.
    name : str
        The lock file's name (``.study.lock`` for a study folder, ``.lock`` for a run folder).
    wait : bool
        Block until the lock is free (a run folder: an orphaned worker of a killed study exits within
        a second) rather than refuse.
    what : str
        What the folder is, for the refusal (``"study folder"``, ``"run folder"``).

    Raises
    ------
    StudyError
        ``wait`` is false and another process holds the lock (its pid is named; the fix: wait for it
        or stop it).
    """

    def __init__(self, folder: Path, name: str, *, wait: bool, what: str):
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
        if not self.f.closed:
            try:
                self.f.seek(0)
                self.f.truncate()
                self.f.flush()
            except OSError:  # a full disk must not keep the lock
                pass
            fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)
            self.f.close()


def run_status(folder: Path) -> tuple[str, dict | None]:
    """(status, summary) of a run folder: ``done`` (summary completed), ``failed`` (a summary with
    ``completed`` false: NaN loss, write error), ``partial`` (data, no summary) or ``pending``."""
    s = folder / SUMMARY_JSON
    if s.exists():
        try:
            summary = json.loads(s.read_text())
        except (OSError, json.JSONDecodeError):
            return "partial", None
        return ("done" if summary.get("completed") else "failed"), summary
    if (folder / METRICS_JSONL).exists():
        return "partial", None
    return "pending", None


def finished_runs(out: str | Path) -> list[Path]:
    """Run folders under ``out/runs/`` whose ``summary.json`` says completed (any plan's), sorted."""
    return sorted(f for f in Path(out).glob("runs/*/seed*") if f.is_dir() and run_status(f)[0] == "done")
