"""gradprobe.load_study: an analysis.json that no longer matches runs.csv warns (the CLI's and calib's check), a
damaged one (``{}``, ``[]``) is refused at load naming the file and the fix, and a file given for the folder is told
to pass the folder."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import gradprobe

STUDY = Path(__file__).resolve().parents[2] / "data" / "study_tiny_lr"


@pytest.fixture
def study(tmp_path):
    d = tmp_path / "lr"
    shutil.copytree(STUDY, d, ignore=shutil.ignore_patterns("reanalysis"))
    return d


def test_an_unchanged_study_loads_without_a_stale_warning(study):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = gradprobe.load_study(study)
    assert not [w for w in seen if "does not match" in str(w.message)]
    assert r.analysis.raw["arms"]["grpo"]["updates"]["accuracy"] == pytest.approx(75.8)


def test_a_changed_runs_csv_warns_with_the_differences_and_the_fix(study):
    (study / "eval_items.jsonl.gz").unlink()  # else runs.csv's edited cell is refused against the per-item results
    csv = study / "runs.csv"
    lines = csv.read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\n").split(",")
    col = head.index("accuracy")
    for i, ln in enumerate(lines):
        cells = ln.rstrip("\n").split(",")
        if cells[:3] == ["grpo_2xlr", "0", "20"]:
            cells[col] = "0.1"
            lines[i] = ",".join(cells) + "\n"
    csv.write_text("".join(lines))
    with pytest.warns(UserWarning, match="does not match") as seen:
        gradprobe.load_study(study)
    w = next(w for w in seen if "does not match" in str(w.message))
    msg = str(w.message)
    assert "grpo_2xlr seed 0 at updates = 20" in msg and "10 from runs.csv now" in msg
    assert "gradprobe study --analyze-only --out" in msg and w.filename == __file__


@pytest.mark.parametrize("text, kind", [("{}", "dict"), ("[]", "list")])
def test_a_damaged_analysis_is_refused_at_load(study, text, kind):
    (study / "analysis.json").write_text(text)
    with pytest.raises(ValueError) as e:
        gradprobe.load_study(study)
    msg = str(e.value)
    assert str(study / "analysis.json") in msg and f"a JSON {kind} without 'rankings'" in msg
    assert "gradprobe study --analyze-only --out" in msg and "--overwrite-analysis" in msg


def test_a_file_of_the_study_is_told_to_pass_its_folder(study):
    with pytest.raises(ValueError) as e:
        gradprobe.load_study(study / "study.json")
    msg = str(e.value)
    assert "is a file, not a study folder" in msg and repr(str(study)) in msg and "plan.toml not found" not in msg
