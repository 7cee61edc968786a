"""Evals a reference curve's source lacks are skipped and said, the same way for a CSV and a TRL
trainer state: ``ReferenceCurve.skipped_notes`` names the CSV lines or the trainer state's steps, and the
forecast carries them as notes (printed as ``note:`` lines under the forecast). A trainer state with too few
evals gets TRL's fix (eval_steps, eval_strategy), and one saved under another name is read by its content."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forecast_helpers import EVALS, eval_fraction, probe_result, trl_state
from gradprobe.forecast import forecast_rewards, format_forecast, load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve

# A trainer state's NaN evals skipped and named, and all of them NaN refused: parametrized with the null ones in
# test_trl_null_and_stepless_evals.py.


def test_trainer_state_infinite_eval_is_refused_naming_its_step(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [{"step": 0, "eval_accuracy": 0.4}, {"step": 7, "eval_accuracy": Infinity}]}')
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    assert str(info.value) == (f"{path}: log_history[1] (step 7) field 'eval_accuracy' = inf is not a finite number; "
                               "fix or delete that eval")


def test_trainer_state_too_few_evals_gives_trl_advice_and_the_skipped_steps(tmp_path):
    path = trl_state(tmp_path / "trainer_state.json", steps=(0, 10, 20, 30), nan_at=(20, 30))
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    msg = str(info.value)
    assert msg.startswith(f"the curve has evals at 1 distinct update count(s) > 0 in TRL trainer_state.json of 1 "
                          f"run(s) ({path}) and the fit has 3 free parameters")
    assert "eval_steps" not in msg and "[eval] every_tokens" not in msg  # with the NaN evals' values it would fit
    assert msg.endswith("; evals at 2 other update count(s) are in the file(s) but hold no value for 'eval_accuracy' "
                        "(NaN in 2 eval(s)), so evaluating more often would not help: rerun those evals (if the run "
                        f"diverged there, look at why first); 2 eval(s) of {path} skipped for a NaN 'eval_accuracy' "
                        "(step(s) 20, 30): a NaN is no eval (a diverged or failed eval)")  # no CSV cells to fill


def test_a_gradprobe_curve_keeps_the_plan_advice(tmp_path):
    with pytest.raises(CurveError, match=r"evaluate more often \(e\.g\. `\[eval\] every_tokens` smaller"):
        ReferenceCurve(updates=[0, 5], accuracy=[30.0, 40.0])


def test_trainer_state_under_another_name_is_read_by_its_log_history(tmp_path):
    path = trl_state(tmp_path / "state.json")
    curve = load_reference_curve(path)
    assert curve.source.startswith("TRL trainer_state.json of 1 run(s)")
    assert np.allclose(sorted(curve.points["update"]), EVALS)


def test_a_json_without_log_history_says_what_would_be_read(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"history": []}))
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    assert str(info.value) == (
        f"{str(path)!r} is not a reference curve (its 'format' is not 'gradprobe.reference_curve'); write one with "
        "ReferenceCurve.save; a TRL trainer state is read as a curve (by --reference-curve, under any file name) "
        "when it holds a 'log_history' list, and this file has none")


def test_csv_skipped_lines_reach_the_forecast_notes(tmp_path):
    path = tmp_path / "curve.csv"
    rows = [f"{e},{eval_fraction(e):.6f}" for e in EVALS] + ["15,", "30,nan"]
    path.write_text("update,accuracy\n" + "\n".join(rows) + "\n")
    curve = load_reference_curve(path)
    note = (f"2 line(s) of {path} skipped for an empty or NaN cell (line 10 column 'accuracy', line 11 column "
            "'accuracy'): a line without a value is no eval")
    assert curve.skipped_notes == [note]
    rng = np.random.default_rng(0)
    probe = probe_result({"outcome": rng.normal(1.0, 0.3, 16)}, {"outcome": 4000.0})
    fr = forecast_rewards(curve, probe)
    assert note in fr.notes
    section = {**fr.to_dict(), "available": True}
    assert f"note: {note}" in format_forecast(section)
