"""One failing plug-in reward no longer costs every arm of a study its probe entry: a tester's study with arms grpo
and one whose plug-in reward raises printed ``probe failed: RewardFunctionError: reward 'myrewards.py:raises'
raised ...`` and no arm got a probe. Now that reward is left out of ``probe/probe.json`` with its error and fix
(``left_out``, a warning), the other arms' entries are kept, and the study says which reward failed, why, and how to
fix it (the console, ``study.json``'s probe record, the summary; exit status 1: something failed)."""

from __future__ import annotations

import json

import pytest

from gradprobe.rewards.base import RewardFunctionError
from gradprobe.study.orchestrator import probe_state
from gradprobe.study.runner import run_study
from gradprobe.study.worker import isolated_probe, left_out_fix

from helpers_training import tiny_plan
from plugin_helpers import plugin_records_restored

RAISES = "def raises(prompts, completions, **kwargs):\n    raise ZeroDivisionError('boom')\n"
ERROR = "RewardFunctionError: reward 'myrewards.py:raises' raised ZeroDivisionError: boom"
SMALL_PROBE = {"prompts": 2, "group": 4, "heldout_prompts": 2, "heldout_group": 4}
ARMS = {"grpo": {"reward": "outcome"}, "bad": {"reward": "myrewards.py:raises"}}


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """``tmp_path`` as the working directory, holding ``myrewards.py`` (its reward ``raises`` raises) and the tiny
    plan with arms grpo and bad; the reward registry, sys.path and the imported module restored afterwards."""
    (tmp_path / "myrewards.py").write_text(RAISES)
    (tmp_path / "plan.toml").write_text(tiny_plan(arms=ARMS, probe=SMALL_PROBE, eval={"sampled": False}))
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path


def _failed(error: Exception, reward: str) -> Exception:
    """``error`` as the probe raises a reward's own failure: its ``reward`` attribute names the reward
    (:func:`gradprobe.probe.stages.reward_outputs`)."""
    error.reward = reward
    return error


def _fake_probe(failing: dict, calls: list):
    """A stand-in for run_probe: raises ``failing[reward]`` for the first failing reward of the config (plug-ins are
    called first), else returns one entry per reward; every config's rewards are appended to ``calls``."""
    def probe(config):
        calls.append(list(config.rewards))
        for name in config.rewards:
            if name in failing:
                raise failing[name]
        return {"rewards": [{"name": n} for n in config.rewards]}
    return probe


def test_a_failing_reward_is_left_out_and_the_rest_probed_again():
    calls = []
    failing = {"a.py:f": _failed(RewardFunctionError("reward 'a.py:f' raised KeyError: 'x'"), "a.py:f"),
               "b.py:g": _failed(ValueError("reward 'b.py:g' produced non-finite advantages on rows it marked valid"),
                                 "b.py:g")}
    result, left_out = isolated_probe({"rewards": ("outcome", "a.py:f", "b.py:g")},
                                      {"grpo": "outcome", "x": "a.py:f", "y": "b.py:g", "z": "a.py:f"},
                                      _fake_probe(failing, calls))
    assert calls == [["outcome", "a.py:f", "b.py:g"], ["outcome", "b.py:g"], ["outcome"]]
    assert result == {"rewards": [{"name": "outcome"}]}
    assert left_out == [
        {"reward": "a.py:f", "arms": ["x", "z"], "error": "RewardFunctionError: reward 'a.py:f' raised KeyError: 'x'"},
        {"reward": "b.py:g", "arms": ["y"],
         "error": "ValueError: reward 'b.py:g' produced non-finite advantages on rows it marked valid"}]


def test_errors_that_name_no_reward_and_a_probe_left_with_no_reward():
    oom = RuntimeError("out of memory")
    with pytest.raises(RuntimeError) as e:  # not a reward's failure: raised as it was, nothing retried
        isolated_probe({"rewards": ("outcome", "a.py:f")}, {}, _fake_probe({"a.py:f": oom}, []))
    assert e.value is oom
    unnamed = RewardFunctionError("reward 'a.py:f' raised KeyError: 'x'")  # no reward attribute: not told apart
    with pytest.raises(RewardFunctionError) as e:
        isolated_probe({"rewards": ("outcome", "a.py:f")}, {}, _fake_probe({"a.py:f": unnamed}, []))
    assert e.value is unnamed
    one = _failed(RewardFunctionError("reward 'a.py:f' raised KeyError: 'x'"), "a.py:f")
    with pytest.raises(RewardFunctionError) as e:  # a probe of that reward alone fails as before
        isolated_probe({"rewards": ("a.py:f",)}, {"x": "a.py:f"}, _fake_probe({"a.py:f": one}, []))
    assert e.value is one
    both = {"a.py:f": one, "b.py:g": _failed(RewardFunctionError("reward 'b.py:g' raised OSError: gone"), "b.py:g")}
    with pytest.raises(RewardFunctionError) as e:
        isolated_probe({"rewards": ("a.py:f", "b.py:g")}, {"x": "a.py:f", "y": "b.py:g"}, _fake_probe(both, []))
    assert str(e.value) == ("every reward of the probe failed on its batch: 'a.py:f' (arm x): RewardFunctionError: "
                            "reward 'a.py:f' raised KeyError: 'x'; 'b.py:g' (arm y): RewardFunctionError: reward "
                            "'b.py:g' raised OSError: gone")
    # a guided probe (not required) whose every reward failed is left out, not raised: the others still run
    assert isolated_probe({"rewards": ("a.py:f",)}, {"x": "a.py:f"}, _fake_probe({"a.py:f": one}, []),
                          required=False) == (None, [{"reward": "a.py:f", "arms": ["x"],
                                                      "error": f"RewardFunctionError: {one}"}])


def test_the_probe_state_names_the_arm_the_error_and_the_fix(tmp_path):
    record = {"status": "done", "left_out": [{"reward": "myrewards.py:raises", "arms": ["bad"], "error": ERROR,
                                              "probe": "", "fix": left_out_fix(tmp_path)}]}
    fix = (f"fix the reward, then run the plan as a new study under a new --out (--reuse-runs {tmp_path} copies "
           "this study's finished runs that the fix leaves unchanged)")
    assert probe_state(record) == (f"failed for arm bad: {ERROR}; that reward is left out of probe/probe.json, and "
                                   f"the other arms' entries are kept; {fix}")
    assert probe_state(record, earlier=True) == (
        f"failed for arm bad: {ERROR}; that reward is left out of probe/probe.json (written by an earlier "
        f"invocation, kept), and the other arms' entries are kept; {fix}")
    assert probe_state({"status": "done"}) == "done"
    assert probe_state({"status": "failed", "error": "OSError: disk full"}) == "failed: OSError: disk full"


def test_the_study_says_which_reward_failed_and_a_rerun_says_it_again(plugin_dir):
    said = []
    res = run_study(plugin_dir / "plan.toml", plugin_dir / "study", executor="inline", analyze=False,
                    say=said.append)
    fix = left_out_fix(plugin_dir / "study")
    state = (f"failed for arm bad: {ERROR}; that reward is left out of probe/probe.json, and the other arms' entries "
             f"are kept; {fix}")
    assert res.probe == state and not res.ok
    assert f"probe {state}" in said
    assert res.summary().splitlines()[0].startswith(f"study {plugin_dir / 'study'}: 1 runs complete (0 were already), "
                                                    f"1 failed; probe: {state}; wall time ")
    record = json.loads((plugin_dir / "study" / "study.json").read_text())["probe"]
    assert record["status"] == "done" and record["left_out"] == [
        {"reward": "myrewards.py:raises", "arms": ["bad"], "error": ERROR, "probe": "", "fix": fix}]
    probe = json.loads((plugin_dir / "study" / "probe" / "probe.json").read_text())
    assert [r["name"] for r in probe["rewards"]] == ["outcome"] and probe["config"]["rewards"] == ["outcome"]
    assert probe["left_out"] == record["left_out"]
    assert probe["warnings"][-1] == (f"reward 'myrewards.py:raises' (arm bad) is left out of this probe: it failed "
                                     f"on the probe batch ({ERROR}); {fix}")
    # the same command again: the probe is not redone, and its missing entry is still said
    again = run_study(plugin_dir / "plan.toml", plugin_dir / "study", executor="inline", analyze=False,
                      say=said.append)
    assert again.probe == state.replace("probe/probe.json,", "probe/probe.json (written by an earlier invocation, "
                                        "kept),") and not again.ok


def _study_without(tmp_path, reward: str, arms: list):
    """A copy of the shipped study ``data/study_tiny`` whose probe left ``reward`` (of ``arms``) out, as
    :func:`gradprobe.study.worker._record_left_out` writes it."""
    import shutil
    from pathlib import Path

    study = tmp_path / "study"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "study_tiny", study)
    path = study / "probe" / "probe.json"
    probe = json.loads(path.read_text())
    probe["rewards"] = [r for r in probe["rewards"] if r["name"] != reward]
    probe["config"]["rewards"] = [r for r in probe["config"]["rewards"] if r != reward]
    probe["left_out"] = [{"reward": reward, "arms": arms, "error": "RewardFunctionError: boom", "probe": "",
                          "fix": left_out_fix(study)}]
    path.write_text(json.dumps(probe))
    return study


def test_the_study_forecast_keeps_the_other_arms_and_says_why_one_has_no_probe_entry(tmp_path):
    from gradprobe.forecast import study_forecasts

    full = study_forecasts("data/study_tiny").set_index("arm")
    study = _study_without(tmp_path, "mc_value", ["mc_value"])
    t = study_forecasts(study)
    assert list(t["arm"]) == list(full.index)  # the analysis's order, the arm without an entry in its place
    t = t.set_index("arm")
    assert t.loc["mc_value", "method"] == "no_probe_entry" and t.loc["mc_value", "note"].startswith(
        f"no probe entry: its reward 'mc_value' failed on the probe batch and was left out of {study}/probe/probe.json "
        "(RewardFunctionError: boom); fix the reward")
    assert t.loc["mc_value", "realized_gain"] == pytest.approx(full.loc["mc_value", "realized_gain"], abs=1e-12)
    for arm in ("mc_advantage", "hybrid_0.5"):
        for col in ("forecast_probe", "forecast_cost_only", "rho"):
            assert t.loc[arm, col] == pytest.approx(full.loc[arm, col], abs=1e-9)


def test_a_study_whose_probe_left_out_grpos_reward_is_refused(tmp_path):
    from gradprobe.forecast import study_forecasts

    study = _study_without(tmp_path, "outcome", ["grpo", "grpo_2xlr"])
    with pytest.raises(ValueError, match="arm grpo, which every gain is measured against, has no probe entry"):
        study_forecasts(study)
