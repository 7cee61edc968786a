"""A TRL trainer state's eval entries that lose a curve point are said, never dropped without a word: an eval whose
metric is JSON ``null`` (a failed or skipped eval) is skipped and named by its step in the curve's notes, which the
printed forecast carries (test_metrics_null_evals.py); an entry holding the metric but no ``step`` is refused naming
``log_history[i]``; entries without the metric (training lines) stay passed over. ``initial_accuracy=`` is checked,
and a file whose own step-0 eval is read instead of it is named in a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forecast_helpers import EVALS, TRUE, eval_fraction, metrics_log, trl_state
from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve

STUDY = Path(__file__).resolve().parents[2] / "data" / "study_tiny"
NULL_WHY = "a null is no eval (a failed or skipped eval, logged without a value)"
NAN_WHY = "a NaN is no eval (a diverged or failed eval)"


@pytest.mark.parametrize("kind, why", [("null", NULL_WHY), ("NaN", NAN_WHY)])
def test_null_or_nan_evals_are_skipped_and_named_by_step_in_the_notes(tmp_path, kind, why):
    path = trl_state(tmp_path / "trainer_state.json", **{f"{kind.lower()}_at": (10, 40)})
    curve = load_reference_curve(path)
    assert sorted(curve.points["update"]) == [0, 2, 5, 20, 80, 160]
    assert curve.skipped_notes == [
        f"2 eval(s) of {path} skipped for a {kind} 'eval_accuracy' (step(s) 10, 40): {why}; rerun those evals to "
        "use them"]
    assert curve.skipped_notes[0] in curve.notes


def test_null_and_nan_evals_are_named_apart_in_one_note(tmp_path):
    path = trl_state(tmp_path / "trainer_state.json", null_at=(10,), nan_at=(20, 40))
    curve = load_reference_curve(path)
    assert sorted(curve.points["update"]) == [0, 2, 5, 80, 160]
    assert curve.skipped_notes == [
        f"2 eval(s) of {path} skipped for a NaN 'eval_accuracy' (step(s) 20, 40); 1 eval(s) of {path} skipped for a "
        "null 'eval_accuracy' (step(s) 10): a NaN is no eval (a diverged or failed eval); a null is no eval (a "
        "failed or skipped eval, logged without a value); rerun those evals to use them"]


def test_null_evals_are_named_in_a_refusal_for_too_few_evals_after_their_fix_said_once(tmp_path):
    path = trl_state(tmp_path / "trainer_state.json", steps=(0, 10, 20, 30), null_at=(20, 30))
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    assert str(info.value).endswith(
        "hold no value for 'eval_accuracy' (null), so evaluating more often would not help: rerun those evals, or "
        f"name another eval key (--reference-curve-metric KEY); 2 eval(s) of {path} skipped for a null "
        "'eval_accuracy' (step(s) 20, 30): a null is no eval (a failed or skipped eval, logged without a value)")


@pytest.mark.parametrize("kind, why, fix", [
    ("null", NULL_WHY, "rerun those evals, or name another eval key (--reference-curve-metric KEY)"),
    ("NaN", NAN_WHY, "rerun those evals (if the run diverged there, look at why first), or name another eval key "
                     "(--reference-curve-metric KEY)")])
def test_all_null_or_nan_evals_are_refused_as_no_value_not_as_no_metric(tmp_path, kind, why, fix):
    """The evals exist: their values are missing, not the evals; the refusal says which (null or NaN) and their fix,
    once. A key that is NaN at every eval is often not the held-out accuracy, so naming another key is a fix of
    all-NaN evals as of all-null ones (it was lost for NaN when the NaN fix began to lead)."""
    path = trl_state(tmp_path / "trainer_state.json", steps=(0, 10), **{f"{kind.lower()}_at": (0, 10)})
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(path)
    assert str(info.value) == (
        f"no eval of 'eval_accuracy' with a value in TRL trainer_state.json of 1 run(s) ({path}): its evals of "
        f"'eval_accuracy' hold no value ({kind}), so more frequent evals would not help; {fix}; 2 eval(s) of {path} "
        f"skipped for a {kind} 'eval_accuracy' (step(s) 0, 10): {why}")


@pytest.mark.parametrize("value", [0.7, None])
def test_an_entry_with_the_metric_but_no_step_is_refused_naming_it(tmp_path, value):
    """Entries without the metric (training lines, a step-less summary, an eval of another key) stay passed over;
    one holding it (a value or null) without a step cannot be placed on the curve."""
    passed_over = [{"train_runtime": 12.0, "total_flos": 0.0}, {"step": 170, "eval_loss": 0.4}]
    path = trl_state(tmp_path / "trainer_state.json", extra=[*passed_over, {"eval_accuracy": value, "epoch": 3.0}])
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    assert str(info.value) == (
        f"{path}: log_history[18] holds 'eval_accuracy' but no 'step', so that eval cannot be placed on the curve's "
        "update axis; add the optimizer step it was evaluated at (\"step\": N) or delete that entry")
    trl_state(path, extra=passed_over)  # the entry deleted: read, without a note on the lines passed over
    curve = load_reference_curve(path)
    assert sorted(curve.points["update"]) == list(EVALS) and curve.skipped_notes == []


@pytest.mark.parametrize("value, shown", [(True, "= True is not a number"), ("0.6", "= '0.6' is not a number"),
                                          (float("nan"), "(--initial-accuracy) nan is not a finite number"),
                                          (float("inf"), "(--initial-accuracy) inf is not a finite number")])
def test_an_initial_accuracy_that_is_no_finite_number_is_refused(tmp_path, value, shown):
    """A string or a bool only Python can pass (the message names the keyword); a non-finite value the command
    line can too (it names both)."""
    path = trl_state(tmp_path / "trainer_state.json", steps=EVALS[1:])
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(path, initial_accuracy=value)
    assert str(info.value) == (f"initial_accuracy {shown}: give the initial policy's accuracy on the curve's eval "
                               "(same scale as the metric), or leave it out")


def test_a_files_own_step_0_eval_is_kept_over_initial_accuracy_and_noted(tmp_path):
    own = trl_state(tmp_path / "a.json")
    lacking = trl_state(tmp_path / "b.json", steps=EVALS[1:])
    curve = ReferenceCurve.from_trl_state([own, lacking], initial_accuracy=0.5)
    at_zero = curve.points[curve.points["update"] == 0]
    assert sorted(at_zero["accuracy"].tolist()) == pytest.approx([50.0, TRUE["R0"]])  # b's given, a's own
    assert curve.skipped_notes == [
        f"initial_accuracy (--initial-accuracy) 0.5 skipped for 1 file(s) with their own eval at step 0, which is "
        f"read instead: {own} ({eval_fraction(0):g})"]
    alone = ReferenceCurve.from_trl_state(lacking, initial_accuracy=0.5)  # no file has one: used, no note
    assert alone.params["R0"] == pytest.approx(50.0) and alone.skipped_notes == []


def test_a_fraction_given_for_a_curve_in_points_is_refused_under_auto(tmp_path):
    """Read as points, initial_accuracy 0.6 would make R0 0.6 points under evals of 60-85 (a seed's first eval is
    not judged by the mixed-scale check); a stated scale, a value in points, or a curve in fractions is read."""
    path = tmp_path / "trainer_state.json"
    points = [{"step": s, "eval_accuracy": 100 * eval_fraction(s)} for s in EVALS[1:]]
    path.write_text(json.dumps({"log_history": points}))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(path, initial_accuracy=0.6)
    assert str(info.value) == (
        f"initial_accuracy (--initial-accuracy) 0.6 is on another scale than the evals of {path}, which are points "
        f"(range {100 * eval_fraction(2):.4g}-{100 * eval_fraction(160):.4g}): as points it would be an R0 of 0.6; "
        "give it in points (60), or state the scale with accuracy_scale='points' (--reference-curve-scale points) "
        "if it is points as it stands")
    assert ReferenceCurve.from_trl_state(path, initial_accuracy=60).params["R0"] == pytest.approx(60.0)
    stated = ReferenceCurve.from_trl_state(path, initial_accuracy=0.6, accuracy_scale="points")
    assert stated.params["R0"] == pytest.approx(0.6)
    fractions = ReferenceCurve.from_trl_state(trl_state(tmp_path / "f.json", steps=EVALS[1:]), initial_accuracy=0.6)
    assert fractions.params["R0"] == pytest.approx(60.0)


@pytest.mark.parametrize("kind", ["state", "folder", "renamed", "csv", "metrics", "study", "saved", "default",
                                  "missing"])
def test_load_reference_curve_takes_initial_accuracy_for_a_trl_state_only(tmp_path, kind):
    """What ``trl_state_file`` (dropped) checked against the loader, now the loader's own dispatch: a TRL trainer
    state (a file, its folder, one under another name) reads ``initial_accuracy``; every other kind is read, then
    refused naming what it was read as; a missing path keeps its own refusal."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    state = trl_state(folder / "trainer_state.json", steps=EVALS[1:])
    renamed = trl_state(tmp_path / "state.json", steps=EVALS[1:])
    csv = tmp_path / "curve.csv"
    csv.write_text("update,accuracy\n" + "".join(f"{e},{eval_fraction(e)}\n" for e in EVALS))
    run = tmp_path / "run"
    run.mkdir()
    metrics_log(run / "metrics.jsonl")
    (run / "trainer_state.json").write_text(state.read_text())  # metrics.jsonl is read first
    load_reference_curve("default").save(tmp_path / "saved.json")
    spec = {"state": state, "folder": folder, "renamed": renamed, "csv": csv, "metrics": run, "study": STUDY,
            "saved": tmp_path / "saved.json", "default": "default", "missing": tmp_path / "nothing.json"}[kind]
    if kind in ("state", "folder", "renamed"):
        curve = load_reference_curve(spec, initial_accuracy=0.35)
        assert curve.source.startswith("TRL trainer_state.json") and curve.params["R0"] == pytest.approx(35.0)
        return
    with pytest.raises(CurveError) as info:
        load_reference_curve(spec, initial_accuracy=0.35)
    if kind == "missing":
        assert "does not exist (no such file or folder)" in str(info.value)
        return
    source = load_reference_curve(spec).source  # each has its own eval at update 0 (a CSV without one: below)
    assert str(info.value) == (
        f"initial_accuracy (--initial-accuracy) applies to a TRL trainer_state.json without a step-0 eval only, and "
        f"--reference-curve {str(spec)!r} (read as {source}) has its own eval at update 0, which is its R0: leave "
        "the option out")
