"""gradprobe.tables.format_columns pads cells by display width, not by ``len``.

Before, a reward named in CJK (each ideograph two terminal columns) or with a combining accent (zero columns) was
padded by its character count, so the later columns of its row sat off those of an ASCII row, in the probe table
and in the calibrated table alike. ASCII cells are padded as before (``len`` is their display width).
"""

from __future__ import annotations

import numpy as np

from gradprobe.probe.run import format_table
from gradprobe.tables import display_width, format_columns

from forecast_helpers import probe_result

CJK = "奖励"  # 2 characters, 4 columns
ACCENTED = "re\u0301compense"  # 11 characters (e + U+0301 combining acute), 10 columns


def test_format_columns_aligns_cjk_and_combining_names_by_display_width():
    lines = format_columns(["reward", "gain"], [[CJK, "+1.0"], [ACCENTED, "-2.5"], ["outcome", "+0.25"]], "<>")
    assert lines == [
        "reward" + " " * 7 + "gain",  # name column 10 columns wide (ACCENTED), sep 2, gain column 5 wide
        CJK + " " * 9 + "+1.0",  # len() padding: the name column was 11 characters (ACCENTED's len), 12 spaces
        ACCENTED + " " * 3 + "-2.5",
        "outcome" + " " * 5 + "+0.25",
    ]
    assert {display_width(line) for line in lines} == {17}  # the right-aligned column ends at one display column
    # ASCII cells: exactly str.format's padding, as before
    ascii_rows = [["outcome", "+0.25"], ["mc_value", "-12.5"]]
    assert format_columns(["reward", "gain"], ascii_rows, "<>") == [
        f"{a:<8}  {b:>5}" for a, b in [("reward", "gain"), *ascii_rows]]


def test_display_width_counts_wide_as_two_and_combining_as_zero():
    texts = ("", "outcome", CJK, ACCENTED, "\u00e9", "ＡＢ", "🙂x")  # fullwidth A B: F; the emoji: W
    assert [display_width(t) for t in texts] == [0, 7, 4, 10, 1, 4, 3]


def test_the_probe_table_lines_up_a_cjk_reward_name():
    """The per-reward table of ``gradprobe probe``: each right-aligned number column ends at the header's display
    column on the CJK row as on the ASCII rows."""
    g = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    res = probe_result({"outcome": g, CJK: 1.5 * g, ACCENTED: 0.5 * g}, {"outcome": 4_000, CJK: 8_000, ACCENTED: 9_000},
                       model="other")
    res["config"].update(reference="heldout", precondition="adam")
    res["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    res["ledger"]["generated_tokens"] = {"rollout": 4000, "continuation": 16000}
    res["costs"] = {"alignment_to_update_ratio": None}
    for r in res["rewards"]:
        r.update(interval=[r["inner_product"] - 1.0, r["inner_product"] + 1.0], snr=2.5, predicted_gain_at_budget=0.1)
    lines = format_table(res).splitlines()
    top = lines.index(next(x for x in lines if x.startswith("reward ")))
    block = lines[top: top + 4]
    assert [b.split()[0] for b in block] == ["reward", "outcome", CJK, ACCENTED]
    assert len({display_width(line) for line in block}) == 1, block  # the last (right-aligned) column ends together
    ends = [[display_width(line[:i + 1]) for i in range(len(line)) if line[i] != " " and line[i + 1:i + 3] == "  "]
            for line in block]  # display column where each cell but the last ends (cells are 2+ spaces apart)
    assert len({tuple(e[1:]) for e in ends}) == 1, ends  # every number column after the name ends together


def test_display_width_counts_format_enclosing_variation_and_jamo_characters_as_zero():
    """Zero-width joiner / space (Cf), the keycap (Me), variation selectors and Hangul medial/final jamo take no column
    (before, each counted 1). Expected widths hard-coded, per character as display_width's docstring says (the
    ``wcwidth`` package, no dependency, joins some sequences: ZWJ, keycap, U+FE0E, and differs on those)."""
    texts = {
        "a\u200db": 2,  # zero-width joiner (Cf)
        "a\u200bb": 2,  # zero-width space (Cf)
        "a\u2060b": 2,  # word joiner (Cf)
        "1\ufe0f\u20e3": 1,  # keycap 1: variation selector 16 (Mn) + combining enclosing keycap (Me)
        "\u231a\ufe0e": 2,  # watch (W) + text variation selector (Mn)
        "\u1100\u1161": 2,  # Hangul choseong kiyeok (W) + jungseong a (medial, U+1160-U+11FF)
        "\u1100\u1161\u11a8": 2,  # + jongseong kiyeok (final)
        "\u1100\ud7b0": 2,  # + a jungseong of Hangul Jamo Extended-B
        "a\u00adb": 3,  # soft hyphen: Cf, but drawn as a hyphen
        "\u0915\u093e": 2,  # Devanagari ka + sign aa (Mc, a spacing mark)
    }
    assert {t: display_width(t) for t in texts} == texts
    # an emoji ZWJ sequence: 2 per emoji, not the one glyph's 2 columns of a terminal that joins it (docstring)
    assert display_width("\U0001F468\u200d\U0001F469\u200d\U0001F467") == 6


def test_format_columns_lines_up_zero_width_characters():
    rows = [["plain", "+1.0"], ["a\u200db", "+2.0"], ["\u1100\u1161_kr", "+3.0"], ["1\ufe0f\u20e3_key", "+4.0"]]
    assert format_columns(["reward", "gain"], rows, "<>", sep=" |") == [
        "reward |gain",
        "plain  |+1.0",
        "a\u200db     |+2.0",
        "\u1100\u1161_kr  |+3.0",
        "1\ufe0f\u20e3_key  |+4.0",
    ]
