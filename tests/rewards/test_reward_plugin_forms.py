"""A plug-in written per completion, ``fn(prompt, completion)``, is refused when loaded (it was taken for a native
``reward(batch, ctx)`` and failed after the rollouts with "'RewardContext' object is not iterable"); a TRL-style
reward that requires a column the task does not give names the columns it does give; a dict return is named as
such (it was "returned 1 values for N completions"); and an exception whose message spans lines (a completion
quoted in it) stays the one-line error the command prints."""

from __future__ import annotations


import pytest

from gradprobe.rewards.base import RewardFunctionError, UnknownRewardError
from gradprobe.rewards.sequence import one_line

from helpers_rollout import make_batch
from plugin_helpers import plugin_module

MODULE = '''
def singular(prompt, completion):
    return float(len(completion))

def per_answer(completion, answer):
    return 1.0

def needs_foo(prompts, completions, foo):
    return [1.0] * len(completions)

def returns_dict(prompts, completions, **kwargs):
    return {"score": [1.0] * len(completions)}

def multi_line(prompts, completions, **kwargs):
    raise ValueError("cannot parse completion: 9 + 3 = 12\\n12 + 5 =")

def native(batch, ctx):
    return None
'''

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """``forms_mod.py`` in a fresh working directory; the registry and import cache restored after."""
    with plugin_module(tmp_path, monkeypatch, "forms_mod", MODULE) as get:
        yield get


@pytest.mark.parametrize("name, names", [("singular", "['prompt', 'completion']"),
                                         ("per_answer", "['completion', 'answer']")])
def test_a_reward_written_per_completion_is_refused_when_loaded(plugins, name, names):
    with pytest.raises(UnknownRewardError) as e:
        plugins(name)
    assert str(e.value).startswith(f"reward 'forms_mod:{name}': {name}(")
    assert f"names {names}, like a TRL-style reward" in str(e.value)
    assert "write it fn(prompts, completions, **kwargs) (plural names)" in str(e.value)


def test_a_native_reward_still_loads(plugins):
    assert callable(plugins("native"))


def test_a_required_column_the_task_lacks_names_the_columns_it_gives(plugins):
    with pytest.raises(RewardFunctionError) as e:
        plugins("needs_foo")(BATCH, None)
    assert str(e.value).startswith("reward 'forms_mod:needs_foo' requires column(s) ['foo'], which this task does "
                                   "not give; it gives ['answer', 'completion_ids', 'completions', ")
    assert "'problem_id', 'prompts'" in str(e.value) and "\n" not in str(e.value)


def test_a_dict_return_is_named(plugins):
    with pytest.raises(RewardFunctionError, match=r"^reward 'forms_mod:returns_dict' returned dict; expected a list "
                                                  r"of 4 values, one per completion: a float, or None for no reward "
                                                  r"for that completion \(the return itself must be a list\)$"):
        plugins("returns_dict")(BATCH, None)


def test_a_multi_line_exception_is_one_line(plugins):
    with pytest.raises(RewardFunctionError) as e:
        plugins("multi_line")(BATCH, None)
    assert str(e.value) == ("reward 'forms_mod:multi_line' raised ValueError: cannot parse completion: 9 + 3 = 12"
                            "\\n12 + 5 =")


def test_one_line_cuts_long_text_and_shows_an_exit_code():
    assert one_line(ValueError("x" * 400)) == "ValueError: " + "x" * 300 + "..."
    assert one_line(SystemExit(3)) == "SystemExit: 3"
    assert one_line(KeyError("a\r\nb")) == "KeyError: 'a\\r\\nb'"


CALLABLES = '''
import functools

class Scorer:
    def __call__(self, prompt, completion):
        return 1.0

def _f(prompt, completion, scale):
    return scale

scorer = Scorer()
part = functools.partial(_f, scale=1.0)
'''


@pytest.mark.parametrize("name, shown", [("scorer", "Scorer(prompt, completion)"),
                                         ("part", "partial(prompt, completion, *, scale=1.0)")])
def test_a_callable_object_or_partial_is_named_by_its_type(tmp_path, monkeypatch, name, shown):
    """A callable without __name__ (an object with __call__, functools.partial) gets the same refusal, not an
    AttributeError from the message."""
    with plugin_module(tmp_path, monkeypatch, "callables_mod", CALLABLES) as get:
        with pytest.raises(UnknownRewardError) as e:
            get(name)
    assert str(e.value).startswith(f"reward 'callables_mod:{name}': {shown} names ['prompt', 'completion'], like a ")
