"""What a study invocation reports: :class:`StudyResult` at its end, :class:`StudyInterrupted` on
Ctrl-C or SIGTERM (:class:`StudyTerminated`), and :func:`progress_line` after every finished run (wall-clock
times, runs complete, ETA)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StudyResult", "StudyInterrupted", "StudyTerminated", "progress_line", "clock"]


def clock(seconds: float) -> str:
    """``1369.2`` -> ``"22 min 49 s"`` (wall-clock seconds, rounded to the second)."""
    m, sec = divmod(int(round(seconds)), 60)
    return f"{m} min {sec} s" if m else f"{sec} s"


class StudyTerminated(KeyboardInterrupt):
    """SIGTERM to a study process (``kill PID``, a scheduler's stop), raised by ``gradprobe study``'s handler
    (:func:`gradprobe.cli.study.terminate_as_interrupt`). A KeyboardInterrupt, so that the study stops as on
    Ctrl-C: no further run starts, running workers are stopped, ``study.json`` records the end."""


class StudyInterrupted(KeyboardInterrupt):
    """A study stopped by Ctrl-C / SIGINT or SIGTERM (:class:`StudyTerminated`): no run was started after it,
    running runs were stopped.

    Attributes
    ----------
    out : Path
        The study folder (its lock is released; the same command resumes it).
    done, total : int
        Runs complete (kept, never redone) and runs in the plan.
    stopped : int
        Pool worker processes (``local`` executor) that were alive, idle or running a run or the probe,
        and were told to stop (SIGTERM); 0 for the other executors (``inline``: the interrupt stopped its run).
    terminated : bool
        SIGTERM stopped the study (a :class:`StudyTerminated`), not Ctrl-C.
    """

    def __init__(self, out, done: int, total: int, stopped: int = 0, terminated: bool = False):
        self.out, self.done, self.total, self.stopped = Path(out), int(done), int(total), int(stopped)
        self.terminated = bool(terminated)
        super().__init__(f"study {self.out} interrupted: {self.done} of {self.total} runs complete (kept, never "
                         "redone); no further run was started, and a run stopped mid-way resumes from its last "
                         "checkpoint (or from update 0 if it had none)")


#: How :meth:`StudyResult.summary` says a probe state (``"skipped"``: nothing was left to probe, which read as if
#: the probe had been left out)
_PROBE_SAID = {"skipped": "already done (probe.json kept)"}


@dataclass
class StudyResult:
    """What :func:`~gradprobe.study.runner.run_study` did.

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
    resumable : set[tuple[str, int]]
        Failed runs whose refused resume names its own fix (the error's ``resume_fix``,
        :class:`~gradprobe.training.errors.RunConfigMismatchError`): the same command resumes them once it is made.
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
    resumable: set = field(default_factory=set)  # last: the fields before it keep their positions

    @property
    def ok(self) -> bool:
        """No run and no probe failed and the analysis (if asked) was written."""
        return not self.failed and not self.probe.startswith("failed") and self.analysis_error is None

    def summary(self) -> str:
        """Plain-text summary (what ``gradprobe study`` prints at the end)."""
        lines = [f"study {self.out}: {len(self.done)} runs complete ({len(self.skipped)} were already), "
                 f"{len(self.failed)} failed; probe: {_PROBE_SAID.get(self.probe, self.probe)}; wall time "
                 f"{clock(self.wall_seconds)}"
                 + (f" (all invocations {clock(self.total_wall_seconds)})"
                    if self.total_wall_seconds > self.wall_seconds + 0.5 else "")]
        for (arm, seed), err in sorted(self.failed.items()):
            lines.append(f"  FAILED {arm} seed {seed}: {err}")
        if self.analysis_error:
            lines.append(f"  analysis not written: {self.analysis_error}")
        if self.failed:
            lines.append(f"  failed runs keep their data in {self.out}/runs/<arm>/seed<S>/; " + self._retry())
        return "\n".join(lines)

    def _retry(self) -> str:
        """What rerunning does for the failed runs. A rerun of the same command retries every failed run (completed
        runs are not redone) with the same plan and reward code (the folder refuses an edited plan or plug-in reward
        file, :mod:`~gradprobe.study.freeze`), so a run whose error says to start anew (``new --out``: a reward that
        scored nothing, a diverged policy, a plug-in reward edited since the run started) fails the
        same way again: its fix is the plan run as a new study under a new --out, which ``--reuse-runs`` spares
        retraining this study's finished runs. A refused resume whose error also says how to resume the run (``to
        resume it, ...``: a tier rebuilt in the cache, an edited model config; :attr:`resumable`, from the error's
        ``resume_fix``) is retried by the same command once that fix is made, so it is not counted as one to start
        anew."""
        resumable = self.resumable & set(self.failed)
        anew = sorted(k for k, e in self.failed.items() if "new --out" in str(e) and k not in resumable)
        if not anew:
            return "rerun the same command to retry them (completed runs are not redone)" + (
                f", after the fix {'its' if len(resumable) == 1 else 'each refused'} resume names above"
                if resumable else "")
        if len(anew) == len(self.failed):
            return ("each error above says to start anew: a rerun of this study would fail the same way, so fix what "
                    "it names and run the study under a new --out")
        names = ", ".join(f"{a} seed {s}" for a, s in anew)
        reuse = (f" with --reuse-runs {self.out} (its finished runs are copied, not trained again)"
                 if self.done else "")
        return (f"a rerun of the same command retries every failed run (completed runs are not redone): the others "
                f"may succeed, but {names} would fail the same way again, as {'its' if len(anew) == 1 else 'each'} "
                f"error says (the rerun trains the same plan and reward code: this folder refuses an edited plan or "
                f"plug-in reward file); to fix {'it' if len(anew) == 1 else 'them'}, fix what the error names, then "
                f"run the plan as a new study under a new --out{reuse}")


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
        eta = clock(elapsed / finished_here * left)
    else:
        eta = "?"
    fail = f" ({failed} failed)" if failed else ""
    return f"{done}/{total} runs complete{fail}, elapsed {clock(elapsed)}, ETA {eta}"
