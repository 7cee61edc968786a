"""What the walker over reward wrappers (:mod:`gradprobe.rewards.base`: ``user_function``, ``_computes``,
``_where``, ``reward_origin``) and the public functions built on it (``same_reward``, ``registered_elsewhere``,
``check_distinct_rewards``) make of each kind of wrapper.

The walker follows gradprobe's own wrappers only: a sequence reward's ``sequence_source`` (with its scale) and a
plug-in's checked native reward's ``native_source``. A ``functools.partial``, a ``functools.wraps`` chain
(``__wrapped__``), a bound method, a callable object, a lambda and a builtin are rewards of their own.
"""

from __future__ import annotations

import functools

import pytest

from gradprobe.integrations.trl_tokens import counting
from gradprobe.probe.run import ProbeConfig, rewards_to_probe
from gradprobe.rewards import REWARDS, register_reward, sequence_reward
from gradprobe.rewards.base import (ROLLOUT_ONLY, SameObject, _computes, _where, check_distinct_rewards,
                                    registered_elsewhere, reward_origin, same_reward, user_function)
from gradprobe.rewards.plugin import checked_native

from plugin_helpers import source_module

MOD = "zz_walker_rw"
SOURCE = '''import functools


def plain(prompts, completions, **kw):
    return [1.0 for c in completions]


one, two = (lambda prompts, completions, **kw: [1.0]), (lambda prompts, completions, **kw: [2.0])


def deco(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


wrapped_plain = deco(plain)
wrapped_twice = deco(deco(plain))
wrapped_lam = deco(lambda prompts, completions, **kw: [3.0])


class Scorer:
    def score(self, prompts, completions, **kw):
        return [1.0]

    def __call__(self, prompts, completions, **kw):
        return [2.0]


def native(batch, ctx=None):
    return None


native_lam = lambda batch, ctx=None: None
'''
NAME = "zz_walker_reward"


@pytest.fixture
def m(tmp_path, monkeypatch):
    """The module ``MOD`` of ``SOURCE``, imported from ``tmp_path``; it, sys.path and ``NAME`` forgotten after."""
    with source_module(tmp_path, monkeypatch, MOD, SOURCE, NAME) as module:
        yield module


def _one_reward(first, second, shown) -> str:
    """check_distinct_rewards's message for ``first`` and ``second`` given one reward shown as ``shown``."""
    return (f"rewards {first!r} and {second!r} are one reward ({shown}): give it once, under one name (e.g. "
            f"{first!r} alone); two names would probe it as two rewards")


def test_a_plain_function_and_a_builtin_are_themselves(m):
    assert user_function(m.plain) is m.plain
    assert _computes(m.plain) == (SameObject(m.plain), ())
    assert reward_origin(m.plain) == f"{MOD}.plain"
    assert _where(m.plain) == (MOD, "plain")
    assert user_function(len) is len and _computes(len) == (SameObject(len), ())
    assert reward_origin(len) == "builtins.len" and _where(len) == ("builtins", "len")
    append = [].append  # a builtin's bound method: no module, not an inspect method
    assert user_function(append) is append and _computes(append) == (SameObject(append), ())
    assert reward_origin(append) == repr(append) and _where(append) == (None, "list.append")
    assert same_reward(len, len) and not same_reward(len, abs)
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("a", len), ("b", m.plain), ("c", len)])
    assert str(e.value) == _one_reward("a", "c", "builtins.len")


def test_a_partial_of_a_partial_is_the_partial_itself(m):
    p = functools.partial(functools.partial(m.plain, ["q"]), ["c"])
    assert p.func is m.plain  # functools flattens it; the walker does not follow .func either way
    assert user_function(p) is p and _computes(p) == (SameObject(p), ())
    assert reward_origin(p) == repr(p)
    assert _where(p) == ("functools", SameObject(p))
    q = functools.partial(m.plain, ["q"], ["c"])
    assert not same_reward(p, q) and same_reward(p, p)
    check_distinct_rewards([("p", p), ("q", q), ("plain", m.plain)])  # three objects: three rewards
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("p", p), ("again", p)])
    assert str(e.value) == _one_reward("p", "again", repr(p))
    wrapped = sequence_reward(p, name="pp")
    assert user_function(wrapped) is p and _computes(wrapped) == (SameObject(p), ("group",))
    assert reward_origin(wrapped) == "gradprobe.rewards.sequence.sequence_reward_pp"
    assert _where(wrapped) == ("sequence_reward", "group", "functools", SameObject(p))


def test_a_functools_wraps_chain_is_not_unwrapped(m):
    for fn in (m.wrapped_plain, m.wrapped_twice):
        assert fn.__wrapped__ is not None and user_function(fn) is fn
        assert _computes(fn) == (SameObject(fn), ())
        assert reward_origin(fn) == f"{MOD}.plain" and _where(fn) == (MOD, "plain")
        assert same_reward(fn, m.plain)  # where it is defined: wraps copies the module and qualified name
    check_distinct_rewards([("plain", m.plain), ("w", m.wrapped_plain), ("ww", m.wrapped_twice)])
    assert _where(m.wrapped_lam) == (MOD, "<lambda>", 20)  # the wrapped lambda's own line, not the decorator's
    assert reward_origin(m.wrapped_lam) == f"{MOD}.<lambda> (a lambda at line 20 of {m.__file__})"


def test_lambdas_on_one_line_are_one_place_but_two_objects(m):
    for lam in (m.one, m.two):
        assert user_function(lam) is lam and _computes(lam) == (SameObject(lam), ())
        assert reward_origin(lam) == f"{MOD}.<lambda> (a lambda at line 8 of {m.__file__})"
        assert _where(lam) == (MOD, "<lambda>", 8)
    assert same_reward(m.one, m.two)
    check_distinct_rewards([("one", m.one), ("two", m.two)])
    wrapped = sequence_reward(m.one)
    assert user_function(wrapped) is m.one and _computes(wrapped) == (SameObject(m.one), ("group",))
    assert reward_origin(wrapped) == ("gradprobe.rewards.sequence.sequence_reward_<lambda> (a lambda at line 8 of "
                                      f"{m.__file__})")
    assert _where(wrapped) == ("sequence_reward", "group", MOD, "<lambda>", 8)
    assert same_reward(wrapped, sequence_reward(m.two)) and not same_reward(wrapped, m.one)
    assert not same_reward(wrapped, sequence_reward(m.one, scale="batch"))


def test_bound_methods_and_callable_objects(m):
    s, t = m.Scorer(), m.Scorer()
    assert s.score is not s.score and user_function(s.score) == s.score
    assert _computes(s.score) == (SameObject(s), SameObject(m.Scorer.score), ())
    assert _computes(s.score) == _computes(s.score) != _computes(t.score)
    assert reward_origin(s.score) == f"{MOD}.Scorer.score" and _where(s.score) == (MOD, "Scorer.score")
    assert same_reward(s.score, t.score)
    check_distinct_rewards([("a", s.score), ("t", t.score), ("b", sequence_reward(s.score))])  # wrapped: a scale
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("a", sequence_reward(s.score)), ("b", sequence_reward(s.score))])
    assert str(e.value) == _one_reward("a", "b", f"{MOD}.Scorer.score")
    assert user_function(s) is s and _computes(s) == (SameObject(s), ())
    assert reward_origin(s) == repr(s) and _where(s) == (MOD, SameObject(s))
    assert not same_reward(s, t)
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("s", s), ("again", s)])
    assert str(e.value) == _one_reward("s", "again", repr(s))


def test_gradprobe_wrappers_are_walked_to_the_function_inside(m):
    deep = sequence_reward(sequence_reward(m.plain), scale="batch")
    assert user_function(deep) is m.plain and _computes(deep) == (SameObject(m.plain), ("batch", "group"))
    assert _where(deep) == ("sequence_reward", "batch", "sequence_reward", "group", MOD, "plain")
    assert reward_origin(deep) == "gradprobe.rewards.sequence.sequence_reward_sequence_reward_plain"
    native = checked_native(m.native, "n")
    assert native.__wrapped__ is m.native and native.native_source is m.native
    assert user_function(native) is m.native and _computes(native) == (SameObject(m.native), ())
    assert reward_origin(native) == f"{MOD}.native" and _where(native) == (MOD, "native")
    assert same_reward(native, m.native) and same_reward(checked_native(native, "nn"), m.native)
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("native", m.native), ("checked", native)])
    assert str(e.value) == _one_reward("native", "checked", f"{MOD}.native")
    inner = sequence_reward(m.one)
    checked = checked_native(inner, "c")  # functools.wraps copies sequence_source onto the check
    assert checked.sequence_source == (m.one, "group") and checked.native_source is inner
    assert user_function(checked) is m.one and _computes(checked) == _computes(inner)
    assert reward_origin(checked) == reward_origin(inner) and _where(checked) == _where(inner)
    counted = counting(inner, m.one)
    assert user_function(counted) is m.one and _computes(counted) == _computes(inner)
    assert _where(counted) == _where(inner)
    assert reward_origin(counted) == ("gradprobe.integrations.trl_tokens.sequence_reward_<lambda> (a lambda at line "
                                      f"8 of {m.__file__})")
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("w", inner), ("c", counted)])
    assert str(e.value) == _one_reward("w", "c", f"{MOD}.<lambda> (a lambda at line 8 of {m.__file__})")


class _Layer:
    """A callable carrying gradprobe's wrapper attributes as given."""

    def __call__(self, batch, ctx=None):
        return None


def test_a_wrapper_naming_itself_is_a_reward_of_its_own(m):
    m.plain.__wrapped__ = m.plain  # a __wrapped__ loop: not followed
    assert user_function(m.plain) is m.plain and _where(m.plain) == (MOD, "plain")
    for attr in ("sequence_source", "native_source"):
        layer = _Layer()
        setattr(layer, attr, (layer, "group") if attr == "sequence_source" else layer)
        assert user_function(layer) is layer and _computes(layer) == (SameObject(layer), ())
        assert reward_origin(layer) == repr(layer) and _where(layer) == (__name__, SameObject(layer))
        assert same_reward(layer, layer) and registered_elsewhere("zz_walker_unregistered", layer) is None
    odd = _Layer()
    odd.sequence_source = (m.plain,)  # not a (function, scale) pair: not a sequence reward's
    odd.native_source = m.native
    assert user_function(odd) is m.native and _computes(odd) == (SameObject(m.native), ())
    assert _where(odd) == (MOD, "native")


def test_registered_elsewhere_and_the_probe_message_walk_the_wrappers(m):
    register_reward(NAME)(sequence_reward(m.plain))
    assert registered_elsewhere(NAME, sequence_reward(m.plain)) is None  # wrapped again: the same reward
    assert registered_elsewhere(NAME, sequence_reward(m.wrapped_plain)) is None  # wraps copies where it is
    assert registered_elsewhere(NAME, sequence_reward(m.one)) is REWARDS[NAME]
    assert registered_elsewhere(NAME, sequence_reward(m.plain, scale="batch")) is REWARDS[NAME]
    with pytest.raises(ValueError, match=rf"^extra_rewards\['{NAME}'\] \(gradprobe\.rewards\.sequence\.sequence_"
                                         r"reward_<lambda> \(a lambda at line 8 of .*\)\) is named .* registered "
                                         r"reward gradprobe\.rewards\.sequence\.sequence_reward_plain, another"):
        rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), {NAME: sequence_reward(m.one)})


def test_a_checked_native_lambda_is_shown_where_the_lambda_is(m):
    """reward_origin walked no ``native_source``: a plug-in's native lambda, whose check copies its name
    (functools.wraps) but not its code, was shown at the check's line in gradprobe/rewards/plugin.py."""
    checked = checked_native(m.native_lam, NAME)
    shown = f"{MOD}.<lambda> (a lambda at line 35 of {m.__file__})"
    assert reward_origin(checked) == shown and _where(checked) == (MOD, "<lambda>", 35)
    register_reward(NAME)(checked)
    with pytest.raises(ValueError) as e:
        rewards_to_probe(ProbeConfig.from_dict({"rewards": ["outcome"]}), {NAME: m.native})
    assert str(e.value).startswith(f"extra_rewards[{NAME!r}] ({MOD}.native) is named {NAME!r}, which is the "
                                   f"registered reward {shown}, another function")


def test_reward_origin_shows_the_lambda_inside_every_sequence_wrapper(m):
    deep = sequence_reward(sequence_reward(m.one), scale="batch")
    assert reward_origin(deep) == ("gradprobe.rewards.sequence.sequence_reward_sequence_reward_<lambda> (a lambda at "
                                   f"line 8 of {m.__file__})")


def test_the_message_names_what_the_identity_walks_to(m):
    """A sequence_source naming its own holder is passed over for its native_source by the identity (_computes,
    _where); the message's function (user_function) stopped at the holder."""
    layer = _Layer()
    layer.sequence_source = (layer, "group")
    layer.native_source = m.native
    assert _computes(layer) == (SameObject(m.native), ()) and _where(layer) == (MOD, "native")
    assert user_function(layer) is m.native
    with pytest.raises(ValueError) as e:
        check_distinct_rewards([("native", m.native), ("layer", layer)])
    assert str(e.value) == _one_reward("native", "layer", f"{MOD}.native")


def test_wrappers_in_a_loop_are_refused_by_name(m):
    first, second = _Layer(), _Layer()
    first.native_source, second.sequence_source = second, (first, "group")
    for fn in (first, second):
        with pytest.raises(ValueError, match=r"^reward <.*_Layer object at .*>: its wrappers loop \(.*\): set "):
            _where(fn)
    with pytest.raises(ValueError, match=r"its wrappers loop"):
        same_reward(first, m.plain)
    with pytest.raises(ValueError, match=r"its wrappers loop"):
        check_distinct_rewards([("first", first)])


def test_a_loop_is_refused_when_registered_and_named_as_it_is_in_messages(m):
    first, second = _Layer(), _Layer()
    first.native_source, second.sequence_source = second, (first, "group")
    with pytest.raises(ValueError, match=r"its wrappers loop"):
        register_reward("zz_walker_loop")(first)
    assert "zz_walker_loop" not in REWARDS
    # a message naming such a reward must not fail in its turn: the object as it is (a repr: no qualified name)
    assert reward_origin(first) == repr(first)


def test_an_object_that_makes_attributes_when_asked_is_refused_at_once():
    from unittest import mock

    for fake in (mock.MagicMock(), mock.Mock()):
        with pytest.raises(ValueError, match=r"^reward <.*Mock.*>: its sequence_source / native_source wrappers nest "
                                             r"deeper than 64 layers \(.*MagicMock.*\): register a plain function"):
            register_reward("zz_walker_mock")(fake)
        assert "zz_walker_mock" not in REWARDS
        with pytest.raises(ValueError, match=r"nest deeper than 64 layers"):
            same_reward(fake, len)
    spec = mock.Mock(spec=["__call__"])
    try:
        assert register_reward("zz_walker_spec")(spec) is spec
        assert user_function(spec) is spec
    finally:
        REWARDS.pop("zz_walker_spec", None)
        ROLLOUT_ONLY.discard("zz_walker_spec")
