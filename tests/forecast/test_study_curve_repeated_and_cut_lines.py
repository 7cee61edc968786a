"""A study's ``runs.csv`` read as a reference curve (``ReferenceCurve.from_study``, which ``calib rows`` and
``gradprobe probe --reference-curve STUDY`` use) is checked like ``gradprobe study --analyze-only`` checks it:
an eval on two lines with different accuracies and an accuracy in points are refused naming the lines; an exact
copy of a line is read once; a line cut short is left out of the curve and said in its skipped notes."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from gradprobe.forecast.csv_cells import SKIPPED_MARK, cut_lines, name_short_lines, repeated_rows, short_lines
from gradprobe.forecast.curves import CurveError, ReferenceCurve
from study_helpers import make_study


def _lines(root):
    return (root / "runs.csv").read_text().splitlines()


def _write(root, lines):
    (root / "runs.csv").write_text("\n".join(lines) + "\n")


def _grpo_line(lines, seed=1, update=5):
    return next(i for i, s in enumerate(lines) if s.startswith(f"grpo,{seed},{update},"))


def test_repeated_rows_names_conflicts_by_line_and_marks_exact_copies():
    df = pd.DataFrame({"arm": ["g", "g", "g", "m", "g", None], "seed": [0, 0, 0, 0, 1, None],
                       "update": [57, 57, 57, 57, 3, None], "acc": [0.7, 0.7, 0.1, 0.5, 0.3, None]})
    conflicts, exact = repeated_rows(df, ("arm", "seed", "update"), [2, 3, 4, 5, 6, 7])
    assert conflicts == ["arm g, seed 0, update 57 (lines 2, 4)"]  # line 3 copies line 2: no conflict of its own
    np.testing.assert_array_equal(exact, [False, True, False, False, False, False])
    many = pd.DataFrame({"k": [i // 2 for i in range(14)], "v": list(range(14))})  # 7 keys, each on 2 lines
    conflicts, exact = repeated_rows(many, ("k",), None)
    assert conflicts[:2] == ["k 0 (2 rows)", "k 1 (2 rows)"] and conflicts[-1] == "and 2 more" and len(conflicts) == 6
    assert not exact.any()


def test_short_lines_counts_lines_as_an_editor_does():
    raw = b'a,b,c\n1,"two\nlines",3\n4,5\n\n6\n'
    assert short_lines(raw) == (3, [(4, 2), (6, 1)])
    assert short_lines(b"") == (0, [])


def test_an_exact_copy_of_a_line_is_read_once(tmp_path):
    root = make_study(tmp_path / "s", seeds=3)
    clean = ReferenceCurve.from_study(root)
    lines = _lines(root)
    _write(root, lines + [lines[_grpo_line(lines)]])
    again = ReferenceCurve.from_study(root)
    assert len(again.points) == len(clean.points)
    assert again.params == pytest.approx(clean.params, rel=1e-12)


def _with_accuracy(tmp_path, accuracy, *, append: bool):
    """A study whose grpo seed 1 update 5 line gets accuracy ``accuracy(old)``, appended as a second line or in
    place; returns (root, that line's number, the file's lines before the edit, the new accuracy cell)."""
    root = make_study(tmp_path / "s", seeds=3)
    lines = _lines(root)
    i = _grpo_line(lines)
    fields = lines[i].split(",")
    fields[5] = accuracy(fields[5])
    _write(root, lines + [",".join(fields)] if append else lines[:i] + [",".join(fields)] + lines[i + 1:])
    return root, i + 1, lines, fields[5]


def test_one_eval_on_two_lines_with_different_accuracies_is_refused(tmp_path):
    root, line, lines, _ = _with_accuracy(tmp_path, lambda old: "0.01", append=True)
    i = line - 1
    with pytest.raises(CurveError, match=rf"records the same eval \(arm, seed, update\) twice with different values: "
                                         rf"arm grpo, seed 1, update 5 \(lines {i + 1}, {len(lines) + 1}\)"):
        ReferenceCurve.from_study(root)


def test_an_accuracy_in_points_is_refused_naming_its_line(tmp_path):
    root, line, _, cell = _with_accuracy(tmp_path, lambda old: str(100 * float(old)), append=False)
    with pytest.raises(CurveError, match=rf"accuracy must be a fraction in \[0, 1\] \(runs.csv records fractions\), "
                                         rf"got {float(cell):g} at line {line}"):
        ReferenceCurve.from_study(root)


def test_a_line_cut_short_is_left_out_and_said(tmp_path):
    root = make_study(tmp_path / "s", seeds=3)
    lines = _lines(root)
    i = _grpo_line(lines)
    n = len(lines[0].split(","))
    without = make_study(tmp_path / "w", seeds=3)
    _write(without, lines[:i] + lines[i + 1:])
    lines[i] = ",".join(lines[i].split(",")[:6])[:-2]  # cut inside the accuracy cell: its value is wrong, not blank
    _write(root, lines)
    curve = ReferenceCurve.from_study(root)
    assert curve.skipped_notes == [f"1 line(s) of {root / 'runs.csv'}{SKIPPED_MARK}looking cut (line {i + 1} (6 of "
                                   f"{n} fields)): the file was cut or edited there, so their values cannot be "
                                   "trusted"]
    ref = ReferenceCurve.from_study(without)  # the same curve as with the line removed
    assert len(curve.points) == len(ref.points)
    assert curve.params == pytest.approx(ref.params, rel=1e-12)


def test_name_short_lines_names_five_then_counts():
    assert name_short_lines([(4, "2 of 3 fields")]) == "line 4 (2 of 3 fields)"
    many = [(n, "1 of 3 fields") for n in range(2, 9)]
    assert name_short_lines(many) == ("line 2 (1 of 3 fields), line 3 (1 of 3 fields), line 4 (1 of 3 fields), "
                                      "line 5 (1 of 3 fields), line 6 (1 of 3 fields) and 2 more")


def test_cut_lines_adds_a_last_line_without_a_line_break():
    assert cut_lines(b"a,b,c\n1,2,3\n4,5,6\n") == (3, [])
    assert cut_lines(b"a,b,c\n1,2,3\n4,5,0.") == (3, [(3, "the last line, no line break after it")])
    assert cut_lines(b"a,b,c\r\n1,2,3\r\n4,5") == (3, [(3, "2 of 3 fields")])  # named once, as short
    assert cut_lines(b"a,b,c") == (3, [])  # a header alone is no cut eval
    assert cut_lines(b"") == (0, [])


def test_the_curve_note_and_the_analysis_warning_name_cut_lines_alike(tmp_path):
    """``ReferenceCurve.from_study`` and ``gradprobe study --analyze-only`` (load_runs) name the same lines the
    same way: one formatter, the first five named and the rest counted."""
    from gradprobe.study.reading import load_runs

    root = make_study(tmp_path / "s", seeds=3)
    lines = _lines(root)
    n = len(lines[0].split(","))
    cut = [i for i, s in enumerate(lines) if s.startswith("grpo,")][:7]
    for i in cut:
        lines[i] = lines[i].rsplit(",", 1)[0]  # each loses its last field (kl_init)
    _write(root, lines)
    named = name_short_lines([(i + 1, f"{n - 1} of {n} fields") for i in cut])
    assert named.endswith(f"line {cut[4] + 1} ({n - 1} of {n} fields) and 2 more")
    assert ReferenceCurve.from_study(root).skipped_notes == [
        f"7 line(s) of {root / 'runs.csv'}{SKIPPED_MARK}looking cut ({named}): the file was cut or edited there, so "
        "their values cannot be trusted"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_runs(root)
    assert [str(w.message).split(" look(s) cut")[0] for w in caught if "look(s) cut" in str(w.message)] == [
        f"{root / 'runs.csv'}: {named}"]


def test_a_runs_csv_without_its_final_line_break_leaves_its_last_line_out(tmp_path):
    """gradprobe writes runs.csv whole, ending in a line break: without it, the last line may be cut inside its
    last value and still hold every field."""
    root = make_study(tmp_path / "s", seeds=3)
    lines = _lines(root)
    last = max(i for i, s in enumerate(lines) if s.startswith("grpo,"))
    lines = lines[:last + 1]  # grpo's last line ends the file
    _write(root, lines)
    whole = ReferenceCurve.from_study(root)
    (root / "runs.csv").write_text("\n".join(lines))  # no final line break
    curve = ReferenceCurve.from_study(root)
    assert curve.skipped_notes == [f"1 line(s) of {root / 'runs.csv'}{SKIPPED_MARK}looking cut (line {last + 1} (the "
                                   "last line, no line break after it)): the file was cut or edited there, so their "
                                   "values cannot be trusted (a whole last line needs only a line break after it)"]
    assert len(curve.points) == len(whole.points) - 1
