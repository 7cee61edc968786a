"""The study API's accuracy table (gradprobe.api.study.StudyAnalysis.accuracy) gives an arm's accuracy interval within
[0, 100] points, as its docstring says and as the analysis now writes it, also for an analysis.json written before
accuracy intervals were clipped (a t bound past 100 or below 0, which the learning-rate sweep's report clips too);
gains keep their t interval, an interval inside the range is given as written and none stays NaN."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from gradprobe.api.study import StudyAnalysis

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "study_tiny" / "analysis.json"


def _row(analysis: StudyAnalysis, arm: str, axis: str) -> dict:
    t = analysis.accuracy
    return t[(t["arm"] == arm) & (t["axis"] == axis)].iloc[0].to_dict()


def test_an_older_analysis_out_of_range_accuracy_interval_is_given_clipped():
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    old = copy.deepcopy(raw)  # as an analysis.json written before the clipping holds a ceiling arm
    old["arms"]["grpo_2xlr"]["updates"]["ci"] = [96.58109442, 101.75223891]
    old["arms"]["mc_value"]["generated_tokens"]["ci"] = [-1.25, 3.5]
    old["arms"]["mc_value"]["generated_tokens"]["gain_ci"] = [-104.5, -96.0]  # a gain: not clipped
    old["arms"]["hybrid_0.5"]["updates"]["ci"] = None  # one seed read: no interval
    got = StudyAnalysis.from_dict(old)

    top = _row(got, "grpo_2xlr", "updates")
    assert (top["ci_low"], top["ci_high"]) == (96.58109442, 100.0)
    low = _row(got, "mc_value", "generated_tokens")
    assert (low["ci_low"], low["ci_high"]) == (0.0, 3.5)
    assert (low["gain_ci_low"], low["gain_ci_high"]) == (-104.5, -96.0)
    inside = _row(got, "grpo", "updates")
    assert (inside["ci_low"], inside["ci_high"]) == pytest.approx((70.057822, 76.592178))
    none = _row(got, "hybrid_0.5", "updates")
    assert math.isnan(none["ci_low"]) and math.isnan(none["ci_high"]) and none["accuracy"] == 74.125
