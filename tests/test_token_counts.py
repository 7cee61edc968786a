"""A token count's error quotes the value given (gradprobe.token_counts.parse_token_count): short values whole, as
before; a tester's 1,000,000-character value was echoed whole (a megabyte of error on the terminal), now its first
40 characters and its length."""

from __future__ import annotations

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.token_counts import TOKEN_COUNT_FORMS, parse_token_count


@pytest.mark.parametrize("text, message", [
    ("1x", f"expected {TOKEN_COUNT_FORMS}; got '1x'"),
    ("250000.5", f"'250000.5' is 250000.5 tokens, not a whole number; expected {TOKEN_COUNT_FORMS}"),
    ("-3", f"must be > 0, got '-3'; expected {TOKEN_COUNT_FORMS}"),
    ("1e40", "'1e40' is more tokens than a count can hold (at most 9223372036854775807)"),
    ("x" * 80, f"expected {TOKEN_COUNT_FORMS}; got '{'x' * 80}'"),  # up to 80 characters: whole
])
def test_a_short_value_is_echoed_whole(text, message):
    with pytest.raises(ValueError) as err:
        parse_token_count(text)
    assert str(err.value) == message


@pytest.mark.parametrize("text, message", [
    ("x" * 10**6, f"expected {TOKEN_COUNT_FORMS}; got '{'x' * 40}'... (1,000,000 characters)"),
    ("x" * 81, f"expected {TOKEN_COUNT_FORMS}; got '{'x' * 40}'... (81 characters)"),
    ("9" * 10**6, f"'{'9' * 40}'... (1,000,000 characters) is more tokens than a count can hold (at most "
                  "9223372036854775807)"),
    ("-" + "9" * 99, f"must be > 0, got '-{'9' * 39}'... (100 characters); expected {TOKEN_COUNT_FORMS}"),
    ("0." + "0" * 98 + "1", f"'0.{'0' * 38}'... (101 characters) is less than one token; expected "
                            f"{TOKEN_COUNT_FORMS}"),
    ("1." + "0" * 98 + "1", f"'1.{'0' * 38}'... (101 characters) is 1.{'0' * 38}... (101 characters) tokens, not a "
                            f"whole number; expected {TOKEN_COUNT_FORMS}"),
])
def test_a_long_value_is_cut_to_its_first_40_characters_and_its_length(text, message):
    with pytest.raises(ValueError) as err:
        parse_token_count(text)
    assert str(err.value) == message


def test_the_command_line_error_is_cut_too(capsys):
    """``gradprobe train --budget-tokens 999...`` (100,000 digits: about the most one argument may hold on Linux)."""
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--plan", "p", "--arm", "a", "--out", "o", "--budget-tokens", "9" * 100_000])
    err = capsys.readouterr().err.splitlines()[-1]
    assert exit_.value.code == 2
    assert err == (f"gradprobe train: error: argument --budget-tokens: '{'9' * 40}'... (100,000 characters) is more "
                   "tokens than a count can hold (at most 9223372036854775807)")


def test_the_python_api_error_is_cut_too(tmp_path):
    with pytest.raises(ValueError) as err:
        gradprobe.probe(budget_tokens="x" * 10**6, out=tmp_path / "p")
    assert str(err.value).endswith(f"got '{'x' * 40}'... (1,000,000 characters)") and len(str(err.value)) < 300
    assert not (tmp_path / "p").exists()
