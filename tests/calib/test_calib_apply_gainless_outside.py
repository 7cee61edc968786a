"""A reward outside the calibration's arms is marked ``outside_domain`` whether or not it has a calibrated gain.

Before, a new reward that gave no gradient on the probe batch (NaN forecast) came out ``outside_domain:
False`` while the same reward with a gradient was marked and warned. Built on the shipped study's real
probe (``data/study_tiny/probe``) with ``mc_value`` renamed to a name no shipped study trained, and the
shipped default calibration.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pytest

import calib
from calib.apply import calibrate, format_calibrated, load_probe, probe_forecasts
from calib.domain import CalibrationDomainWarning

PROBE = Path(__file__).resolve().parents[2] / "data" / "study_tiny" / "probe"
REASON = "every group's rewards are equal on this batch, so every advantage is 0"
NO_GRADIENT_NOTE = (f"reward 'my_reward' gives no gradient on the probe batch ({REASON}): it cannot train, so no "
                    "calibrated gain is given for it")


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


def _renamed(result: dict, *, no_signal: bool) -> dict:
    """``result`` with ``mc_value`` renamed ``my_reward`` (never an arm of the calibration), marked without signal."""
    entry = next(r for r in result["rewards"] if r["name"] == "mc_value")
    entry["name"] = "my_reward"
    if no_signal:
        entry.update(no_signal=True, no_signal_reason=REASON)
    result["config"]["rewards"] = ["my_reward" if r == "mc_value" else r for r in result["config"]["rewards"]]
    return result


def test_a_new_reward_without_gradient_is_outside_the_domain_and_keeps_its_note(default):
    raw, _, task = load_probe(PROBE)
    doc = calibrate(default, _renamed(raw, no_signal=True), task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert math.isnan(by["my_reward"]["forecast"]) and math.isnan(by["my_reward"]["calibrated_gain"])
    assert by["my_reward"]["outside_domain"] is True and doc["outside_domain"] is True
    assert [by[n]["outside_domain"] for n in ("outcome", "mc_advantage", "hybrid_0.5")] == [False, False, False]
    about = [n for n in doc["notes"] if "my_reward" in n]
    assert len(about) == 2 and about[1] == NO_GRADIENT_NOTE
    assert about[0].startswith("reward 'my_reward' is outside the calibration's domain: it was never an arm of the "
                               "calibration's studies")
    assert about[0].endswith("it gets no calibrated gain here (the note on it says why), and is marked outside_domain")
    [w] = [w for w in doc["warnings"] if w.reward == "my_reward"]
    assert w.outside and w.field == "reward"
    text = format_calibrated(doc)
    assert "still computed" not in text
    assert next(line for line in text.splitlines() if line.startswith("my_reward")).endswith("outside domain")


def test_the_same_reward_is_marked_alike_with_and_without_gradient(default):
    marks = []
    for no_signal in (False, True):
        raw, _, task = load_probe(PROBE)
        doc = calibrate(default, _renamed(raw, no_signal=no_signal), task=task)
        marks.append({r["name"]: r["outside_domain"] for r in doc["rewards"]})
    assert marks[0] == marks[1] and marks[0]["my_reward"] is True


def test_a_new_reward_without_a_forecast_is_outside_the_domain_too(default):
    raw, _, task = load_probe(PROBE)
    raw = _renamed(raw, no_signal=False)
    values = probe_forecasts(raw, "forecast_cost_only")["forecast_cost_only"]
    for entry in raw["rewards"]:  # the forecaster's numbers on the entries, my_reward's missing (NaN)
        entry["forecast_cost_only"] = None if entry["name"] == "my_reward" else float(values[entry["name"]])
    doc = calibrate(default, raw, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert math.isnan(by["my_reward"]["calibrated_gain"]) and by["my_reward"]["outside_domain"] is True
    assert any("cannot say anything about ['my_reward']" in n for n in doc["notes"])


def test_an_inside_domain_reward_without_gradient_stays_inside(default):
    raw, _, task = load_probe(PROBE)
    entry = next(r for r in raw["rewards"] if r["name"] == "hybrid_0.5")
    entry.update(no_signal=True, no_signal_reason=REASON)
    doc = calibrate(default, raw, task=task)
    assert not doc["outside_domain"] and not any(r["outside_domain"] for r in doc["rewards"])


def test_the_front_door_marks_and_warns_without_claiming_a_gain(default, tmp_path):
    study = shutil.copytree(PROBE.parent, tmp_path / "study_tiny")  # the folder: the plan gives the full task
    probe_json = study / "probe" / "probe.json"
    probe_json.write_text(json.dumps(_renamed(json.loads(probe_json.read_text()), no_signal=True)))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        table = calib.apply(default, study / "probe")
    assert bool(table.loc["my_reward", "outside_domain"]) and math.isnan(table.loc["my_reward", "calibrated_gain"])
    [w] = [w for w in record if issubclass(w.category, CalibrationDomainWarning)]
    message = str(w.message)
    assert message.startswith("reward 'my_reward' is outside the calibration's domain")
    assert "No calibrated gain is given for it" in message and "The calibrated gain is computed" not in message
