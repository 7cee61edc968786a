"""Reference-curve readers: a bad cell names the file, line and column; a missing path says so."""

from __future__ import annotations

import json

import pytest

from gradprobe import cli
from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve


def test_csv_bad_cell_names_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("updates,accuracy\n5,abc\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(bad, update_col="updates")
    assert str(info.value) == (f"{bad}, line 2, column 'accuracy': 'abc' is not a number (1 such cell(s) in that "
                               "column); fix or delete that line")


def test_csv_line_number_counts_blank_lines(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("update,accuracy\n0,0.5\n\n10,0.6\n20,x7\n")
    with pytest.raises(CurveError, match=r"bad\.csv, line 5, column 'accuracy': 'x7' is not a number"):
        load_reference_curve(bad)


def test_csv_with_a_bad_update_and_empty_cells(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("update,accuracy\n0,0.5\n,0.55\nten,0.6\n")
    with pytest.raises(CurveError, match=r"line 4, column 'update': 'ten' is not a number"):
        ReferenceCurve.from_csv(bad)


def test_empty_csv_is_named(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(CurveError, match=r"empty\.csv cannot be read as a CSV .*header line"):
        ReferenceCurve.from_csv(empty)


def test_metrics_jsonl_bad_value_names_line_and_field(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [{"update": 0, "eval": True, "greedy_accuracy": 0.5}, {"update": 5, "loss": 1.0},
             {"update": 10, "eval": True, "greedy_accuracy": "n/a"}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(path)
    assert str(info.value) == f"{path}:3: field 'greedy_accuracy' = 'n/a' is not a number; fix or delete that eval"


def test_trainer_state_bad_value_names_the_entry(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"step": 0, "eval_accuracy": 0.4}, {"step": 5, "loss": 2.0},
                                                {"step": "x", "eval_accuracy": 0.5}]}))
    with pytest.raises(CurveError, match=r"log_history\[2\] field 'step' = 'x' is not a number"):
        load_reference_curve(path)


def test_missing_path_says_it_does_not_exist_and_lists_what_is_accepted(tmp_path):
    with pytest.raises(CurveError) as info:
        load_reference_curve("/nonexistent.csv")
    msg = str(info.value)
    assert msg.startswith("--reference-curve '/nonexistent.csv' does not exist (no such file or folder); expected ")
    for kind in ("ReferenceCurve.save", "trainer_state.json", "metrics.jsonl", "CSV with update,accuracy columns",
                 "`gradprobe study` folder", "'default'"):
        assert kind in msg


def test_folder_without_curve_files_is_named(tmp_path):
    with pytest.raises(CurveError, match=r"is a folder without runs\.csv .*metrics\.jsonl .*trainer_state\.json"):
        load_reference_curve(tmp_path)


def test_cli_reports_the_bad_cell(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("updates,accuracy\n5,abc\n")
    out = tmp_path / "probe-out"
    rc = cli.main(["probe", "--reference-curve", str(bad), "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe probe: error: ")
    assert "has no column 'update' (columns: ['updates', 'accuracy']); name the header's columns update,accuracy" in err
    bad.write_text("update,accuracy\n5,abc\n")
    assert cli.main(["probe", "--reference-curve", str(bad), "--out", str(out)]) == 2
    assert f"{bad}, line 2, column 'accuracy': 'abc' is not a number" in capsys.readouterr().err
    assert not out.exists()
