"""A reference curve the user gives of another task or model keeps its verdicts (the user chose to transfer it),
but each verdict names the difference, as the shipped curve's mismatch is named (trial finding: a curve of
another task whose asymptote sits at its bound gave "not worth its tokens" with the mismatch only in the third of
five notes); a curve whose asymptote A sits at its bound gets a note on what that means."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, load_reference_curve
from gradprobe.forecast.budget_forecast import transfer_clause
from gradprobe.forecast.section import forecast_section, format_forecast
from gradprobe.forecast.special_rows import unmeasured_probe_row

CURVE_TASK, PROBE_TASK = "chain_sum:max_digits=2,max_terms=4", "chain_sum:max_digits=1,max_terms=4"
META = {"update_prompts": 16, "update_group": 8, "lr": 1e-4, "model": "tiny"}


def _probe(task=PROBE_TASK, model="tiny"):
    rng = np.random.default_rng(0)
    return probe_result({"outcome": rng.normal(1.0, 0.3, 16), "hybrid": rng.normal(2.0, 0.3, 16)},
                        {"outcome": 4480.0, "hybrid": 15029.0}, task=task, model=model)


def _curve(**meta):
    return synthetic_curve(noise=0.3, seeds=4, metadata={**META, **meta})


def test_each_verdict_names_the_curves_other_task_and_keeps_its_numbers():
    res = forecast_rewards(_curve(task=CURVE_TASK), _probe(), n_draws=300)
    same = forecast_rewards(_curve(task=PROBE_TASK), _probe(), n_draws=300)
    t, u = res.table.set_index("arm"), same.table.set_index("arm")
    clause = (f" (read off a curve of task {CURVE_TASK}, not the probe's task {PROBE_TASK}: it assumes the curve "
              "transfers)")
    assert t.loc["hybrid", "verdict"] == u.loc["hybrid", "verdict"] + clause
    assert t.loc["hybrid", "verdict"].startswith("not worth its tokens at 250k: ")  # still a verdict
    assert t.loc["hybrid", "forecast_gain"] == u.loc["hybrid", "forecast_gain"]
    assert tuple(t.loc["hybrid", "gain_interval"]) == tuple(u.loc["hybrid", "gain_interval"])
    assert t.loc["outcome", "verdict"] == "reference (grpo)"  # grpo's own row has no verdict to qualify
    assert u.loc["hybrid", "verdict"].endswith("vs grpo")  # the same task: nothing added


def test_model_and_task_both_named():
    curve = _curve(task=CURVE_TASK, model="qwen")
    assert transfer_clause(curve, _probe()["config"]) == (
        f" (read off a curve of model 'qwen' and task {CURVE_TASK}, not the probe's model 'tiny' and task "
        f"{PROBE_TASK}: it assumes the curve transfers)")
    assert transfer_clause(curve, {"model": None, "task": None}) == ""  # nothing recorded: nothing to compare


def test_the_shipped_curve_withholds_its_verdict_instead():
    shipped = _curve(task=CURVE_TASK)
    shipped.shipped = True
    assert transfer_clause(shipped, _probe()["config"]) == ""
    row = forecast_rewards(shipped, _probe(), n_draws=300).table.set_index("arm").loc["hybrid"]
    assert row["verdict"].startswith("no verdict at 250k: the shipped default curve is grpo's on task ")


def test_the_printed_verdict_line_carries_the_clause():
    text = format_forecast(forecast_section(_probe(), curve=_curve(task=CURVE_TASK), curve_spec="mine.json",
                                            method="cost_only"))
    [line] = [x for x in text.splitlines() if x.startswith("hybrid: ")]
    assert f"vs grpo (read off a curve of task {CURVE_TASK}, not the probe's task {PROBE_TASK}: " in line


@pytest.fixture(scope="module")
def bound_curve():
    """The trial's curve: the shipped study of the hard cell, whose evals still rise at their last eval (update 61),
    so the fit's asymptote A goes to its bound, 100 points."""
    return load_reference_curve(str(Path(__file__).resolve().parents[2] / "data" / "study_tiny_hard_rewards"))


def test_an_asymptote_at_its_bound_is_said(bound_curve):
    assert bound_curve.status["A"] == "at_bound" and math.isclose(bound_curve.params["A"], 100.0)
    res = forecast_rewards(bound_curve, _probe(), n_draws=300)
    [note] = [x for x in res.notes if "asymptote A sits at its bound" in x]
    assert note.startswith("the reference curve's asymptote A sits at its bound (100 points: not identified): its "
                           "evals (up to update 61) do not reach their ceiling, so the ceiling is unknown and readings "
                           "far beyond its last eval rest on the bound, not on evals; grpo's 56 updates at this "
                           "budget lie within its evals")
    beyond = forecast_rewards(bound_curve, _probe(), budget_tokens=400_000, n_draws=300)
    assert any("grpo's 89 updates at this budget lie beyond them, read on the bound" in x for x in beyond.notes)
    assert not [x for x in forecast_rewards(_curve(), _probe(), n_draws=300).notes if "asymptote A" in x]


def test_a_verdict_rewritten_where_the_probe_cannot_compare_keeps_the_clause():
    """gradprobe probe rewrites a verdict whose rho is undefined (:func:`unmeasured_probe_row`): the clause stays."""
    clause = transfer_clause(_curve(task=CURVE_TASK), _probe()["config"])
    row = {"arm": "hybrid", "reward": "hybrid", "lr_scale": 1.0, "method": "probe", "note": "", "no_signal": False,
           "forecast_gain": -3.0, "gain_interval": (-4.0, -2.0), "verdict": "old", "no_verdict_reason": None}
    unmeasured_probe_row(row, undefined="grpo's own <g_outcome, u> interval lies below 0", equal_cost=False,
                         method="probe", budget="250k", kind="tokens", level=0.95, reference_key="outcome",
                         probe_loss_type="grpo", transfer=clause)
    assert row["verdict"] == ("not worth its tokens at 250k (cost only: grpo's own <g_outcome, u> interval lies below "
                              "0, so the probe cannot compare): -3.0 [-4.0, -2.0] vs grpo" + clause)
