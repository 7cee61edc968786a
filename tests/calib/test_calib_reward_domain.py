"""Per-reward domain of a calibration (issue 12): a probed reward that was never an arm of the
calibration's studies gets its calibrated gain computed and marked ``outside_domain``, with a warning
naming it; ``outcome`` (GRPO, gain 0 by definition) is never flagged; ``REWARD@LOSS_TYPE`` entries are
checked on their reward and their loss type; old calibration files still apply.

Built on the shipped studies' real probes (``data/study_tiny/probe``, ``data/study_tiny_losses/probe``)
with one reward renamed to a name no shipped study trained, and on the shipped default calibration,
the default as shipped before it recorded its arms' rewards (``data/calibration_v2_arms_only.json``)
and the version-1 file.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest

import calib
from calib.apply import load_probe
from calib.domain import check_rewards
from calib.model import load_calibration

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
V1 = DATA / "calibration_v1.json"
ARMS_ONLY = DATA / "calibration_v2_arms_only.json"  # calib/data/calibration.json as shipped until 2026-12-02


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


@pytest.fixture(scope="module")
def tiny_probe():
    result, _, task = load_probe(REPO / "data" / "study_tiny" / "probe")
    return result, task


@pytest.fixture(scope="module")
def losses_probe():
    result, _, task = load_probe(REPO / "data" / "study_tiny_losses" / "probe")
    return result, task


def _renamed(result: dict, old: str, new: str) -> dict:
    """The probe result with reward entry ``old`` renamed ``new`` (same numbers: a new reward with them)."""
    out = copy.deepcopy(result)
    entry = next(r for r in out["rewards"] if r["name"] == old)
    entry["name"] = new
    out["config"]["rewards"] = [new if r == old else r for r in out["config"].get("rewards", [])]
    return out


def _apply(cal, result, task):
    """calib.apply on a probe result dict, with the full task configuration of its study (as a folder gives)."""
    doc = calib.calibrate(cal, result, task=task)
    return {r["name"]: r for r in doc["rewards"]}, doc


def test_the_shipped_default_records_the_rewards_and_loss_types_of_its_arms(default):
    assert "grpo" not in default.domain.arms and "bnpo" in default.domain.arms  # arm names ...
    assert "outcome" in default.domain.rewards and "bnpo" not in default.domain.rewards  # ... are not rewards
    assert {"hybrid_0.5", "mc_value", "process_hybrid_0.9", "majority_vote"} <= set(default.domain.rewards)
    assert default.domain.loss_types == ["bnpo", "cispo", "grpo", "gspo"]


def test_a_new_reward_is_flagged_a_known_one_is_not_and_the_numbers_are_unchanged(default, tiny_probe):
    result, task = tiny_probe
    known, known_doc = _apply(default, result, task)
    assert not known_doc["outside_domain"] and not any(r["outside_domain"] for r in known.values())
    assert known_doc["warnings"] == []

    by, doc = _apply(default, _renamed(result, "hybrid_0.5", "my_reward"), task)
    assert by["my_reward"]["outside_domain"] is True and doc["outside_domain"] is True
    assert [by[n]["outside_domain"] for n in ("outcome", "mc_value", "mc_advantage")] == [False, False, False]
    # still computed, the same number as the same entry under its validated name
    assert by["my_reward"]["calibrated_gain"] == pytest.approx(known["hybrid_0.5"]["calibrated_gain"])
    assert by["my_reward"]["calibrated_interval"] == pytest.approx(known["hybrid_0.5"]["calibrated_interval"])
    assert math.isfinite(by["my_reward"]["calibrated_gain"])
    (w,) = doc["warnings"]
    assert w.field == "reward" and w.reward == "my_reward" and w.outside
    assert w.startswith("reward 'my_reward' is outside the calibration's domain: it was never an arm")
    assert "'process_hybrid_0.1'" in w and "'select_half'" in w  # names the calibration's arms
    assert "intervals were validated on other rewards" in w and "still computed" in w


def test_the_front_door_dataframe_marks_the_new_reward(default, tiny_probe):
    result, _ = tiny_probe
    with pytest.warns(calib.CalibrationDomainWarning, match="trl_len_penalty"):
        table = calib.apply(default, _renamed(result, "mc_value", "trl_len_penalty"))
    # (no task configuration in a bare dict: the task note is a probe-level warning, so look at the reward's own)
    reward_warnings = [w for w in table.attrs["document"]["warnings"] if w.field == "reward"]
    assert [w.reward for w in reward_warnings] == ["trl_len_penalty"]
    assert "trl_len_penalty" in reward_warnings[0]
    assert table.loc["outcome", "calibrated_gain"] == 0.0
    assert bool(table.loc["trl_len_penalty", "outside_domain"])


def test_outcome_is_never_flagged_even_by_a_calibration_whose_arms_never_trained_it(default, tiny_probe):
    result, task = tiny_probe
    narrow = copy.copy(default)
    narrow.domain = dataclasses.replace(default.domain, rewards=["mc_value"], loss_types=["grpo"])
    by, doc = _apply(narrow, result, task)
    assert by["outcome"]["outside_domain"] is False and by["mc_value"]["outside_domain"] is False
    assert sorted(w.reward for w in doc["warnings"]) == ["hybrid_0.5", "mc_advantage"]


def test_reward_at_loss_type_entries_are_checked_on_reward_and_loss_type(default, losses_probe):
    result, task = losses_probe
    by, doc = _apply(default, result, task)  # outcome@bnpo, @cispo, @gspo: the arms bnpo, cispo, gspo
    assert not doc["outside_domain"] and doc["warnings"] == []
    probe = _renamed(_renamed(result, "outcome@bnpo", "outcome@dr_grpo"), "outcome@cispo", "my_reward@cispo")
    by, doc = _apply(default, probe, task)
    assert [by[n]["outside_domain"] for n in ("outcome", "outcome@dr_grpo", "my_reward@cispo", "outcome@gspo")] \
        == [False, True, True, False]
    w = {x.reward: x for x in doc["warnings"]}
    assert w["outcome@dr_grpo"].field == "loss_type" and "loss type 'dr_grpo'" in w["outcome@dr_grpo"]
    assert "['bnpo', 'cispo', 'grpo', 'gspo']" in w["outcome@dr_grpo"]
    assert w["my_reward@cispo"].field == "reward" and "reward 'my_reward@cispo'" in w["my_reward@cispo"]


def test_the_default_as_shipped_before_it_recorded_rewards_still_applies(default, tiny_probe, losses_probe):
    old = load_calibration(ARMS_ONLY)
    assert old.format_version == 2 and old.domain.rewards is None and old.domain.loss_types is None
    result, task = tiny_probe
    by, doc = _apply(old, _renamed(result, "hybrid_0.5", "my_reward"), task)
    fitted = json.loads(ARMS_ONLY.read_text())["fitted"]  # the old file's own fit is applied, not the default's
    assert by["my_reward"]["calibrated_gain"] == pytest.approx(
        fitted["coef"]["forecast_cost_only"] * by["my_reward"]["forecast"] + fitted["intercept"], rel=1e-9)
    assert by["my_reward"]["outside_domain"] and not by["mc_value"]["outside_domain"]
    assert any(not w.outside and "compared with its arm names" in w for w in doc["warnings"])
    # loss types not recorded: said, not flagged
    result, task = losses_probe
    by, doc = _apply(old, result, task)
    assert not any(r["outside_domain"] for r in doc["rewards"])
    assert any("does not record the loss types" in w and "outcome@bnpo" in w for w in doc["warnings"])


def test_a_version_1_file_compares_rewards_with_its_arm_names(tiny_probe):
    v1 = load_calibration(V1)
    result, task = tiny_probe
    by, doc = _apply(v1, result, task)
    assert not doc["outside_domain"] and "compared by name" in doc["notes"][0]
    by, doc = _apply(v1, _renamed(result, "mc_advantage", "my_reward"), task)
    assert by["my_reward"]["outside_domain"] and not by["mc_value"]["outside_domain"] and doc["outside_domain"]
    assert math.isfinite(by["my_reward"]["calibrated_gain"])


def test_check_rewards_on_a_bare_result(default):
    result = {"config": {"loss_type": "grpo"}, "rewards": [{"name": "outcome"}, {"name": "mc_value"},
                                                          {"name": "length_penalty"}]}
    ws = check_rewards(default, result)
    assert [(w.reward, w.field) for w in ws] == [("length_penalty", "reward")]
    # the probe's own loss type is not grpo: every entry (outcome aside) trains with it
    other = {"config": {"loss_type": "dapo"}, "rewards": [{"name": "outcome"}, {"name": "mc_value"}]}
    ws = check_rewards(default, other)
    assert [(w.reward, w.field) for w in ws] == [("mc_value", "loss_type")]


def test_the_validation_record_lists_the_arms_of_the_common_runs():
    import json

    from calib.forecaster_choice import validation_record

    metrics = json.loads((REPO / "data" / "calibration" / "report" / "metrics.json").read_text())
    rec = validation_record(metrics, source="x")
    assert rec["arms"] == sorted({a["arm"] for a in metrics["common_arms"]}) and "grpo_4xlr" not in rec["arms"]
    assert "outcome" in rec["rewards"] and "select_half" not in rec["rewards"] and "grpo" in rec["loss_types"]
    old = validation_record({k: v for k, v in metrics.items() if k != "common_arms"}, source="x")
    assert not {"arms", "rewards", "loss_types"} & set(old)  # an older report: no claim about its arms
    metrics["common_arms"] = [dict(a, loss_type=None) for a in metrics["common_arms"]]
    assert validation_record(metrics, source="x")["loss_types"] is None
