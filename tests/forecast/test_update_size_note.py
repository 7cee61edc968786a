"""The forecast reads the reference curve's updates: where the probe was given another update
(--update-prompts/--update-group), the note says the forecast is for the curve's update, not that one, and does
not advise passing the options the user passed; the title names the update the forecast is for (trial finding:
a 32x8 probe read on the shipped 16x8 curve was told to "pass --update-prompts/--update-group")."""

from __future__ import annotations

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.probe_input import update_batches
from gradprobe.forecast.section import format_forecast

ADVICE = "pass --update-prompts/--update-group to state the update you mean"
C_OUT, C_H = 8928.0, 29968.0  # the trial's 32x8 update: outcome and hybrid tokens per update


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})


def _probe(update_prompts=None, update_group=None, prompts=8, group=4):
    rng = np.random.default_rng(0)
    p = probe_result({"outcome": rng.normal(1.0, 0.3, 8), "hybrid": rng.normal(2.0, 0.3, 8)},
                     {"outcome": C_OUT, "hybrid": C_H}, prompts=prompts, group=group)
    p["config"].update(update_prompts=update_prompts, update_group=update_group)
    return p


def test_a_stated_update_gets_the_forecast_for_the_curves_update_said_plainly(curve):
    res = forecast_rewards(curve, _probe(32, 8), n_draws=300)
    assert not [n for n in res.notes if ADVICE in n]  # the user passed them already
    [note] = [n for n in res.notes if "rescaled by" in n]
    assert note == ("the forecast reads the curve's updates, 16x8 completions, so it is a forecast for 16x8 updates, "
                    "not the 32x8 the probe was given (--update-prompts/--update-group): tokens per update rescaled "
                    "by 0.5 to the curve's (per-update efficiency does not depend on the batch size); to forecast "
                    "32x8 updates, give --reference-curve the curve of a grpo run at 32x8 (`gradprobe train` with a "
                    "plan whose [train] prompts_per_update = 32 and group = 8, or your own run's log)")
    t = res.table.set_index("arm")  # the numbers: the curve's update, as before
    assert t.loc["outcome", "tokens_per_update"] == 0.5 * C_OUT and t.loc["hybrid", "tokens_per_update"] == 0.5 * C_H
    assert res.update == {"curve": [16, 8], "probe": [32, 8], "stated": True}
    assert res.to_dict()["update"] == res.update


def test_one_stated_option_is_a_stated_update(curve):
    got = update_batches(curve, _probe(update_group=8)["config"])  # B falls back to the probe batch's 8
    assert got == {"curve": [16, 8], "probe": [8, 8], "stated": True}


def test_an_unstated_update_keeps_the_advice_to_state_it(curve):
    res = forecast_rewards(curve, _probe(), n_draws=300)  # the probe batch 8x4 stands in for the update
    [note] = [n for n in res.notes if "rescaled by" in n]
    assert note == ("the curve's updates are 16x8 completions, the probe's 8x4: tokens per update rescaled by 4 "
                    f"(per-update efficiency does not depend on the batch size; {ADVICE})")
    assert res.update == {"curve": [16, 8], "probe": [8, 4], "stated": False}
    title = format_forecast(res.to_dict()).splitlines()[1]
    assert title.startswith("forecast vs grpo at 250k tokens, for the curve's 16x8 updates, not the probe's 8x4 (")


def test_the_title_names_the_update_the_forecast_is_for(curve):
    title = format_forecast(forecast_rewards(curve, _probe(32, 8), n_draws=300).to_dict()).splitlines()[1]
    assert title.startswith("forecast vs grpo at 250k tokens, for the curve's 16x8 updates, not the 32x8 of "
                            "--update-prompts x --update-group (grpo reaches ")
    same = forecast_rewards(curve, _probe(16, 8), n_draws=300)  # the curve's own update: nothing to say
    assert same.update is None and not [n for n in same.notes if "rescaled by" in n]
    assert format_forecast(same.to_dict()).splitlines()[1].startswith("forecast vs grpo at 250k tokens (grpo reaches ")
