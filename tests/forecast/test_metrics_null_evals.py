"""A ``metrics.jsonl`` eval line whose metric is JSON ``null`` (``gradprobe train`` writes one for an accuracy it
did not measure, e.g. ``sampled_accuracy`` between the ends under ``[eval] sampled_at = "ends"``, and a failed eval
may log one) is skipped and named by ``PATH:LINE`` in the curve's notes, as the TRL reader names a null eval by its
step: in the notes the printed forecast carries and in a refusal. Before, such a line was dropped without a word."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forecast_helpers import EVALS as UPDATES, eval_fraction, metrics_log, probe_result, trl_state
from gradprobe.forecast import forecast_rewards, format_forecast, load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve

NULL_WHY = ("`gradprobe train` writes null for an accuracy it did not measure at that eval (e.g. sampled_accuracy "
            "between the first and the last eval under [eval] sampled_at = \"ends\"; a failed eval may log one too)")
GREEDY_FIX = "to use them, rerun those evals, or give the curve of a run that measured 'greedy_accuracy' at every eval"
SAMPLED_FIX = ("to use them, read greedy_accuracy instead (--reference-curve-metric greedy_accuracy; "
               "metric='greedy_accuracy'), or the curve of a run with sampled accuracy at every eval ([eval] "
               "sampled_at = \"all\")")


def test_null_eval_lines_are_skipped_and_named_in_the_notes(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl", null_at=(10, 40))
    curve = load_reference_curve(path)
    assert sorted(curve.points["update"]) == [0, 2, 5, 20, 80, 160]
    assert curve.skipped_notes == [
        f"2 eval line(s) skipped for a null 'greedy_accuracy' ({path}:8, {path}:12): {NULL_WHY}; {GREEDY_FIX}"]


def test_nan_and_null_lines_are_named_apart_in_one_note_and_a_nan_alone_reads_as_before(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl", null_at=(10,), nan_at=(20, 40))
    curve = ReferenceCurve.from_metrics(path)
    assert sorted(curve.points["update"]) == [0, 2, 5, 80, 160]
    assert curve.skipped_notes == [
        f"2 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:10, {path}:12); 1 eval line(s) skipped for a "
        f"null 'greedy_accuracy' ({path}:8): a NaN is no eval (a diverged or failed eval); {NULL_WHY}; {GREEDY_FIX}"]
    metrics_log(path, nan_at=(20,))
    assert ReferenceCurve.from_metrics(path).skipped_notes == [
        f"1 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:10): a NaN is no eval (a diverged or failed "
        "eval); rerun those evals to use them"]


def test_null_lines_of_several_runs_are_counted_past_the_five_shown(tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    a = metrics_log(tmp_path / "a" / "metrics.jsonl", null_at=(2, 5, 10))
    b = metrics_log(tmp_path / "b" / "metrics.jsonl", null_at=(5, 10, 20))
    curve = ReferenceCurve.from_metrics([a, b])
    assert len(curve.points) == 2 * len(UPDATES) - 6
    assert curve.skipped_notes == [
        f"6 eval line(s) skipped for a null 'greedy_accuracy' ({a}:4, {a}:6, {a}:8, {b}:6, {b}:8 and 1 more): "
        f"{NULL_WHY}; {GREEDY_FIX}"]


TOO_FEW = ("the curve has evals at {} distinct update count(s) > 0 in metrics.jsonl of 1 run(s) ({}) and the fit has "
           "3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct update counts > 0; ")


def _null_lead(k, metric, fix):
    return (f"evals at {k} other update count(s) are in the file(s) but hold no value for {metric!r} (null), so "
            f"evaluating more often would not help: {fix}")


def test_sampled_accuracy_measured_only_at_the_ends_is_refused_leading_with_the_null_lines_fix(tmp_path):
    """``sampled_at = "ends"``: a sampled accuracy at updates 0 and 160 only. The evals exist, so the refusal for
    too few evals leads with the null lines' fix (greedy_accuracy, or sampled_at = "all"), not with "evaluate more
    often", and names the lines after it without repeating the fix."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": eval_fraction(u),
                                        "sampled_accuracy": eval_fraction(u) - 0.1 if u in (0, 160) else None}) + "\n"
                            for u in UPDATES))
    with pytest.raises(CurveError) as info:
        load_reference_curve(path, metric="sampled_accuracy")
    assert str(info.value) == (
        TOO_FEW.format(1, path) + _null_lead(6, "sampled_accuracy", SAMPLED_FIX.removeprefix("to use them, "))
        + f"; 6 eval line(s) skipped for a null 'sampled_accuracy' ({path}:2, {path}:3, {path}:4, {path}:5, "
        f"{path}:6 and 1 more): {NULL_WHY}")
    assert "every_tokens" not in str(info.value)


def test_null_lines_that_leave_too_few_evals_of_another_metric_lead_with_rerunning_them(tmp_path):
    """Nulls of greedy_accuracy at 3 of 4 update counts > 0 (a NaN at another one keeps its own fix in the note);
    nulls at too few update counts to matter keep "evaluate more often" first and the note's fix."""
    path = metrics_log(tmp_path / "metrics.jsonl", updates=(0, 5, 10, 20, 40), null_at=(5, 10, 20), nan_at=(40,))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(path)
    assert str(info.value) == (
        TOO_FEW.format(0, path) + _null_lead(3, "greedy_accuracy", GREEDY_FIX.removeprefix("to use them, "))
        + f"; 1 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:10); 3 eval line(s) skipped for a null "
        f"'greedy_accuracy' ({path}:4, {path}:6, {path}:8): a NaN is no eval (a diverged or failed eval); "
        f"{NULL_WHY}; rerun the NaN evals to use them")
    metrics_log(path, updates=(0, 5, 10), null_at=(10,))  # with a value at 10, 2 update counts > 0 are still too few
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(path)
    assert str(info.value) == (
        TOO_FEW.format(1, path) + "evaluate more often (e.g. `[eval] every_tokens` smaller than the budget); 1 eval "
        f"line(s) skipped for a null 'greedy_accuracy' ({path}:6): {NULL_WHY}; {GREEDY_FIX}")


def test_a_null_eval_line_without_an_update_is_refused_and_lines_without_the_metric_are_passed_over(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl")
    with path.open("a") as f:
        f.write(json.dumps({"eval": True, "sampled_accuracy": 0.5}) + "\n")  # not an eval of greedy_accuracy
    curve = ReferenceCurve.from_metrics(path)
    assert sorted(curve.points["update"]) == list(UPDATES) and curve.skipped_notes == []
    with path.open("a") as f:
        f.write(json.dumps({"eval": True, "greedy_accuracy": None}) + "\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(path)
    assert str(info.value) == (f"{path}:{2 * len(UPDATES) + 2}: an eval line without 'update', so that eval cannot be "
                               "placed on the curve's update axis; add the update it was evaluated at (\"update\": N) "
                               "or delete that line")


@pytest.mark.parametrize("log", ["metrics.jsonl", "trainer_state.json"])
def test_the_null_note_reaches_the_printed_forecast(tmp_path, log):
    """A null eval at update 40 of either eval log: its note (line 12 of the metrics.jsonl, step 40 of the TRL
    log) is printed under the forecast."""
    if log == "metrics.jsonl":
        path = metrics_log(tmp_path / log, null_at=(40,))
        note = f"note: 1 eval line(s) skipped for a null 'greedy_accuracy' ({path}:12): {NULL_WHY}"
    else:
        path = trl_state(tmp_path / log, null_at=(40,))
        note = (f"note: 1 eval(s) of {path} skipped for a null 'eval_accuracy' (step(s) 40): a null is no eval (a "
                "failed or skipped eval, logged without a value)")
    curve = load_reference_curve(path)
    rng = np.random.default_rng(0)
    fr = forecast_rewards(curve, probe_result({"outcome": rng.normal(1.0, 0.3, 16)}, {"outcome": 4000.0}))
    printed = format_forecast({**fr.to_dict(), "available": True})
    assert note in printed
