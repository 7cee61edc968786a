"""Plan values that passed the checks and failed later (or wrote where nobody asked), now refused when the plan
is read, naming the key and the fix: arm names that are no folder name, a learning rate that is not finite or
above 1, sampling's top_k < 0 and batch_size < 1, a data seed or seeds outside [0, 2**63 - 1], a plan that
evaluates nothing, two hypotheses of one name or comparing an arm with itself, a section's key written under
another table; a UTF-8 byte-order mark is no part of the TOML. ``gradprobe train --seed`` is checked when the
command line is parsed."""

from __future__ import annotations

import math

import pytest

from gradprobe.cli import main
from gradprobe.training.plan import PlanError, load_plan, parse_plan

from helpers_training import tiny_plan

_FOLDER = "cannot name the arm's folder (runs/ARM/seedN)"


@pytest.mark.parametrize("name", ["", " ", "../../escape", "a/b", "a\\b", ".", "..", "tab\there"])
def test_an_arm_name_that_is_no_folder_name_is_refused(name):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(arms={"grpo": {"reward": "outcome"}, name: {"reward": "outcome"}}))
    assert str(e.value).startswith(f"arm name {name!r} {_FOLDER}: use letters, digits and '_', '-', '.'")


@pytest.mark.parametrize("name", ["grpo_2xlr", "hybrid_0.9", "my arm", "mc-value", ".hidden-ish"])
def test_ordinary_arm_names_still_load(name):
    plan = parse_plan(tiny_plan(arms={name: {"reward": "outcome"}}))
    assert list(plan.arms) == [name]


@pytest.mark.parametrize("train, arm, message", [
    ({"lr": math.inf}, {}, "train.lr must be a finite number, got inf"),
    ({"lr": 1e300}, {}, "train.lr must be at most 1 (an AdamW step moves each weight by about lr"),
    ({"lr": 1e30}, {}, "train.lr must be at most 1 ("),
    ({}, {"lr": 2.0}, "arms.x.lr must be at most 1 ("),
    ({"lr": 0.5}, {"lr_scale": 4.0}, "arms.x.lr times arms.x.lr_scale (4) must be at most 1 ("),
    ({}, {"lr_scale": math.inf}, "arms.x.lr_scale must be a finite number, got inf"),
    ({"eps": math.inf}, {}, "train.eps must be a finite number, got inf"),
    ({"weight_decay": math.inf}, {}, "train.weight_decay must be a finite number, got inf"),
])
def test_a_learning_rate_that_is_not_finite_or_above_one_is_refused(train, arm, message):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(train=train, arms={"x": {"reward": "outcome", **arm}}))
    assert str(e.value).startswith(message)


def test_the_largest_learning_rate_loads():
    plan = parse_plan(tiny_plan(train={"lr": 0.25}, arms={"x": {"reward": "outcome", "lr_scale": 4.0}}))
    assert plan.arm("x").train.lr == 1.0


@pytest.mark.parametrize("sampling, message", [
    ({"top_k": -3}, "sampling.top_k must be an integer >= 0 (0 = off), got -3"),
    ({"batch_size": 0}, "sampling.batch_size must be >= 1 (sequences per generate call), got 0"),
    ({"batch_size": -5}, "sampling.batch_size must be >= 1 (sequences per generate call), got -5"),
    ({"temperature": math.inf}, "sampling.temperature must be a finite number > 0, got inf"),
])
def test_sampling_values_refused_when_the_plan_is_read(sampling, message):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(sampling=sampling))
    assert message in str(e.value)


def test_top_k_zero_and_batch_size_one_load():
    plan = parse_plan(tiny_plan(sampling={"top_k": 0, "batch_size": 1}))
    assert (plan.sampling.top_k, plan.sampling.batch_size) == (0, 1)


def test_a_data_seed_out_of_range_is_refused_and_the_largest_seeds_load():
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(heldout={"seed": -3}))
    assert str(e.value) == ("heldout.seed must be an integer in [0, 2**63 - 1] (the data seed of the held-out set and "
                            "the training pool), got -3; e.g. seed = 0")
    plan = parse_plan(tiny_plan(heldout={"seed": 2**63 - 1}, seeds=[2**63 - 1]))
    assert plan.heldout.seed == 2**63 - 1 and plan.seeds == (2**63 - 1,)


def test_a_plan_that_evaluates_nothing_is_refused():
    with pytest.raises(PlanError, match=r"^eval\.greedy and eval\.sampled are both false, so no eval would score any "
                                        r"run"):
        parse_plan(tiny_plan(eval={"greedy": False, "sampled": False}))
    assert parse_plan(tiny_plan(eval={"greedy": False, "sampled": True})).eval.sampled


def _hypothesis(name, arms):
    return {"name": name, "statement": "s", "test": "paired_t", "arms": arms, "at": "updates", "budget": 1}


def test_two_hypotheses_of_one_name_or_one_arm_twice_are_refused():
    arms = {"grpo": {"reward": "outcome"}, "mc": {"reward": "mc_value"}}
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(arms=arms, hypotheses=[_hypothesis("h", ["mc", "grpo"]),
                                                    _hypothesis("h", ["grpo", "initial"])]))
    assert str(e.value).startswith("hypotheses[0] and hypotheses[1] are both named 'h': the report and analysis.json "
                                   "key each hypothesis by its name")
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(arms=arms, hypotheses=[_hypothesis("h", ["grpo", "grpo"])]))
    assert str(e.value).startswith("hypotheses[0].arms names 'grpo' twice: a hypothesis compares two different arms")
    plan = parse_plan(tiny_plan(arms=arms, hypotheses=[_hypothesis("a", ["mc", "grpo"]),
                                                       _hypothesis("b", ["grpo", "initial"])]))
    assert [h.name for h in plan.hypotheses] == ["a", "b"]


def test_a_required_section_written_as_a_key_under_another_table_is_named(tmp_path):
    text = tiny_plan()
    head, _, _ = text.partition("[arms")
    path = tmp_path / "p.toml"
    path.write_text(head.rstrip() + '\narms = ["grpo"]\n')  # lands in the last table before it
    with pytest.raises(PlanError) as e:
        load_plan(path)
    msg = str(e.value)
    assert msg.startswith(f"plan {path} has no [arms] section (required: model, task, budget, arms); the key 'arms' "
                          f"sits inside [")
    assert msg.endswith("]: a key written after a [table] header belongs to that table, so write [arms] as "
                        "[arms.NAME] tables of its own")


def test_a_byte_order_mark_is_no_part_of_the_plan(tmp_path):
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_text(tiny_plan(), encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    a, b = load_plan(plain), load_plan(marked)
    assert a.arms == b.arms and a.train == b.train
    assert a.sha256 != b.sha256  # the sha256 is of the file's bytes, as before


@pytest.mark.parametrize("seed, why", [("-1", "must be in [0, 2**63 - 1] (it seeds numpy and torch), got -1"),
                                       ("99999999999999999999", "must be in [0, 2**63 - 1]"),
                                       ("x", "expected an integer, got 'x'")])
def test_train_seed_is_checked_when_the_command_line_is_parsed(tmp_path, capsys, seed, why):
    with pytest.raises(SystemExit) as e:
        main(["train", "--plan", str(tmp_path / "no_such_plan.toml"), "--arm", "grpo", "--seed", seed,
              "--out", str(tmp_path / "run")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --seed: {why}" in err and "no_such_plan" not in err
    assert not (tmp_path / "run").exists()
