"""Whether a study keeps its run folders (:func:`gradprobe.layout.keeps_runs`: ``STUDY/runs`` is a directory), the
clause every fix of a study without them gives for not resuming it (:data:`gradprobe.layout.RETRAIN_CLAUSE`), and the
reason a control arm that never trained gives (:func:`gradprobe.study.never_trained_arms.control_never_trained_why`),
each pinned to the text the messages showed before they were shared."""
from __future__ import annotations

from pathlib import Path

import pytest

from gradprobe.forecast.study_items import restore_runs_csv_fix
from gradprobe.layout import RETRAIN_CLAUSE, keeps_runs, restore_advice, study_probe_advice
from gradprobe.study.never_trained_arms import control_never_trained_why, not_findings
from gradprobe.study.power import detectable_effects

RECORD = {"seed": 0, "cause": "flat", "why": "every group was flat", "updates": 10}
WHY = "the control arm grpo never trained (seed 0: every group was flat (10 updates))"


def _study(tmp_path: Path, runs: str) -> Path:
    """A study folder (its probe/ holds an arms.json, which marks a study's probe) whose ``runs`` is ``runs``:
    "folder", "missing", "file" or "symlink" (to a folder elsewhere)."""
    study = tmp_path / "study"
    (study / "probe").mkdir(parents=True)
    (study / "probe" / "arms.json").write_text("{}\n")
    if runs == "folder":
        (study / "runs").mkdir()
    elif runs == "file":
        (study / "runs").write_text("not a folder\n")
    elif runs == "symlink":
        (tmp_path / "elsewhere").mkdir()
        (study / "runs").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return study


@pytest.mark.parametrize(("runs", "kept"), [("folder", True), ("missing", False), ("file", False), ("symlink", True)])
def test_keeps_runs_reads_whether_runs_is_a_folder(tmp_path, runs, kept):
    study = _study(tmp_path, runs)
    assert keeps_runs(study) is kept
    assert keeps_runs(str(study)) is kept  # a str path as well as a Path


def test_keeps_runs_of_a_missing_study_or_a_dangling_symlink_is_false(tmp_path):
    assert keeps_runs(tmp_path / "no-such-study") is False
    study = tmp_path / "study"
    study.mkdir()
    (study / "runs").symlink_to(tmp_path / "gone", target_is_directory=True)
    assert keeps_runs(study) is False


def test_the_retrain_clause_reads_as_the_messages_did():
    assert RETRAIN_CLAUSE == "would train every run again"


@pytest.mark.parametrize("runs", ["missing", "file"])
def test_a_study_without_a_runs_folder_gets_the_restore_fixes(tmp_path, runs):
    study = _study(tmp_path, runs)
    file = study / "probe" / "probe.json"
    assert study_probe_advice(study, file) == (
        f"this is the probe of a study without run folders ({study} has no runs/: resuming it would train every run "
        f"again): restore {file} from a copy of the study")
    assert restore_advice(study / "probe") == (
        f"restore {file} from a copy of the study ({study} has no runs/: resuming the study to write its probe again "
        "would train every run again)")
    assert restore_runs_csv_fix(study) == (
        f"restore it from a copy: {study} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out DIR` "
        "rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")


def test_a_study_whose_runs_is_a_symlink_to_a_folder_gets_the_resume_fix(tmp_path):
    study = _study(tmp_path, "symlink")
    file = study / "probe" / "probe.json"
    assert study_probe_advice(study, file) == (
        f"this is a study's probe: delete {file} and resume the study with `gradprobe study '{study / 'plan.toml'}' "
        f"--out '{study}'`, which re-runs the missing probe (finished runs are kept)")


def test_control_never_trained_why_names_the_control_arm():
    assert control_never_trained_why("grpo", [RECORD]) == WHY
    two = [RECORD, {**RECORD, "seed": 2, "updates": 4}]
    assert control_never_trained_why("grpo", two) == (
        "the control arm grpo never trained (seed 0: every group was flat (10 updates); seed 2: every group was flat "
        "(4 updates))")


def test_the_readers_of_a_broken_control_give_its_reason():
    entry = {"generated_tokens": {"accuracy": 0.5, "gain_vs_grpo": 1.0, "side_effects": {}}}
    assert not_findings("mc_value", entry, "grpo", {"grpo": [RECORD]}) == {
        "fields": ["generated_tokens.gain_vs_grpo"],
        "reason": f"{WHY}: a run that never trained measures a broken setup: these numbers are kept as read, not as "
                  "findings (the report shows \"never trained\" in their place)"}
    arms = {"grpo": {"generated_tokens": {"accuracy": 0.5}, "never_trained": [RECORD]},
            "mc_value": {"generated_tokens": {"gain_sd": 2.0, "gain_seeds": 3}}}
    effects = detectable_effects(arms)
    assert effects["reason"] == f"not computed: {WHY}"
    assert effects["per_arm"] == {"mc_value": {"sd": None, "seeds": 0, "effect": None,
                                               "reason": f"not computed: {WHY}"}}
