"""Plain-text tables whose columns fit their longest entry (the tables ``gradprobe probe`` prints).

Fixed-width format specs (``f"{name:<14}"``) let a long entry, such as a reward named
``hybrid_0.5_very_long_custom_reward_name``, push the rest of its row out of line with the header.
:func:`format_columns` measures every column instead (header and cells), so the columns of every
row line up whatever their content. It measures by display width (:func:`display_width`), not by
``len``: a reward named in CJK (two terminal columns a character) or with combining accents or
zero-width format characters (none) would otherwise push its row's later columns off those of an
ASCII row. A control character in a cell (a tab or newline in a plug-in's reward name, an escape) has no width to
measure: a tab moves to the next tab stop, a newline breaks the row, an escape sequence recolours the terminal; so
:func:`format_columns` shows it escaped as ``repr`` does (:func:`shown`: ``\\t``, ``\\n``, ``\\x1b``), as the
warnings naming a reward (``reward 'a\\tb' gives no gradient``) show it. Torch-free, so any result reader can use it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

__all__ = ["format_columns", "display_width", "shown", "holds_surrogate", "surrogates_escaped"]

_ZERO_CATEGORIES = ("Mn", "Me", "Cf")  # nonspacing mark, enclosing mark, format character: 0 columns
_JAMO_MEDIAL_FINAL = ((0x1160, 0x11FF), (0xD7B0, 0xD7FF))  # Hangul medial vowel / final consonant jamo: 0 columns
#: shown escaped by :func:`shown`: control characters (C0, DEL, C1), the line and paragraph separators, and lone
#: surrogates (a file name's undecodable byte, which a UTF-8 terminal cannot print)
_ESCAPED_CATEGORIES = ("Cc", "Zl", "Zp", "Cs")


def shown(text: str) -> str:
    """``text`` with each control character written as ``repr`` writes it, so that every character left takes the
    columns :func:`display_width` counts: a tab as ``\\t``, a newline ``\\n``, a carriage return ``\\r``, other C0
    and C1 controls and DEL as ``\\xHH`` (escape: ``\\x1b``), the line and paragraph separators as ``\\u2028`` /
    ``\\u2029`` (they end a line for ``str.splitlines``) and a lone surrogate as ``\\udcHH``. Everything else is kept,
    zero-width format characters (the joiner of an emoji sequence) and backslashes included: a name holding a
    backslash and ``t`` shows as one holding a tab would (the name itself is in ``probe.json``).

    Parameters
    ----------
    text : str
        One table cell (any length).

    Returns
    -------
    str
        ``text`` itself when it holds no such character (every ASCII text without controls).
    """
    if text.isprintable():  # the usual cell; a False also comes of a format character or a no-break space, kept
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _ESCAPED_CATEGORIES else c for c in text)


def holds_surrogate(value) -> bool:
    """Whether ``value`` is a text holding a lone surrogate (U+D800..U+DFFF: a file name's undecodable byte as
    ``os.fsdecode`` gives it, ``r\\udcff.py``), which UTF-8 (a safetensors header, an HTML page, pandas' text type)
    cannot hold; False for anything else."""
    return isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value)


def surrogates_escaped(text: str) -> str:
    """``text`` with each lone surrogate written ``\\udcHH`` (as :func:`shown` and ``repr`` write it), every other
    character kept (a tab stays a tab): text that UTF-8 can encode, the same for every text without surrogates."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if holds_surrogate(text) else text


def display_width(text: str) -> int:
    """The number of terminal columns ``text`` takes in a monospaced font (an int >= 0), summed per character.

    Per character, from its East Asian Width (Unicode Standard Annex #11) and general category (Unicode Character
    Database, ``unicodedata``), the classes of Markus Kuhn's ``wcwidth``:

    * 0 for a nonspacing or enclosing mark (category ``Mn``, e.g. U+0301 in ``e\u0301``, variation selectors
      U+FE0E/U+FE0F; ``Me``, e.g. the keycap U+20E3), a format character (``Cf``: zero-width joiner U+200D,
      zero-width space U+200B, ...; but the soft hyphen U+00AD, which terminals draw as a hyphen, counts 1), and a
      Hangul medial vowel or final consonant jamo (U+1160-U+11FF, U+D7B0-U+D7FF: drawn inside the leading
      consonant's two columns);
    * 2 for an East Asian wide or fullwidth character (``unicodedata.east_asian_width`` ``W`` or ``F``: CJK
      ideographs, most emoji);
    * 1 otherwise (spacing marks ``Mc``, ambiguous-width characters and control characters included: a tab, a
      newline or an escape has no width of its own, so :func:`format_columns` measures and shows a cell as
      :func:`shown` escapes it, ``\\t`` 2 columns).

    An ASCII string's width is its ``len``. Not exact for every terminal: an emoji ZWJ sequence (e.g. a family,
    U+1F468 U+200D U+1F469 U+200D U+1F467) counts 2 per emoji (6 here) where a terminal that draws it as one glyph
    takes 2; a presentation selector does not change its base's width (U+FE0F after the narrow heart U+2764 leaves
    it 1 column, where many terminals draw the emoji in 2; U+FE0E after a wide emoji leaves it 2); terminals differ
    on these, and on ambiguous-width characters.
    """
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def _char_width(c: str) -> int:
    """The columns of one character: 0, 1 or 2 (:func:`display_width`)."""
    if c == "\u00ad":  # soft hyphen: Cf, but shown as "-"
        return 1
    if unicodedata.category(c) in _ZERO_CATEGORIES or any(lo <= ord(c) <= hi for lo, hi in _JAMO_MEDIAL_FINAL):
        return 0
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1


def _pad(text: str, align: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` display columns (:func:`display_width`), on the right for ``"<"``,
    on the left for ``">"``; a ``text`` already as wide is returned as is."""
    fill = " " * max(width - display_width(text), 0)
    return text + fill if align == "<" else fill + text


def format_columns(header: Sequence[str], rows: Sequence[Sequence[str]], align: str, *, sep: str = "  ",
                   min_widths: Sequence[int] | None = None) -> list[str]:
    """Lines of a table: the header, then one line per row, each column as wide as its widest cell.

    Parameters
    ----------
    header : sequence of str, length C
        Column titles.
    rows : sequence of sequences of str, each of length C
        Already formatted cells (numbers formatted by the caller, e.g. ``f"{x:+.3e}"``). A control character in a
        cell or a title (a tab in a reward name) is shown escaped as ``repr`` does (:func:`shown`: ``a\\tb``), so the
        line keeps its columns (a tab would jump to the next tab stop, a newline break the row).
    align : str of length C
        Per column ``"<"`` (left, e.g. names) or ``">"`` (right, e.g. numbers).
    sep : str
        Put between columns.
    min_widths : sequence of int, length C, optional
        Per column the least width in display columns (:func:`display_width`): a column is as wide as its widest cell
        or this, whichever is more (a fixed-width table's widths that a long entry still widens). Default: none.

    Returns
    -------
    list of str
        ``1 + len(rows)`` lines, no cell holding a control character (:func:`shown`); column c starts at the same
        display column (:func:`display_width`: a wide CJK character counts 2, a combining mark or zero-width
        character 0) on every line, and trailing spaces are stripped. Cells of ASCII text: the same character offset.

    Raises
    ------
    ValueError
        ``align`` not C characters from ``<>``, a row with another number of cells than the header, or ``min_widths``
        not C whole numbers >= 0.
    """
    n = len(header)
    if len(align) != n or set(align) - {"<", ">"}:
        raise ValueError(f"align must be {n} characters, each '<' or '>', got {align!r}")
    least = [0] * n if min_widths is None else list(min_widths)
    if len(least) != n or not all(isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in least):
        raise ValueError(f"min_widths must be {n} whole numbers >= 0 (display columns), got {min_widths!r}")
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {i} has {len(row)} cells, the header {n}: {list(row)!r}")
    lines = [[shown(str(c)) for c in line] for line in (header, *rows)]  # a tab as \t: it has no width to pad
    widths = [max(w, *(display_width(c) for c in col)) for w, col in zip(least, zip(*lines))]
    return [sep.join(_pad(c, a, w) for c, a, w in zip(line, align, widths)).rstrip() for line in lines]
