"""The pre-screen cost is reported without a forecast too: the tokens were spent and the budget is known.

A probe of a model without a shipped reference curve (or without grpo's reward among --rewards) gets a ``forecast``
section ``{"available": False, ...}`` that still carries ``pre_screen`` (and its note when screening cost more
than one grpo run), and ``format_forecast`` prints the pre-screen line after ``forecast: none``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast.section import forecast_section, format_forecast

NO_CURVE_MODEL = "smollm2-135m"  # not in DEFAULT_CURVES: no forecast without --reference-curve


def _probe(rollout, continuation, selection, reference, *, model=NO_CURVE_MODEL, rewards=("outcome", "mc"),
           budget_tokens=250_000):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    groups = {"outcome": o, "mc": 2.0 * o}
    p = probe_result({n: groups[n] for n in rewards}, {"outcome": 1000.0, "mc": 1500.0}, model=model,
                     budget_tokens=budget_tokens)
    # the probe ledger's "eval" is not the pre-screen's; the reference's own ledger is, every category of it
    p["ledger"]["generated_tokens"] = {"rollout": rollout, "continuation": continuation, "selection": selection,
                                       "eval": 999_999}
    p["reference"]["ledger"] = {"generated_tokens": {"eval": reference}}
    return p


def test_no_reference_curve_still_reports_the_pre_screen_cost():
    d = forecast_section(_probe(4_000, 10_000, 500, 6_000))
    assert d["available"] is False and d["note"].startswith(f"no reference curve for model {NO_CURVE_MODEL!r}")
    assert d["pre_screen"]["generated_tokens"] == 20_500 and d["pre_screen"]["budget_tokens"] == 250_000.0
    assert d["pre_screen"]["share_of_budget"] == pytest.approx(0.082, abs=1e-15)
    assert d["pre_screen"]["note"].startswith("probe rollouts, MC continuations and the held-out reference's")
    assert d["notes"] == []
    json.dumps(d, allow_nan=False)  # probe.json-ready
    lines = format_forecast(d).split("\n")
    assert lines[0] == "" and lines[1] == f"forecast: none. {d['note']}"
    assert lines[2:] == ["pre-screen cost: 20,500 generated tokens = 8.2% of one grpo run's 250k budget"]


def test_without_the_reference_reward_a_dearer_pre_screen_is_noted_after_the_cost():
    d = forecast_section(_probe(200_000, 80_000, 10_000, 10_000, model="tiny", rewards=("mc",)))
    assert d["available"] is False and d["note"] == "the forecast is a gain vs grpo: add 'outcome' to --rewards"
    assert d["pre_screen"]["generated_tokens"] == 300_000
    assert d["pre_screen"]["share_of_budget"] == pytest.approx(1.2, abs=1e-15)
    [note] = d["notes"]
    assert note.startswith("the pre-screen spent 300,000 generated tokens, 1.2x one grpo run's budget of 250,000: "
                           "at this budget training an arm costs less than screening it")
    assert format_forecast(d).split("\n")[1:] == [
        f"forecast: none. {d['note']}",
        "pre-screen cost: 300,000 generated tokens = 120.0% of one grpo run's 250k budget",
        f"note: {note}"]


def test_a_pre_screen_exactly_at_the_budget_is_noted_without_a_forecast():
    d = forecast_section(_probe(150_000, 50_000, 0, 50_000))
    assert d["pre_screen"]["share_of_budget"] == 1.0
    assert [n.split(":")[0] for n in d["notes"]] == [
        "the pre-screen spent 250,000 generated tokens, 1.0x one grpo run's budget of 250,000"]


@pytest.mark.parametrize("budget", [None, 0, "many"])
def test_without_a_usable_token_budget_the_spent_tokens_are_kept_and_no_share_is_printed(budget):
    d = forecast_section(_probe(4_000, 10_000, 0, 6_000, budget_tokens=budget))
    assert d["pre_screen"]["generated_tokens"] == 20_000
    assert d["pre_screen"]["budget_tokens"] is None and d["pre_screen"]["share_of_budget"] is None
    assert d["notes"] == []
    assert format_forecast(d) == f"\nforecast: none. {d['note']}"


def test_the_block_is_the_one_a_forecast_records():
    with_curve = forecast_section(_probe(4_000, 10_000, 500, 6_000), curve=synthetic_curve(), curve_spec="s")
    without = forecast_section(_probe(4_000, 10_000, 500, 6_000))
    assert with_curve["available"] and with_curve["pre_screen"] == without["pre_screen"]
    assert ("pre-screen cost: 20,500 generated tokens = 8.2% of one grpo run's 250k budget"
            in format_forecast(with_curve).split("\n"))
