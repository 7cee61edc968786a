"""The user's rewards are called before gradprobe's built-in ones, whatever their name.

The probe calls the rewards that may raise (the user's code) first, so that one that raises fails before the Monte
Carlo continuations of ``mc_value`` and the hybrids are spent. Only rewards named by an import path
(``file.py:FUNCTION``, a ``:`` in the name) were moved first: a Python function passed to ``gradprobe.probe`` (named
``my_reward``), a ``(name, reward)`` pair, a ``run_probe`` ``extra_rewards`` entry or a reward the user registered
ran after ``mc_value``, and the continuations already paid for were thrown away with its error. The results keep
the order the rewards were given in; only the order of the calls changes.
"""

from __future__ import annotations

import json

import pytest
import torch

import gradprobe
import gradprobe.rewards.dense as dense
from gradprobe.probe.run import ProbeConfig, run_probe
from gradprobe.probe.stages import reward_outputs
from gradprobe.rewards import REWARDS, RewardOutput, register_reward, sequence_reward
from gradprobe.rewards.base import ROLLOUT_ONLY, RewardFunctionError

from helpers_rollout import make_batch

TINY = dict(prompts=2, group=2, heldout_prompts=2, heldout_group=2, continuations=2, max_new_tokens=8,
            n_bootstrap=10, progress=False)
BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)
REGISTERED = "zz_user_registered_first"


@pytest.fixture
def mc_calls(monkeypatch):
    """Every call of the MC step values (the one place ``mc_value`` and the hybrids sample continuations), in order,
    as ``"mc"`` in the list returned; the tests append their own rewards' calls to it."""
    calls = []
    sample = dense.mc_step_values

    def spy(batch, ctx):
        calls.append("mc")
        return sample(batch, ctx)

    monkeypatch.setattr(dense, "mc_step_values", spy)
    return calls


@pytest.fixture
def registered():
    """A reward the user registered (a TRL-style function through sequence_reward) under :data:`REGISTERED`."""
    def raising(completions, **kw):
        raise ZeroDivisionError("bug in my registered reward")

    register_reward(REGISTERED)(sequence_reward(raising, name=REGISTERED))
    try:
        yield REGISTERED
    finally:
        REWARDS.pop(REGISTERED, None)
        ROLLOUT_ONLY.discard(REGISTERED)


def _raising(calls: list):
    def my_reward(completions, **kw):
        calls.append("my_reward")
        raise ZeroDivisionError("bug in my reward")
    return my_reward


def _native_raising(calls: list):
    def native(batch, ctx):
        calls.append("my_reward")
        raise ZeroDivisionError("bug in my reward")
    return native


@pytest.mark.parametrize("builtin", ["mc_value", "hybrid_0.5"])
def test_a_python_reward_that_raises_fails_before_any_continuation(builtin, mc_calls):
    with pytest.raises(RewardFunctionError) as e:
        gradprobe.probe("tiny", rewards=["outcome", builtin, _raising(mc_calls)], **TINY)
    assert str(e.value) == "reward 'my_reward' raised ZeroDivisionError: bug in my reward"
    assert e.value.reward == "my_reward"
    assert mc_calls == ["my_reward"]  # no continuation sampled before (or after) it


def test_a_native_pair_that_raises_fails_before_any_continuation(mc_calls):
    with pytest.raises(RewardFunctionError) as e:
        gradprobe.probe("tiny", rewards=["mc_value", "outcome", ("mine", _native_raising(mc_calls))], **TINY)
    assert e.value.reward == "mine"
    assert mc_calls == ["my_reward"]


def test_an_extra_reward_of_run_probe_that_raises_fails_before_any_continuation(mc_calls):
    config = ProbeConfig.from_dict(dict(model="tiny", rewards=("outcome", "mc_value"), **TINY))
    with pytest.raises(RewardFunctionError) as e:
        run_probe(config, extra_rewards={"mine": sequence_reward(_raising(mc_calls), name="mine")})
    assert str(e.value) == "reward 'mine' raised ZeroDivisionError: bug in my reward"
    assert mc_calls == ["my_reward"]


def test_a_reward_the_user_registered_that_raises_fails_before_any_continuation(registered, mc_calls):
    with pytest.raises(RewardFunctionError) as e:
        gradprobe.probe("tiny", rewards=["outcome", "mc_value", registered], **TINY)
    assert e.value.reward == registered
    assert mc_calls == []


def test_the_results_keep_the_given_order_when_the_user_reward_runs_first(mc_calls, tmp_path):
    def my_reward(completions, **kw):
        mc_calls.append("my_reward")
        return [float(len(c)) for c in completions]

    result = gradprobe.probe("tiny", rewards=["outcome", "mc_value", my_reward], **TINY)
    assert mc_calls == ["my_reward", "mc"]  # called first, continuations sampled once after it
    order = ["outcome", "mc_value", "my_reward"]
    assert result.rewards == order
    assert list(result.table.index) == order
    result.write(tmp_path / "out")
    raw = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert [entry["name"] for entry in raw["rewards"]] == order


def test_reward_outputs_calls_the_users_rewards_first_and_keeps_the_given_order(registered):
    calls = []

    def recorder(name):
        def reward(batch, ctx):
            calls.append(name)
            n, t = batch.completion_mask.shape
            return RewardOutput(name=name, advantages=torch.zeros(n, t, dtype=torch.float64),
                                valid=torch.ones(n, dtype=torch.bool), generated_tokens={}, stats={})
        return reward

    names = ["outcome", "mc_value", "my_reward", "hybrid_0.5", registered, "mod.py:f", "process", "mine"]
    advantages, outputs = reward_outputs(BATCH, [(n, recorder(n)) for n in names], None)
    assert calls == ["my_reward", registered, "mod.py:f", "mine", "outcome", "mc_value", "hybrid_0.5", "process"]
    assert list(advantages) == names == list(outputs)


def test_which_rewards_are_gradprobes_own(registered):
    from gradprobe.probe.stages import is_builtin_reward

    own = ["outcome", "outcome_batch", "outcome_dr", "outcome_loo", "mc_value", "mc_advantage", "mc_min", "hybrid",
           "hybrid_0.1", "hybrid_0.5", "hybrid_0.9", "process", "process_hybrid_0.5", "majority_vote"]
    assert [name for name in own if not is_builtin_reward(name)] == []
    assert [name for name in (registered, "my_reward", "mod.py:f", "pkg.mod:fn", "") if is_builtin_reward(name)] == []
