"""The scale note of a reference curve ("... accuracy read as fractions ...") is written and found by one definition:
:data:`gradprobe.forecast.accuracy_values.SCALE_NOTE_MARK`, tested by :func:`~gradprobe.forecast.accuracy_values.
is_scale_note`. Every note :func:`to_points` writes is found by the forecast section and the CHECK THE CURVE note,
the note saved in the shipped curve file too; rewording the marker moves the writer and the readers together."""

from __future__ import annotations

import numpy as np
import pytest
from forecast_helpers import probe_result

from gradprobe.forecast import accuracy_values, load_reference_curve
from gradprobe.forecast.accuracy_values import SCALE_NOTE_MARK, is_scale_note, to_points
from gradprobe.forecast.curves import ReferenceCurve, default_curve_path
from gradprobe.forecast.section import forecast_section
from gradprobe.forecast.start_check import CHECK_MARK, start_notes

S0 = [(0, 0.676), (2, 0.71), (5, 0.737), (10, 0.739), (14, 0.762), (20, 0.775), (29, 0.754), (42, 0.783), (57, 0.788)]
FRACTION_NOTE = ("accuracy: accuracy read as fractions in [0, 1] (range 0.676-0.788) and converted to points; "
                 "if they already are points, pass accuracy_scale='points' (--reference-curve-scale points)")


@pytest.mark.parametrize("values, scale, note", [
    ([0.2, 0.5, 0.9], "auto", "src: accuracy read as fractions in [0, 1] (range 0.2-0.9) and converted to points; if "
                              "they already are points, pass accuracy_scale='points' (--reference-curve-scale points)"),
    ([20.0, 50.0, 90.0], "auto", "src: accuracy read as points in [0, 100] (range 20-90)"),
    ([0.2, 0.5], "fraction", "src: accuracy read as fractions (accuracy_scale='fraction')"),
    ([20.0, 50.0], "points", "src: accuracy read as points (accuracy_scale='points')"),
], ids=["auto-fractions", "auto-points", "fraction", "points"])
def test_every_scale_note_the_writer_makes_is_found_by_the_predicate(values, scale, note):
    _, got = to_points(np.array(values), scale, "src")
    assert got == note  # the wording is unchanged, byte for byte
    assert got.startswith(f"src: {SCALE_NOTE_MARK} ")
    assert is_scale_note(got)


def test_the_note_saved_in_the_shipped_curve_is_found_and_other_notes_are_not(tmp_path):
    """The shipped curve file keeps an older wording of the note; the marker still finds it. A curve's other notes
    (an exact repeat skipped, one seed) are no scale notes."""
    saved = ReferenceCurve.load(default_curve_path().with_name("tiny_frontier_grpo.json")).notes
    assert saved == ["runs.csv accuracy: accuracy read as fractions in [0, 1] (range 0.676-0.803) and converted to "
                     "points; pass accuracy_scale='points' if they already are points"]
    assert is_scale_note(saved[0])
    path = tmp_path / "acc.csv"
    path.write_text("update,accuracy\n0,0.676\n" + "".join(f"{u},{a}\n" for u, a in S0))  # update 0 twice
    notes = load_reference_curve(path).notes
    assert [is_scale_note(n) for n in notes] == [True, False, False]
    assert notes[0] == f"{path} {FRACTION_NOTE}"
    assert notes[1:] == [f"1 eval(s) of {path} skipped for repeating an earlier eval exactly (line 3): each eval is "
                         "read once", "one seed: the curve has no seed spread, so forecast intervals carry only its "
                         "eval noise (the fit's residuals), not the run-to-run spread of another seed"]
    assert not is_scale_note("accuracy was read") and not is_scale_note("") and not is_scale_note(None)


def _fraction_csv(tmp_path):
    path = tmp_path / "acc.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in S0))
    return path


def _probe(h):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    p = probe_result({"outcome": o, "mc": 2.0 * o}, {"outcome": 1000.0, "mc": 1500.0})
    p["reference"].update(heldout_accuracy=h, heldout_group_accuracy=[h] * 8)
    return p


def test_the_forecast_and_the_check_the_curve_note_carry_the_scale_note_written(tmp_path):
    curve = load_reference_curve(_fraction_csv(tmp_path))
    assert curve.params["R0"] == pytest.approx(67.6)
    [written] = [n for n in curve.notes if is_scale_note(n)]
    assert written == f"{tmp_path / 'acc.csv'} {FRACTION_NOTE}"
    assert written in forecast_section(_probe(0.625), curve=curve, method="cost_only")["notes"]
    # held-out rollouts at 5%: 62.6 points below R0, so the CHECK THE CURVE note names the scale note as a cause
    check = start_notes(curve, [_probe(0.05)])[0]
    assert check.startswith(f"{CHECK_MARK}: the reference curve ") and f"another scale ({written}), " in check


def test_rewording_the_marker_moves_the_writer_and_the_readers_together(tmp_path, monkeypatch):
    """One definition: a reworded marker is written into the note and the readers still find the note."""
    monkeypatch.setattr(accuracy_values, "SCALE_NOTE_MARK", "accuracy taken as")
    _, note = to_points(np.array([0.2, 0.5]), "fraction", "src")
    assert note == "src: accuracy taken as fractions (accuracy_scale='fraction')" and is_scale_note(note)
    assert not is_scale_note("src: accuracy read as fractions (accuracy_scale='fraction')")
    curve = load_reference_curve(_fraction_csv(tmp_path))
    [written] = [n for n in curve.notes if "accuracy taken as fractions in [0, 1] (range 0.676-0.788)" in n]
    assert written in forecast_section(_probe(0.625), curve=curve, method="cost_only")["notes"]
    assert f"another scale ({written}), " in start_notes(curve, [_probe(0.05)])[0]
