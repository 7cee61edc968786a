"""Plain-text tables whose columns fit their longest entry (the tables ``gradprobe probe`` prints).

Fixed-width format specs (``f"{name:<14}"``) let a long entry, such as a reward named
``hybrid_0.5_very_long_custom_reward_name``, push the rest of its row out of line with the header.
:func:`format_columns` measures every column instead (header and cells), so the columns of every
row line up whatever their content. Torch-free, so any result reader can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_columns"]


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
        ``1 + len(rows)`` lines; column c starts at the same character offset on every line, and
        trailing spaces are stripped.

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
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    return [sep.join(format(str(c), f"{a}{w}") for c, a, w in zip(line, align, widths)).rstrip()
            for line in (header, *rows)]
