"""``calib apply`` on a probe where a reward gives no gradient: one note, naming the reason, and no gain.

Built on the shipped study's real probe (``data/study_tiny/probe``) with ``mc_value`` renamed to a name no
shipped study trained (outside the calibration's domain) and marked ``no_signal`` as ``gradprobe probe``
marks it (:func:`gradprobe.probe.result.reward_entries`), and the shipped default calibration.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

import calib
import calib.cli
from calib.apply import calibrate, format_calibrated, load_probe

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "data" / "study_tiny" / "probe"
REASON = "every group's rewards are equal on this batch, so every advantage is 0"


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


def _silence(result: dict, name: str, new: str) -> dict:
    """``result`` with reward ``name`` renamed ``new`` and marked without signal."""
    entry = next(r for r in result["rewards"] if r["name"] == name)
    entry.update(name=new, no_signal=True, no_signal_reason=REASON)
    result["config"]["rewards"] = [new if r == name else r for r in result["config"]["rewards"]]
    return result


def test_a_no_signal_reward_gets_one_consistent_note(default):
    raw, _, task = load_probe(PROBE)
    doc = calibrate(default, _silence(raw, "mc_value", "my_reward"), task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert math.isnan(by["my_reward"]["calibrated_gain"]) and by["my_reward"]["outside_domain"]  # never an arm
    assert math.isfinite(by["hybrid_0.5"]["calibrated_gain"])  # the other rewards are calibrated as before
    about = [n for n in doc["notes"] if "my_reward" in n and "outside the calibration's domain" not in n]
    assert about == [f"reward 'my_reward' gives no gradient on the probe batch ({REASON}): it cannot train, so no "
                     "calibrated gain is given for it"]
    text = format_calibrated(doc)
    assert "still computed" not in text and "learning-rate change" not in text


def test_an_inside_domain_reward_without_signal_gets_no_gain_either(default):
    raw, _, task = load_probe(PROBE)
    doc = calibrate(default, _silence(raw, "hybrid_0.5", "hybrid_0.5"), task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert math.isnan(by["hybrid_0.5"]["calibrated_gain"])  # its forecast would be finite: no signal wins
    assert [n for n in doc["notes"] if "hybrid_0.5" in n] == [
        f"reward 'hybrid_0.5' gives no gradient on the probe batch ({REASON}): it cannot train, so no calibrated "
        "gain is given for it"]


def test_calib_apply_prints_the_note(default, tmp_path, capsys):
    study = shutil.copytree(PROBE.parent, tmp_path / "study_tiny")
    probe_json = study / "probe" / "probe.json"
    probe_json.write_text(json.dumps(_silence(json.loads(probe_json.read_text()), "mc_value", "my_reward")))
    assert calib.cli.main(["apply", str(study / "probe")]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("my_reward"))
    assert row.split()[1:] == ["n/a", "n/a", "n/a", "outside", "domain"]  # forecast, calibrated gain, interval, mark
    notes = [line for line in out.splitlines() if "my_reward" in line and line.startswith("note:")
             and "outside the calibration's domain" not in line]
    assert notes == [f"note: reward 'my_reward' gives no gradient on the probe batch ({REASON}): it cannot train, "
                     "so no calibrated gain is given for it"]
    assert "still computed" not in out and "learning-rate change" not in out


def test_a_reference_without_signal_is_said_and_stays_the_zero_reference(default):
    raw, _, task = load_probe(PROBE)
    doc = calibrate(default, _silence(raw, "outcome", "outcome"), task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    ref = by["outcome"]
    assert (ref["forecast"], ref["calibrated_gain"], ref["calibrated_interval"]) == (0.0, 0.0, [0.0, 0.0])
    assert math.isfinite(by["mc_value"]["calibrated_gain"])  # cost only does not read the probe: still given
    assert [n for n in doc["notes"] if "'outcome'" in n] == [
        f"the reference reward 'outcome' (grpo) gives no gradient on the probe batch ({REASON}): it stays the "
        "reference, with gain 0 by definition, but the probe cannot compare the other rewards with it, so their "
        "calibrated gains rest on forecast_cost_only alone (cost only, which does not read the probe)"]
