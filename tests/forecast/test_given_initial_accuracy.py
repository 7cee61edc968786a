"""R0 from ``initial_accuracy`` / ``gradprobe probe --initial-accuracy X`` is said to be the value given, never
counted as an eval: the curve's summary counts the file's own evals, its scale note's range is theirs (the value
given named apart), a note saying R0 is the value given reaches the printed forecast (where the note on an
extrapolated R0 would be) and survives ``save``/``load``, the CHECK THE CURVE note names it as the first suspect,
and probe.json's forecast records how the curve was read (``curve_options``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forecast_helpers import probe_result
from gradprobe.cli import main
from gradprobe.forecast import forecast_rewards, format_forecast, load_reference_curve
from gradprobe.forecast.curves import ReferenceCurve
from gradprobe.forecast.section import forecast_section
from gradprobe.forecast.start_check import start_notes

EVALS = {10: 0.7, 20: 0.75, 30: 0.79, 40: 0.81, 50: 0.83, 60: 0.84}  # the tester's file: no step 0, fractions
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]


def _state(path, evals=EVALS):
    hist = [{"step": 5, "loss": 0.3}] + [{"step": s, "eval_accuracy": v, "epoch": s / 100} for s, v in evals.items()]
    path.write_text(json.dumps({"log_history": hist, "global_step": 100}))
    return path


def _note(path):
    return (f"R0 = 60.0 points is the given initial accuracy (initial_accuracy / --initial-accuracy 0.6), not an "
            f"eval of {path}; every gain is read relative to it")


def _printed(curve, h=None):
    rng = np.random.default_rng(0)
    probe = probe_result({"outcome": rng.normal(1.0, 0.3, 16)}, {"outcome": 4000.0})
    if h is not None:
        probe["reference"].update(heldout_accuracy=h, heldout_group_accuracy=[h] * 16)
    fr = forecast_rewards(curve, probe)
    return fr, format_forecast({**fr.to_dict(), "available": True})


def test_the_given_r0_is_no_eval_in_the_summary_the_scale_note_or_the_notes(tmp_path):
    path = _state(tmp_path / "trainer_state.json")
    curve = load_reference_curve(path, initial_accuracy=0.6)
    assert curve.params["R0"] == pytest.approx(60.0) and len(curve.points) == 7
    assert "; 6 evals + the given initial accuracy as R0, 1 seed(s), 6-6 per seed, up to update 60;" in curve.describe()
    assert curve.notes[:2] == [
        "trainer_state eval_accuracy: accuracy read as fractions in [0, 1] (range 0.7-0.84, + the given initial "
        "accuracy 0.6) and converted to points; if they already are points, pass accuracy_scale='points' "
        "(--reference-curve-scale points)", _note(path)]
    assert curve.metadata["initial_accuracy"] == {"value": 0.6, "points": 60.0, "seeds": ["0"]}
    assert curve.read_options == {"metric": None, "accuracy_scale": None, "initial_accuracy": 0.6}
    plain = load_reference_curve(_state(tmp_path / "b.json", {0: 0.6, **EVALS}))  # a real step-0 eval: counted
    assert "; 7 evals, 1 seed(s), 7-7 per seed," in plain.describe() and plain.given_r0 is None
    assert "(range 0.6-0.84)" in plain.notes[0]


def test_the_note_replaces_the_extrapolated_r0_note_in_the_printed_forecast_and_survives_save(tmp_path):
    path = _state(tmp_path / "trainer_state.json")
    curve = load_reference_curve(path, initial_accuracy=0.6)
    fr, printed = _printed(curve)
    assert f"note: {_note(path)}" in printed and "no eval at update 0" not in printed
    assert fr.notes.count(_note(path)) == 1
    curve.save(tmp_path / "saved.json")
    saved = ReferenceCurve.load(tmp_path / "saved.json")
    assert saved.given_r0 == {"value": 0.6, "points": 60.0, "seeds": ["0"]}
    assert "; 6 evals + the given initial accuracy as R0, 1 seed(s), 6-6 per seed," in saved.describe()
    assert f"note: {_note(path)}" in _printed(saved)[1]
    _, bare = _printed(load_reference_curve(path))  # without it: the extrapolated R0 is said, as before
    assert "has no eval at update 0, so its R0" in bare and "given initial accuracy" not in bare


def test_several_files_name_where_the_value_was_placed_and_what_r0_averages(tmp_path):
    own = _state(tmp_path / "a.json", {0: 0.5, **EVALS})
    lacking = _state(tmp_path / "b.json")
    curve = ReferenceCurve.from_trl_state([own, lacking], initial_accuracy=0.6)
    assert curve.params["R0"] == pytest.approx(55.0)
    assert ("the update-0 point of " + str(lacking) + " (60.0 points) is the given initial accuracy (initial_accuracy "
            "/ --initial-accuracy 0.6), not an eval of that file; R0 = 55.0 points averages it with the other files' "
            "own step-0 evals") in curve.notes
    assert "; 13 evals + the given initial accuracy as R0, 2 seed(s), 6-7 per seed," in curve.describe()


def test_check_the_curve_names_the_given_initial_accuracy_first(tmp_path):
    curve = load_reference_curve(_state(tmp_path / "trainer_state.json"), initial_accuracy=0.6)
    probe = probe_result({"outcome": np.ones(16)}, {"outcome": 4000.0})
    probe["reference"].update(heldout_accuracy=0.05, heldout_group_accuracy=[0.05] * 16)
    check = start_notes(curve, [probe])[0]
    assert check.startswith("CHECK THE CURVE: ")
    assert ("points). First suspect: R0 is your --initial-accuracy 0.6 (initial_accuracy; 60.0 points), not an eval "
            "of the curve's file: check it (the initial policy's accuracy on the curve's eval, in the curve's "
            "scale). The curve may also have another scale") in check
    plain = ReferenceCurve(updates=[0, *EVALS], accuracy=[60.0] + [100 * v for v in EVALS.values()])
    assert "First suspect" not in start_notes(plain, [probe])[0]


def test_forecast_section_records_how_the_curve_was_read(tmp_path):
    curve = load_reference_curve(_state(tmp_path / "trainer_state.json"), initial_accuracy=0.6,
                                 accuracy_scale="auto", metric="eval_accuracy")
    probe = probe_result({"outcome": np.random.default_rng(0).normal(1.0, 0.3, 16)}, {"outcome": 4000.0},
                         model="other")
    d = forecast_section(probe, curve=curve, curve_spec="trainer_state.json")
    assert d["curve_options"] == {"metric": "eval_accuracy", "accuracy_scale": "auto", "initial_accuracy": 0.6}
    assert d["curve_spec"] == "trainer_state.json"
    built = ReferenceCurve(updates=[0, *EVALS], accuracy=[60.0] + [100 * v for v in EVALS.values()])
    assert forecast_section(probe, curve=built)["curve_options"] is None  # not read from a file by the loader
    assert load_reference_curve("default", mode="empirical").read_options == {
        "metric": None, "accuracy_scale": None, "initial_accuracy": None}


def test_probe_json_and_the_printed_forecast_carry_the_given_r0(tmp_path, capsys):
    path = _state(tmp_path / "trainer_state.json")
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--initial-accuracy", "0.6",
                 "--out", str(out)]) == 0
    assert f"note: {_note(path)}" in capsys.readouterr().out
    forecast = json.loads((out / "probe.json").read_text())["forecast"]
    assert forecast["curve_options"] == {"metric": None, "accuracy_scale": None, "initial_accuracy": 0.6}
    assert _note(path) in forecast["notes"] and "6 evals + the given initial accuracy as R0" in forecast["curve"]
