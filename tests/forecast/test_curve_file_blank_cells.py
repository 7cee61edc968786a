"""``--reference-curve FILE.csv`` with empty or ``nan`` cells: skipped on purpose (a log with one row per step has
the accuracy at evals only), but never unsaid: the curve's notes and any refusal (too few evals, no evals) name
how many lines were skipped, where and why; an infinite cell is a bad cell (file, line, column)."""

from __future__ import annotations

import pytest

from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve


def test_too_few_evals_after_blank_cells_says_which_lines_were_skipped(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text("update,accuracy\n0,0.30\n10,\n20,nan\n30,NaN\n40,0.50\n,0.55\n")
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    msg = str(info.value)
    assert msg.startswith(f"the curve has evals at 1 distinct update count(s) > 0 in CSV {path} and the fit has 3 free "
                          "parameters")
    assert msg.endswith(f"; 4 line(s) of {path} skipped for an empty or NaN cell (line 3 column 'accuracy', line 4 "
                        "column 'accuracy', line 5 column 'accuracy', line 7 column 'update'): a line without a value "
                        "is no eval (fill those cells in if they are evals)")


def test_all_cells_blank_is_refused_with_the_count(tmp_path):
    path = tmp_path / "curve.csv"
    rows = "".join(f"{u},\n" for u in range(0, 70, 10))
    path.write_text("update,accuracy\n" + rows)
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(path)
    assert str(info.value).endswith(
        f"; 7 line(s) of {path} skipped for an empty or NaN cell (line 2 column 'accuracy', line 3 column "
        "'accuracy', line 4 column 'accuracy', line 5 column 'accuracy', line 6 column 'accuracy' and 2 more): "
        "a line without a value is no eval (fill those cells in if they are evals)")


def test_a_valid_curve_with_blank_step_rows_fits_and_notes_them(tmp_path):
    path = tmp_path / "wandb.csv"
    lines = ["update,accuracy"] + [f"{u},{'' if u % 10 else 0.3 + u / 400}" for u in range(0, 81, 5)] + [""]
    path.write_text("\n".join(lines) + "\n")
    curve = ReferenceCurve.from_csv(path)
    assert curve.points["update"].tolist() == [0, 10, 20, 30, 40, 50, 60, 70, 80]
    assert curve.notes[1] == (f"8 line(s) of {path} skipped for an empty or NaN cell (line 3 column 'accuracy', "
                              "line 5 column 'accuracy', line 7 column 'accuracy', line 9 column 'accuracy', line 11 "
                              "column 'accuracy' and 3 more): a line without a value is no eval")


def test_a_clean_file_has_no_skip_note(tmp_path):
    path = tmp_path / "clean.csv"
    path.write_text("update,accuracy\n0,0.3\n10,0.4\n\n20,0.45\n40,0.5\n80,0.52\n")
    curve = ReferenceCurve.from_csv(path)
    assert len(curve.points) == 5 and not [n for n in curve.notes if "skipped" in n]


@pytest.mark.parametrize("cell", ["inf", "-inf"])
def test_an_infinite_cell_names_file_line_and_column(tmp_path, cell):
    path = tmp_path / "curve.csv"
    path.write_text(f"update,accuracy\n0,0.3\n10,0.4\n20,{cell}\n")
    with pytest.raises(CurveError) as info:
        load_reference_curve(path)
    assert str(info.value) == (f"{path}, line 4, column 'accuracy': {cell!r} is not a finite number (1 such "
                               "cell(s) in that column); fix or delete that line")
