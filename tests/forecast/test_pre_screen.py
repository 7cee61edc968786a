"""The forecast's pre-screen cost: the probe's generated tokens (batch rollouts, MC continuations, selection and the
held-out reference's rollouts) against one grpo run's budget, and a note when screening costs more than training."""

from __future__ import annotations

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast.section import forecast_section, format_forecast


def _probe(rollout, continuation, reference):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    p = probe_result({"outcome": o, "mc": 2.0 * o}, {"outcome": 1000.0, "mc": 1500.0}, budget_tokens=250_000)
    p["ledger"]["generated_tokens"] = {"rollout": rollout, "continuation": continuation, "eval": 999_999}
    p["reference"]["ledger"] = {"generated_tokens": {"eval": reference}}
    return p


def test_pre_screen_share_counts_the_probes_own_tokens():
    d = forecast_section(_probe(4_000, 10_000, 6_000), curve=synthetic_curve(), curve_spec="synthetic")
    ps = d["pre_screen"]
    # the probe ledger's "eval" entry is not the pre-screen's (the reference's own ledger is)
    assert ps["generated_tokens"] == 20_000 and ps["budget_tokens"] == 250_000
    assert ps["share_of_budget"] == pytest.approx(0.08, abs=1e-15)
    assert "pre-screen cost: 20,000 generated tokens = 8.0% of one grpo run's 250k budget" in format_forecast(d)
    assert not [n for n in d["notes"] if "training an arm costs less than screening it" in n]


def test_a_pre_screen_dearer_than_the_budget_is_noted():
    d = forecast_section(_probe(200_000, 90_000, 10_000), curve=synthetic_curve(), curve_spec="synthetic")
    assert d["pre_screen"]["share_of_budget"] == pytest.approx(1.2)
    [note] = [n for n in d["notes"] if "training an arm costs less than screening it" in n]
    assert note.startswith("the pre-screen spent 300,000 generated tokens, 1.2x one grpo run's budget of 250,000")
    assert f"note: {note}" in format_forecast(d)
