"""Reward identities (:func:`gradprobe.rewards.base._where`) and names (:func:`~gradprobe.rewards.base.reward_origin`)
of callables with odd attributes: the ``functools.wraps`` walk (:func:`~gradprobe.rewards.base._defining_code`) reads
``__wrapped__``, ``__module__`` and ``__qualname__`` of user objects, so a ``__wrapped__`` property that raises (a
lazy proxy not yet set up) or a module name whose ``__eq__`` raises must read as absent or as plain text: registering
such a reward again (a notebook cell run twice) and naming it in a message worked before the walk existed.
"""

from __future__ import annotations

import functools

import pytest

from gradprobe.rewards import REWARDS, register_reward
from gradprobe.rewards.base import ROLLOUT_ONLY, _where, reward_origin, same_reward


class LazyReward:
    """A callable proxy (module and qualified name its own) whose ``__wrapped__`` raises until it is set up."""

    def __init__(self):
        self.__qualname__ = "make.<locals>.lazy"

    @property
    def __wrapped__(self):
        raise RuntimeError("proxy not initialised")

    def __call__(self, batch, ctx):
        return None


class Text(str):
    """A module name whose own ``__eq__`` refuses to compare (and is never to be asked)."""

    def __eq__(self, other):
        raise TypeError("Text refuses ==")

    __hash__ = str.__hash__


class Odd:
    """A non-text module object whose ``__eq__`` refuses to compare."""

    def __eq__(self, other):
        raise TypeError("Odd refuses ==")

    __hash__ = object.__hash__


def _logged(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


@pytest.fixture
def restore_registry():
    rewards, rollout_only = dict(REWARDS), set(ROLLOUT_ONLY)
    yield
    REWARDS.clear()
    REWARDS.update(rewards)
    ROLLOUT_ONLY.clear()
    ROLLOUT_ONLY.update(rollout_only)


def test_a_raising_wrapped_property_reads_as_no_wrapper(restore_registry):
    first, again = LazyReward(), LazyReward()  # a cell run twice: a new object, the same module and qualified name
    assert _where(first) == (__name__, "make.<locals>.lazy")
    assert same_reward(first, again)
    register_reward("zz_lazy_proxy")(first)
    register_reward("zz_lazy_proxy")(again)  # registered again, not a RuntimeError from the proxy
    assert REWARDS["zz_lazy_proxy"] is again
    assert reward_origin(again) == f"{__name__}.make.<locals>.lazy"


def test_a_module_name_with_its_own_eq_is_compared_as_text():
    lam = lambda batch, ctx: None  # noqa: E731
    line = lam.__code__.co_firstlineno
    wrapped = _logged(lam)
    wrapped.__module__ = Text(__name__)
    assert _where(wrapped)[1:] == (lam.__qualname__, line)  # the lambda's own line, not the decorator's
    assert reward_origin(wrapped) == f"{__name__}.<lambda> (a lambda at line {line} of {__file__})"


def test_a_module_that_is_no_text_stops_the_walk():
    lam = lambda batch, ctx: None  # noqa: E731
    wrapped = _logged(lam)
    wrapped.__module__ = odd = Odd()
    where = _where(wrapped)  # not the TypeError of Odd.__eq__
    assert where[0] is odd and where[1:] == (lam.__qualname__, wrapped.__code__.co_firstlineno)
    assert reward_origin(wrapped).endswith(f"(a lambda at line {wrapped.__code__.co_firstlineno} of {__file__})")
