"""A token budget on the command line may be written as gradprobe's own output writes it.

``gradprobe probe --budget-tokens 250k`` (and ``2.5e5``) failed with argparse's ``invalid int value`` while the
tool writes budgets as ``250k`` and the Python API takes ``budget_tokens=2.5e5``. Every command that takes a token
budget (``probe``, ``train``) reads it with one parser, :func:`gradprobe.cli.args.token_count`: an integer, one
with a k/M/G suffix or scientific notation, computed exactly; a value that is not a whole positive number of
tokens is one argparse error naming the option and the accepted forms.
"""

from __future__ import annotations

import argparse

import pytest

from gradprobe.cli import main
from gradprobe.cli.args import CommandParser, TOKEN_COUNT_FORMS, token_count
from gradprobe.cli.probe import _add_probe
from gradprobe.cli.train import add_train_parser

FORMS = ("a whole number of tokens: an integer (250000), with a k, M or G suffix (250k, 1.5M, 2G) or in scientific "
         "notation (2.5e5)")


@pytest.mark.parametrize("text, tokens", [
    ("250000", 250_000), ("250_000", 250_000), ("250k", 250_000), ("250K", 250_000), ("1.5M", 1_500_000),
    ("2G", 2_000_000_000), ("2.5e5", 250_000), ("2.5E5", 250_000), ("1e9", 1_000_000_000), ("0.25k", 250),
    ("250000.0", 250_000), (" 250k ", 250_000), ("9223372036854775807", 2**63 - 1),
    ("9.223372036854775807e18", 2**63 - 1),  # exact arithmetic: a float would read 2**63
])
def test_token_counts_are_read_exactly(text, tokens):
    value = token_count(text)
    assert value == tokens and type(value) is int


@pytest.mark.parametrize("text, message", [
    ("250000.5", f"'250000.5' is 250000.5 tokens, not a whole number; expected {FORMS}"),
    ("1.0000005M", f"'1.0000005M' is 1000000.5 tokens, not a whole number; expected {FORMS}"),
    ("1.00000000000000000000000000000001e3", "'1.00000000000000000000000000000001e3' is "
                                             f"1000.00000000000000000000000000001 tokens, not a whole number; "
                                             f"expected {FORMS}"),
    ("1.5k5", f"expected {FORMS}; got '1.5k5'"),
    ("nan", f"expected {FORMS}; got 'nan'"),
    ("inf", f"expected {FORMS}; got 'inf'"),
    ("250 k", f"expected {FORMS}; got '250 k'"),
    ("1.5m", f"expected {FORMS}; got '1.5m'"),
    ("2e5k", f"expected {FORMS}; got '2e5k'"),
    ("", f"expected {FORMS}; got ''"),
    ("0", f"must be > 0, got '0'; expected {FORMS}"),
    ("-250k", f"must be > 0, got '-250k'; expected {FORMS}"),
    ("0.5", f"'0.5' is less than one token; expected {FORMS}"),
    ("1e-999999999999", f"'1e-999999999999' is less than one token; expected {FORMS}"),
    ("\u0661\u0662\u0663", f"expected {FORMS}; got '\u0661\u0662\u0663'"),  # Arabic-Indic digits: not ASCII
    ("1e" + "0" * 5000 + "3", "expected " + FORMS + "; got '1e" + "0" * 38 + "'... (5,003 characters)"),  # no limit
    ("1e19", "'1e19' is more tokens than a count can hold (at most 9223372036854775807)"),
    ("5e999999999999", "'5e999999999999' is more tokens than a count can hold (at most 9223372036854775807)"),
])
def test_what_is_no_whole_positive_token_count_is_refused_with_the_forms(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        token_count(text)
    assert str(err.value) == message
    assert TOKEN_COUNT_FORMS == FORMS


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the probe and train commands' own parsers (nothing is run)."""
    parser = argparse.ArgumentParser(prog="gradprobe")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    _add_probe(sub)
    add_train_parser(sub)
    return parser.parse_args(argv)


@pytest.mark.parametrize("text, tokens", [("250k", 250_000), ("2.5e5", 250_000), ("1.5M", 1_500_000),
                                          ("50000", 50_000)])
def test_probe_and_train_read_budget_strings(text, tokens):
    probe = _parse(["probe", "--out", "p", "--budget-tokens", text])
    assert probe.budget_tokens == tokens and type(probe.budget_tokens) is int
    train = _parse(["train", "--plan", "plans/tiny.toml", "--arm", "grpo", "--out", "r", "--budget-tokens", text])
    assert train.budget_tokens == tokens and type(train.budget_tokens) is int
    assert _parse(["probe", "--out", "p"]).budget_tokens == 250_000  # the default is untouched


@pytest.mark.parametrize("command", [["probe"], ["train", "--plan", "plans/tiny.toml", "--arm", "grpo"]])
@pytest.mark.parametrize("text, message", [
    ("250000.5", f"'250000.5' is 250000.5 tokens, not a whole number; expected {FORMS}"),
    ("nan", f"expected {FORMS}; got 'nan'"),
    ("0", f"must be > 0, got '0'; expected {FORMS}"),
])
def test_a_bad_budget_is_one_argparse_error_naming_the_option(tmp_path, capsys, command, text, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main([*command, "--out", str(out), "--budget-tokens", text])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"gradprobe {command[0]}: error: argument --budget-tokens: {message}\n"), err
    assert "invalid" not in err and not out.exists()


@pytest.mark.parametrize("command", ["probe", "train"])
def test_the_help_names_the_accepted_forms(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--budget-tokens N" in text
    assert "an integer (250000), with a k, M or G suffix (250k, 1.5M) or in scientific notation (2.5e5)" in text
