"""``calib`` command-line defects: bad rows and probe fields refused by name, honest messages, checks made up front.

Built on the shipped data (``data/calibration/rows.csv``, ``data/study_tiny``), copied before damaging. A study's
``probe.json`` has no ``forecast`` section; :func:`_probe_copy` adds the one ``gradprobe probe`` writes
(:func:`gradprobe.forecast.forecast_section`), so a damaged field of it can be tested without running a probe.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from calib.cli import main
from gradprobe.forecast import forecast_section
from gradprobe.outputs import json_safe

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"
STUDY = REPO / "data" / "study_tiny"


def _rows_copy(tmp_path: Path, edit) -> Path:
    """The shipped rows CSV with ``edit(rows)`` applied to its list of row dicts, written to ``tmp_path``."""
    with open(ROWS, newline="") as f:
        rows = list(csv.DictReader(f))
    edit(rows)
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _fit(tmp_path: Path, rows: Path, capsys, *extra) -> tuple[int, str, Path]:
    out = tmp_path / "cal.json"
    status = main(["fit", str(rows), "--out", str(out), *extra])
    return status, capsys.readouterr().err, out


def _first(rows: list[dict], column: str) -> int:
    return next(i for i, r in enumerate(rows) if r[column])


# --- 4: a budget_value that is not a finite number > 0 ---------------------------------------------------------

@pytest.mark.parametrize("value", ["-5", "0"])
def test_fit_refuses_a_budget_value_that_is_not_positive(tmp_path, capsys, value):
    path = _rows_copy(tmp_path, lambda rows: rows[5].update(budget_value=value))
    status, err, out = _fit(tmp_path, path, capsys, "--forecaster", "forecast_cost_only")
    assert status == 2 and not out.exists()
    assert f"{path}, line 7, column 'budget_value': {float(value)} is not a budget" in err
    assert "calib rows STUDY_DIR... --out" in err


# --- 8: forecasts range-checked; a forecast column without spread -----------------------------------------------

def test_fit_refuses_a_forecast_outside_accuracy_points(tmp_path, capsys):
    def plus500(rows):
        for r in rows:
            r["forecast_probe"] = str(float(r["forecast_probe"]) + 500) if r["forecast_probe"] else ""
    with open(ROWS, newline="") as f:
        line = _first(list(csv.DictReader(f)), "forecast_probe") + 2
    path = _rows_copy(tmp_path, plus500)
    status, err, out = _fit(tmp_path, path, capsys)
    assert status == 2 and not out.exists()
    assert f"{path}, line {line}, column 'forecast_probe'" in err and "is not a forecast gain vs grpo" in err
    assert "[-100, 100]" in err


def test_fit_refuses_an_overflowing_forecast_by_line_not_by_solver(tmp_path, capsys):
    with open(ROWS, newline="") as f:
        i = _first(list(csv.DictReader(f)), "forecast_probe")
    path = _rows_copy(tmp_path, lambda rows: rows[i].update(forecast_probe="1e308"))
    status, err, out = _fit(tmp_path, path, capsys)
    assert status == 2 and not out.exists()
    assert f"{path}, line {i + 2}, column 'forecast_probe': 1e+308" in err and "HuberRegressor" not in err


def test_the_raw_first_order_may_overshoot_100_but_not_overflow(tmp_path, capsys):
    with open(ROWS, newline="") as f:
        shipped = pd.read_csv(f)
    assert shipped["forecast_first_order"].abs().max() > 100  # the shipped rows overshoot: still accepted
    path = _rows_copy(tmp_path, lambda rows: rows[3].update(forecast_first_order="1e308"))
    status, err, out = _fit(tmp_path, path, capsys, "--forecaster", "forecast_first_order")
    assert status == 2 and not out.exists()
    assert f"{path}, line 5, column 'forecast_first_order': 1e+308 is not a raw first-order gain" in err


def test_fit_refuses_a_forecast_column_without_spread(tmp_path, capsys):
    def constant(rows):
        for r in rows:
            r["forecast_probe"] = "1.0" if r["forecast_probe"] else ""
    status, err, out = _fit(tmp_path, _rows_copy(tmp_path, constant), capsys)
    assert status == 2 and not out.exists()
    assert "the forecast column 'forecast_probe' has one value (1)" in err and "cannot be fitted" in err


# --- 10: calib apply on a damaged probe.json ---------------------------------------------------------------------

def _probe_copy(tmp_path: Path, edit=None) -> Path:
    """A copy of the shipped study with a forecast section in its probe.json, ``edit(doc)`` applied; the probe
    folder is returned."""
    study = shutil.copytree(STUDY, tmp_path / "study_tiny")
    path = study / "probe" / "probe.json"
    doc = json.loads(path.read_text())
    doc["forecast"] = json_safe(forecast_section(doc))
    if edit is not None:
        edit(doc)
    path.write_text(json.dumps(doc))
    return study / "probe"


def _row(doc: dict, name: str) -> dict:
    return next(r for r in doc["forecast"]["rows"] if r.get("arm") == name)


def _rows_index(doc: dict, name: str) -> int:
    return next(i for i, r in enumerate(doc["forecast"]["rows"]) if r.get("arm") == name)


def test_the_intact_copy_applies(tmp_path, capsys):
    probe = _probe_copy(tmp_path)
    assert main(["apply", str(probe)]) == 0
    assert not (probe / "calibrated.json").exists()  # a study's probe folder gets no file: printed only
    assert main(["apply", str(probe), "--out", str(tmp_path / "calibrated.json")]) == 0
    assert (tmp_path / "calibrated.json").is_file()


@pytest.mark.parametrize("field, value, says", [
    ("config.budget_tokens", "abc", 'is "abc": it must be a finite number >= 1 of generated tokens'),
    ("config.budget_tokens", -1, "is -1: it must be a finite number >= 1 of generated tokens"),
    ("config.budget_tokens", None, "is null, not a budget"),
    ("gain_cost_only", 5000.0, "is 5000.0: it is outside [-100, 100]"),
    ("gain_cost_only", "abc", "is 'abc': it is not a number"),
    ("gain_cost_only", "inf", "is 'inf': it is infinite"),
])
def test_apply_refuses_a_damaged_field_by_name(tmp_path, capsys, field, value, says):
    def edit(doc):
        if field.startswith("config."):
            doc["config"][field.split(".")[1]] = value
        else:
            _row(doc, "mc_value")[field] = value
    probe = _probe_copy(tmp_path, edit)
    doc = json.loads((probe / "probe.json").read_text())
    named = field if field.startswith("config.") else f"forecast.rows[{_rows_index(doc, 'mc_value')}].{field}"
    assert main(["apply", str(probe)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{probe / 'probe.json'} field {named} {says}" in err
    # an entry check's fix is the folder's (a study without runs/: restore it); a forecast row's, calib's own
    own = field.startswith("config.") and value is not None  # null: calib's own check (no budget to forecast at)
    assert ("from a copy of the study" if own else "re-run `gradprobe probe`") in err
    assert not (probe / "calibrated.json").exists()


def test_a_missing_gain_is_said_missing_not_guessed(tmp_path, capsys):
    probe = _probe_copy(tmp_path, lambda doc: _row(doc, "mc_value").update(gain_cost_only=None))
    assert main(["apply", str(probe)]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if line.startswith("note:") and "['mc_value']" in line)
    assert "probe.json holds no forecast_cost_only value (null) for ['mc_value']" in note
    assert "learning-rate change" not in note


# --- 13: calib rows: a runs.csv without a column, --out under a file ------------------------------------------------

def test_rows_names_the_runs_csv_that_lacks_a_column(tmp_path, capsys):
    study = shutil.copytree(STUDY, tmp_path / "st")
    pd.read_csv(study / "runs.csv").drop(columns=["generated_tokens"]).to_csv(study / "runs.csv", index=False)
    out = tmp_path / "r.csv"
    assert main(["rows", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{study / 'runs.csv'} has no column(s) ['generated_tokens']" in err and "Usecols" not in err
    assert "restore the study's runs.csv" in err and not out.exists()


def test_rows_out_under_a_file_says_it_is_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x\n")
    out = tmp_path / "afile" / "rows.csv"
    assert main(["rows", str(STUDY), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{str(tmp_path / 'afile')!r} is a file, not a folder" in err and "choose another --out" in err
    assert "Errno" not in err and (tmp_path / "afile").read_text() == "x\n"


# --- 14: write errors name the right file and option ----------------------------------------------------------------

def test_apply_write_failure_names_the_file_not_an_out_option(tmp_path, capsys):
    probe = shutil.copytree(_probe_copy(tmp_path), tmp_path / "plain")  # a probe outside a study: written beside it
    (probe / "calibrated.json").mkdir()  # in the way
    assert main(["apply", str(probe)]) == 2
    err = capsys.readouterr().err
    assert f"writing {str(probe / 'calibrated.json')!r} failed" in err and "--out" not in err
    assert "calibrated.json is written next to probe.json" in err


def test_report_checks_validation_out_before_writing_anything(tmp_path, capsys):
    out = tmp_path / "rep"
    status = main(["report", str(STUDY), str(REPO / "data" / "study_tiny_llama"), "--out", str(out),
                   "--validation-out", str(tmp_path)])
    assert status == 2
    err = capsys.readouterr().err
    assert f"--validation-out {str(tmp_path)!r} is a folder, not a file" in err and "another --validation-out" in err
    assert not out.exists()  # refused before the report was made


# --- 17: calib fit's messages -------------------------------------------------------------------------------------

def test_fit_on_a_study_folder_says_it_is_a_folder_and_how_to_make_rows(tmp_path, capsys):
    study = shutil.copytree(STUDY, tmp_path / "st")
    status, err, out = _fit(tmp_path, study, capsys)
    assert status == 2 and not out.exists()
    assert f"rows file {str(study)!r} is a folder, not a rows CSV" in err and "not found" not in err
    assert f"`calib rows {study} --out rows.csv`" in err


def test_fit_on_a_plain_folder_says_it_is_a_folder(tmp_path, capsys):
    folder = tmp_path / "empty"
    folder.mkdir()
    status, err, _ = _fit(tmp_path, folder, capsys)
    assert status == 2 and f"rows file {str(folder)!r} is a folder, not a rows CSV" in err
    assert "calib rows" in err and f"--out {folder}" not in err


def test_fit_cv_study_with_one_study_names_the_cli_option(tmp_path, capsys):
    path = _rows_copy(tmp_path, lambda rows: rows.__setitem__(slice(None), [
        r for r in rows if r["study"] == rows[0]["study"]]))
    status, err, out = _fit(tmp_path, path, capsys, "--cv", "study", "--forecaster", "forecast_first_order")
    assert status == 2 and not out.exists()
    assert "--cv arm on the command line" in err and "cv='arm' in Python" in err


def test_fit_on_grpo_rows_only_says_every_row_is_the_reference(tmp_path, capsys):
    path = _rows_copy(tmp_path, lambda rows: rows.__setitem__(slice(None), [r for r in rows if r["arm"] == "grpo"]))
    status, err, out = _fit(tmp_path, path, capsys)
    assert status == 2 and not out.exists()
    assert "is the reference arm 'grpo'" in err and "add rows of other arms" in err
    assert "check that the studies have results" not in err
