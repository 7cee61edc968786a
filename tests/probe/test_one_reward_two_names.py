"""One reward under two names in one probe is refused, naming both and the fix: ``--rewards
outcome,gradprobe.rewards.outcome:outcome`` (an import path to the built-in's own function) probed ``outcome`` twice
and reported it as two rewards, as did a caller's ``extra_rewards`` entry holding a registered reward's function, and
a registered sequence reward beside a plug-in naming the function it wraps (with the same scale). A plug-in function
under two plug-in names was already refused (tests/rewards/test_plugin_alias_names.py); another scale of one
function stays another reward.
"""

from __future__ import annotations

import sys

import pytest

import gradprobe.probe.run as probe_run
from gradprobe.cli import main
from gradprobe.probe.run import ProbeConfig, rewards_to_probe
from gradprobe.rewards import REWARDS, parse_rewards, register_reward, sequence_reward
from gradprobe.rewards.outcome import outcome

from plugin_helpers import plugin_module, plugin_records_restored

BUILT_IN = "gradprobe.rewards.outcome:outcome"
FIX = "two names would probe it as two rewards"
SOURCE = '''
def brevity(prompts, completions, **kwargs):
    return [-float(len(c)) for c in completions]

native = lambda batch, ctx: None
'''


@pytest.fixture
def restored(tmp_path, monkeypatch):
    """The registry and plug-in records restored after (the import path registers itself)."""
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path


@pytest.mark.parametrize("first, second", [("outcome", BUILT_IN), (BUILT_IN, "outcome")])
def test_outcome_and_an_import_path_to_its_own_function_are_refused(restored, first, second):
    with pytest.raises(ValueError) as e:
        parse_rewards(f"{first},{second}")
    assert str(e.value) == (f"rewards {first!r} and {second!r} are one reward (gradprobe.rewards.outcome.outcome): "
                            f"give it once, under one name (e.g. {first!r} alone); {FIX}")
    with pytest.raises(ValueError, match="^rewards .* are one reward"):
        rewards_to_probe(ProbeConfig.from_dict({"rewards": [first, second]}), None)
    assert [name for name, _ in parse_rewards(f"{BUILT_IN},outcome_batch")] == [BUILT_IN, "outcome_batch"]


def test_gradprobe_probe_refuses_it_before_loading_a_model(restored, monkeypatch, capsys):
    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(probe_run, "load_policy", loaded)
    assert main(["probe", "--model", "tiny", "--rewards", f"outcome,mc_value,{BUILT_IN}", "--prompts", "2",
                 "--group", "2", "--out", str(restored / "p"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: rewards 'outcome' and {BUILT_IN!r} are one reward (gradprobe.rewards.outcome."
        f"outcome): give it once, under one name (e.g. 'outcome' alone); {FIX}\n")
    assert not (restored / "p").exists()


def test_a_callers_reward_that_is_a_registered_one_is_refused_beside_it():
    config = ProbeConfig.from_dict({"rewards": ["outcome"]})
    with pytest.raises(ValueError) as e:
        rewards_to_probe(config, {"my_outcome": outcome})
    assert str(e.value) == ("rewards 'outcome' and 'my_outcome' are one reward (gradprobe.rewards.outcome.outcome): "
                            f"give it once, under one name (e.g. 'outcome' alone); {FIX}")
    with pytest.raises(ValueError, match="^rewards 'a' and 'b' are one reward"):
        rewards_to_probe(ProbeConfig.from_dict({"rewards": []}), {"a": outcome, "b": outcome})


def test_a_registered_reward_and_a_plugin_of_its_function_are_refused(tmp_path, monkeypatch):
    with plugin_module(tmp_path, monkeypatch, "zz_two_names_rw", SOURCE) as get:
        plugin = get("brevity")  # imports the module
        mod = sys.modules["zz_two_names_rw"]
        try:
            register_reward("zz_brevity")(sequence_reward(mod.brevity))
            register_reward("zz_brevity_raw")(sequence_reward(mod.brevity, scale="none"))
            register_reward("zz_native")(mod.native)
            with pytest.raises(ValueError, match=r"^rewards 'zz_brevity' and 'zz_two_names_rw:brevity' are one "
                                                 r"reward \(zz_two_names_rw\.brevity\): give it once"):
                parse_rewards("zz_brevity,zz_two_names_rw:brevity")
            with pytest.raises(ValueError, match=r"^rewards 'zz_native' and 'zz_two_names_rw:native' are one "
                                                 r"reward \(zz_two_names_rw\.<lambda> \(a lambda at line 5 of "):
                parse_rewards("zz_native,zz_two_names_rw:native")  # the plug-in's check of it is it
            assert plugin is REWARDS["zz_two_names_rw:brevity"]
            assert [n for n, _ in parse_rewards("zz_brevity_raw,zz_two_names_rw:brevity")] == [  # another scale:
                "zz_brevity_raw", "zz_two_names_rw:brevity"]  # another reward
        finally:
            for name in ("zz_brevity", "zz_brevity_raw", "zz_native"):
                REWARDS.pop(name, None)


def test_a_trainer_reward_and_an_import_path_to_it_are_refused_in_the_callbacks_probe(tmp_path, monkeypatch):
    from gradprobe.integrations.trl_tokens import counting

    with plugin_module(tmp_path, monkeypatch, "zz_trainer_rw", SOURCE) as get:
        get("brevity")  # imports the module
        fn = sys.modules["zz_trainer_rw"].brevity
        counted = counting(sequence_reward(fn, name="brevity"), fn)  # as GradprobeCallback wraps a trainer's reward
        with pytest.raises(ValueError, match=r"^rewards 'zz_trainer_rw:brevity' and 'brevity' are one reward "
                                             r"\(zz_trainer_rw\.brevity\): give it once"):
            rewards_to_probe(ProbeConfig.from_dict({"rewards": ["zz_trainer_rw:brevity"]}), {"brevity": counted})
        other = counting(sequence_reward(fn, name="brevity", scale="none"), fn)  # another scale: another reward
        assert [n for n, _ in rewards_to_probe(ProbeConfig.from_dict({"rewards": ["zz_trainer_rw:brevity"]}),
                                               {"brevity": other})] == ["zz_trainer_rw:brevity", "brevity"]
