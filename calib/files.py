"""Every file calib writes goes through here: gradprobe's atomic writer and its one JSON encoding.

calib writes ``calibration.json`` (``calib fit``), ``calibrated.json`` (``calib apply``), a report's
``metrics.json``, ``report.html``, figures and CSVs (``calib report``), the rows CSV (``calib rows``)
and the forecaster validation record. Each is written atomically with fsync by
:func:`gradprobe.outputs.write_bytes_atomic` (a reader sees the old file or the new one, never half),
and JSON in gradprobe's encoding of non-finite floats (:func:`gradprobe.outputs.json_safe`: NaN ->
``null``, +-inf -> ``"inf"``/``"-inf"``; :func:`gradprobe.outputs.json_float` reads them back), so
calibration files written before this module still load. numpy scalars (a pandas aggregate, a
scikit-learn parameter) are written as the Python numbers they hold.

:func:`prepare_report_folder` makes ``calib report``'s ``--out`` folder, refusing a file and another command's
folder: a ``gradprobe probe`` folder (``probe.json``, or a study's ``probe/`` with ``arms.json``) holds a
``report.html`` of its own that the report would replace (``gradprobe probe`` refuses a report's folder likewise).
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

from gradprobe.layout import OUTPUT_KINDS, output_kind
from gradprobe.outputs import OutputDirError, json_float, json_safe, output_error, write_bytes_atomic, write_text_atomic

__all__ = ["to_json", "write_json", "write_text_atomic", "write_bytes_atomic", "json_safe", "json_float",
           "prepare_report_folder"]

_FIX = "choose another --out (a new or empty folder, or an earlier `calib report` folder)"


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
        replaced), or cannot be created or written. Nothing is written then.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} is a file; the report is a folder (report.html, "
                             f"metrics.json, figures, CSVs): {_FIX}")
    found = output_kind(out)
    if found is not None and found[0] != "calib report":
        raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} holds {OUTPUT_KINDS[found[0]]} ({found[1]}), not a "
                             f"calibration report; its files would mix with the report's: {_FIX}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").write_text("ok")
        (out / ".write-test").unlink()
    except OSError as e:
        raise output_error("creating the report folder", out, e) from e
    return out
