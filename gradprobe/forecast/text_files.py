"""Reading curve sources as text: UTF-8 (a leading byte-order mark dropped), and what to say when they are not.

:func:`read_source_text` reads a JSON, JSON lines or trainer-state file; :func:`not_utf8` names what bytes that are
not UTF-8 are instead (UTF-16, gzip, binary, another encoding) with the fix. Used by the reference-curve readers
(:mod:`.curve_sources`, :mod:`.curve_file`, :mod:`.curves`) and the CSV reader (:mod:`.csv_cells`).
"""

from __future__ import annotations

import codecs
import shlex
from pathlib import Path

__all__ = ["not_utf8", "read_source_text"]


def not_utf8(path: Path, e: UnicodeDecodeError, trainer_state: bool) -> str:
    """Why a curve source ``path`` cannot be read: it is not UTF-8 text (``e``, whose ``object`` holds the bytes),
    what it is instead and the fix. Its bytes say which: UTF-16 text (a byte-order mark: convert from UTF-16),
    gzip-compressed (decompress it), binary (NUL bytes: re-copy it), else text in another encoding (e.g. latin-1:
    convert it). For a TRL trainer state (``trainer_state``: its text holds ``"log_history"``, or the file is TRL's
    ``trainer_state.json``) the fix names TRL's own file, which TRL writes as UTF-8; else, for a JSON file, a saved
    curve's rewrite."""
    raw = bytes(getattr(e, "object", b"") or b"")
    name, out = shlex.quote(str(path)), shlex.quote(str(path.with_name(f"{path.stem}_utf8{path.suffix or '.txt'}")))
    trl = ("TRL writes it as UTF-8: re-copy it from the run's checkpoint-N/" if path.name == "trainer_state.json"
           else "or pass the checkpoint's own trainer_state.json (this file holds a TRL trainer state's "
           "\"log_history\"; TRL writes it as UTF-8)")
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        what, fix = "it is UTF-16 text", f"convert it (`iconv -f utf-16 -t utf-8 {name} > {out}`)"
    elif raw[:2] == b"\x1f\x8b":
        what, fix = "it is gzip-compressed", f"decompress it (`gunzip -c {name} > {out}`)"
    elif b"\x00" in raw:
        what, fix = "it is not text (it holds NUL bytes: a binary or damaged file)", "re-copy it from its source"
    else:
        what, fix = f"it is not UTF-8 text ({e})", f"convert it (e.g. `iconv -f latin1 -t utf-8 {name} > {out}`)"
    if trainer_state:
        fix = f"{fix}, {trl}" if path.name != "trainer_state.json" else f"{trl}, or {fix}"
    elif path.suffix.lower() == ".json":
        fix += ", or rewrite a saved curve with ReferenceCurve.save"
    return f"{what}; {fix}"


def read_source_text(path: Path) -> str:
    """The text of a curve source (JSON, JSON lines or a trainer state): UTF-8, a leading UTF-8 byte-order mark
    dropped (Windows editors write one; JSON parsers refuse it). Raises UnicodeDecodeError (bytes that are not
    UTF-8: :func:`not_utf8` says what they are) and OSError."""
    return path.read_bytes().decode("utf-8-sig")
