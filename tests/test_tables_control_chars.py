"""gradprobe.tables.format_columns shows a control character in a cell escaped as ``repr`` does (``\\t``).

Before, a tab inside a reward name was measured as one column (``len`` / ``display_width``) and printed raw: the
terminal moved it to the next tab stop, so the name's row sat off the header's columns; a newline broke the row in
two, an escape sequence reached the terminal. The cell is now shown as ``a\\tb`` (4 columns, measured and padded as
shown), as the probe's warnings (``reward 'a\\tb' ...``, a ``!r``) already named it.
"""

from __future__ import annotations

import pytest

from gradprobe.probe.table import format_table
from gradprobe.tables import display_width, format_columns, shown

TAB = "a\tb"  # a plug-in reward's name holding a tab


def test_a_tab_in_a_cell_is_shown_as_backslash_t_and_padded_as_shown():
    lines = format_columns(["reward", "gain"], [[TAB, "+1.0"], ["outcome", "+0.25"]], "<>")
    assert lines == [
        "reward    gain",
        "a\\tb      +1.0",  # 4 columns shown + 3 to the name column's 7, sep 2, "+1.0" right-aligned in 5
        "outcome  +0.25",
    ]
    assert not any("\t" in line for line in lines)
    assert {display_width(line) for line in lines} == {14}  # every row ends at the header's column


@pytest.mark.parametrize("raw, escaped", [
    ("a\nb", "a\\nb"),  # a newline would break the row in two
    ("a\rb", "a\\rb"),
    ("\x1b[31mred", "\\x1b[31mred"),  # an escape sequence would recolour the terminal
    ("a\x00b", "a\\x00b"),
    ("del\x7f", "del\\x7f"),
    ("c1\x85", "c1\\x85"),  # NEL, a C1 control (a line break for str.splitlines)
    ("a\u2028b", "a\\u2028b"),  # line separator
    ("a\u2029b", "a\\u2029b"),  # paragraph separator
    ("bad\udc80", "bad\\udc80"),  # a lone surrogate (an undecodable file-name byte)
])
def test_other_controls_are_escaped_as_repr_writes_them(raw, escaped):
    assert shown(raw) == escaped == repr(raw)[1:-1]
    lines = format_columns(["reward", "n"], [[raw, "1"], ["x", "22"]], "<>", sep=" | ")
    width = max(6, len(escaped))
    assert lines == [f"{'reward':<{width}} |  n", f"{escaped:<{width}} |  1", f"{'x':<{width}} | 22"]


def test_printable_text_is_kept_as_is():
    """Zero-width joiners, no-break spaces, CJK, accents and backslashes are no controls: kept, not escaped."""
    for text in ("outcome", "a\u200db", "a\u00a0b", "奖励", "re\u0301compense", "C:\\path", "ＡＢ"):
        assert shown(text) == text
    assert format_columns(["h"], [["a\u200db"], ["C:\\p"]], "<") == ["h", "a\u200db", "C:\\p"]


def test_the_header_is_escaped_too():
    assert format_columns(["re\tward", "n"], [["x", "1"]], "<>") == ["re\\tward  n", "x         1"]


def test_the_probe_table_shows_a_tab_named_reward_escaped_as_its_warning_names_it():
    """``gradprobe probe``'s table: the row of reward ``a<TAB>b`` reads ``a\\tb`` and lines up with the header; the
    warning under the table names it ``'a\\tb'`` (repr), the same escape."""
    def entry(name, ip, reason=None):
        return {"name": name, "inner_product": ip, "interval": None, "snr": None, "predicted_gain_per_update": 0.5,
                "tokens_per_update": 4000, "predicted_gain_at_budget": 1.25, "no_signal_reason": reason}

    result = {"config": {"model": "tiny", "task": "chain_sum", "prompts": 4, "group": 2, "reference": "heldout",
                         "precondition": "adam", "lr": 1e-4, "budget_tokens": 100_000},
              "batch": {"mean_reward": 0.5, "truncation_rate": 0.0}, "ledger": {"generated_tokens": {"rollout": 8}},
              "rewards": [entry("outcome", 1.0), entry(TAB, 0.0, "every advantage is 0")],
              "costs": {"alignment_to_update_ratio": None}}
    lines = format_table(result).splitlines()
    top = lines.index(next(x for x in lines if x.startswith("reward ")))
    assert lines[top:top + 3] == [
        "reward      <g_R,u>  95% interval  <g,u>/se  gain/update  tokens/update  gain@budget",
        "outcome  +1.000e+00             -         -      +0.5000          4,000       +1.250",
        "a\\tb     +0.000e+00             -         -      +0.5000          4,000       +1.250",
    ]
    assert ("warning: reward 'a\\tb' gives no gradient (every advantage is 0): it cannot train, and its zeros above "
            "are exact, not a measurement") in lines


def test_lone_surrogates_alone_are_escaped_for_utf8():
    """The one test and escape of a lone surrogate (a non-UTF-8 file name's byte) that the safetensors key, the
    probe page and pandas' labels share: a tab is kept (a key of such a name is unchanged), a surrogate is written
    as repr writes it, and the result encodes as UTF-8."""
    from gradprobe.tables import holds_surrogate, surrogates_escaped

    assert [holds_surrogate(v) for v in ("r\udcff.py", "tab\there", "é", None, 3)] == [True, False, False, False, False]
    assert surrogates_escaped("r\udcff\tx.py") == "r\\udcff\tx.py" == shown("r\udcff.py").replace(".py", "\tx.py")
    assert surrogates_escaped("plain\ttext") == "plain\ttext"
    surrogates_escaped("a\ud800b\udfff").encode("utf-8")
