"""A trial user's findings: ``calib fit``/``calib rows --out`` overwrote files calib did not write, hand-edited rows
gave tracebacks or silently wrong fits (blank cells, semicolons, ``n/a``, ``is_reference`` edited), a rows CSV given
as ``--calibration`` got advice that would overwrite it, and a ``study.json`` of ``[]`` crashed ``calib rows``.

Built on the shipped rows (``data/calibration/rows.csv``) and a synthetic study (``calib_helpers.write_study``),
copied before editing.
"""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

import pytest

from calib.cli import main
from calib.dataset import RowsError, StudyFormatError, build_rows, read_rows
from calib.integrity import ReferenceLikeArmWarning, check_reference_rows
from calib.model import CalibrationFileError, load_calibration
from calib_helpers import single_thread_blas, synthetic, write_study  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"
FIT = ["--forecaster", "forecast_cost_only"]


def _rows_copy(tmp_path: Path, edit=None, name: str = "rows.csv") -> Path:
    """The shipped rows CSV with ``edit(rows)`` applied to its list of row dicts, written to ``tmp_path/name``."""
    with open(ROWS, newline="") as f:
        rows = list(csv.DictReader(f))
    if edit is not None:
        edit(rows)
    path = tmp_path / name
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _set(i: int, column: str, value: str):
    def edit(rows):
        rows[i][column] = value
    return edit


# 1. --out never overwrites what calib did not write

def test_fit_refuses_its_own_rows_file_as_out_and_keeps_it(tmp_path, capsys):
    rows = _rows_copy(tmp_path)
    before = rows.read_bytes()
    assert main(["fit", str(rows), *FIT, "--out", str(rows)]) == 2
    err = capsys.readouterr().err
    assert err == (f"calib fit: error: --out {str(rows)!r} is the rows file {str(rows)!r} this command reads: writing "
                   "the calibration file (`calib fit`) there would destroy it; choose another --out (e.g. "
                   f"{str(tmp_path / 'calibration.json')!r})\n")
    assert rows.read_bytes() == before


def test_fit_refuses_a_file_it_did_not_write_and_replaces_its_own(tmp_path, capsys):
    rows = _rows_copy(tmp_path)
    plan = tmp_path / "plan.toml"
    plan.write_text('name = "small"\n[model]\nname = "tiny"\n')
    assert main(["fit", str(rows), *FIT, "--out", str(plan)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"calib fit: error: --out {str(plan)!r} exists and is no calibration file (`calib fit`) but "
                          "a text file (first line 'name = \"small\"'); calib fit replaces only its own earlier output")
    assert plan.read_text() == 'name = "small\"\n[model]\nname = "tiny"\n'
    other = _rows_copy(tmp_path, name="other.csv")  # another rows file as --out: refused, named as rows
    assert main(["fit", str(rows), *FIT, "--out", str(other)]) == 2
    assert "but calibration rows (a CSV of `calib rows`)" in capsys.readouterr().err
    out = tmp_path / "cal.json"
    assert main(["fit", str(rows), *FIT, "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    first = json.loads(out.read_text())["created"]
    assert main(["fit", str(rows), *FIT, "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"calib fit: replaced the earlier calibration file (`calib fit`) {out}\n"
    assert json.loads(out.read_text())["format"] == "gradprobe-calibration" and first
    empty = tmp_path / "empty.json"  # nothing to lose: written over without a word
    empty.write_text("")
    assert main(["fit", str(rows), *FIT, "--out", str(empty)]) == 0
    assert capsys.readouterr().err == "" and json.loads(empty.read_text())["forecaster"] == "forecast_cost_only"


def test_fit_replaces_a_cut_calibration_file_as_its_damage_advice_says(tmp_path, capsys):
    rows = _rows_copy(tmp_path)
    out = tmp_path / "cal.json"
    assert main(["fit", str(rows), *FIT, "--out", str(out)]) == 0
    out.write_text(out.read_text()[:500])
    capsys.readouterr()
    with pytest.raises(CalibrationFileError, match=rf"--out {out}`"):  # the advice: refit it in place
        load_calibration(out)
    assert main(["fit", str(rows), *FIT, "--out", str(out)]) == 0
    load_calibration(out)


def test_rows_refuses_a_study_file_or_a_foreign_file_as_out(tmp_path, capsys):
    study = write_study(tmp_path / "s")
    runs = study / "runs.csv"
    before = runs.read_bytes()
    assert main(["rows", str(study), "--out", str(runs)]) == 2
    assert capsys.readouterr().err == (
        f"calib rows: error: --out {str(runs)!r} is the study file {str(runs)!r} this command reads: writing the "
        "calibration rows CSV (`calib rows`) there would destroy it; choose another --out (e.g. "
        f"{str(study / 'rows.csv')!r})\n")
    assert runs.read_bytes() == before
    copy = tmp_path / "runs_copy.csv"  # a runs.csv elsewhere: no rows CSV, refused
    shutil.copy(runs, copy)
    assert main(["rows", str(study), "--out", str(copy)]) == 2
    assert "exists and is no calibration rows CSV (`calib rows`) but a text file (first line 'arm,seed," in \
        capsys.readouterr().err
    assert copy.read_bytes() == before


def test_rows_replaces_an_earlier_rows_file(tmp_path, capsys, synthetic):
    study = write_study(tmp_path / "s")
    out = _rows_copy(tmp_path, name="old_rows.csv")
    assert main(["rows", str(study), "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"calib rows: replaced the earlier calibration rows CSV (`calib rows`) {out}\n"
    assert set(read_rows(out)["study"]) == {build_rows(study, forecast_fn=None)["study"].iloc[0]}


def test_apply_of_a_rows_file_says_it_is_rows_and_fits_into_a_new_file(tmp_path):
    rows = _rows_copy(tmp_path, name="orig.csv")
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(rows)
    new = tmp_path / "calibration.json"
    assert str(e.value) == (
        f"{rows} looks like calibration rows (a CSV of `calib rows`), not a calibration file (the JSON `calib fit` "
        f"writes); fit one from it with `calib fit {rows} --forecaster FORECASTER --out {new}` (FORECASTER: one of "
        "forecast_probe, forecast_cost_only, forecast_signal_proxy, forecast_first_order) and pass --calibration "
        f"{new}, or pass --calibration default")
    other = tmp_path / "notes.txt"  # neither rows nor a calibration: the refit goes to a new file too
    other.write_text("hello\n")
    with pytest.raises(CalibrationFileError, match=rf"--forecaster FORECASTER --out {tmp_path / 'calibration.json'}`"):
        load_calibration(other)


# 2. and 4. blank identity cells, semicolons

@pytest.mark.parametrize("column", ["study", "arm", "model", "task", "budget", "seed", "reward"])
def test_a_blank_identity_cell_is_refused_naming_line_and_column(tmp_path, capsys, column):
    rows = _rows_copy(tmp_path, _set(5, column, ""))
    assert main(["fit", str(rows), *FIT, "--out", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err.startswith(
        f"calib fit: error: {rows}, line 7, column {column!r} is empty: every row names its run (study, model, task, "
        f"arm, seed, budget, reward); write the {column} of that run or rebuild the file")
    assert not (tmp_path / "c.json").exists()


def test_semicolon_separated_rows_are_refused_with_the_fix(tmp_path, capsys):
    text = ROWS.read_text().splitlines()
    path = tmp_path / "semi.csv"
    path.write_text("\n".join([text[0].replace(",", ";"), *(line.replace(",", ";") for line in text[1:])]) + "\n")
    assert main(["fit", str(path), *FIT, "--out", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err == (
        f"calib fit: error: {path} is not comma-separated: its header line (line 1) separates the columns with "
        "semicolons, as a spreadsheet saves CSV in some locales; re-save it as CSV with commas (with '.' as the "
        "decimal point), or rebuild the rows with `calib rows STUDY_DIR... --out ROWS.csv`\n")


# 3. is_reference must agree with the rows

def test_every_is_reference_false_is_refused(tmp_path, capsys):
    def edit(rows):
        for r in rows:
            r["is_reference"] = "False"
    rows = _rows_copy(tmp_path, edit)
    assert main(["fit", str(rows), *FIT, "--out", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err == (
        f"calib fit: error: the rows file(s) {rows}, study 'study_tiny@b6b755233a8f', arm 'grpo' (read from {rows}, "
        "line 2): is_reference is False, but the reference arm, whose gain vs itself is 0 by definition, is the arm "
        "named 'grpo': the rows were edited; rebuild the rows with `calib rows STUDY_DIR... --out ROWS.csv` (it "
        "marks the reference arm 'grpo' is_reference True, every other arm False)\n")


def test_the_reference_arm_renamed_is_refused(tmp_path, capsys):
    def edit(rows):
        for r in rows:
            if r["arm"] == "grpo":
                r["arm"], r["is_reference"] = "baseline", "False"
    rows = _rows_copy(tmp_path, edit)
    assert main(["fit", str(rows), *FIT, "--out", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err.startswith(
        f"calib fit: error: the rows file(s) {rows}: study 'study_tiny@b6b755233a8f' has no row of the reference arm "
        "'grpo' (is_reference True)")


def test_an_arm_of_zeros_beside_the_reference_is_warned_and_fitted(tmp_path):
    def edit(rows):
        for r in rows:
            if r["arm"] == "mc_value" and r["study"] == "study_tiny@b6b755233a8f":
                r.update(paired="False", target="0.0", forecast_probe="0.0", forecast_cost_only="0.0",
                         forecast_signal_proxy="", forecast_first_order="0.0")
    rows = read_rows(_rows_copy(tmp_path, edit))
    with pytest.warns(ReferenceLikeArmWarning, match=r"arm\(s\) study_tiny@b6b755233a8f/mc_value have forecast 0 "
                                                     r"and realized gain exactly 0 vs 'grpo' on every row"):
        check_reference_rows(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_reference_rows(read_rows(ROWS))  # the shipped rows: nothing to say


# 5. only an empty cell is missing

@pytest.mark.parametrize("column, value", [("forecast_cost_only", "n/a"), ("target", "NA"), ("realized", "null")])
def test_pandas_na_words_are_refused_as_non_numbers(tmp_path, column, value):
    path = _rows_copy(tmp_path, _set(5, column, value))
    with pytest.raises(RowsError, match=rf"line 7, column '{column}': '{value}' is not a number; write a number \(an "
                                        r"empty cell means missing; words such as n/a or NA are not read as missing\)"):
        read_rows(path)


def test_an_empty_forecast_is_still_missing(tmp_path):
    rows = read_rows(_rows_copy(tmp_path, _set(5, "forecast_cost_only", "")))
    assert rows["forecast_cost_only"].isna().sum() == read_rows(ROWS)["forecast_cost_only"].isna().sum() + 1


# the reviewer's study.json of []

def test_a_study_json_that_is_no_object_is_a_named_study_format_error(tmp_path):
    study = write_study(tmp_path / "s")
    (study / "study.json").write_text("[]\n")
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    assert str(e.value) == (f"{study / 'study.json'} holds [], not a JSON object of the study's fields; restore "
                            f"{study / 'study.json'} from a copy of the study (it is written by `gradprobe study` "
                            "when the plan is frozen)")
