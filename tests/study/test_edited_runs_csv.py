"""An edited runs.csv accuracy is caught, by the analysis and by calib alike.

A trial user set the accuracy of ``mc_value,0,8`` to 0.946 and of ``mc_value,0,10`` to 0.941 in a copy of
``data/study_tiny``: ``gradprobe study --analyze-only`` ranked mc_value first at matched tokens (79.03, +0.65; it was
-4.35) with no warning that the shipped analysis.json no longer matches runs.csv (it compared only arms, seeds per arm
and the plan sha256), and ``calib rows`` kept analysis.json's realized -4.7 without looking at runs.csv's values.

Now each runs.csv accuracy is checked against the per-item results of its eval (the mean of the 0/1 items, which the
run computed it from: :func:`gradprobe.study.reading.item_accuracy_mismatches`, one check for the analysis and calib),
and analysis.json's reads are compared with runs.csv's reads now (:func:`gradprobe.study.coverage.changed_reads`),
which is what tells an edit in a study without per-item results.
"""

from __future__ import annotations

import glob
import json
import shutil
import warnings
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import reading
from gradprobe.study.coverage import stale_analysis
from gradprobe.study.reading import AnalysisError, load_runs

REPO = Path(__file__).resolve().parents[2]
EDITS = {("mc_value", "0", "8"): "0.946", ("mc_value", "0", "10"): "0.941"}  # were 0.746 and 0.741


def _study(tmp_path, name="study_tiny", items=True) -> Path:
    """A copy of a shipped study (figures left out; per-item results removed unless ``items``)."""
    study = Path(shutil.copytree(REPO / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures")))
    if not items:
        (study / "eval_items.jsonl.gz").unlink()
    return study


def _edit(study: Path, edits: dict, column: str = "accuracy") -> list[int]:
    """Set ``column`` of the runs.csv lines (arm, seed, update) -> text; returns the edited line numbers."""
    lines = (study / "runs.csv").read_text().splitlines()
    col = lines[0].split(",").index(column)
    done = []
    for n, line in enumerate(lines[1:], 2):
        f = line.split(",")
        if tuple(f[:3]) in edits:
            f[col] = edits[tuple(f[:3])]
            lines[n - 1] = ",".join(f)
            done.append(n)
    assert len(done) == len(edits)
    (study / "runs.csv").write_text("\n".join(lines) + "\n")
    return done


def _items_message(study: Path) -> str:
    return (f"{study}/runs.csv: 2 accuracy cell(s) are not the mean of the per-item results the study wrote at that "
            "eval: line 42 (arm mc_value, seed 0, update 8): accuracy 0.946 in runs.csv, 0.746 in eval_items.jsonl.gz "
            "(746 of 1000 items correct); line 43 (arm mc_value, seed 0, update 10): accuracy 0.941 in runs.csv, "
            "0.741 in eval_items.jsonl.gz (741 of 1000 items correct); the run computed each accuracy from those "
            "items and the study writes both files from the same evals, so they agree to 1e-9 (unless "
            "eval_items.jsonl.gz was changed: then restore that from the study): runs.csv was edited or damaged")


def test_the_trial_edit_is_refused_by_the_analysis_naming_the_lines_runs_updates_and_both_values(tmp_path, capsys):
    study = _study(tmp_path)
    assert _edit(study, EDITS) == [42, 43]
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 2  # was 0, mc_value ranked first
    err = capsys.readouterr().err
    assert f"gradprobe study: error: {_items_message(study)}; restore it from a copy: {study} has no runs/" in err
    assert not (study / "reanalysis").exists()  # refused before anything was written


def test_calib_rows_refuses_the_same_edit_with_the_same_line(tmp_path):
    from calib.dataset import StudyFormatError, build_rows

    study = _study(tmp_path)
    _edit(study, EDITS)
    with pytest.raises(StudyFormatError) as info:
        build_rows(study)  # was 20 rows, mc_value seed 0 realized 74.1, target -4.7 (analysis.json's)
    assert str(info.value).startswith(_items_message(study) + ", and calibration reads the accuracies; restore it")


def test_an_edited_sampled_accuracy_is_checked_against_every_sample(tmp_path):
    study = _study(tmp_path)
    [line] = _edit(study, {("mc_value", "0", "10"): "0.7"}, "accuracy_sampled")  # was 0.639
    with pytest.raises(AnalysisError) as info:
        load_runs(study)
    assert (f"line {line} (arm mc_value, seed 0, update 10): accuracy_sampled 0.7 in runs.csv, 0.639 in "
            "eval_items.jsonl.gz (639 of 1000 item samples correct)") in str(info.value)


def test_without_per_item_results_the_stale_analysis_is_named_by_run_point_and_eval(tmp_path):
    """No per-item results to check against: analysis.json's own reads tell the edit (update 10 is read at both
    matched points; update 8 is read by none, and analysis.json records nothing else to tell it by)."""
    from calib.dataset import StudyFormatError, build_rows

    study = _study(tmp_path, items=False)
    _edit(study, EDITS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = stale_analysis(study, load_runs(study))
    assert diffs == [
        "the accuracy analysis.json reads differs from runs.csv's now for 1 run(s): mc_value seed 0 at updates = 10: "
        "74.1 points in analysis.json, 94.1 from runs.csv now (update 10: accuracy 0.941); at generated_tokens = "
        "250,000: 74.1 points in analysis.json, 94.1 from runs.csv now (update 10: accuracy 0.941)"]
    with pytest.raises(StudyFormatError) as info:
        build_rows(study)
    msg = str(info.value)
    assert msg.startswith(f"{study}: analysis.json does not match runs.csv ({diffs[0]}); runs.csv changed after the "
                          "analysis: re-analyse the study with `gradprobe study --analyze-only --overwrite-analysis")
    assert f"if it was edited since, restore it from a copy: {study} has no runs/ folder" in msg


def test_an_edited_initial_accuracy_is_named_by_seed(tmp_path):
    study = _study(tmp_path, items=False)
    _edit(study, {("grpo", "1", "0"): "0.7"})  # 0.676 at update 0 for every arm and seed: the mean moves by 0.48
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        [diff] = stale_analysis(study, load_runs(study))
    assert diff == ("the accuracy analysis.json reads differs from runs.csv's now for 1 run(s): seed 1 at update 0 "
                    "(initial.per_seed, the mean over the arms): 67.6 points in analysis.json, 68.08 from runs.csv now")


def test_the_cli_warns_that_analysis_json_no_longer_matches(tmp_path, capsys):
    """The README's promise: the re-analysis beside a shipped analysis.json warns when runs.csv changed."""
    study = _study(tmp_path, "study_tiny_sparse")  # shipped without per-item results
    _edit(study, {("grpo", "2", "57"): "0.5"})  # was 0.794: grpo seed 2's final eval
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    err = capsys.readouterr().err
    assert (f"gradprobe study: warning: {study}/analysis.json does not match {study}/runs.csv (the accuracy "
            "analysis.json reads differs from runs.csv's now for 1 run(s): grpo seed 2 at ") in err
    assert "79.4 points in analysis.json, 50 from runs.csv now (update 57: accuracy 0.5)" in err


@pytest.mark.parametrize("study", sorted(Path(p).name for p in glob.glob(str(REPO / "data" / "study_*"))))
def test_every_shipped_study_agrees_with_its_items_and_its_analysis(study):
    """The checks pass on every shipped study: each runs.csv accuracy is its items' mean, and each analysis.json read
    is runs.csv's read (nothing warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = load_runs(REPO / "data" / study)
    assert stale_analysis(REPO / "data" / study, df) == []
    analysis = json.loads((REPO / "data" / study / "analysis.json").read_text())
    assert analysis["matched"]["generated_tokens"]["recorded"]  # the token reads were compared


def test_load_runs_reads_the_per_item_results_once_for_both_checks(tmp_path, monkeypatch):
    study = _study(tmp_path)
    calls = []
    real = reading._item_lines
    monkeypatch.setattr(reading, "_item_lines", lambda d: calls.append(d) or real(d))
    load_runs(study)
    assert len(calls) == 1
    from calib.integrity import read_study_runs

    calls.clear()
    runs, cut = read_study_runs(study)
    assert len(calls) == 1 and list(runs.columns) == ["arm", "seed", "update", "generated_tokens", "accuracy"]


def test_a_damaged_analysis_json_is_named_by_analyze_only(tmp_path, capsys):
    """A truncated analysis.json was kept "as it is" with no word; calib refused the study only later."""
    study = _study(tmp_path)
    text = (study / "analysis.json").read_text()
    (study / "analysis.json").write_text(text[:500])
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    err = capsys.readouterr().err
    assert (f"gradprobe study: warning: {study}/analysis.json is damaged (not valid JSON: ") in err
    assert (f"so calib refuses this study; run `gradprobe study --analyze-only --out '{study}' --overwrite-analysis` "
            "to rewrite it") in err
    assert (study / "analysis.json").read_text() == text[:500]  # kept: the re-analysis goes to reanalysis/
