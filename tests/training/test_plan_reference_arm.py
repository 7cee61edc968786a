"""The arm named ``grpo`` is the control of every gain (``gradprobe.study.analysis.CONTROL_ARM``) and the calibration's
reference: a plan whose ``[arms.grpo]`` was another intervention (another reward, ``lr_scale`` != 1, a selection rule,
guidance, its own learning rate) loaded, and every "gain vs grpo" was then against that intervention. Now refused
for a new study's plan, naming the key and the fix (a single run's arm named grpo, ``gradprobe train``, may be
anything: no gain is measured); GRPO's outcome advantage in TRL's three scalings (``outcome``,
``outcome_batch``, ``outcome_dr``) and settings every arm shares (``[train]`` keys such as ``loss_type``) stay allowed,
and a study frozen before the check is read, analysed and resumed as it was run."""

from __future__ import annotations

import pytest

from gradprobe.training.plan import PlanError, parse_plan

from helpers_training import tiny_plan

_FIX = "rename this arm (e.g. [arms.grpo_variant]) and add a plain [arms.grpo] with reward = 'outcome', or make"


@pytest.mark.parametrize("grpo, named", [
    ({"reward": "mc_value"}, "arms.grpo.reward = 'mc_value'"),
    ({"reward": "outcome", "lr_scale": 2.0}, "arms.grpo.lr_scale = 2.0"),
    ({"reward": "outcome", "lr_scale": 1.0000000001}, "arms.grpo.lr_scale = 1.0000000001"),  # not shown as "1"
    ({"reward": "outcome_dr", "lr": 2e-4}, "arms.grpo.lr = 0.0002"),
    ({"reward": "outcome", "selection": "greso"}, "arms.grpo.selection = 'greso'"),
    ({"reward": "outcome", "guidance": {"fraction": 0.25, "prefix": 0.5}},
     "arms.grpo.guidance = {'fraction': 0.25, 'prefix': 0.5, 'cap': 2.0}"),
    ({"reward": "mc_value", "lr_scale": 0.5}, "arms.grpo.reward = 'mc_value'; arms.grpo.lr_scale = 0.5"),
])
def test_a_grpo_arm_that_is_not_plain_outcome_grpo_is_refused(grpo, named):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(arms={"grpo": grpo, "other": {"reward": "outcome"}}), check_reference=True)
    msg = str(e.value)
    assert msg.startswith(named + ": the arm named 'grpo' is the reference every gain is measured against"), msg
    assert _FIX in msg
    # the same table under another name loads, beside a grpo that sets a [train] key every arm may set
    plan = parse_plan(tiny_plan(arms={"grpo": {"reward": "outcome", "loss_type": "dapo"}, "variant": grpo}),
                      check_reference=True)
    assert plan.arms["variant"].reward == grpo["reward"] and plan.arms["variant"].lr_scale == grpo.get("lr_scale", 1)
    assert plan.arms["grpo"].train == {"loss_type": "dapo"} and not plan.arms["grpo"].selection
    single = parse_plan(tiny_plan(arms={"grpo": grpo, "other": {"reward": "outcome"}}))  # gradprobe train's read
    assert single.arms["grpo"].reward == grpo["reward"]  # a single run's arm, or a frozen plan: read as written


@pytest.mark.parametrize("reward", ["outcome_batch", "outcome_dr"])
def test_grpo_in_trls_other_scalings_is_a_reference(reward):
    plan = parse_plan(tiny_plan(arms={"grpo": {"reward": reward}, "other": {"reward": "outcome"}}),
                      check_reference=True)
    assert plan.arms["grpo"].reward == reward


def test_a_study_frozen_with_another_grpo_is_read_analysed_and_resumed(tmp_path):
    import hashlib
    import json

    from gradprobe.study.freeze import load_study_plan
    from gradprobe.training.plan import load_plan

    text = tiny_plan(arms={"grpo": {"reward": "mc_value"}, "other": {"reward": "outcome"}})
    out = tmp_path / "study"
    out.mkdir()
    (out / "plan.toml").write_text(text)
    (out / "study.json").write_text(json.dumps({"plan_sha256": hashlib.sha256(text.encode()).hexdigest()}))
    assert load_plan(out / "plan.toml", check_schedule=False).arms["grpo"].reward == "mc_value"
    assert load_study_plan(out / "plan.toml", out).arms["grpo"].reward == "mc_value"  # resumed as frozen
    with pytest.raises(PlanError, match=r"^arms\.grpo\.reward = 'mc_value': the arm named 'grpo' is the reference"):
        load_study_plan(out / "plan.toml", tmp_path / "new")  # a new study of that plan: refused
    from gradprobe.study.freeze import freeze_plan
    with pytest.raises(PlanError, match=r"^arms\.grpo\.reward = 'mc_value': the arm named 'grpo' is the reference"):
        freeze_plan(out / "plan.toml", tmp_path / "new2", plan=load_plan(out / "plan.toml"))  # a Plan object: too
    assert not (tmp_path / "new2").exists()


def test_the_reference_arm_is_the_analysis_control_arm():
    from gradprobe.study.analysis import CONTROL_ARM
    from gradprobe.training.plan_checks import REFERENCE_ARM

    assert REFERENCE_ARM == CONTROL_ARM == "grpo"
