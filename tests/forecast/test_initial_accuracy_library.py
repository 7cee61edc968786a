"""``load_reference_curve(..., initial_accuracy=X)``: the Python API of ``gradprobe probe --initial-accuracy X``.
X goes to the TRL reader for a TRL trainer state; it is checked (finite, in the range of ``accuracy_scale``) before
any file is read, by ``ReferenceCurve.from_trl_state`` too; another kind of source keeps its own refusals first,
then is refused for X. Each message names the keyword and the command line's option."""

from __future__ import annotations

import json

import pytest

from gradprobe.forecast import load_reference_curve, scalerl_sigmoid
from gradprobe.forecast.curves import CurveError, ReferenceCurve

TRUE = {"R0": 40.0, "A": 80.0, "n_mid": 20.0, "B": 1.2}
EVALS = (2, 5, 10, 20, 40, 80, 160)  # no step 0, as TRL logs without eval_on_start=True


def _state(path, *, points=False):
    scale = 1.0 if points else 0.01
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": scale * float(scalerl_sigmoid(s, **TRUE))}
                                                for s in EVALS]}))
    return path


def test_initial_accuracy_is_the_r0_of_a_trl_state_read_by_load_reference_curve(tmp_path):
    path = _state(tmp_path / "trainer_state.json")
    curve = load_reference_curve(path, initial_accuracy=0.35)
    assert curve.params["R0"] == pytest.approx(35.0) and curve.status["R0"] == "fixed"
    assert sorted(curve.points["update"]) == [0, *EVALS]
    in_points = load_reference_curve(_state(tmp_path / "p.json", points=True), initial_accuracy=35,
                                     accuracy_scale="points")
    assert in_points.params["R0"] == pytest.approx(35.0)
    assert load_reference_curve(path).status["R0"] != "fixed"  # without it R0 is fitted (extrapolated)


@pytest.mark.parametrize("scale, value, what", [("fraction", 40.0, "a fraction in [0, 1]"),
                                                ("fraction", -0.5, "a fraction in [0, 1]"),
                                                ("points", 140.0, "points in [0, 100]"),
                                                ("auto", -0.1, "a fraction in [0, 1] or points in [0, 100], as the "
                                                               "curve's values are"),
                                                ("auto", 100.5, "a fraction in [0, 1] or points in [0, 100], as the "
                                                                "curve's values are")])
def test_a_value_out_of_the_scales_range_is_refused_by_both_readers(tmp_path, scale, value, what):
    path = _state(tmp_path / "trainer_state.json", points=scale == "points")
    expected = (f"initial_accuracy (--initial-accuracy) {value:g} must be {what} (accuracy_scale={scale!r}, "
                f"--reference-curve-scale {scale}): the initial policy's accuracy on the curve's eval")
    with pytest.raises(CurveError) as info:
        load_reference_curve(path, initial_accuracy=value, accuracy_scale=None if scale == "auto" else scale)
    assert str(info.value) == expected
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(path, initial_accuracy=value, accuracy_scale=scale)
    assert str(info.value) == expected


@pytest.mark.parametrize("scale, value", [("fraction", 0.0), ("fraction", 1.0), ("points", 100.0)])
def test_the_ends_of_a_range_are_read(tmp_path, scale, value):
    curve = load_reference_curve(_state(tmp_path / "trainer_state.json", points=scale == "points"),
                                 initial_accuracy=value, accuracy_scale=scale)
    assert curve.params["R0"] == pytest.approx(value * (100.0 if scale == "fraction" else 1.0))


def test_the_value_is_checked_before_any_file_is_read(tmp_path):
    """A non-finite or out-of-range value is refused even where the source could not be read at all."""
    broken = tmp_path / "curve.csv"
    broken.write_text("no,columns\n")
    with pytest.raises(CurveError) as info:
        load_reference_curve(broken, initial_accuracy=float("nan"))
    assert str(info.value) == ("initial_accuracy (--initial-accuracy) nan is not a finite number: give the initial "
                               "policy's accuracy on the curve's eval (same scale as the metric), or leave it out")
    with pytest.raises(CurveError, match=r"^initial_accuracy \(--initial-accuracy\) 2 must be a fraction in"):
        load_reference_curve(tmp_path / "missing.json", initial_accuracy=2.0, accuracy_scale="fraction")


def test_another_kind_keeps_its_own_refusals_first(tmp_path):
    csv = tmp_path / "curve.csv"
    csv.write_text("update,accuracy\n" + "".join(f"{s},{float(scalerl_sigmoid(s, **TRUE)):.4f}\n" for s in EVALS))
    with pytest.raises(CurveError, match=r"^--reference-curve-metric 'eval_x' picks an eval key .* a CSV"):
        load_reference_curve(csv, metric="eval_x", initial_accuracy=40)
    with pytest.raises(CurveError) as info:
        load_reference_curve(csv, initial_accuracy=40)
    assert str(info.value) == (
        f"initial_accuracy (--initial-accuracy) gives the step-0 eval a TRL trainer_state.json lacks, but "
        f"--reference-curve {str(csv)!r} is read as CSV {csv}: put the initial policy's eval at update 0 in that "
        "source, or leave it out")
    with pytest.raises(CurveError, match=r"^--reference-curve-metric 'loss' is not an eval metric of the TRL"):
        load_reference_curve(_state(tmp_path / "trainer_state.json"), metric="loss", initial_accuracy=0.4)
