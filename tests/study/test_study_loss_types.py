"""A study whose arms differ by loss type: its one probe estimates every arm's (reward, loss type) and
arms.json names each arm's probe entry (gradprobe.probe_keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.study.runner import arms_table, probe_settings, run_study
from gradprobe.training.plan import load_plan

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

REPO = Path(__file__).resolve().parents[2]
ARMS = ('[arms.grpo]\nreward = "outcome"\n'
        '[arms.bnpo]\nreward = "outcome"\nloss_type = "bnpo"\n'
        '[arms.gspo_mc]\nreward = "mc_min"\nloss_type = "gspo"\n'
        '[arms.grpo_2xlr]\nreward = "outcome"\nlr_scale = 2.0\n')


def test_the_shipped_loss_type_plan_probes_every_arms_loss_type():
    plan = load_plan(REPO / "plans" / "tiny_losses.toml")
    settings = probe_settings(plan)
    assert settings["rewards"] == ("outcome",) and settings["loss_type"] == "grpo"
    assert settings["loss_types"] == ("bnpo", "cispo", "gspo")
    table = arms_table(plan)
    assert {a: (v["reward"], v["loss_type"], v["probe_entry"]) for a, v in table.items()} == {
        "grpo": ("outcome", "grpo", "outcome"), "bnpo": ("outcome", "bnpo", "outcome@bnpo"),
        "cispo": ("outcome", "cispo", "outcome@cispo"), "gspo": ("outcome", "gspo", "outcome@gspo")}
    # the probe's own loss type set in [probe] (or --probe overrides) re-keys the arms against it
    over = arms_table(plan, {"loss_type": "bnpo"})
    assert over["bnpo"]["probe_entry"] == "outcome" and over["grpo"]["probe_entry"] == "outcome@grpo"
    assert probe_settings(plan, {"loss_type": "bnpo"})["loss_types"] == ("grpo", "cispo", "gspo")
    # loss types listed in [probe] come first and are kept; the arms' are added
    assert probe_settings(plan, {"loss_types": ["dr_grpo"]})["loss_types"] == ("dr_grpo", "bnpo", "cispo", "gspo")


def test_a_loss_type_study_writes_arms_json_keys_that_its_probe_json_has(tmp_path):
    from safetensors.torch import load_file

    from gradprobe.grpo.losses import probe_advantages, token_weights

    text = toy_plan("losses", seeds=(0,), generated_tokens=200, arms=ARMS) + "[mc]\ncontinuations = 2\nmax_steps = 2\n"
    plan = write_plan(tmp_path, text)
    out = tmp_path / "study"
    small = {"prompts": 2, "group": 2, "heldout_prompts": 2, "heldout_group": 2, "n_bootstrap": 50}
    res = run_study(plan, out, executor="inline", probe_overrides=small, analyze=False)
    assert res.ok and res.probe == "done", res.summary()
    arms = json.loads((out / "probe" / "arms.json").read_text())
    assert {a: (v["reward"], v["loss_type"], v["probe_entry"], v["lr_scale"]) for a, v in arms.items()} == {
        "grpo": ("outcome", "grpo", "outcome", 1.0), "bnpo": ("outcome", "bnpo", "outcome@bnpo", 1.0),
        "gspo_mc": ("mc_min", "gspo", "mc_min@gspo", 1.0), "grpo_2xlr": ("outcome", "grpo", "outcome", 2.0)}
    probe = json.loads((out / "probe" / "probe.json").read_text())
    assert probe["config"]["loss_type"] == "grpo" and probe["config"]["loss_types"] == ["bnpo", "gspo"]
    entries = {r["name"]: r for r in probe["rewards"]}
    # every reward under every loss type (a weighted sum each), the plan's loss type under the plain names
    assert list(entries) == ["outcome", "mc_min", "outcome@bnpo", "mc_min@bnpo", "outcome@gspo", "mc_min@gspo"]
    assert {v["probe_entry"] for v in arms.values()} <= set(entries)
    # each entry is sum_nt w^L A^R a over the saved alignment, with the weights of its own loss type
    t = load_file(str(out / "probe" / "alignment.safetensors"))
    mask, a = t["completion_mask"], t["alignment"].double()
    for key, e in entries.items():
        lt, reward = e["loss_type"], e["reward"]
        adv = probe_advantages(t[f"advantages.{reward}"], mask, lt)
        ip = float((token_weights(mask, lt, max_completion_length=16) * adv * a).sum())
        assert e["inner_product"] == pytest.approx(ip, rel=1e-8, abs=1e-300), key
        assert e["tokens_per_update"] == entries[reward]["tokens_per_update"]
        assert e["same_loss_reference"] == ("outcome" if lt == "grpo" else f"outcome@{lt}")


@pytest.mark.parametrize("given", [",", "bnpo,", ",bnpo", "bnpo,,cispo"])
def test_probe_loss_types_with_an_empty_item_are_refused(given):
    """`[probe] loss_types = ","` was read as none (and "bnpo," as bnpo) without a word."""
    from gradprobe.training.plan import PlanError

    plan = load_plan(REPO / "plans" / "tiny_losses.toml")
    with pytest.raises(PlanError, match=rf"\[probe\] loss_types '{given}' has an empty item; give loss types "
                                        r"separated by single commas"):
        probe_settings(plan, {"loss_types": given})
    assert probe_settings(plan, {"loss_types": "dr_grpo, bnpo"})["loss_types"] == ("dr_grpo", "bnpo", "cispo", "gspo")
