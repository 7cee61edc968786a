"""Damage a new user's reference-curve files carry, read by every source alike (``from_csv``, ``from_metrics``,
``from_trl_state``): one fraction logged among points, a negative accuracy, a file cut inside its last value,
one eval recorded twice, a file given twice, JSON true as an accuracy. Each is refused naming the place and the
fix, or left out and said in the curve's notes; none becomes a silently wrong curve."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradprobe.forecast.csv_cells import CAUTION_MARK, SKIPPED_MARK
from gradprobe.forecast.accuracy_values import one_value_per_eval, to_points
from gradprobe.forecast.curves import CurveError, ReferenceCurve, load_reference_curve

UPDATES = [0, 5, 10, 20, 30, 40]
POINTS = [60.0, 64.0, 68.0, 71.0, 73.0, 74.0]


def _csv(path, rows, header="update,accuracy", end="\n"):
    path.write_text(header + "\n" + "\n".join(",".join(str(x) for x in r) for r in rows) + end)
    return path


def _metrics(path, pairs, metric="greedy_accuracy"):
    path.write_text("".join(json.dumps({"eval": True, "update": u, metric: v}) + "\n" for u, v in pairs))
    return path


def _state(path, pairs):
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": v} for s, v in pairs]}))
    return path


def test_one_fraction_among_points_is_refused_by_every_source(tmp_path):
    values = [60, 64, 0.68, 71, 73, 74]  # the third eval logged as a fraction
    with pytest.raises(CurveError, match=r"accuracy mixes scales: the values are points, but line 4 \(0\.68\) "
                                         r"read\(s\) as fractions: 100 x the value is closer to the evals beside it than the "
                                         r"value itself; fix those evals, or pass accuracy_scale='points'"):
        ReferenceCurve.from_csv(_csv(tmp_path / "c.csv", zip(UPDATES, values)))
    metrics = _metrics(tmp_path / "metrics.jsonl", zip(UPDATES, values))
    with pytest.raises(CurveError, match=rf"but {metrics}:3 \(0\.68\) read\(s\) as fractions"):
        ReferenceCurve.from_metrics(metrics)
    state = _state(tmp_path / "trainer_state.json", zip(UPDATES, values))
    with pytest.raises(CurveError, match=r"log_history\[2\] \(step 10\) \(0\.68\) read\(s\) as fractions"):
        ReferenceCurve.from_trl_state(state)
    last = [60, 64, 68, 71, 73, 1]  # a seed's last eval is not judged: a run may collapse at its end
    assert ReferenceCurve.from_csv(_csv(tmp_path / "l.csv", zip(UPDATES, last))).points["accuracy"].min() == 1.0
    fixed = ReferenceCurve.from_csv(_csv(tmp_path / "f.csv", zip(UPDATES, POINTS)))
    assert fixed.points["accuracy"].tolist() == POINTS
    as_given = ReferenceCurve.from_csv(tmp_path / "c.csv", accuracy_scale="points")  # a stated scale is obeyed
    assert as_given.points["accuracy"].min() == pytest.approx(0.68)


def test_a_points_curve_that_starts_under_one_point_is_read_as_points():
    """The rule compares each value with its neighbours: a hard task's curve rising from 0.4 points fits them."""
    hard = np.array([0.0, 0.4, 0.6, 1.2, 2.5, 4.0, 6.0])
    out, note = to_points(hard, "auto", "hard")
    assert out.tolist() == hard.tolist() and "read as points" in note
    two_seeds = np.array([0.5, 2.0, 4.0, 62.0, 0.69, 70.0])  # seed b's middle eval is a fraction; a's start is not
    with pytest.raises(CurveError, match=r"but value #4 \(0\.69\) read\(s\) as fractions"):
        to_points(two_seeds, "auto", "x", updates=[0, 5, 10, 0, 5, 10], seeds=list("aaabbb"))
    assert to_points(two_seeds[:3], "auto", "x")[0].tolist() == [0.5, 2.0, 4.0]
    for start in ([0.8, 45, 55, 60, 62, 63], [0.0, 0.5, 60, 62, 63, 64], [2.0, 1.5, 0.5, 2.0, 3.0, 4.0]):
        assert to_points(np.array(start), "auto", "x")[0].tolist() == start  # a jump from a low start, a low dip


def test_a_negative_accuracy_is_refused_naming_it(tmp_path):
    path = _csv(tmp_path / "n.csv", zip(UPDATES, [0.6, 0.62, -0.74, 0.7, 0.72, 0.75]))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(path)
    assert str(info.value) == (f"{path} accuracy: an accuracy is a share of the held-out set, >= 0; got line 4 "
                               "(-0.74); fix or delete those evals")


def test_a_csv_without_a_final_line_break_is_read_with_a_caution_and_a_short_last_line_left_out(tmp_path):
    """Editors save a user's CSV without a final line break: its last line is read, and the printed note says that
    if the file was cut there its last value may be cut too; a last line short of fields is left out."""
    rows = list(zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    path = _csv(tmp_path / "cut.csv", rows, end="")
    curve = ReferenceCurve.from_csv(path)
    assert len(curve.points) == 6
    assert curve.skipped_notes == [f"line 7 of {path}{CAUTION_MARK}it is the last line and no line break follows it: "
                                   "if the file was cut there, its last value (0.74) may be cut too; check it (a "
                                   "whole file ends with a line break)"]
    short = _csv(tmp_path / "short.csv", rows[:-1] + [(40,)], header="update,accuracy", end="")
    curve = ReferenceCurve.from_csv(short)
    assert len(curve.points) == 5
    assert curve.skipped_notes == [f"1 line(s) of {short}{SKIPPED_MARK}looking cut (line 7 (1 of 2 fields)): the "
                                   "file was cut or edited there, so their values cannot be trusted"]
    few = _csv(tmp_path / "few.csv", rows[:2] + [(5, 0.7)], end="")  # too few evals: the refusal names the caution
    with pytest.raises(CurveError, match=r"; line 4 of .* was read, but it is the last line"):
        ReferenceCurve.from_csv(few)


def test_optional_trailing_columns_no_line_fills_are_not_cuts(tmp_path):
    rows = list(zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    path = _csv(tmp_path / "notes.csv", rows, header="update,accuracy,note")
    curve = ReferenceCurve.from_csv(path)
    assert len(curve.points) == 6 and curve.skipped_notes == []
    ws = _csv(tmp_path / "ws.csv", rows)
    ws.write_text(ws.read_text() + "   \n")  # a whitespace-only line after the last: blank, not text
    assert len(ReferenceCurve.from_csv(ws).points) == 6


def test_a_short_line_or_a_blank_seed_in_a_seeded_csv_is_left_out_and_said(tmp_path):
    rows = [(u, a, s) for s in (0, 1) for u, a in zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74])]
    path = _csv(tmp_path / "s.csv", rows[:5] + [(40, 0.74)] + rows[6:], header="update,accuracy,seed")
    curve = ReferenceCurve.from_csv(path, seed_col="seed")
    assert sorted(set(curve.points["seed"].astype(float))) == [0.0, 1.0]  # no third "seed" of one eval
    assert curve.skipped_notes == [f"1 line(s) of {path}{SKIPPED_MARK}looking cut (line 7 (2 of 3 fields)): the file "
                                   "was cut or edited there, so their values cannot be trusted"]
    auto = load_reference_curve(str(_csv(tmp_path / "a.csv", rows, header="update,accuracy,seed")))
    assert sorted(set(auto.points["seed"].astype(str))) == ["0", "1"]  # --reference-curve reads the seed column
    one = ReferenceCurve.from_csv(tmp_path / "a.csv", seed_col=None)  # None: one seed, so seed 1 repeats seed 0
    assert len(one.points) == 6 and "6 eval(s) of" in one.skipped_notes[0] and "repeating an earlier eval" in \
        one.skipped_notes[0]
    blank = _csv(tmp_path / "b.csv", rows[:5] + [(40, 0.74, "")] + rows[6:], header="update,accuracy,seed")
    curve = ReferenceCurve.from_csv(blank, seed_col="seed")
    assert curve.skipped_notes == [f"1 line(s) of {blank}{SKIPPED_MARK}an empty or NaN cell (line 7 column 'seed'): a "
                                   "line without a value is no eval"]


def test_one_eval_twice_is_refused_when_its_values_differ_and_read_once_when_copied(tmp_path):
    rows = list(zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    path = _csv(tmp_path / "d.csv", rows + [(20, 0.31)])
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(path)
    assert str(info.value) == (f"{path} records the same eval (seed, update) twice with different accuracies: line 5 "
                               "(0.7) and line 8 (0.31); which is right cannot be told: fix or delete one of each pair")
    copied = _csv(tmp_path / "e.csv", rows + [rows[3]])
    curve = ReferenceCurve.from_csv(copied)
    assert len(curve.points) == 6
    assert curve.skipped_notes == [f"1 eval(s) of {copied}{SKIPPED_MARK}repeating an earlier eval exactly (line 8): "
                                   "each eval is read once"]
    metrics = _metrics(tmp_path / "metrics.jsonl", rows + [(20, 0.31)])
    with pytest.raises(CurveError, match=rf"twice with different accuracies: {metrics}:4 \(0\.7\) and {metrics}:7 "
                                         r"\(0\.31\)"):
        ReferenceCurve.from_metrics(metrics)
    state = _state(tmp_path / "trainer_state.json", rows + [(20, 0.31)])
    with pytest.raises(CurveError, match=r"log_history\[3\] \(step 20\) \(0\.7\) and .*log_history\[6\] \(step 20\) "
                                         r"\(0\.31\)"):
        ReferenceCurve.from_trl_state(state)
    gap = tmp_path / "gap.csv"  # blank and skipped lines before a repeat: values are compared by position
    gap.write_text("update,accuracy\n\n0,0.6\n5,\n5,0.62\n10,0.65\n20,0.7\n30,0.72\n40,0.74\n10,0.65\n")
    curve = ReferenceCurve.from_csv(gap)
    assert curve.points["accuracy"].tolist() == pytest.approx([60, 62, 65, 70, 72, 74])
    assert curve.skipped_notes[-1] == (f"1 eval(s) of {gap}{SKIPPED_MARK}repeating an earlier eval exactly (line 10): "
                                       "each eval is read once")
    gap.write_text(gap.read_text().replace("10,0.65\n", "10,0.61\n", 1))
    with pytest.raises(CurveError, match=r"line 6 \(0\.61\) and line 10 \(0\.65\)"):
        ReferenceCurve.from_csv(gap)
    keep, note = one_value_per_eval([0, 5, 5, 5], [1.0, 2.0, 2.0, 2.0], ["a", "a", "b", "a"], list("wxyz"), "src")
    assert keep.tolist() == [True, True, True, False] and "(z)" in note  # seed b's update 5 is its own eval


def test_a_file_given_twice_is_refused(tmp_path):
    rows = list(zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    metrics = _metrics(tmp_path / "metrics.jsonl", rows)
    with pytest.raises(CurveError, match=rf"metrics.jsonl {tmp_path}/metrics.jsonl is given twice .*count as two "
                                         "seeds with identical evals"):
        ReferenceCurve.from_metrics([metrics, tmp_path])  # the file and its folder: one run
    state = _state(tmp_path / "trainer_state.json", rows)
    with pytest.raises(CurveError, match=r"trainer_state.json .* is given twice"):
        ReferenceCurve.from_trl_state([state, state])


def test_metrics_jsonl_names_nan_negative_and_boolean_evals(tmp_path):
    rows = list(zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    path = _metrics(tmp_path / "metrics.jsonl", rows[:3] + [(20, float("nan"))] + rows[4:])
    curve = ReferenceCurve.from_metrics(path)
    assert len(curve.points) == 5
    assert curve.skipped_notes == [f"1 eval line(s){SKIPPED_MARK}a NaN 'greedy_accuracy' ({path}:4): a NaN is no eval "
                                   "(a diverged or failed eval); rerun those evals to use them"]
    _metrics(path, rows[:2] + [(-5, 0.65)] + rows[3:])
    with pytest.raises(CurveError, match=rf"^{path}:3: field 'update' = -5 must be an update count >= 0"):
        ReferenceCurve.from_metrics(path)
    _metrics(path, rows[:2] + [(10, True)] + rows[3:])
    with pytest.raises(CurveError, match=rf"^{path}:3: field 'greedy_accuracy' = true is not a number"):
        ReferenceCurve.from_metrics(path)
    _metrics(path, [(u, float("nan")) for u in UPDATES])
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(path)
    assert str(info.value).startswith("no eval of 'greedy_accuracy' with a value in metrics.jsonl of 1 run(s)")
    assert ("hold no value (NaN), so more frequent evals would not help; rerun those evals (if the run diverged "
            "there, look at why first); " in str(info.value)) and "fill those cells" not in str(info.value)


def test_a_csv_pandas_cannot_parse_is_one_line_and_an_upper_case_suffix_is_a_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("update,accuracy\n0,0.6\n5,0.62,7\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(bad)
    assert "\n" not in str(info.value) and str(info.value).startswith(f"{bad} cannot be read as a CSV (")
    upper = _csv(tmp_path / "GOOD.CSV", zip(UPDATES, [0.6, 0.62, 0.65, 0.7, 0.72, 0.74]))
    assert len(load_reference_curve(str(upper)).points) == 6
