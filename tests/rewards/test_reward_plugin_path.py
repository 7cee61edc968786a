"""Rewards named by import path (gradprobe.rewards.plugin): MODULE:FUNCTION and FILE.py:FUNCTION, from the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.rewards import REWARDS, UnknownRewardError, get_reward, parse_rewards

MODULE = '''
def length_penalty(completions, **kwargs):  # TRL-style
    return [-len(c) / 10 for c in completions]

def native(batch, ctx):  # a gradprobe Reward
    raise AssertionError("not called in these tests")

NOT_A_FUNCTION = 3

def one_arg(x):
    return x

def positional_trl(prompts, comps):
    return [0.0 for _ in comps]
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``plugin_rewards_mod.py`` in a fresh working directory; registry and import cache restored after."""
    (tmp_path / "plugin_rewards_mod.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    from gradprobe.rewards import plugin

    get_reward("outcome")  # built-ins registered first
    before, origins = dict(REWARDS), dict(plugin._ORIGINS)
    yield tmp_path
    for name in set(REWARDS) - set(before):
        del REWARDS[name]
    plugin._ORIGINS.clear()
    plugin._ORIGINS.update(origins)
    sys.modules.pop("plugin_rewards_mod", None)


def test_module_and_file_forms_resolve_register_and_wrap(user_module):
    trl = get_reward("plugin_rewards_mod:length_penalty")
    assert REWARDS["plugin_rewards_mod:length_penalty"] is trl and get_reward("plugin_rewards_mod:length_penalty") is trl
    assert trl.__name__ != "length_penalty"  # wrapped by sequence_reward (a TRL-style function)
    import plugin_rewards_mod

    assert get_reward("plugin_rewards_mod:native").__wrapped__ is plugin_rewards_mod.native  # a native Reward, checked
    with pytest.raises(UnknownRewardError, match=r"is the function 'plugin_rewards_mod:length_penalty' already names"):
        get_reward(f"{user_module / 'plugin_rewards_mod.py'}:length_penalty")  # the same file: its module is imported
        # again under a path-derived name, but the module file and function are the same
    names = [n for n, _ in parse_rewards("outcome,plugin_rewards_mod:length_penalty")]
    assert names == ["outcome", "plugin_rewards_mod:length_penalty"]


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:f", r"reward 'no_such_module_xyz:f': no module named 'no_such_module_xyz'"),
    ("missing/file.py:f", r"reward 'missing/file.py:f': no file missing/file.py"),
    ("plugin_rewards_mod:nope", r"plugin_rewards_mod has no 'nope'; its functions: length_penalty, native"),
    ("plugin_rewards_mod:NOT_A_FUNCTION", r"plugin_rewards_mod.NOT_A_FUNCTION is a int, not a function"),
    ("plugin_rewards_mod:one_arg", r"one_arg\(x\) is neither a TRL-style reward fn\(prompts, completions, \*\*kwargs\)"),
    ("plugin_rewards_mod:positional_trl", r"looks like a TRL-style reward, which is called by keyword: name its "
                                          r"second parameter completions"),
    ("plugin_rewards_mod:length_penalty:extra", r"has more than one ':'"),
    ("sub\\brev.py:fn", r"write the file's path with '/'"),
    ("rewards/brevity.py", r"^reward 'rewards/brevity.py' names a Python file but no function in it: write it as "
                           r"rewards/brevity.py:FUNCTION \(the reward function after the last ':'\)$"),
    ("rewards/brevity.py:", r"^reward 'rewards/brevity.py:' names a Python file but no function in it: write it as "
                            r"rewards/brevity.py:FUNCTION"),
    ("brevity", r"unknown reward 'brevity'; valid: .*or a reward of your own as MODULE:FUNCTION or "
                r"path/to/file.py:FUNCTION"),
])
def test_bad_names_say_what_is_wrong(user_module, spec, message):
    with pytest.raises(UnknownRewardError, match=message):
        get_reward(spec)


def test_a_folder_is_named_as_a_folder_not_a_missing_file(user_module):
    (user_module / "rewards_dir").mkdir()
    for given in ("rewards_dir/", str(user_module / "rewards_dir")):
        with pytest.raises(UnknownRewardError) as err:
            get_reward(f"{given}:fn")
        assert str(err.value).startswith(f"reward '{given}:fn': {given} is a folder, not a Python file; name the file "
                                         f"that defines the function ({given.rstrip('/')}/FILE.py:FUNCTION), or ")


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


def test_the_working_directory_comes_first_as_with_python_m(user_module):
    assert "tabnanny" not in sys.modules  # a standard-library module nothing here imports
    (user_module / "tabnanny.py").write_text("def fn(completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    try:
        assert callable(get_reward("tabnanny:fn"))
        assert sys.modules["tabnanny"].__file__ == str(user_module / "tabnanny.py")
    finally:
        sys.modules.pop("tabnanny", None)


def test_a_plan_names_an_import_path_reward_without_importing_it_until_a_run_starts(user_module, capsys):
    from gradprobe.training.plan import load_plan

    repo = Path(__file__).resolve().parents[2]
    plan = (repo / "plans" / "tiny.toml").read_text() + '\n[arms.mine]\nreward = "absent_rewards_mod:fn"\n'
    (user_module / "plan.toml").write_text(plan)
    assert load_plan(user_module / "plan.toml").arms["mine"].reward == "absent_rewards_mod:fn"  # read: no import
    rc = main(["train", "--plan", "plan.toml", "--arm", "mine", "--updates", "1", "--out", "run", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "arms.mine.reward: reward 'absent_rewards_mod:fn': no module named 'absent_rewards_mod'" in err
    assert "nothing was" in err and not (user_module / "run").exists()


def test_a_study_preflight_imports_each_arms_reward_before_the_folder(user_module):
    from gradprobe.study.preflight import check_plan_inputs
    from gradprobe.training.plan import load_plan

    repo = Path(__file__).resolve().parents[2]
    plan = (repo / "plans" / "tiny.toml").read_text() + '\n[arms.mine]\nreward = "absent_rewards_mod:fn"\n'
    (user_module / "plan.toml").write_text(plan)
    with pytest.raises(Exception, match=r"\[arms.mine\] reward: reward 'absent_rewards_mod:fn': no module named "
                                        r"'absent_rewards_mod'.*checked before the study folder was written"):
        check_plan_inputs(load_plan(user_module / "plan.toml"))


def test_a_reward_file_imports_a_module_beside_it(tmp_path, monkeypatch):
    """As `python rw2.py` would: the file's folder is on sys.path (a trial user's `import helper` beside the reward
    file failed with "No module named 'helper'" while the same code worked as `rw2:fn`)."""
    import sys

    from gradprobe.rewards import get_reward

    folder = tmp_path / "rewards_here"
    folder.mkdir()
    (folder / "helper_beside_xq.py").write_text("K = 3\n")
    (folder / "rw2.py").write_text("import helper_beside_xq\n\n\ndef fn(prompts, completions, **kwargs):\n"
                                   "    return [float(len(c) % helper_beside_xq.K) for c in completions]\n")
    monkeypatch.chdir(tmp_path)  # not the file's folder
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert callable(get_reward(f"{folder / 'rw2.py'}:fn"))
    assert str(folder.resolve()) in sys.path
