"""Rewards declare that they charge no generated tokens beyond the rollouts: ``register_reward(name,
rollout_only=True)``. The budget check's torch-free list of such built-ins (``ROLLOUT_ONLY_REWARDS``) is pinned to the
built-ins' declarations, and a user's reward so declared gets the reach check too (it was a hand-kept list of
built-in names only: a user's rollout-only reward was never checked).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradprobe
from gradprobe.rewards import base
from gradprobe.training.budget import ROLLOUT_ONLY_REWARDS, most_tokens_per_update
from gradprobe.training.plan import PlanError, parse_plan

from helpers_training import tiny_plan

_ROOT = Path(__file__).resolve().parents[1]


def test_rollout_only_rewards_is_exactly_the_builtin_rewards_that_declare_it():
    # a fresh process: only the built-ins registered; the budget check reads the declarations without importing them
    code = ("import json, sys; import gradprobe.training.budget as budget\n"
            "assert budget.most_tokens_per_update('user_reward', None, 2, 4, 40) is None\n"
            "assert 'gradprobe.rewards' not in sys.modules and 'torch' not in sys.modules\n"
            "import gradprobe.rewards, gradprobe.rewards.base as base\n"
            "print(json.dumps({'declared': sorted(base.ROLLOUT_ONLY), 'registered': sorted(base.REWARDS)}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["declared"] == sorted(ROLLOUT_ONLY_REWARDS)
    assert set(found["declared"]) < set(found["registered"])
    assert "mc_value" in found["registered"] and "mc_value" not in found["declared"]


def _reward(batch, ctx):  # never called: a plan only names it
    raise AssertionError("not called")


def _registered(name: str, **declared):
    """Register :func:`_reward` under ``name`` for one test (undone by :func:`_unregister`)."""
    gradprobe.register_reward(name, **declared)(_reward)
    return name


def _unregister(*names: str) -> None:
    for name in names:
        base.REWARDS.pop(name, None)
        base.ROLLOUT_ONLY.discard(name)


def test_a_users_reward_declared_rollout_only_gets_the_reach_check_and_an_undeclared_one_does_not():
    budget = {"generated_tokens": 250_000, "updates": 10}  # 10 updates of at most 2 * 4 * 40 = 320 tokens: 3,200
    try:
        name = _registered("test_user_rollout_only", rollout_only=True)
        assert most_tokens_per_update(name, None, 2, 4, 40) == 320
        with pytest.raises(PlanError) as e:
            parse_plan(tiny_plan(reward=name, budget=budget))
        assert str(e.value).startswith(
            "budget.generated_tokens = 250,000 is out of reach of budget.updates = 10: one update of arm 'grpo' "
            "(reward 'test_user_rollout_only': rollout tokens only) generates at most B * G * max_new_tokens = 2 * 4 "
            "* 40 = 320 tokens ")
        # registered again without the declaration: it may generate tokens of its own, so it is not checked
        _registered(name)
        assert most_tokens_per_update(name, None, 2, 4, 40) is None
        assert parse_plan(tiny_plan(reward=name, budget=budget)).arms["grpo"].reward == name
        other = _registered("test_user_may_sample")
        assert name not in base.ROLLOUT_ONLY and other not in base.ROLLOUT_ONLY
        assert parse_plan(tiny_plan(reward=other, budget=budget)).budget.updates == 10
    finally:
        _unregister("test_user_rollout_only", "test_user_may_sample")
    assert "test_user_rollout_only" not in base.REWARDS



@pytest.mark.parametrize("given, kind", [("no", "str"), (1, "int"), (0, "int"), (None, "NoneType"),
                                         (np.array([True, False]), "numpy.ndarray"), (np.bool_(True), "numpy.bool")],
                         ids=["text", "one", "zero", "none", "array", "numpy_bool"])
def test_rollout_only_must_be_a_bool_and_nothing_is_registered_otherwise(given, kind):
    """Was: ``rollout_only="no"`` registered a rollout-only reward (its truth value), and a numpy array raised
    ValueError at decoration, with the reward already in REWARDS."""
    name = "test_user_not_a_bool"
    try:
        with pytest.raises(TypeError) as e:
            gradprobe.register_reward(name, rollout_only=given)(_reward)
        assert str(e.value).startswith(f"register_reward('{name}', rollout_only=...) takes True or False, got "
                                       f"rollout_only={given!r:.60} ({kind}); ")  # numpy's named: not "bool"
        assert name not in base.REWARDS and name not in base.ROLLOUT_ONLY
    finally:
        _unregister(name)


def test_a_builtin_registered_again_without_the_declaration_is_no_longer_bounded():
    """The docstring's "registering the name again sets it anew" holds for a built-in too: ``outcome`` was still
    bounded through the torch-free copy of the built-ins' declarations."""
    fn = base.REWARDS["outcome"]
    budget = {"generated_tokens": 250_000, "updates": 10}  # out of reach of a bounded reward: 3,200 tokens at most
    try:
        gradprobe.register_reward("outcome")(fn)
        assert "outcome" not in base.ROLLOUT_ONLY and "outcome" in ROLLOUT_ONLY_REWARDS
        assert most_tokens_per_update("outcome", None, 2, 4, 40) is None
        assert parse_plan(tiny_plan(reward="outcome", budget=budget)).budget.generated_tokens == 250_000
    finally:
        gradprobe.register_reward("outcome", rollout_only=True)(fn)
    assert most_tokens_per_update("outcome", None, 2, 4, 40) == 320
    with pytest.raises(PlanError, match=r"^budget\.generated_tokens = 250,000 is out of reach of "):
        parse_plan(tiny_plan(reward="outcome", budget=budget))


def test_a_users_function_named_as_a_builtin_does_not_replace_it():
    """A user's ``def outcome`` (same qualified name as the built-in, another module) replaced the built-in reward for
    every later probe and train of the process, and its declaration with it: refused, the built-in kept."""
    builtin = base.REWARDS["outcome"]

    def outcome(batch, ctx):
        raise AssertionError("never called")

    outcome.__qualname__ = builtin.__qualname__
    with pytest.raises(ValueError, match=r"^reward 'outcome' is already registered \(.*\); register yours under "
                                         r"another name$"):
        gradprobe.register_reward("outcome")(outcome)
    assert base.REWARDS["outcome"] is builtin and "outcome" in base.ROLLOUT_ONLY
