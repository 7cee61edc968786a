"""Out-of-range values refused when a plan is read (not after other runs trained): ``[mc]`` and an arm's ``mc``,
``save_weights_at`` past ``[budget] updates`` (and the run-end warning for other budgets), a ``[task] pool``
smaller than ``prompts_per_update``."""

from __future__ import annotations

import dataclasses

import pytest

from gradprobe.config import MCConfig
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget
from gradprobe.training.plan_checks import MC_MINIMUM, check_mc
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.mark.parametrize("key", ["continuations", "max_steps"])
def test_plan_mc_out_of_range_is_refused_naming_the_key_and_range(key):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(mc={key: 0}))
    assert str(e.value).startswith(f"mc.{key} must be >= 1 (")
    assert f"got 0; set mc.{key} = {getattr(MCConfig(), key)} (the default) or another integer >= 1" in str(e.value)


def test_an_arms_mc_override_out_of_range_is_refused_naming_the_arm():
    arms = {"grpo": {"reward": "outcome"}, "mc": {"reward": "mc_value", "mc": {"continuations": 0}}}
    with pytest.raises(PlanError, match=r"^arms\.mc\.mc\.continuations must be >= 1 \(Monte-Carlo continuations .*"
                                        r"got 0"):
        parse_plan(tiny_plan(arms=arms))
    arms["mc"]["mc"] = {"max_steps": -2}
    with pytest.raises(PlanError, match=r"^arms\.mc\.mc\.max_steps must be >= 1 .*got -2"):
        parse_plan(tiny_plan(arms=arms))
    arms["mc"]["mc"] = {"continuations": 1, "max_steps": 1}  # the bounds themselves are valid
    assert parse_plan(tiny_plan(arms=arms)).arm("mc").mc == MCConfig(continuations=1, max_steps=1)


def test_check_mc_is_the_one_rule_and_a_run_config_built_in_code_is_refused_before_its_folder(tmp_path):
    assert set(MC_MINIMUM) == {f.name for f in dataclasses.fields(MCConfig)}  # every [mc] key has its range
    check_mc(MCConfig())  # the defaults pass
    run = parse_plan(tiny_plan()).arm("grpo")
    bad = dataclasses.replace(run, mc=MCConfig(continuations=0))
    with pytest.raises(PlanError, match=r"^arms\.grpo\.mc\.continuations must be >= 1"):
        run_training(bad, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_save_weights_at_past_an_updates_budget_is_refused():
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(train={"save_weights_at": [2, 1000]}, budget={"updates": 8}))
    assert str(e.value) == ("train.save_weights_at lists update(s) 1000 past budget.updates = 8: a run makes 8 "
                            "update(s), so no weights would be kept for them; list updates from 1 to 8 or raise "
                            "[budget] updates")
    arms = {"grpo": {"reward": "outcome", "save_weights_at": [9, 10]}}
    with pytest.raises(PlanError, match=r"^arms\.grpo\.save_weights_at lists update\(s\) 9, 10 past budget\.updates = 8"):
        parse_plan(tiny_plan(arms=arms, budget={"updates": 8}))
    ok = parse_plan(tiny_plan(train={"save_weights_at": [8]}, budget={"updates": 8}))  # the last update: kept
    assert ok.train.save_weights_at == (8,)
    other = parse_plan(tiny_plan(train={"save_weights_at": [1000]}, budget={"generated_tokens": 100_000}))
    assert other.train.save_weights_at == (1000,)  # another budget kind: a warning at the run's end instead


def test_a_run_that_ends_before_listed_updates_warns_once_naming_them(tmp_path):
    run = parse_plan(tiny_plan(train={"save_weights_at": [1, 3]}, budget={"updates": 3})).arm("grpo")
    run = shorten_budget(run, {"updates": 1})  # gradprobe train --updates 1
    with pytest.warns(RuntimeWarning) as record:
        summary = run_training(run, tmp_path / "run")
    assert summary["updates"] == 1
    lines = [str(w.message) for w in record if "save_weights_at" in str(w.message)]
    assert lines == [f"arm 'grpo' seed 0: the run ended after 1 update(s), so save_weights_at update(s) 3 were never "
                     f"reached and no weights were written for them in {tmp_path / 'run' / 'weights'}; list updates "
                     "the budget reaches or raise the budget"]
    assert sorted(p.name for p in (tmp_path / "run" / "weights").iterdir()) == ["update-000001.safetensors"]


def test_a_pool_smaller_than_prompts_per_update_is_refused():
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(task={"pool": 2}, train={"prompts_per_update": 4}))
    assert str(e.value) == ("task.pool = 2 is smaller than train.prompts_per_update = 4: an update takes 4 distinct "
                            "prompts of the pool, so a smaller pool repeats prompts within one update; raise [task] "
                            "pool to at least 4 or lower train.prompts_per_update to at most 2")
    arms = {"grpo": {"reward": "outcome"}, "big": {"reward": "outcome", "prompts_per_update": 9}}
    with pytest.raises(PlanError, match=r"^task\.pool = 8 is smaller than arms\.big\.prompts_per_update = 9"):
        parse_plan(tiny_plan(arms=arms))
    assert parse_plan(tiny_plan(task={"pool": 2}, train={"prompts_per_update": 2})).task.pool == 2  # equal: fine
