"""A reward plug-in that misbehaves is named in one clear error, never a traceback or a silent exit: a native
``reward(batch, ctx)`` that raises, returns None, a list or tensors of the wrong shape; ``sys.exit()`` in either
form; and a TRL-style function without ``**kwargs`` gets only the keywords it names. Plug-ins are called before
the built-in rewards, so a failing one loses no Monte Carlo continuations."""

from __future__ import annotations

import sys

import pytest
import torch

from gradprobe.probe.stages import reward_outputs
from gradprobe.rewards import REWARDS, RewardOutput, get_reward
from gradprobe.rewards.base import RewardFunctionError
from gradprobe.rewards.plugin import checked_native
from gradprobe.rewards.sequence import sequence_reward

from helpers_rollout import make_batch
from plugin_helpers import plugin_module

MODULE = '''
import sys
import torch
from gradprobe.rewards import RewardOutput

def returns_list(batch, ctx):
    return [0.0] * batch.num_rows

def returns_none(batch, ctx):
    return None

def raises(batch, ctx):
    raise IndexError("native boom")

def exits(batch, ctx):
    sys.exit(3)

def wrong_shape(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="w", advantages=torch.zeros(n, t + 1, dtype=torch.float64),
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens={}, stats={})

def fine(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="fine", advantages=torch.ones(n, t, dtype=torch.float64) * batch.completion_mask,
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens={}, stats={})

def only_completions(completions):
    return [float(len(c)) for c in completions]

def trl_exits(prompts, completions, **kwargs):
    raise SystemExit(3)
'''

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """``misbehaving_mod.py`` in a fresh working directory; the registry and import cache restored after."""
    with plugin_module(tmp_path, monkeypatch, "misbehaving_mod", MODULE) as get:
        yield get


@pytest.mark.parametrize("name, message", [
    ("returns_list", "reward 'misbehaving_mod:returns_list' returned list: a gradprobe reward(batch, ctx) returns "
                     "gradprobe.rewards.RewardOutput("),
    ("returns_none", "reward 'misbehaving_mod:returns_none' returned NoneType: a gradprobe reward(batch, ctx)"),
    ("raises", "reward 'misbehaving_mod:raises' raised IndexError: native boom"),
    ("exits", "reward 'misbehaving_mod:exits' raised SystemExit: 3"),
    ("wrong_shape", "reward 'misbehaving_mod:wrong_shape' returned advantages of shape (4, 5), expected (4, 4) "
                    "(N = B * G completions x T completion tokens)"),
])
def test_a_native_reward_that_misbehaves_is_named(plugins, name, message):
    reward = plugins(name)
    assert BATCH.completion_mask.shape == (4, 4)
    with pytest.raises(RewardFunctionError) as e:
        reward(BATCH, None)
    assert str(e.value).startswith(message), str(e.value)


def test_a_native_reward_that_behaves_is_returned_unchanged(plugins):
    out = plugins("fine")(BATCH, None)
    assert isinstance(out, RewardOutput) and out.name == "fine"
    assert torch.equal(out.advantages, torch.ones(4, 4, dtype=torch.float64) * BATCH.completion_mask)


def test_a_trl_style_reward_without_kwargs_gets_the_keywords_it_names(plugins):
    """fn(completions) was accepted at load and then raised TypeError (unexpected keyword 'prompts') after the
    rollouts; it now gets completions alone."""
    out = plugins("only_completions")(BATCH, None)
    lengths = torch.tensor([len(c) for c in BATCH.completions], dtype=torch.float64)
    expected = sequence_reward(lambda completions, **kw: lengths.tolist())(BATCH, None)
    torch.testing.assert_close(out.advantages, expected.advantages, rtol=0, atol=0)
    assert out.advantages.abs().sum() > 0


def test_sys_exit_in_a_trl_style_reward_is_an_error_naming_it(plugins):
    with pytest.raises(RewardFunctionError, match=r"^reward 'misbehaving_mod:trl_exits' raised SystemExit: 3$"):
        plugins("trl_exits")(BATCH, None)


def test_plug_ins_are_called_first_and_the_outputs_keep_the_given_order():
    calls = []

    def recorder(name):
        def reward(batch, ctx):
            calls.append(name)
            return checked_native(lambda b, c: RewardOutput(
                name=name, advantages=torch.zeros(b.completion_mask.shape, dtype=torch.float64),
                valid=torch.ones(b.num_rows, dtype=torch.bool), generated_tokens={}, stats={}), name)(batch, ctx)
        return reward

    names = ["outcome", "mc_value", "my.py:brevity", "hybrid_0.5", "mod:other"]
    advantages, outputs = reward_outputs(BATCH, ((n, recorder(n)) for n in names), None)  # a generator too
    assert calls == ["my.py:brevity", "mod:other", "outcome", "mc_value", "hybrid_0.5"]
    assert list(advantages) == names == list(outputs)


@pytest.mark.parametrize("form", ["module", "file"])
@pytest.mark.parametrize("code, shown", [("sys.exit()", "None"), ("sys.exit(3)", "3"), ("sys.exit('bye')", "bye")])
def test_sys_exit_while_a_plug_in_is_imported_is_an_error_naming_it(tmp_path, monkeypatch, form, code, shown):
    """sys.exit() at a plug-in's import (not in its function) ended `gradprobe probe` with status 0 and no output:
    the import caught Exception only. It is now the one-line UnknownRewardError the other import failures give,
    and the half-imported module is not kept for a later lookup."""
    from gradprobe.rewards.base import UnknownRewardError

    (tmp_path / "exits_at_import.py").write_text(f"import sys\n{code}\n\ndef f(completions, **kw):\n    return []\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec, where = (("exits_at_import:f", "exits_at_import") if form == "module" else
                   (f"{tmp_path / 'exits_at_import.py'}:f", str(tmp_path / "exits_at_import.py")))
    with pytest.raises(UnknownRewardError) as e:
        get_reward(spec)
    assert str(e.value) == f"reward {spec!r}: importing {where} raised SystemExit: {shown}"
    assert "exits_at_import" not in sys.modules
    assert spec not in REWARDS
