"""A study's ``runs.csv`` read as a reference curve (``ReferenceCurve.from_study``: ``gradprobe probe
--reference-curve STUDY``, ``calib rows``) is checked against the study's per-item results as the analysis and
calibration check it (:func:`gradprobe.forecast.study_items.item_accuracy_mismatches`): an accuracy that is not the
mean of its eval's items (an edited runs.csv) is refused with the analysis's message and fix, where the per-item
results exist. Before, the curve was fitted to the edited value (study_tiny with 0.71 edited to 0.81: A 89.8 -> 100).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gradprobe.forecast.curves import CurveError, ReferenceCurve
from gradprobe.study.reading import AnalysisError, load_runs, restore_runs_csv_fix
from study_helpers import make_study, shipped_copy

REPO = Path(__file__).resolve().parents[2]
#: study_tiny's grpo curve as from_study fitted it before the check (the check passes on the shipped file). Compared
#: within FIT_REL: the least-squares fit differs by up to about 3e-6 relative (n_mid) between CPUs (OpenBLAS picks its
#: kernels by CPU: an AMD EPYC with AVX-512 and the machine these were recorded on), far below any edit's effect.
FIT_REL = 1e-5
TINY_PARAMS = {"R0": 67.60000000000001, "A": 89.81733921253166, "n_mid": 57.142736410699946,
               "B": 0.5107347690552185}
CURVE_TAIL = ", and the reference curve is fitted to those accuracies; "


def _tiny(tmp_path) -> Path:
    """A copy of the shipped study_tiny with its per-item results (``eval_items.jsonl.gz``)."""
    return Path(shutil.copytree(REPO / "data" / "study_tiny", tmp_path / "study_tiny",
                                ignore=shutil.ignore_patterns("figures", "probe")))


def _edit(study: Path, line: int, col: str, old: str, new: str) -> None:
    """Cell ``col`` of runs.csv's line ``line`` (1 = header), which holds ``old``, set to ``new``."""
    lines = (study / "runs.csv").read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[line - 1].split(",")
    assert fields[header.index(col)] == old
    fields[header.index(col)] = new
    lines[line - 1] = ",".join(fields)
    (study / "runs.csv").write_text("\n".join(lines) + "\n")


def test_an_edited_accuracy_is_refused_naming_the_line_both_values_and_the_fix(tmp_path):
    study = _tiny(tmp_path)
    _edit(study, 3, "accuracy", "0.71", "0.81")  # grpo seed 0 update 2: 710 of 1000 items correct
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_study(study)
    wrong = (f"{study / 'runs.csv'}: 1 accuracy cell(s) are not the mean of the per-item results the study wrote at "
             "that eval: line 3 (arm grpo, seed 0, update 2): accuracy 0.81 in runs.csv, 0.71 in eval_items.jsonl.gz "
             "(710 of 1000 items correct); the run computed each accuracy from those items and the study writes both "
             "files from the same evals, so they agree to 1e-9 (unless eval_items.jsonl.gz was changed: then restore "
             "that from the study): runs.csv was edited or damaged")
    assert str(e.value) == f"{wrong}{CURVE_TAIL}{restore_runs_csv_fix(study)}"
    with pytest.raises(AnalysisError) as analysis:  # the analysis's own refusal: the same line and fix
        load_runs(study)
    assert str(analysis.value) == f"{wrong}; {restore_runs_csv_fix(study)}"


def test_an_edited_sampled_accuracy_is_refused_when_the_curve_reads_it(tmp_path):
    study = _tiny(tmp_path)
    _edit(study, 2, "accuracy_sampled", "0.58", "0.6")  # grpo seed 0 update 0
    with pytest.raises(CurveError, match=r"line 2 \(arm grpo, seed 0, update 0\): accuracy_sampled 0\.6 in runs\.csv, "
                                         r"0\.58 in eval_items\.jsonl\.gz \(\d+ of \d+ item samples correct\)"):
        ReferenceCurve.from_study(study, accuracy_col="accuracy_sampled")
    # the greedy curve reads no accuracy_sampled cell: it is fitted as before
    assert ReferenceCurve.from_study(study).params == pytest.approx(TINY_PARAMS, rel=FIT_REL)


def test_only_the_arm_the_curve_reads_is_compared(tmp_path):
    study = _tiny(tmp_path)
    lines = (study / "runs.csv").read_text().splitlines()
    n = next(i for i, x in enumerate(lines, 1) if x.startswith("mc_value,0,2,"))
    _edit(study, n, "accuracy", lines[n - 1].split(",")[5], "0.5")
    assert ReferenceCurve.from_study(study).params == pytest.approx(TINY_PARAMS, rel=FIT_REL)
    with pytest.raises(CurveError, match=rf"line {n} \(arm mc_value, seed 0, update 2\): accuracy 0\.5 in runs\.csv"):
        ReferenceCurve.from_study(study, arm="mc_value")


def test_the_unedited_copy_gives_the_curve_it_gave_before(tmp_path):
    study = _tiny(tmp_path)
    curve = ReferenceCurve.from_study(study)
    assert curve.params == pytest.approx(TINY_PARAMS, rel=FIT_REL)
    assert len(curve.points) == 36


def test_run_folder_items_are_checked_and_the_fix_rebuilds_from_them(tmp_path):
    """Per-item results in runs/ARM/seedS/eval_items.jsonl (no eval_items.jsonl.gz): checked the same; the fix
    rebuilds runs.csv from the run folders."""
    study = make_study(tmp_path / "s", seeds=3)
    lines = (study / "runs.csv").read_text().splitlines()
    n = next(i for i, x in enumerate(lines, 1) if x.startswith("grpo,1,5,"))
    _edit(study, n, "accuracy", "0.325", "0.35")  # 13 of 40 items
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_study(study)
    msg = str(e.value)
    assert (f"line {n} (arm grpo, seed 1, update 5): accuracy 0.35 in runs.csv, 0.325 in "
            "runs/ARM/seedS/eval_items.jsonl (13 of 40 items correct)") in msg
    assert msg.endswith(f"{CURVE_TAIL}{restore_runs_csv_fix(study)}") and "rebuild it from the run folders" in msg


def test_a_study_without_per_item_results_is_read_as_before(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "bare")  # no eval_items.jsonl.gz, no runs/
    assert ReferenceCurve.from_study(study).params == pytest.approx(TINY_PARAMS, rel=FIT_REL)
    (study / "analysis.json").unlink()  # else grpo's refitted sigmoid tells the edit (test_analysis_check_edits.py)
    _edit(study, 3, "accuracy", "0.71", "0.81")  # nothing to compare it with: read as it is
    curve = ReferenceCurve.from_study(study)
    assert curve.points["accuracy"].iloc[1] == pytest.approx(81.0)
    shipped = ReferenceCurve.from_study(REPO / "data" / "study_tiny_sparse")  # shipped without per-item results
    assert len(shipped.points) > 0


def test_an_unreadable_per_item_file_leaves_the_curve_unchecked(tmp_path):
    """A damaged eval_items.jsonl.gz is the analysis's refusal, not the curve's: read as without per-item results."""
    study = _tiny(tmp_path)
    (study / "eval_items.jsonl.gz").write_bytes(b"not gzip")
    (study / "analysis.json").unlink()  # else grpo's refitted sigmoid tells the edit (test_analysis_check_edits.py)
    _edit(study, 3, "accuracy", "0.71", "0.81")
    assert ReferenceCurve.from_study(study).points["accuracy"].iloc[1] == pytest.approx(81.0)


@pytest.mark.parametrize("where", ["gz", "run folder"])
def test_a_per_item_line_that_is_no_json_object_is_the_analysis_refusal_not_a_traceback(tmp_path, where):
    """A line of valid JSON that is no object ("[1]") raised TypeError / AttributeError from the per-item reader, a
    traceback of `gradprobe probe --reference-curve STUDY`; it is a damaged file: the curve reads the study unchecked
    and the analysis refuses it naming the file and the line."""
    import gzip

    if where == "gz":
        study = _tiny(tmp_path)
        gz = study / "eval_items.jsonl.gz"
        gz.write_bytes(gzip.compress(b"[1]\n" + gzip.decompress(gz.read_bytes())))
        damaged = gz
    else:
        study = make_study(tmp_path / "s", seeds=3)
        damaged = study / "runs" / "grpo" / "seed1" / "eval_items.jsonl"
        damaged.write_text(damaged.read_text() + "[1]\n")
    assert len(ReferenceCurve.from_study(study).points) > 0
    from gradprobe.study.reading import _item_lines

    with pytest.raises(AnalysisError, match=rf"^{damaged} cannot be read \(ValueError: line \d+ of "
                                            rf"{damaged.name} is JSON list, not an object\): "):
        _item_lines(study)  # what the analysis reads them with (gradprobe.study.analysis)
