"""Plain-text tables whose columns fit their longest entry (the tables ``gradprobe probe`` prints).

Fixed-width format specs (``f"{name:<14}"``) let a long entry, such as a reward named
``hybrid_0.5_very_long_custom_reward_name``, push the rest of its row out of line with the header.
:func:`format_columns` measures every column instead (header and cells), so the columns of every
row line up whatever their content. It measures by display width (:func:`display_width`), not by
``len``: a reward named in CJK (two terminal columns a character) or with combining accents (none)
would otherwise push its row's later columns off those of an ASCII row. Torch-free, so any result
reader can use it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

__all__ = ["format_columns", "display_width"]


def display_width(text: str) -> int:
    """The number of terminal columns ``text`` takes in a monospaced font (an int >= 0).

    Per character: 0 for a combining mark (``unicodedata.combining`` nonzero, e.g. U+0301 in ``e\u0301``), 2 for an
    East Asian wide or fullwidth character (``unicodedata.east_asian_width`` ``W`` or ``F``: CJK ideographs, most
    emoji), 1 otherwise (Unicode Standard Annex #11, East Asian Width; as the C ``wcwidth`` counts them for these
    classes). An ASCII string's width is its ``len``.
    """
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, align: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` display columns (:func:`display_width`), on the right for ``"<"``,
    on the left for ``">"``; a ``text`` already as wide is returned as is."""
    fill = " " * max(width - display_width(text), 0)
    return text + fill if align == "<" else fill + text


def format_columns(header: Sequence[str], rows: Sequence[Sequence[str]], align: str, *, sep: str = "  ") -> list[str]:
    """Lines of a table: the header, then one line per row, each column as wide as its widest cell.

    Parameters
    ----------
    header : sequence of str, length C
        Column titles.
    rows : sequence of sequences of str, each of length C
        Already formatted cells (numbers formatted by the caller, e.g. ``f"{x:+.3e}"``).
    align : str of length C
        Per column ``"<"`` (left, e.g. names) or ``">"`` (right, e.g. numbers).
    sep : str
        Put between columns.

    Returns
    -------
    list of str
        ``1 + len(rows)`` lines; column c starts at the same display column (:func:`display_width`:
        a wide CJK character counts 2, a combining mark 0) on every line, and trailing spaces are
        stripped. Cells of ASCII text: the same character offset.

    Raises
    ------
    ValueError
        ``align`` not C characters from ``<>``, or a row with another number of cells than the header.
    """
    n = len(header)
    if len(align) != n or set(align) - {"<", ">"}:
        raise ValueError(f"align must be {n} characters, each '<' or '>', got {align!r}")
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {i} has {len(row)} cells, the header {n}: {list(row)!r}")
    widths = [max(display_width(str(c)) for c in col) for col in zip(header, *rows)]
    return [sep.join(_pad(str(c), a, w) for c, a, w in zip(line, align, widths)).rstrip()
            for line in (header, *rows)]
