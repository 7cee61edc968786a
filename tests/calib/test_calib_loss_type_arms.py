"""Calibration rows of a study whose arms differ by loss type: each arm reads its own probe entry
(``probe/arms.json``'s ``probe_entry``, e.g. ``outcome@bnpo``); an arms.json written before loss-type arms
reads the entry of the arm's reward.

Built on a copy of the shipped study data/study_tiny (real runs, real probe): its arm ``mc_advantage`` is
relabelled as an arm that trains the outcome reward with the bnpo loss, and the probe gets an entry
``outcome@bnpo`` whose per-group alignments are 1.5 x outcome's, so every feature of that arm is known.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from calib.dataset import COLUMNS, build_rows

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "data" / "study_tiny"
SCALE = 1.5


def _copy(tmp_path, name="study_tiny") -> Path:
    out = tmp_path / name
    shutil.copytree(STUDY, out, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    return out


def _relabel(study: Path, *, entry: str = "outcome@bnpo", add_entry: bool = True) -> dict:
    """mc_advantage becomes (outcome, bnpo); returns the added probe entry."""
    arms_path, probe_path = study / "probe" / "arms.json", study / "probe" / "probe.json"
    arms = json.loads(arms_path.read_text())
    arms["mc_advantage"] = {"reward": "outcome", "loss_type": "bnpo", "probe_entry": entry, "lr_scale": 1.0,
                            "description": "outcome advantages, bnpo loss"}
    arms_path.write_text(json.dumps(arms))
    probe = json.loads(probe_path.read_text())
    out = copy.deepcopy(next(r for r in probe["rewards"] if r["name"] == "outcome"))
    out.update(name=entry, reward="outcome", loss_type="bnpo", inner_product=SCALE * out["inner_product"],
               per_group=[SCALE * x for x in out["per_group"]],
               predicted_gain_per_update=SCALE * out["predicted_gain_per_update"],
               predicted_gain_at_budget=SCALE * out["predicted_gain_at_budget"])  # as the probe writes it
    if add_entry:
        probe["rewards"].append(out)
        probe["config"]["loss_types"] = ["bnpo"]
    probe_path.write_text(json.dumps(probe))
    return out


@pytest.fixture(scope="module")
def old_rows(tmp_path_factory):
    return build_rows(_copy(tmp_path_factory.mktemp("old")))


def test_an_old_arms_json_reads_each_arms_reward_entry(old_rows):
    arms = json.loads((STUDY / "probe" / "arms.json").read_text())
    assert all("probe_entry" not in v for v in arms.values())  # the shipped study predates loss-type arms
    assert list(old_rows.columns) == list(COLUMNS)
    by_arm = old_rows.groupby("arm").first()
    assert set(by_arm.index) == set(arms)
    for arm, spec in arms.items():
        assert by_arm.loc[arm, "probe_entry"] == by_arm.loc[arm, "reward"] == spec["reward"]
        assert by_arm.loc[arm, "loss_type"] == "grpo"  # the frozen plan's [train] loss_type
    assert by_arm.loc["mc_advantage", "token_multiplier"] > 2  # MC continuations: its own entry's cost


def test_a_loss_type_arm_reads_its_own_entry(tmp_path, old_rows):
    study = _copy(tmp_path)
    added = _relabel(study)
    rows = build_rows(study)
    seeds = len(json.loads((study / "analysis.json").read_text())["arms"]["grpo"]["generated_tokens"]["per_seed"])
    assert len(rows) == len(old_rows) and (rows.groupby("arm").size() == seeds).all()  # one row per arm and seed
    arm = rows[rows["arm"] == "mc_advantage"]
    assert set(arm["reward"]) == {"outcome"} and set(arm["loss_type"]) == {"bnpo"}
    assert set(arm["probe_entry"]) == {"outcome@bnpo"}
    f = arm.iloc[0]
    probe = {r["name"]: r for r in json.loads((study / "probe" / "probe.json").read_text())["rewards"]}
    budget = f["budget_value"]
    c = probe["outcome"]["tokens_per_update"]
    assert added["tokens_per_update"] == c and f["token_multiplier"] == 1.0 and f["forecast_cost_only"] == 0.0
    assert f["rho"] == pytest.approx(SCALE, rel=1e-12)  # its alignment vs grpo's, per group exactly 1.5
    g = probe["outcome"]["predicted_gain_per_update"]
    assert f["forecast_first_order"] == pytest.approx(budget / c * (SCALE - 1.0) * g, rel=1e-12)
    assert f["forecast_probe"] > 0
    # the other arms are untouched by the relabelling
    for other in ("grpo", "mc_value", "hybrid_0.5"):
        a = rows[rows["arm"] == other].reset_index(drop=True)
        b = old_rows[old_rows["arm"] == other].reset_index(drop=True)
        assert np.allclose(a["forecast_probe"], b["forecast_probe"], rtol=1e-12, atol=0)
        assert (a["probe_entry"] == b["probe_entry"]).all()


def test_a_probe_json_without_the_arms_entry_says_to_rerun_the_probe(tmp_path):
    study = _copy(tmp_path)
    _relabel(study, entry="outcome@cispo", add_entry=False)
    with pytest.raises(ValueError, match=r"no entry for arm\(s\) \{'mc_advantage': 'outcome@cispo'\}.*has no runs/: "
                                         r"resuming it would train every run again\): restore .*/probe/probe.json from "
                                         r"a copy of the study"):
        build_rows(study)  # a shipped study keeps no run folders: resuming it would train every run again
    (study / "runs").mkdir()
    with pytest.raises(ValueError, match=r"no entry for arm\(s\) \{'mc_advantage': 'outcome@cispo'\}.*delete "
                                         r".*/probe/probe.json and resume the study"):
        build_rows(study)
