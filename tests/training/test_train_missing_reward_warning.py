"""A trained reward that gives some completions no reward (None/NaN): one warning per update naming the reward,
the count and what was done with them, and ``metrics.jsonl``'s ``reward_missing`` counts the trained reward's
missing values (the task's own missing scores are ``score_missing``)."""

from __future__ import annotations

import pytest

from helpers_rollout import one_thread
from helpers_training import metric_lines, train_tiny

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

PLUGIN = '''
def none_reward(prompts, completions, **kwargs):
    return [None] * len(completions)


def half_reward(prompts, completions, **kwargs):
    return [float("nan") if i % 2 else float(len(c) % 3) for i, c in enumerate(completions)]
'''


@pytest.mark.parametrize("fn, missing", [("none_reward", 8), ("half_reward", 4)])
def test_missing_plugin_rewards_warn_per_update_and_reach_metrics(tmp_path, fn, missing):
    (tmp_path / "plugin_rewards.py").write_text(PLUGIN)
    reward = f"{tmp_path / 'plugin_rewards.py'}:{fn}"
    from gradprobe.training.errors import NoValidRewardError

    with pytest.warns(RuntimeWarning) as record:
        if missing == 8:  # no completion ever rewarded: the run fails at its budget's end (no_valid_reward)
            with pytest.raises(NoValidRewardError, match="returned None, NaN or"):
                train_tiny(tmp_path / "run", reward=reward, budget={"updates": 2})
        else:
            train_tiny(tmp_path / "run", reward=reward, budget={"updates": 2})
    lines = [str(w.message) for w in record if "got no reward" in str(w.message)]
    every = " (every completion: all of its advantages are 0)" if missing == 8 else ""
    assert lines == [f"update {u}: reward {reward!r}: {missing} of 8 completions got no reward (None, NaN or +-inf, "
                     f"or masked by the reward){every}; they are masked (advantage 0, left out of their group's mean and std), "
                     "not scored 0; check the reward function" for u in (1, 2)]
    updates = [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]
    assert [(x["reward_missing"], x["reward_stats"]["missing"], x["score_missing"]) for x in updates] == [
        (missing, missing, 0)] * 2


def test_a_reward_with_every_value_warns_nothing_and_counts_zero(tmp_path):
    import warnings

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        train_tiny(tmp_path / "run", reward="outcome")
    assert not [w for w in record if "got no reward" in str(w.message)]
    (line,) = [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]
    assert line["reward_missing"] == 0 and line["score_missing"] == 0
