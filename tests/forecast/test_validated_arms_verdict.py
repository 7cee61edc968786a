"""The forecast verdict says when a reward was not among the arms the forecasters were validated on
(issue 12): ``gradprobe probe``'s verdict comes from the forecaster that validated best over the shipped
studies, and a new reward (never an arm of those studies) gets the number with a clause saying its
interval was not measured on it, and ``validated_arm: false`` in ``probe.json``'s forecast rows.

Built on the shipped studies' real probes with one reward renamed to a name no shipped study trained
(the same numbers under a new name), forecast against the shipped ``tiny`` reference curve.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import gradprobe.forecast.section as section
from gradprobe.forecast import forecast_section, format_forecast
from gradprobe.forecast.validated_arms import entry_coverage, validated_error_note
from gradprobe.outputs import json_safe

REPO = Path(__file__).resolve().parents[2]
CLAUSE = "was not among the validated arms"


def _probe(study: str) -> dict:
    return json.loads((REPO / "data" / study / "probe" / "probe.json").read_text())


def _renamed(result: dict, old: str, new: str) -> dict:
    out = copy.deepcopy(result)
    next(r for r in out["rewards"] if r["name"] == old)["name"] = new
    return out


@pytest.fixture(scope="module")
def tiny():
    return _probe("study_tiny")


def test_the_shipped_validation_record_lists_the_rewards_and_loss_types_of_its_arms():
    v = section.VALIDATION
    assert {"hybrid_0.5", "mc_value", "mc_advantage", "process", "majority_vote", "outcome"} <= set(v["rewards"])
    assert "grpo_2xlr" not in v["arms"] and "bnpo" in v["arms"]  # learning-rate arms have no forecast
    assert v["loss_types"] == ["bnpo", "cispo", "grpo", "gspo"] and len(v["studies"]) == 9


def test_a_new_reward_says_it_was_not_validated_and_a_validated_one_does_not(tiny):
    known = forecast_section(tiny)
    rows = {r["reward"]: r for r in known["rows"]}
    assert [rows[n]["validated_arm"] for n in ("outcome", "mc_value", "mc_advantage", "hybrid_0.5")] == [True] * 4
    assert not any(CLAUSE in r["verdict"] for r in known["rows"])
    assert CLAUSE not in format_forecast(known)

    new = forecast_section(_renamed(tiny, "hybrid_0.5", "my_reward"))
    by = {r["reward"]: r for r in new["rows"]}
    assert by["my_reward"]["validated_arm"] is False and by["mc_value"]["validated_arm"] is True
    # the same number and verdict as under the validated name, with the clause appended
    assert by["my_reward"]["forecast_gain"] == pytest.approx(rows["hybrid_0.5"]["forecast_gain"])
    own = f" ({validated_error_note(rows['hybrid_0.5']['validated_error'])})"  # hybrid_0.5's validated error
    assert rows["hybrid_0.5"]["verdict"].endswith(own) and by["my_reward"]["validated_error"] is None
    assert by["my_reward"]["verdict"] == (
        rows["hybrid_0.5"]["verdict"][: -len(own)] + " (this reward ('my_reward') was not among the validated arms "
        "of the 9 validation studies: its error on it is unmeasured (the validated error and intervals come from other rewards))")
    text = format_forecast(new)
    line = next(x for x in text.splitlines() if x.startswith("my_reward: "))
    assert CLAUSE in line and all(CLAUSE not in x for x in text.splitlines() if x.startswith("mc_value: "))
    assert json.loads(json.dumps(json_safe(new)))["rows"][3]["validated_arm"] is False  # what probe.json holds


def test_loss_type_entries(tmp_path):
    losses = _probe("study_tiny_losses")
    assert {r["reward"]: r["validated_arm"] for r in forecast_section(losses)["rows"]} == {
        "outcome": True, "outcome@bnpo": True, "outcome@cispo": True, "outcome@gspo": True}
    by = {r["reward"]: r for r in forecast_section(_renamed(losses, "outcome@gspo", "outcome@dr_grpo"))["rows"]}
    assert by["outcome@dr_grpo"]["validated_arm"] is False
    assert "this loss type ('dr_grpo') was not among the validated arms" in by["outcome@dr_grpo"]["verdict"]


def test_a_record_without_arms_makes_no_claim(tiny, monkeypatch):
    old = {k: v for k, v in section.VALIDATION.items() if k not in ("arms", "rewards", "loss_types")}
    monkeypatch.setattr(section, "VALIDATION", old)
    new = forecast_section(_renamed(tiny, "hybrid_0.5", "my_reward"))
    assert all(r["validated_arm"] is None and CLAUSE not in r["verdict"] for r in new["rows"])


def test_entry_coverage_rule():
    kw = {"rewards": ["mc_value", "outcome"], "loss_types": ["grpo", "bnpo"]}
    assert entry_coverage("outcome", probe_loss_type="grpo", **kw).is_reference
    assert entry_coverage("outcome", probe_loss_type="dapo", rewards=[], loss_types=["grpo"]).covered  # GRPO itself
    assert not entry_coverage("outcome@dapo", probe_loss_type="grpo", **kw).covered
    assert entry_coverage("mc_value@bnpo", probe_loss_type="grpo", **kw).covered  # each checked on its own
    cov = entry_coverage("my_fn", probe_loss_type="grpo", **kw)
    assert not cov.covered and not cov.reward_known and cov.loss_type_known
    assert entry_coverage("my_fn@bnpo", probe_loss_type="grpo", rewards=["my_fn"]).loss_type_known is None
    with pytest.raises(ValueError, match="is not REWARD or REWARD@LOSS_TYPE"):
        entry_coverage("a@b@c", probe_loss_type="grpo", **kw)


def test_a_validated_reward_quotes_the_forecasters_error_on_its_runs(tiny):
    rows = {r["reward"]: r for r in forecast_section(tiny)["rows"]}
    errors = section.VALIDATION["entry_errors"]
    best = section.VALIDATION["best"]  # the forecaster auto chose
    for name in ("mc_value", "mc_advantage", "hybrid_0.5"):
        r = rows[name]
        assert r["validated_error"] == {"forecaster": best, **errors[best][name]}
        assert r["verdict"].endswith(f" ({validated_error_note(r['validated_error'])})")
    assert rows["outcome"]["validated_error"] is None  # the reference: gain 0 by definition
    # the shipped record: cost only missed the collapsing label-free reward by 28.8 points on its 4 runs
    assert errors["cost_only"]["majority_vote"] == {"mae": 28.775, "runs": 4, "studies": 1}
    assert validated_error_note({"forecaster": "cost_only", "mae": 28.775, "runs": 4, "studies": 1}) == (
        "cost only was off by 28.8 points on average on the 4 validation runs of this reward in 1 study")


def test_a_fallback_row_quotes_the_asked_forecasters_error_not_its_labels(monkeypatch):
    """--forecaster probe: a row whose probe SNR <= 1 reads ``cost_only (probe SNR <= 1)``, but the validated error of
    the probe forecaster (measured with its fallbacks) is the one that applies. The shipped record's two errors on
    these entries are equal (every run fell back), so the probe's is set apart here to tell them apart."""
    record = copy.deepcopy(section.VALIDATION)
    record["entry_errors"]["probe"]["outcome@bnpo"] = {"mae": 9.25, "runs": 3, "studies": 1}
    monkeypatch.setattr(section, "VALIDATION", record)
    rows = {r["reward"]: r for r in forecast_section(_probe("study_tiny_losses"), method="probe")["rows"]}
    r = rows["outcome@bnpo"]
    assert r["method"] == "cost_only (SNR of rho-1 <= 1)"
    assert r["validated_error"] == {"forecaster": "probe", "mae": 9.25, "runs": 3, "studies": 1}
    assert r["verdict"].endswith(f" ({validated_error_note(r['validated_error'])})")
    assert r["verdict"].split(" (")[-1].startswith("probe was off by ")


def test_errors_by_entry_by_hand():
    from calib.metrics import errors_by_entry

    got = errors_by_entry([1.0, 3.0, 0.5, float("nan"), 2.0], [0.0, 0.0, 1.0, 5.0, 2.0],
                          ["mc_value", "mc_value", "outcome@bnpo", "mc_value", "outcome"], ["a", "b", "a", "a", "a"])
    assert got == {"mc_value": {"mae": 2.0, "runs": 2, "studies": 2}, "outcome@bnpo": {"mae": 0.5, "runs": 1, "studies": 1}}
