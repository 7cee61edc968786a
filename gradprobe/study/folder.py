"""A study folder's shared pieces: its errors, its locks and the status of its run folders.

The lowest module of the study runner (:mod:`gradprobe.study.runner`): freezing the plan, the workers,
the collection of ``runs.csv`` and reuse all read a run folder's status here, and every part that can
refuse a folder raises :class:`StudyError`. File names come from :mod:`gradprobe.layout`.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import hashlib
import json
import os
import re
from pathlib import Path

from ..layout import (ANALYSIS_JSON, ARMS_JSON, CONFIG_JSON, EARLIER_MANIFEST, EARLIER_PROBE, EVAL_ITEMS_GZ, FIGURES,
                      GUIDED_LEFT_OUT, GUIDED_PROBES, METRICS_JSONL, OUTPUT_KINDS, PLAN_COPY, PROBE_BATCH_DIR,
                      PROBE_FILES, RUNS_CSV, STUDY_JSON, SUMMARY_JSON, WEIGHTS_DIR, keeps_runs, output_kind)
from ..outputs import (OutputDirError, error_text, output_error, prepare_output_dir, removed_if_left_empty,
                       shell_word)
from ..tables import shown

__all__ = ["StudyError", "PlanChangedError", "FolderLock", "run_status", "finished_runs", "sha256", "now",
           "hold_run_folder", "refuse_other_output", "run_damage", "check_run_folders", "read_study_json",
           "study_json_fix", "study_plan_sha", "check_frozen_plan", "is_plan_sha", "STUDY_OUTPUTS",
           "foreign_study_files", "holds_study_runs", "TRAIN_LOG", "REANALYSIS", "REANALYSIS_REPORT",
           "CHECKPOINT_FILES", "not_written_by_study"]

#: A study run's log (its progress and warnings), which the study's worker opens in the run folder
#: (:func:`gradprobe.study.worker._train`).
TRAIN_LOG = "train.log"
#: :data:`gradprobe.layout.GUIDED_LEFT_OUT` holds ``{"probe", "left_out", "note"}``, ``left_out`` the records a
#: probe.json's ``left_out`` holds (reward, arms, error, probe, fix). The probe is then done
#: (:func:`gradprobe.study.probe_plan.pending_probes`): a rerun of the study would fail the same way (it refuses an
#: edited plug-in reward file while runs of it remain). Deleting the file makes the next rerun probe it again.
#: Where ``gradprobe study --analyze-only`` writes beside a study's own analysis (``analysis.json``, ``figures/`` and
#: :data:`REANALYSIS_REPORT`, the printed report; :func:`gradprobe.cli.study.analysis_target`).
REANALYSIS = "reanalysis"
REANALYSIS_REPORT = "report.txt"
#: What a checkpoint folder of a run (``checkpoint-UUUUUU/``) holds: the model's weights and the rest of the state
#: (:func:`gradprobe.training.checkpoint.save_checkpoint`).
CHECKPOINT_FILES = ("model.safetensors", "state.pt")

#: What a study writes into its folder, which ``--restart`` deletes (nothing else in it is touched:
#: :func:`gradprobe.study.freeze.freeze_plan`); the last is :data:`gradprobe.study.invocations.HEARTBEAT_JSON` (named
#: here: that module imports this one).
STUDY_OUTPUTS = (PLAN_COPY, STUDY_JSON, RUNS_CSV, EVAL_ITEMS_GZ, ANALYSIS_JSON, FIGURES, REANALYSIS, "probe",
                 "runs", "invocation.json")


class StudyError(RuntimeError):
    """A study folder cannot be used as asked (another study holds it, a frozen plan was edited)."""


class PlanChangedError(StudyError):
    """The study folder was made with a plan of another sha256."""


def sha256(data: bytes) -> str:
    """The hex sha256 of ``data`` (a plan's identity in ``study.json``)."""
    return hashlib.sha256(data).hexdigest()


def is_plan_sha(value) -> bool:
    """Whether ``value`` is a plan sha256 as gradprobe records it (``study.json``'s ``plan_sha256``: :func:`sha256`'s
    64 lowercase hex digits, as text): the one rule of freezing, resuming, analysing and ``calib rows``."""
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None


def study_plan_sha(study: Path) -> tuple[str | None, Path]:
    """The plan sha256 of the study in the folder ``study`` and the file it is read from: its ``study.json``'s
    ``plan_sha256`` (:func:`gradprobe.study.freeze.freeze_plan` records it: the plan the study froze, even where
    ``plan.toml`` was edited since), else the :func:`sha256` of its ``plan.toml``'s bytes (as ``freeze_plan``
    computes it); None where neither can be read. The one read order of a study's plan identity: freezing a plan
    into a folder and a replicate's source check read it here, and ``gradprobe study --analyze-only PLAN`` where the
    folder has no ``plan.toml`` (the file the analysis reads, compared first).

    Raises nothing: a missing, unreadable or damaged ``study.json`` (not JSON, no object, no non-empty text
    ``plan_sha256``) falls back to ``plan.toml``; callers that must refuse a damaged ``study.json`` read it first
    (:func:`read_study_json`)."""
    study = Path(study)
    try:
        sha = json.loads((study / STUDY_JSON).read_text()).get("plan_sha256")
    except (OSError, ValueError, AttributeError):  # no study.json, not JSON (or not UTF-8), no object
        sha = None
    if isinstance(sha, str) and sha:
        return sha, study / STUDY_JSON
    try:
        return sha256((study / PLAN_COPY).read_bytes()), study / PLAN_COPY
    except (OSError, ValueError):
        return None, study / PLAN_COPY


def check_frozen_plan(study: str | Path, record: dict | None = None, *, error: type[Exception] = StudyError) -> None:
    """Refuse the study folder ``study`` when its ``plan.toml`` is not the plan the study froze: the file's sha256
    differs from the ``plan_sha256`` its ``study.json`` records (:func:`gradprobe.study.freeze.freeze_plan` records
    it before the first run). The runs were trained under the recorded plan; read under an edited one (another
    budget, eval schedule or hypotheses) their numbers would be relabelled, e.g. the 250k-token reads reported as
    120k. The one check of a frozen plan: resuming a study (``freeze_plan``), its analysis
    (:func:`gradprobe.study.analysis.analyze`, ``gradprobe study --analyze-only``), :func:`gradprobe.load_study` and
    ``calib rows`` (:func:`calib.dataset.build_rows`) call it.

    ``record``: ``study.json``'s content when the caller has read it (a damaged file refused there); None reads it
    here, a missing or damaged one (not JSON, no object) as no record. Nothing is compared, so nothing refused,
    without a record of 64 hex digits (a shipped or ``--replicate`` copy without ``study.json``, a study.json
    without ``plan_sha256``: their readers name a damaged value) or without a readable ``plan.toml`` (the reader
    of the plan names what is missing).

    Raises
    ------
    error (default :class:`StudyError`)
        One line naming ``plan.toml``, both sha256 (12 hex digits each), ``study.json`` and the fix: restore
        ``plan.toml`` from a copy of the study (it is the frozen plan), or run a copy of the changed plan as a new
        study with a new ``--out``. Callers pass their own error class (the analysis: ``AnalysisError``; calib:
        ``StudyFormatError``)."""
    study = Path(study)
    if record is None:
        try:
            record = json.loads((study / STUDY_JSON).read_text())
        except (OSError, ValueError):  # no study.json, not JSON (or not UTF-8)
            return
    recorded = record.get("plan_sha256") if isinstance(record, dict) else None
    if not is_plan_sha(recorded):
        return
    frozen = study / PLAN_COPY
    try:
        have = sha256(frozen.read_bytes())
    except OSError:  # missing or unreadable: the plan's reader names it
        return
    if have != recorded:
        raise error(f"{frozen} has sha256 {have[:12]}, but {study / STUDY_JSON} records the study's frozen plan as "
                    f"sha256 {recorded[:12]}: plan.toml was edited after the study froze it, and its runs were "
                    f"trained under the frozen plan, so reading them under this one would relabel their numbers; "
                    f"restore {frozen} from a copy of the study (it is the frozen plan), or, to use a changed plan, "
                    f"run a copy of it as a new study with a new --out (`gradprobe study CHANGED.toml --out NEW_DIR`)")


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
        or stop it); or ``folder/name`` is no lock file of gradprobe's, which it would overwrite
        (:func:`_not_a_lock`): a symbolic link (opened without following it, so its target is never written) or a
        file holding other text than ``pid <PID>``; the line names it and the fix (move it out of the folder).
    OSError
        The file cannot be opened (a folder of that name, no permission).
    """

    def __init__(self, folder: Path, name: str, *, wait: bool, what: str):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        try:  # never through a link: "a+" would write the pid into the file it points to
            self.f = os.fdopen(os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644), "a+")
        except OSError as e:
            if e.errno == errno.ELOOP or path.is_symlink():
                raise StudyError(_not_a_lock(path, what, "is a symbolic link")) from None
            raise
        flags = fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(self.f.fileno(), flags)
        except BlockingIOError:
            holder = os.pread(self.f.fileno(), 4096, 0).decode("utf-8", "backslashreplace").strip()
            self.f.close()
            raise StudyError(f"{what} {folder} is in use by another process ({shown(holder) or 'unknown pid'}); "
                             f"wait for it to finish or stop it") from None
        held = os.pread(self.f.fileno(), 4096, 0).strip()  # bytes: a user's file need not be text
        if held and not re.fullmatch(rb"pid \d+", held):  # a user's file of that name: kept
            fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)
            self.f.close()
            raise StudyError(_not_a_lock(path, what, "holds text that is no lock's"))
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


def _not_a_lock(path: Path, what: str, why: str) -> str:
    """:class:`FolderLock`'s refusal of ``path``, a file of the lock's name that is no lock of gradprobe's (``why``),
    naming the fix."""
    return (f"{path} {why} (gradprobe's lock file of a {what} holds 'pid N' or nothing): gradprobe keeps the {what}'s "
            f"lock under this name and would overwrite it; move it out of {shell_word(path.parent)} (mv "
            f"{shell_word(path)} SOMEWHERE), or choose another folder; nothing was written")


@contextlib.contextmanager
def hold_run_folder(out):
    """Hold the run folder ``out`` while the block trains in it: an exclusive lock on ``out/.lock``
    (:data:`~gradprobe.training.run_folder.RUN_LOCK`, the :class:`FolderLock` a study's
    worker takes on its run folders), so that a second ``gradprobe train`` on the folder is refused instead of
    interleaving its lines with this one's. The lock is released when the block ends (normally, on an error, on
    Ctrl-C or SIGTERM) and by the kernel when the process dies, so a dead holder's lock is taken over. A folder
    that does not exist is created first (:func:`~gradprobe.outputs.prepare_output_dir`). When the block leaves the
    folder holding the names it held before (nothing written: a refused run, in a new folder or one of a user's
    files), the lock file made here is removed (while still locked), so the folder is left as it was; a lock file
    that was there before (a killed run's) is kept. When the block raises (a refused run), the
    folders created for ``out`` are removed again as :func:`~gradprobe.outputs.removed_if_left_empty` removes them, so
    a refused run leaves nothing behind: the folders ``mkdir -p`` makes (a folder made only to be passed through,
    ``new9`` of ``new9/../old``, included), each only while it is an empty folder; a folder that existed before
    (``old`` reached through ``new9/..``) is never removed.

    Raises
    ------
    StudyError (a RuntimeError)
        Another live process holds the folder: one line naming the folder, the holder's pid and the fix (wait for
        it to finish or stop it); nothing is written.
    OutputDirError
        ``out`` cannot be created or its lock file cannot be opened (names the path and the fix).
    """
    from ..training.run_folder import RUN_LOCK

    out = Path(out)
    with removed_if_left_empty(out):  # on an error: the folders made here for out, while empty
        if not out.is_dir():
            prepare_output_dir(out)  # a file in the way, an unwritable parent: its one-line errors
        before = _names(out)  # what the folder holds before its lock file: left as it is when nothing is written
        try:
            lock = FolderLock(out, RUN_LOCK, wait=False, what="run folder")
        except OSError as e:  # in use by another process: a StudyError, passed on
            raise output_error("opening the lock file", out / RUN_LOCK, e) from e
        try:
            yield
        finally:
            after = _names(out)
            if before is not None and RUN_LOCK not in before and after is not None and after - {RUN_LOCK} == before:
                with contextlib.suppress(OSError):
                    (out / RUN_LOCK).unlink()  # while still locked: whoever opened it meanwhile is still refused
            lock.release()


def _names(out: Path) -> set[str] | None:
    """The names the folder ``out`` holds, or None when it cannot be listed."""
    try:
        return set(os.listdir(out))
    except OSError:
        return None


def run_status(folder: Path) -> tuple[str, dict | None]:
    """(status, summary) of a run folder: ``done`` (summary completed), ``failed`` (a summary with
    ``completed`` false: NaN loss, write error), ``partial`` (data, no summary) or ``pending``."""
    s = folder / SUMMARY_JSON
    if s.exists():
        try:
            summary = json.loads(s.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            return "partial", None
        if not isinstance(summary, dict):  # damaged (:func:`run_damage` names it)
            return "partial", None
        return ("done" if summary.get("completed") else "failed"), summary
    if (folder / METRICS_JSONL).exists():
        return "partial", None
    return "pending", None


def finished_runs(out: str | Path) -> list[Path]:
    """Run folders under ``out/runs/`` whose ``summary.json`` says completed (any plan's), sorted."""
    return sorted(f for f in Path(out).glob("runs/*/seed*") if f.is_dir() and run_status(f)[0] == "done")


def refuse_other_output(out: str | Path) -> None:
    """Refuse ``out`` when it holds another command's output (:func:`gradprobe.layout.output_kind`: a training run,
    a probe, a study's probe folder, a calibration report...), before anything is written into it, as ``gradprobe
    train`` refuses a study's folder, and a folder holding names a study writes (:data:`STUDY_OUTPUTS`: ``runs.csv``,
    ``figures/``...) without its ``study.json`` (:func:`foreign_study_files`: a user's files, which the study would
    overwrite and ``--restart`` delete). A new or empty folder, a study's folder (a resume, a freeze killed before
    ``study.json``, a study whose ``study.json`` was deleted to rebuild it) or a folder of other files is accepted.

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        One line naming the folder, what it holds (the file that shows it, or every study name it holds without
        ``study.json``) and the fix (another ``--out``, or move the files). Nothing is written.
    """
    found = output_kind(out)
    if found is not None and found[0] != "study":
        raise OutputDirError(errno.EEXIST, (
            f"--out {out} holds {OUTPUT_KINDS[found[0]]} ({found[1]}), not a study; a study there would mix its "
            f"plan.toml, study.json, runs/ and analysis.json into it: choose another --out (a new or empty folder, "
            f"or a study's folder to resume it)"))
    theirs = foreign_study_files(out)
    if theirs:
        they, them = ("they are", "them") if len(theirs) > 1 else ("it is", "it")
        why = _plan_problem(Path(out) / PLAN_COPY) if PLAN_COPY in theirs else None
        note = f" ({PLAN_COPY} does not load as a plan: {why.splitlines()[0][:200]})" if why else ""
        raise OutputDirError(errno.EEXIST, (
            f"--out {out} holds {', '.join(theirs)} but no {STUDY_JSON} (which a study writes before anything but "
            f"its plan.toml), so {they} not a study's{note}; a study there would overwrite {them} and its --restart "
            f"delete {them}: choose another --out (a new or empty folder, or a study's folder to resume it), or move "
            f"{them} out of the folder; nothing was written"))


def foreign_study_files(out: str | Path) -> list[str]:
    """The names of :data:`STUDY_OUTPUTS` that ``out`` holds without being a study's folder (no ``study.json``), in
    that order (a folder with a ``/``); [] for a missing folder, a study's folder, or one holding none of them.

    A study writes ``plan.toml`` and then ``study.json`` (:func:`gradprobe.study.freeze.freeze_plan`) before
    anything else, so without ``study.json`` these names are someone else's files, which the study would overwrite
    and ``--restart`` delete. Two exceptions are a study's own: a lone ``plan.toml`` that loads as a plan (with
    ``runs/`` and ``invocation.json`` or not: a freeze killed before it wrote ``study.json``), and a ``runs/`` holding
    a run folder in a study's layout (:func:`holds_study_runs`: a study whose damaged ``study.json`` was deleted to
    rebuild it, :func:`study_json_fix`, or finished runs put in a new study's folder for it to take up). A
    ``plan.toml`` that does not load as a plan (:func:`gradprobe.training.plan.load_plan`) is named in either case:
    the study would take it for a frozen plan of another sha256, and its ``--restart`` would replace it."""
    out = Path(out)
    if not out.is_dir() or (out / STUDY_JSON).exists():
        return []
    present = [name for name in STUDY_OUTPUTS if (out / name).exists() or (out / name).is_symlink()]
    if not present:
        return []
    plan_ok = PLAN_COPY in present and _plan_problem(out / PLAN_COPY) is None
    if plan_ok and set(present) <= {PLAN_COPY, "runs", "invocation.json"} or holds_study_runs(out):
        theirs = [] if plan_ok or PLAN_COPY not in present else [PLAN_COPY]  # a user's plan.toml: --restart deletes it
    else:
        theirs = present
    return [f"{name}/" if (out / name).is_dir() else name for name in theirs]


def _plan_problem(path: Path) -> str | None:
    """Why ``path`` is not a plan gradprobe can load (:func:`gradprobe.training.plan.load_plan`'s error, without the
    eval-schedule check a study frozen before it is exempt from), else None: a killed freeze's ``plan.toml`` loads,
    a user's file of that name (``# my notes``) does not. Raises nothing."""
    from ..training.plan import load_plan

    try:
        load_plan(path, check_schedule=False)
    except Exception as e:  # PlanError, or whatever a damaged file or a plug-in reward raises: not a plan to take
        return str(e) or type(e).__name__
    return None


def holds_study_runs(out: str | Path) -> bool:
    """Whether ``out/runs`` holds a run folder in a study's layout: ``runs/<arm>/seed<N>/`` with a
    ``metrics.jsonl``, ``summary.json``, ``train.log`` or ``.lock`` file (a study's worker takes the lock and opens
    the log before ``config.json`` is written: a study killed then), or a ``config.json`` with a run's ``"run"``
    record (what :func:`gradprobe.training.run.run_training` writes first). Raises nothing: unreadable files are no
    evidence."""
    from ..training.run_folder import RUN_LOCK

    for folder in Path(out).glob("runs/*/seed*"):
        if any((folder / name).is_file() for name in (METRICS_JSONL, SUMMARY_JSON, TRAIN_LOG, RUN_LOCK)):
            return True
        try:
            config = json.loads((folder / CONFIG_JSON).read_text())
            if isinstance(config, dict) and "run" in config:
                return True
        except (OSError, UnicodeDecodeError, ValueError):  # missing, unreadable, not JSON
            continue
    return False


def not_written_by_study(out: str | Path, run_folders) -> list[Path]:
    """The files in the study outputs of ``out`` that ``--restart`` deletes whole (the run folders ``run_folders``,
    ``probe/``, ``figures/``, ``reanalysis/``) which are not what gradprobe writes there, sorted: a user's notes or
    results put in a run folder are named, so that ``--restart`` refuses rather than deletes them
    (:func:`gradprobe.study.freeze._restart_study`). Empty folders are no loss and are not named; a symbolic link
    is named by itself (its target is never read).

    What gradprobe writes, by folder (every file also as the ``NAME.tmp`` partial of its atomic write,
    :func:`gradprobe.outputs.write_bytes_atomic`):

    - a run folder (``gradprobe train``, the study's worker): ``config.json``, ``metrics.jsonl``, ``eval_items.jsonl``,
      ``summary.json``, ``checkpoint.json`` (:data:`gradprobe.training.run_folder.RUN_FILES`), ``.lock``,
      :data:`TRAIN_LOG`, ``.invocation.json`` (:data:`gradprobe.training.state.INVOCATION_END`), ``reused_from.json``
      (``--reuse-runs``: :data:`REUSED_JSON`), checkpoint folders
      (``checkpoint-UUUUUU/``, ``.checkpoint-UUUUUU.tmp/``, holding :data:`CHECKPOINT_FILES`) and ``weights/``
      (``update-UUUUUU.safetensors``);
    - ``probe/``: a probe's files (:data:`gradprobe.layout.PROBE_FILES`), ``arms.json``, ``.lock``, ``batch_K/``
      folders of a probe's files, ``guided/<arm>/`` probe folders (a probe's files, or :data:`GUIDED_LEFT_OUT`: the
      record of a guided probe whose every reward failed), and ``.earlier-probe/`` (an earlier probe a killed probe
      left aside: a probe's files, ``batch_K/`` and :data:`gradprobe.layout.EARLIER_MANIFEST`);
    - ``figures/``: the study's figures (:data:`gradprobe.study.report.FIGURES`, ``lr_sweep.png``);
    - ``reanalysis/``: ``analysis.json``, :data:`REANALYSIS_REPORT` and a ``figures/`` as above;
    - in any of these folders, a file manager's ``.DS_Store``, ``Thumbs.db``, ``desktop.ini`` or ``._NAME``
      (:func:`is_file_manager_file`), written there when the user looked at the folder.

    Raises nothing: an unreadable folder is named itself (what it holds cannot be told)."""
    out = Path(out)
    found = []
    for folder in run_folders:
        if not Path(folder).is_symlink():  # a linked run folder: --restart deletes the link only
            found += _strays(Path(folder), _run_rule())
    for name, rule in (("probe", _probe_rule(study=True)), (FIGURES, _figures_rule()),
                       (REANALYSIS, _reanalysis_rule())):
        if (out / name).is_dir() and not (out / name).is_symlink():
            found += _strays(out / name, rule)
    return sorted(found)


def _files(*names: str) -> set[str]:
    """``names`` and the ``NAME.tmp`` partials of their atomic writes."""
    return {*names, *(f"{n}.tmp" for n in names)}


def _run_rule():
    """What a run folder holds (:func:`not_written_by_study`): name -> None (a file of gradprobe's), or the rule of a
    folder of gradprobe's, else False."""
    from ..training.run_folder import _CHECKPOINT_DIR, RUN_FILES, RUN_LOCK
    from ..training.state import INVOCATION_END

    files = _files(CONFIG_JSON, *RUN_FILES, INVOCATION_END, TRAIN_LOG, REUSED_JSON) | {RUN_LOCK}
    checkpoint = _leaf_rule(_files(*CHECKPOINT_FILES))
    weights = _leaf_rule(set(), re.compile(r"\.?update-\d{6}\.safetensors(\.tmp)?"))

    def rule(name: str, is_dir: bool):
        if not is_dir:
            return None if name in files else False
        if _CHECKPOINT_DIR.fullmatch(name):
            return checkpoint
        return weights if name == WEIGHTS_DIR else False
    return rule


def _leaf_rule(names: set[str], pattern=None):
    """A folder of gradprobe's holding only the files ``names`` (or matching ``pattern``)."""
    return lambda name, is_dir: (None if not is_dir and (name in names or (pattern and pattern.fullmatch(name)))
                                 else False)


def _probe_rule(study: bool, guided: bool = False):
    """What a probe's folder holds; ``study``: a study's ``probe/`` (also ``arms.json`` and ``guided/<arm>/``);
    ``guided``: a guided arm's ``guided/<arm>/`` (also :data:`GUIDED_LEFT_OUT`)."""
    from ..training.run_folder import RUN_LOCK

    probe_files = _files(*PROBE_FILES, *((ARMS_JSON,) if study else ())) | {RUN_LOCK}
    files = probe_files | (_files(GUIDED_LEFT_OUT) if guided else set())
    batch = _leaf_rule(_files(*PROBE_FILES))
    arm_probe = (lambda name, is_dir: _probe_rule(study=False, guided=True) if is_dir else False)
    aside = (lambda name, is_dir: batch if is_dir and PROBE_BATCH_DIR.fullmatch(name) else
             None if not is_dir and name in probe_files | _files(EARLIER_MANIFEST) else False)

    def rule(name: str, is_dir: bool):
        if not is_dir:
            return None if name in files else False
        if PROBE_BATCH_DIR.fullmatch(name):
            return batch
        if name == EARLIER_PROBE:  # an earlier probe a killed probe left aside (gradprobe.probe.output)
            return aside
        return arm_probe if study and name == GUIDED_PROBES else False
    return rule


#: The file a reused run's folder records its source in (``--reuse-runs``: :mod:`gradprobe.study.reuse`).
REUSED_JSON = "reused_from.json"

def _figures_rule():
    """What a study's ``figures/`` holds: the figures :func:`gradprobe.study.report.plot_figures` draws."""
    from .lr_sweep import FIGURE
    from .report import FIGURES as DRAWN

    return _leaf_rule({*(name for name, _, _ in DRAWN.values()), FIGURE})


def _reanalysis_rule():
    """What ``reanalysis/`` holds (:data:`REANALYSIS`)."""
    files, figures = _files(ANALYSIS_JSON, REANALYSIS_REPORT), _figures_rule()
    return lambda name, is_dir: (figures if is_dir and name == FIGURES else
                                 None if not is_dir and name in files else False)


#: Files a desktop's file manager writes into any folder it shows (macOS Finder's view settings, Windows Explorer's
#: thumbnail cache and folder settings), compared case-folded; macOS's ``._NAME`` files (a file's metadata on a shared
#: or FAT volume) too: no one's data, so ``--restart`` deletes them with the folder, unnamed.
FILE_MANAGER_FILES = frozenset({".ds_store", "thumbs.db", "desktop.ini"})


def is_file_manager_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) a file manager writes (:data:`FILE_MANAGER_FILES`)."""
    name = path.name
    return ((name.casefold() in FILE_MANAGER_FILES or (name.startswith("._") and len(name) > 2))
            and path.is_file() and not path.is_symlink())


def _strays(folder: Path, rule) -> list[Path]:
    """The files under ``folder`` that ``rule`` (name, is_dir) -> None | rule | False does not take for gradprobe's:
    False names a file, or every file under a folder; a rule is applied inside a folder. A file manager's own file
    (:data:`FILE_MANAGER_FILES`) is never named."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return [folder]
    found = []
    for entry in entries:
        is_dir = entry.is_dir() and not entry.is_symlink()
        if is_file_manager_file(entry):
            continue
        verdict = rule(entry.name, is_dir)
        if verdict is None:
            continue
        if not is_dir:
            found.append(entry)
        elif verdict is False:
            found += _strays(entry, lambda name, is_dir: False)
        else:
            found += _strays(entry, verdict)
    return found


def run_damage(folder: Path) -> str | None:
    """Why the record of the run folder ``folder`` cannot be trusted, else None: a ``summary.json`` that is not
    a JSON object (cut, overwritten), so whether the run finished cannot be told, or a finished run (summary
    completed) without its ``metrics.jsonl``, so ``runs.csv`` cannot be rebuilt from it. Each reason is one
    phrase naming the file and the fix (restore the file, or delete the run folder to rerun that run)."""
    fix = f"restore it from a copy, or delete {folder} to rerun that run (the other runs are kept)"
    s = folder / SUMMARY_JSON
    if not s.exists():
        return None
    try:
        summary = json.loads(s.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"{s} cannot be read ({error_text(e)}): whether the run finished cannot be told; {fix}"
    if not isinstance(summary, dict):
        return f"{s} holds no JSON object (a {type(summary).__name__}): the run's record is damaged; {fix}"
    if summary.get("completed") and not (folder / METRICS_JSONL).is_file():
        return (f"{folder / METRICS_JSONL} is missing although {s} says the run finished: runs.csv cannot be "
                f"rebuilt from it; {fix}")
    return None


def check_run_folders(out: str | Path, runs) -> None:
    """Refuse a study whose run folders (``runs``: (arm, seed) pairs of the plan) hold a damaged record
    (:func:`run_damage`), before anything is run or rewritten from the others.

    Raises
    ------
    StudyError
        One line naming the first damaged file, the fix, and how many other run folders are damaged.
    """
    from ..layout import run_dir

    damaged = [why for arm, seed in runs if (why := run_damage(run_dir(out, arm, seed))) is not None]
    if damaged:
        more = f" ({len(damaged) - 1} more run folder(s) are damaged likewise)" if len(damaged) > 1 else ""
        raise StudyError(f"{damaged[0]}{more}; nothing was run or rewritten")


def study_json_fix(out: str | Path) -> str:
    """How to get a study's ``study.json`` back when it is damaged: rebuilt from its run folders (delete it and run
    ``gradprobe study DIR/plan.toml --out DIR``: finished runs are not redone; the recorded invocations and wall
    time are lost), or, without ``runs/`` (a shipped study keeps only its tables), from a copy."""
    d = Path(out)
    if keeps_runs(d):
        return (f"restore it from a copy, or delete it and run `gradprobe study {shell_word(d / PLAN_COPY)} --out "
                f"{shell_word(d)}` to rebuild it from {d / 'runs'} (finished runs are not redone; the recorded "
                "invocations and wall time are lost)")
    return f"restore it from a copy of the study ({d} has no runs/ folder to rebuild it from)"


def read_study_json(out: str | Path) -> dict | None:
    """``out/study.json`` as a dict; None when there is none.

    Raises
    ------
    StudyError
        The file cannot be read, is not JSON or holds no JSON object (one line naming it and
        :func:`study_json_fix`).
    """
    p = Path(out) / STUDY_JSON
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise StudyError(f"{p} cannot be read ({error_text(e)}): the study's record (plan sha256, run statuses, "
                         f"invocations) is damaged; {study_json_fix(out)}") from None
    if not isinstance(data, dict):
        raise StudyError(f"{p} holds no JSON object (a {type(data).__name__}): the study's record is damaged; "
                         f"{study_json_fix(out)}")
    return data
