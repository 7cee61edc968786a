"""Budgets as the forecast prints them (:func:`gradprobe.forecast.result.format_budget`): a trial user's
``--budget-tokens 1e15`` was printed "forecast vs grpo at 1e+06G tokens". From 1000G up a token budget is printed in
scientific notation as ``--budget-tokens`` reads it ("1e15"); a value that rounds up to the next unit takes it
("1M", not "1000k"); ordinary budgets (the default job's 250k) and FLOPs budgets print as before."""

from __future__ import annotations

import numpy as np
import pytest
from forecast_helpers import probe_result

from gradprobe.cli.args import token_count
from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.curves import load_reference_curve
from gradprobe.forecast.result import format_budget
from gradprobe.forecast.section import forecast_section, format_forecast

TINY_TASK = "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"  # the shipped curve's task


@pytest.mark.parametrize("value, shown", [
    (250_000, "250k"), (4_480, "4.48k"), (15_029, "15.03k"), (510_720, "510.7k"), (1_000_000, "1M"),
    (1_500_000, "1.5M"), (2.5e9, "2.5G"), (999, "999"), (1_000, "1k"), (999_949, "999.9k"),
    (999_950, "1M"), (999_999, "1M"), (999_999_999, "1G"), (999.9e9, "999.9G"),  # rounded up: the next unit
    (999.96e9, "1e12"), (1e12, "1e12"), (1.2345e13, "1.234e13"), (1e15, "1e15"), (2**63 - 1, "9.223e18"),
])
def test_a_token_budget_prints_with_a_unit_or_in_scientific_notation(value, shown):
    assert format_budget(value) == format_budget(value, "tokens") == shown


@pytest.mark.parametrize("value", [1e12, 1e15, 2.5e16, 9.2e18])
def test_a_large_token_budget_prints_as_the_command_line_reads_it(value):
    assert token_count(format_budget(value)) == int(value)  # no "e+", no "1000G"


@pytest.mark.parametrize("value, shown", [(1e13, "1e+13 FLOPs"), (1.5e15, "1.5e+15 FLOPs"), (1e30, "1e+30 FLOPs"),
                                          (5e5, "5e+05 FLOPs")])
def test_a_flops_budget_prints_as_before(value, shown):
    assert format_budget(value, "flops") == shown


def _probe(budget_tokens) -> dict:
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "hybrid": 2.0 * o}, {"outcome": 4_480, "hybrid": 15_029},
                        signal={"outcome": o ** 2, "hybrid": 4.0 * o ** 2}, task=TINY_TASK, budget_tokens=budget_tokens)


def test_the_forecast_at_1e15_tokens_names_the_budget_as_given():
    """The trial's ``--budget-tokens 1e15`` on the shipped curve: no verdict (far past its last eval), and each line
    naming the budget reads 1e15 (was 1e+06G)."""
    curve = load_reference_curve("default")
    res = forecast_rewards(curve, _probe(10**15), method="cost_only", n_draws=300, budget_tokens=10**15)
    verdict = res.table.set_index("arm").loc["hybrid", "verdict"]
    assert verdict.startswith("no verdict at 1e15: grpo's 223,214,285,714 effective updates lie ") and (
        "give a budget of at most 510.7k tokens" in verdict), verdict
    text = format_forecast(forecast_section(_probe(10**15), curve=curve, curve_spec="default", method="cost_only"))
    assert "\nforecast vs grpo at 1e15 tokens (grpo reaches " in text and "G tokens" not in text, text


def test_the_default_budget_prints_as_before():
    text = format_forecast(forecast_section(_probe(250_000), curve=load_reference_curve("default"),
                                            curve_spec="default", method="cost_only"))
    assert "\nforecast vs grpo at 250k tokens (grpo reaches " in text, text
