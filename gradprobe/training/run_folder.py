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
"""

from __future__ import annotations

import errno
from pathlib import Path

from ..layout import OUTPUT_KINDS, STUDY_JSON, output_kind
from ..outputs import OutputDirError, refuse_file_in_the_way

__all__ = ["RUN_LOCK", "other_output", "refuse_other_output", "study_above"]

#: The lock file of a run folder: ``gradprobe train`` (:func:`gradprobe.study.folder.hold_run_folder`) and a study's
#: worker hold an exclusive ``flock`` on it (:class:`gradprobe.study.folder.FolderLock`) while they train there.
RUN_LOCK = ".lock"

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
