"""A runs.csv whose running totals (generated_tokens, device_seconds, flops) decrease along a run's evals is refused
naming the file, both lines, both values and the fix (one typo used to move every arm's matched point, blaming "a
run stopped on another budget"); a run whose final eval has a blank accuracy is no read at a budget read at the final
evals (it used to be read at its previous eval, 18% short of the budget, labelled "final")."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.study.analysis import analyze
from gradprobe.study.reading import (AnalysisError, _runs, load_runs, matched_budgets, read_runs,
                                     restore_runs_csv_fix, running_total_decreases)
from study_helpers import make_study

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "study_tiny"


def _set(root: Path, edits: dict) -> list:
    """Write each ``{(data row (0-based, file order), column): value}`` of ``edits`` into root/runs.csv."""
    path = root / "runs.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    for (row, col), value in edits.items():
        table[row + 1][table[0].index(col)] = value
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table)
    return table


def _tail(root: Path) -> str:
    """The end every running-total refusal shares."""
    return ("; each eval records the generated tokens, training device-seconds and FLOPs its run spent up to it, so "
            "along a run's evals (by update) none decreases: runs.csv was edited or damaged (one of the two cells is "
            "wrong, which cannot be told, and read as it is it would move the run's reads and the matched budgets); "
            f"{restore_runs_csv_fix(root)}")


def _shipped(tmp_path) -> Path:
    return Path(shutil.copytree(SHIPPED, tmp_path / "study_tiny", ignore=shutil.ignore_patterns("reanalysis")))


def test_a_typo_in_a_runs_final_tokens_is_refused_not_read_as_every_arms_budget(tmp_path, capsys):
    """The reviewer's repro: mc_value seed 0's final 256359 typed 25635 read every arm at 25,635 tokens."""
    root = _shipped(tmp_path)
    table = _set(root, {(41, "generated_tokens"): "25635"})
    assert table[42][:4] == ["mc_value", "0", "10", "25635"] and table[41][:4] == ["mc_value", "0", "8", "205437"]
    assert main(["study", "--analyze-only", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gradprobe study: error: {root / 'runs.csv'}: a run's running total decreases from one eval to the "
                   "next: generated_tokens 205437 at line 42 (arm mc_value, seed 0, update 8), then 25635 at line 43 "
                   f"(arm mc_value, seed 0, update 10){_tail(root)}\n")
    assert not (root / "reanalysis").exists()


def test_a_decrease_in_the_middle_of_a_run_is_refused_naming_both_lines(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    _set(root, {(2, "generated_tokens"): "50"})  # grpo seed 0, update 5 (line 4): 200 at update 2, then 50
    with pytest.raises(AnalysisError) as e:
        load_runs(root)
    assert str(e.value) == (f"{root / 'runs.csv'}: a run's running total decreases from one eval to the next: "
                            "generated_tokens 200 at line 3 (arm grpo, seed 0, update 2), then 50 at line 4 (arm grpo, "
                            f"seed 0, update 5){_tail(root)}")


@pytest.mark.parametrize("col, value, said", [("device_seconds", "1.5", "device_seconds 2 at line 3 (arm grpo, seed "
                                                                          "0, update 2), then 1.5 at line 4"),
                                              ("flops", "5e8", "flops 2000000000 at line 3 (arm grpo, seed 0, update "
                                                               "2), then 500000000 at line 4")])
def test_a_decreasing_device_seconds_or_flops_is_refused(tmp_path, col, value, said):
    root = make_study(tmp_path / "s", seeds=2)
    _set(root, {(2, col): value})
    with pytest.raises(AnalysisError, match="running total decreases") as e:
        load_runs(root)
    assert f"next: {said} (arm grpo, seed 0, update 5){_tail(root)}" in str(e.value)


def test_a_decrease_across_a_blank_cell_names_the_two_values(tmp_path):
    """A blank cell is skipped (recorded_axes reports it); the values either side of it are compared."""
    root = make_study(tmp_path / "s", seeds=2)
    _set(root, {(2, "generated_tokens"): "", (3, "generated_tokens"): "150"})  # grpo seed 0: 200, blank, 150
    with pytest.raises(AnalysisError) as e:
        load_runs(root)
    assert ("generated_tokens 200 at line 3 (arm grpo, seed 0, update 2), then 150 at line 5 (arm grpo, seed 0, "
            "update 10);") in str(e.value)


def test_an_update_typo_that_moves_an_eval_after_later_ones_is_refused(tmp_path):
    """update is the order of a run's evals: a typo 2 -> 20 puts 200 tokens after update 10's 1010."""
    root = make_study(tmp_path / "s", seeds=2)
    _set(root, {(1, "update"): "20"})
    with pytest.raises(AnalysisError) as e:
        load_runs(root)
    assert ("next: generated_tokens 1010 at line 5 (arm grpo, seed 0, update 10), then 200 at line 3 (arm grpo, "
            "seed 0, update 20); device_seconds 10 at line 5") in str(e.value)


def test_running_total_decreases_names_every_column_and_skips_none(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    df = load_runs(root)
    assert running_total_decreases(df, df.attrs["csv_lines"]) == []
    row = df.index[(df["arm"] == "mc_value") & (df["seed"] == 1) & (df["update"] == 2)][0]
    df.loc[row, ["generated_tokens", "flops"]] = 400
    assert running_total_decreases(df, None) == [
        "generated_tokens 500 at (arm mc_value, seed 1, update 1), then 400 at (arm mc_value, seed 1, update 2)",
        "flops 5000000000 at (arm mc_value, seed 1, update 1), then 400 at (arm mc_value, seed 1, update 2)"]
    line = df.attrs["csv_lines"][row]
    assert line == 15 and running_total_decreases(df, df.attrs["csv_lines"], cut={line})[0] == (
        "generated_tokens 500 at line 14 (arm mc_value, seed 1, update 1), then 400 at line 15 (arm mc_value, seed 1, "
        "update 2) (a cut line: its value may be cut too)")


def test_a_blank_final_accuracy_is_no_read_at_the_final_evals(tmp_path):
    """grpo seed 0's update-10 accuracy blank: it was read at update 5 (500 of the 1000-token budget), labelled
    "final"; now it is read nowhere there, and the other runs as before."""
    root = make_study(tmp_path / "s", seeds=2)
    _set(root, {(3, "accuracy"): ""})
    with pytest.warns(UserWarning, match="one without its final eval's accuracy no read at a budget read at the "
                                         "runs' final evals"):
        df = load_runs(root)
    m = matched_budgets(df)
    reads = read_runs(_runs(df), "generated_tokens", 1000.0, final=True)
    assert reads[("grpo", 0)] == {"status": "blank_accuracy", "rows": None, "w": None, "gap": None,
                                  "allowed": float("inf"), "value": None}
    assert reads[("grpo", 1)]["status"] == "final" and reads[("grpo", 1)]["value"] == pytest.approx(100 * 17 / 40)
    assert m["device_seconds"]["budget"] == 10.0  # grpo seed 0's final eval: not "outside" the run, a blank cell
    at = read_runs(_runs(df), "device_seconds", 10.0)
    assert at[("grpo", 0)]["status"] == "blank_accuracy" and at[("grpo", 0)]["value"] is None


def test_the_analysis_reports_a_blank_final_accuracy_as_not_read(tmp_path, capsys):
    """The reviewer's repro (acc_nan): mc_value seed 0's final accuracy blank."""
    root = _shipped(tmp_path)
    table = _set(root, {(41, "accuracy"): ""})
    assert table[42][:3] == ["mc_value", "0", "10"]
    with pytest.warns(UserWarning, match="blank accuracy cell"):
        result = analyze(root, write=False, figures=False)
    tokens = result["matched"]["generated_tokens"]
    assert tokens["final_eval"] and tokens["reads"] == {"blank_accuracy": 1, "final": 19}
    arm = result["arms"]["mc_value"]["generated_tokens"]
    assert arm["per_seed"][0] is None and arm["seeds"] == 3 and arm["read"] == {"blank_accuracy": 1, "final": 3}
    assert result["arms"]["mc_value"]["updates"]["read"] == {"blank_accuracy": 1, "exact": 3}
    assert "mc_value" not in result["rankings"]["generated_tokens"]
    shipped = json.loads((SHIPPED / "analysis.json").read_text())["arms"]["mc_value"]["generated_tokens"]["per_seed"]
    assert [arm["per_seed"][s] for s in (1, 2, 3)] == [shipped[str(s)] for s in (1, 2, 3)]
