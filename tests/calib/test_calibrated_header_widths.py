"""The calibrated table's header gets its least widths from :func:`gradprobe.tables.format_columns` ``min_widths``
(display columns), not from titles padded by hand with ``f"{title:<16}"`` (which pads by ``len``: a CJK title would
be 2 columns a character too wide). The printed table is unchanged for ASCII names, and a long or CJK reward name
widens its column without pushing its row out of line (:func:`calib.apply.format_calibrated`)."""

from __future__ import annotations

import re
import warnings

import pytest

import calib.apply as apply
from calib.apply import calibrate, format_calibrated, load_calibration, load_probe
from calib_helpers import SHIPPED_PROBE as PROBE
from gradprobe.tables import display_width, format_columns

CJK = "報酬の名前"  # 5 characters, 10 display columns
LONG = "hybrid_0.5_very_long_custom_reward_name_x"  # 41 characters, a plug-in's
COLUMN_END = re.compile(r"forecast|calibrated|interval|[+-]\d\.\d{3}\]?")  # a title, a number or an interval's end


def test_min_widths_pad_by_display_width():
    lines = format_columns(["名前", "gain"], [["ab", "+1.0"]], "<>", sep="|", min_widths=[6, 6])
    assert lines == ["名前  |  gain", "ab    |  +1.0"]  # f"{'名前':<6}" gives 4 spaces: 2 columns too wide
    assert format_columns(["名前", "gain"], [["長い名前です", "+1.0"]], "<>", sep="|", min_widths=[6, 0]) == [
        "名前        |gain", "長い名前です|+1.0"]  # a wider cell still widens its column
    assert format_columns(["a"], [["b"]], "<", min_widths=None) == format_columns(["a"], [["b"]], "<") == ["a", "b"]


@pytest.mark.parametrize("bad", [[1], [1, -1], [1, 2.0], [1, True], "ab"])
def test_min_widths_that_are_no_widths_are_refused(bad):
    with pytest.raises(ValueError, match=r"min_widths must be 2 whole numbers >= 0 \(display columns\), got "):
        format_columns(["a", "b"], [], "<>", min_widths=bad)


def _table(names: list[str], monkeypatch=None) -> list[str]:
    """The header and reward lines of the shipped probe's calibrated table, its rewards renamed ``names``."""
    raw, _, task = load_probe(PROBE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = calibrate(load_calibration("default"), raw, task=task)
    for r, name in zip(doc["rewards"], names):
        r["name"] = name
    lines = format_calibrated(doc).splitlines()
    start = lines.index(next(line for line in lines if line.startswith("reward ")))
    return lines[start:start + 1 + len(doc["rewards"])]


ASCII = ["reward            forecast  calibrated                interval",  # as before the change, byte for byte
         "outcome             +0.000      +0.000        [+0.000, +0.000]",
         "mc_value            -4.625      -4.289        [-7.603, -0.981]  tied",
         "mc_advantage        -4.625      -4.289        [-7.603, -0.981]  tied",
         "hybrid_0.5          -4.625      -4.289        [-7.603, -0.981]  tied"]


@pytest.mark.parametrize("name", ["mc_value", CJK, LONG, CJK * 5])
def test_the_header_takes_its_widths_from_format_columns_and_stays_aligned(name, monkeypatch):
    calls = []

    def spy(header, rows, align, **kwargs):
        calls.append((list(header), kwargs))
        return format_columns(header, rows, align, **kwargs)

    monkeypatch.setattr(apply, "format_columns", spy)
    table = _table(["outcome", name, "mc_advantage", "hybrid_0.5"])
    # before: the titles padded by hand (f"{title:<16}"), no min_widths
    assert calls == [(["reward", "forecast", "calibrated", "interval"], {"sep": "", "min_widths": [16, 10, 12, 24]})]
    if name == "mc_value":
        assert table == ASCII
    width = max(16, display_width(name) + 2)  # the name column: the widest name and two spaces, at least 16
    for line in table:  # each column ends at the same display column on every line (the header's)
        ends = [display_width(line[:m.end()]) for m in COLUMN_END.finditer(line, line.index("  "))]
        assert [ends[0], ends[1], ends[-1]] == [width + 10, width + 22, width + 46], line
    assert table[0] == f"{'reward':<{width}}  forecast  calibrated                interval"
    pad = " " * (width - display_width(name))
    assert table[2] == f"{name}{pad}    -4.625      -4.289        [-7.603, -0.981]  tied"
