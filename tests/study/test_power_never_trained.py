"""`gradprobe study --power` leaves out a pilot arm with a run that never trained (every update of its metrics.jsonl
had every advantage 0), as the analysis's detectable effect does (tests/study/test_never_trained_everywhere.py): its
seed-to-seed spread describes a broken setup, so no comparison with it is sized, a note names the arm, its seeds and
the cause, and its run seconds (a run stopped for training nothing is short) do not price the plan's wall time.

The pilot: tests/study_helpers.make_study with 6 seeds and a metrics.jsonl in every run folder
(test_never_trained_everywhere._study); the plan: test_power's plan with a [power] section."""

from __future__ import annotations

import json

import pytest

from gradprobe.study.power import format_power, power_analysis
from gradprobe.training.plan import parse_plan

from study_helpers import ITEMS
from test_never_trained_everywhere import CONTROL_WHY, LR_BROKEN, LR_WHY, _study
from test_power import POWER_PLAN

SPREAD = "its seed-to-seed spread describes a broken setup, not the arm"


def _power(root, never: dict, seconds: dict | None = None) -> dict:
    """power_analysis of POWER_PLAN against the pilot ``root/pilot`` (``never``: as _study; ``seconds``: arm -> the
    run seconds its study.json records, 60 otherwise)."""
    pilot = _study(root / "pilot", never)
    record = json.loads((pilot / "study.json").read_text())
    for r in record["runs"]:
        r["seconds"] = (seconds or {}).get(r["arm"], r["seconds"])
    (pilot / "study.json").write_text(json.dumps(record))
    (root / "plan.toml").write_text(POWER_PLAN)
    plan = parse_plan(POWER_PLAN, path=str(root / "plan.toml"))
    return power_analysis(plan, workers=2, heldout_sizes=[ITEMS, 64 * ITEMS])


def _key(row: dict) -> tuple:
    return row["treatment"], row["control"], row["axis"], row["heldout"]


def test_a_pilot_arm_that_never_trained_is_left_out_of_the_sizing(tmp_path):
    trained = _power(tmp_path / "ok", {})
    broken = _power(tmp_path / "lr", LR_BROKEN, seconds={"grpo_2xlr": 6.0})  # its runs stopped early
    assert trained["left_out"] == {} and trained["never_trained"] == {}
    assert ("grpo_2xlr", "grpo", "generated_tokens", ITEMS) in {_key(r) for r in trained["rows"]}
    # the same rows as the pilot whose every run trained, less the one with grpo_2xlr (before: sized from its spread)
    assert [_key(r) for r in broken["rows"]] == [_key(r) for r in trained["rows"] if r["treatment"] != "grpo_2xlr"]
    assert list(dict.fromkeys(_key(r)[:3] for r in broken["rows"])) == [
        ("grpo", "initial", "generated_tokens"), ("grpo", "mc_value", "generated_tokens"),
        ("mc_value", "grpo", "updates"), ("grpo", "mc_value", "flops")]  # at 40, 1000 (the plan's) and 2560 items
    kept = {_key(r): r for r in trained["rows"]}
    for r in broken["rows"]:  # wall time: grpo_2xlr priced at the others' 60 s per run, not its runs' 6 s
        same = kept[_key(r)]
        assert (r["seeds"], r["pilot_sd"]) == (same["seeds"], pytest.approx(same["pilot_sd"]))
        assert r["wall_seconds"] == (None if r["seeds"] is None else pytest.approx(60.0 * 3 * r["seeds"] / 2))
    assert [_key(r) for r in broken["rows"] if r["wall_seconds"] is not None] == [
        ("grpo", "mc_value", "generated_tokens", 64 * ITEMS), ("grpo", "mc_value", "flops", 64 * ITEMS)]
    assert broken["needed"]["treatment"] != "grpo_2xlr"
    assert broken["left_out"] == {"grpo_2xlr": LR_WHY}
    assert [r["seed"] for r in broken["never_trained"]["grpo_2xlr"]] == [0, 3]
    note = f"grpo_2xlr vs grpo at generated_tokens: not sized, the pilot's {LR_WHY}: {SPREAD}"
    wall = ("wall time of grpo_2xlr: the mean run seconds of the pilot's arms that trained (the pilot's runs of it "
            "never trained)")
    assert broken["notes"] == [note, wall, trained["notes"][0]] and trained["notes"][0].startswith("none: ")
    lines = format_power(broken).splitlines()
    assert f"note: {note}" in lines and f"note: {wall}" in lines
    assert not any(x.startswith("grpo_2xlr vs grpo") for x in lines)


def test_a_pilot_whose_control_arm_never_trained_sizes_nothing_and_says_why(tmp_path):
    res = _power(tmp_path, {("grpo", 2): {}})  # every hypothesis of the plan has grpo
    assert res["rows"] == [] and res["needed"] is None
    assert res["left_out"] == {"grpo": CONTROL_WHY}
    assert res["notes"] == [f"{t} vs {c} at {axis}: not sized, the pilot's {CONTROL_WHY}: {SPREAD}" for t, c, axis in (
        ("grpo", "initial", "generated_tokens"), ("grpo", "mc_value", "generated_tokens"),
        ("grpo_2xlr", "grpo", "generated_tokens"), ("mc_value", "grpo", "updates"), ("grpo", "mc_value", "flops"))] + [
        "wall time of grpo: the mean run seconds of the pilot's arms that trained (the pilot's runs of it never "
        "trained)"]
    lines = format_power(res).splitlines()
    assert "needed: not sized: no comparison of the pilot could be sized; see the notes" in lines
    assert f"note: grpo vs initial at generated_tokens: not sized, the pilot's {CONTROL_WHY}: {SPREAD}" in lines
