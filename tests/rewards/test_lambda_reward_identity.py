"""Which reward functions are one reward.

Registering a name again (:func:`gradprobe.rewards.base.same_reward`) is lenient: a function of the same module and
qualified name registers again (a reloaded module, a notebook cell run again or edited, a closure made anew over new
objects); a lambda or nested function adds the line its code starts on, so two lambdas of one module, which share
``(module, '<lambda>')``, are two rewards (registering the second under the first's name replaced it without a word,
and the probe took the second for the registered one). One probe given one reward under two names
(:func:`~gradprobe.rewards.base.check_distinct_rewards`) is strict: one function object, so two variants of a function
made by one ``functools.wraps`` decorator are two rewards.
"""

from __future__ import annotations

import functools
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


def test_a_closure_or_method_made_anew_registers_again_and_two_of_them_probe_as_two(mod):
    register_reward(NAME)(sequence_reward(mod.make(float("0.5"))))
    register_reward(NAME)(sequence_reward(mod.make([0.5, 0.7])))  # made anew (a cell run again): registered anew
    assert REWARDS[NAME].sequence_source[0].__closure__[0].cell_contents == [0.5, 0.7]
    assert _probed_as(sequence_reward(mod.make(7.5))) == ["outcome", NAME]  # the caller's own closure
    pair = [("low", sequence_reward(mod.make(0.5))), ("high", sequence_reward(mod.make(7.5)))]
    assert [n for n, _ in rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), dict(pair))] == \
        ["outcome", "low", "high"]  # two closures: two rewards in one probe
    one, two = mod.Scorer(1.0), mod.Scorer(-1.0)
    REWARDS.pop(NAME)
    register_reward(NAME)(sequence_reward(one.score))
    register_reward(NAME)(sequence_reward(two.score))  # a new instance (a cell run again): registered anew
    assert REWARDS[NAME].sequence_source[0].__self__ is two
    methods = {"one": sequence_reward(one.score), "two": sequence_reward(two.score)}
    assert [n for n, _ in rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), methods)] == \
        ["outcome", "one", "two"]
    with pytest.raises(ValueError, match=r"^rewards 'one' and 'again' are one reward \(lam_identity_rw.Scorer.score\)"):
        rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}),
                         {"one": sequence_reward(one.score), "again": sequence_reward(one.score)})


CELL = """
def logged(fn):
    def wrapper(batch, ctx):
        return fn(batch, ctx)
    return wrapper


@register_reward(NAME)
@logged
def mine(batch, ctx):
    return None


register_reward(NAME + "_kw")(sequence_reward(make_keyword([0.5, 0.5])))
register_reward(NAME + "_lam")(sequence_reward(lambda prompts, completions, **kw: [1.0 for c in completions]))
"""


def test_a_notebook_cell_run_again_or_edited_registers_its_rewards_anew(mod):
    scope = {"register_reward": register_reward, "sequence_reward": sequence_reward, "NAME": NAME,
             "make_keyword": mod.make}
    try:
        exec(compile(CELL, "<cell 1>", "exec"), scope)
        first = REWARDS[NAME]
        exec(compile(CELL, "<cell 2>", "exec"), scope)  # run again: a new decorator closure, list and lambda
        assert REWARDS[NAME] is not first and REWARDS[NAME] is scope["mine"]
        edited = CELL.replace("[1.0 for c in completions]", "[2.0 for c in completions]")
        exec(compile(edited, "<cell 3>", "exec"), scope)  # the lambda edited in place: replaced
        assert REWARDS[NAME + "_lam"].sequence_source[0](["p"], ["c"]) == [2.0]
    finally:
        for suffix in ("_kw", "_lam"):
            REWARDS.pop(NAME + suffix, None)
            ROLLOUT_ONLY.discard(NAME + suffix)


def test_a_reloaded_module_registering_a_closure_over_its_own_list_registers_again(tmp_path, monkeypatch):
    (tmp_path / "kw_reload_rw.py").write_text(
        "from gradprobe.rewards import register_reward, sequence_reward\n"
        "KEYWORDS = ['therefore', 'so']\n"
        "def make(words):\n"
        "    return lambda prompts, completions, **kw: [float(any(w in c for w in words)) for c in completions]\n"
        f"register_reward({NAME!r})(sequence_reward(make(KEYWORDS), name={NAME!r}))\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        module = importlib.import_module("kw_reload_rw")
        importlib.reload(module)
        assert REWARDS[NAME].sequence_source[0].__closure__[0].cell_contents is module.KEYWORDS
    finally:
        sys.modules.pop("kw_reload_rw", None)
        REWARDS.pop(NAME, None)
        ROLLOUT_ONLY.discard(NAME)


def scaled(factor):
    """A ``functools.wraps`` decorator: its functions have ``base``'s module and qualified name."""
    def deco(fn):
        @functools.wraps(fn)
        def inner(prompts, completions, **kw):
            return [factor * v for v in fn(prompts, completions, **kw)]
        return inner
    return deco


def base(prompts, completions, **kw):
    return [float(len(c)) for c in completions]


def test_two_variants_of_one_wrapped_function_probe_as_two_rewards():
    given = {"base": sequence_reward(base), "base_x2": sequence_reward(scaled(2.0)(base)),
             "base_x3": sequence_reward(scaled(3.0)(base))}
    names = [n for n, _ in rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), given)]
    assert names == ["outcome", "base", "base_x2", "base_x3"]
    with pytest.raises(ValueError, match=r"^rewards 'base_x2' and 'again' are one reward"):
        rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), {**given, "again": given["base_x2"]})


def test_two_native_lambdas_are_two_rewards(mod):
    first = lambda batch, ctx: None  # noqa: E731 - the defect's own case: lambdas, one line apart
    second = lambda batch, ctx: None  # noqa: E731
    register_reward(NAME)(first)
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        register_reward(NAME)(second)
    assert REWARDS[NAME] is first
    with pytest.raises(ValueError, match=rf"^extra_rewards\['{NAME}'\] \(.*\.<lambda> \(a lambda at line \d+ of "):
        _probed_as(second)
