"""An arm that changes the loss type (probe entry ``REWARD@LOSS``, ``gradprobe probe --loss-types``) says in its
verdict that these forecasts do not read what a loss does after the first optimizer step of a batch: its forecast
means "not seen", not "no difference" (``data/calibration/README.md``, "Studies the calibration never saw": cispo
lost points vs grpo where every forecaster said 0). Plain rewards and the reference row are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from forecast_helpers import probe_result, synthetic_curve
from gradprobe.forecast import forecast_rewards, forecast_section
from gradprobe.forecast.result import TABLE_COLUMNS

REPO = Path(__file__).resolve().parents[2]
CLAUSE = ("also acts on the optimizer steps after the first of each batch, which these forecasts do not read: its "
          'forecast means "not seen", not "no difference" (data/calibration/README.md, "Studies the calibration never '
          'saw")')
EQUAL_COST = "cost only cannot tell rewards of equal cost apart"


def _synthetic(loss_type="grpo"):
    curve = synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})
    rng = np.random.default_rng(0)
    o = rng.normal(2.0, 1.0, size=16)
    probe = probe_result({"outcome": o, "outcome@cispo": 0.9 * o + rng.normal(0.0, 0.3, size=16),
                          "same": -0.5 * o + rng.normal(0.0, 0.3, size=16)},
                         {"outcome": 4_000, "outcome@cispo": 4_000, "same": 4_000})
    if loss_type is not None:
        probe["config"]["loss_type"] = loss_type
    return curve, probe


@pytest.mark.parametrize("method", ["cost_only", "probe", "signal_proxy"])
def test_a_loss_type_arm_gets_the_clause_once_and_a_plain_reward_does_not(method):
    curve, probe = _synthetic()
    t = forecast_rewards(curve, probe, method=method).table.set_index("arm")
    cispo, same = t.loc["outcome@cispo", "verdict"], t.loc["same", "verdict"]
    assert cispo.count(CLAUSE) == 1 and cispo.endswith("; a change of loss (cispo) " + CLAUSE)
    assert CLAUSE not in same and "change of loss" not in same
    assert t.loc["outcome", "verdict"] == "reference (grpo)"
    assert list(t.reset_index().columns) == list(TABLE_COLUMNS)  # the table's schema is unchanged
    if method == "cost_only":  # the equal-cost row keeps its words, the clause after them
        words = (f"{EQUAL_COST}: at 250k its forecast is +0.0 by construction (the same tokens per update as grpo), "
                 "not a measurement (interval: none); the probe's forecast, not validated better than cost only: ")
        assert cispo.startswith(words) and same.startswith(words) and t.loc["outcome@cispo", "by_construction"]
        probe_part = cispo[len(words): -len("; a change of loss (cispo) " + CLAUSE)]
        assert probe_part.endswith("(95% interval) vs grpo, SNR of rho-1 " + f"{t.loc['outcome@cispo', 'snr']:.2f}")


def test_the_same_forecast_without_the_clause_is_the_old_verdict():
    curve, probe = _synthetic()
    t = forecast_rewards(curve, probe, method="probe").table.set_index("arm")
    v = t.loc["outcome@cispo", "verdict"]
    gain, (lo, hi) = t.loc["outcome@cispo", "forecast_gain"], t.loc["outcome@cispo", "gain_interval"]
    head = v[: v.index("; a change of loss")]
    assert head.endswith(f"at 250k: {gain:+.1f} [{lo:+.1f}, {hi:+.1f}] vs grpo")


def test_an_arm_on_the_plain_entry_under_a_reference_with_a_loss_type_gets_it_too():
    curve, probe = _synthetic()
    arms = {"cispo_ref": {"reward": "outcome@cispo"}, "plain": {"reward": "outcome"}, "same": {"reward": "same"}}
    t = forecast_rewards(curve, probe, method="cost_only", arms=arms,
                         reference_reward="outcome@cispo").table.set_index("arm")
    assert t.loc["cispo_ref", "verdict"] == "reference (grpo)"
    assert t.loc["plain", "verdict"].count(CLAUSE) == 1 and "change of loss (grpo) " in t.loc["plain", "verdict"]
    assert t.loc["same", "verdict"].count(CLAUSE) == 1  # 'same' is under the probe's own loss, not the reference's


def test_a_probe_json_without_its_loss_type_still_parses_the_keys():
    curve, probe = _synthetic(loss_type=None)
    t = forecast_rewards(curve, probe, method="cost_only").table.set_index("arm")
    assert t.loc["outcome@cispo", "verdict"].count(CLAUSE) == 1 and CLAUSE not in t.loc["same", "verdict"]


def test_the_shipped_loss_type_probe_every_forecaster():
    probe = json.loads((REPO / "data" / "study_tiny_losses" / "probe" / "probe.json").read_text())
    for method in ("cost_only", "probe", "signal_proxy"):
        rows = {r["reward"]: r["verdict"] for r in forecast_section(probe, method=method)["rows"]}
        assert rows["outcome"] == "reference (grpo)"
        for loss in ("bnpo", "cispo", "gspo"):
            assert rows[f"outcome@{loss}"].count(CLAUSE) == 1
            assert f"; a change of loss ({loss}) {CLAUSE}" in rows[f"outcome@{loss}"]


def test_loss_change_clause_rule():
    from gradprobe.forecast.special_rows import loss_change_clause
    assert loss_change_clause("outcome", "outcome", "grpo") == ""
    assert loss_change_clause("mc_value", "outcome", "grpo") == ""
    assert loss_change_clause("mc_value@bnpo", "outcome@bnpo", "grpo") == ""
    assert loss_change_clause("outcome@bnpo", "outcome", None) == "; a change of loss (bnpo) " + CLAUSE
    assert loss_change_clause("outcome", "outcome@bnpo", "dapo") == "; a change of loss (dapo) " + CLAUSE
    with pytest.raises(ValueError, match="is not REWARD or REWARD@LOSS_TYPE"):
        loss_change_clause("a@b@c", "outcome", "grpo")
