"""A reward passed to the probe from Python is its caller's own, under a name of its own:

- a function (or a pair, or ``run_probe``'s ``extra_rewards`` key) named like a registered reward it is not was
  silently probed AS that reward: a ``def outcome`` length reward became grpo's reference (the Adam preconditioner
  built from its advantages, the built-in rewards' numbers changed), a ``def mc_value`` got mc_value's validated
  notes and a calibration's domain. It is refused before any compute, naming the function, the registered reward and
  the fix (``register_reward`` refuses the same name for the same reason);
- a native ``(name, reward)`` pair that raised (``sys.exit()`` too) stopped the probe with an error naming no reward
  (a SystemExit ended it): it is now the RewardFunctionError plug-ins give, its ``reward`` the pair's name;
- a TRL-style function as a pair's second item failed deep in the probe ("'RewardContext' object is not iterable"):
  the pair takes a ``reward(batch, ctx)`` (the API's docstring), so it is refused up front, naming the fix.
"""

from __future__ import annotations

import functools
import sys

import pytest
import torch

import gradprobe
import gradprobe.probe.run as probe_run
from gradprobe.api.probe import _config_and_rewards
from gradprobe.probe.run import ProbeConfig, run_probe
from gradprobe.probe.stages import reward_outputs
from gradprobe.rewards import REWARDS, RewardOutput, get_reward, register_reward, sequence_reward
from gradprobe.rewards.base import ROLLOUT_ONLY, RewardFunctionError

from helpers_rollout import make_batch

TINY = dict(prompts=2, group=2, heldout_prompts=2, heldout_group=2, max_new_tokens=8, n_bootstrap=20, progress=False)
BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)
FIX = "rename the function, or pass it under another name as a pair, "
TAKEN = (", another function: the probe and everything reading its results (grpo's reference, notes, a calibration) "
         "would take yours for it; ")


def outcome(completions, **kw):  # a user's length reward that happens to be called "outcome"
    return [float(len(c)) for c in completions]


def mc_value(completions, **kw):
    return [float(len(c)) for c in completions]


def brevity(prompts, completions, **kw):
    return [-len(c) / 100 for c in completions]


def native(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="native", advantages=torch.ones(n, t, dtype=torch.float64),
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens={}, stats={})


def raises(batch, ctx):
    raise RuntimeError("boom in native")


def exits(batch, ctx):
    sys.exit(3)


class Scorer:
    """A callable object named like a built-in reward."""

    __name__ = "mc_value"

    def __call__(self, completions, **kw):
        return [0.0] * len(completions)


@pytest.mark.parametrize("fn, index, builtin", [(outcome, 0, "gradprobe.rewards.outcome.outcome"),
                                                (mc_value, 1, "gradprobe.rewards.dense.mc_value")])
def test_a_function_named_like_a_built_in_reward_is_refused_before_any_compute(fn, index, builtin, no_compute):
    rewards = [fn, "hybrid_0.5"] if index == 0 else ["outcome", fn]
    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=rewards, **TINY)
    name = fn.__name__
    assert str(e.value) == (f"rewards[{index}] ({__name__}.{name}) is named {name!r}, which is the registered reward "
                            f"{builtin}{TAKEN}{FIX}(\"my_{name}\", gradprobe.sequence_reward({name}))")
    assert no_compute == []  # refused before the policy was loaded or a rollout sampled


def test_a_callable_object_and_pairs_under_a_built_in_name_are_refused(no_compute):
    with pytest.raises(ValueError, match=r"^rewards\[1\] \(<.*Scorer object at .*>\) is named 'mc_value', which is "
                                         r"the registered reward gradprobe\.rewards\.dense\.mc_value, another"):
        gradprobe.probe("tiny", rewards=["outcome", Scorer()], **TINY)
    pair = "give the pair another name (the string 'outcome' alone probes the registered one)"
    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=[("outcome", native), "mc_value"], **TINY)
    assert str(e.value) == (f"rewards[0] ({__name__}.native) is named 'outcome', which is the registered reward "
                            f"gradprobe.rewards.outcome.outcome{TAKEN}{pair}")
    with pytest.raises(ValueError, match=r"^rewards\[0\] \(gradprobe\.rewards\.sequence\.sequence_reward_brevity\) is "
                                         r"named 'outcome', which is the registered reward"):
        gradprobe.probe("tiny", rewards=[("outcome", sequence_reward(brevity))], **TINY)
    with pytest.raises(ValueError, match=r"^rewards\[0\] \(functools\.partial\(.*\)\) is named 'outcome', which is "):
        gradprobe.probe("tiny", rewards=[("outcome", functools.partial(native))], **TINY)
    assert no_compute == []


def test_run_probe_refuses_an_extra_reward_under_a_built_in_name_before_any_compute(monkeypatch):
    def reached(*args, **kwargs):
        raise AssertionError("the probe loaded its task or policy before refusing the name")

    monkeypatch.setattr(probe_run, "load_task", reached)
    monkeypatch.setattr(probe_run, "load_policy", reached)
    config = ProbeConfig.from_dict(dict(model="tiny", rewards=("hybrid_0.5",), **TINY))
    with pytest.raises(ValueError) as e:
        run_probe(config, extra_rewards={"outcome": sequence_reward(outcome)})
    assert str(e.value) == ("extra_rewards['outcome'] (gradprobe.rewards.sequence.sequence_reward_outcome) is named "
                            "'outcome', which is the registered reward gradprobe.rewards.outcome.outcome" + TAKEN +
                            "give yours another key (the name 'outcome' in config.rewards probes the registered one)")


def test_a_registered_name_takes_its_own_function_only():
    """The built-in itself, and a user's reward registered under a new name, go by that name; another function
    under the user's registered name is refused as a built-in's is."""
    name = "zz_users_native_reward"
    register_reward(name)(native)
    try:
        _, extra = _config_and_rewards("tiny", None, [("outcome", get_reward("outcome")), (name, native)], {})
        assert extra == {"outcome": get_reward("outcome"), name: native}
        with pytest.raises(ValueError, match=rf"^rewards\[0\] \({__name__}\.raises\) is named '{name}', which is the "
                                             rf"registered reward {__name__}\.native, another function"):
            _config_and_rewards("tiny", None, [(name, raises)], {})
    finally:
        REWARDS.pop(name, None)
        ROLLOUT_ONLY.discard(name)


def test_two_wrapped_functions_are_two_rewards_under_a_registered_name():
    """Every sequence_reward wrapper has the wrapper's own module and qualified name, so ("my_len",
    sequence_reward(other)) passed for a registered sequence_reward(my_len) was taken as the same reward (its results
    labelled my_len), and registering sequence_reward(other) under my_len replaced it silently. The wrapped function
    (and its scale) is the reward's identity: both refused; the same function wrapped again is the same reward."""
    name = "zz_users_wrapped_reward"
    register_reward(name)(sequence_reward(brevity))
    try:
        again = sequence_reward(brevity)
        assert _config_and_rewards("tiny", None, [(name, again)], {})[1] == {name: again}
        register_reward(name)(sequence_reward(brevity))  # the same function: registered anew, as a reload would
        other = sequence_reward(outcome)
        with pytest.raises(ValueError, match=rf"^rewards\[0\] \(.*\) is named '{name}', which is the registered "
                                             "reward .*, another function"):
            _config_and_rewards("tiny", None, [(name, other)], {})
        with pytest.raises(ValueError, match="already registered"):
            register_reward(name)(other)
        with pytest.raises(ValueError, match="already registered"):
            register_reward(name)(sequence_reward(brevity, scale="none"))  # another scale: another reward
    finally:
        REWARDS.pop(name, None)
        ROLLOUT_ONLY.discard(name)


def _probed(rewards: list) -> list:
    """The (name, reward) pairs the probe calls for ``gradprobe.probe(rewards=rewards)``, built as it builds them."""
    config, extra = _config_and_rewards("tiny", None, rewards, {})
    return probe_run.rewards_to_probe(config, extra)


def test_a_pair_that_raises_is_named_once_as_the_reward_that_failed():
    """A native pair was called bare (a RuntimeError naming no reward, a SystemExit); a sequence_reward's own guard
    already names it, and the probe's does not name it twice."""
    def boom(completions, **kw):
        raise KeyError("no column")

    for fn, shown in ((raises, "RuntimeError: boom in native"), (exits, "SystemExit: 3"),
                      (sequence_reward(boom, name="mine"), "KeyError: 'no column'")):
        with pytest.raises(RewardFunctionError) as e:
            reward_outputs(BATCH, _probed(["outcome", ("mine", fn)]), None)
        assert str(e.value) == f"reward 'mine' raised {shown}"
        assert e.value.reward == "mine"  # a study leaves that reward out


def test_a_native_pair_calling_sys_exit_stops_the_probe_with_an_error_naming_it():
    with pytest.raises(RewardFunctionError) as e:
        gradprobe.probe("tiny", rewards=["outcome", ("mine", exits)], **TINY)
    assert str(e.value) == "reward 'mine' raised SystemExit: 3" and e.value.reward == "mine"
    assert isinstance(e.value.__cause__, SystemExit)


def test_a_trl_style_function_in_a_pair_is_refused_before_any_compute(no_compute):
    def short(completions, **kw):
        return [0.0] * len(completions)

    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=["outcome", ("brevity", brevity)], **TINY)
    assert str(e.value) == ("rewards[1] = ('brevity', ...): brevity(prompts, completions, **kw) is a TRL-style "
                            "function (it takes completions), not a Reward reward(batch, ctx); the second item of a "
                            "pair is a Reward: pass ('brevity', gradprobe.sequence_reward(brevity)) for a TRL-style "
                            "function, or the function itself, bare (named after it)")
    with pytest.raises(ValueError, match=r"^rewards\[0\] = \('b2', \.\.\.\): short\(completions, \*\*kw\) is a "
                                         r"TRL-style function \(it takes completions\)"):
        gradprobe.probe("tiny", rewards=[("b2", short)], **TINY)
    assert no_compute == []


def test_run_probe_refuses_an_unwrapped_trl_style_extra_reward_up_front(monkeypatch):
    monkeypatch.setattr(probe_run, "load_policy", lambda *a, **k: pytest.fail("the policy was loaded"))
    config = ProbeConfig.from_dict(dict(model="tiny", rewards=("outcome",), **TINY))
    with pytest.raises(ValueError) as e:
        run_probe(config, extra_rewards={"brevity": brevity})
    assert str(e.value) == ("extra_rewards['brevity']: brevity(prompts, completions, **kw) is a TRL-style function (it "
                            "takes completions), not a Reward reward(batch, ctx); wrap a TRL-style function as "
                            "sequence_reward(brevity, name='brevity') (gradprobe.rewards.sequence_reward)")


@pytest.mark.parametrize("fn, what", [(lambda completions, **kw: [0.0] * len(completions), "a lambda"),
                                      (functools.partial(brevity, prompts=None),
                                       "a functools.partial object without __name__")])
def test_a_reward_without_a_name_is_told_what_it_is(fn, what, no_compute):
    with pytest.raises(ValueError, match=rf"^rewards\[1\] has no name \({what}\): pass \(name, sequence_reward\(fn\)\) "
                                         r"or a def$"):
        gradprobe.probe("tiny", rewards=["outcome", fn], **TINY)
    assert no_compute == []
