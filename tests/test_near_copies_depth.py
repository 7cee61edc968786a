"""One source for rules that were copied: a study folder's plan sha256 (gradprobe.study.folder.study_plan_sha, read
by freeze_plan and `gradprobe study --analyze-only PLAN`), a reference curve's free parameters
(gradprobe.forecast.curve_fit.free_parameters) and the refusal for too few evals, matched by its class
(TooFewEvalsError), not by its text. No training."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pytest

from forecast_helpers import metrics_log
from gradprobe.cli import main as cli_main
from gradprobe.forecast.curve_fit import (CurveError, TooFewEvalsError, fit_needs, fit_sigmoid, free_parameters,
                                          too_few_evals)
from gradprobe.forecast.curves import ReferenceCurve
from gradprobe.study.folder import StudyError, study_plan_sha
from gradprobe.study.freeze import freeze_plan

from study_helpers import make_study, toy_plan, write_plan


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- 1. a study's plan sha256

def test_study_plan_sha_reads_study_json_first_then_plan_toml(tmp_path):
    (tmp_path / "plan.toml").write_bytes(b"name = 'x'\n")
    assert study_plan_sha(tmp_path) == (_sha(b"name = 'x'\n"), tmp_path / "plan.toml")
    (tmp_path / "study.json").write_text(json.dumps({"plan_sha256": "abc123"}))
    assert study_plan_sha(tmp_path) == ("abc123", tmp_path / "study.json")
    for record in ('{"plan_sha256": 12345}', '{"plan_sha256": ""}', "[1, 2]", "not json"):  # no usable record
        (tmp_path / "study.json").write_text(record)
        assert study_plan_sha(tmp_path) == (_sha(b"name = 'x'\n"), tmp_path / "plan.toml"), record
    (tmp_path / "plan.toml").unlink()
    assert study_plan_sha(tmp_path) == (None, tmp_path / "plan.toml")


def test_freeze_refuses_a_folder_that_records_no_plan_in_one_line(tmp_path):
    plan = write_plan(tmp_path, toy_plan("norecord", seeds=(0,)))
    out = tmp_path / "study"
    out.mkdir()
    (out / "study.json").write_text(json.dumps({"runs": []}))  # no plan_sha256, and no plan.toml beside it
    with pytest.raises(StudyError) as e:
        freeze_plan(plan, out)
    assert str(e.value) == (
        f"{out / 'study.json'} records no plan_sha256 and {out / 'plan.toml'} does not exist: which plan this study "
        f"froze cannot be told; restore {out / 'plan.toml'} (or {out / 'study.json'}) from a copy of the study, or "
        "run the plan with a new --out")
    assert sorted(p.name for p in out.iterdir()) == ["study.json"]  # nothing written


@pytest.mark.parametrize("bad", [12345, "", "abc", None, True])
def test_freeze_refuses_a_damaged_plan_sha256_instead_of_checking_plan_toml_against_itself(tmp_path, bad):
    """A study.json whose plan_sha256 is no sha256 cannot say which plan the study froze: reading plan.toml's sha256
    instead would let an edited plan.toml resume the study, so the damage is refused (nothing written)."""
    plan = write_plan(tmp_path, toy_plan("numbersha", seeds=(0,)))
    out = tmp_path / "study"
    freeze_plan(plan, out)
    record = json.loads((out / "study.json").read_text())
    (out / "study.json").write_text(json.dumps({**record, "plan_sha256": bad}))  # hand-edited: not a sha256
    edited = write_plan(tmp_path, toy_plan("numbersha", seeds=(0, 1)), "edited.toml")
    (out / "plan.toml").write_bytes(edited.read_bytes())  # and the frozen copy replaced by another plan
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for candidate in (plan, edited):
        with pytest.raises(StudyError) as e:
            freeze_plan(candidate, out)
        assert str(e.value).startswith(f"{out / 'study.json'} field plan_sha256 is {json.dumps(bad)}, not the hex "
                                       "sha256 of the frozen plan: the file is damaged")
        assert "restore it from a copy" in str(e.value) and "\n" not in str(e.value)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_analyze_only_with_a_plan_sha256_that_is_no_text_names_the_missing_plan_toml(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=2)
    plan = write_plan(tmp_path, (study / "plan.toml").read_text(), "p.toml")
    (study / "plan.toml").unlink()
    (study / "study.json").write_text(json.dumps({"plan_sha256": 12345}))
    assert cli_main(["study", str(plan), "--analyze-only", "--out", str(study)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe study: error: {study / 'plan.toml'} does not exist: the analysis needs the "
                          "study's frozen plan") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (study / "analysis.json").exists()


# ----------------------------------------------------------------------------- 3. the fit's free parameters

def test_free_parameters_are_the_ones_the_fit_fits_and_fit_needs_counts():
    assert free_parameters(r0_fixed=False, b_fixed=None) == ("R0", "A", "n_mid", "B")
    assert free_parameters(r0_fixed=True, b_fixed=None) == ("A", "n_mid", "B")
    assert free_parameters(r0_fixed=False, b_fixed=1.0) == ("R0", "A", "n_mid")
    assert free_parameters(r0_fixed=True, b_fixed=1.0) == ("A", "n_mid")
    assert fit_needs([0, 10, 20, 30]) == (3, 3) and fit_needs([10, 20], B=1.0) == (2, 3)
    n = np.array([0.0, 10, 20, 40, 80, 0, 10, 20, 40, 80])
    y = 60 + 20 * n / (n + 20)
    fit = fit_sigmoid(n, y, r0=60.0, b_fixed=None)
    assert tuple(k for k, v in fit.status.items() if v != "fixed") == ("A", "n_mid", "B")
    assert fit.status["R0"] == "fixed" and set(fit.se) == {"A", "n_mid", "B"}


# ----------------------------------------------------------------------------- 4. the too-few-evals refusal

TOO_FEW_0_10_20 = ("the curve has evals at 2 distinct update count(s) > 0{src} and the fit has 3 free parameters (A, "
                   "n_mid, B): it needs evals at at least 3 distinct update counts > 0; fix it")


def test_too_few_evals_raise_their_own_class_with_the_same_text():
    assert too_few_evals([0, 10, 20, 30], None, "fix it") is None
    with pytest.raises(TooFewEvalsError) as e:
        too_few_evals([0, 10, 20, 0, 10, 20], None, "fix it")
    assert isinstance(e.value, CurveError) and str(e.value) == TOO_FEW_0_10_20.format(src="")
    assert str(e.value.naming("run A")) == TOO_FEW_0_10_20.format(src=" in run A")
    copy = pickle.loads(pickle.dumps(e.value))  # a worker's refusal keeps what it judged
    assert type(copy) is TooFewEvalsError and str(copy) == str(e.value) and copy.eval_hint == "fix it"
    assert copy.updates.tolist() == [0, 10, 20, 0, 10, 20] and copy.B is None
    with pytest.raises(TooFewEvalsError, match=r"\(A, n_mid, B, R0\): it needs evals at at least 4 distinct"):
        ReferenceCurve(updates=[10, 20, 30], accuracy=[70, 75, 77])


def test_a_reader_names_its_files_in_the_refusal_by_its_class(tmp_path):
    path = metrics_log(tmp_path / "metrics.jsonl", updates=(0, 2, 5))
    with pytest.raises(TooFewEvalsError) as e:
        ReferenceCurve.from_metrics(path)
    assert str(e.value).startswith("the curve has evals at 2 distinct update count(s) > 0 in metrics.jsonl of 1 "
                                   f"run(s) ({path}) and the fit has 3 free parameters (A, n_mid, B)")
