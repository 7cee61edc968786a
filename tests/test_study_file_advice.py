"""A study file's fix resumes the study only where the study keeps its run folders (``runs/``): a study without
them (every shipped study keeps only its tables) would train every run again on resume, so the fix there restores
the file from a copy of the study. Each message is checked on a shipped copy without ``runs/`` and with an empty
``runs/`` (the folder is what the fix reads)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib.integrity import StudyFormatError, read_study_runs
from gradprobe.forecast.curves import ReferenceCurve, load_reference_curve
from gradprobe.forecast.probe_input import file_and_fix
from gradprobe.forecast.study import study_forecasts
from gradprobe.study.reading import AnalysisError, load_runs
from study_helpers import shipped_copy

RUNS = [False, True]
IDS = ["no-runs", "empty-runs"]


def _study(tmp_path: Path, runs: bool) -> Path:
    study = shipped_copy("study_tiny", tmp_path / "s")
    if runs:
        (study / "runs").mkdir()
    return study


def _resume(study: Path, what: str) -> str:
    return f"`gradprobe study '{study / 'plan.toml'}' --out '{study}'`, which {what}"


def _edit_arms(study: Path, arm: str, record: dict) -> None:
    arms = json.loads((study / "probe" / "arms.json").read_text())
    arms[arm] = record
    (study / "probe" / "arms.json").write_text(json.dumps(arms))


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_an_arms_json_record_without_entry_names_the_study_fix(tmp_path, runs):
    study = _study(tmp_path, runs)
    _edit_arms(study, "mc_value", {"lr_scale": 1.0})
    with pytest.raises(ValueError) as e:
        study_forecasts(study, n_draws=10)
    fix = (f"resume the study with {_resume(study, 'writes it again')} (finished runs and a finished probe are kept)"
           if runs else f"restore it from a copy of the study ({study} has no runs/: resuming the study to write it "
                        "again would train every run again)")
    assert str(e.value) == (f"{study / 'probe' / 'arms.json'} record {{'lr_scale': 1.0}} has neither 'probe_entry' "
                            f"nor 'reward'; {fix}")  # was "... `gradprobe study` on the study folder again"


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_a_probe_without_an_arm_loss_type_entry_names_the_study_fix(tmp_path, runs):
    study = _study(tmp_path, runs)
    _edit_arms(study, "mc_value", {"reward": "mc_value", "loss_type": "dr_grpo", "probe_entry": "mc_value@dr_grpo",
                                   "lr_scale": 1.0})
    with pytest.raises(ValueError) as e:
        study_forecasts(study, n_draws=10)
    file = study / "probe" / "probe.json"
    fix = (f"this is a study's probe: delete {file} and resume the study with "
           f"{_resume(study, 're-runs the missing probe')} (finished runs are kept)" if runs else
           f"this is the probe of a study without run folders ({study} has no runs/: resuming it would train every "
           f"run again): restore {file} from a copy of the study")
    assert str(e.value) == (f"{study}/probe/probe.json has no entry for arm(s) {{'mc_value': 'mc_value@dr_grpo'}} "
                            "(probed: ['hybrid_0.5', 'mc_advantage', 'mc_value', 'outcome']): it was written before "
                            f"the probe estimated the arms' loss types; {fix}")


def _runs_fix(study: Path, runs: bool) -> str:
    """restore_runs_csv_fix's two answers for ``study``."""
    if runs:
        return (f"rebuild it from the run folders: `gradprobe study '{study / 'plan.toml'}' --out '{study}'` rewrites "
                f"runs.csv from {study / 'runs'}/ARM/seedS/metrics.jsonl without redoing the finished runs "
                "(--analyze-only only reads runs.csv)")
    return (f"restore it from a copy: {study} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out "
            "DIR` rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")


def _edit_first_line(study: Path, arm: str, column: str, value: str, *, duplicate: bool = False) -> int:
    """Set ``column`` of ``arm``'s first runs.csv line to ``value`` (``duplicate``: insert the edited line after the
    original instead); returns that line's index (0 = the header)."""
    lines = (study / "runs.csv").read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(f"{arm},"))
    cells = lines[i].split(",")
    cells[lines[0].split(",").index(column)] = value
    lines[i + duplicate:i + 1] = [",".join(cells)]  # replaced, or inserted after it
    (study / "runs.csv").write_text("\n".join(lines) + "\n")
    return i


def _bad_seed_refusal(tmp_path: Path, runs: bool, seed: str, read, error: type[Exception]) -> tuple[Path, int, str]:
    """A shipped copy (``runs``: with an empty runs/) whose grpo arm's first runs.csv line has seed ``seed``: the study,
    that line's index (0 = the header) and the message of the ``error`` that ``read(study)`` raises."""
    study = _study(tmp_path, runs)
    i = _edit_first_line(study, "grpo", "seed", seed)
    with pytest.raises(error) as e:
        read(study)
    return study, i, str(e.value)


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_a_study_seed_that_is_no_integer_names_the_runs_csv_fix(tmp_path, runs):
    study, i, message = _bad_seed_refusal(tmp_path, runs, "1.5", load_reference_curve, Exception)
    assert message.endswith("so runs.csv was edited or damaged; " + _runs_fix(study, runs))
    assert message.startswith(f"{study / 'runs.csv'}, line {i + 1}, column 'seed': '1.5' is not a seed")


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_one_eval_on_two_lines_names_the_runs_csv_fix(tmp_path, runs):
    study = _study(tmp_path, runs)
    _edit_first_line(study, "grpo", "accuracy", "0.987654", duplicate=True)
    with pytest.raises(Exception) as e:
        ReferenceCurve.from_study(study, arm="grpo", n_replicates=20)
    assert str(e.value).endswith("which line is right cannot be told: " + _runs_fix(study, runs))


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_calib_names_the_runs_csv_fix_of_the_study(tmp_path, runs):
    study, i, message = _bad_seed_refusal(tmp_path, runs, "True", read_study_runs, StudyFormatError)
    csv = study / "runs.csv"
    fix = _runs_fix(study, runs)  # gradprobe's own (restore_runs_csv_fix), as the curve reader's
    assert message == f"{csv}, line {i + 1}, column 'seed': 'True' is not a seed (a whole number >= 0 such as 0); {fix}"


@pytest.mark.parametrize("runs", RUNS, ids=IDS)
def test_an_analysed_study_without_runs_csv_names_the_fix(tmp_path, runs):
    study = _study(tmp_path, runs)
    (study / "runs.csv").unlink()
    with pytest.raises(AnalysisError) as e:
        load_runs(study)
    fix = (f"run `gradprobe study PLAN --out '{study}'` first" if runs else
           f"restore it from a copy: {study} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out DIR` "
           "rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")  # was: run the whole study again
    assert str(e.value) == f"{study / 'runs.csv'} does not exist; {fix}"


def test_the_probe_fix_without_a_file_names_the_study_without_runs():
    assert file_and_fix(None) == ("probe.json", (
        "re-run the probe (`gradprobe probe --out DIR`); for a study's probe, delete STUDY/probe/probe.json and resume "
        "the study with `gradprobe study STUDY/plan.toml --out STUDY` (finished runs are kept); for a study without "
        "runs/ (a shipped study keeps only its tables), where resuming would train every run again, restore "
        "STUDY/probe/probe.json from a copy of the study"))
