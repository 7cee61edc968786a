"""A trial user's curve messages (F9b/c/d): a TRL log without evals read WITH --initial-accuracy is not told to give
it; a budget that buys less than one update says so first (not "does the update column hold tokens?"); a truncated
trainer state is called truncated, with the fix of re-copying it from the TRL output_dir (not "rewrite it with
ReferenceCurve.save")."""

from __future__ import annotations

import json

import numpy as np
import pytest
from forecast_helpers import probe_result

from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.curves import CurveError, load_reference_curve

TINY_TASK = "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"
#: the trial's trl_noeval.json: training lines only, no eval
NO_EVAL = {"log_history": [{"step": s, "loss": 0.1, "learning_rate": 0.0001} for s in range(0, 60, 5)],
           "global_step": 100}
#: the trial's trl_trunc.json: a trainer state cut short mid-value
TRUNCATED = ('{"log_history": [{"step": 0, "eval_accuracy": 0.676}, {"step": 2, "eval_accuracy": 0.71}, '
             '{"step": 5, "eval_accuracy": 0.737}, {"step":')


def _probe() -> dict:
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "hybrid": 2.0 * o}, {"outcome": 4_480, "hybrid": 15_029},
                        signal={"outcome": o ** 2, "hybrid": 4.0 * o ** 2}, task=TINY_TASK)


def test_a_log_without_evals_read_with_initial_accuracy_is_not_told_to_give_it(tmp_path):
    path = tmp_path / "trl_noeval.json"
    path.write_text(json.dumps(NO_EVAL))
    with pytest.raises(CurveError) as e:
        load_reference_curve(str(path), initial_accuracy=0.6)
    assert str(e.value) == (
        f"{path}: no log_history entry has 'eval_accuracy', nor any eval metric (eval_...): the run was not "
        "evaluated, and the initial accuracy given (--initial-accuracy 0.6) is the curve's R0 alone, no curve: a "
        "curve needs evals after step 0; give GRPOTrainer an eval_dataset and evaluate more often: in TRL's "
        "TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a smaller eval_steps")
    with pytest.raises(CurveError) as e:  # without it, the advice to give it stays
        load_reference_curve(str(path))
    assert str(e.value).endswith("(or give the initial policy's accuracy: initial_accuracy=, gradprobe probe "
                                 "--initial-accuracy)")


@pytest.mark.parametrize("name", ["trl_trunc.json", "trainer_state.json"])
def test_a_truncated_trainer_state_is_called_truncated(tmp_path, name):
    path = tmp_path / name
    path.write_text(TRUNCATED)
    with pytest.raises(CurveError) as e:
        load_reference_curve(str(path))
    msg = str(e.value)
    assert "rewrite it with ReferenceCurve.save" not in msg
    assert msg.endswith("is not valid JSON (Expecting value: line 1 column 136 (char 135)): the file is truncated "
                        "(it ends mid-value: a copy cut short, or taken while it was being written); it looks like a "
                        "TRL trainer state: re-copy trainer_state.json from the TRL run's output_dir (its last "
                        "checkpoint-N/), or pass that output_dir itself to --reference-curve"), msg


def test_a_truncated_saved_curve_is_called_truncated(tmp_path):
    path = tmp_path / "curve.json"
    path.write_text('{"format": "gradprobe-reference-curve", "version": 1, "params": {"R0": 6')
    with pytest.raises(CurveError) as e:
        load_reference_curve(str(path))
    assert str(e.value).endswith("): the file is truncated (it ends mid-value: a copy cut short, or taken while it "
                                 "was being written); re-copy it, or rebuild the curve from its source and write it "
                                 "with ReferenceCurve.save")


def test_a_budget_of_less_than_one_update_says_so_first():
    """1k tokens buy grpo 0.223 of one 4,480-token update: the cause is the budget, not an update column in tokens."""
    curve = load_reference_curve("default")
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300, budget_tokens=1_000)
    assert res.no_verdict_reason == (
        "the budget buys grpo 0.223 of one update (4,480 generated tokens each), less than one update and short of "
        "the curve's first eval after update 0 (update 2), so the forecast rests on no eval: give a budget of at "
        "least 8,960 tokens")
    # 5k tokens: 1.12 updates, still before the first eval; the update column is then the other suspect
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300, budget_tokens=5_000)
    assert res.no_verdict_reason == (
        "the budget buys grpo 1.12 updates (4,480 generated tokens each), before the curve's first eval after update "
        "0 (update 2), so the forecast rests on no eval: give a budget of at least 8,960 tokens; or, if the curve's "
        "update column holds tokens or samples instead of updates, convert it to updates")
