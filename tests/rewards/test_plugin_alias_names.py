"""One reward function under two plug-in names is refused, as ``two:f`` beside ``two.py:f`` (one file) already was
(gradprobe.rewards.plugin.load_reward_plugin): also when the names reach one function object through other
attributes, ``two.py:f,two.py:g`` where the file says ``g = f``, or one function imported into two files. Before, such
a pair was probed (and could be studied) as two rewards. Two functions of the same code stay two rewards; one file
under two names (``two:f``, ``two.py:f``) is tests/rewards/test_reward_plugin_path.py's.
"""

from __future__ import annotations

import pytest

from gradprobe.cli import main
from gradprobe.rewards import REWARDS, get_reward, parse_rewards
from gradprobe.rewards.base import UnknownRewardError

from plugin_helpers import plugin_records_restored

TWO = '''
def f(prompts, completions, **kwargs):
    return [float(len(c)) for c in completions]

g = f

def h(prompts, completions, **kwargs):  # the same code, another function
    return [float(len(c)) for c in completions]

def native(batch, ctx):
    raise NotImplementedError

also_native = native
'''
HELPER = '''
def score(prompts, completions, **kwargs):
    return [1.0 for c in completions]
'''
SECOND = "(two names would probe and train it as two rewards)"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """``two.py``, ``helper.py`` and the files ``a.py``, ``b.py`` importing ``score`` from it, in the working
    directory; the registry, plug-in records and modules restored after."""
    (tmp_path / "two.py").write_text(TWO)
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "a.py").write_text("from helper import score\n")
    (tmp_path / "b.py").write_text("from helper import score\n")
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path.resolve()


@pytest.mark.parametrize("first, second, defined", [
    ("two.py:f", "two.py:g", "f"),
    ("two.py:g", "two.py:f", "f"),
    ("two.py:native", "two.py:also_native", "native"),
])
def test_a_second_name_for_one_function_object_is_refused(folder, first, second, defined):
    get_reward(first)
    with pytest.raises(UnknownRewardError) as e:
        get_reward(second)
    assert str(e.value) == (f"reward {second!r} is the function {first!r} already names (the same function object: "
                            f"{defined}, defined in {folder / 'two.py'}); use one name for it {SECOND}")
    assert first in REWARDS and second not in REWARDS
    assert [name for name, _ in parse_rewards(f"{first},two.py:h")] == [first, "two.py:h"]  # the same code, two
    assert get_reward("two.py:h") is not get_reward(first) and get_reward(first) is REWARDS[first]  # functions


def test_one_function_imported_into_two_files_is_one_reward(folder):
    get_reward("a.py:score")
    with pytest.raises(UnknownRewardError) as e:
        get_reward("b.py:score")
    assert str(e.value) == ("reward 'b.py:score' is the function 'a.py:score' already names (the same function "
                            f"object: score, defined in {folder / 'helper.py'}); use one name for it {SECOND}")


def test_gradprobe_probe_refuses_the_alias_before_loading_a_model(folder, capsys):
    assert main(["probe", "--model", "tiny-qwen2", "--rewards", "outcome,two.py:f,two.py:g", "--prompts", "2",
                 "--group", "4", "--out", str(folder / "p"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "gradprobe probe: error: reward 'two.py:g' is the function 'two.py:f' already names (the same function "
        f"object: f, defined in {folder / 'two.py'}); use one name for it {SECOND}\n")
    assert not (folder / "p").exists()
