"""Reading curve sources as text: UTF-8 (a leading byte-order mark dropped), and what to say when they are not.

:func:`read_source_text` reads a JSON, JSON lines or trainer-state file; :func:`not_utf8` names what bytes that are
not UTF-8 are instead (UTF-16, gzip, binary, another encoding) with the fix; :func:`parse_curve_json` parses their
JSON, refusing what ``json.loads`` would read silently (a key given twice in one object) or fail on without a word
of the file (nesting too deep: a bare ``RecursionError``). Used by the reference-curve readers
(:mod:`.curve_sources`, :mod:`.curve_file`, :mod:`.curves`) and the CSV reader (:mod:`.csv_cells`).
"""

from __future__ import annotations

import codecs
import json
import shlex
import sys
from pathlib import Path

from ..outputs import first_repeated_key, json_short

__all__ = ["decode_text", "not_utf8", "read_source_text", "utf16_without_bom", "parse_curve_json", "JSONShapeError",
           "SAVED_CURVE_REWRITE"]


#: The end of :func:`not_utf8`'s fix for a JSON file that is no trainer state (by default: a saved curve).
SAVED_CURVE_REWRITE = "or rewrite a saved curve with ReferenceCurve.save"


def not_utf8(path: Path, e: UnicodeDecodeError, trainer_state: bool, *, json_fix: str = SAVED_CURVE_REWRITE) -> str:
    """Why a curve source ``path`` cannot be read: it is not UTF-8 text (``e``, whose ``object`` holds the bytes),
    what it is instead and the fix. Its bytes say which: UTF-16 text (a byte-order mark, or NUL high bytes
    without one: convert from UTF-16), gzip-compressed (decompress it), a tail of NUL bytes (a write cut short: keep
    the text before it), binary (NUL bytes inside: re-copy it), else text in another encoding (e.g. latin-1:
    convert it). For a TRL trainer state (``trainer_state``: its text holds ``"log_history"``, or the file is TRL's
    ``trainer_state.json``) the fix names TRL's own file, which TRL writes as UTF-8; else, for a JSON file,
    ``json_fix`` ends it (a saved curve's rewrite, :data:`SAVED_CURVE_REWRITE`; a run's ``config.json`` says to put
    the converted file in its place; "" adds none: a calibration file's reader says its own)."""
    raw = bytes(getattr(e, "object", b"") or b"")
    name, out = shlex.quote(str(path)), shlex.quote(str(path.with_name(f"{path.stem}_utf8{path.suffix or '.txt'}")))
    trl = ("TRL writes it as UTF-8: re-copy it from the run's checkpoint-N/" if path.name == "trainer_state.json"
           else "or pass the checkpoint's own trainer_state.json (this file holds a TRL trainer state's "
           "\"log_history\"; TRL writes it as UTF-8)")
    utf16 = utf16_without_bom(raw)
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        what, fix = "it is UTF-16 text", f"convert it (`iconv -f utf-16 -t utf-8 {name} > {out}`)"
    elif utf16:
        what, fix = (f"it is UTF-16 text without a byte-order mark ({utf16[-2:].upper()}, told by its NUL high bytes)",
                     f"convert it (`iconv -f {utf16} -t utf-8 {name} > {out}`)")
    elif raw[:2] == b"\x1f\x8b":
        what, fix = "it is gzip-compressed", f"decompress it (`gunzip -c {name} > {out}`)"
    elif b"\x00" in raw:
        what, fix = _nul_bytes(raw, name, out)
    else:
        what, fix = f"it is not UTF-8 text ({e})", f"convert it (e.g. `iconv -f latin1 -t utf-8 {name} > {out}`)"
    if trainer_state:
        fix = f"{fix}, {trl}" if path.name != "trainer_state.json" else f"{trl}, or {fix}"
    elif path.suffix.lower() == ".json" and json_fix:
        fix += f", {json_fix}"
    return f"{what}; {fix}"


def _nul_bytes(raw: bytes, name: str, out: str) -> tuple[str, str]:
    """What a file holding NUL bytes (not UTF-16) is, and the fix: a tail of NULs is a write cut short (a machine
    that stopped while the file grew: the file system kept its new length, not its last bytes), whose text before
    it can be kept; NULs inside are a binary or damaged file. Both name the line and byte of the first NUL."""
    at = raw.index(b"\x00")
    line = raw.count(b"\n", 0, at) + 1
    if not raw[at:].strip(b"\x00"):
        n = len(raw) - at
        return (f"it ends in {n} NUL byte{'s' if n > 1 else ''} from line {line} (byte {at}): a write cut short "
                "when the machine stopped", f"keep the text before them (`head -c {at} {name} > {out}`), or re-copy it")
    return (f"it is not text (it holds NUL bytes, the first at line {line}, byte {at}: a binary or damaged file)",
            "re-copy it from its source")


def utf16_without_bom(raw: bytes) -> str | None:
    """``"utf-16le"`` or ``"utf-16be"`` when ``raw`` reads as UTF-16 text without a byte-order mark, else None.

    Told by where the NUL bytes of its first 1024 bytes fall: text whose characters are mostly below U+0100 (the
    digits, commas and keys of a curve file, accented letters) saved as UTF-16 has a NUL as the high byte of each,
    so at least a quarter of the odd (little-endian), resp. even (big-endian), bytes are NUL and none of the others
    is (a NUL character, which no text holds, would be two)."""
    head = raw[:1024][: len(raw[:1024]) // 2 * 2]
    if len(head) < 4:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if even == 0 and odd >= len(head) // 8:
        return "utf-16le"
    if odd == 0 and even >= len(head) // 8:
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


class JSONShapeError(ValueError):
    """A curve source's JSON text that :func:`parse_curve_json` refuses although ``json.loads`` reads it, or fails on
    without naming the file: an object that names one key twice (``key``: that key), or nesting too deep for Python's
    parser (``key`` None). The message says what is wrong, without the file: the reader that raises its
    ``CurveError`` names the file (and line or entry) and the fix."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def _unique_keys(pairs: list) -> dict:
    """The ``object_pairs_hook`` of :func:`parse_curve_json`: the object of ``pairs`` ((key, value) in file order),
    refused when one key comes twice (:func:`gradprobe.outputs.first_repeated_key`)."""
    repeated = first_repeated_key(pairs)
    if repeated is None:
        return dict(pairs)
    key, first, then = repeated
    raise JSONShapeError(f"an object names the key {json.dumps(key)} twice ({json_short(first, 40)}, then "
                         f"{json_short(then, 40)}): JSON readers keep one of the two (Python's json the last, "
                         "silently), so which value was meant cannot be told", key=key)


def parse_curve_json(text: str):
    """``text`` (a curve source's JSON: a saved curve, a trainer state, a ``config.json``, a line of a
    ``metrics.jsonl``) parsed as ``json.loads`` parses it (NaN, Infinity and integers of any size as it reads them),
    except where that would be silent or name no file:

    - an object that names a key twice (``{"eval_accuracy": 0.7, "step": 20, "eval_accuracy": 0.1}``, two
      ``log_history`` lists): ``json.loads`` keeps the last value without a word, so an eval (or a whole log) would
      be read as a value the file also contradicts. No writer of these files writes a key twice (``json.dump`` of a
      dict cannot), so the file was edited or damaged;
    - nesting deeper than Python's parser goes (its recursion limit, :func:`sys.getrecursionlimit`, about 1000
      levels): ``json.loads`` raises a bare ``RecursionError``; the files a curve is read from nest a few levels.

    Raises
    ------
    json.JSONDecodeError
        ``text`` is not JSON (as ``json.loads`` raises it).
    JSONShapeError
        A key given twice in one object (its ``key``: the key, the message showing both values), or nesting too
        deep; the message names no file (the caller adds it and the fix).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise JSONShapeError(f"its arrays or objects nest deeper than Python's JSON parser reads (its recursion limit, "
                             f"{sys.getrecursionlimit()} levels), where the files a curve is read from nest a few "
                             "levels: the file is damaged") from None
