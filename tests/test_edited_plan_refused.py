"""A study's plan.toml edited after the study froze it is refused wherever the study is read: the analysis
(``gradprobe study --analyze-only``, with or without the PLAN argument), ``gradprobe.load_study``, ``calib rows``
and a resume, all by the one check :func:`gradprobe.study.folder.check_frozen_plan` (the same message). Read under
the edited plan, the 250k-token numbers were printed as 120k and written with another plan sha256.

``calib rows`` also reads the plan through the analysis's validation (``lr = "fast"`` is refused by both), and
names an arm it leaves out because every run of it failed, instead of dropping it silently."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import gradprobe
from calib.dataset import StudyFormatError, build_rows
from calib_helpers import default_arms, single_thread_blas, synthetic_forecasts, write_study  # noqa: F401
from gradprobe.cli import main as cli_main
from gradprobe.rewards import UnknownRewardError, get_reward
from gradprobe.study.folder import StudyError, check_frozen_plan
from gradprobe.study.freeze import freeze_plan
from gradprobe.study.reading import AnalysisError, frozen_plan
from gradprobe.training.plan import PlanError

DATA = Path(__file__).resolve().parents[1] / "data"
SHIPPED = sorted(p for p in DATA.glob("study_*") if p.is_dir())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _edited_tiny(tmp_path: Path) -> tuple[Path, str, str]:
    """A copy of data/study_tiny whose plan.toml says 120k generated tokens (the study ran 250k); (folder, the
    frozen sha256, the edited sha256)."""
    study = tmp_path / "study"
    shutil.copytree(DATA / "study_tiny", study)
    plan = study / "plan.toml"
    frozen = _sha(plan)
    text = plan.read_text()
    assert "generated_tokens = 250_000" in text
    plan.write_text(text.replace("generated_tokens = 250_000", "generated_tokens = 120_000"))
    return study, frozen, _sha(plan)


def _expected(study: Path, frozen: str, edited: str) -> str:
    """The one refusal every reader gives (check_frozen_plan's message)."""
    return (f"{study / 'plan.toml'} has sha256 {edited[:12]}, but {study / 'study.json'} records the study's frozen "
            f"plan as sha256 {frozen[:12]}: plan.toml was edited after the study froze it, and its runs were trained "
            f"under the frozen plan, so reading them under this one would relabel their numbers; restore "
            f"{study / 'plan.toml'} from a copy of the study (it is the frozen plan), or, to use a changed plan, run "
            f"a copy of it as a new study with a new --out (`gradprobe study CHANGED.toml --out NEW_DIR`)")


def test_analyze_only_refuses_an_edited_plan_with_and_without_the_plan_argument(tmp_path, capsys):
    study, frozen, edited = _edited_tiny(tmp_path)
    before = (study / "analysis.json").read_bytes()
    want = _expected(study, frozen, edited)
    original = tmp_path / "original.toml"  # the frozen plan itself as PLAN: still the edited plan.toml is named
    shutil.copy(DATA / "study_tiny" / "plan.toml", original)
    for argv in (["study", "--analyze-only", "--out", str(study)],
                 ["study", str(study / "plan.toml"), "--analyze-only", "--out", str(study)],
                 ["study", str(original), "--analyze-only", "--out", str(study)],
                 ["study", "--analyze-only", "--out", str(study), "--overwrite-analysis"]):
        assert cli_main(argv) == 2
        out, err = capsys.readouterr()
        assert err == f"gradprobe study: error: {want}\n"
        assert "120,000" not in out and out == ""  # no numbers relabelled
    assert (study / "analysis.json").read_bytes() == before  # nothing written, no reanalysis/ left behind
    assert not (study / "reanalysis").exists() and frozen != edited


def test_load_study_calib_rows_and_resume_refuse_it_with_the_same_message(tmp_path):
    study, frozen, edited = _edited_tiny(tmp_path)
    want = _expected(study, frozen, edited)
    with pytest.raises(AnalysisError) as e:
        gradprobe.load_study(study)
    assert str(e.value) == want
    with pytest.raises(StudyFormatError) as e:
        build_rows(study, forecast_fn=lambda *a, **k: pytest.fail("the forecasts must not be read"))
    assert str(e.value) == want
    with pytest.raises(StudyError) as e:
        check_frozen_plan(study)
    assert str(e.value) == want
    original = tmp_path / "original.toml"  # the plan the study froze: resuming with it finds plan.toml edited
    shutil.copy(DATA / "study_tiny" / "plan.toml", original)
    assert _sha(original) == frozen
    with pytest.raises(StudyError) as e:
        freeze_plan(original, study)
    assert str(e.value) == want
    assert _sha(study / "plan.toml") == edited  # the refusal rewrote nothing


def test_every_shipped_study_holds_its_frozen_plan(tmp_path):
    assert len(SHIPPED) >= 20
    for study in SHIPPED:
        recorded = json.loads((study / "study.json").read_text())["plan_sha256"]
        assert re.fullmatch(r"[0-9a-f]{64}", recorded) and recorded == _sha(study / "plan.toml"), study
        assert check_frozen_plan(study) is None  # compared (the record is valid) and accepted
    loaded = gradprobe.load_study(DATA / "study_tiny")
    assert loaded.plan.sha256 == _sha(DATA / "study_tiny" / "plan.toml")
    # a copy without study.json (nothing recorded to compare with) is read as before; with another record refused
    bare = tmp_path / "bare"
    shutil.copytree(DATA / "study_tiny", bare, ignore=shutil.ignore_patterns("study.json"))
    assert check_frozen_plan(bare) is None
    assert gradprobe.load_study(bare).plan.sha256 == loaded.plan.sha256
    (bare / "study.json").write_text(json.dumps({"plan_sha256": "0" * 64}))
    with pytest.raises(AnalysisError, match=r"has sha256 b6b755233a8f, but .* as sha256 000000000000: "):
        gradprobe.load_study(bare)


def _with_plan_recorded(study: Path) -> None:
    """Record plan.toml's sha256 in study.json and analysis.json (as if the study had been frozen with it)."""
    sha = _sha(study / "plan.toml")
    for name in ("study.json", "analysis.json"):
        data = json.loads((study / name).read_text())
        data["plan_sha256"] = sha
        (study / name).write_text(json.dumps(data))


def test_calib_rows_validates_the_plan_as_the_analysis_does(tmp_path):
    study = write_study(tmp_path / "s")
    assert len(build_rows(study, forecast_fn=synthetic_forecasts)) == 5 * 4  # valid as written
    (study / "plan.toml").write_text((study / "plan.toml").read_text() + '[train]\nlr = "fast"\n')
    _with_plan_recorded(study)
    with pytest.raises(PlanError, match="^train.lr must be a number, got 'fast'$"):
        frozen_plan(study)  # what `gradprobe study --analyze-only` refuses
    with pytest.raises(StudyFormatError) as e:
        build_rows(study, forecast_fn=synthetic_forecasts)
    assert str(e.value) == (f"{study / 'plan.toml'}: train.lr must be a number, got 'fast' (`gradprobe study "
                            "--analyze-only` refuses it likewise); restore the plan the study was frozen with")


def test_calib_rows_reads_unregistered_reward_names_and_leaves_the_registry_as_it_was(tmp_path):
    study = write_study(tmp_path / "s", arms=default_arms(n_extra=2, rng=np.random.default_rng(3)))
    rows = build_rows(study, forecast_fn=synthetic_forecasts)
    assert sorted(set(rows["reward"]))[-2:] == ["user0", "user1"]
    with pytest.raises(UnknownRewardError, match="unknown reward 'user0'"):
        get_reward("user0")  # the stand-in was for the plan check only
    (study / "plan.toml").write_text((study / "plan.toml").read_text().replace("lr_scale = 1.0\n", "lr_scale = -1.0\n",
                                                                               1))
    _with_plan_recorded(study)
    with pytest.raises(StudyFormatError, match=r"plan.toml: arms.grpo.lr_scale must be > 0, got -1.0 \(`gradprobe "):
        build_rows(study, forecast_fn=synthetic_forecasts)


def _all_failed(study: Path, arm: str, *, missing_runs: bool) -> None:
    """``arm``'s runs failed: no rows in runs.csv, no result in analysis.json, 'failed' in study.json."""
    lines = (study / "runs.csv").read_text().splitlines(True)
    (study / "runs.csv").write_text("".join(x for x in lines if not x.startswith(f"{arm},")))
    analysis = json.loads((study / "analysis.json").read_text())
    del analysis["arms"][arm]
    if missing_runs:
        analysis["missing_runs"] = [{"arm": arm, "seed": s, "reason": "its status in study.json is 'failed' (NaN)"}
                                    for s in range(4)]
    (study / "analysis.json").write_text(json.dumps(analysis))
    record = json.loads((study / "study.json").read_text())
    record["runs"] = [{"arm": arm, "seed": s, "status": "failed", "error": f"loss NaN at update {s}"} for s in range(4)]
    (study / "study.json").write_text(json.dumps(record))


def test_calib_rows_names_an_arm_whose_runs_all_failed(tmp_path, caplog):
    study = write_study(tmp_path / "s")
    _all_failed(study, "mc_min", missing_runs=True)
    with caplog.at_level("WARNING", logger="calib.dataset"):
        rows = build_rows(study, forecast_fn=synthetic_forecasts)
    assert sorted(set(rows["arm"])) == ["grpo", "grpo_2xlr", "hybrid_0.5", "mc_value"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{study}: arm(s) 'mc_min' of the plan left out of the rows: analysis.json holds no result of it (every run "
        "of it failed or is missing from runs.csv, so it has no realized accuracy): 'mc_min' (seeds 0, 1, 2, 3: its "
        "status in study.json is 'failed' (NaN)); see analysis.json missing_runs and study.json runs"]
    caplog.clear()
    other = write_study(tmp_path / "t")  # an analysis without missing_runs: study.json's statuses are told
    _all_failed(other, "mc_value", missing_runs=False)
    with caplog.at_level("WARNING", logger="calib.dataset"):
        build_rows(other, forecast_fn=synthetic_forecasts)
    assert len(caplog.records) == 1 and "'mc_value' (seed 0: its status in study.json is 'failed' (loss NaN at " \
        "update 0); seed 1: its status in study.json is 'failed' (loss NaN at update 1); seed 2: " in caplog.text


def test_calib_rows_warns_nothing_when_every_arm_gives_rows(tmp_path, caplog):
    study = write_study(tmp_path / "s", nan_runs=(("mc_min", 1),))
    with caplog.at_level("WARNING", logger="calib.dataset"):
        rows = build_rows(study, forecast_fn=synthetic_forecasts)
    assert caplog.records == [] and len(rows) == 20 and rows["target"].isna().sum() == 1
    _all_failed(study, "mc_min", missing_runs=False)
    with caplog.at_level("WARNING", logger="calib.dataset"):
        build_rows(study, forecast_fn=synthetic_forecasts)
    assert len(caplog.records) == 1 and "arm(s) 'mc_min' of the plan left out of the rows" in caplog.text
