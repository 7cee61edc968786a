"""Wall time of a study across invocations, a SIGKILLed one included.

Each ``gradprobe study`` process that runs a study folder is one *invocation*. It is listed in
``study.json`` ``invocations`` as ``{"id", "pid", "host", "started", "last_seen", "seconds",
"ended", "heartbeat_seconds"}`` (``started``/``last_seen``: UTC ISO times; ``seconds``: wall-clock
seconds from its start to ``last_seen``; ``heartbeat_seconds``: the interval of its heartbeats;
``ended``: ``"normally"``, ``"interrupted"`` (Ctrl-C), ``"terminated (SIGTERM)"``, ``"error: ..."``,
``"killed"`` (no end was recorded: SIGKILL, a power cut), or null while it runs).

A process killed with SIGKILL cannot record its end, so while it runs it keeps a heartbeat:
``DIR/invocation.json``, its own entry, rewritten atomically (:func:`gradprobe.outputs.write_json_atomic`)
every :data:`HEARTBEAT_SECONDS` by a daemon thread and whenever a run finishes (a beat is one small
file written and renamed: cheap enough every 2 s, so a study killed 10 s after it started records
about 10 s, not the 0 s of its first beat; each entry names its ``heartbeat_seconds``). The next
invocation (which holds the study lock, so the previous one is gone) marks every entry without
an end as ``"killed"``, takes its time from the heartbeat (or, without one, from the entry
``study.json`` last saved), and adds it to ``study.json`` ``wall_seconds``. A killed invocation's
time is thus counted up to its last heartbeat: at most :data:`HEARTBEAT_SECONDS` are lost.
An entry that has an end is never counted twice (the heartbeat is removed only after the end is
saved, and an ended entry's heartbeat is ignored).
"""

from __future__ import annotations

import json
import os
import socket
import signal
import threading
import time
import uuid
from pathlib import Path

from ..outputs import OutputDirError, write_json_atomic
from .folder import now as _now

HEARTBEAT_JSON = "invocation.json"
#: seconds between two heartbeats of a running invocation (a killed one loses at most this much)
HEARTBEAT_SECONDS = 2.0


class Invocation:
    """This process's entry in ``study.json`` ``invocations`` and its heartbeat file.

    Parameters
    ----------
    out : path
        The study folder (the caller holds its lock).
    interval : float
        Seconds between heartbeats of the background thread (:data:`HEARTBEAT_SECONDS`).

    Attributes
    ----------
    record : dict
        The entry (the same object is put in ``study["invocations"]``, so every save of
        ``study.json`` carries its latest ``last_seen`` and ``seconds``).
    """

    def __init__(self, out: str | Path, *, interval: float = HEARTBEAT_SECONDS):
        self.path = Path(out) / HEARTBEAT_JSON
        self.interval = float(interval)
        self._start = time.perf_counter()
        self.record = {"id": uuid.uuid4().hex[:12], "pid": os.getpid(), "host": socket.gethostname(),
                       "started": _now(), "last_seen": _now(), "seconds": 0.0, "ended": None,
                       "heartbeat_seconds": self.interval}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def seconds(self) -> float:
        """Wall-clock seconds since this invocation started."""
        return time.perf_counter() - self._start

    def begin(self, study: dict) -> list[dict]:
        """Account for earlier invocations that never recorded an end, then add this one.

        Every entry of ``study["invocations"]`` with ``ended`` null is marked ``"killed"``; its
        ``seconds`` and ``last_seen`` come from the heartbeat file when that holds the same id
        (and more seconds), and its seconds are added to ``study["wall_seconds"]``.

        Returns
        -------
        list[dict]
            The entries just marked killed.
        """
        entries = study.setdefault("invocations", [])
        try:
            beat = json.loads(self.path.read_text())
        except (OSError, ValueError):  # none (the last invocation ended normally), or unreadable
            beat = None
        if isinstance(beat, dict) and beat.get("id") and not any(e.get("id") == beat["id"] for e in entries):
            entries.append({**beat, "ended": None})  # killed before study.json listed it
        killed = []
        for entry in entries:
            if entry.get("ended") is not None:
                continue
            if isinstance(beat, dict) and beat.get("id") == entry.get("id") and \
                    float(beat.get("seconds") or 0.0) >= float(entry.get("seconds") or 0.0):
                entry.update(seconds=float(beat.get("seconds") or 0.0), last_seen=beat.get("last_seen"))
            entry["ended"] = "killed"
            study["wall_seconds"] = float(study.get("wall_seconds") or 0.0) + float(entry.get("seconds") or 0.0)
            killed.append(entry)
        entries.append(self.record)
        return killed

    def touch(self) -> dict:
        """Update ``record``'s ``last_seen`` and ``seconds`` (before a save of ``study.json``)."""
        self.record.update(last_seen=_now(), seconds=self.seconds)
        return self.record

    def beat(self) -> None:
        """Rewrite the heartbeat file atomically with the current entry; never raises (a full disk
        only makes the heartbeat older)."""
        with self._lock:
            data = {**self.record, "last_seen": _now(), "seconds": self.seconds}
            try:
                write_json_atomic(self.path, data)  # removes its .tmp on failure
            except (OutputDirError, ValueError):  # a full disk; ValueError: a non-finite number (none expected)
                pass

    def start(self) -> None:
        """Write a first heartbeat and start the background thread (one beat every ``interval`` s)."""
        self.beat()

        def loop():
            while not self._stop.wait(self.interval):
                self.beat()

        # The thread starts with SIGINT (and SIGTERM) blocked, so the kernel delivers a Ctrl-C to the main
        # thread: a signal taken by this thread would leave the main thread asleep in a lock wait (a pool's
        # as_completed), and the study would never see its KeyboardInterrupt.
        self._thread = threading.Thread(target=loop, name="gradprobe-study-heartbeat", daemon=True)
        blocked = {signal.SIGINT, signal.SIGTERM}
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def end(self, study: dict, ended: str) -> float:
        """Stop the heartbeats and record the end in ``study`` (its ``wall_seconds`` grows by this
        invocation's seconds). The caller saves ``study.json`` and then calls :meth:`clear`.

        Returns
        -------
        float
            This invocation's wall-clock seconds.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.touch()
        if self.record["ended"] is None:
            self.record["ended"] = ended
            study["wall_seconds"] = float(study.get("wall_seconds") or 0.0) + self.record["seconds"]
        return self.record["seconds"]

    def clear(self) -> None:
        """Remove the heartbeat file (after the end was saved in ``study.json``)."""
        with self._lock:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
