"""Refusals and notes of the curve readers that named the wrong fix: a points-scale initial accuracy for a curve
in fractions, too few evals with ``initial_accuracy`` given, a TRL log whose evals are all null, ``metrics.jsonl``
nulls written by schedule (``sampled_at = "ends"``) and TRL null evals that leave too few evals (the refusal led with
"evaluate more often"), a fraction for a TRL curve in points (the file was not named), a JSON null shown in Python
form, a ``metrics.jsonl`` eval line without ``update``, and ``initial_accuracy`` for a ``metrics.jsonl`` that has its
own update-0 eval."""

from __future__ import annotations

import json

import pytest

from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve

EVALS = {10: 0.7, 20: 0.75, 30: 0.79, 40: 0.81, 50: 0.83, 60: 0.84}


def _state(path, evals=EVALS):
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": v} for s, v in evals.items()]}))
    return path


def _metrics(path, rows):
    path.write_text("".join(json.dumps({"eval": True, **r}) + "\n" for r in rows))
    return path


def _refusal(*args, **kw) -> str:
    with pytest.raises(CurveError) as info:
        load_reference_curve(*args, **kw)
    return str(info.value)


def test_points_for_a_curve_in_fractions_are_refused_with_the_fraction_to_give(tmp_path):
    path = _state(tmp_path / "trainer_state.json")
    assert _refusal(path, initial_accuracy=60) == (
        f"initial_accuracy (--initial-accuracy) 60 is on another scale than the evals of {path}, which are "
        "fractions (range 0.7-0.84): give it as a fraction as the file's evals are (0.6, if 60 is points), or leave "
        "it out (R0 is then the fit's extrapolation)")
    assert load_reference_curve(path, initial_accuracy=0.6).params["R0"] == pytest.approx(60.0)


def test_too_few_evals_with_initial_accuracy_given_do_not_ask_for_it(tmp_path):
    path = _state(tmp_path / "trainer_state.json", {10: 0.7, 20: 0.75})
    assert _refusal(path, initial_accuracy=0.6) == (
        f"the curve has evals at 2 distinct update count(s) > 0 in TRL trainer_state.json of 1 run(s) ({path}) and the "
        "fit has 3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct update counts > 0; evaluate "
        "more often: in TRL's TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a smaller eval_steps")
    assert _refusal(path).endswith("eval_on_start=True for the eval at step 0 (or give the initial policy's accuracy: "
                                   "initial_accuracy=, gradprobe probe --initial-accuracy)")  # not given: still named


@pytest.mark.parametrize("initial", [None, 0.6])
def test_a_trl_log_whose_evals_are_all_null_is_told_to_rerun_them(tmp_path, initial):
    path = _state(tmp_path / "trainer_state.json", {10: None, 20: None, 30: None, 40: None})
    assert _refusal(path, initial_accuracy=initial) == (
        f"no eval of 'eval_accuracy' with a value in TRL trainer_state.json of 1 run(s) ({path}): its evals of "
        "'eval_accuracy' hold no value (null), so more frequent evals would not help; rerun those evals, or name "
        f"another eval key (--reference-curve-metric KEY); 4 eval(s) of {path} skipped for a null 'eval_accuracy' "
        "(step(s) 10, 20, 30, 40): a null is no eval (a failed or skipped eval, logged without a value)")


def test_sampled_accuracy_null_by_schedule_names_the_greedy_metric_as_the_fix(tmp_path):
    rows = [{"update": u, "greedy_accuracy": g, "sampled_accuracy": s} for u, g, s in
            [(0, 0.6, 0.5), (10, 0.7, None), (20, 0.75, None), (30, 0.79, None), (40, 0.81, None), (50, 0.83, 0.8)]]
    path = _metrics(tmp_path / "metrics.jsonl", rows)
    assert _refusal(path, metric="sampled_accuracy") == (
        f"the curve has evals at 1 distinct update count(s) > 0 in metrics.jsonl of 1 run(s) ({path}) and the fit has "
        "3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct update counts > 0; evals at 4 other "
        "update count(s) are in the file(s) "
        "but hold no value for 'sampled_accuracy' (null), so evaluating more often would not help: read "
        "greedy_accuracy instead (--reference-curve-metric greedy_accuracy; metric='greedy_accuracy'), or the curve "
        "of a run with sampled accuracy at every eval ([eval] sampled_at = \"all\"); 4 eval line(s) skipped for a "
        f"null 'sampled_accuracy' ({path}:2, {path}:3, {path}:4, {path}:5): `gradprobe train` writes null for an "
        "accuracy it did not measure at that eval (e.g. sampled_accuracy between the first and the last eval under "
        "[eval] sampled_at = \"ends\"; a failed eval may log one too)")
    assert "a failed or skipped eval" not in _refusal(path, metric="sampled_accuracy")
    assert len(load_reference_curve(path).points) == 6  # the fix named: greedy_accuracy is read


@pytest.mark.parametrize("initial", [None, 0.6])
def test_trl_null_evals_that_leave_too_few_lead_with_rerunning_them_not_with_eval_steps(tmp_path, initial):
    """Values at steps 10 and 20, nulls at 30-60: with their values the evals would pin the fit, so the refusal
    leads with the null evals (given an initial accuracy or not), not with TRL's eval_steps / eval_on_start."""
    path = _state(tmp_path / "trainer_state.json", {10: 0.7, 20: 0.75, 30: None, 40: None, 50: None, 60: None})
    free = "3 free parameters (A, n_mid, B)" if initial else "4 free parameters (A, n_mid, B, R0)"
    assert _refusal(path, initial_accuracy=initial) == (
        f"the curve has evals at 2 distinct update count(s) > 0 in TRL trainer_state.json of 1 run(s) ({path}) and "
        f"the fit has {free}: it needs evals at at least "
        f"{free[0]} distinct update counts > 0" + ("" if initial else ", or an eval at update 0 (R0)") + "; evals at "
        "4 other update count(s) are in the file(s) but hold no value for 'eval_accuracy' (null), so evaluating more "
        "often would not help: rerun those evals, or name another eval key (--reference-curve-metric KEY); 4 eval(s) "
        f"of {path} skipped for a null 'eval_accuracy' (step(s) 30, 40, 50, 60): a null is no eval (a failed or "
        "skipped eval, logged without a value)")
    few = _state(path, {10: 0.7, 20: 0.75, 30: None})  # even with its value, 3 update counts > 0 are too few
    assert "; evaluate more often: in TRL's TrainingArguments" in _refusal(few)
    assert "would not help" not in _refusal(few)


def test_a_fraction_for_a_trl_curve_in_points_names_the_file(tmp_path):
    path = _state(tmp_path / "trainer_state.json", {s: 100 * v for s, v in EVALS.items()})
    assert _refusal(path, initial_accuracy=0.6) == (
        f"initial_accuracy (--initial-accuracy) 0.6 is on another scale than the evals of {path}, which are points "
        "(range 70-84): as points it would be an R0 of 0.6; give it in points (60), or state the scale with "
        "accuracy_scale='points' (--reference-curve-scale points) if it is points as it stands")


def test_a_json_null_is_shown_as_null(tmp_path):
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": None, "eval_accuracy": 0.8}]}))
    assert _refusal(state) == (f"{state}: log_history[0] field 'step' = null is not a number; fix or delete that "
                               "eval")
    path = _metrics(tmp_path / "metrics.jsonl", [{"update": 0, "greedy_accuracy": 0.6},
                                                 {"update": None, "greedy_accuracy": 0.7}])
    assert _refusal(path) == f"{path}:2: field 'update' = null is not a number; fix or delete that eval"


def test_a_metrics_eval_line_without_update_names_the_fix(tmp_path):
    path = _metrics(tmp_path / "metrics.jsonl", [{"update": 0, "greedy_accuracy": 0.6}, {"greedy_accuracy": 0.7}])
    assert _refusal(path) == (f"{path}:2: an eval line without 'update', so that eval cannot be placed on the "
                              "curve's update axis; add the update it was evaluated at (\"update\": N) or delete "
                              "that line")


def test_initial_accuracy_for_a_metrics_jsonl_says_whether_it_has_its_own_update_0_eval(tmp_path):
    rows = [{"update": u, "greedy_accuracy": v} for u, v in [(0, 0.6), *EVALS.items()]]
    run = _metrics(tmp_path / "metrics.jsonl", rows)
    source = ReferenceCurve.from_metrics(run).source
    assert _refusal(run, initial_accuracy=0.6) == (
        f"initial_accuracy (--initial-accuracy) applies to a TRL trainer_state.json without a step-0 eval only, and "
        f"--reference-curve {str(run)!r} (read as {source}) has its own eval at update 0, which is its R0: leave the "
        "option out")
    no_start = _metrics(tmp_path / "no0.jsonl", rows[1:])
    assert _refusal(no_start, initial_accuracy=0.6) == (
        f"initial_accuracy (--initial-accuracy) gives the step-0 eval a TRL trainer_state.json lacks, but "
        f"--reference-curve {str(no_start)!r} is read as {ReferenceCurve.from_metrics(no_start).source}: put the "
        "initial policy's eval at update 0 in that source, or leave it out")
