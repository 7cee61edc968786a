"""A column of the study's ranking where fewer than two arms are read ranks nothing: ``analysis.json``
``rankings[AXIS]`` is [] there, ``not_ranked[AXIS]`` says why each other arm is not ranked, and the console says
"not ranked (only ARM read; the others: why)" instead of listing the one arm as rank 1."""

from __future__ import annotations

import csv
import json

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import analyze, format_rankings, ranking

from helpers_rollout import one_thread
from plugin_helpers import plugin_records_restored
from study_helpers import make_study, toy_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _one_arm_read_in_time(tmp_path):
    """make_study with one seed, grpo_2xlr's final eval at 12 s (not 10 s): at the matched 10 s only grpo is read
    (mc_value's and grpo_2xlr's evals around 10 s are further apart than promised: gap_exceeded)."""
    root = make_study(tmp_path / "s", seeds=1)
    with open(root / "runs.csv") as f:
        rows = list(csv.reader(f))
    col = rows[0].index("device_seconds")
    (row,) = [r for r in rows if r[:3] == ["grpo_2xlr", "0", "10"]]
    assert row[col] == "10.0"
    row[col] = "12.0"
    with open(root / "runs.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return root


OTHERS = "mc_value: read on 0 of 1 seeds (gap_exceeded 1); grpo_2xlr: read on 0 of 1 seeds (gap_exceeded 1)"


def test_a_column_with_one_arm_read_is_not_ranked(tmp_path):
    result = analyze(_one_arm_read_in_time(tmp_path), write=False, figures=False)
    assert result["arms"]["grpo"]["device_seconds"]["seeds"] == 1  # read, but alone
    assert result["rankings"]["device_seconds"] == [] and result["rankings"]["generated_tokens"] == [
        "grpo_2xlr", "grpo", "mc_value"]
    assert result["not_ranked"]["device_seconds"] == {"mc_value": "read on 0 of 1 seeds (gap_exceeded 1)",
                                                      "grpo_2xlr": "read on 0 of 1 seeds (gap_exceeded 1)"}
    text = format_rankings(result)
    rank_1 = text.splitlines()[3]
    assert rank_1.startswith("1     mc_value") and rank_1.rstrip().endswith("not ranked (only grpo read)")
    assert f"at matched time (10.0 s): not ranked (only grpo read; the others: {OTHERS})" in text.splitlines()


def test_an_analysis_json_written_before_keeps_its_one_arm_column_out_of_the_ranking(tmp_path):
    result = analyze(_one_arm_read_in_time(tmp_path), write=False, figures=False)
    result["rankings"]["device_seconds"] = ["grpo"]  # as an older gradprobe wrote it
    del result["not_ranked"]
    assert f"at matched time (10.0 s): not ranked (only grpo read; the others: {OTHERS})" in format_rankings(result)


def test_ranking_needs_two_arms_read_on_every_seed():
    arms = {"a": {"seeds": 2, "x": {"accuracy": 50.0, "seeds": 2}},
            "b": {"seeds": 2, "x": {"accuracy": 60.0, "seeds": 1}}}
    assert ranking(arms, "x") == []
    arms["b"]["x"]["seeds"] = 2
    assert ranking(arms, "x") == ["b", "a"]


def test_a_study_whose_other_arm_overflowed_ranks_nothing(tmp_path, capsys, monkeypatch):
    """The tester's study, shrunk: grpo and an arm whose reward overflows every group; that run stops with
    reward_overflow (failed), and nothing is ranked (grpo, plain outcome GRPO, trains no group of the random toy
    model: both arms are named with their reason)."""
    with plugin_records_restored(monkeypatch, tmp_path):
        (tmp_path / "huge_reward.py").write_text(  # G = 4 in order: rewards 0, s, 0, s in every group
            "def small(completions, **kwargs):\n    return [float(i % 2) for i, _ in enumerate(completions)]\n\n\n"
            "def huge(completions, **kwargs):\n    return [1e200 * (i % 2) for i, _ in enumerate(completions)]\n")
        spec = tmp_path / "huge_reward.py"  # grpo is plain outcome GRPO (the reference: training.plan_checks)
        arms = f'[arms.grpo]\nreward = "outcome"\n[arms.huge]\nreward = "{spec}:huge"\n'
        plan = tmp_path / "plan.toml"
        plan.write_text(toy_plan("huge", seeds=(0,), generated_tokens=300, arms=arms))
        out = tmp_path / "study"
        with pytest.warns(RuntimeWarning, match="too large for float64"):
            code = cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", "--no-probe"])
    printed = capsys.readouterr().out
    assert code == 1 and "FAILED huge seed 0" in printed and "reward_overflow" in printed
    runs = {r["arm"]: r for r in json.loads((out / "study.json").read_text())["runs"]}
    assert runs["huge"]["status"] == "failed" and runs["huge"]["failed_update"] == 3
    assert "gave rewards too large for float64 group statistics (|reward| up to 1e+200)" in runs["huge"]["error"]
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["rankings"] == {axis: [] for axis in analysis["rankings"]} and analysis["rankings"]
    why = "no run in runs.csv (seed 0: its status in study.json is 'failed')"
    assert all(n["huge"] == why for n in analysis["not_ranked"].values())
    assert "grpo never trained, not ranked (every update of the run had every advantage 0)" in printed
