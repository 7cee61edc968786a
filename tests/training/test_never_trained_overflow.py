"""A reward too large for float64 group statistics trains nothing (every group whose rewards differ overflows: advantage
0): a run in which no update trained any group and the rewards overflowed stops with ``stop_reason``
``"reward_overflow"`` (RewardOverflowError, a NoValidRewardError) after NO_VALID_REWARD_UPDATES updates, or when its
budget runs out first, naming the reward, the largest |reward| and the fix; a run in which some update trained goes
on. The check reads ``metrics.jsonl`` (:mod:`gradprobe.training.untrained`)."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from gradprobe.ledger import Ledger
from gradprobe.training import update as update_module
from gradprobe.training.errors import NonFiniteRunError, NoValidRewardError, RewardOverflowError
from gradprobe.training.specs import BudgetSpec
from gradprobe.training.untrained import never_trained, untrained_history

from helpers_rollout import one_thread
from helpers_training import metric_lines, train_tiny
from helpers_untrained import untrained_stop_message
from plugin_helpers import plugin_records_restored

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

# G = 4 completions per group, in order: rewards 0, 1e200, 0, 1e200 in every group, so every group overflows
PLUGIN = "def huge(completions, **kwargs):\n    return [1e200 * (i % 2) for i, _ in enumerate(completions)]\n"


def _message(reward: str, out, update: int, why: str, big: str = "1e+200", arm: str = "grpo") -> str:
    return untrained_stop_message(
        reward, out, update, why=why, reason="reward_overflow", arm=arm,
        did=f"gave rewards too large for float64 group statistics (|reward| up to {big}): in {{which}} every group "
            "whose rewards differ overflowed (advantage 0) and no group trained, so nothing was trained and",
        kept="reward_stats: nonfinite_groups, overflow_max_abs_reward",
        fix=f"rescale the reward {reward!r} (keep |reward| far below 1e150, e.g. in [0, 1])")


def test_a_reward_that_overflows_every_group_stops_the_run_with_reward_overflow(tmp_path, monkeypatch):
    with plugin_records_restored(monkeypatch, tmp_path):
        (tmp_path / "huge_reward.py").write_text(PLUGIN)
        reward = str(tmp_path / "huge_reward.py") + ":huge"
        out = tmp_path / "run"
        with pytest.warns(RuntimeWarning, match="too large for float64 group statistics"), \
                pytest.raises(RewardOverflowError) as err:
            train_tiny(out, reward=reward, budget={"updates": 10}, eval={"sampled": False})
    assert isinstance(err.value, NoValidRewardError) and isinstance(err.value, NonFiniteRunError)
    assert err.value.update == 3
    assert str(err.value) == _message(reward, out, 3, "3 updates that train no group, with rewards that overflow, "
                                                      "stop a run")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["stop_reason"], summary["updates"], summary["failed_update"],
            summary["error"]) == (False, "reward_overflow", 3, 3, str(err.value))
    updates = [x for x in metric_lines(out) if not x.get("eval")]
    assert [(x["update"], x["reward_stats"]["nonfinite_groups"], x["reward_stats"]["groups"],
             x["advantage_abs_mean"], x["grad_norm"]) for x in updates] == [(u, 2, 2, 0.0, 0.0) for u in (1, 2, 3)]
    assert never_trained(out / "metrics.jsonl") == {
        "cause": "overflowed", "updates": 3, "max_abs_reward": 1e200, "grad_norm_max": 0.0,
        "why": "the rewards of every group whose rewards differ overflowed float64 group statistics "
               "(|reward| up to 1e+200)"}


# ----------------------------------------------------------------------------- the check on fabricated metrics

def _line(update: int, *, adv: float = 0.0, nonfinite: int = 0, big: float = 0.0, **more) -> dict:
    """An update line of metrics.jsonl with the fields the check reads (2 groups)."""
    return {"update": update, "advantage_abs_mean": adv, "reward_valid": 8, "truncation_rate": 0.0, "grad_norm": 0.0,
            "reward_stats": {"groups": 2, "zero_variance_groups": 2 - nonfinite, "nonfinite_groups": nonfinite,
                             "overflow_max_abs_reward": big}, **more}


def _session(tmp_path, lines: list[dict], budget: dict):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = SimpleNamespace(budget=BudgetSpec(**budget), reward="big.py:r", arm="big")
    return SimpleNamespace(out=tmp_path, run=run, state=SimpleNamespace(update=lines[-1]["update"], ledger=Ledger()))


@pytest.fixture
def finished(monkeypatch):
    """The summaries finish() would write: (stop_reason, extra) per call."""
    calls = []
    monkeypatch.setattr(update_module, "finish", lambda s, reason, extra: calls.append((reason, extra)))
    return calls


def test_a_budget_of_one_update_stops_at_its_end_when_that_update_overflowed(tmp_path, finished):
    s = _session(tmp_path, [_line(1, nonfinite=2, big=3e160)], {"updates": 1})
    with pytest.raises(RewardOverflowError) as err:
        update_module.check_untrained_stop(s, _line(1, nonfinite=2, big=3e160))
    assert err.value.update == 1 and "(|reward| up to 3e+160): in update 1 every group" in str(err.value)
    assert "the run stopped (its budget is spent)" in str(err.value)
    assert finished == [("reward_overflow", {"failed_update": 1, "error": str(err.value)})]


@pytest.mark.parametrize("lines, why", [
    ([_line(1, adv=0.5), _line(2, nonfinite=2, big=1e200), _line(3, nonfinite=2, big=1e200)], "update 1 trained"),
    ([_line(1), _line(2), _line(3)], "every group flat, none overflowed"),
    ([{"update": 1, "reward_valid": 8}, _line(2, nonfinite=1, big=1e200), _line(3, nonfinite=1, big=1e200)],
     "update 1 written by an older gradprobe: it does not say"),
    ([_line(1, nonfinite=1, big=1e200), _line(2, nonfinite=1, big=1e200)], "two updates, budget not spent")])
def test_a_run_that_trained_or_did_not_overflow_is_not_stopped(tmp_path, finished, lines, why):
    s = _session(tmp_path, lines, {"updates": 10})
    update_module.check_untrained_stop(s, lines[-1])
    assert finished == [], why


def test_the_stopping_update_reads_metrics_jsonl_once(tmp_path, finished, monkeypatch):
    """Update 3 gave no completion a reward (reward_valid 0, so advantage 0) after two updates whose rewards overflowed
    every group: both causes are checked (update 1 had rewards, so no "no_valid_reward"; no update trained and some
    overflowed, so "reward_overflow") from one read of metrics.jsonl, not one per cause."""
    lines = [_line(1, nonfinite=2, big=1e200), _line(2, nonfinite=2, big=1e200), _line(3, reward_valid=0)]
    s = _session(tmp_path, lines, {"updates": 10})
    reads, real_open = [], builtins.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file) == tmp_path / "metrics.jsonl":
            reads.append(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    with pytest.raises(RewardOverflowError) as err:
        update_module.check_untrained_stop(s, lines[-1])
    assert len(reads) == 1
    assert err.value.update == 3 and str(err.value) == _message(
        "big.py:r", tmp_path, 3, "3 updates that train no group, with rewards that overflow, stop a run", arm="big")
    assert finished == [("reward_overflow", {"failed_update": 3, "error": str(err.value)})]


def test_the_history_is_read_up_to_the_first_trained_update(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(_line(1, adv=0.3)) + "\n" + "not json\n")  # never reached: the run trained
    assert untrained_history(path) is None and never_trained(path) is None
    path.write_text(json.dumps({"update": 0, "eval": True, "greedy_accuracy": 0.5}) + "\n\n"
                    + json.dumps(_line(1, nonfinite=1, big=2e155)) + "\n" + json.dumps(_line(2)) + "\n")
    assert [x["update"] for x in untrained_history(path)] == [1, 2]
    assert never_trained(path)["cause"] == "overflowed" and never_trained(path)["max_abs_reward"] == 2e155
    assert untrained_history(tmp_path / "missing.jsonl") is None
