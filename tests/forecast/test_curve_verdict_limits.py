"""Where a reference curve cannot carry a verdict (a trial user's findings F5a, F5b, F8): a curve on which grpo does
not learn (all zero, constant), a budget whose effective updates lie beyond EXTRAPOLATION_LIMIT (2x) times the curve's
last eval, and the shipped default curve read for another model or task than its own. Each gives ``no verdict at
BUDGET: WHY``; the default job's budget (55.8 grpo updates of a curve evaluated to update 57) keeps its verdict."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from forecast_helpers import probe_result

from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.budget_forecast import EXTRAPOLATION_LIMIT
from gradprobe.forecast.curves import default_curve_path, load_reference_curve

C_OUT, C_HYB = 4_480, 15_029  # tokens per update of outcome and hybrid_0.5 in the default job (16x8 batch)
TINY_TASK = "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"  # the shipped curve's task, as probed
UPDATES = [0, 2, 5, 10, 14, 20, 29, 42, 57]  # the trial's CSVs: the shipped curve's eval updates
NO_LEARN = "grpo does not learn on this curve"


def _probe(task=TINY_TASK, model="tiny", tokens=None, **kw) -> dict:
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "hybrid": 2.0 * o}, tokens or {"outcome": C_OUT, "hybrid": C_HYB},
                        signal={"outcome": o ** 2, "hybrid": 4.0 * o ** 2}, task=task, model=model, **kw)


def _csv(tmp_path, values) -> str:
    path = tmp_path / "curve.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in zip(UPDATES, values)))
    return str(path)


@pytest.mark.parametrize("value", [0, 0.7])
def test_a_curve_grpo_does_not_learn_on_gives_no_verdict(tmp_path, value):
    """F5a: an all-zero and a constant 0.7 curve printed 'no detectable difference ... +0.0 [+0.0, +0.0]'."""
    curve = load_reference_curve(_csv(tmp_path, [value] * len(UPDATES)))
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300)
    pts = 100.0 * value
    why = (f"{NO_LEARN} (fitted rise A - R0 +0.0 points, its evals {pts:.1f} -> {pts:.1f} points, within 1 point), "
           "so no difference of updates can show on it: give the curve of a grpo run that learns this task (a task "
           "the policy can learn, or more updates)")
    assert res.no_verdict_reason == why
    hyb = res.table.set_index("arm").loc["hybrid"]
    assert hyb["verdict"] == f"no verdict at 250k: {why}" and hyb["no_verdict_reason"] == why
    assert hyb["forecast_gain"] == pytest.approx(0.0, abs=1e-6)  # the numbers stay (the printout marks them)


def test_a_curve_that_learns_keeps_its_verdict(tmp_path):
    """The same updates with a rise of 10 points: grpo learns, the verdict stands."""
    curve = load_reference_curve(_csv(tmp_path, [0.60, 0.62, 0.64, 0.66, 0.67, 0.68, 0.69, 0.70, 0.70]))
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300)
    assert res.no_verdict_reason is None
    assert res.table.set_index("arm").loc["hybrid", "verdict"].startswith("not worth its tokens at 250k: -")


def test_the_default_job_keeps_its_verdict_and_a_far_budget_gives_none():
    """F5b: the shipped curve at 1G tokens (221,631 grpo updates; its last eval is update 57) printed a verdict."""
    curve = load_reference_curve("default")
    assert curve.shipped and curve.max_update == 57.0 and EXTRAPOLATION_LIMIT == 2.0
    res = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300)  # 250k: 55.8 grpo updates
    assert res.no_verdict_reason is None
    assert res.table.set_index("arm").loc["hybrid", "verdict"].startswith("not worth its tokens at 250k: -3.3")
    far = forecast_rewards(curve, _probe(), method="cost_only", n_draws=300, budget_tokens=1e9)
    why = ("grpo's 223,214 effective updates lie 3,916x past the curve's last eval (update 57), beyond the 2x over "
           "which a sigmoid's extrapolation is validated: give a budget of at most 510.7k tokens, or a curve evaluated "
           "further")
    assert far.no_verdict_reason == why
    assert far.table.set_index("arm").loc["hybrid", "verdict"] == f"no verdict at 1G: {why}"
    # the limit itself: 114 grpo updates (510,720 tokens) keep the verdict, 600k tokens (134 updates) do not
    assert forecast_rewards(curve, _probe(), method="cost_only", n_draws=300,
                            budget_tokens=510_720).no_verdict_reason is None
    assert "past the curve's last eval" in forecast_rewards(curve, _probe(), method="cost_only", n_draws=300,
                                                            budget_tokens=600_000).no_verdict_reason


def test_an_arm_read_beyond_the_limit_gives_no_verdict_alone():
    """grpo within the limit (55.8 updates), an arm whose cheaper update buys 250 effective updates: that row only."""
    curve = load_reference_curve("default")
    res = forecast_rewards(curve, _probe(tokens={"outcome": C_OUT, "hybrid": 1_000}), method="cost_only", n_draws=300)
    assert res.no_verdict_reason is None
    why = ("its 250 effective updates lie 4.39x past the curve's last eval (update 57), beyond the 2x over which a "
           "sigmoid's extrapolation is validated: give a budget of at most 114k tokens, or a curve evaluated further")
    hyb = res.table.set_index("arm").loc["hybrid"]
    assert hyb["no_verdict_reason"] == why and hyb["verdict"] == f"no verdict at 250k: {why}"


def test_the_shipped_curve_for_another_task_or_model_gives_no_verdict():
    """F8: the shipped default curve read for a jsonl task said 'grpo reaches 79.6 points there' with a verdict."""
    curve = load_reference_curve("default")
    res = forecast_rewards(curve, _probe(task="jsonl:/tmp/good.jsonl"), method="cost_only", n_draws=300)
    why = ("the shipped default curve is grpo's on task chain_sum:max_digits=1,max_terms=4,min_digits=1,min_terms=3 "
           "(the probe ran on jsonl:/tmp/good.jsonl), so it says nothing about this task: give your own grpo run's "
           "curve with --reference-curve (its metrics.jsonl, TRL trainer_state.json or output_dir, a CSV of "
           "update,accuracy, a study folder or a saved curve)")
    assert res.no_verdict_reason == why
    other = forecast_rewards(curve, _probe(model="smollm2"), method="cost_only", n_draws=300)
    assert other.no_verdict_reason.startswith("the shipped default curve is grpo's on model 'tiny' (the probe's is "
                                              "'smollm2'), so it says nothing about this model: give")


def test_a_curve_the_user_gives_keeps_its_notes_not_the_shipped_rule(tmp_path):
    """The same curve copied out of the package is the user's: another task is a note, the verdict stays."""
    mine = tmp_path / "mine.json"
    shutil.copy(default_curve_path(), mine)
    curve = load_reference_curve(str(mine))
    assert not curve.shipped
    res = forecast_rewards(curve, _probe(task="jsonl:/tmp/good.jsonl"), method="cost_only", n_draws=300)
    assert res.no_verdict_reason is None
    assert any(n.startswith("the reference curve was trained on task chain_sum:") for n in res.notes)
    assert pd.isna(res.table.set_index("arm").loc["hybrid", "no_verdict_reason"])
