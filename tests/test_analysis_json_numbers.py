"""``calib rows`` reads a study's analysis.json numbers by gradprobe's one JSON-number rule
(:func:`gradprobe.outputs.is_json_number`), and a study's runs.csv cells before comparing it with analysis.json.

Before this change, on a copy of ``data/study_tiny_greso``: ``matched.generated_tokens.budget = true`` gave rows with
budget_value 1.0 and exit 0; NaN or 0 gave the forecaster's "budget_tokens must be > 0" (no file, wrong advice);
``"abc"`` was called "matched.tokens.budget is missing" (a key the file does not use). A per-seed accuracy of
``1e400`` (JSON Infinity) was written as an infinite realized accuracy with exit 0; ``true`` read as 1, ``"76.6"`` as
76.6, a 400-digit integer raised OverflowError, ``"abc"`` said only "could not convert string to float"; a ``per_seed``
of ``true`` raised AttributeError, ``plan_sha256: true`` TypeError, an arm's ``seeds: "abc"`` said only "invalid
literal for int()" and ``seeds: true`` was read as 1. A runs.csv seed of -1 was accepted, and a bad
runs.csv cell of a run the analysis lacks was blamed on the analysis (whose fix, a re-analysis, reads that cell).
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pandas as pd
import pytest

from calib.cli import main
from calib.integrity import StudyFormatError, read_runs
from gradprobe.cli import main as gradprobe_main
from study_helpers import shipped_copy

HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
FIX = ("re-analyse the study with `gradprobe study '{s}/plan.toml' --analyze-only --overwrite-analysis --out '{s}'` "
       "(it rebuilds analysis.json from runs.csv)")
# a shipped copy keeps no runs/: restore runs.csv from a copy (resuming would train every run again)
REBUILD = ("restore it from a copy: {s} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out DIR` "
           "rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")
BUDGET = "a finite number > 0 of generated tokens"
ACCURACY = "an accuracy in points (a finite number in [0, 100]; null for a failed run)"
BOOL = " (a boolean is never read as 1 or 0)"


def _study(tmp_path: Path) -> Path:
    return shipped_copy("study_tiny_greso", tmp_path / "s1")


def _edit_analysis(study: Path, edit) -> None:
    path = study / "analysis.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _rows_error(study: Path, tmp_path: Path, capsys) -> str:
    """calib rows' one error line (exit 2, no rows file written)."""
    out = tmp_path / "rows.csv"
    assert main(["rows", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not out.exists()
    return err.rstrip("\n")


def _set_budget(value):
    return lambda doc: doc["matched"]["generated_tokens"].__setitem__("budget", value)


def _set_seed_1(value):
    return lambda doc: doc["arms"]["greso"]["generated_tokens"]["per_seed"].__setitem__("1", value)


@pytest.mark.parametrize("edit, field, shown, what", [
    (_set_budget(True), "matched.generated_tokens.budget", "true" + BOOL, BUDGET),
    (_set_budget(float("nan")), "matched.generated_tokens.budget", "NaN", BUDGET),
    (_set_budget(0), "matched.generated_tokens.budget", "0", BUDGET),
    (_set_budget("abc"), "matched.generated_tokens.budget", '"abc"', BUDGET),
    (_set_seed_1(float("inf")), "arms.greso.generated_tokens.per_seed.1", "Infinity", ACCURACY),
    (_set_seed_1(True), "arms.greso.generated_tokens.per_seed.1", "true" + BOOL, ACCURACY),
    (_set_seed_1("76.6"), "arms.greso.generated_tokens.per_seed.1", '"76.6"', ACCURACY),
    (_set_seed_1(10 ** 400), "arms.greso.generated_tokens.per_seed.1", HUGE_SHOWN, ACCURACY),
    (_set_seed_1("abc"), "arms.greso.generated_tokens.per_seed.1", '"abc"', ACCURACY),
    (lambda doc: doc["arms"]["greso"]["generated_tokens"].__setitem__("per_seed", True),
     "arms.greso.generated_tokens.per_seed", "true", "an object {seed: accuracy in points}"),
    (lambda doc: doc.__setitem__("plan_sha256", True), "plan_sha256", "true",
     "the plan's sha256 (64 hex digits, text)"),
    (lambda doc: doc.__setitem__("arms", [1]), "arms", "[1]", "an object {arm: its results}"),
    (lambda doc: doc["arms"]["greso"].__setitem__("seeds", "abc"), "arms.greso.seeds", '"abc"',
     "a seed count (a whole number >= 0)"),
    (lambda doc: doc["arms"]["greso"].__setitem__("seeds", True), "arms.greso.seeds", "true" + BOOL,
     "a seed count (a whole number >= 0)")],
    ids=["budget-true", "budget-nan", "budget-zero", "budget-text", "seed-inf", "seed-true", "seed-text-number",
         "seed-huge", "seed-text", "per-seed-true", "sha-true", "arms-list", "seeds-text", "seeds-true"])
def test_calib_rows_refuses_an_analysis_json_field_that_is_no_number_naming_it_and_the_re_analysis(
        tmp_path, capsys, edit, field, shown, what):
    study = _study(tmp_path)
    _edit_analysis(study, edit)
    assert _rows_error(study, tmp_path, capsys) == (
        f"calib rows: error: {study}/analysis.json field {field} is {shown}, not {what}; " + FIX.format(s=study))


def test_a_per_seed_key_that_is_no_seed_is_refused(tmp_path, capsys):
    study = _study(tmp_path)
    _edit_analysis(study, lambda doc: doc["arms"]["greso"]["generated_tokens"]["per_seed"].__setitem__("-1", 75.0))
    assert _rows_error(study, tmp_path, capsys) == (
        f'calib rows: error: {study}/analysis.json field arms.greso.generated_tokens.per_seed key is "-1", not a seed '
        '(a whole number >= 0 such as "0"); ' + FIX.format(s=study))


def test_the_advised_re_analysis_rebuilds_the_damaged_budget_and_calib_rows_then_builds(tmp_path, capsys):
    study = _study(tmp_path)
    _edit_analysis(study, _set_budget(True))  # was read as a budget of 1.0 token, exit 0
    err = _rows_error(study, tmp_path, capsys)
    command = shlex.split(err.split("`")[1])  # the command the message gives, run as a shell reads it
    assert command[:2] == ["gradprobe", "study"]
    assert gradprobe_main(command[1:]) == 0
    assert json.loads((study / "analysis.json").read_text())["matched"]["generated_tokens"]["budget"] == 250000.0
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 0
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == 6 and set(rows["budget_value"]) == {250000.0}


def _edit_runs(study: Path, line: int, column: str, value: str) -> None:
    rows = list(csv.reader((study / "runs.csv").open(newline="")))
    rows[line - 1][rows[0].index(column)] = value
    with (study / "runs.csv").open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def test_a_negative_runs_csv_seed_is_a_bad_cell_not_a_stale_analysis(tmp_path, capsys):
    study = _study(tmp_path)
    _edit_runs(study, 2, "seed", "-1")  # was accepted, and blamed on analysis.json ("3 seed(s) ..., 4 in runs.csv")
    runs = study / "runs.csv"
    assert _rows_error(study, tmp_path, capsys) == (
        f"calib rows: error: {runs}, line 2, column 'seed': -1 is not a seed (a whole number >= 0 such as 0); "
        + REBUILD.format(s=study))
    with pytest.raises(StudyFormatError, match=r"line 2, column 'seed': -1 is not a seed"):
        read_runs(study, ("arm", "seed"))


def test_a_bad_runs_csv_cell_of_a_run_the_analysis_lacks_is_blamed_on_runs_csv_not_the_analysis(tmp_path, capsys):
    study = _study(tmp_path)
    runs = study / "runs.csv"
    lines = runs.read_text().splitlines(keepends=True)
    cells = lines[1].split(",")
    cells[1], cells[3] = "7", "abc"  # grpo seed 7, update 0: generated_tokens "abc"
    runs.write_text("".join(lines) + ",".join(cells))
    assert _rows_error(study, tmp_path, capsys) == (
        f"calib rows: error: {runs}, line {len(lines) + 1}, column 'generated_tokens': 'abc' is not a finite number "
        "(an empty cell means missing); " + REBUILD.format(s=study))
