"""A run whose reward gives no completion a reward (None/NaN for every one: nothing trains) is not a trained result:
it stops with ``stop_reason`` ``"no_valid_reward"`` after NO_VALID_REWARD_UPDATES updates (or when its budget runs out
first), ``gradprobe train`` exits 2 with one line naming the reward and the fix, and a study counts it failed and
leaves its arm out of ``runs.csv`` and the ranking. A reward missing on some updates only trains as before."""

from __future__ import annotations

import csv
import json

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.training.errors import NonFiniteRunError, NoValidRewardError
from gradprobe.training.update import NO_VALID_REWARD_UPDATES

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan, train_tiny
from helpers_untrained import untrained_stop_message
from study_helpers import toy_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

PLUGIN = '''
import math

CALLS = []


def nan_reward(prompts, completions, **kwargs):
    return [math.nan] * len(completions)


def nan_on_first_two(prompts, completions, **kwargs):
    CALLS.append(1)
    return [math.nan if len(CALLS) <= 2 else float(len(c) % 3) for c in completions]


def nan_after_first(prompts, completions, **kwargs):
    CALLS.append(1)
    return [math.nan if len(CALLS) > 1 else float(len(c) % 3) for c in completions]
'''


def _reward(tmp_path, fn: str) -> str:
    path = tmp_path / "plugin_rewards.py"
    path.write_text(PLUGIN)
    return f"{path}:{fn}"


def _updates(out) -> list[dict]:
    return [x for x in metric_lines(out) if not x.get("eval")]


def _message(reward: str, out, update: int, why: str) -> str:
    return untrained_stop_message(
        reward, out, update, why=why, reason="no_valid_reward", kept="reward_valid 0 on every update",
        did="returned None, NaN or +-inf for every completion (or marked none valid) of {which}: every advantage was 0 "
            "and nothing was trained, so",
        fix="fix the reward function (it must return a finite number for the completions it scores)")


def test_a_reward_nan_for_every_completion_stops_the_run_early_with_no_valid_reward(tmp_path):
    reward = _reward(tmp_path, "nan_reward")
    out = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="got no reward"), pytest.raises(NoValidRewardError) as err:
        train_tiny(out, reward=reward, budget={"updates": 10})
    assert NO_VALID_REWARD_UPDATES == 3 and isinstance(err.value, NonFiniteRunError) and err.value.update == 3
    why = "3 updates without any reward stop a run"
    assert str(err.value) == _message(reward, out, 3, why)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["stop_reason"], summary["updates"], summary["failed_update"],
            summary["error"]) == (False, "no_valid_reward", 3, 3, str(err.value))
    assert [(x["update"], x["reward_valid"], x["reward_missing"]) for x in _updates(out)] == [
        (1, 0, 8), (2, 0, 8), (3, 0, 8)]


def test_a_budget_shorter_than_the_early_stop_still_fails_the_run(tmp_path):
    reward = _reward(tmp_path, "nan_reward")
    out = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="got no reward"), pytest.raises(NoValidRewardError) as err:
        train_tiny(out, reward=reward, budget={"updates": 1})
    assert str(err.value) == _message(reward, out, 1, "its budget is spent")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["stop_reason"], summary["updates"]) == (False, "no_valid_reward", 1)


def test_gradprobe_train_exits_2_with_one_line_naming_the_reward_and_the_fix(tmp_path, capsys):
    reward = _reward(tmp_path, "nan_reward")
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(reward=reward, budget={"updates": 10}))
    out = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="got no reward"):
        code = cli_main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    line = f"gradprobe train: error: {_message(reward, out, 3, '3 updates without any reward stop a run')}\n"
    assert err.endswith(line) and "stop: budget" not in err
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "no_valid_reward"


@pytest.mark.parametrize("fn, valid", [("nan_on_first_two", [0, 0, 8, 8]), ("nan_after_first", [8, 0, 0, 0])])
def test_a_reward_missing_on_some_updates_only_trains_to_the_budget(tmp_path, fn, valid):
    out = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="got no reward"):
        summary = train_tiny(out, reward=_reward(tmp_path, fn), budget={"updates": 4})
    assert (summary["completed"], summary["stop_reason"], summary["updates"]) == (True, "budget", 4)
    assert [x["reward_valid"] for x in _updates(out)] == valid


def test_a_study_counts_the_run_failed_and_does_not_rank_its_arm(tmp_path, capsys):
    reward = _reward(tmp_path, "nan_reward")
    arms = f'[arms.grpo]\nreward = "outcome"\n[arms.nanreward]\nreward = "{reward}"\n'
    plan = tmp_path / "plan.toml"
    plan.write_text(toy_plan("nan", seeds=(0,), generated_tokens=300, arms=arms))
    out = tmp_path / "study"
    with pytest.warns(RuntimeWarning):
        code = cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", "--no-probe"])
    printed = capsys.readouterr().out
    assert code == 1
    ranking = printed.split("\nrank ")[1].split("\n\n")[0]
    assert "grpo " in ranking and "nanreward" not in ranking
    assert "1 failed" in printed and "FAILED nanreward seed 0" in printed and "no_valid_reward" in printed
    runs = {r["arm"]: r for r in json.loads((out / "study.json").read_text())["runs"]}
    assert runs["grpo"]["status"] == "done" and runs["nanreward"]["status"] == "failed"
    assert runs["nanreward"]["failed_update"] == 3 and "returned None, NaN or +-inf" in runs["nanreward"]["error"]
    folder = out / runs["nanreward"]["dir"]
    assert json.loads((folder / "summary.json").read_text())["stop_reason"] == "no_valid_reward"
    with open(out / "runs.csv") as f:
        assert {r["arm"] for r in csv.DictReader(f)} == {"grpo"}
    analysis = json.loads((out / "analysis.json").read_text())
    assert "nanreward" not in analysis["arms"] and "grpo" in analysis["arms"]
    assert analysis["excluded_runs"] == [{"arm": "nanreward", "seed": 0, "status": "failed",
                                          "error": runs["nanreward"]["error"]}]
