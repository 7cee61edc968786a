"""A reward whose rho is negative (its update points against grpo's) is forecast as no training (effective updates
clipped to 0: the curve cannot go below R0). Its probe forecast is printed in the probe column and quoted in the
cost-only verdict of an equal-cost reward, so a note says it is a ceiling, not a forecast of the harm, whichever
forecaster the verdict uses (it was noted only when the probe was the verdict's forecaster)."""

from __future__ import annotations

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast

T = 250_000
C = 4_000


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})


def _probe(rho=-1.5, cost=C, **kw):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "anti": rho * o}, {"outcome": C, "anti": cost},
                        signal={"outcome": o ** 2, "anti": 2.25 * o ** 2}, **kw)


@pytest.mark.parametrize("method", ["cost_only", "probe", "signal_proxy"])
def test_clipped_probe_forecast_is_noted_under_every_forecaster(curve, method):
    row = forecast_rewards(curve, _probe(), method=method).table.set_index("arm").loc["anti"]
    start = curve(0.0) - curve(T / C)  # no training: the curve's start R0 vs grpo's accuracy at the budget
    assert row["rho"] == pytest.approx(-1.5, rel=1e-9) and row["gain_probe"] == pytest.approx(start, abs=1e-9)
    note = (f"rho -1.5 < 0 (probe): its update points against grpo's and is forecast as no training (the curve "
            f"cannot go below R0), so the probe forecast {start:+.1f} is a ceiling on its gain vs grpo, not a "
            "forecast of the harm")
    assert row["note"].count("rho -1.5 < 0") == 1 and note in row["note"]


def test_quoted_probe_forecast_carries_the_note_in_the_printed_verdict(curve):
    text = format_forecast(forecast_section(_probe(model="other"), curve=curve, method="cost_only"))
    line = next(x for x in text.splitlines() if x.startswith("anti: "))
    start = curve(0.0) - curve(T / C)
    assert "cost only cannot tell rewards of equal cost apart" in line
    assert f"the probe's forecast, not validated better than cost only: {start:+.1f} [" in line
    assert f"so the probe forecast {start:+.1f} is a ceiling on its gain vs grpo, not a forecast of the harm" in line


def test_positive_rho_gets_no_clip_note(curve):
    row = forecast_rewards(curve, _probe(rho=1.5), method="cost_only").table.set_index("arm").loc["anti"]
    assert "< 0" not in row["note"] and "ceiling" not in row["note"]
