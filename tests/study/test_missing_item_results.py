"""A study whose per-item results were deleted is not re-analysed as one that "saved no per-item results": its
analysis.json was made with them, so the analysis warns that they are missing, with the fix (a trial user's
finding), and its two_way_reason says so. A study that never saved them keeps the old reason, without a warning."""

import json
import shutil
import warnings
from pathlib import Path

from gradprobe.study.analysis import analyze

REPO = Path(__file__).resolve().parents[2]


def _analyze(study):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = analyze(study, write=False, figures=False)
    return result, [str(w.message) for w in caught]


def test_deleted_per_item_results_are_said_missing_with_the_fix(tmp_path):
    study = tmp_path / "s"
    shutil.copytree(REPO / "data" / "study_tiny", study, ignore=shutil.ignore_patterns("figures"))
    items = json.loads((study / "analysis.json").read_text())["two_way"]["items"]
    (study / "eval_items.jsonl.gz").unlink()
    result, msgs = _analyze(study)
    why = (f"the study's per-item eval results are missing ({study / 'eval_items.jsonl.gz'}, or the run folders' "
           f"eval_items.jsonl): its analysis.json was made with them (two-way intervals over {items} held-out items)")
    assert result["two_way"] is None and result["two_way_reason"] == why
    assert [m for m in msgs if "per-item" in m] == [
        f"{why}; this analysis has no intervals over held-out items: restore eval_items.jsonl.gz from a copy of the "
        "study (`gradprobe study` writes it from the run folders)"]


def test_a_study_that_never_saved_them_keeps_its_reason_and_no_warning(tmp_path):
    study = tmp_path / "s"
    shutil.copytree(REPO / "data" / "study_tiny", study, ignore=shutil.ignore_patterns("figures"))
    (study / "eval_items.jsonl.gz").unlink()
    a = json.loads((study / "analysis.json").read_text())
    a["two_way"] = None
    (study / "analysis.json").write_text(json.dumps(a))
    result, msgs = _analyze(study)
    assert result["two_way_reason"].startswith("the study saved no per-item eval results")
    assert not [m for m in msgs if "per-item" in m]
