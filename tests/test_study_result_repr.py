"""gradprobe.load_study(...)'s StudyResult prints as one short line, not its DataFrames."""

from __future__ import annotations

from pathlib import Path

from gradprobe.api.study import StudyResult, load_study
from gradprobe.study.report import format_rankings

ROOT = Path(__file__).resolve().parents[1]


def test_study_result_repr_is_one_line_naming_plan_arms_seeds_runs_and_folder():
    folder = ROOT / "data" / "study_tiny"
    r = load_study(folder)
    assert repr(r) == (f"StudyResult(plan='tiny', arms=['grpo', 'mc_value', 'mc_advantage', 'hybrid_0.5', 'grpo_2xlr'], "
                       f"seeds=[0, 1, 2, 3], runs=20, analysis=True, folder={str(folder)!r})")
    assert len(r.runs) == 150  # the table it does not print: 20 runs x their eval points
    bare = StudyResult(folder=Path("/x"), plan=None, runs=None)  # nothing read: still one line
    assert repr(bare) == "StudyResult(plan=None, arms=[], seeds=[], runs=None, analysis=False, folder='/x')"


def test_study_analysis_report_is_the_text_gradprobe_study_prints():
    study = load_study(ROOT / "data" / "study_tiny")
    text = study.analysis.report()
    assert text == format_rankings(study.analysis.raw)
    assert text.startswith("initial policy: 67.60 points (greedy)") and "at matched tokens (250,000)" in text
