"""Budget messages print every digit of a budget: ``--updates 2345678`` beside a plan's ``updates = 1_500_000`` was
refused as "--updates 2.34568e+06 is more than the plan's budget.updates = 1.5e+06" (``:g`` keeps six digits), and
``--updates -1234567`` as "got -1.23457e+06". Whole counts (updates, tokens) print with thousands separators in
prose (``2,345,678``); a number advised for pasting into a flag, an argument or the plan is written with ``_``
between thousands (``--updates at most 125_000_000_000``), which ``--updates``'s ``int``, ``--budget-tokens``'s
:func:`~gradprobe.token_counts.parse_token_count`, Python and TOML all read back as that number."""

from __future__ import annotations

import tomllib
from decimal import Decimal

import pytest

from gradprobe.cli.args import integer
from gradprobe.forecast.budget_forecast import _update_no
from gradprobe.study.never_trained_arms import never_trained_text
from gradprobe.token_counts import parse_token_count
from gradprobe.training.budget import budget_text
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_training import tiny_plan  # B x G = 2 x 4 = 8, max_new_tokens 40: at most 320 tokens an update


def _run(budget: dict, **changes):
    return parse_plan(tiny_plan(budget=budget, **changes)).arm("grpo")


def _refusal(run, overrides: dict, **kw) -> str:
    with pytest.raises(PlanError) as refused:
        shorten_budget(run, overrides, **kw)
    return str(refused.value)


def test_an_updates_flag_above_the_plans_is_named_by_all_its_digits():
    message = _refusal(_run({"updates": 1_500_000}), {"updates": 2345678})
    assert message == ("--updates 2,345,678 is more than the plan's budget.updates = 1,500,000: the command-line "
                       "budgets only shorten a run; to lengthen it, raise [budget] updates in the plan (a new plan, "
                       "so its runs are not compared with the old ones)")


def test_a_token_flag_above_the_plans_is_named_by_all_its_digits():
    message = _refusal(_run({"generated_tokens": 250_000}), {"generated_tokens": "1234567"})
    assert message.startswith("--budget-tokens 1,234,567 is more than the plan's budget.generated_tokens = 250,000: ")


def test_a_negative_updates_flag_is_echoed_by_all_its_digits():
    message = _refusal(_run({"updates": 10}), {"updates": -1234567})
    assert message == "--updates must be a whole number > 0 (a budget the run can spend), got -1,234,567"


def test_flops_and_seconds_keep_the_digits_given_and_the_short_form_where_it_is_exact():
    message = _refusal(_run({"flops": 1e6}), {"flops": 1234567.5}, python=True)
    assert message.startswith("budget_flops=1,234,567.5 is more than the plan's budget.flops = 1e+06: ")
    message = _refusal(_run({"device_seconds": 3600}), {"device_seconds": 7200.125})
    assert message.startswith("--budget-seconds 7,200.125 is more than the plan's budget.device_seconds = 3,600: ")


def test_unreachable_updates_name_their_counts_with_separators_and_advise_a_pasteable_flag():
    run = _run({"generated_tokens": 10**12})
    message = _refusal(run, {"updates": 10**12})
    assert message == (
        "--updates 1,000,000,000,000 conflicts with the plan's budget.generated_tokens = 1,000,000,000,000: each "
        "update "
        "of arm 'grpo' costs at least B * G = 2 * 4 = 8 tokens (completions of one token or more) and an update starts "
        "only while fewer than 1,000,000,000,000 tokens are spent, so the run makes at most 125,000,000,000 updates "
        "(at "
        "least 125,000,000,000 * 8 = 1,000,000,000,000 tokens spent after the last) and always stops on tokens before "
        "update 1,000,000,000,000; give --updates at most 125_000_000_000 (reached only if the first 124,999,999,999 "
        "updates spend fewer than 1,000,000,000,000 tokens: completions of about one token) or only one of the two")
    advised = message.split("give --updates at most ")[1].split()[0]
    assert integer(advised) == 125_000_000_000  # what --updates reads (argparse type), pasted as printed
    assert shorten_budget(run, {"updates": integer(advised)}).budget.updates == 125_000_000_000
    python = _refusal(run, {"updates": 10**12}, python=True)
    assert "give updates= at most 125_000_000_000 (" in python  # updates=125_000_000_000: a Python int literal


def test_a_token_flag_out_of_reach_of_the_updates_advises_a_pasteable_token_flag():
    message = _refusal(_run({"updates": 5_000}), {"generated_tokens": 10**9})
    assert message.startswith("--budget-tokens 1,000,000,000 is out of reach of the plan's budget.updates = 5,000: ")
    advised = message.split("give --budget-tokens at most ")[1].split()[0]
    assert advised == "1_600_000" and parse_token_count(advised) == 5_000 * 320


def test_save_weights_past_the_updates_name_the_budget_with_separators_and_a_pasteable_toml_value():
    with pytest.raises(PlanError) as refused:
        _run({"updates": 1_500_000}, train={"save_weights_at": [2_000_000]})
    assert str(refused.value) == (
        "train.save_weights_at lists update(s) 2000000 past budget.updates = 1,500,000: a run makes 1,500,000 "
        "update(s), so no weights would be kept for them; list updates from 1 to 1_500_000 or raise [budget] updates")
    advised = str(refused.value).split("from 1 to ")[1].split()[0]
    assert tomllib.loads(f"save_weights_at = [1, {advised}]")["save_weights_at"] == [1, 1_500_000]


def test_the_plans_tokens_out_of_reach_advise_a_pasteable_toml_updates():
    with pytest.raises(PlanError) as refused:
        _run({"generated_tokens": 10**12, "updates": 1_000})
    message = str(refused.value)
    assert message.startswith("budget.generated_tokens = 1,000,000,000,000 is out of reach of budget.updates = 1,000: ")
    assert message.endswith("raise [budget] updates to at least 3_125_000_000 (ceil(1,000,000,000,000 / 320): the "
                            "fewest with which the token budget can be spent at all, and then only by completions of "
                            "max_new_tokens tokens each; shorter completions need more) or drop [budget] updates or "
                            "[budget] generated_tokens")
    advised = tomllib.loads("updates = 3_125_000_000")["updates"]
    assert _run({"generated_tokens": 10**12, "updates": advised}).budget.updates == 3_125_000_000


@pytest.mark.parametrize("kind, value, prose, pasteable", [
    ("updates", 2345678, "2,345,678", "2_345_678"),
    ("updates", 2345678.0, "2,345,678", "2_345_678"),  # updates=2345678.0 from Python: a whole count
    ("updates", -1234567, "-1,234,567", "-1_234_567"),
    ("updates", 1.5, "1.5", "1.5"),
    ("updates", -1e30, "-1e+30", "-1e+30"),  # no count anyone typed by its digits: as repr writes it
    ("generated_tokens", 2**63 - 1, "9,223,372,036,854,775,807", "9_223_372_036_854_775_807"),
    ("flops", 1e18, "1e+18", "1e+18"),
    ("flops", 10**20, "1e+20", "1e+20"),  # an int that :g writes exactly
    ("flops", 10**20 + 1, "100,000,000,000,000,000,001", "100_000_000_000_000_000_001"),
    ("flops", 1234567.0, "1,234,567", "1_234_567"),
    ("device_seconds", 1234567.5, "1,234,567.5", "1_234_567.5"),
    ("device_seconds", 0.1, "0.1", "0.1"),
    ("device_seconds", float("inf"), "inf", "inf"),
])
def test_budget_text_keeps_every_digit_and_reads_back(kind, value, prose, pasteable):
    assert budget_text(kind, value) == prose and budget_text(kind, value, sep="_") == pasteable
    if isinstance(value, float):  # float() reads it back as the value (--budget-flops, --budget-seconds)
        assert float(pasteable) == value
    else:  # an int: every digit
        assert Decimal(pasteable.replace("_", "")) == value


def test_budget_text_with_a_fixed_format_falls_back_to_the_exact_digits():
    assert budget_text("flops", 8e9, spec=".0f") == "8,000,000,000"
    assert budget_text("flops", 1234.5, spec=".0f") == "1,234.5"  # .0f would print 1,234


def test_never_trained_records_count_their_updates_with_separators():
    assert never_trained_text([{"seed": 0, "why": "x", "updates": 1500}]) == "seed 0: x (1,500 updates)"
    assert never_trained_text([{"seed": 0, "why": "x", "updates": None}]) == "seed 0: x (None updates)"


@pytest.mark.parametrize("update, text", [(22400, "22,400"), (1_500_000.0, "1,500,000"), (12.5, "12.5")])
def test_a_curves_update_numbers_keep_their_digits(update, text):
    assert _update_no(update) == text  # :g printed 1.5e+06
