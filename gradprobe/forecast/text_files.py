"""Reading curve sources as text: UTF-8 (a leading byte-order mark dropped), and what to say when they are not.

:func:`read_source_text` reads a JSON, JSON lines or trainer-state file; :func:`not_utf8` names what bytes that are
not UTF-8 are instead (UTF-16, gzip, binary, another encoding) with the fix. Used by the reference-curve readers
(:mod:`.curve_sources`, :mod:`.curve_file`, :mod:`.curves`) and the CSV reader (:mod:`.csv_cells`).
"""

from __future__ import annotations

import codecs
import shlex
from pathlib import Path

__all__ = ["decode_text", "not_utf8", "read_source_text"]


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
    utf16 = _utf16_without_bom(raw)
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        what, fix = "it is UTF-16 text", f"convert it (`iconv -f utf-16 -t utf-8 {name} > {out}`)"
    elif utf16:
        what, fix = (f"it is UTF-16 text without a byte-order mark ({utf16[-2:].upper()}: every other byte NUL)",
                     f"convert it (`iconv -f {utf16} -t utf-8 {name} > {out}`)")
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


def _utf16_without_bom(raw: bytes) -> str | None:
    """``"utf-16le"`` or ``"utf-16be"`` when ``raw`` reads as UTF-16 text without a byte-order mark (ASCII text
    saved so: every odd, resp. even, byte of its first 256 NUL, the others not), else None."""
    head = raw[:256][: len(raw[:256]) // 2 * 2]
    if len(head) < 4:
        return None
    even, odd = head[0::2], head[1::2]
    if not odd.strip(b"\x00") and b"\x00" not in even:
        return "utf-16le"
    if not even.strip(b"\x00") and b"\x00" not in odd:
        return "utf-16be"
    return None


def decode_text(raw: bytes) -> str:
    """``raw`` as UTF-8 text, a leading UTF-8 byte-order mark dropped (Windows editors write one; JSON parsers refuse
    it).

    Raises
    ------
    UnicodeDecodeError
        Bytes that are not UTF-8, or a NUL byte: valid UTF-8, but no text file holds one, and UTF-16 text without a
        byte-order mark (or a binary file) would otherwise be read as garbage columns or a damaged file
        (:func:`not_utf8` says which it is).
    """
    text = raw.decode("utf-8-sig")
    nul = text.find("\x00")
    if nul >= 0:
        at = len(text[:nul].encode("utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"))
        raise UnicodeDecodeError("utf-8", raw, at, at + 1, "a NUL byte, which no text file holds")
    return text


def read_source_text(path: Path) -> str:
    """The text of a curve source (JSON, JSON lines or a trainer state): :func:`decode_text` of its bytes. Raises
    UnicodeDecodeError (bytes that are not UTF-8 text: :func:`not_utf8` says what they are) and OSError."""
    return decode_text(path.read_bytes())
