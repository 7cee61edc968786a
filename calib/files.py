"""Every file calib writes goes through here: gradprobe's atomic writer and its one JSON encoding.

calib writes ``calibration.json`` (``calib fit``), ``calibrated.json`` (``calib apply``), a report's
``metrics.json``, ``report.html``, figures and CSVs (``calib report``), the rows CSV (``calib rows``)
and the forecaster validation record. Each is written atomically with fsync by
:func:`gradprobe.outputs.write_bytes_atomic` (a reader sees the old file or the new one, never half),
and JSON in gradprobe's encoding of non-finite floats (:func:`gradprobe.outputs.json_safe`: NaN ->
``null``, +-inf -> ``"inf"``/``"-inf"``; :func:`gradprobe.outputs.json_float` reads them back), so
calibration files written before this module still load. numpy scalars (a pandas aggregate, a
scikit-learn parameter) are written as the Python numbers they hold.
"""

from __future__ import annotations

import json
from pathlib import Path

from gradprobe.outputs import json_float, json_safe, write_bytes_atomic, write_text_atomic

__all__ = ["to_json", "write_json", "write_text_atomic", "write_bytes_atomic", "json_safe", "json_float"]


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

