"""A training run warns when a reward is too large for float64 group statistics (those groups do not train); a run in
which no update trained because of it stops (``stop_reason`` ``"reward_overflow"``: ``gradprobe train`` exits 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.cli import main

REPO_PLAN = "plans/tiny.toml"


def test_train_warns_on_rewards_too_large_for_group_statistics(tmp_path, monkeypatch, capsys):
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "huge_reward.py").write_text(
        "def huge(completions, **kwargs):\n    return [(-1e300 if i % 2 else 0.0) for i, _ in enumerate(completions)]\n")
    plan = (repo / REPO_PLAN).read_text() + '\n[arms.huge]\nreward = "huge_reward.py:huge"\n'
    (tmp_path / "plan.toml").write_text(plan)
    monkeypatch.chdir(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"update 1: reward 'huge_reward.py:huge': in \d+ of \d+ group\(s\) the "
                                            r"rewards differ but are too large for float64 group statistics"):
        code = main(["train", "--plan", "plan.toml", "--arm", "huge", "--updates", "1", "--out", "run",
                     "--no-progress"])
    # every group overflowed and the budget of one update is spent: nothing trained, the run fails
    err = capsys.readouterr().err
    assert code == 2 and ("gradprobe train: error: update 1: reward 'huge_reward.py:huge' of arm 'huge' gave rewards "
                          "too large for float64 group statistics (|reward| up to 1e+300)") in err
    assert "the run stopped (its budget is spent)" in err and "rescale the reward 'huge_reward.py:huge'" in err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["stop_reason"] == "reward_overflow"
    stats = next(json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
                 if "reward_stats" in json.loads(x))["reward_stats"]
    assert stats["nonfinite_groups"] == stats["groups"] > 0  # every group: one reward 0, one -1e300
    assert stats["zero_variance_groups"] == 0
