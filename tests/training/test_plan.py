"""The plan file: parsing, validation errors that list the valid choices, arm resolution, sha256."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from gradprobe.training.plan import (PlanError, RunConfig, TrainConfig, load_plan, parse_plan,
                                     run_config_from_dict)

from helpers_rollout import one_thread
from study_helpers import write_plan

REPO = Path(__file__).resolve().parents[2]

BASE = textwrap.dedent("""
    seeds = [0, 1]
    [model]
    name = "tiny-qwen2"
    [task]
    name = "chain_sum"
    pool = 64
    [task.config]
    min_terms = 2
    [heldout]
    prompts = 8
    [sampling]
    max_new_tokens = 16
    [train]
    prompts_per_update = 2
    group = 4
    lr = 1e-3
    [budget]
    generated_tokens = 600
    [eval]
    every_tokens = 200
    [arms.grpo]
    reward = "outcome"
    [arms.grpo_2xlr]
    reward = "outcome"
    lr_scale = 2.0
    [arms.mc]
    reward = "mc_value"
    group = 2
    lr = 5e-4
    [arms.mc.mc]
    continuations = 2
    [[hypotheses]]
    name = "h"
    statement = "grpo beats mc"
    test = "paired_bootstrap"
    arms = ["grpo", "mc"]
    at = "generated_tokens"
""")


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def _error(tmp_path, text) -> str:
    with pytest.raises(PlanError) as e:
        load_plan(write_plan(tmp_path, text))
    return str(e.value)


def test_valid_plan_resolves_arms_with_overrides(tmp_path):
    plan = load_plan(write_plan(tmp_path, BASE))
    assert plan.arm_names == ["grpo", "grpo_2xlr", "mc"]
    assert plan.seeds == (0, 1) and plan.runs()[:2] == [("grpo", 0), ("grpo", 1)]
    assert plan.task.config == {"min_terms": 2} and plan.task.pool == 64
    grpo, double, mc = plan.arm("grpo"), plan.arm("grpo_2xlr", seed=1), plan.arm("mc")
    assert isinstance(grpo, RunConfig) and grpo.reward == "outcome" and grpo.seed == 0
    assert grpo.train.lr == pytest.approx(1e-3) and double.train.lr == pytest.approx(2e-3) and double.seed == 1
    assert double.lr_scale == 2.0
    assert mc.train.group == 2 and mc.train.lr == pytest.approx(5e-4) and mc.mc.continuations == 2
    assert grpo.mc.continuations == 4  # the [mc] default, untouched by another arm's override
    assert grpo.train.betas == (0.9, 0.999) and grpo.sampling.max_new_tokens == 16
    assert grpo.plan_sha256 == plan.sha256
    assert plan.hypotheses[0].arms == ("grpo", "mc")
    assert run_config_from_dict(mc.to_dict()) == mc


def test_sha256_is_of_the_file_bytes_and_changes_with_any_edit(tmp_path):
    p = write_plan(tmp_path, BASE)
    plan = load_plan(p)
    assert plan.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    edited = load_plan(write_plan(tmp_path, BASE + "# a comment\n", "edited.toml"))
    assert edited.sha256 != plan.sha256
    assert edited.arm("grpo").train == plan.arm("grpo").train


@pytest.mark.parametrize("old,new,path,valid", [
    ("seeds = [0, 1]", "seeds = [0, 1]\nbudgets = 3", "'budgets'", "model, task, heldout, sampling"),
    ("lr = 1e-3", "lr = 1e-3\nlearning_rate = 1", "'train.learning_rate'", "prompts_per_update, group, lr"),
    ("pool = 64", "pool = 64\nsplit = 'x'", "'task.split'", "name, pool, config"),
    ("max_new_tokens = 16", "max_new_tokens = 16\ntemp = 1.0", "'sampling.temp'", "temperature, top_p"),
    ("every_tokens = 200", "every_tokens = 200\nevery = 3", "'eval.every'", "every_tokens, at_updates, at_fractions, greedy, sampled"),
    ("generated_tokens = 600", "generated_tokens = 600\ntokens = 3", "'budget.tokens'",
     "generated_tokens, device_seconds, flops, updates"),
    ("lr_scale = 2.0", "lr_scale = 2.0\nlr_scael = 3", "'arms.grpo_2xlr.lr_scael'",
     "reward, lr_scale, description, mc, or any [train] key"),
    ("continuations = 2", "continuations = 2\nk = 2", "'arms.mc.mc.k'", "continuations, max_steps"),
    ('at = "generated_tokens"', 'at = "generated_tokens"\nwhen = 1', "'hypotheses[0].when'", "name, statement, test"),
])
def test_unknown_key_names_its_full_path_and_the_valid_keys(tmp_path, old, new, path, valid):
    msg = _error(tmp_path, BASE.replace(old, new, 1))
    assert "unknown key" in msg and path in msg and valid in msg, msg


def test_unknown_reward_lists_the_registered_rewards(tmp_path):
    msg = _error(tmp_path, BASE.replace('reward = "mc_value"', 'reward = "mc_valu"'))
    assert "arms.mc.reward" in msg and "mc_valu" in msg
    for name in ("outcome", "mc_value", "mc_advantage", "hybrid_0.5", "mc_min"):
        assert name in msg


def test_unknown_arm_lists_the_arms(tmp_path):
    plan = load_plan(write_plan(tmp_path, BASE))
    with pytest.raises(PlanError, match="grpo, grpo_2xlr, mc"):
        plan.arm("grpo_3xlr")


def test_budget_smaller_than_one_update_names_the_minimum(tmp_path):
    msg = _error(tmp_path, BASE.replace("generated_tokens = 600", "generated_tokens = 7"))
    assert "give [budget] generated_tokens at least 8 (a lower bound only" in msg and "B * G = 2 * 4" in msg
    assert "up to 2 * 4 * max_new_tokens 16 = 128 rollout tokens" in msg  # the arm with the largest B * G
    msg = _error(tmp_path, BASE.replace("generated_tokens = 600", "updates = 0"))
    assert "got 0; give [budget] updates at least 1" in msg
    msg = _error(tmp_path, BASE.replace("generated_tokens = 600", ""))
    assert "at least one of generated_tokens, device_seconds, flops, updates" in msg
    msg = _error(tmp_path, BASE.replace("generated_tokens = 600", "device_seconds = -1.0"))
    assert "budget.device_seconds must be > 0" in msg


def test_values_of_the_wrong_type_or_range(tmp_path):
    assert "train.lr must be a number" in _error(tmp_path, BASE.replace("lr = 1e-3", 'lr = "fast"'))
    assert "train.group must be in [2, 4096] (group-relative advantages need two completions;" in _error(
        tmp_path, BASE.replace("group = 4", "group = 1"))
    assert _error(tmp_path, BASE.replace("group = 4", "group = 4097")).endswith(
        "train.group must be in [2, 4096] (group-relative advantages need two completions; GRPO recipes use 8-64, "
        "and every completion of an update is held in memory), got 4097")
    assert "dapo, dr_grpo, grpo" in _error(tmp_path, BASE.replace("lr = 1e-3", 'lr = 1e-3\nloss_type = "ppo"'))
    assert "sampling.temperature must be a finite number > 0" in _error(
        tmp_path, BASE.replace("max_new_tokens = 16", "max_new_tokens = 16\ntemperature = 0.0"))
    assert "distinct" in _error(tmp_path, BASE.replace("seeds = [0, 1]", "seeds = [1, 1]"))
    assert "no arm 'mcv'" in _error(tmp_path, BASE.replace('arms = ["grpo", "mc"]', 'arms = ["grpo", "mcv"]'))
    assert "paired_bootstrap" in _error(tmp_path, BASE.replace('test = "paired_bootstrap"', 'test = "t"'))
    assert "not valid TOML" in _error(tmp_path, BASE + "[[[")
    assert "no [budget] section" in _error(tmp_path, BASE.replace("[budget]\ngenerated_tokens = 600", ""))
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.toml")


def test_hypothesis_against_the_initial_policy(tmp_path):
    text = BASE.replace('arms = ["grpo", "mc"]', 'arms = ["grpo", "initial"]\nmin_effect = 4.0')
    h = load_plan(write_plan(tmp_path, text)).hypotheses[0]
    assert h.arms == ("grpo", "initial") and h.min_effect == 4.0 and h.metric == "greedy_accuracy"
    msg = _error(tmp_path, BASE.replace('at = "generated_tokens"', 'at = "device_seconds"'))
    assert "sets no device_seconds" in msg


@pytest.mark.parametrize("name", ["tiny.toml", "paper.toml"])
def test_shipped_plans_validate(name):
    plan = load_plan(REPO / "plans" / name)
    assert {"grpo", "mc_value", "mc_advantage", "grpo_2xlr"} <= set(plan.arm_names)
    assert any(a.startswith("hybrid") for a in plan.arm_names)
    assert plan.arm("grpo_2xlr").train.lr == pytest.approx(2 * plan.arm("grpo").train.lr)
    assert plan.heldout.prompts >= 1000 and plan.hypotheses
    if name == "tiny.toml":
        assert plan.model.name == "tiny" and plan.task.name == "chain_sum" and len(plan.seeds) >= 4
        assert plan.budget.generated_tokens
    else:
        assert plan.model.name == "Qwen/Qwen2.5-1.5B-Instruct" and plan.task.name == "gsm8k"
        assert plan.budget.generated_tokens and plan.budget.device_seconds
        # DESIGN.md: an MC update costs ~ 1 + K (S - 1) / 2 GRPO updates; the paper's ratio is 584:50
        ratio = 1 + plan.mc.continuations * (plan.mc.max_steps - 1) / 2
        assert abs(584 / ratio - 50) / 50 < 0.1


def test_parse_plan_from_text_matches_file():
    text = BASE
    assert parse_plan(text).arm("grpo").train == TrainConfig(prompts_per_update=2, group=4, lr=1e-3)


def test_eval_schedule_promises_points_on_every_axis():
    from gradprobe.training.plan import BudgetSpec, EvalSpec

    ev = EvalSpec(every_tokens=0, at_updates=(2, 5, 10), at_fractions=(0.1, 0.5, 1.0))
    budget = BudgetSpec(generated_tokens=1000, flops=2e9)
    pts = ev.promised_points(budget)
    assert pts["updates"] == [0, 2, 5, 10]
    assert pts["generated_tokens"] == [0, 100, 500, 1000]
    assert pts["flops"] == [0, 2e8, 1e9, 2e9]
    assert "device_seconds" not in pts
    every = EvalSpec(every_tokens=250)
    assert every.promised_points(budget)["generated_tokens"] == [0, 250, 500, 750, 1000]


@pytest.mark.parametrize("line, fix", [
    ("at_updates = [2, 2]", "eval.at_updates"),
    ("at_updates = [-1]", "eval.at_updates"),
    ("at_fractions = [0.0, 0.5]", "eval.at_fractions"),
    ("at_fractions = [1.5]", "eval.at_fractions"),
    ('sampled_at = "middle"', "eval.sampled_at"),
])
def test_bad_eval_schedules_are_refused_with_the_key(tmp_path, line, fix):
    msg = _error(tmp_path, BASE.replace("[eval]\n", f"[eval]\n{line}\n", 1))
    assert fix in msg, msg


def test_a_dtype_the_runs_cannot_load_is_refused_when_the_plan_is_read(tmp_path):
    from gradprobe.models import DTYPES
    from gradprobe.training.plan import MODEL_DTYPES

    assert set(MODEL_DTYPES) == set(DTYPES)  # the plan's list is the loader's
    msg = _error(tmp_path, BASE.replace('name = "tiny-qwen2"', 'name = "tiny-qwen2"\ndtype = "fp32"', 1))
    assert msg == ("[model] dtype = 'fp32' is not one of float32, float64, bfloat16, float16; float32 is the default "
                   "(bfloat16 on a GPU)")
    msg = _error(tmp_path, BASE.replace('name = "tiny-qwen2"', 'name = "tiny-qwen2"\ndtype = "float16"', 1))
    assert msg.startswith('[model] dtype = "float16" on device "cpu": half precision on the CPU gives non-finite')
    ok = BASE.replace('name = "tiny-qwen2"', 'name = "tiny-qwen2"\ndtype = "float16"\ndevice = "cuda"', 1)
    assert load_plan(write_plan(tmp_path, ok)).model.dtype == "float16"  # on a GPU it is a valid choice
    assert load_plan(write_plan(tmp_path, BASE.replace('name = "tiny-qwen2"', 'name = "tiny-qwen2"\ndtype = '
                                                       '"bfloat16"', 1))).model.dtype == "bfloat16"


@pytest.mark.parametrize("value", ["0", "-250000"])
def test_a_non_positive_token_budget_is_named_as_such(tmp_path, value):
    msg = _error(tmp_path, BASE.replace("generated_tokens = 600", f"generated_tokens = {value}", 1))
    assert msg == f"budget.generated_tokens must be > 0, got {value}"
    assert "smaller than one update" in _error(tmp_path, BASE.replace("generated_tokens = 600", "generated_tokens = 5"))
