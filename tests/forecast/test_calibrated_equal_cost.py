"""Calibrated gains that carry no information about the reward are marked, with a note saying why.

A trial user's report: rewards of equal tokens per update (``mc_value`` and ``hybrid_0.5``, 15,029 tokens/update in
the default job) get the same cost-only gain, so the calibration gives them the same calibrated gain, printed as if
it told them apart; a reward forecast at 0 gets the calibration's intercept alone; a calibration whose slope is not
distinguished from 0 prints a confident number that is only a shift. Now each such calibrated gain is marked
(``tied``, ``intercept only``, ``shift only``: the entry's ``caveats`` in ``calibrated.json``, the ``caveat`` column
of ``calib.apply``) and a note says what it cannot tell; the fitted parameters are untouched.

Built on the shipped study's real probe (``data/study_tiny/probe``: mc_value, mc_advantage and hybrid_0.5 at 25,520
tokens per update each) and the shipped default calibration (slope 0.827, intercept -0.465 on forecast_cost_only).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import calib
from calib.apply import calibrate, format_calibrated, load_probe, slope_interval

PROBE = Path(__file__).resolve().parents[2] / "data" / "study_tiny" / "probe"
INTERCEPT = -0.46476402887955115  # the shipped calibration's fitted intercept (calib/data/calibration.json)
SLOPE = 0.8268902680781792
#: Tolerance of numbers read off the fitted reference curve (points): its least-squares fit differs by about 3e-7
#: points between CPUs (OpenBLAS picks its kernels by CPU), and the shipped calibration was refitted on another one.
FIT_ABS = 1e-5
TIE = ("['mc_value', 'mc_advantage', 'hybrid_0.5'] have the same forecast_cost_only (-4.625; cost only reads only the "
       "tokens per update: 25,520 for each), so the calibration gives them the same calibrated gain (-4.289) and "
       "interval: it cannot tell them apart, and the difference between them is not measured by it")


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


@pytest.fixture(scope="module")
def probe():
    raw, _, task = load_probe(PROBE)
    return raw, task


def _rows(doc: dict) -> dict[str, list[str]]:
    """Reward -> the marks after its interval in the printed block."""
    out = {}
    for line in format_calibrated(doc).splitlines():
        parts = line.split("]  ")
        if len(parts) == 2 and not line.startswith("note:"):
            out[line.split()[0]] = parts[1].split("  ")
    return out


def test_equal_cost_rewards_are_marked_tied_and_the_note_says_calibration_cannot_tell_them_apart(default, probe):
    raw, task = probe
    doc = calibrate(default, raw, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    gain = SLOPE * by["mc_value"]["forecast"] + INTERCEPT
    assert by["mc_value"]["forecast"] == pytest.approx(-4.62459800770425, abs=FIT_ABS)
    for name in ("mc_value", "mc_advantage", "hybrid_0.5"):
        assert by[name]["calibrated_gain"] == pytest.approx(gain, abs=1e-9) and by[name]["caveats"] == ["tied"]
    assert by["outcome"]["caveats"] == []  # grpo vs itself: 0 by definition, nothing to qualify
    assert doc["notes"].count(TIE) == 1
    assert _rows(doc) == {"mc_value": ["tied"], "mc_advantage": ["tied"], "hybrid_0.5": ["tied"]}
    # the shipped calibration's slope is clearly not 0 over its 8 studies: no shift-only mark
    s = doc["calibration"]["slope"]
    assert s["value"] == pytest.approx(SLOPE, abs=1e-9) and s["intercept"] == pytest.approx(INTERCEPT, abs=1e-9)
    assert s["interval"] == pytest.approx([0.6707, 0.9831], abs=1e-3) and s["includes_zero"] is False
    assert (s["groups"], s["level"], s["method"]) == (8, 0.95, "delete-one-study jackknife")
    table = calib.apply(default, PROBE)  # the Python front door: the same marks in its caveat column
    assert table["caveat"].to_dict() == {"outcome": "", "mc_value": "tied", "mc_advantage": "tied",
                                         "hybrid_0.5": "tied"}


def test_a_reward_forecast_at_zero_gets_the_intercept_alone_and_says_so(default, probe):
    raw, task = copy.deepcopy(probe[0]), probe[1]
    grpo = next(r for r in raw["rewards"] if r["name"] == "outcome")
    hybrid = next(r for r in raw["rewards"] if r["name"] == "hybrid_0.5")
    hybrid.update(tokens_per_update=grpo["tokens_per_update"], generated_tokens={})  # a reward of grpo's cost, its
    hybrid["predicted_gain_at_budget"] = (  # gain at the budget as the probe writes it (probe_batches_of checks it)
        hybrid["budget_tokens"] / hybrid["tokens_per_update"] * hybrid["predicted_gain_per_update"])
    doc = calibrate(default, raw, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert by["hybrid_0.5"]["forecast"] == 0.0 and by["hybrid_0.5"]["calibrated_gain"] == pytest.approx(INTERCEPT)
    assert by["hybrid_0.5"]["caveats"] == ["intercept only"]
    assert by["mc_value"]["caveats"] == by["mc_advantage"]["caveats"] == ["tied"]
    assert ("['hybrid_0.5'] has forecast_cost_only 0 (no difference from grpo: the same tokens per update as grpo), "
            "so its calibrated gain -0.465 is the calibration's intercept alone: the mean offset from grpo of the runs "
            "it was fitted on, the same for any reward forecast at 0, not a measurement of it") in doc["notes"]
    assert _rows(doc)["hybrid_0.5"] == ["intercept only"]


def test_a_calibration_whose_slope_interval_includes_zero_is_marked_a_shift(default, probe):
    raw, task = probe
    rows = default.rows.copy()
    rows["target"] = -1.0 + np.random.default_rng(2).normal(0, 2.0, len(rows))  # realized gains unrelated to forecast
    flat = dataclasses.replace(default, rows=rows, estimator=None, regressor=None)._fit()
    s = slope_interval(flat)
    assert s["value"] == pytest.approx(0.0121, abs=1e-3) and s["includes_zero"] is True
    lo, hi = s["interval"]
    assert lo == pytest.approx(-0.1374, abs=1e-3) and hi == pytest.approx(0.1617, abs=1e-3)
    doc = calibrate(flat, raw, task=task)
    assert all(r["caveats"] == ["tied", "shift only"] for r in doc["rewards"] if r["name"] != "outcome")
    shift = [n for n in doc["notes"] if n.startswith("the calibration's slope")]
    assert shift == [f"the calibration's slope on forecast_cost_only is +0.012, and its 95% delete-one-study jackknife "
                     f"interval over its 8 studies, [{lo:+.3f}, {hi:+.3f}], includes 0: the studies do not show that "
                     f"the calibrated gain depends on the forecast, so every calibrated gain here is its intercept "
                     f"({s['intercept']:+.3f}) plus a change not distinguished from none: a shift, not a ranking of "
                     "the rewards"]


def test_a_reward_without_calibrated_gain_is_not_counted_in_a_tie(default, probe):
    raw, task = copy.deepcopy(probe[0]), probe[1]
    entry = next(r for r in raw["rewards"] if r["name"] == "hybrid_0.5")
    entry.update(no_signal=True, no_signal_reason="every advantage is 0")
    doc = calibrate(default, raw, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert math.isnan(by["hybrid_0.5"]["calibrated_gain"]) and by["hybrid_0.5"]["caveats"] == []
    assert by["mc_value"]["caveats"] == ["tied"]
    assert any(n.startswith("['mc_value', 'mc_advantage'] have the same forecast_cost_only") for n in doc["notes"])


@pytest.mark.parametrize("method", ["isotonic", "none"])
def test_other_methods_have_no_slope(default, method):
    assert slope_interval(dataclasses.replace(default, method=method)) is None
