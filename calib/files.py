"""Every file calib writes goes through here: gradprobe's atomic writer and its one JSON encoding.

calib writes ``calibration.json`` (``calib fit``), ``calibrated.json`` (``calib apply``), a report's
``metrics.json``, ``report.html``, figures and CSVs (``calib report``), the rows CSV (``calib rows``)
and the forecaster validation record. Each is written atomically with fsync by
:func:`gradprobe.outputs.write_bytes_atomic` (a reader sees the old file or the new one, never half; a target that is,
or lies under, a symbolic link in a loop is refused with nothing written: :func:`gradprobe.outputs.refuse_looping_file`;
this module re-exports the writers and that refusal, which calib's commands call before any work with their own fix),
and JSON in gradprobe's encoding of non-finite floats (:func:`gradprobe.outputs.json_safe`: NaN ->
``null``, +-inf -> ``"inf"``/``"-inf"``; :func:`gradprobe.outputs.json_float` reads them back), so
calibration files written before this module still load. numpy scalars (a pandas aggregate, a
scikit-learn parameter) are written as the Python numbers they hold.

:func:`prepare_report_folder` makes ``calib report``'s ``--out`` folder, refusing a file and another command's
folder: a ``gradprobe probe`` folder (``probe.json``, or a study's ``probe/`` with ``arms.json``) holds a
``report.html`` of its own that the report would replace (``gradprobe probe`` refuses a report's folder likewise),
and a folder holding a killed probe's ``.earlier-probe/`` would strand it. An earlier report is replaced: a folder
holding ``cv_predictions.csv`` and a ``metrics.json`` recording ``"command": "calib report"`` (:data:`REPORT_COMMAND`,
which the report writes into it), or, for a report written before ``metrics.json`` recorded it, every file of
:data:`REPORT_FILES` with a ``metrics.json`` of a report's keys. Files of the report's names in any other folder (a
user's own ``cv_predictions.csv`` beside their ``report.html``) are refused, named, never overwritten; other files are
kept.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

from gradprobe.layout import CV_PREDICTIONS_CSV, EARLIER_PROBE, OUTPUT_KINDS, output_kind
from gradprobe.outputs import (OutputDirError, json_float, json_safe, output_error, refuse_link_loop,
                               refuse_looping_file, write_bytes_atomic, write_text_atomic)

__all__ = ["to_json", "write_json", "write_text_atomic", "write_bytes_atomic", "json_safe", "json_float",
           "prepare_report_folder", "refuse_looping_file", "REPORT_FILES", "REPORT_COMMAND"]

_FIX = "choose another --out (a new or empty folder, or an earlier `calib report` folder)"
#: Every file ``calib report`` writes into its folder (:func:`calib.report.write_report`; the figures are
#: :func:`calib.report_html.draw_figures`' names + ``.png``); replaced only in an earlier report's folder
#: (:func:`_why_no_earlier_report`), else refused (:func:`prepare_report_folder`).
REPORT_FILES = ("rows.csv", CV_PREDICTIONS_CSV, "predicted_vs_realized.png", "mae_by_forecaster.png",
                "residuals_by_arm.png", "accuracy_vs_tokens.png", "metrics.json", "report.html")
#: What ``calib report`` records as ``"command"`` in its ``metrics.json``: the mark of a folder it wrote.
REPORT_COMMAND = "calib report"
#: Keys of every ``metrics.json`` ``calib report`` wrote before it recorded :data:`REPORT_COMMAND` (since its
#: leave-one-study-out metrics): with every file of :data:`REPORT_FILES`, they mark such an earlier report.
_REPORT_KEYS = ("headline_cv", "cv_modes", "errors", "ranking", "versions", "units")


def to_json(document, *, indent: int) -> str:
    """``document`` as strict JSON text (no NaN/inf tokens: :func:`gradprobe.outputs.json_safe`).

    Raises
    ------
    TypeError
        A value JSON cannot hold (not a dict, list, tuple, str, number, bool, None or numpy/torch
        scalar, which :func:`~gradprobe.outputs.json_safe` turns into the Python number it holds).
    """
    return json.dumps(json_safe(document), indent=indent, allow_nan=False)


def write_json(path: str | Path, document, *, indent: int = 1, newline: bool = False) -> Path:
    """Write :func:`to_json` of ``document`` to ``path`` atomically (``newline``: end with ``\\n``); returns it.

    Raises
    ------
    TypeError
        As :func:`to_json` (nothing is written).
    gradprobe.outputs.OutputDirError
        The write failed; ``path`` is unchanged.
    """
    path = Path(path)
    write_text_atomic(path, to_json(document, indent=indent) + ("\n" if newline else ""))
    return path



def prepare_report_folder(out: str | Path) -> Path:
    """Create ``calib report``'s folder ``out`` (parents too) and check that it can be written; returns it.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        (an OSError; ``str()`` is one line naming ``out``, why and the fix: another ``--out``) ``out`` is a
        file, holds a ``gradprobe probe``'s output (``probe.json`` or ``arms.json``: its ``report.html`` would be
        replaced) or another command's, holds the ``.earlier-probe/`` a killed probe left (how to recover it is
        named), holds files named as the report's (:data:`REPORT_FILES`) but is no earlier report (no
        ``cv_predictions.csv``, or no ``metrics.json`` recording ``"command": "calib report"`` nor a report's complete
        files from before it was recorded: :func:`_why_no_earlier_report`; the files are named, as the report would
        overwrite them), or cannot be created or written. Nothing is written then. errno ELOOP: ``out`` or a folder
        above it is a symbolic link in a loop (``a -> b -> a``), refused before anything is created, in the words of
        every gradprobe command's ``--out`` (:func:`gradprobe.outputs.refuse_link_loop`: the loop's chain, the
        link to remove or re-point).
    """
    out = Path(out)
    refuse_link_loop(out)  # mkdir would say "File exists"; errno ELOOP, named as every gradprobe command's --out
    if out.exists() and not out.is_dir():
        raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} is a file; the report is a folder (report.html, "
                             f"metrics.json, figures, CSVs): {_FIX}")
    found = output_kind(out)
    if found is not None and found[0] == "killed probe":
        raise OutputDirError(errno.EEXIST, (
            f"--out {str(out)!r} holds {EARLIER_PROBE}/, the earlier probe a `gradprobe probe` that was killed left "
            f"aside; a report there would strand it (`gradprobe probe` refuses a report's folder). Recover it first: "
            f"`gradprobe probe --out {out}` puts it back before probing, or move the files of "
            f"{out / EARLIER_PROBE} back into {out}; else {_FIX}"))
    if found is not None and found[0] != "calib report":
        raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} holds {OUTPUT_KINDS[found[0]]} ({found[1]}), not a "
                             f"calibration report; its files would mix with the report's: {_FIX}")
    _refuse_files_of_no_report(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").write_text("ok")
        (out / ".write-test").unlink()
    except OSError as e:
        raise output_error("creating the report folder", out, e) from e
    return out


def _refuse_files_of_no_report(out: Path) -> None:
    """Refuse ``out`` (no other command's folder: :func:`prepare_report_folder` checked) when it holds files named as
    a report's (:data:`REPORT_FILES`) but is no earlier report (:func:`_why_no_earlier_report`): the report would
    overwrite them (a user's ``report.html``, or a ``cv_predictions.csv`` of their own)."""
    if not out.is_dir():
        return
    names = [name for name in REPORT_FILES if (out / name).exists()]
    why = _why_no_earlier_report(out) if names else None
    if why is None:  # no file of the report's names, or an earlier report's: its files are the report's to replace
        return
    shown, them = ", ".join(names), ("it" if len(names) == 1 else "them")
    raise OutputDirError(errno.EEXIST, (
        f"--out {str(out)!r} holds {shown} but {why}, so {'it is' if them == 'it' else 'they are'}"
        f" no earlier calibration report's: the report would overwrite {them}. Move {shown} out of {str(out)!r} "
        f"(delete {them} if left by a `calib report` that was killed), or {_FIX}"))


def _why_no_earlier_report(out: Path) -> str | None:
    """None when ``out`` holds an earlier ``calib report``: ``cv_predictions.csv`` and a ``metrics.json`` recording
    ``"command": "calib report"`` (:data:`REPORT_COMMAND`); or, written before the report recorded it (the shipped
    ``data/calibration/report``), every file of :data:`REPORT_FILES` and a ``metrics.json`` object holding every key
    of :data:`_REPORT_KEYS`. Else why not, as a phrase (``"no cv_predictions.csv"``, ``"no metrics.json"``...): a
    ``cv_predictions.csv`` alone is a user's as well (their own predictions, from another tool)."""
    if not (out / CV_PREDICTIONS_CSV).exists():
        return f"no {CV_PREDICTIONS_CSV}"
    path = out / "metrics.json"
    if not path.exists():
        return "no metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        metrics = None
    if not isinstance(metrics, dict):
        metrics = {}
    if metrics.get("command") == REPORT_COMMAND:
        return None
    not_ours = f'metrics.json was not written by `calib report` (it records no "command": "{REPORT_COMMAND}")'
    if not all(key in metrics for key in _REPORT_KEYS):
        return not_ours
    missing = [name for name in REPORT_FILES if not (out / name).is_file()]
    if not missing:
        return None  # a complete report written before metrics.json recorded its command
    return (f'metrics.json records no "command": "{REPORT_COMMAND}" and {", ".join(missing)} of a report\'s files '
            f"{'is' if len(missing) == 1 else 'are'} missing")
