"""A reward function that no import names (a lambda, a closure made by a factory, a bound method) is the reward it
is, not every function of its module and qualified name: two lambdas of one module shared ``(module, '<lambda>')``,
so registering the second under the first's name replaced it without a word, and the probe took the second, passed
under that name, for the registered one (its results labelled with the first's name). Now each is its code and what
it runs on: another lambda, a closure over another object or another instance's method is refused under the name;
the same lambda compiled again (a reloaded module) and the same instance's method stay the one reward, and a
function its module and qualified name import keeps that identity.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from gradprobe.probe.run import ProbeConfig, rewards_to_probe
from gradprobe.rewards import REWARDS, register_reward, sequence_reward
from gradprobe.rewards.base import ROLLOUT_ONLY, _where
from gradprobe.rewards.outcome import outcome

SOURCE = '''
short = lambda prompts, completions, **kw: [-float(len(c)) for c in completions]
long = lambda prompts, completions, **kw: [float(len(c)) for c in completions]


def make(threshold):
    return lambda prompts, completions, **kw: [float(len(c) > threshold) for c in completions]


class Scorer:
    def __init__(self, weight):
        self.weight = weight

    def score(self, prompts, completions, **kw):
        return [self.weight * len(c) for c in completions]
'''
NAME = "zz_lambda_identity_reward"
TAKEN = (", another function: the probe and everything reading its results (grpo's reference, notes, a calibration) "
         f"would take yours for it; give yours another key (the name {NAME!r} in config.rewards probes the "
         "registered one)")


@pytest.fixture
def mod(tmp_path, monkeypatch):
    """The module ``lam_identity_rw`` of ``SOURCE``, imported from ``tmp_path``; it, sys.path and the name ``NAME``
    forgotten after."""
    (tmp_path / "lam_identity_rw.py").write_text(SOURCE)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        yield importlib.import_module("lam_identity_rw")
    finally:
        sys.modules.pop("lam_identity_rw", None)
        REWARDS.pop(NAME, None)
        ROLLOUT_ONLY.discard(NAME)


def _probed_as(fn) -> list:
    """The names ``rewards_to_probe`` gives ``outcome`` and ``fn`` passed as ``extra_rewards[NAME]``."""
    return [name for name, _ in rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), {NAME: fn})]


def test_two_lambdas_of_one_module_are_two_rewards_and_a_reloaded_one_is_the_same(mod):
    file = mod.__file__
    register_reward(NAME)(sequence_reward(mod.short))
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered \(<function sequence_reward"):
        register_reward(NAME)(sequence_reward(mod.long))
    assert REWARDS[NAME].sequence_source[0] is mod.short  # not replaced
    with pytest.raises(ValueError) as e:
        _probed_as(sequence_reward(mod.long))
    shown = "gradprobe.rewards.sequence.sequence_reward_<lambda>"
    assert str(e.value) == (f"extra_rewards[{NAME!r}] ({shown} (a lambda at line 3 of {file})) is named {NAME!r}, "
                            f"which is the registered reward {shown} (a lambda at line 2 of {file})" + TAKEN)
    short = mod.short
    importlib.reload(mod)  # compiles the lambdas anew: the same code, in the same module
    assert mod.short is not short
    register_reward(NAME)(sequence_reward(mod.short))  # the same reward: registered anew
    assert REWARDS[NAME].sequence_source[0] is mod.short
    assert _probed_as(sequence_reward(mod.short)) == ["outcome", NAME]
    assert _where(outcome) == ("gradprobe.rewards.outcome", "outcome")  # importable: module and qualified name


def test_closures_of_one_factory_are_one_reward_only_over_the_same_objects(mod):
    low, high = float("0.5"), float("7.5")
    register_reward(NAME)(sequence_reward(mod.make(low)))
    register_reward(NAME)(sequence_reward(mod.make(low)))  # made again over the same threshold: the same reward
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        register_reward(NAME)(sequence_reward(mod.make(high)))
    with pytest.raises(ValueError, match=rf"^extra_rewards\['{NAME}'\] .* another function"):
        _probed_as(sequence_reward(mod.make(high)))
    assert _probed_as(sequence_reward(mod.make(low))) == ["outcome", NAME]


def test_a_notebook_cell_run_again_registers_the_same_closure_anew(mod):
    cell = compile(f"register_reward({NAME!r})(sequence_reward(make(0.5)))", "<cell>", "exec")
    scope = {"register_reward": register_reward, "sequence_reward": sequence_reward, "make": mod.make}
    exec(cell, scope)
    first = REWARDS[NAME].sequence_source[0]
    exec(compile(f"register_reward({NAME!r})(sequence_reward(make(0.5)))", "<cell>", "exec"), scope)  # a new 0.5
    assert REWARDS[NAME].sequence_source[0] is not first  # the same reward (a number by value): registered anew
    nan = lambda prompts, completions, t=float("nan"), **kw: [t for _ in completions]  # noqa: E731
    assert _where(nan) == _where(nan.__class__(nan.__code__, nan.__globals__, None, (float("nan"),)))
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        exec(compile(f"register_reward({NAME!r})(sequence_reward(make([0.5])))", "<cell>", "exec"), scope)


def test_the_methods_of_two_instances_are_two_rewards(mod):
    one, two = mod.Scorer(1.0), mod.Scorer(-1.0)
    register_reward(NAME)(sequence_reward(one.score))
    register_reward(NAME)(sequence_reward(one.score))  # a new bound method of the same instance: the same reward
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        register_reward(NAME)(sequence_reward(two.score))
    assert REWARDS[NAME].sequence_source[0].__self__ is one
    with pytest.raises(ValueError, match=rf"^extra_rewards\['{NAME}'\] .* another function"):
        _probed_as(sequence_reward(two.score))


def test_two_native_lambdas_are_two_rewards(mod):
    first = lambda batch, ctx: None  # noqa: E731 - the defect's own case: lambdas, one line apart
    second = lambda batch, ctx: None  # noqa: E731
    register_reward(NAME)(first)
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        register_reward(NAME)(second)
    assert REWARDS[NAME] is first
    with pytest.raises(ValueError, match=rf"^extra_rewards\['{NAME}'\] \(.*\.<lambda> \(a lambda at line \d+ of "):
        _probed_as(second)
