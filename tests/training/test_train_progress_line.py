"""The per-update progress line names what it prints: the batch's mean outcome score, whatever reward is trained."""

from __future__ import annotations

import re

import pytest

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

PLUGIN = '''
def length_reward(prompts, completions, **kwargs):
    return [float(len(c) % 5) for c in completions]
'''


def test_progress_line_prints_the_outcome_score_not_the_trained_reward(tmp_path, capsys):
    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import run_training

    (tmp_path / "plugin_rewards.py").write_text(PLUGIN)
    reward = f"{tmp_path / 'plugin_rewards.py'}:length_reward"
    run = parse_plan(tiny_plan(arm="lengthy", reward=reward, budget={"updates": 2})).arm("lengthy")
    run_training(run, tmp_path / "run", progress=True)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if re.search(r"\] update \d+:", x)]
    updates = [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]
    assert len(lines) == len(updates) == 2
    for line, m in zip(lines, updates):
        assert line.startswith(f"[train lengthy s0] update {m['update']}: outcome score {m['reward_mean']:.3f} "
                               f"tokens {m['generated_tokens']:,} loss {m['loss']:.4g}")
        # the outcome score is the task's verifier (a fraction), not the plug-in's 0-4 values
        assert 0.0 <= m["reward_mean"] <= 1.0
