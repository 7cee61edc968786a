"""Rewards named by import path (gradprobe.rewards.plugin): MODULE:FUNCTION and FILE.py:FUNCTION, from the CLI."""

from __future__ import annotations

import json
import sys

import pytest

from gradprobe.cli import main
from gradprobe.rewards import REWARDS, UnknownRewardError, get_reward, parse_rewards

MODULE = '''
def length_penalty(completions, **kwargs):  # TRL-style
    return [-len(c) / 10 for c in completions]

def native(batch, ctx):  # a gradprobe Reward
    raise AssertionError("not called in these tests")

NOT_A_FUNCTION = 3
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``plugin_rewards_mod.py`` in a fresh working directory; registry and import cache restored after."""
    (tmp_path / "plugin_rewards_mod.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    get_reward("outcome")  # built-ins registered first
    before = dict(REWARDS)
    yield tmp_path
    for name in set(REWARDS) - set(before):
        del REWARDS[name]
    sys.modules.pop("plugin_rewards_mod", None)


def test_module_and_file_forms_resolve_register_and_wrap(user_module):
    trl = get_reward("plugin_rewards_mod:length_penalty")
    assert REWARDS["plugin_rewards_mod:length_penalty"] is trl and get_reward("plugin_rewards_mod:length_penalty") is trl
    assert trl.__name__ != "length_penalty"  # wrapped by sequence_reward (a TRL-style function)
    import plugin_rewards_mod

    assert get_reward("plugin_rewards_mod:native") is plugin_rewards_mod.native  # a native Reward, as it is
    by_file = get_reward(f"{user_module / 'plugin_rewards_mod.py'}:length_penalty")
    assert by_file is not trl and callable(by_file)
    names = [n for n, _ in parse_rewards("outcome,plugin_rewards_mod:length_penalty")]
    assert names == ["outcome", "plugin_rewards_mod:length_penalty"]


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:f", r"reward 'no_such_module_xyz:f': no module named 'no_such_module_xyz'"),
    ("missing/file.py:f", r"reward 'missing/file.py:f': no file missing/file.py"),
    ("plugin_rewards_mod:nope", r"plugin_rewards_mod has no 'nope'; its functions: length_penalty, native"),
    ("plugin_rewards_mod:NOT_A_FUNCTION", r"plugin_rewards_mod.NOT_A_FUNCTION is a int, not a function"),
    ("brevity", r"unknown reward 'brevity'; valid: .*or a reward of your own as MODULE:FUNCTION or "
                r"path/to/file.py:FUNCTION"),
])
def test_bad_names_say_what_is_wrong(user_module, spec, message):
    with pytest.raises(UnknownRewardError, match=message):
        get_reward(spec)


def test_a_module_that_raises_on_import_is_named(user_module):
    (user_module / "broken_rewards_mod.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(UnknownRewardError, match=r"importing broken_rewards_mod raised RuntimeError: boom"):
        get_reward("broken_rewards_mod:f")
    with pytest.raises(UnknownRewardError, match=r"importing .*broken_rewards_mod.py raised RuntimeError: boom"):
        get_reward("broken_rewards_mod.py:f")


def test_probe_command_takes_an_import_path_reward(user_module, capsys):
    out = user_module / "o"
    rc = main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards",
               "outcome,plugin_rewards_mod:length_penalty", "--prompts", "2", "--group", "4", "--heldout-prompts", "2",
               "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap", "50", "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    saved = json.loads((out / "probe.json").read_text())
    assert [r["name"] for r in saved["rewards"]] == ["outcome", "plugin_rewards_mod:length_penalty"]
    assert saved["config"]["rewards"] == ["outcome", "plugin_rewards_mod:length_penalty"]
