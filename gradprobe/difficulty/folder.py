"""Whose output an ``--out`` folder of ``rank-prompts`` / ``difficulty-eval`` holds (torch-free).

Each command writes into an empty folder, a new one, a folder of other files (its files go beside them), or its
own earlier output (which it replaces, saying so when it writes); a folder holding another command's output (a
study, a training run, a probe, a calibration report: :func:`gradprobe.layout.output_kind`; or the other of these
two commands) is refused before any compute. Only a complete earlier output is replaced (the file its command writes
last: ``rank.json``; a ``metrics.json`` that ``difficulty-eval`` wrote, ``"command": "difficulty-eval"``): a folder
holding one of the command's file names without it (a user's ``metrics.json``, a lone ``ranking.csv``) is refused
too, naming the file, so no file the command did not write is overwritten. A file the command writes there that is
a symbolic link in a loop is refused before any compute too, the link left as it was (:func:`refuse_looping_outputs`);
a stale temporary name of its atomic writes (``ranking.csv.tmp``...) that is a link is the writer's own to replace,
never followed (:func:`gradprobe.outputs.open_temporary`).
"""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

from ..layout import OUTPUT_KINDS, output_kind
from ..outputs import OutputDirError, out_option, refuse_looping_file

__all__ = ["RANK_FILES", "EVAL_FILES", "check_output_folder", "refuse_looping_outputs"]

#: The files of ``rank-prompts`` (``rank.json`` written last) and of ``difficulty-eval`` (``metrics.json`` last).
RANK_FILES = ("ranking.csv", "rank.json")
EVAL_FILES = ("reliability.png", "metrics.json")

#: command -> (its files, how a message names its output, what it writes, its kind should
#: :data:`gradprobe.layout.OUTPUT_KINDS` come to name it: then :func:`output_kind` finding it is no refusal)
_OWN = {"rank-prompts": (RANK_FILES, "a ranking (`gradprobe rank-prompts`)", "ranking", "ranking"),
        "difficulty-eval": (EVAL_FILES, "a difficulty evaluation (`gradprobe difficulty-eval`)", "evaluation",
                            "difficulty eval")}


def check_output_folder(out, command: str) -> str | None:
    """Refuse ``out`` when it holds another command's output; else the line to say when it holds our own.

    Parameters
    ----------
    out : path or None
        The ``--out`` folder (None: nothing is written, nothing to check).
    command : str
        ``"rank-prompts"`` or ``"difficulty-eval"``.

    Returns
    -------
    str or None
        ``"replacing the ranking in OUT (written YYYY-MM-DD HH:MM:SS)"`` (the evaluation, for difficulty-eval)
        when ``out`` holds the command's complete earlier output (:func:`_complete`); None otherwise. The caller
        says it when it writes (after every check and the compute), not before: nothing is replaced until then.

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        ``out`` holds a study, a training run, a probe, a calibration report or the other command's output;
        or files named as the command's (``ranking.csv``, ``metrics.json``...) but not its complete earlier output
        (:func:`_complete`), which it would overwrite. One line naming the folder, what it holds (with the file
        that shows it) and the fix (``--out``; inside :func:`gradprobe.outputs.naming_out`, as
        ``gradprobe.rank_prompts`` calls it, the argument: ``out '/x' holds ...: choose another out``). Nothing is
        written.
    OutputDirError (errno ELOOP)
        A file the command writes there is a symbolic link in a loop (:func:`refuse_looping_outputs`); the link is
        left as it was.
    ValueError
        ``command`` is not one of the two.
    """
    if command not in _OWN:
        raise ValueError(f"command must be one of {', '.join(_OWN)}, got {command!r}")
    if out is None or not Path(out).is_dir():
        return None
    folder = Path(out)
    files, _, noun, kind = _OWN[command]
    found = output_kind(folder)
    if found is not None and found[0] != kind:
        what, evidence = OUTPUT_KINDS[found[0]], found[1]
    else:
        other = next(c for c in _OWN if c != command)
        evidence = next((name for name in _OWN[other][0] if (folder / name).exists()), None)
        what = _OWN[other][1]
    option = out_option()  # --out; the argument's name inside gradprobe.rank_prompts (out)
    if evidence is not None:
        raise OutputDirError(errno.EEXIST, (
            f"{option} {str(folder)!r} holds {what} ({evidence}), not the output of `gradprobe {command}`; "
            f"{'an' if noun[0] in 'aeiou' else 'a'} {noun} there would mix its files into it: choose another {option} "
            f"(an empty folder, or an earlier {noun}'s)"))
    refuse_looping_outputs(folder, command)  # exists() is False for a loop: refused here, not after the compute
    earlier = [folder / name for name in files if (folder / name).exists()]
    if not earlier:
        return None
    why = _complete(folder, command)
    if why is not None:
        shown = ", ".join(p.name for p in earlier)
        them = "it" if len(earlier) == 1 else "them"
        raise OutputDirError(errno.EEXIST, (
            f"{option} {str(folder)!r} holds {shown} but {why}, so {'it is' if them == 'it' else 'they are'} no "
            f"earlier {noun}'s: {'an' if noun[0] in 'aeiou' else 'a'} {noun} there would overwrite {them}. Choose "
            f"another {option}, or move {shown} out of {str(folder)!r} (delete {them} if left by a `gradprobe "
            f"{command}` that was killed)"))
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(max(p.stat().st_mtime for p in earlier)))
    return f"replacing the {noun} in {folder} (written {written})"


def refuse_looping_outputs(folder, command: str) -> None:
    """Refuse each file ``command`` writes in ``folder`` (``ranking.csv`` and ``rank.json``, or ``metrics.json`` and
    ``reliability.png``) that is a symbolic link in a loop (``a -> a``, ``a -> b -> a``): the write would fail with
    ELOOP after the compute. Nothing is created or removed, so a refusal leaves the folder and the link as they were.
    The temporary names of the atomic writes (``rank.json.tmp``...) are not checked: a stale one that is a link, a
    loop included, is removed and replaced (:func:`gradprobe.outputs.open_temporary`). One ``lstat`` per name (and
    ``stat`` calls for a link).

    Raises
    ------
    OutputDirError (errno ELOOP)
        :func:`gradprobe.outputs.refuse_looping_file`'s message: ``'OUT/ranking.csv' is a symlink loop (... ->
        ...: ...): remove the link (rm 'OUT/ranking.csv') ..., or choose another --out`` (``out`` inside
        :func:`gradprobe.outputs.naming_out`).
    ValueError
        ``command`` is not ``"rank-prompts"`` or ``"difficulty-eval"``.
    """
    if command not in _OWN:
        raise ValueError(f"command must be one of {', '.join(_OWN)}, got {command!r}")
    for name in _OWN[command][0]:  # RANK_FILES or EVAL_FILES
        refuse_looping_file(Path(folder) / name)


def _complete(folder: Path, command: str) -> str | None:
    """None when ``folder`` holds ``command``'s complete output: the file it writes last, a ``rank.json`` or a
    ``metrics.json`` that the command wrote (a JSON object with ``"command": "rank-prompts"`` or ``"command":
    "difficulty-eval"``: a calibration report, or a user, writes such names too); else why not, as a phrase
    (``"no rank.json"``, ``"metrics.json was not written by difficulty-eval (...)"``)."""
    last = folder / _OWN[command][0][-1]
    if not last.is_file():
        return f"no {last.name}"
    try:
        recorded = json.loads(last.read_text()).get("command")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        recorded = None
    if recorded == command:
        return None
    return f'{last.name} was not written by {command} (it holds no "command": "{command}")'
