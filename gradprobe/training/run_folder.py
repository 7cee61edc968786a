"""Which folders a training run may write into (``gradprobe train --out DIR``, :func:`run_training`).

A run writes ``checkpoint-*``, ``config.json``, ``metrics.jsonl`` and ``summary.json``: into a folder
that holds another command's output they would mix with it (and a probe would then refuse its own
folder as "a training run"). :func:`refuse_other_output` refuses such a folder before anything is
loaded or written, as ``gradprobe probe`` refuses a run's folder (:mod:`gradprobe.probe.output`), and, for
``gradprobe train`` and :func:`gradprobe.train` (``outside_studies``), any folder inside a study (its
``runs/``, ``figures/``, one of its runs: ``gradprobe study`` runs and resumes those). A model's folder (a tier,
``save_pretrained`` weights: :func:`gradprobe.layout.output_kind`) is refused too: the run's ``config.json`` would
replace the model's. So is a file in the way, and a folder holding a run's file names (``metrics.jsonl``,
``summary.json``...) without the ``config.json`` a run writes first (:func:`foreign_run_files`: a user's files, which
the run would truncate or delete), and a folder whose ``config.json`` is a symbolic link (:func:`linked_run_files`:
the run's record would be a file elsewhere, its checkpoints and metrics here), or one of whose run files is (the
run would write into what it points to). Each is read where the system will find
``out`` once ``mkdir -p`` has made its missing folders (:func:`gradprobe.outputs.as_made`: ``new7/../R1`` is ``R1``,
though ``new7`` does not exist yet). Any other folder is accepted: a new or empty one, a run's own folder (a resume; a
run killed before its ``config.json`` left none of those names), or a folder of other files (the run's files go beside
them). Torch-free.

A run with a plug-in reward (``rw.py:brevity``, ``my_rewards:brevity``) records in ``config.json`` which code its
name found (``reward_plugin``: the module's resolved file and its sha256, and ``modules``, the sha256 of each helper
module it imports from its folder, and, for a package reached through a symbolic link, ``package_root``, the
``sys.path`` entry it was imported under, :func:`gradprobe.rewards.plugin.plugin_identity`);
:func:`check_reward_identity` refuses to resume it with other code (the name run from another directory, the file
or a helper module edited), which would train the rest of the run with another reward, and
:func:`refuse_unimportable_reward` says how to resume one whose reward cannot be imported any more (its package root
off ``PYTHONPATH``, its file moved).

A run whose task reads a data file (``jsonl:PATH``, ``gsm8k:PATH``: :func:`gradprobe.tasks.task_data_files`) records
each file's resolved path and sha256 in ``config.json`` (``task_data``, :func:`gradprobe.tasks.task_data_identity`);
:func:`check_task_data` refuses to resume it after the data was edited, removed or (a folder) given another file,
which would train and evaluate the rest of the run on other data than its first updates.

A run records the identity of the initial weights its ``[model] name`` resolved to when it started (``model_weights``:
for a tier, which build, cache or shipped, and the sha256 of its ``model.safetensors``; for a local folder or GGUF file,
the sha256 of its weight files, or a sampled sha256 of their content past :data:`HASH_LIMIT_BYTES`; a hub id: the id,
unchecked; :func:`model_weights_identity`); :func:`check_model_weights` refuses to resume it when the name now loads
other weights (a rebuild of the tier in the cache, which takes precedence over the shipped build; replaced weights),
whose frozen copy would measure the rest of the run's ``kl_init`` against another model than its first updates.
A local folder or GGUF file is recorded by its resolved absolute path (``path``), while the run's configuration keeps
the name as given, which every start and resume resolves against its working directory: a relative name
(``mymodel``, ``./mymodel``) resumed from another directory finds another folder or none, and a name that finds none
would be read as a hub id. So a record of a local folder or file is always compared (:func:`model_weights_comparable`):
a name that finds no local weights now is refused, not skipped as a hub id, and a relative name that finds another
folder is told to run from the directory the run started in (where it names the recorded folder), or to make the
name find that folder from here (a symbolic link). Its absolute path is no fix: it is another ``[model] name``, a
configuration that differs from the run's.

A refused resume whose fix lets the same command resume the run (restore the model's weights or files, load the
run's build, run from another directory; a plug-in reward's file moved away) carries that fix as the
``resume_fix`` attribute of its :class:`~gradprobe.training.errors.RunConfigMismatchError` (None or absent for a
refusal whose fix is a new run), for a caller to tell it from one to start anew without reading its words.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

from ..layout import (CHECKPOINT_POINTER, CONFIG_JSON, EVAL_ITEMS_JSONL, METRICS_JSONL, OUTPUT_KINDS, STUDY_JSON,
                      SUMMARY_JSON, WEIGHTS_DIR, output_kind)
from ..outputs import (OutputDirError, as_made, error_text, json_short, out_option, refuse_file_in_the_way,
                       shell_word)
from .errors import DamagedRunFolderError, RunConfigMismatchError
from .specs import run_config_from_dict

__all__ = ["RUN_LOCK", "REWARD_PLUGIN", "MODULES", "PACKAGE_ROOT", "RUN_FILES", "other_output", "refuse_other_output",
           "foreign_run_files", "linked_run_files", "study_above", "check_reward_identity",
           "modules_problem", "modules_mismatch", "refuse_unimportable_reward", "TASK_DATA", "check_task_data",
           "task_data_problem", "task_data_mismatch", "task_data_moved", "MODEL_WEIGHTS", "HASH_LIMIT_BYTES",
           "model_weights_identity", "model_weights_problem", "MODEL_FILES", "model_files_differences",
           "model_weights_mismatch", "model_record_problem", "model_weights_comparable", "LOCAL_SOURCES",
           "check_model_weights", "config_differences", "recorded_budget_flags", "PLAN_LABELS", "comparable_config",
           "records_run"]

#: The lock file of a run folder: ``gradprobe train`` (:func:`gradprobe.study.folder.hold_run_folder`) and a study's
#: worker hold an exclusive ``flock`` on it (:class:`gradprobe.study.folder.FolderLock`) while they train there.
RUN_LOCK = ".lock"
#: The key of ``config.json`` holding a plug-in reward's identity (:func:`check_reward_identity`).
REWARD_PLUGIN = "reward_plugin"
#: The key of a plug-in reward's identity holding its helper modules' sha256s (:func:`modules_mismatch`).
MODULES = "modules"
#: The key of a plug-in reward's identity holding the package root a ``pkg.mod:fn`` reward reached through a symbolic
#: link was imported under (absent for any other reward, and in records from before it: :func:`_package_root`).
PACKAGE_ROOT = "package_root"
#: The key of ``config.json`` (and of a study's ``study.json``) holding the task's data files and their sha256s
#: (:func:`check_task_data`); absent for a task read from no local file, and in records from before it.
TASK_DATA = "task_data"
#: The files a run writes after its ``config.json`` (besides its ``checkpoint-UUUUUU/`` folders): found without a
#: run's ``config.json`` they are another's, and refused (:func:`foreign_run_files`).
RUN_FILES = (METRICS_JSONL, EVAL_ITEMS_JSONL, SUMMARY_JSON, CHECKPOINT_POINTER)
_CHECKPOINT_DIR = re.compile(r"\.?checkpoint-\d{6}(\.tmp)?")

def recorded_budget_flags(out) -> dict | None:
    """The budget flags the run in the folder ``out`` was started with: its ``config.json``'s
    ``run.budget_override["flags"]`` (``{"--budget-tokens": 5000, "--updates": 3}``, the flags' names whoever gave
    them: :func:`gradprobe.training.budget.shorten_budget`), ``{}`` when it was started without any or when
    ``config.json`` cannot be read (the resume refuses a damaged one itself); None when ``out`` holds no
    ``config.json`` (no run to resume). ``out`` is read where the system will find it once its missing folders are
    made (:func:`gradprobe.outputs.as_made`: ``new7/../R1`` is ``R1``). Raises nothing."""
    cfg = as_made(out) / CONFIG_JSON
    if not cfg.is_file():
        return None
    try:
        flags = (json.loads(cfg.read_text())["run"].get("budget_override") or {}).get("flags")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError):
        return {}
    return dict(flags) if isinstance(flags, dict) else {}


#: The keys of a run's configuration that name its plan only (no computation reads them): a resume does not compare
#: them (:func:`comparable_config`), so a run resumes under a copy of its plan, or one with an edited comment.
PLAN_LABELS = ("plan_sha256", "plan_name")


def comparable_config(run: dict) -> dict:
    """A copy of the run configuration ``run`` (:meth:`~gradprobe.training.specs.RunConfig.to_dict`) without
    :data:`PLAN_LABELS`: what a resume compares (:func:`gradprobe.training.run.run_training` refuses a folder whose
    recorded run differs in it; :func:`records_run`)."""
    return {k: v for k, v in run.items() if k not in PLAN_LABELS}


def records_run(out, run) -> bool:
    """Whether the run folder ``out`` holds the run ``run`` (a :class:`~gradprobe.training.specs.RunConfig`) itself:
    its ``config.json``'s ``run``, read as a resume reads it (:func:`~gradprobe.training.specs.run_config_from_dict`:
    keys added since get their defaults), has the same :func:`comparable_config` as ``run``, so a resume would
    continue it. ``out`` is read where the system will find it once ``mkdir -p`` has made its missing folders
    (:func:`gradprobe.outputs.as_made`: ``new7/../R1`` is the run folder ``R1`` though ``new7`` does not exist yet).
    False without a ``config.json``, with one that is a symbolic link (:func:`linked_run_files`: refused by
    :func:`refuse_other_output`), or with one that cannot be read as a run's (damaged, a user's own file) or that holds
    another run. Raises nothing."""
    config = as_made(out) / CONFIG_JSON
    if config.is_symlink():
        return False
    try:
        old = run_config_from_dict(json.loads(config.read_text())["run"]).to_dict()
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError):
        return False
    return comparable_config(old) == comparable_config(run.to_dict())


def other_output(out) -> str | None:
    """What ``out`` holds when it is another command's output folder (:func:`gradprobe.layout.output_kind`),
    as ``"WHAT (EVIDENCE)"``; None for a missing or empty folder, a run's folder or any other folder."""
    found = output_kind(out)
    if found is None or found[0] == "run":
        return None
    return f"{OUTPUT_KINDS[found[0]]} ({found[1]})"


def study_above(out) -> Path | None:
    """The study folder (one holding ``study.json``) that ``out`` lies inside, or None."""
    return next((p for p in Path(out).absolute().parents if (p / STUDY_JSON).is_file()), None)


def refuse_other_output(out, *, outside_studies: bool = False) -> None:
    """Raise unless a training run may write into ``out`` (see the module docstring).

    Parameters
    ----------
    out : path
    outside_studies : bool
        Also refuse a folder inside a study (``gradprobe train``; a study's own worker passes False).

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        ``out`` holds a study, a probe, a study's probe, a calibration report or a model (a tier,
        ``save_pretrained`` weights), or (``outside_studies``) lies inside a study; one line naming the folder,
        what it holds and the fix (another ``--out``). Errno ENOTDIR: ``out`` or a parent is a file (``is a
        file, not a folder; choose another --out``). Or ``out`` holds a run's file names (``metrics.jsonl``,
        ``eval_items.jsonl``, ``summary.json``, ``checkpoint.json``, ``checkpoint-*``) without a run's ``config.json``
        (:func:`foreign_run_files`): someone else's files, which the run would truncate or delete; the line names
        them and the fix (another ``--out``, or move them). Or ``out``'s ``config.json`` is a symbolic link
        (:func:`linked_run_files`): the line names it, its target and the fix (a copy of the file in its place, or the
        folder it links into as ``--out``). Nothing is written.

    ``out`` is read where the system will find it once ``mkdir -p`` has made its missing folders
    (:func:`gradprobe.outputs.as_made`: ``new7/../probe`` is the folder ``probe``); the messages name it as given.
    """
    opt = out_option()  # --out, or the API's argument (out) inside naming_out
    refuse_file_in_the_way(out)  # else the lock file's opening fails with a message naming a path inside a file
    where = as_made(out)  # new7/../probe: the folder probe, though new7 does not exist yet
    study = study_above(where) if outside_studies else None
    if study is not None:
        raise OutputDirError(errno.EEXIST, (
            f"{out} is inside the study {study} ({STUDY_JSON}): its runs are trained and resumed by `gradprobe "
            f"study --out {shell_word(study)}`; for a run of your own choose an {opt} outside the study"))
    what = other_output(where)
    if what is not None:
        raise OutputDirError(errno.EEXIST, (
            f"{out} holds {what}, not a training run; a run there would write its checkpoints, config.json, "
            f"metrics.jsonl and summary.json into it: choose another {opt} (a new or empty folder, or a run's "
            "own folder to resume it)"))
    linked = linked_run_files(where)
    if linked:
        name, target = linked[0]
        path, real = Path(out) / name, os.path.realpath(where / name)
        if name == CONFIG_JSON:
            raise OutputDirError(errno.EEXIST, (
                f"{path} is a symbolic link (to {target!r}), not a run's own {CONFIG_JSON}: a run there would write "
                "its checkpoints, metrics.jsonl and summary.json beside a record kept elsewhere; put a copy of the "
                f"file in its place (rm {shell_word(path)} && cp {shell_word(real)} {shell_word(path)}), or choose the "
                f"folder it links into as {opt} (to resume that run), or another {opt}; nothing was written"))
        copy = (f"put a copy in its place (rm {shell_word(path)} && cp -r {shell_word(real)} {shell_word(path)}) or "
                if os.path.exists(real) else "")  # a broken link: nothing to copy
        raise OutputDirError(errno.EEXIST, (
            f"{path} is a symbolic link (to {target!r}), not the run's own file: a run there would write into what it "
            f"points to; {copy}remove it (rm {shell_word(path)}), or choose another {opt}; nothing was written"))
    theirs = foreign_run_files(where)
    if theirs:
        they, them = ("they are", "them") if len(theirs) > 1 else ("it is", "it")
        raise OutputDirError(errno.EEXIST, (
            f"{out} holds {', '.join(theirs)} but no run's {CONFIG_JSON} (one with a \"run\" record, which a run "
            f"writes first), so {they} not a training run's; a run there would overwrite or delete {them}: choose "
            f"another {opt} (a new or empty folder, or a run's own folder to resume it), or move {them} out of the "
            "folder; nothing was written"))


def linked_run_files(out) -> list[tuple[str, str]]:
    """(name, :func:`os.readlink` target) of each file or folder the run writes in ``out`` (its ``config.json`` first,
    then :data:`RUN_FILES`, ``checkpoint-UUUUUU/``, ``weights/``: :data:`gradprobe.layout.WEIGHTS_DIR`, by name) that
    is a symbolic link; [] for none or a folder that cannot be listed. Through a linked ``config.json`` a resume would
    take another folder's run for this one's; through the others a run appends its lines and writes its checkpoints
    and kept weights into what they point to (:func:`refuse_other_output` refuses both). Raises nothing."""
    try:
        names = sorted((n for n in os.listdir(out)
                        if n in (CONFIG_JSON, *RUN_FILES, WEIGHTS_DIR) or _CHECKPOINT_DIR.fullmatch(n)),
                       key=lambda n: (n != CONFIG_JSON, n))
    except OSError:
        return []
    found = []
    for name in names:
        try:
            if (Path(out) / name).is_symlink():
                found.append((name, os.readlink(Path(out) / name)))
        except OSError:  # gone meanwhile
            continue
    return found


def foreign_run_files(out) -> list[str]:
    """The names a run writes (:data:`RUN_FILES`, ``checkpoint-*``) that ``out`` holds without being a run's folder,
    sorted; [] for a missing folder, one without those names, or a run's own folder.

    A run writes ``config.json`` (with its ``"run"`` record, :func:`gradprobe.training.run._resume_or_start`) before
    ``metrics.jsonl``, ``eval_items.jsonl``, a checkpoint or ``summary.json``, so those names beside no such
    ``config.json`` are another's files (a user's ``metrics.jsonl``), which a run would truncate or delete. A
    ``config.json`` that is not JSON at all is left to the resume's check, which names it as damaged."""
    out = Path(out)
    if not out.is_dir():
        return []
    try:
        names = sorted(n for n in os.listdir(out) if n in RUN_FILES or _CHECKPOINT_DIR.fullmatch(n))
    except OSError:  # unreadable: the lock file's opening names it
        return []
    if not names:
        return []
    try:
        config = json.loads((out / CONFIG_JSON).read_text())
    except FileNotFoundError:
        return names
    except (OSError, UnicodeDecodeError, ValueError):  # a damaged config.json: _check_existing names it
        return []
    return [] if isinstance(config, dict) and "run" in config else names


def check_reward_identity(out, spec: str, current: dict | None) -> None:
    """Refuse to resume the run in ``out`` when its plug-in reward ``spec`` now runs other code than the run recorded
    when it started (``config.json``'s ``reward_plugin``), before anything is loaded or written.

    Parameters
    ----------
    out : path
        The run folder; checked only when it holds a checkpoint to resume (``checkpoint.json``) and a ``config.json``.
    spec : str
        The run's reward name (the same as in ``config.json``: a resume checks that first).
    current : dict or None
        :func:`gradprobe.rewards.plugin.plugin_identity` of ``spec`` in this process (None: a built-in reward,
        nothing is checked).

    Raises
    ------
    RunConfigMismatchError
        The file's sha256 differs from the recorded one (the same content at another path resumes, with a note on
        stderr: a moved project trains the same code): one line naming the run folder, the reward,
        what differs (the path moved, the file edited: both sha256s, 12 hex digits) and the fix (restore the file,
        or run from the directory the run started in, or for a ``pkg.mod:fn`` reward put its package root back on
        ``PYTHONPATH`` when it is off ``sys.path``; or start a new run under a new --out). When the recorded file no
        longer exists (the folder was moved), the line says what was recorded (file and sha256), what the name finds
        now, and to resume by passing a file of the recorded content. Or a helper module of the reward (``modules``:
        :func:`modules_mismatch`) was edited, is new or is gone: the line names the module file, both sha256s and
        the fix (restore it, remove a new one, or start a new run under a new --out).
    DamagedRunFolderError
        ``config.json`` cannot be read, or its ``reward_plugin`` is not an object with ``file`` and ``sha256``, or
        its ``reward_plugin.modules`` is not an object of text -> sha256 (64 hex digits), or its
        ``reward_plugin.package_root`` (optional) is not an absolute path (text) (named, with the fix).

    A run folder from before the identity was recorded (no ``reward_plugin``) resumes, with one note on stderr
    saying that the reward could not be checked; one from before its helper modules were recorded (no ``modules``)
    resumes after the file's check, with one note naming the helper modules that could not be checked (none when the
    reward imports none).
    """
    out = Path(out)
    cfg = out / CONFIG_JSON
    if current is None or not (out / CHECKPOINT_POINTER).is_file() or not cfg.is_file():
        return
    recorded = _recorded_identity(out)
    if recorded is None:
        print(f"note: {out} was started before gradprobe recorded a plug-in reward's file and sha256, so whether "
              f"reward {spec!r} ({current['file']}, sha256 {_short(current['sha256'])}) is the code it was trained "
              "with could not be checked; resuming", file=sys.stderr, flush=True)
        return
    then, now = (recorded["file"], recorded["sha256"]), (current["file"], current["sha256"])
    if then[1] != now[1]:
        fix = _identity_fix(out, spec, then, now, recorded.get(PACKAGE_ROOT))
        raise _refusal(f"{out} cannot be resumed: {_what_differs(spec, then, now)}, so its remaining updates would "
                       f"train another reward than its first ones; {fix}", fix if _file_gone(then, now) else None)
    _check_modules(out, spec, recorded, current)
    if then[0] != now[0]:  # the same code from another place (a moved project): resumable
        print(f"note: reward {spec!r} of {out} is read from {now[0]}, not {then[0]} as when the run started, with the "
              f"same content (sha256 {_short(now[1])}); resuming", file=sys.stderr, flush=True)


def check_task_data(out, spec: str, current: dict) -> None:
    """Refuse to resume the run in ``out`` when the data files of its task ``spec`` now differ from those it recorded
    when it started (``config.json``'s ``task_data``), before anything is loaded or written.

    Parameters
    ----------
    out : path
        The run folder; checked only when it holds a checkpoint to resume (``checkpoint.json``) and a ``config.json``.
    spec : str
        The run's task spec (``[task] name``; the same as in ``config.json``: a resume checks that first).
    current : dict
        :func:`gradprobe.tasks.task_data_identity` of ``spec`` now (``{}``: a task read from no file, nothing is
        checked).

    Raises
    ------
    RunConfigMismatchError
        A data file's content differs from the recorded one (edited, or missing now, or a folder's file that was
        not there when the run started: :func:`task_data_mismatch`): one line naming the run folder, the task, the
        file, both sha256s (12 hex digits; ``none``: no file) and the fix (restore the file, or start a new run
        under a new --out). The same content at another path (a moved project) resumes, with a note on stderr.
    DamagedRunFolderError
        ``config.json`` cannot be read, or its ``task_data`` is not an object of label -> {file, sha256}
        (:func:`task_data_problem`; named, with the fix).

    A run folder from before the data was recorded (no ``task_data``) resumes, with one note on stderr saying that
    the data could not be checked.
    """
    out = Path(out)
    cfg = out / CONFIG_JSON
    if not (out / CHECKPOINT_POINTER).is_file() or not cfg.is_file():
        return
    try:
        config = json.loads(cfg.read_text())
        recorded = config.get(TASK_DATA)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
        if not current:  # a task read from no file, and no readable record: the checks that read it next name it
            return
        raise DamagedRunFolderError(f"{cfg} is damaged ({error_text(e)}); restore it from a copy, or delete {out} "
                                    "to start the run over") from None
    if not current and not recorded:  # read from no file then or now
        return
    if TASK_DATA not in config:  # (current is not empty here)
        files = ", ".join(v["file"] for v in current.values())
        print(f"note: {out} was started before gradprobe recorded a task's data files and their sha256, so whether "
              f"task {spec!r} ({files}) reads the data the run started with could not be checked; resuming",
              file=sys.stderr, flush=True)
        return
    problem = task_data_problem(recorded)
    if problem is not None:
        raise DamagedRunFolderError(f"{cfg} is damaged (field {TASK_DATA} {problem}): the data the run was trained "
                                    f"on cannot be checked; restore the file from a copy, or delete {out} to start "
                                    "the run over")
    differs = task_data_mismatch(spec, recorded, current)
    if differs is not None:
        what, fix, other_data = differs
        mixes = (", so its remaining updates would train and evaluate on other data than its first ones" if other_data
                 else "")
        raise RunConfigMismatchError(f"{out} cannot be resumed: {what}{mixes}; {fix}, {_restart(out)}; "
                                     "nothing was loaded or written")
    for note in task_data_moved(spec, recorded, current):
        print(f"note: {note}; resuming {out}", file=sys.stderr, flush=True)


def task_data_problem(record) -> str | None:
    """What is wrong with a recorded ``task_data`` (``config.json``'s, ``study.json``'s): None when it is an object
    of label (text) -> ``{"file": text, "sha256": 64 hex digits}``; else what it is, for a "damaged" refusal."""
    ok = isinstance(record, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("file"), str) and isinstance(v.get("sha256"),
        str) and len(v["sha256"]) == 64 and all(c in "0123456789abcdef" for c in v["sha256"])
        for k, v in record.items())
    return None if ok else (f"is {json_short(record)}, not an object of label (text) -> {{\"file\": text, "
                            "\"sha256\": 64 hex digits}")


def task_data_mismatch(spec: str, then: dict, now: dict, *, started: str = "the run started"
                       ) -> tuple[str, str, bool] | None:
    """What differs between the data files task ``spec`` read when ``started`` (``then``, a checked record) and
    those it reads now (``now``, :func:`gradprobe.tasks.task_data_identity`), and how to fix it, as
    ``(what, fix, other_data)`` for a refusal (``other_data``: the task would now read other data, so the caller
    says what training on it would mix; False for a missing file, which no load would read); None when every file
    has its recorded content (at any path). Compared label by label: a file edited (both sha256s, 12 hex digits; fix:
    restore it), missing now (fix: restore it; when the recorded file is unchanged where it was, a relative path read
    from another working directory: fix, run from the one the run started in), or new (a folder's ``test.jsonl``
    added: fix: remove or rename it); the first named, and how many more differ. ``now`` empty while ``then`` is
    not: the spec names no local data now (``hf:FOLDER`` given as a relative path, read from another working
    directory, names the hub or ``datasets``' cache of a dataset of that name)."""
    if then and not now:
        files = ", ".join(sorted(v["file"] for v in then.values()))
        kept = all(_unchanged(v) for v in then.values())
        return (f"task {spec!r} read the local data files {files} when {started}"
                + (" (unchanged there)" if kept else "") + ", but from this working directory it names no local "
                "data (datasets would read the hub, or its cache of a dataset of that name)",
                "run the command from the working directory it was first run in"
                + ("" if kept else f", with the data as it was ({_first_record(then)})"), True)
    if spec.strip().startswith("hf:"):  # a file recorded then (gradprobe once recorded every file of an hf:FOLDER)
        then = {k: v for k, v in then.items() if k in now or not _unchanged(v)}  # and unchanged, not read now: no data
    changed = sorted((k for k in set(then) | set(now) if (then.get(k) or {}).get("sha256") !=
                      (now.get(k) or {}).get("sha256")),
                     key=lambda k: (0 if k in then and (now.get(k) or {}).get("sha256") else 1 if k in then else 2, k))
    if not changed:
        return None
    label = changed[0]
    old, new = then.get(label), now.get(label)
    more = f" (and {len(changed) - 1} more data file(s))" if len(changed) > 1 else ""
    if old is None:
        return (f"task {spec!r} now reads the data file {new['file']}, a file it did not read when {started} "
                f"(sha256 none then, {_short(new['sha256'])} now){more}",
                f"remove or rename that file, as the folder was when {started}", True)
    fix = f"restore the data file as it was ({old['file']}, sha256 {_short(old['sha256'])})"
    if new is None or not new.get("sha256"):
        where = new["file"] if new is not None else old["file"]
        if where != old["file"] and _unchanged(old):  # a relative path, read from another working directory
            return (f"task {spec!r} read the data file {old['file']} when {started}, and it is unchanged there, but "
                    f"from this working directory its relative path names {where}, which does not exist{more}",
                    f"run the command from the working directory it was first run in (where that path names "
                    f"{old['file']})", False)
        return (f"task {spec!r} read the data file {old['file']} when {started}, and {where} is missing now "
                f"(sha256 {_short(old['sha256'])} then, none now){more}", fix, False)
    place = (f"{new['file']}, as when {started}," if new["file"] == old["file"] else
             f"{new['file']}, not {old['file']} as when {started},")
    return (f"task {spec!r} reads the data file {place} but its content differs (sha256 {_short(old['sha256'])} "
            f"then, {_short(new['sha256'])} now){more}", fix, True)


def _first_record(then: dict) -> str:
    """``"FILE, sha256 PREFIX"`` of the first recorded data file (by label), for a fix."""
    first = then[sorted(then)[0]]
    return f"{first['file']}, sha256 {_short(first['sha256'])}"


def _unchanged(record: dict) -> bool:
    """Whether the recorded data file ``record`` (``{"file", "sha256"}``) still has its recorded content."""
    from ..tasks import file_sha256

    try:
        return Path(record["file"]).is_file() and file_sha256(record["file"]) == record["sha256"]
    except OSError:
        return False


def task_data_moved(spec: str, then: dict, now: dict, *, started: str = "the run started") -> list[str]:
    """One line for each data file of task ``spec`` read now (``now``) from another path than recorded when
    ``started`` (``then``) with the same content (a moved project: accepted), for a note on stderr."""
    return [f"task {spec!r} reads the data file {now[k]['file']}, not {then[k]['file']} as when {started}, with the "
            f"same content (sha256 {_short(now[k]['sha256'])})" for k in sorted(set(then) & set(now))
            if then[k]["file"] != now[k]["file"] and then[k]["sha256"] == now[k]["sha256"]]


def _recorded_identity(out: Path) -> dict | None:
    """``config.json``'s ``reward_plugin`` of the run in ``out`` (None: not recorded), checked (DamagedRunFolderError
    naming the file, the field and the fix)."""
    cfg = out / CONFIG_JSON
    try:
        recorded = json.loads(cfg.read_text()).get(REWARD_PLUGIN)
    except (UnicodeDecodeError, ValueError, AttributeError) as e:  # read once before the resume: changed since
        raise DamagedRunFolderError(f"{cfg} is damaged ({error_text(e)}); restore it from a copy, or delete {out} "
                                    "to start the run over") from None
    fix = f"restore the file from a copy, or delete {out} to start the run over"
    if recorded is not None and (not isinstance(recorded, dict) or not {"file", "sha256"} <= set(recorded)):
        raise DamagedRunFolderError(
            f"{cfg} is damaged ({REWARD_PLUGIN} is not an object with file and sha256): the reward the run was "
            f"trained with cannot be checked; {fix}")
    problem = modules_problem(recorded) if recorded is not None else None
    if problem is not None:
        raise DamagedRunFolderError(f"{cfg} is damaged (field {REWARD_PLUGIN}.{MODULES} {problem}): the helper "
                                    f"modules the reward was trained with cannot be checked; {fix}")
    root = recorded.get(PACKAGE_ROOT) if recorded is not None else None
    if root is not None and not (isinstance(root, str) and os.path.isabs(root)):
        raise DamagedRunFolderError(f"{cfg} is damaged (field {REWARD_PLUGIN}.{PACKAGE_ROOT} is {json_short(root)}, "
                                    "not a folder's absolute path (text)): the package root the reward was imported "
                                    f"under cannot be named; {fix}")
    return recorded


def _check_modules(out: Path, spec: str, recorded: dict, current: dict) -> None:
    """Refuse the resume (RunConfigMismatchError) when a helper module of reward ``spec`` differs from ``recorded``'s
    (:func:`modules_mismatch`); a record without ``modules`` (an older run): one note naming the modules not
    checked."""
    if not current.get("file"):  # a module without a file has no folder, so no helper modules
        return
    folder = Path(current["file"]).parent
    if MODULES not in recorded:
        if current.get(MODULES):
            print(f"note: {out} was started before gradprobe recorded the helper modules a plug-in reward imports "
                  f"from its folder, so whether those of reward {spec!r} ({', '.join(current[MODULES])} in {folder}) "
                  "are the code it was trained with could not be checked; resuming", file=sys.stderr, flush=True)
        return
    differs = modules_mismatch(spec, folder, recorded[MODULES], current.get(MODULES) or {})
    if differs is not None:
        raise RunConfigMismatchError(f"{out} cannot be resumed: {differs[0]}, so its remaining updates would train "
                                     f"another reward than its first ones; {differs[1]}, {_restart(out)}; nothing "
                                     "was loaded or written")


def modules_problem(record: dict) -> str | None:
    """Why ``record``'s ``modules`` (a reward's recorded helper modules, :func:`check_reward_identity`) is damaged:
    ``"is VALUE, not ..."``; None when it is absent (an older record) or an object of text -> sha256 (64 hex)."""
    value = record.get(MODULES) if isinstance(record, dict) else None
    if value is None and MODULES not in (record if isinstance(record, dict) else {}):
        return None
    ok = isinstance(value, dict) and all(isinstance(k, str) and k and isinstance(v, str) and len(v) == 64
                                         and all(c in "0123456789abcdef" for c in v) for k, v in value.items())
    return None if ok else (f"is {json_short(value)}, not an object of module file (text) -> sha256 (64 hex "
                            "digits)")


def modules_mismatch(spec: str, folder: Path, then: dict, now: dict, *, started: str = "the run started"
                     ) -> tuple[str, str] | None:
    """What differs between the helper modules reward ``spec`` was recorded with (``then``) and those it has now
    (``now``), both ``{path relative to the reward file's folder: sha256}`` (:func:`gradprobe.rewards.plugin.
    plugin_identity`'s ``modules``, read from the files on disk: the same in any process), and how to fix it, as
    ``(what, fix)`` for a refusal; None when they are the same. ``folder`` is the reward file's folder now;
    ``started`` says when the record was made (``"the study started"``). Called with the reward file unchanged, so
    a helper differs because a helper file was edited (named first, fix: restore it; an edit may add or drop an
    import too), or a file was added or removed on disk: a new one that an import now finds (fix: remove or rename
    it), a recorded one that is gone (fix: restore it) or that the imports no longer find (fix: restore the folder).
    Each is named with both sha256s (12 hex digits; ``none``: not there then or now), and how many more differ."""
    changed = sorted((k for k in set(then) | set(now) if then.get(k) != now.get(k)),
                     key=lambda k: (0 if then.get(k) and now.get(k) else 1 if now.get(k) else 2, k))
    if not changed:
        return None
    rel = changed[0]
    path, old, new = folder / rel, then.get(rel), now.get(rel)
    more = f" (and {len(changed) - 1} more helper module(s): {', '.join(changed[1:4])}" \
           f"{', ...' if len(changed) > 4 else ''})" if len(changed) > 1 else ""
    shas = f"sha256 {_short(old) if old else 'none'} then, {_short(new) if new else 'none'} now"
    if old and new:
        return (f"reward {spec!r} imports the helper module {path}, which was edited ({shas}){more}",
                f"restore the module file as it was ({path}, sha256 {_short(old)})")
    if new:
        return (f"reward {spec!r} now imports the helper module {path}, a file its imports did not find when "
                f"{started} ({shas}){more}", f"remove or rename that file, as the folder was when {started}")
    if not path.exists():
        return (f"reward {spec!r} no longer finds the helper module {path} it imported when {started} ({shas}: the "
                f"file is gone){more}", f"restore the module file ({path}, sha256 {_short(old)})")
    return (f"reward {spec!r} no longer finds the helper module {path} it imported when {started} ({shas}: its "
            f"imports no longer find the file){more}", f"restore the folder {folder} as it was when {started}")


def refuse_unimportable_reward(out, spec: str, error: Exception) -> None:
    """Refuse, with how to resume, the resume of the run in ``out`` whose plug-in reward ``spec`` cannot be imported
    now (``error``, from :func:`gradprobe.rewards.plugin.load_reward_plugin`) because its module or file is not
    found (off ``PYTHONPATH``, moved), when the run recorded where it was imported from (``config.json``'s
    ``reward_plugin``); return without a run to resume, a record, or when the code is found but fails (an import
    error inside it, a missing function: the caller's error names it), so that the caller raises its own error.

    Raises
    ------
    RunConfigMismatchError
        One line naming the run folder, the reward, the error, the recorded file and sha256 (12 hex digits) and the
        fix: for a ``pkg.mod:fn`` reward whose recorded file is gone (renamed, deleted), that it is gone and to
        restore it; else, when the path it was imported by through a symbolic link (``src/pkg/rw.py`` with
        ``src/pkg -> realpkg``) no longer leads to it, to restore that path (and its package root, named, if off
        ``sys.path``); else, its package root (named) off ``sys.path``, put it back on ``PYTHONPATH`` (or run from the
        directory the run was started in); else (the root on ``sys.path``: another package of that name is found
        first), to make the name find the recorded file again; for a ``FILE.py:fn`` reward, put a file of the recorded
        content where the name points (named; or, a relative name, run from the directory the run was started in,
        named when it still exists); or start a new run under a new --out. The package root is the record's
        ``package_root`` (a package reached through a symbolic link) or, without one, read from the recorded file's
        path (none found: the fix is the ``FILE.py:fn`` one).
    DamagedRunFolderError
        ``config.json`` is damaged (:func:`check_reward_identity`).
    """
    out = Path(out)
    if not (out / CHECKPOINT_POINTER).is_file() or not (out / CONFIG_JSON).is_file():
        return
    recorded = _recorded_identity(out)
    if recorded is None or not isinstance(recorded["file"], str):
        return
    file, sha = recorded["file"], recorded["sha256"]
    module = spec.rpartition(":")[0].strip()
    if _findable(module):
        return
    root, gone = _package_root(spec, Path(file), recorded.get(PACKAGE_ROOT)), ""
    if root is not None:
        fix, gone = _module_fix(module, Path(file), sha, root)
    else:  # the name is part of the run's configuration: the file it names must be the recorded one again
        fix = f"put that file (the same content, sha256 {_short(sha)}) at {Path(module).expanduser().absolute()}"
        start = _start_dir(module, Path(file))
        fix += f", or run from {start}, the directory the run was started in" if start is not None else ""
    raise RunConfigMismatchError(f"{out} cannot be resumed: {error}; the run started with it from {file} (sha256 "
                                 f"{_short(sha)}){gone}: to resume, {fix}, {_restart(out)}; nothing was loaded or "
                                 "written")


def _module_fix(module: str, file: Path, sha, root: Path) -> tuple[str, str]:
    """``(fix, gone)`` for a ``pkg.mod:fn`` reward ``module`` that is not found now, recorded from ``file``
    (sha256 ``sha``) under the package root ``root``: the recorded file gone (``gone``: says so; fix: restore it,
    or, ``root`` off ``sys.path``, put the root of a moved copy on ``PYTHONPATH``), else the path the run imported it
    by (``root/pkg/mod.py``, :func:`_imported_path`) no longer leading to it, a symbolic link gone or changed (fix:
    restore that path, and put ``root`` back on ``PYTHONPATH`` when it is off ``sys.path``), else ``root`` off
    ``sys.path`` (fix: put it back on ``PYTHONPATH``), else the name finds another package first (fix: restore the
    package)."""
    on_path = root.resolve() in _sys_path()
    if not file.is_file():
        fix = f"restore that file (the same content, sha256 {_short(sha)}) at {file}"
        fix += ("" if on_path else ", or put the package root of the folder it was moved to on PYTHONPATH")
        return fix, ", which is gone (renamed or deleted)"
    imported = _imported_path(module, file, root)
    if os.path.realpath(imported) != os.path.realpath(file):  # the symbolic link it was imported through is gone
        back = "" if on_path else f", and put its package root {root} back on PYTHONPATH (e.g. PYTHONPATH={root})"
        return (f"restore {imported} (the path the run imported it by, through a symbolic link) so that it leads to "
                f"{file} again{back}, or run from the directory the run was started in"), ""
    if not on_path:
        return (f"put its package root {root} back on PYTHONPATH (e.g. PYTHONPATH={root}), as when the run started, "
                "or run from the directory the run was started in"), ""
    top = module.split(".")[0]
    return (f"make {module!r} find {file} again: its package root {root} is on sys.path, but the name finds another "
            f"{top!r} first (earlier on sys.path, or imported already): remove or rename that one, or run from the "
            "directory the run was started in"), ""


def _imported_path(module: str, file: Path, root: Path) -> Path:
    """The path by which the dotted module name ``module`` imports from the package root ``root`` (``root/pkg/mod.py``,
    or ``root/pkg/mod/__init__.py`` when the recorded ``file`` is a package's ``__init__.py``): ``file`` itself,
    unless a symbolic link on the way leads there."""
    parts = module.split(".")
    if file.name == "__init__.py":
        return root.joinpath(*parts, "__init__.py")
    return root.joinpath(*parts[:-1], f"{parts[-1]}{file.suffix}")


def _sys_path() -> set[Path]:
    """The folders on ``sys.path`` now, resolved (``""``: the working directory)."""
    return {Path(p or ".").resolve() for p in sys.path if isinstance(p, str)}


def _is_file_name(module: str) -> bool:
    """Whether a plug-in reward's module part names a file (``rw.py``, ``dir/rw``), as the plug-in loader reads it."""
    return module.endswith(".py") or "/" in module or "\\" in module


def _start_dir(module: str, file: Path) -> Path | None:
    """The folder, if it still exists, from which the relative file name ``module`` (``rw.py``, ``sub/rw.py``) named
    ``file``; None for an absolute name, or a ``..`` in it."""
    name = Path(module).expanduser()
    if name.is_absolute() or ".." in name.parts or list(file.parts[-len(name.parts):]) != list(name.parts):
        return None
    start = Path(*file.parts[:-len(name.parts)])
    return start if start.is_dir() else None


def _findable(module: str) -> bool:
    """Whether a plug-in reward's module (a dotted name, or a file name from the working directory) is found now
    (a dotted name: by :func:`importlib.util.find_spec`, which imports its parent packages; one that raises
    counts as found: its code, not the path, is what fails)."""
    if _is_file_name(module):
        return Path(module).expanduser().resolve().is_file()
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
    except Exception:  # a parent package raising on import: found, but broken (the caller's error says so)
        return True


def _package_root(spec: str, file: Path, recorded: str | None = None) -> Path | None:
    """The folder that must be on ``sys.path`` for the module reward ``spec`` (``pkg.mod:fn``) to import ``file``
    (``.../pkg/mod.py`` or ``.../pkg/mod/__init__.py`` -> ``...``): the run's record ``recorded``
    (``reward_plugin.package_root``, absolute, as imported: a package reached through a symbolic link, whose
    resolved ``file`` ends in ``realpkg/mod.py``) when there is one, else read from ``file``'s path; None for a
    ``FILE.py:fn`` reward or, without a record, a file whose path does not end in the name's parts."""
    module = spec.rpartition(":")[0].strip()
    if _is_file_name(module):
        return None
    if recorded is not None:
        return Path(recorded)
    parts = module.split(".")
    tail = file.parent.parts if file.name == "__init__.py" else file.with_suffix("").parts
    if list(tail[-len(parts):]) != parts or len(tail) <= len(parts):
        return None
    return Path(*tail[:-len(parts)])


def _short(sha) -> str:
    """The first 12 hex digits of a sha256 (``unknown`` for None)."""
    return str(sha)[:12] if sha else "unknown"


def _what_differs(spec: str, then: tuple, now: tuple) -> str:
    """What differs between the recorded ``(file, sha256)`` of reward ``spec`` and this process's."""
    (old_file, old_sha), (new_file, new_sha) = then, now
    if old_file == new_file:
        return (f"reward {spec!r} resolves to {new_file} as when the run started, but the file was edited "
                f"(sha256 {_short(old_sha)} then, {_short(new_sha)} now)")
    if old_file and not Path(old_file).exists():  # a moved folder: the recorded path is no file to restore
        return (f"the run started with reward {spec!r} from {old_file} (sha256 {_short(old_sha)}), which no longer "
                f"exists (moved?), and the name finds {new_file} now, whose content differs (sha256 "
                f"{_short(new_sha)})")
    return (f"reward {spec!r} resolves to {new_file}, not to {old_file} as when the run started (path moved) "
            f"and the file differs (sha256 {_short(old_sha)} then, {_short(new_sha)} now)")


def _restart(out: Path) -> str:
    """The other way out of a refused resume: a new run (a study's run: a new study) under a new --out."""
    study = study_above(out)
    return (f"or start a new study under a new --out (not {study})" if study is not None else
            f"or start a new run under a new --out (not {out})")


def _file_gone(then: tuple, now: tuple) -> bool:
    """Whether a plug-in reward's recorded file (``then``: file, sha256) is not the one its name finds now (``now``)
    and no longer exists: moved away, so its fix is to pass a file of the recorded content (:func:`_identity_fix`),
    which resumes the run."""
    return bool(then[0]) and then[0] != now[0] and not Path(then[0]).exists()


def _refusal(message: str, resume_fix: str | None = None) -> RunConfigMismatchError:
    """A refused resume, with ``resume_fix`` (the fix that lets the same command resume the run, ``"to resume it,
    ..."``; None: its fix is a new run) as its attribute of that name (see the module docstring)."""
    error = RunConfigMismatchError(message)
    error.resume_fix = resume_fix
    return error


def _identity_fix(out: Path, spec: str, then: tuple, now: tuple, recorded_root: str | None = None) -> str:
    """The fix for a resume whose plug-in reward changed: restore the recorded file (or, where it would help, run from
    the directory the run started in: :func:`_start_dir_clause`; a ``pkg.mod:fn`` reward: put its package root back
    on ``PYTHONPATH``, or, already on ``sys.path``, make the name find it before the copy it finds now), or start over
    elsewhere (a study's run: a new study). A recorded file that no longer exists: pass a file of the recorded content.
    ``recorded_root``: the record's ``package_root`` (:func:`_package_root`)."""
    (old_file, old_sha), new_file = then, now[0]
    if _file_gone(then, now):
        return (f"to resume it, pass the same file as the reward: the content recorded (sha256 {_short(old_sha)}), "
                f"e.g. {new_file} restored as it was, {_restart(out)}; nothing was loaded or written")
    root = _package_root(spec, Path(old_file), recorded_root) if old_file and old_file != new_file else None
    if root is not None and root.resolve() in _sys_path():  # on the path, after the copy the name finds first
        where = (f"make the name find it first (its package root {root} is on sys.path, after {new_file}: remove or "
                 "rename that copy), or run from the directory the run was started in")
    elif root is not None:
        where = f"put its package root {root} back on PYTHONPATH, or run from the directory the run was started in"
    else:
        where = _start_dir_clause(spec, old_file, new_file)
    restore = f"restore the reward file as it was ({old_file}, sha256 {_short(old_sha)})"
    return (f"{restore} or {where}, " if where else f"{restore}, ") + f"{_restart(out)}; nothing was loaded or written"


def _start_dir_clause(spec: str, old_file, new_file) -> str | None:
    """Where running from the directory the run started in would find the recorded file again: ``run from START, the
    directory the run was started in`` for a ``FILE.py:fn`` reward whose relative name (``rw.py``, ``sub/rw.py``) finds
    another file (``new_file``) than the recorded one (``old_file``) from this working directory (``START``:
    :func:`_start_dir`; the clause without it where that folder cannot be told: a ``..`` in the name, a file reached
    through a symbolic link), and for a ``pkg.mod:fn`` reward found elsewhere on ``sys.path``; else None: the same file
    edited in place (a comment-only edit too), an absolute file name, or this working directory already ``START``
    (running from there finds the same file as now)."""
    if not old_file or old_file == new_file:
        return None
    module = spec.rpartition(":")[0].strip()
    generic = "run from the directory the run was started in"
    if not _is_file_name(module):
        return generic
    if Path(module).expanduser().is_absolute():
        return None
    start = _start_dir(module, Path(old_file))
    if start is None:
        return generic
    try:
        here = Path.cwd().resolve()
    except OSError:  # the working directory was deleted: not the start one, which still exists
        here = None
    return None if start.resolve() == here else f"run from {start}, the directory the run was started in"


#: The key of ``config.json`` holding the identity of the initial weights a run loaded (:func:`check_model_weights`).
MODEL_WEIGHTS = "model_weights"
#: Weight files larger than this together (bytes) are identified by a sampled sha256 of their content, not hashed
#: whole (hashing 2 GiB takes a few seconds on one core; a 7B model's 15 GB would take a minute at every start and
#: resume).
HASH_LIMIT_BYTES = 2 * 1024 ** 3
#: Pieces (of :data:`SAMPLE_BYTES` each) read from every weight file past :data:`HASH_LIMIT_BYTES`: its first and
#: last bytes (the safetensors header names every tensor's shape and place) and pieces evenly spaced between them
SAMPLES, SAMPLE_BYTES = 64, 1 << 20
_HEX = frozenset("0123456789abcdef")
#: The files beside the weights that define the model ``from_pretrained`` builds and the tokenizer it reads: its
#: architecture settings (``config.json``: a changed ``rms_norm_eps`` or ``rope_theta`` is another model with the
#: same weights), its generation defaults (end-of-sequence ids) and its tokenizer and chat template. Recorded by
#: sha256 in ``model_weights["model_files"]`` (:func:`model_weights_identity`); a GGUF file holds them all.
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model",
               "chat_template.jinja", "chat_template.json",
               "gradprobe_tier.json")  # the tier marker: with it the tokenizer loads as PreTrainedTokenizerFast


def model_weights_identity(spec: str) -> dict | None:
    """The identity of the weights :func:`gradprobe.models.load_policy` would load for the model ``spec`` now, read
    from the files without loading them: ``{"source", "path", "build", "files", "method", "digest",
    "model_files"}``.

    ``source``: ``"tier"`` (an alias of :data:`gradprobe.models.TIER_ALIASES`, resolved by
    :func:`gradprobe.tiers.tier_path`: ``build`` ``"cache"`` or ``"shipped"``, ``path`` its folder), ``"folder"``
    (a local folder: its ``*.safetensors``), ``"gguf"`` (a ``.gguf`` file, ``smollm2-135m``'s included) or ``"hub"``
    (a hub id: ``path`` is the id, ``digest`` None: not read locally, so not checked; any name that finds no local
    folder now, a relative one from another working directory included). ``path`` of a tier, folder or GGUF file is
    its folder, resolved and absolute (a relative ``spec`` is resolved against the working directory now: see the
    module docstring). ``files``: the weight files'
    names. ``method`` ``"sha256"``: ``digest`` is the sha256 of the one weight file (as ``sha256sum`` prints it), or
    of the ``sha256sum`` listing (``"<sha256>  <name>\\n"`` per file, sorted by name) of several; ``"sampled-sha256"``
    (more than :data:`HASH_LIMIT_BYTES` together): the same listing of each file's size and the sha256 of
    :data:`SAMPLES` pieces of it (:func:`_sampled_sha256`): content alone, so a copy (another path, another
    modification time) is the same weights and a rebuilt or replaced model, which differs throughout, is not.
    ``model_files`` (a tier or a folder): ``{name: sha256}`` of the :data:`MODEL_FILES` beside the weights (its
    ``config.json``, generation defaults, tokenizer and chat template): the same weights under an edited
    ``config.json`` (``rms_norm_eps``, ``rope_theta``) are another model.
    None for the generated models (``tiny-qwen2``, ``tiny-llama``:
    a function of the seed) and for a spec that cannot be resolved now (unbuilt tier, missing path: the loader's
    error names it).
    """
    from ..models import TIER_ALIASES, TINY_ARCHITECTURES, loaded_weight_files, smollm2_gguf_path  # torch: a run's
    from ..tiers import cache_root, tier_path

    try:
        if spec in TINY_ARCHITECTURES:
            return None
        if spec in TIER_ALIASES:
            folder = tier_path(spec)  # a cache build may be a symlink: which root it sits in decides its build
            folder = folder.parent.resolve() / folder.name
            build = "cache" if folder.parent == cache_root().resolve() else "shipped"
            return {"source": "tier", "build": build, **_weights_digest(folder, ["model.safetensors"]),
                    "model_files": _model_files(folder)}
        if spec == "smollm2-135m" or spec.endswith(".gguf"):
            path = (smollm2_gguf_path() if spec == "smollm2-135m" else Path(spec).expanduser()).resolve()
            return {"source": "gguf", **_weights_digest(path.parent, [path.name])} if path.is_file() else None
        folder = Path(spec).expanduser()
        if folder.is_dir():
            names = loaded_weight_files(folder)  # the loader's rule: model.safetensors beside an index wins
            return ({"source": "folder", **_weights_digest(folder.resolve(), names),
                     "model_files": _model_files(folder)} if names else None)
    except (OSError, ValueError):  # not built, unreadable: the loader's own error names it
        return None
    return {"source": "hub", "path": spec, "files": [], "method": None, "digest": None}


def _weights_digest(folder: Path, names: list[str]) -> dict:
    """``path``, ``files``, ``method`` and ``digest`` of the weight files ``names`` in ``folder``
    (:func:`model_weights_identity`), and ``links`` (only when one is a symbolic link): ``{name: the file it points
    to, resolved}``, which names a re-pointed link (:func:`_relinked`); the digest is of the content alone. Raises
    OSError for an unreadable file."""
    import hashlib

    stats = [(n, (folder / n).stat()) for n in names]
    if sum(s.st_size for _, s in stats) > HASH_LIMIT_BYTES:
        lines = "".join(f"{_sampled_sha256(folder / n, s.st_size)} {s.st_size}  {n}\n" for n, s in stats)
        method, digest = "sampled-sha256", hashlib.sha256(lines.encode()).hexdigest()
    else:
        from ..tasks import file_sha256

        shas = [file_sha256(folder / n, chunk=1 << 22) for n in names]
        method = "sha256"
        digest = shas[0] if len(shas) == 1 else hashlib.sha256(
            "".join(f"{s}  {n}\n" for s, n in zip(shas, names)).encode()).hexdigest()
    links = {n: str((folder / n).resolve()) for n in names if (folder / n).is_symlink()}
    return {"path": str(folder), "files": list(names), "method": method, "digest": digest,
            **({"links": links} if links else {})}


def _model_files(folder: Path) -> dict:
    """``{name: sha256}`` of the :data:`MODEL_FILES` that are readable files in ``folder`` (sorted by name). One that
    cannot be read is left out, as if absent (the loader fails on it if it reads it): a file readable then and not
    now, or the reverse, is a difference, and one unreadable file never switches the weights' check off."""
    from ..tasks import file_sha256

    found = {}
    for n in sorted(MODEL_FILES):
        try:
            if (folder / n).is_file():
                found[n] = file_sha256(folder / n)
        except OSError:
            continue
    return found


def _index_rule_files(folder: Path) -> list[str] | None:
    """The weight files gradprobe recorded for the model folder ``folder`` before it followed ``from_pretrained``'s
    rule (:func:`gradprobe.models.loaded_weight_files`): the shards its ``model.safetensors.index.json`` maps tensors
    to, even beside a ``model.safetensors`` (which the loader reads instead, ignoring the index); None when the
    folder has no such index now."""
    try:
        shards = set(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return sorted(shards) if all(isinstance(n, str) for n in shards) else None


def _former_rule_record(then: dict, now: dict | None) -> bool | None:
    """Whether a run's recorded ``model_weights`` (``then``) of a model folder was written by gradprobe's former rule
    (:func:`_index_rule_files`: the shards of an index beside ``model.safetensors``, not the ``model.safetensors``
    the run loaded) and what those shards hold now: None when it was not (``now``, the identity now, loads other
    files than ``model.safetensors`` of a folder, or the record names other files than the index's shards); True
    when the shards hash to the recorded digest (same method) now, False when they do not (or cannot be read). The
    ``model.safetensors`` the run loaded was never hashed, so True cannot confirm it: the resume says so
    (:func:`check_model_weights`)."""
    if (now is None or "folder" != then["source"] or "folder" != now["source"] or now["files"] != ["model.safetensors"]
            or then["files"] == now["files"] or then["files"] != _index_rule_files(Path(now["path"]))):
        return None
    try:
        again = _weights_digest(Path(now["path"]), then["files"])
    except OSError:
        return False
    return (again["method"], again["digest"]) == (then.get("method"), then["digest"])


def _sampled_sha256(path: Path, size: int) -> str:
    """The sha256 of :data:`SAMPLES` pieces of :data:`SAMPLE_BYTES` of the file ``path`` (``size`` bytes): its first
    and last piece and pieces evenly spaced between them (64 MiB read, whatever the file's size)."""
    import hashlib

    h = hashlib.sha256()
    last = max(0, size - SAMPLE_BYTES)
    with open(path, "rb") as f:
        for k in range(SAMPLES):
            f.seek(last * k // (SAMPLES - 1))
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def model_weights_problem(record) -> str | None:
    """What is wrong with a recorded ``model_weights`` (``config.json``'s, :func:`model_weights_identity`): None when
    it is an object with ``source`` (one of tier, folder, gguf, hub, given), ``path`` (text), ``digest`` (64
    lowercase hex digits with ``method`` sha256 or sampled-sha256; null only for a hub id or a policy given in code:
    a tier, folder or GGUF file is always hashed) and, where present, ``model_files`` (an object of file names to
    64 lowercase hex digits) and ``links`` (an object of names of ``files`` to text); else what it is and why, for a
    "damaged" refusal (hex digits are lowercase, as ``hashlib`` and ``sha256sum`` write them: an uppercase digest was
    written by hand)."""
    if not isinstance(record, dict):
        return f"is {json_short(record)}, not an object"
    source, digest, files = record.get("source"), record.get("digest"), record.get("model_files", {})
    names, links = record.get("files", []), record.get("links", {})
    if source not in ("tier", "folder", "gguf", "hub", "given") or not isinstance(record.get("path"), str):
        why = "\"source\" one of \"tier\", \"folder\", \"gguf\", \"hub\", \"given\" and \"path\" (text)"
    elif not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        why = "\"files\" a list of the weight files' names"
    elif source == "tier" and record.get("build") not in ("shipped", "cache"):
        why = "\"build\" \"shipped\" or \"cache\" (a tier's)"
    elif digest is None and source in ("tier", "folder", "gguf"):
        why = f"a \"digest\": a {source}'s weights are always hashed"
    elif digest is not None and not (_is_sha256(digest) and record.get("method") in ("sha256", "sampled-sha256")):
        why = ("\"digest\" 64 lowercase hex digits (as sha256sum prints them) with \"method\" \"sha256\" or "
               "\"sampled-sha256\"")
    elif not (isinstance(files, dict) and all(k in MODEL_FILES and _is_sha256(v) for k, v in files.items())):
        why = (f"\"model_files\" an object of file names ({', '.join(MODEL_FILES)}) to sha256s (64 lowercase hex "
               "digits)")
    elif not (isinstance(links, dict) and all(k in names and isinstance(v, str) for k, v in links.items())):
        why = "\"links\" an object of weight file names (of \"files\") to the paths those links point to"
    else:
        return None
    return f"is {json_short(record)}; it needs {why}"


def check_model_weights(out, spec: str, current: dict | None) -> None:
    """Refuse to resume the run in ``out`` when its model ``spec`` now resolves to other initial weights than the run
    recorded when it started (``config.json``'s ``model_weights``, :func:`model_weights_identity`), before anything
    is loaded or written. The policy itself comes back from the checkpoint, but the frozen copy of the initial policy
    that ``kl_init`` (``metrics.jsonl``) is measured against is loaded from ``spec`` again: from a rebuilt tier in the
    cache (which takes precedence over the shipped build), or a folder whose weights were replaced, the rest of the
    run would measure it against another model than its first updates, with nothing in the folder to tell.

    Parameters
    ----------
    out : path
        The run folder; checked only when it holds a checkpoint to resume (``checkpoint.json``) and a ``config.json``.
    spec : str
        The run's ``[model] name`` (the same as in ``config.json``: a resume checks that first).
    current : dict or None
        :func:`model_weights_identity` of ``spec`` now; a ``"given"`` one (a policy passed to
        :func:`gradprobe.training.run.run_training`): nothing is checked. None (a generated model, a spec that does
        not resolve now) or a ``"hub"`` identity: checked only against a record of a local folder or GGUF file
        (:func:`model_weights_comparable`), which the name no longer finds.

    Raises
    ------
    RunConfigMismatchError
        The digest differs from the recorded one (same ``method``, or the method changed: other files), or the
        source (a hub id then, a local folder of that name now; a local folder or file then, whose name finds none
        now: a relative name from another working directory), or the same weights with other ``model_files`` (an
        edited ``config.json`` or tokenizer: :func:`model_files_differences`): one line naming the run folder, the
        model, what differs (both weights: build or path and digest, 12 hex digits; or each file and both sha256s)
        and the fix that resumes the run (:func:`model_weights_mismatch`; also its ``resume_fix`` attribute), or
        start a new run under a new --out. The same weights and files at another path resume, with a note on stderr.
    DamagedRunFolderError
        ``config.json`` cannot be read, or its ``model_weights`` is damaged or contradicts what ``spec`` is
        (:func:`model_record_problem`); checked where ``current`` has a digest or the record is compared.

    A run folder from before the identity was recorded (no ``model_weights``) resumes, with one note on stderr
    saying that its initial weights could not be checked; one from before ``model_files`` was recorded resumes on
    the same weights with a note that those files could not be checked.
    """
    out = Path(out)
    cfg = out / CONFIG_JSON
    if (not (out / CHECKPOINT_POINTER).is_file() or not cfg.is_file()
            or (current is not None and current["source"] == "given")):
        return
    hashed = current is not None and current.get("digest") is not None
    recorded = _recorded_weights(out, spec, current, strict=hashed)
    if recorded is not None and recorded["source"] == "given" and hashed:  # said, as a run from before the record
        print(f"note: {out} records that its initial weights were passed in code ({CONFIG_JSON} {MODEL_WEIGHTS} "
              f"source 'given'), so whether model {spec!r} ({_weights_text(current)}) loads the weights the run "
              "started from (the initial policy kl_init is measured against) could not be checked; resuming",
              file=sys.stderr, flush=True)
        return
    if recorded is None or not model_weights_comparable(recorded, current):
        return
    former = _former_rule_record(recorded, current)
    differs = model_weights_mismatch(spec, recorded, current, former=former)
    if differs is not None:
        kind, what, fix = differs
        raise _refusal(f"{out} cannot be resumed: {what}{_WHY[kind]}; {fix}, {_restart(out)}; nothing was loaded or "
                       "written", fix)
    if former:
        print(f"note: {out} recorded its initial weights by gradprobe's former rule: the shards that "
              f"{current['path']}/model.safetensors.index.json names ({', '.join(recorded['files'])}; unchanged "
              f"since: digest {_short(recorded['digest'])}), not the model.safetensors beside it, which "
              f"from_pretrained reads (and the run loaded), so whether {_weights_text(current)} is the file the run "
              "started from could not be checked; resuming", file=sys.stderr, flush=True)
        recorded = {**recorded, "path": current["path"]}  # its path note would call the unchecked weights the same
    _same_weights_notes(out, spec, recorded, current)


#: Why a resume on another model (:func:`model_weights_mismatch`'s kind) would be wrong, after what differs.
_WHY = {"weights": " as when the run started, so the initial policy its kl_init is measured against would be another "
                   "model than in its first updates",
        "missing": ", and the initial policy its kl_init is measured against would not be loaded from the weights "
                   "of its first updates",
        "former": ", so the folder changed since the run started, and the initial policy its kl_init is measured "
                  "against may be another model than in its first updates",
        "files": ", so the model built from them (its architecture settings, generation defaults, tokenizer or chat "
                 "template) would not be the one its checkpoint and first updates were made with"}


def _recorded_weights(out: Path, spec: str, current: dict | None, *, strict: bool) -> dict | None:
    """``config.json``'s ``model_weights`` of the run in ``out``, sound (:func:`model_record_problem`), for
    :func:`check_model_weights`; None when there is none (a run from before it was recorded: a note on stderr when
    ``current`` is hashed). With ``strict`` (``current`` has a digest; else a record of a local folder or file
    only): DamagedRunFolderError for an unreadable file or a damaged record; without it those are None."""
    cfg = out / CONFIG_JSON
    try:
        config = json.loads(cfg.read_text())
        recorded = config.get(MODEL_WEIGHTS)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
        if not strict:
            return None
        raise DamagedRunFolderError(f"{cfg} is damaged ({error_text(e)}); restore it from a copy, or delete {out} "
                                    "to start the run over") from None
    if MODEL_WEIGHTS not in config:
        if strict:
            print(f"note: {out} was started before gradprobe recorded the identity of a run's initial weights, so "
                  f"whether model {spec!r} ({_weights_text(current)}) still loads the weights the run started from "
                  "(the initial policy kl_init is measured against) could not be checked; resuming",
                  file=sys.stderr, flush=True)
        return None
    problem = model_record_problem(spec, recorded, current)
    if problem is not None and (strict or isinstance(recorded, dict) and recorded.get("source") in LOCAL_SOURCES):
        raise DamagedRunFolderError(f"{cfg} is damaged (field {MODEL_WEIGHTS} {problem}): the initial weights the "
                                    f"run started from cannot be checked; restore the file from a copy, or delete "
                                    f"{out} to start the run over")
    return recorded if problem is None else None


#: The sources of a weights identity read from local files by a path (:func:`model_weights_identity`): a name that
#: finds none of them now is refused, not read as a hub id (:func:`model_weights_comparable`).
LOCAL_SOURCES = ("folder", "gguf")


def model_record_problem(spec: str, record, current: dict | None) -> str | None:
    """What is wrong with a recorded ``model_weights`` (``record``) of a run of the model ``spec``, whose identity
    now is ``current`` (:func:`model_weights_identity`, None: none): :func:`model_weights_problem`, or a ``source``
    that contradicts what ``spec`` is (a tier recorded as a hub id or a folder; the same weights under another
    source: a hand edit, whose mismatch fix would be impossible), as ``"records source 'hub' for model 'tiny',
    which is a tier here"``, or a ``method`` that contradicts its digest (the digest ``current`` has, under another
    method: ``method`` alone was edited, which read as other weights); None when it is sound. One check for a run's
    resume (:func:`check_model_weights`), a study's remaining runs (:func:`gradprobe.study.freeze.check_study_model`)
    and ``--reuse-runs`` (:func:`gradprobe.study.reuse.reuse_runs`)."""
    problem = model_weights_problem(record)
    if problem is not None or current is None or "given" in (record["source"], current["source"]):
        return problem
    if record["source"] != current["source"] and (record["digest"] == current["digest"]
                                                  or current["source"] == "tier"):
        return f"records source {record['source']!r} for model {spec!r}, which is a {current['source']} here"
    if record["digest"] is not None and record["digest"] == current["digest"] and record["method"] != current["method"]:
        return (f"records \"method\" {record['method']!r} beside the digest that method {current['method']!r} gives "
                f"for the weights model {spec!r} loads now ({_short(record['digest'])}; no two methods give the same "
                f"digest, so \"method\" alone was edited): set it back to {current['method']!r}")
    return None


def model_weights_comparable(then: dict, now: dict | None) -> bool:
    """Whether a sound recorded identity ``then`` is compared with the identity now ``now``
    (:func:`model_weights_mismatch`): neither is a policy given in code, and either ``now`` was hashed (against a
    hashed record, or a hub id then: the name now finds a local folder or file) or ``then`` was read from a local
    folder or GGUF file (:data:`LOCAL_SOURCES`), which the name no longer finds (``now`` None, or a hub id: a relative
    name from another working directory). Otherwise (a hub id or a generated model then and now) nothing can be
    compared, and nothing is checked."""
    if then["source"] == "given" or (now is not None and now["source"] == "given"):
        return False
    return (now is not None and now.get("digest") is not None) or then["source"] in LOCAL_SOURCES


def _same_weights_notes(out: Path, spec: str, recorded: dict, current: dict) -> None:
    """The notes of a resume on the same weights (:func:`check_model_weights`): loaded from another path; or the
    model's files beside the weights not recorded (a run started before gradprobe recorded them)."""
    if recorded["path"] != current["path"]:
        print(f"note: model {spec!r} of {out} is loaded from {current['path']}, not {recorded['path']} as when the "
              f"run started, with the same weights ({_short(current['digest'])}); resuming", file=sys.stderr,
              flush=True)
    if "model_files" not in recorded and current.get("model_files"):
        print(f"note: {out} was started before gradprobe recorded a model's config.json and tokenizer files beside "
              f"its weights, so whether {', '.join(current['model_files'])} in {current['path']} are still the ones "
              "the run started with could not be checked (its weights are the same); resuming",
              file=sys.stderr, flush=True)


def model_weights_mismatch(spec: str, then: dict, now: dict | None, *, former: bool | None | str = "?"
                           ) -> tuple[str, str, str] | None:
    """How the model ``spec`` loads another model now (``now``) than a run recorded when it started (``then``; both
    :func:`model_weights_identity`, ``then`` sound by :func:`model_record_problem` and compared by
    :func:`model_weights_comparable`), as (``"weights"``, ``"files"``, ``"missing"`` or ``"former"``: what differs,
    the weights, only the files beside them, the local weights the name finds no more, or the shards a former-rule
    record hashed; the difference in words; the fix that
    loads the run's model again, ``"to resume it, ..."``), or None when both are the same. ``now`` None or a hub id
    while ``then`` is a local folder or file: the name finds no local weights now (:func:`_not_found_here`). A record
    written by gradprobe's former rule (the shards of an index beside ``model.safetensors``:
    :func:`_former_rule_record`, computed unless given as ``former``) is compared by those shards: unchanged, only
    the files beside the weights are (the resume notes that the ``model.safetensors`` loaded could not be checked);
    changed, the folder is not the one the run started from. A weight file that is a symbolic link re-pointed since
    (``links``, :func:`_relinked`) is named with where it points now and the fix: point it back. Used by a run's
    resume (:func:`check_model_weights`) and where a study's remaining runs would start
    (:func:`gradprobe.study.freeze.check_study_model`)."""
    if now is None or now.get("digest") is None:
        return ("missing", _not_found_here(spec, then, now), _not_found_fix(spec, then))
    former = _former_rule_record(then, now) if former == "?" else former
    if former is False:
        folder = Path(now["path"])
        return ("former", f"model {spec!r} now loads {_weights_text(now)}, which from_pretrained reads beside "
                f"{folder / 'model.safetensors.index.json'}, but the run recorded its initial weights by gradprobe's "
                f"former rule, as the shards that index names ({', '.join(then['files'])}; digest "
                f"{_short(then['digest'])}), and those hold other content now",
                f"to resume it, restore {folder} as it was when the run started (the shards of digest "
                f"{_short(then['digest'])}, and its model.safetensors)")
    if former is None and (then["source"], then.get("method"), then["digest"]) != (now["source"], now.get("method"),
                                                                                   now["digest"]):
        relinked = _relinked(then, now)
        if relinked:
            return ("weights", _relinked_text(spec, then, now, relinked), _relinked_fix(then, now, relinked))
        return ("weights", f"model {spec!r} now loads {_weights_text(now)}, not {_weights_text(then)}",
                _weights_fix(spec, then, now))
    differs = model_files_differences(then, now)
    if differs:
        return ("files", f"model {spec!r} now loads the same weights from {now['path']}, but files beside them "
                f"differ from the run's record: {differs}", _files_fix(spec, then, now))
    return None


def _relative(spec: str, then: dict) -> bool:
    """Whether the model name ``spec`` of a run that recorded ``then`` is a relative path (resolved against the
    working directory): a folder's or a ``.gguf`` file's name, not an alias (``smollm2-135m``: its shipped file)."""
    named = then["source"] == "folder" or spec.endswith(".gguf")
    return named and not Path(spec).expanduser().is_absolute()


def _recorded_target(record: dict) -> Path:
    """The folder (a tier's, a folder's) or GGUF file a weights identity was read from."""
    files = record.get("files") or []
    return Path(record["path"]) / files[0] if record["source"] == "gguf" and files else Path(record["path"])


def _not_found_here(spec: str, then: dict, now: dict | None) -> str:
    """In words: the model ``spec`` named a local folder or file (``then``) when the run started, and finds no
    weights now (``now``: None, or a hub id: what the name would be read as)."""
    name, relative = Path(spec).expanduser(), _relative(spec, then)
    if then["source"] == "gguf" and not spec.endswith(".gguf"):  # an alias: its file
        found = f"{_recorded_target(then)} is missing now"
    elif name.exists():
        found = f"{name} holds no weights it can load now"
    else:
        found = "it names no local folder or file" + (f" from this working directory ({os.getcwd()})"
                                                      if relative else " now")
    hub = ", so it would be read as a hub id" if now is not None and now["source"] == "hub" else ""
    what = " (a relative path)" if relative else ""
    return f"model {spec!r}{what} named {_weights_text(then)} when the run started, but {found}{hub}"


def _not_found_fix(spec: str, then: dict) -> str:
    """How to resume a run whose model name finds no local weights now (:func:`_not_found_here`)."""
    target = _recorded_target(then)
    if target.exists() and _relative(spec, then):
        return (f"to resume it, run the command from the working directory the run was started in (where {spec!r} "
                f"names {target}), or make {spec!r} name {target} from here (a symbolic link to it)")
    if target.exists():
        return f"to resume it, make {spec!r} name {target} again (a symbolic link to it)"
    return (f"to resume it, restore the weights the run started from at {target} (digest {_short(then['digest'])})"
            + (" and run the command from the working directory the run was started in" if _relative(spec, then)
               else ""))


def _other_directory_fix(spec: str, then: dict, now: dict) -> str | None:
    """The fix for a relative model name that finds another local folder or file (``now``) than the run's
    (``then``, still there): run from the working directory the run started in; None for any other difference."""
    old, new = _recorded_target(then), _recorded_target(now)
    if (then["source"] not in LOCAL_SOURCES or now["source"] not in LOCAL_SOURCES or not _relative(spec, then)
            or old == new or not old.exists()):
        return None
    return (f"to resume it, run the command from the working directory the run was started in ({spec!r} is a "
            f"relative path: there it names {old}, here {new})")


def model_files_differences(then: dict, now: dict) -> str | None:
    """Which of the model's files beside its weights (``model_files``, :data:`MODEL_FILES`) differ between two
    weights identities (:func:`model_weights_identity`), as ``"config.json (sha256 0123456789ab then, 89abcdef0123
    now); tokenizer.json (sha256 ... then, absent now)"``; None when they are the same, or when ``then`` did not
    record them (a run started before gradprobe recorded them)."""
    if "model_files" not in then:
        return None
    a, b = then["model_files"], now.get("model_files") or {}
    found = [f"{n} (sha256 {_short(a.get(n)) if n in a else 'absent'} then, "
             f"{_short(b.get(n)) if n in b else 'absent'} now)"
             for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
    return "; ".join(found) or None


def _files_fix(spec: str, then: dict, now: dict) -> str:
    """How to resume a run whose model's files beside its weights changed (:func:`check_model_weights`), for the
    source and build the run recorded (``then``) and the one the name loads now (``now``)."""
    other = _other_directory_fix(spec, then, now)
    if other is not None:
        return other
    where = f"the {now.get('build')} build {now['path']}" if now["source"] == "tier" else now["path"]
    restore = f"restore those files in {where} as they were when the run started"
    if then["source"] == now["source"] == "tier" and (then.get("build"), now.get("build")) == ("shipped", "cache"):
        return (f"to resume it, delete the cache build {now['path']} (or set GRADPROBE_CACHE to a folder without it) "
                f"so that the shipped build {then['path']} the run started from is loaded again, or {restore}")
    return f"to resume it, {restore}"


def _weights_text(record: dict) -> str:
    """A recorded or current weights identity in words, with its digest's first 12 hex digits."""
    files, digest, path = record.get("files") or [], _short(record.get("digest")), record["path"]
    if record["source"] == "hub":
        return f"the hub id {path} (its weights not read from files here)"
    if record.get("method") == "sampled-sha256":
        return f"{path} ({len(files)} weight file(s), sampled sha256 of their content {digest})"
    if record["source"] == "tier":
        return f"the {record.get('build', '?')} build {path} (model.safetensors sha256 {digest})"
    if len(files) == 1:
        return f"{Path(path) / files[0]} (sha256 {digest})"
    return f"{path} ({len(files)} weight files, sha256 of their sha256s {digest})"


def _relinked(then: dict, now: dict) -> list[str]:
    """The weight files of ``now`` (:func:`model_weights_identity`) that are symbolic links (``links``) pointing
    elsewhere than the run's record ``then`` says they pointed (or that it did not record: a run from before links
    were recorded, or a file that was no link then), in the same folder and files as then; [] otherwise (a link
    pointing where it did, whose target's content changed, is other weights at that file: restore them)."""
    if (then["source"], then["path"], then["files"]) != (now["source"], now["path"], now["files"]):
        return []
    old, new = then.get("links") or {}, now.get("links") or {}
    return [n for n in now["files"] if n in new and old.get(n) != new[n]]


def _relinked_text(spec: str, then: dict, now: dict, names: list[str]) -> str:
    """In words: the weight files ``names`` (:func:`_relinked`) are links that point elsewhere now."""
    folder, old = Path(now["path"]), then.get("links") or {}
    links = "; ".join(f"{folder / n} is a symbolic link that points to {now['links'][n]} now"
                      + (f", not to {old[n]}" if n in old else "") for n in names)
    return (f"{links}, so it holds other weights than the run started with: model {spec!r} now loads "
            f"{_weights_text(now)}, not {_weights_text(then)}")


def _relinked_fix(then: dict, now: dict, names: list[str]) -> str:
    """How to resume a run whose weight files ``names`` are links re-pointed since it started: point each back where
    the record says it pointed (``ln -sfn TARGET LINK``), or at the file of the recorded digest."""
    folder, old = Path(now["path"]), then.get("links") or {}
    back = [f"`ln -sfn {shell_word(old[n])} {shell_word(folder / n)}`" for n in names  # quoted for a shell
            if n in old and Path(old[n]).is_file()]
    if len(back) == len(names):
        return f"to resume it, point {'each link' if len(names) > 1 else 'the link'} back: {', '.join(back)}"
    return (f"to resume it, point {', '.join(str(folder / n) for n in names)} back at the weights the run started "
            f"from (digest {_short(then['digest'])})")


def _weights_fix(spec: str, then: dict, now: dict) -> str:
    """How to load the weights a refused resume started from again (:func:`check_model_weights`)."""
    from ..models import tier_damage  # torch: only a run imports this
    if then["source"] == "hub":
        return f"to resume it, move {now['path']} away so that the hub id {then['path']} is loaded again"
    if then["source"] == now["source"] == "tier":
        old, new = Path(then["path"]), Path(now["path"])
        if now.get("build") == "cache" and then.get("build") == "shipped":
            return (f"to resume it, delete the cache build {new} (or set GRADPROBE_CACHE to a folder without it) so "
                    f"that the shipped build {old} is loaded again")
        if then.get("build") == "cache" and old != new and old.parent == _cache_root():  # this cache: not loadable
            if not old.is_dir():
                return (f"to resume it, put the run's build (model.safetensors sha256 {_short(then['digest'])}) back "
                        f"at {old}")
            return (f"to resume it, restore the run's build at {old} (it is not a finished build now: "
                    f"{tier_damage(old, record_needed=True) or 'its warmstart.json is missing'}), for instance its "
                    "warmstart.json from a copy")
        if then.get("build") == "cache" and old != new:
            return (f"to resume it, set GRADPROBE_CACHE={old.parent.parent} (the cache the run's build is in) so "
                    f"that {old} is loaded again" if (old / "model.safetensors").is_file() else
                    f"to resume it, put the run's build (model.safetensors sha256 {_short(then['digest'])}) back at "
                    f"{old} and set GRADPROBE_CACHE={old.parent.parent}")
        return (f"to resume it, restore the build the run started from at {old} (model.safetensors sha256 "
                f"{_short(then['digest'])}; the shipped build changes only with another gradprobe version)")
    other = _other_directory_fix(spec, then, now)
    if other is not None:
        return other
    return f"to resume it, restore the weights the run started from at {then['path']} (digest {_short(then['digest'])})"


def _cache_root() -> Path:
    """:func:`gradprobe.tiers.cache_root`, resolved (imported here: the tiers module is read only by a resume)."""
    from ..tiers import cache_root

    return cache_root().resolve()


def config_differences(then: dict, now: dict, *, limit: int = 4) -> str:
    """The settings two run configurations (:meth:`~gradprobe.training.specs.RunConfig.to_dict`) differ in, as
    ``"train.checkpoint_every: 25 then, 2 now; sampling.temperature: 1.0 then, 0.7 now"``: the sections' own keys
    (dotted), both values (:func:`gradprobe.outputs.json_short`), the first ``limit`` and how many more. A resume
    refused for another configuration named only the sections (``differs in: train``), which left the user to find
    which of its settings had changed."""
    found = []

    def walk(a, b, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                walk(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        elif a != b:
            found.append(f"{path}: {json_short(a, 40)} then, {json_short(b, 40)} now")

    walk(then, now, "")
    more = f"; and {len(found) - limit} more" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more
