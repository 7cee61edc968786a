"""A verdict is never read off an interval that its own row says not to trust (trial finding: ``gradprobe probe
--prompts 4 --group 8 --forecaster probe`` printed ``hybrid_0.5: not worth its tokens at 250k: -0.9 [-1.7, -0.1] vs
grpo`` beside the note "rho rests on few groups: 4 of 4 ...: its SNR and interval are not to be trusted").

Where the verdict's forecaster reads the probe's rho and rho rests on under 5 informative groups, the row gives no
verdict: its verdict says why and the fix, quoting the forecast and its interval for information; the console table,
``report.html`` and the intervals figure mark the row as giving no verdict, and ``probe.json``'s row has a
``no_verdict_reason``. Under cost only (rho not read) and with enough groups the verdict stands."""

from __future__ import annotations

import json

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast
from gradprobe.forecast.special_rows import FEW_GROUPS_VERDICT, few_groups_reason, no_verdict_words
from gradprobe.probe.report_figures import interval_figure, no_verdict
from gradprobe.probe.report_html import _no_verdict_line, _verdict_class

ADVICE = ("worth its", "not worth", "no detectable difference")
REASON_START = ("rho rests on too few groups for its interval to carry a verdict (under 5 groups contribute: see the "
                "note): ")
FIX = ", for information only; use more --prompts or --probe-batches"


def _probe(groups: int = 4) -> dict:
    """grpo and a reward 2.5x as aligned, every one of ``groups`` groups informative (the trial's 4 prompts), the
    reward's update 3.35x as dear: the probe forecasts a clear loss, with a narrow interval."""
    o = np.resize([1.0, 1.2, 0.8, 1.1], groups)
    hybrid = 2.5 * o + np.resize([0.1, -0.2, 0.15, -0.05], groups)
    return probe_result({"outcome": o, "hybrid": hybrid}, {"outcome": 4480.0, "hybrid": 15029.0}, prompts=groups)


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4)


def test_a_probe_verdict_on_four_groups_is_no_verdict_with_its_numbers_and_the_fix(curve):
    t = forecast_rewards(curve, _probe(), method="probe", n_draws=300).table.set_index("arm")
    row = t.loc["hybrid"]
    gain, (lo, hi) = row["forecast_gain"], row["gain_interval"]
    assert gain == pytest.approx(row["gain_probe"]) and hi < 0  # the interval alone would say "not worth"
    nums = f"{gain:+.1f} [{lo:+.1f}, {hi:+.1f}] vs grpo"
    assert row["no_verdict_reason"] == REASON_START + nums + FIX
    assert row["verdict"] == f"no verdict at 250k: {REASON_START}{nums}{FIX}"
    assert not any(a in row["verdict"] for a in ADVICE)
    assert "rho rests on few groups: 4 of 4 contribute" in row["note"]  # the note that says how few stays
    assert not isinstance(t.loc["outcome", "no_verdict_reason"], str) and t.loc["outcome", "verdict"] == (
        "reference (grpo)")


def test_cost_only_does_not_read_rho_and_keeps_its_verdict(curve):
    t = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300).table.set_index("arm")
    assert t.loc["hybrid", "verdict"].startswith("not worth its tokens at 250k: ")
    assert not isinstance(t.loc["hybrid", "no_verdict_reason"], str)


def test_enough_groups_keep_the_probes_verdict(curve):
    t = forecast_rewards(curve, _probe(groups=16), method="probe", n_draws=300).table.set_index("arm")
    assert t.loc["hybrid", "verdict"].startswith("not worth its tokens at 250k: ")
    assert not isinstance(t.loc["hybrid", "no_verdict_reason"], str)


def test_the_printed_table_marks_the_row_and_says_why(curve):
    sec = json.loads(json.dumps(forecast_section(_probe(), curve=curve, method="probe"), allow_nan=False))
    text = format_forecast(sec)
    row = next(r for r in sec["rows"] if r["arm"] == "hybrid")
    assert row["no_verdict_reason"].startswith(FEW_GROUPS_VERDICT)
    assert "* resting on too few probe groups to give a verdict (why: below); not advice" in text.splitlines()
    line = next(x for x in text.splitlines() if x.startswith("hybrid: "))
    assert line.startswith(f"hybrid: no verdict at 250k: {REASON_START}")
    assert "validation runs" not in row["verdict"]  # no validated error qualifies a verdict that is not given
    table_row = next(x for x in text.splitlines() if x.startswith("hybrid "))
    assert f"{row['forecast_gain']:+.1f}*" in table_row


def test_report_html_and_figure_treat_the_row_as_giving_no_verdict(curve):
    sec = json.loads(json.dumps(forecast_section(_probe(), curve=curve, method="probe"), allow_nan=False))
    row = next(r for r in sec["rows"] if r["arm"] == "hybrid")
    assert _verdict_class(row) == "noverdict" and no_verdict(row)
    assert _no_verdict_line(sec) == ("* resting on too few probe groups to give a verdict (why: in the row's verdict); "
                                     "not advice")
    result = {"rewards": [{"name": "outcome", "inner_product": 1.0, "interval": [0.5, 1.5]},
                          {"name": "hybrid", "inner_product": 2.5, "interval": [2.0, 3.0]}], "forecast": sec}
    _, caption = interval_figure(result)
    assert "; an arm whose rho rests on too few probe groups to give a verdict is not drawn" in caption


def test_the_words_under_the_table_follow_why_the_rows_give_no_verdict():
    few = few_groups_reason(-0.9, (-1.7, -0.1))
    curve_reason = "the reference curve falls"
    assert few == REASON_START + "-0.9 [-1.7, -0.1] vs grpo" + FIX
    assert no_verdict_words([None, few]) == "resting on too few probe groups to give a verdict"
    assert no_verdict_words([curve_reason, None]) == "read off a reference curve that gives no verdict here"
    assert no_verdict_words([curve_reason, few]) == no_verdict_words([f"{curve_reason}; {few}"]) == (
        "read off a reference curve that gives no verdict here, or resting on too few probe groups to give one")
    assert few_groups_reason(float("nan"), (float("nan"), float("nan"))) == (
        REASON_START.removesuffix(": ") + "; use more --prompts or --probe-batches")
