"""calib's plan check resolves a reward name it cannot run to a stand-in without editing the shared
``gradprobe.rewards.base.RESOLVERS`` (it appended a stand-in and removed it on exit: exception-safe, but another
thread resolving a name meanwhile got the stand-in instead of the unknown-reward error). ``calib rows`` reads such
a plan as before."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from calib.dataset import build_rows
from calib_helpers import default_arms, synthetic_forecasts, write_study
from gradprobe.rewards import UnknownRewardError, get_reward
from gradprobe.rewards.base import RESOLVERS
from gradprobe.study import reading


def _study(tmp_path):
    """A study whose plan names two rewards no one registered (user0, user1)."""
    return write_study(tmp_path / "s", arms=default_arms(n_extra=2, rng=np.random.default_rng(3)))


def test_the_plan_check_leaves_resolvers_untouched_and_resolves_stand_ins_inside(tmp_path, monkeypatch):
    study = _study(tmp_path)
    before = list(RESOLVERS)
    seen = {}
    real = reading.frozen_plan

    def watched(*args, **kwargs):  # what calib's plan check calls, inside its block
        seen["resolvers"] = list(RESOLVERS)
        stand_in = get_reward("user0")
        with pytest.raises(RuntimeError, match="reward 'user0' is a stand-in of calib's plan check and is never run"):
            stand_in(None, None)
        seen["stand_in"] = True
        return real(*args, **kwargs)

    monkeypatch.setattr(reading, "frozen_plan", watched)
    rows = build_rows(study, forecast_fn=synthetic_forecasts)
    assert seen == {"resolvers": before, "stand_in": True}  # was: before + [the stand-in]
    assert list(RESOLVERS) == before and sorted(set(rows["reward"]))[-2:] == ["user0", "user1"]
    with pytest.raises(UnknownRewardError, match="unknown reward 'user0'"):
        get_reward("user0")


def test_another_thread_sees_no_stand_in_while_the_plan_check_runs(tmp_path, monkeypatch):
    study = _study(tmp_path)
    inside, done = threading.Event(), threading.Event()
    real = reading.frozen_plan

    def paused(*args, **kwargs):  # holds calib's plan check open until the other thread has resolved a name
        inside.set()
        assert done.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(reading, "frozen_plan", paused)
    got = {}

    def other():
        assert inside.wait(30)
        try:
            got["reward"] = get_reward("user0")
        except UnknownRewardError as e:
            got["error"] = str(e)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    rows = build_rows(study, forecast_fn=synthetic_forecasts)
    thread.join(30)
    assert "reward" not in got and got["error"].startswith("unknown reward 'user0'")  # was: the stand-in
    assert len(rows) == 7 * 4  # five arms and the two of their own, four seeds each


def test_scoped_resolvers_nest_restore_on_error_and_refuse_a_non_callable():
    from gradprobe.rewards.base import scoped_resolvers

    first, second = (lambda n: (lambda *a: n) if n == "one" else None), (lambda n: (lambda *a: n) if n else None)
    before = list(RESOLVERS)
    with scoped_resolvers(first):
        assert get_reward("one")() == "one"
        with pytest.raises(ZeroDivisionError):
            with scoped_resolvers(second):
                assert get_reward("two")() == "two"
                1 / 0
        with pytest.raises(UnknownRewardError):
            get_reward("two")  # the inner block's resolver is gone, the outer one's stays
        assert get_reward("one")() == "one"
    with pytest.raises(UnknownRewardError):
        get_reward("one")
    assert list(RESOLVERS) == before
    with pytest.raises(TypeError, match="scoped_resolvers takes callables .*got 3"):
        with scoped_resolvers(3):
            pass
