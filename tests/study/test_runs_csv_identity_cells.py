"""A runs.csv cell that names an eval (``arm``, ``seed``, ``update``) and is no eval of a run of the study's frozen
plan is refused, naming the file, the line, the cell and the fix: read as it was, a seed 1 typed ``1.5``, a seed the
plan does not run or an arm typed ``mc_valu`` moved the matched points and the hypotheses (the phantom arm even
ranked), exit 0, with no word of the row. Every reader refuses it: ``load_runs``, ``analyze``, ``load_study``,
``gradprobe study --analyze-only`` and ``gradprobe study --power`` with such a pilot."""

from __future__ import annotations

import shutil

import pytest

import gradprobe
from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import analyze
from gradprobe.study.reading import AnalysisError, load_runs, restore_runs_csv_fix

from study_helpers import PLAN, make_study, set_runs_cells, shipped_copy

ARMS = "grpo, mc_value, grpo_2xlr"
UPDATE = "an update that is no whole number >= 0 (the optimizer updates at that eval)"

# (cell edited on mc_value seed 1's update-1 eval, line 14 of a 2-seed study, its new text, what the refusal says)
CASES = [
    ("seed", "1.5", "a seed that is not one of the plan's seeds (0, 1) at line 14 (arm mc_value, seed 1.5, update 1)"),
    ("seed", "7", "a seed that is not one of the plan's seeds (0, 1) at line 14 (arm mc_value, seed 7, update 1)"),
    ("seed", "one", "a seed that is not one of the plan's seeds (0, 1) at line 14 (arm mc_value, seed one, update 1)"),
    ("arm", "mc_valu",
     f"an arm that is not one of the plan's arms ({ARMS}) at line 14 (arm mc_valu, seed 1, update 1)"),
    ("update", "1.5", f"{UPDATE} at line 14 (arm mc_value, seed 1, update 1.5)"),
    ("update", "-1", f"{UPDATE} at line 14 (arm mc_value, seed 1, update -1)"),
    ("update", "one", f"{UPDATE} at line 14 (arm mc_value, seed 1, update one)"),
]
IDS = [f"{col}={text}" for col, text, _ in CASES]


def _refusal(root, said: str) -> str:
    return (f"{root / 'runs.csv'} has cells that name no eval of the study's runs: {said}; runs.csv holds one row "
            f"per eval of each run (arm x seed) of its frozen plan {root / 'plan.toml'}, so it was edited or damaged "
            "(read as it is, such a row would be another run's eval or a run of its own, moving the matched points, "
            "rankings and tests); put the cell back to the run's own arm, seed or update, or "
            f"{restore_runs_csv_fix(root)}")


def _edited(root, col: str, text: str):
    """A 2-seed hand-made study at ``root`` with mc_value seed 1's update-1 ``col`` cell set to ``text``."""
    make_study(root, seeds=2)
    set_runs_cells(root, {("mc_value", 1, 1, col): text})
    return root


@pytest.mark.parametrize("col, text, said", CASES, ids=IDS)
def test_load_runs_refuses_the_row_naming_its_line_and_the_fix(tmp_path, col, text, said):
    root = _edited(tmp_path / "s", col, text)
    with pytest.raises(AnalysisError) as info:
        load_runs(root)
    assert str(info.value) == _refusal(root, said)


@pytest.mark.parametrize("col, text, said", CASES[:4], ids=IDS[:4])
def test_analyze_and_load_study_refuse_it(tmp_path, col, text, said):
    root = _edited(tmp_path / "s", col, text)
    with pytest.raises(AnalysisError) as info:
        analyze(root, write=False, figures=False, n_resamples=2000)
    assert str(info.value) == _refusal(root, said)
    with pytest.raises(AnalysisError) as info:
        gradprobe.load_study(root)
    assert str(info.value) == _refusal(root, said)
    assert not (root / "analysis.json").exists()


@pytest.mark.parametrize("col, text, said", CASES[:4], ids=IDS[:4])
def test_analyze_only_exits_2_naming_the_row_and_writes_nothing(tmp_path, capsys, col, text, said):
    root = _edited(tmp_path / "s", col, text)
    assert cli_main(["study", "--analyze-only", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"gradprobe study: error: {_refusal(root, said)}\n" in err
    assert not (root / "analysis.json").exists() and not (root / "figures").exists()


def test_the_reviewers_shipped_study_with_seed_1_typed_1_5_is_refused(tmp_path, capsys):
    """data/study_tiny, line 47 (mc_value seed 1, update 5) edited to seed 1.5: it read the matched point at 5
    updates and 125,000 tokens instead of 10 and 250,000, and dense_not_worth_tokens on 3 seeds, exit 0."""
    root = shipped_copy("study_tiny", tmp_path / "bad")
    lines = (root / "runs.csv").read_text().splitlines(keepends=True)
    assert lines[46].startswith("mc_value,1,5,")
    lines[46] = "mc_value,1.5,5," + lines[46][len("mc_value,1,5,"):]
    (root / "runs.csv").write_text("".join(lines))
    assert cli_main(["study", "--analyze-only", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    said = "a seed that is not one of the plan's seeds (0, 1, 2, 3) at line 47 (arm mc_value, seed 1.5, update 5)"
    assert f"gradprobe study: error: {_refusal(root, said)}\n" in err
    assert not (root / "reanalysis").exists()


POWER_PLAN = PLAN.replace("seeds = SEEDS", "seeds = [0, 1]") + '\n[power]\nmin_effect = 1.5\npilot = "pilot"\n'


@pytest.mark.parametrize("col, text, said", CASES[:4], ids=IDS[:4])
def test_power_with_such_a_pilot_is_refused(tmp_path, capsys, col, text, said):
    pilot = _edited(tmp_path / "pilot", col, text)
    plan = tmp_path / "plan.toml"
    plan.write_text(POWER_PLAN)
    assert cli_main(["study", "--power", str(plan)]) == 2
    captured = capsys.readouterr()
    assert f"gradprobe study: error: {_refusal(pilot, said)}\n" in captured.err and "needed:" not in captured.out


def test_the_cell_put_back_is_analysed_as_the_untouched_study(tmp_path):
    """The refusal is of the edited cell only: the same study with the cell put back (or written 1.0, the same
    seed) is analysed, and reads what an untouched copy reads."""
    same = make_study(tmp_path / "same", seeds=2)
    expected = analyze(same, write=False, figures=False, n_resamples=2000)
    assert expected["matched"]["generated_tokens"]["budget"] == 1000.0
    assert {a: e["seeds"] for a, e in expected["arms"].items()} == {"grpo": 2, "mc_value": 2, "grpo_2xlr": 2}
    assert expected["arms"]["mc_value"]["generated_tokens"]["per_seed"] == {0: 35.0, 1: 37.5}  # 14 + s % 2 of 40
    root = _edited(tmp_path / "s", "seed", "1.5")
    with pytest.raises(AnalysisError, match="at line 14 \\(arm mc_value, seed 1.5, update 1\\)"):
        analyze(root, write=False, figures=False, n_resamples=2000)
    for text in ("1", "1.0"):
        shutil.copy(same / "runs.csv", root / "runs.csv")
        set_runs_cells(root, {("mc_value", 1, 1, "seed"): text})
        df = load_runs(root)
        assert str(df["seed"].dtype) == "int64" and sorted(set(df["seed"])) == [0, 1]
        got = analyze(root, write=False, figures=False, n_resamples=2000)
        assert got["matched"] == expected["matched"] and got["rankings"] == expected["rankings"]
        for arm, entry in expected["arms"].items():
            for axis in ("generated_tokens", "updates"):
                assert got["arms"][arm][axis]["per_seed"] == entry[axis]["per_seed"]
                assert got["arms"][arm][axis]["accuracy"] == entry[axis]["accuracy"]
