"""``gradprobe probe`` prints, under its table, the completions masked because a reward returned None or NaN and
the groups left with no reward at all (both also recorded in probe.json), once each."""

from __future__ import annotations

import json
import math

from gradprobe.cli import main
from gradprobe.rewards import REWARDS, get_reward, sequence_reward


def _half_none(prompts, completions, **kw):  # None on odd rows, NaN on rows 0 and 4: 6 of 8 masked
    return [None if i % 2 else (math.nan if i % 4 == 0 else 1.0) for i, _ in enumerate(completions)]


def _first_group_none(prompts, completions, **kw):  # group 0 (rows 0-3) gets no reward at all
    return [None if i < 4 else float(i % 2) for i, _ in enumerate(completions)]


def test_masked_rewards_and_rewardless_groups_are_printed(tmp_path, capsys, monkeypatch):
    get_reward("outcome")  # the built-in rewards are registered before ours
    monkeypatch.setitem(REWARDS, "half_none", sequence_reward(_half_none, name="half_none"))
    monkeypatch.setitem(REWARDS, "first_group_none", sequence_reward(_first_group_none, name="first_group_none"))
    out = tmp_path / "o"
    rc = main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome,half_none,first_group_none",
               "--prompts", "2", "--group", "4", "--heldout-prompts", "2", "--heldout-group", "2",
               "--max-new-tokens", "8", "--bootstrap", "50", "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert rc == 0
    masked = ("warning: reward 'half_none': 6 of 8 completions got no reward (its value was None, NaN or +-inf); they "
              "are masked (advantage 0, left out of their group's mean and std), not scored 0")
    partly = "warning: reward 'first_group_none': 4 of 8 completions got no reward"
    dead = ("warning: reward 'first_group_none': 1 of 2 groups have no reward at all (every completion's reward is "
            "missing), so they add nothing to its estimate")
    for line in (masked, partly, dead):
        assert printed.count(line) == 1, (line, printed)
    assert "'half_none': " in printed and "groups have no reward" not in printed.split("'half_none': ", 1)[1].split("\n")[0]
    saved = json.loads((out / "probe.json").read_text())
    entry = {r["name"]: r for r in saved["rewards"]}
    assert entry["half_none"]["valid_completions"] == 2 and entry["half_none"]["reward_stats"]["missing"] == 6
    assert entry["first_group_none"]["valid_completions"] == 4
    assert any(w.startswith(dead[len("warning: "):]) for w in saved["warnings"])
