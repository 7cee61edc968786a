"""Rewards made by a ``functools.wraps`` decorator: which are one reward (:func:`gradprobe.rewards.base.same_reward`).

``wraps`` copies a function's module and qualified name onto its wrapper but not its code, so every lambda (or nested
function) one decorator wraps carried the decorator's inner function's code, and :func:`~gradprobe.rewards.base._where`
told them apart by that code's line: two different wrapped lambdas were one reward (registering the second under the
first's name replaced it without a word, a probe took one for the other), while a lambda and the same lambda wrapped
were two. The line is now the wrapped function's own (``__wrapped__``, followed while it has the wrapper's name).
"""

from __future__ import annotations

import functools

import pytest

from gradprobe.probe.run import ProbeConfig, rewards_to_probe
from gradprobe.rewards import REWARDS, register_reward, sequence_reward
from gradprobe.rewards.base import (SameObject, _where, check_distinct_rewards, registered_elsewhere,
                                    reward_origin, same_reward)

from plugin_helpers import source_module

MOD = "zz_wraps_identity_rw"
SOURCE = '''import functools


def logged(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


def timed(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


short = lambda prompts, completions, **kw: [-float(len(c)) for c in completions]
long = lambda prompts, completions, **kw: [float(len(c)) for c in completions]
logged_short, logged_long = logged(short), logged(long)
native_one = logged(lambda batch, ctx=None: None)
native_two = logged(lambda batch, ctx=None: None)


def make(kind):
    if kind == "up":
        def score(prompts, completions, **kw):
            return [1.0 for c in completions]
    else:
        def score(prompts, completions, **kw):
            return [-1.0 for c in completions]
    return logged(score)


def plain(prompts, completions, **kw):
    return [1.0 for c in completions]
'''
NAME = "zz_wraps_identity_reward"


@pytest.fixture
def m(tmp_path, monkeypatch):
    """The module ``MOD`` of ``SOURCE``, imported from ``tmp_path``; it, sys.path and ``NAME`` forgotten after."""
    with source_module(tmp_path, monkeypatch, MOD, SOURCE, NAME) as module:
        yield module


def test_two_lambdas_wrapped_by_one_decorator_are_two_rewards(m):
    assert _where(m.logged_short) == (MOD, "<lambda>", 18) and _where(m.logged_long) == (MOD, "<lambda>", 19)
    assert not same_reward(m.logged_short, m.logged_long)
    assert not same_reward(m.native_one, m.native_two)
    assert reward_origin(m.logged_long) == f"{MOD}.<lambda> (a lambda at line 19 of {m.__file__})"
    register_reward(NAME)(m.native_one)
    with pytest.raises(ValueError, match=rf"^reward '{NAME}' is already registered"):
        register_reward(NAME)(m.native_two)
    assert REWARDS[NAME] is m.native_one  # not replaced
    REWARDS.pop(NAME)
    register_reward(NAME)(sequence_reward(m.logged_short))
    assert registered_elsewhere(NAME, sequence_reward(m.logged_long)) is REWARDS[NAME]
    with pytest.raises(ValueError) as e:
        rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), {NAME: sequence_reward(m.logged_long)})
    shown = "gradprobe.rewards.sequence.sequence_reward_<lambda>"
    assert str(e.value).startswith(f"extra_rewards[{NAME!r}] ({shown} (a lambda at line 19 of {m.__file__})) is "
                                   f"named {NAME!r}, which is the registered reward {shown} (a lambda at line 18 of "
                                   f"{m.__file__}), another function")


def test_two_nested_functions_of_one_name_wrapped_are_two_rewards(m):
    up, down = m.make("up"), m.make("down")
    assert up.__qualname__ == down.__qualname__ == "make.<locals>.score"
    assert _where(up) == (MOD, "make.<locals>.score", 27) and _where(down) == (MOD, "make.<locals>.score", 30)
    assert not same_reward(up, down) and same_reward(up, m.make("up"))  # made anew: the same reward


def test_one_function_wrapped_again_is_the_same_reward(m):
    for fn in (m.short, m.plain):
        variants = [fn, m.logged(fn), m.logged(fn), m.timed(fn), m.logged(m.timed(fn))]
        assert len({_where(v) for v in variants}) == 1
        assert all(same_reward(fn, v) and same_reward(v, fn) for v in variants)
    assert _where(m.logged(m.short)) == _where(m.short) == (MOD, "<lambda>", 18)
    register_reward(NAME)(sequence_reward(m.logged(m.short)))
    assert registered_elsewhere(NAME, sequence_reward(m.short)) is None
    assert registered_elsewhere(NAME, sequence_reward(m.timed(m.short))) is None
    register_reward(NAME)(sequence_reward(m.short))  # registered again: replaced, not refused
    assert REWARDS[NAME].sequence_source[0] is m.short
    # one probe given two objects: two rewards, as before (check_distinct_rewards compares the objects)
    check_distinct_rewards([("a", m.logged(m.short)), ("b", m.logged(m.short))])


def test_partials_stay_objects_and_a_wrapped_of_another_name_or_a_loop_ends_the_walk(m):
    p = functools.partial(m.logged_short, ["q"])
    assert _where(p) == ("functools", SameObject(p))
    assert same_reward(p, p) and not same_reward(p, functools.partial(m.logged_short, ["q"]))
    assert not same_reward(p, m.logged_short) and not same_reward(functools.partial(m.short), m.short)
    other = m.logged(m.long)
    other.__wrapped__ = m.plain  # another name: set by hand, not copied by wraps; the wrapper's own line (logged's)
    assert _where(other) == (MOD, "<lambda>", 5) and not same_reward(other, m.long)
    loop = m.logged(m.logged(m.long))
    loop.__wrapped__.__wrapped__ = loop  # a loop: each walked once, ending at the inner wrapper's code
    assert _where(loop) == (MOD, "<lambda>", 5)
    assert same_reward(m.logged(m.logged(m.long)), m.long)  # the same two layers without the loop: the lambda's line
