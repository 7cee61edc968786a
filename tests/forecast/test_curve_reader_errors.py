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


def test_csv_mixing_fractions_and_points_is_refused_naming_the_lines(tmp_path, capsys):
    typo = tmp_path / "typo.csv"  # fractions with one typo: read as points, the whole curve would sit near 0
    typo.write_text("update,accuracy\n0,0.60\n2,0.62\n5,1.65\n10,0.70\n20,0.72\n40,0.75\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(typo)
    assert str(info.value) == (f"{typo} accuracy mixes scales: 5 of 6 values are fractions in [0, 1], but line 4 "
                               "(1.65) hold(s) values above 1 (read as points, every fraction would be under 1 point, "
                               "and a curve in points that stays under 1 point at most evals is too flat to forecast "
                               "from); fix those evals, or pass accuracy_scale='points' if the values are points as "
                               "they stand (on the command line, --reference-curve-scale points)")
    assert cli.main(["probe", "--reference-curve", str(typo), "--out", str(tmp_path / "p")]) == 2
    assert "mixes scales" in capsys.readouterr().err and not (tmp_path / "p").exists()
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(typo.read_text().replace("1.65", "0.65"))
    assert ReferenceCurve.from_csv(fixed).points["accuracy"].max() == pytest.approx(75.0)
    hard = tmp_path / "hard.csv"  # points that start under 1 and rise: most values above 1, read as points
    hard.write_text("update,accuracy\n0,0.4\n2,0.6\n5,1.2\n10,2.5\n20,4.0\n40,6.0\n")
    assert ReferenceCurve.from_csv(hard).points["accuracy"].max() == pytest.approx(6.0)
    forced = ReferenceCurve.from_csv(typo, accuracy_scale="points")  # a stated scale is not second-guessed
    assert forced.points["accuracy"].max() == pytest.approx(1.65)


def test_csv_negative_update_names_its_line(tmp_path):
    neg = tmp_path / "neg.csv"
    neg.write_text("update,accuracy\n0,60\n2,62\n-5,65\n10,70\n20,72\n40,75\n")
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(neg)
    assert str(info.value) == f"{neg}: update must be an update count >= 0, got -5 at line 4; fix or delete those lines"


def test_metrics_and_trainer_state_mixing_fractions_and_points_are_refused_naming_the_evals(tmp_path):
    """The scale check lives in to_points, so every source of a curve gets it, not only a CSV."""
    import json

    values = [0.60, 0.62, 1.65, 0.70, 0.72, 0.75]
    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": v}) + "\n"
                               for u, v in zip([0, 2, 5, 10, 20, 40], values)))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(metrics)
    assert str(info.value).startswith(f"metrics greedy_accuracy mixes scales: 5 of 6 values are fractions in [0, 1], "
                                      f"but {metrics}:3 (1.65) hold(s) values above 1 (read as points")
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": v}
                                                 for s, v in zip([0, 2, 5, 10, 20, 40], values)]}))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(state)
    assert str(info.value).startswith(f"trainer_state eval_accuracy mixes scales: 5 of 6 values are fractions in "
                                      f"[0, 1], but {state} log_history[2] (step 5) (1.65) hold(s) values above 1")
    state.write_text(json.dumps({"log_history": [{"step": s, "eval_accuracy": v}
                                                 for s, v in zip([2, 5, 10, 20, 40], [0.62, 0.65, 0.70, 0.72, 0.75])]}))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(state, initial_accuracy=1.65)  # the value passed is named as such
    assert str(info.value) == (f"initial_accuracy (--initial-accuracy) 1.65 is on another scale than the evals of "
                               f"{state}, which are fractions (range 0.62-0.75): give it as a fraction as the file's "
                               "evals are (0.0165, if 1.65 is points), or leave it out (R0 is then the fit's "
                               "extrapolation)")
    assert ReferenceCurve.from_trl_state(state, initial_accuracy=1.65, accuracy_scale="points").points[
        "accuracy"].max() == pytest.approx(1.65)  # a stated scale is not second-guessed
