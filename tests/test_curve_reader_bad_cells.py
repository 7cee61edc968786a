"""The curve readers' refusals of files without evals, of cells too large for a float and of seeds that are no
seeds: each names the file (and the line and column, or the field) and says what it needs, and shows a value as the
file holds it."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.forecast import CurveError, ReferenceCurve, load_reference_curve
from gradprobe.forecast.curve_fit import TooFewEvalsError

EVALS = [(0, 0.1), (10, 0.2), (20, 0.3), (30, 0.4), (40, 0.45)]
HUGE = "1" + "0" * 400  # an integer a CSV can hold, beyond a float's range (about 1.8e308)
HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
NEEDS = ("a reference curve needs one line per eval, its update count and accuracy (e.g. `0,0.41` under "
         "update,accuracy), at at least 4 distinct update counts > 0, or 3 and an eval at update 0 (R0)")


def _csv(tmp_path, text: str, name: str = "curve.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _runs_csv(tmp_path, seeds=("0", "1"), header="arm,seed,update,accuracy\n"):
    """A study folder whose runs.csv holds EVALS of arm grpo for each seed (as written in the cell); an empty last
    cell on each line where the header names accuracy_sampled too."""
    study = tmp_path / "study"
    study.mkdir()
    tail = "," if "accuracy_sampled" in header else ""
    rows = [f"grpo,{s},{u},{a}{tail}" for s in seeds for u, a in EVALS]
    (study / "runs.csv").write_text(header + "".join(r + "\n" for r in rows))
    return study


# ---------------------------------------------------------------------------------------------- no evals at all
def test_a_csv_with_only_a_header_names_the_file_and_what_it_needs(tmp_path):
    path = _csv(tmp_path, "update,accuracy\n")
    with pytest.raises(TooFewEvalsError) as e:
        load_reference_curve(path)
    assert str(e.value) == f"CSV {path} has no eval lines (a header and no line of values): {NEEDS}"


def test_a_header_only_csv_is_refused_so_on_the_command_line(tmp_path, capsys):
    path, out = _csv(tmp_path, "update,accuracy,seed\n\n"), tmp_path / "p"
    assert main(["probe", "--reference-curve", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert not out.exists()
    assert err == f"gradprobe probe: error: CSV {path} has no eval lines (a header and no line of values): {NEEDS}"


def test_a_csv_whose_accuracies_are_all_blank_names_the_file_and_the_minimum(tmp_path):
    path = _csv(tmp_path, "update,accuracy\n0,\n10,\n")
    with pytest.raises(TooFewEvalsError) as e:
        ReferenceCurve.from_csv(path)
    msg = str(e.value)
    assert msg.startswith(f"the curve has evals at 0 distinct update count(s) > 0 in CSV {path} and the fit has 4 "
                          "free parameters (A, n_mid, B, R0): it needs evals at at least 4 distinct update counts > 0")
    assert f"2 line(s) of {path} skipped for an empty or NaN cell (line 2 column 'accuracy', line 3 column " in msg


def test_no_points_at_all_is_the_refusal_for_too_few_evals():
    with pytest.raises(TooFewEvalsError, match=r"^the curve has evals at 0 distinct update count\(s\) > 0 and the "
                                               r"fit has 3 free parameters \(A, n_mid, R0\)"):
        ReferenceCurve(updates=[], accuracy=[], B=1.0)


def test_a_study_runs_csv_with_only_a_header_says_no_run_has_finished(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "runs.csv").write_text("arm,seed,update,accuracy\n")
    with pytest.raises(CurveError) as e:
        load_reference_curve(study)
    assert str(e.value) == (f"{study / 'runs.csv'} has no eval lines (a header and no line of values): no run of the "
                            "study has finished; pass the --out folder of a finished `gradprobe study`")


def test_a_study_arm_without_sampled_accuracy_says_what_a_curve_needs(tmp_path):
    study = _runs_csv(tmp_path, header="arm,seed,update,accuracy,accuracy_sampled\n")
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_study(study, accuracy_col="accuracy_sampled")
    assert str(e.value) == (f"{study / 'runs.csv'}: no line of arm 'grpo' holds both an update and an "
                            "'accuracy_sampled' value: a reference curve needs evals at at least 4 distinct update "
                            "counts > 0, or 3 and an eval at update 0 (R0); read the greedy accuracy "
                            "(accuracy_col='accuracy'), or run a copy of the study's plan.toml with `[eval] "
                            "sampled_at = \"all\"` under a new --out")


# ------------------------------------------------------------------------------------ cells too large for a float
@pytest.mark.parametrize("column", ["update", "accuracy"])
def test_a_csv_integer_too_large_for_a_float_is_shown_as_the_file_holds_it(tmp_path, column):
    rows = [(u, a) for u, a in EVALS]
    rows[2] = (HUGE, 0.3) if column == "update" else (20, HUGE)
    path = _csv(tmp_path, "update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in rows))
    with pytest.raises(CurveError) as e:
        load_reference_curve(path)
    assert str(e.value) == (f"{path}, line 4, column {column!r}: {HUGE_SHOWN} is not a finite number (1 such cell(s) "
                            "in that column); fix or delete that line")


def test_a_csv_float_beyond_a_float_is_quoted_as_written_and_a_negative_integer_keeps_its_sign(tmp_path):
    path = _csv(tmp_path, "update,accuracy\n0,0.1\n10,1e400\n20,-" + HUGE + "\n")
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_csv(path)
    assert str(e.value) == (f"{path}, line 3, column 'accuracy': '1e400' (too large for a float) is not a finite "
                            "number (2 such cell(s) in that column); fix or delete that line")
    path.write_text("update,accuracy\n0,0.1\n10,-" + HUGE + "\n")
    with pytest.raises(CurveError, match=f", line 3, column 'accuracy': -{HUGE_SHOWN[:10]}"):
        ReferenceCurve.from_csv(path)


def test_a_study_runs_csv_update_too_large_for_a_float_names_line_and_column(tmp_path):
    study = _runs_csv(tmp_path)
    runs = study / "runs.csv"
    runs.write_text(runs.read_text().replace("grpo,1,30,", f"grpo,1,{HUGE},"))
    with pytest.raises(CurveError) as e:
        load_reference_curve(study)
    assert str(e.value) == (f"{runs}, line 10, column 'update': {HUGE_SHOWN} is not a finite number (1 such cell(s) "
                            "in that column); fix or delete that line")


# ------------------------------------------------------------------------------------------------ seed labels
def test_a_csv_seed_spelled_true_is_refused_naming_line_and_column(tmp_path):
    seeds = ["0", "0", "True", "0", "0"]
    path = _csv(tmp_path, "update,accuracy,seed\n" + "".join(f"{u},{a},{s}\n" for (u, a), s in zip(EVALS, seeds)))
    with pytest.raises(CurveError) as e:
        load_reference_curve(path)
    assert str(e.value) == (f"{path}, line 4, column 'seed': 'True' is a boolean, not a seed label (1 such cell(s) in "
                            "that column); write the run's seed (an integer such as 0) or its name in that cell")


def test_a_csv_seed_column_of_booleans_only_is_refused(tmp_path):
    seeds = ["TRUE", "TRUE", "FALSE", "FALSE", "FALSE"]  # pandas reads this column as booleans
    path = _csv(tmp_path, "update,accuracy,seed\n" + "".join(f"{u},{a},{s}\n" for (u, a), s in zip(EVALS, seeds)))
    with pytest.raises(CurveError, match=r"line 2, column 'seed': 'True' is a boolean, not a seed label \(5 such"):
        ReferenceCurve.from_csv(path)


def test_a_csv_keeps_integer_and_text_seed_labels(tmp_path):
    rows = [(u, a, s) for s in ("run_a", "run_b") for u, a in EVALS]
    path = _csv(tmp_path, "update,accuracy,seed\n" + "".join(f"{u},{a},{s}\n" for u, a, s in rows))
    assert ReferenceCurve.from_csv(path, n_replicates=20).seed_labels == ["run_a", "run_b"]
    path.write_text("update,accuracy,seed\n" + "".join(f"{u},{a},{s}\n" for u, a, s in
                                                        [(u, a, s) for s in (3, 7) for u, a in EVALS]))
    assert ReferenceCurve.from_csv(path, n_replicates=20).seed_labels == ["3", "7"]


@pytest.mark.parametrize("seed, shown", [("True", "'True'"), ("1.5", "'1.5'"), ("-1", "'-1'"), ("", "an empty cell")])
def test_a_study_seed_that_is_no_integer_is_refused(tmp_path, seed, shown):
    study = _runs_csv(tmp_path, seeds=("0", seed))
    with pytest.raises(CurveError) as e:
        load_reference_curve(study)
    assert str(e.value) == (f"{study / 'runs.csv'}, line 7, column 'seed': {shown} is not a seed (5 such line(s) of "
                            "arm 'grpo'): `gradprobe study` writes each run's seed as an integer >= 0, so runs.csv was "
                            f"edited or damaged; restore it from a copy: {study} has no runs/ folder to rebuild it "
                            "from (`gradprobe study PLAN --out DIR` rewrites runs.csv from "
                            "DIR/runs/ARM/seedS/metrics.jsonl)")


def test_a_study_with_integer_seeds_still_reads(tmp_path):
    curve = ReferenceCurve.from_study(_runs_csv(tmp_path, seeds=("0", "12")), n_replicates=20)
    assert curve.seed_labels == ["0", "12"]
    assert len(curve.points) == 10


def test_a_run_config_seed_of_true_is_refused_for_several_runs(tmp_path):
    paths = []
    for i, seed in enumerate([0, True]):
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": a}) + "\n"
                                                   for u, a in EVALS))
        (run / "config.json").write_text(json.dumps({"run": {"seed": seed}}))
        paths.append(run)
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_metrics(paths)
    assert str(e.value) == (f"{paths[1] / 'config.json'}: field 'run.seed' = true is not a seed: `gradprobe train` "
                            "writes the run's seed as an integer >= 0 (JSON, unquoted); write the seed the run was "
                            "trained with")
    (paths[1] / "config.json").write_text(json.dumps({"run": {"seed": 1}}))
    assert ReferenceCurve.from_metrics(paths, n_replicates=20).seed_labels == ["0", "1"]
