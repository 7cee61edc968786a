"""``gradprobe probe --initial-accuracy X``: the initial policy's accuracy for a --reference-curve TRL trainer state
without a step-0 eval (TRL's default), in the curve's scale. Refused without a curve, when not finite or out of the
scale's range, and for a curve of another kind (before any compute: no model is loaded); a file with its own step-0
eval keeps it, and the printed forecast says so."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.forecast import scalerl_sigmoid

TRUE = {"R0": 40.0, "A": 80.0, "n_mid": 20.0, "B": 1.2}
EVALS = (2, 5, 10, 20, 40, 80, 160)  # no step 0, as TRL logs without eval_on_start=True
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]


def _state(tmp_path, steps=EVALS, name="trainer_state.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": float(scalerl_sigmoid(s, **TRUE)) / 100}
                                                for s in steps]}))
    return path


def _refused(capsys, tmp_path, *argv) -> str:
    """The one error line of a probe refused before any compute (exit 2, nothing written)."""
    out = tmp_path / "p"
    assert main(["probe", *SMALL, *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()
    return err


def test_initial_accuracy_without_a_curve_is_refused(tmp_path, capsys):
    assert _refused(capsys, tmp_path, "--initial-accuracy", "0.4") == (
        "gradprobe probe: error: --initial-accuracy gives the initial policy's accuracy on a --reference-curve's "
        "eval, which is not given: add --reference-curve PATH (a TRL trainer_state.json without a step-0 eval), or "
        "leave it out")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_initial_accuracy_is_refused(tmp_path, capsys, value):
    err = _refused(capsys, tmp_path, "--reference-curve", str(_state(tmp_path)), f"--initial-accuracy={value}")
    assert err == (f"gradprobe probe: error: initial_accuracy (--initial-accuracy) {float(value)} is not a finite "
                   "number: give the initial policy's accuracy on the curve's eval (same scale as the metric), or "
                   "leave it out")


@pytest.mark.parametrize("scale, value, what", [("fraction", "40", "a fraction in [0, 1]"),
                                                ("points", "140", "points in [0, 100]"),
                                                (None, "-0.1", "a fraction in [0, 1] or points in [0, 100], as the "
                                                               "curve's values are")])
def test_an_initial_accuracy_out_of_the_scales_range_is_refused(tmp_path, capsys, scale, value, what):
    argv = ["--reference-curve", str(_state(tmp_path)), "--initial-accuracy", value]
    argv += ["--reference-curve-scale", scale] if scale else []
    assert _refused(capsys, tmp_path, *argv) == (
        f"gradprobe probe: error: initial_accuracy (--initial-accuracy) {float(value):g} must be {what} "
        f"(accuracy_scale={scale or 'auto'!r}, --reference-curve-scale {scale or 'auto'}): the initial policy's "
        "accuracy on the curve's eval")


def test_initial_accuracy_for_a_curve_of_another_kind_is_refused(tmp_path, capsys):
    csv = tmp_path / "curve.csv"
    csv.write_text("update,accuracy\n" + "".join(f"{s},{float(scalerl_sigmoid(s, **TRUE)):.4f}\n" for s in EVALS))
    err = _refused(capsys, tmp_path, "--reference-curve", str(csv), "--initial-accuracy", "40")
    assert err == (f"gradprobe probe: error: initial_accuracy (--initial-accuracy) gives the step-0 eval a TRL "
                   f"trainer_state.json lacks, but --reference-curve {str(csv)!r} is read as CSV {csv}: put the "
                   "initial policy's eval at update 0 in that source, or leave it out")
    err = _refused(capsys, tmp_path, "--reference-curve", str(tmp_path / "none.json"), "--initial-accuracy", "40")
    assert "does not exist (no such file or folder)" in err  # the curve's own refusal comes first


def test_the_metric_and_the_scale_are_checked_as_without_it(tmp_path, capsys):
    err = _refused(capsys, tmp_path, "--reference-curve", str(_state(tmp_path)), "--initial-accuracy", "0.4",
                   "--reference-curve-metric", "loss")
    assert "--reference-curve-metric 'loss' is not an eval metric of the TRL trainer state" in err
    state = _state(tmp_path)
    err = _refused(capsys, tmp_path, "--reference-curve", str(state), "--initial-accuracy", "40")
    assert err == (f"gradprobe probe: error: initial_accuracy (--initial-accuracy) 40 is on another scale than the "
                   f"evals of {state}, which are fractions (range 0.4237-0.7695): give it as a fraction as the file's "
                   "evals are (0.4, if 40 is points), or leave it out (R0 is then the fit's extrapolation)")


def test_a_fraction_for_a_curve_in_points_is_refused_and_a_stated_scale_is_not(tmp_path, capsys):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": float(scalerl_sigmoid(s, **TRUE))}
                                                for s in EVALS]}))
    err = _refused(capsys, tmp_path, "--reference-curve", str(path), "--initial-accuracy", "0.4")
    assert err == (f"gradprobe probe: error: initial_accuracy (--initial-accuracy) 0.4 is on another scale than the "
                   f"evals of {path}, which are points (range 42.37-76.95): as points it would be an R0 of 0.4; give "
                   "it in points (40), or state the scale with accuracy_scale='points' (--reference-curve-scale "
                   "points) if it is points as it stands")
    err = _refused(capsys, tmp_path, "--reference-curve", str(path), "--initial-accuracy", "0.4",
                   "--reference-curve-scale", "points", "--guidance", " ")  # read; refused later, for --guidance
    assert err == ("gradprobe probe: error: --guidance is empty; omit the flag for no guidance, or give "
                   "fraction=F,prefix=P[,cap=C] (e.g. --guidance fraction=0.25,prefix=0.5)")


def test_initial_accuracy_is_the_curves_r0(tmp_path, capsys):
    state = _state(tmp_path, name="state.json")  # a trainer state under another name, read by its content
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--reference-curve", str(state), "--initial-accuracy", "0.35",
                 "--out", str(out)]) == 0  # the log's own evals extrapolate to R0 = 40
    forecast = json.loads((out / "probe.json").read_text())["forecast"]
    assert forecast["available"] and "R0 35.0" in forecast["curve"]
    assert not [n for n in forecast["notes"] if "no eval at update 0" in n]  # R0 is given, not extrapolated


def test_a_file_with_its_own_step_0_eval_keeps_it_and_the_forecast_says_so(tmp_path, capsys):
    state = _state(tmp_path, steps=(0, *EVALS))
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--reference-curve", str(state), "--initial-accuracy", "0.5",
                 "--out", str(out)]) == 0
    note = (f"initial_accuracy (--initial-accuracy) 0.5 skipped for 1 file(s) with their own eval at step 0, which "
            f"is read instead: {state} (0.4)")
    assert f"note: {note}" in capsys.readouterr().out
    forecast = json.loads((out / "probe.json").read_text())["forecast"]
    assert note in forecast["notes"] and "R0 40.0" in forecast["curve"]
