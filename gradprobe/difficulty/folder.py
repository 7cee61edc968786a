"""Whose output an ``--out`` folder of ``rank-prompts`` / ``difficulty-eval`` holds (torch-free).

Each command writes into an empty folder, a new one, or its own earlier output (which it replaces, saying so);
a folder holding another command's output (a study, a training run, a probe, a calibration report:
:func:`gradprobe.layout.output_kind`; or the other of these two commands) is refused before any compute.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path

from ..layout import OUTPUT_KINDS, output_kind
from ..outputs import OutputDirError

__all__ = ["RANK_FILES", "EVAL_FILES", "check_output_folder"]

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
        when ``out`` holds the command's earlier output; None otherwise.

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        ``out`` holds a study, a training run, a probe, a calibration report or the other command's output;
        one line naming the folder, what it holds (with the file that shows it) and the fix. Nothing is
        read or written.
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
    if evidence is not None:
        raise OutputDirError(errno.EEXIST, (
            f"--out {str(folder)!r} holds {what} ({evidence}), not the output of `gradprobe {command}`; "
            f"{'an' if noun[0] in 'aeiou' else 'a'} {noun} there would mix its files into it: choose another --out "
            f"(an empty folder, or an earlier {noun}'s)"))
    earlier = [folder / name for name in files if (folder / name).is_file()]
    if not earlier:
        return None
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(max(p.stat().st_mtime for p in earlier)))
    return f"replacing the {noun} in {folder} (written {written})"
