"""A reward file named like a module Python has already imported (``./random.py`` beside the standard library's
``random``): ``random:f`` imports the standard library's, and the error listed its functions without saying why
(a trial user). It now names both files and the form that reads the file."""

from __future__ import annotations

import random
import sys

import pytest

from gradprobe.rewards.base import REWARDS, UnknownRewardError
from gradprobe.rewards.plugin import load_reward_plugin


def test_a_file_shadowed_by_the_standard_library_is_named_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "random.py").write_text("def f(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader puts tmp_path on it: a later process-pool worker
    # would import this random.py as the standard library's random (restored when the test ends)
    with pytest.raises(UnknownRewardError) as e:
        load_reward_plugin("random:f")
    assert str(e.value).endswith(
        f"; this random is {random.__file__}, not {tmp_path / 'random.py'}: a module of that name (Python's own, or "
        "installed) is found first, so name the file instead: random.py:f")
    assert "random" in sys.modules and sys.modules["random"] is random  # the standard library's is left in place
    try:
        assert load_reward_plugin("random.py:f") is not None  # the fix works
    finally:
        REWARDS.pop("random.py:f", None)
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
                del sys.modules[name]
    assert sys.modules["random"] is random


def test_a_missing_function_of_a_module_in_the_working_directory_has_no_shadow_note(tmp_path, monkeypatch):
    (tmp_path / "my_rewards_unshadowed.py").write_text("def g(completions, **kwargs):\n    return [0.0]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownRewardError) as e:
        load_reward_plugin("my_rewards_unshadowed:f")
    assert str(e.value) == "reward 'my_rewards_unshadowed:f': my_rewards_unshadowed has no 'f'; its functions: g"
    sys.modules.pop("my_rewards_unshadowed", None)
