"""Bad input to the reference-curve readers, each refused in one line naming the file or field and the fix:

- a saved curve's ``metadata.initial_accuracy`` record (the initial accuracy a TRL log was read with, R0 of the seeds
  it names) holding a number beyond a float (``gradprobe probe`` crashed after its compute with OverflowError), NaN,
  an out-of-range value, text, null, true or a list (loaded, and the curve silently stopped saying R0 was given);
- TRL "too few evals" refusals advising ``eval_on_start=True`` for a file that has its own step-0 eval;
- "too few evals" refusals without skipped evals that named no file (TRL and ``metrics.jsonl``);
- ``initial_accuracy=10**400`` in Python (a raw OverflowError);
- a ``metrics.jsonl`` note on NaN and null evals that said the same fix twice;
- a ``metrics.jsonl`` ``"eval": "true"`` or ``"eval": 1``, diagnosed as a run that was not evaluated.
"""

from __future__ import annotations

import json
import math

import pytest

from forecast_helpers import metrics_log, trl_state
from gradprobe.cli import main
from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curve_file import REBUILD, REBUILD_HOW
from gradprobe.forecast.curves import CurveError, ReferenceCurve

EVALS = {10: 0.7, 20: 0.75, 30: 0.79, 40: 0.81, 50: 0.83, 60: 0.84}  # a TRL log without a step-0 eval, fractions
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]
HUGE = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
TOO_FEW = ("the curve has evals at 2 distinct update count(s) > 0 in {src} and the fit has 3 free parameters (A, "
           "n_mid, B): it needs evals at at least 3 distinct update counts > 0; ")
TRL_MORE_EVALS = ("evaluate more often: in TRL's TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a "
                  "smaller eval_steps")
NAN_WHY = "a NaN is no eval (a diverged or failed eval)"
NULL_WHY = ("`gradprobe train` writes null for an accuracy it did not measure at that eval (e.g. sampled_accuracy "
            "between the first and the last eval under [eval] sampled_at = \"ends\"; a failed eval may log one too)")


def _state(path, evals=EVALS):
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": v} for s, v in evals.items()]}))
    return path


def _refusal(read, *args, **kw) -> str:
    with pytest.raises(CurveError) as info:
        read(*args, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


@pytest.fixture()
def saved(tmp_path):
    """A curve saved from a TRL log read with initial_accuracy=0.6 (R0 = 60 points, seed "0"), as its document."""
    curve = load_reference_curve(_state(tmp_path / "trainer_state.json"), initial_accuracy=0.6)
    path = curve.save(tmp_path / "curve.json")
    return json.loads(path.read_text())


def _with_record(tmp_path, doc, edit):
    """``doc`` with ``edit(record)`` applied to its ``metadata.initial_accuracy``, written as a file."""
    doc = json.loads(json.dumps(doc))
    edit(doc["metadata"])
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))  # NaN as the literal NaN, as Python's json writes it
    return path


def _bad(path, field, problem) -> str:
    return f"reference curve file {str(path)!r}: field {field} {problem}; {REBUILD}"


VALUE_RANGE = ("it must be a finite number in [0, 100] (the initial accuracy given: a fraction in [0, 1] or points in "
               "[0, 100])")


@pytest.mark.parametrize("value, shown", [(10 ** 400, HUGE), (math.nan, "nan"), (-1, "-1.0"), (1e5, "100000.0"),
                                          ("x", '"x" (text)'), (None, "null"), (True, "true"), ([], "[]")],
                         ids=["huge", "nan", "negative", "1e5", "text", "null", "true", "list"])
def test_a_saved_given_r0_value_that_is_no_finite_accuracy_is_refused_on_load(tmp_path, saved, value, shown):
    path = _with_record(tmp_path, saved, lambda m: m["initial_accuracy"].__setitem__("value", value))
    assert _refusal(ReferenceCurve.load, path) == _bad(path, "metadata.initial_accuracy.value",
                                                       f"is {shown}, {VALUE_RANGE}")


@pytest.mark.parametrize("edit, field, problem", [
    (lambda r: r.__setitem__("points", 10 ** 400), "metadata.initial_accuracy.points",
     f"is {HUGE}, it must be a finite number in [0, 100] (the initial accuracy given, in accuracy points)"),
    (lambda r: r.__setitem__("points", 55.0), "metadata.initial_accuracy.value",
     "is 0.6 but metadata.initial_accuracy.points is 55.0: the value given is those points, or a hundredth of them "
     "(a fraction)"),
    (lambda r: r.__setitem__("seeds", []), "metadata.initial_accuracy.seeds",
     "is [], it must list the seeds whose update-0 point is the value given"),
    (lambda r: r.__setitem__("seeds", ["1"]), "metadata.initial_accuracy.seeds[0]",
     'is "1", it must be a seed label of points.seed (["0"])'),
    (lambda r: r.__setitem__("seeds", [0]), "metadata.initial_accuracy.seeds[0]",
     'is 0, it must be a seed label of points.seed (["0"])'),
], ids=["points-huge", "points-not-the-value", "seeds-empty", "seeds-unknown", "seeds-number"])
def test_a_saved_given_r0_record_that_does_not_match_its_curve_is_refused_on_load(tmp_path, saved, edit, field,
                                                                                  problem):
    path = _with_record(tmp_path, saved, lambda m: edit(m["initial_accuracy"]))
    assert _refusal(ReferenceCurve.load, path) == _bad(path, field, problem)


def test_a_given_r0_record_that_is_no_object_or_lacks_a_key_is_damaged_and_a_valid_or_null_one_loads(tmp_path,
                                                                                                    saved):
    head = "reference curve file {!r} is damaged: field "
    path = _with_record(tmp_path, saved, lambda m: m.__setitem__("initial_accuracy", 5))
    assert _refusal(ReferenceCurve.load, path) == (
        head.format(str(path)) + "metadata.initial_accuracy is 5, it must be an object (value, points and seeds of the "
        f"initial accuracy given as R0; or null: none); {REBUILD_HOW}")
    path = _with_record(tmp_path, saved, lambda m: m["initial_accuracy"].pop("seeds"))
    assert _refusal(ReferenceCurve.load, path) == (
        head.format(str(path)) + f"metadata.initial_accuracy.seeds is missing; {REBUILD_HOW}")
    path = _with_record(tmp_path, saved, lambda m: None)
    curve = ReferenceCurve.load(path)
    assert curve.given_r0 == {"value": 0.6, "points": pytest.approx(60.0), "seeds": ["0"]}
    assert "6 evals + the given initial accuracy as R0" in curve.describe()
    path = _with_record(tmp_path, saved, lambda m: m.__setitem__("initial_accuracy", None))
    curve = ReferenceCurve.load(path)
    assert curve.given_r0 is None and "7 evals, 1 seed(s)" in curve.describe()


def test_a_saved_given_r0_point_edited_away_from_the_value_is_refused(tmp_path, saved):
    """The record names seed "0", whose update-0 point must be the value given (60 points)."""
    seeds, accuracy = saved["points"]["seed"], saved["points"]["accuracy"]
    assert saved["points"]["update"][0] == 0 and seeds == ["0"] * 7 and accuracy[0] == pytest.approx(60.0)
    doc = json.loads(json.dumps(saved))
    doc["metadata"]["initial_accuracy"]["points"] = doc["metadata"]["initial_accuracy"]["value"] = 50.0
    path = _with_record(tmp_path, doc, lambda m: None)
    assert _refusal(ReferenceCurve.load, path) == _bad(
        path, "metadata.initial_accuracy.seeds[0]",
        f"is \"0\", whose point at update 0 is {accuracy[0]!r}, not metadata.initial_accuracy.points 50.0 (the value "
        "given)")


def test_an_in_memory_given_r0_beyond_a_float_does_not_crash_describe():
    curve = ReferenceCurve(updates=[0, 10, 20, 40], accuracy=[60.0, 70.0, 75.0, 79.0], source="mem",
                           metadata={"initial_accuracy": {"value": 10 ** 400, "points": 60.0, "seeds": ["0"]}})
    assert curve.given_r0 is None
    assert "4 evals, 1 seed(s), 4-4 per seed" in curve.describe()


def test_probe_with_a_huge_saved_given_r0_exits_2_in_one_line_before_any_compute(tmp_path, saved, capsys,
                                                                                 monkeypatch):
    path = _with_record(tmp_path, saved, lambda m: m["initial_accuracy"].__setitem__("value", 10 ** 400))
    out = tmp_path / "runs" / "probe"
    monkeypatch.chdir(tmp_path)
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gradprobe probe: error: " + _bad(path, "metadata.initial_accuracy.value",
                                                    f"is {HUGE}, {VALUE_RANGE}")
    assert not out.exists()


def test_trl_too_few_evals_with_a_step_0_eval_do_not_ask_for_one_and_name_the_file(tmp_path):
    path = trl_state(tmp_path / "trainer_state.json", steps=(0, 2, 5))
    src = f"TRL trainer_state.json of 1 run(s) ({path})"
    assert _refusal(load_reference_curve, path) == TOO_FEW.format(src=src) + TRL_MORE_EVALS
    # without a step-0 eval, the step-0 fix is still named (with the file)
    path = trl_state(tmp_path / "trainer_state.json", steps=(2, 5, 10))
    assert _refusal(load_reference_curve, path) == (
        f"the curve has evals at 3 distinct update count(s) > 0 in {src} and the fit has 4 free parameters (A, n_mid, "
        "B, R0): it needs evals at at least 4 distinct update counts > 0, or an eval at update 0 (R0); "
        f"{TRL_MORE_EVALS}, and eval_on_start=True for the eval at step 0 (or give the initial policy's accuracy: "
        "initial_accuracy=, gradprobe probe --initial-accuracy)")


def test_metrics_too_few_evals_name_the_files(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl", updates=(0, 2, 5))
    assert _refusal(load_reference_curve, path) == (
        TOO_FEW.format(src=f"metrics.jsonl of 1 run(s) ({path})")
        + "evaluate more often (e.g. `[eval] every_tokens` smaller than the budget)")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = metrics_log(tmp_path / "a" / "metrics.jsonl", updates=(0, 2, 5))
    b = metrics_log(tmp_path / "b" / "metrics.jsonl", updates=(0, 2, 5))
    assert _refusal(ReferenceCurve.from_metrics, [a, b]).startswith(
        TOO_FEW.format(src=f"metrics.jsonl of 2 run(s) ({a}, ...)"))


@pytest.mark.parametrize("value, shown", [(10 ** 400, HUGE), (-10 ** 400, "-" + HUGE)], ids=["huge", "negative"])
def test_an_initial_accuracy_beyond_a_float_is_refused_not_an_overflow(tmp_path, value, shown):
    path = _state(tmp_path / "trainer_state.json")
    want = (f"initial_accuracy (--initial-accuracy) {shown} is not a finite number: give the initial policy's "
            "accuracy on the curve's eval (same scale as the metric), or leave it out")
    assert _refusal(load_reference_curve, path, initial_accuracy=value) == want
    assert _refusal(ReferenceCurve.from_trl_state, path, initial_accuracy=value) == want


def test_a_metrics_note_on_nan_and_null_evals_says_each_fix_once(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl", null_at=(10,), nan_at=(20, 40))
    (note,) = ReferenceCurve.from_metrics(path).skipped_notes
    assert note == (
        f"2 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:10, {path}:12); 1 eval line(s) skipped for a "
        f"null 'greedy_accuracy' ({path}:8): {NAN_WHY}; {NULL_WHY}; to use them, rerun those evals, or give the curve "
        "of a run that measured 'greedy_accuracy' at every eval")
    assert note.count("rerun") == 1 and note.count("to use them") == 1
    path = metrics_log(tmp_path / "metrics.jsonl", null_at=(10,), nan_at=(20, 40), metric="sampled_accuracy")
    (note,) = ReferenceCurve.from_metrics(path, metric="sampled_accuracy").skipped_notes
    assert note.endswith(
        f"{NAN_WHY}; {NULL_WHY}; rerun the NaN evals to use them; to use the null ones, read greedy_accuracy instead "
        "(--reference-curve-metric greedy_accuracy; metric='greedy_accuracy'), or the curve of a run with sampled "
        "accuracy at every eval ([eval] sampled_at = \"all\")")


EVAL_FIELD = "must be JSON true (an eval line, as `gradprobe train` writes it) or false"


@pytest.mark.parametrize("text, shown", [
    ('"true"', f'"true" {EVAL_FIELD} (a JSON string: write true or false unquoted)'), ("1", f"1 {EVAL_FIELD}"),
    ("null", f"null {EVAL_FIELD}")], ids=["string", "one", "null"])
def test_a_metrics_eval_field_that_is_not_a_json_bool_is_refused_naming_its_line(tmp_path, text, shown):
    path = tmp_path / "metrics.jsonl"
    lines = ['{"update": %d, "loss": 0.3}\n{"eval": %s, "update": %d, "greedy_accuracy": 0.5}\n'
             % (u, text, u) for u in (0, 2, 5, 10)]
    path.write_text("".join(lines))
    assert _refusal(load_reference_curve, path) == f"{path}:2: field 'eval' = {shown}; fix that line"
    path = metrics_log(tmp_path / "metrics.jsonl")  # "eval": false: no eval line, passed over
    with path.open("a") as f:
        f.write(json.dumps({"eval": False, "update": 200, "greedy_accuracy": 0.1}) + "\n")
    assert sorted(load_reference_curve(path).points["update"]) == [0, 2, 5, 10, 20, 40, 80, 160]
