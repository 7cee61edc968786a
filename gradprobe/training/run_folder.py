"""Which folders a training run may write into (``gradprobe train --out DIR``, :func:`run_training`).

A run writes ``checkpoint-*``, ``config.json``, ``metrics.jsonl`` and ``summary.json``: into a folder
that holds another command's output they would mix with it (and a probe would then refuse its own
folder as "a training run"). :func:`refuse_other_output` refuses such a folder before anything is
loaded or written, as ``gradprobe probe`` refuses a run's folder (:mod:`gradprobe.probe.output`), and, for
``gradprobe train`` and :func:`gradprobe.train` (``outside_studies``), any folder inside a study (its
``runs/``, ``figures/``, one of its runs: ``gradprobe study`` runs and resumes those). A model's folder (a tier,
``save_pretrained`` weights: :func:`gradprobe.layout.output_kind`) is refused too: the run's ``config.json`` would
replace the model's. So is a file in the way. Any other folder is accepted: a new or empty one, a run's own folder
(a resume), or a folder of other files (the run's files go beside them). Torch-free.

A run with a plug-in reward (``rw.py:brevity``, ``my_rewards:brevity``) records in ``config.json`` which code its
name found (``reward_plugin``: the module's resolved file and its sha256,
:func:`gradprobe.rewards.plugin.plugin_identity`); :func:`check_reward_identity` refuses to resume it with other code
(the name run from another directory, or the file edited), which would train the rest of the run with another reward.
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

from ..layout import CHECKPOINT_POINTER, CONFIG_JSON, OUTPUT_KINDS, STUDY_JSON, output_kind
from ..outputs import OutputDirError, error_text, refuse_file_in_the_way
from .errors import DamagedRunFolderError, RunConfigMismatchError

__all__ = ["RUN_LOCK", "REWARD_PLUGIN", "other_output", "refuse_other_output", "study_above", "check_reward_identity"]

#: The lock file of a run folder: ``gradprobe train`` (:func:`gradprobe.study.folder.hold_run_folder`) and a study's
#: worker hold an exclusive ``flock`` on it (:class:`gradprobe.study.folder.FolderLock`) while they train there.
RUN_LOCK = ".lock"
#: The key of ``config.json`` holding a plug-in reward's identity (:func:`check_reward_identity`).
REWARD_PLUGIN = "reward_plugin"

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
        file, not a folder; choose another --out``). Nothing is read or written.
    """
    refuse_file_in_the_way(out)  # else the lock file's opening fails with a message naming a path inside a file
    study = study_above(out) if outside_studies else None
    if study is not None:
        raise OutputDirError(errno.EEXIST, (
            f"{out} is inside the study {study} ({STUDY_JSON}): its runs are trained and resumed by `gradprobe "
            f"study --out {study}`; for a run of your own choose an --out outside the study"))
    what = other_output(out)
    if what is not None:
        raise OutputDirError(errno.EEXIST, (
            f"{out} holds {what}, not a training run; a run there would write its checkpoints, config.json, "
            "metrics.jsonl and summary.json into it: choose another --out (a new or empty folder, or a run's "
            "own folder to resume it)"))


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
        or run from the directory the run started in; or start a new run under a new --out).
    DamagedRunFolderError
        ``config.json`` cannot be read, or its ``reward_plugin`` is not an object with ``file`` and ``sha256``
        (named, with the fix).

    A run folder from before the identity was recorded (no ``reward_plugin``) resumes, with one note on stderr
    saying that the reward could not be checked.
    """
    out = Path(out)
    cfg = out / CONFIG_JSON
    if current is None or not (out / CHECKPOINT_POINTER).is_file() or not cfg.is_file():
        return
    try:
        recorded = json.loads(cfg.read_text()).get(REWARD_PLUGIN)
    except (UnicodeDecodeError, ValueError, AttributeError) as e:  # read once before the resume: changed since
        raise DamagedRunFolderError(f"{cfg} is damaged ({error_text(e)}); restore it from a copy, or delete {out} "
                                    "to start the run over") from None
    if recorded is None:
        print(f"note: {out} was started before gradprobe recorded a plug-in reward's file and sha256, so whether "
              f"reward {spec!r} ({current['file']}, sha256 {_short(current['sha256'])}) is the code it was trained "
              "with could not be checked; resuming", file=sys.stderr, flush=True)
        return
    if not isinstance(recorded, dict) or not {"file", "sha256"} <= set(recorded):
        raise DamagedRunFolderError(
            f"{cfg} is damaged ({REWARD_PLUGIN} is not an object with file and sha256): the reward the run was "
            f"trained with cannot be checked; restore the file from a copy, or delete {out} to start the run over")
    then, now = (recorded["file"], recorded["sha256"]), (current["file"], current["sha256"])
    if then[1] == now[1] and then[0] != now[0]:  # the same code from another place (a moved project): resumable
        print(f"note: reward {spec!r} of {out} is read from {now[0]}, not {then[0]} as when the run started, with the "
              f"same content (sha256 {_short(now[1])}); resuming", file=sys.stderr, flush=True)
        return
    if then != now:
        raise RunConfigMismatchError(f"{out} cannot be resumed: {_what_differs(spec, then, now)}, so its remaining "
                                     f"updates would train another reward than its first ones; "
                                     f"{_identity_fix(out, then)}")


def _short(sha) -> str:
    """The first 12 hex digits of a sha256 (``unknown`` for None)."""
    return str(sha)[:12] if sha else "unknown"


def _what_differs(spec: str, then: tuple, now: tuple) -> str:
    """What differs between the recorded ``(file, sha256)`` of reward ``spec`` and this process's."""
    (old_file, old_sha), (new_file, new_sha) = then, now
    if old_file == new_file:
        return (f"reward {spec!r} resolves to {new_file} as when the run started, but the file was edited "
                f"(sha256 {_short(old_sha)} then, {_short(new_sha)} now)")
    return (f"reward {spec!r} resolves to {new_file}, not to {old_file} as when the run started (path moved) "
            f"and the file differs (sha256 {_short(old_sha)} then, {_short(new_sha)} now)")


def _identity_fix(out: Path, then: tuple) -> str:
    """The fix for a resume whose plug-in reward changed: restore the recorded file (or run from the directory the
    run started in), or start over elsewhere (a study's run: a new study)."""
    old_file, old_sha = then
    study = study_above(out)
    restart = (f"or start a new study under a new --out (not {study})" if study is not None else
               f"or start a new run under a new --out (not {out})")
    return (f"restore the reward file as it was ({old_file}, sha256 {_short(old_sha)}) or run from the directory the "
            f"run was started in, {restart}; nothing was loaded or written")
