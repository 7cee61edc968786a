"""analysis.json must match runs.csv; the same run read from two studies is named (warned, or refused for a subset)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from calib.cli import main
from calib.dataset import DuplicateRunsWarning, StudyFormatError, build_rows, build_rows_many
from calib.integrity import duplicate_runs
from calib_helpers import single_thread_blas, synthetic, synthetic_forecasts, write_study  # noqa: F401 (fixtures)

DATA = Path(__file__).resolve().parents[2] / "data"
FIX = "gradprobe study --analyze-only --overwrite-analysis --out {}"


def _drop_seed(study: Path, seed: int, arm: str | None = None) -> None:
    df = pd.read_csv(study / "runs.csv")
    keep = ~((df["seed"] == seed) & ((df["arm"] == arm) if arm else True))
    df[keep].to_csv(study / "runs.csv", index=False)


def test_seeds_dropped_from_runs_csv_only_are_refused_naming_the_folder_and_the_fix(tmp_path, synthetic, capsys):
    study = write_study(tmp_path / "s")
    build_rows(study)  # consistent as written
    _drop_seed(study, 3)
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    msg = str(e.value)
    assert msg.startswith(f"{study}: analysis.json does not match runs.csv (")
    assert "mc_value: 4 seed(s) in analysis.json, 3 in runs.csv (seeds [0, 1, 2])" in msg
    assert "analysis.json reads seed(s) [3] that runs.csv does not hold" in msg
    assert msg.endswith(f"`{FIX.format(study)}`")
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not match runs.csv" in err and not (tmp_path / "rows.csv").exists()


def test_an_arm_dropped_from_runs_csv_and_a_missing_runs_csv_are_refused(tmp_path):
    study = write_study(tmp_path / "s")
    df = pd.read_csv(study / "runs.csv")
    df[df["arm"] != "mc_min"].to_csv(study / "runs.csv", index=False)
    with pytest.raises(StudyFormatError, match=r"arm\(s\) \['mc_min'\] only in analysis.json"):
        build_rows(study, forecast_fn=synthetic_forecasts)
    (study / "runs.csv").unlink()
    with pytest.raises(StudyFormatError, match=r"runs.csv is missing; calibration checks analysis.json against it"):
        build_rows(study, forecast_fn=synthetic_forecasts)


def test_an_analysis_of_another_plan_is_refused(tmp_path):
    study = write_study(tmp_path / "s")
    doc = json.loads((study / "analysis.json").read_text())
    doc["plan_sha256"] = "ab" * 32
    (study / "analysis.json").write_text(json.dumps(doc))
    with pytest.raises(StudyFormatError, match=r"analysis.json was made for plan sha256 abababababab, but study.json "
                                               r"records [0-9a-f]{12}; re-analyse"):
        build_rows(study, forecast_fn=synthetic_forecasts)


def test_a_copy_of_a_shipped_study_with_seeds_dropped_is_refused(tmp_path):
    study = tmp_path / "study_tiny"
    shutil.copytree(DATA / "study_tiny", study, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    _drop_seed(study, 3, arm="mc_value")
    with pytest.raises(StudyFormatError, match=r"mc_value: 4 seed\(s\) in analysis.json, 3 in runs.csv"):
        build_rows(study)


def _shift_updates(study: Path, arm: str) -> None:
    """The arm's evals move to other updates (only update 0 stays common with the original)."""
    df = pd.read_csv(study / "runs.csv")
    df.loc[(df["arm"] == arm) & (df["update"] > 0), "update"] += 0.5
    df.to_csv(study / "runs.csv", index=False)


def _bump(study: Path, arm: str, seed: int, points: float) -> None:
    """Another run of ``arm``/``seed``: its accuracy after update 0 ``points`` higher in runs.csv and, as a
    re-analysis would read it, in analysis.json (consistent: the analysis-vs-runs check passes)."""
    doc = json.loads((study / "analysis.json").read_text())
    doc["arms"][arm]["tokens"]["per_seed"][str(seed)] += points
    (study / "analysis.json").write_text(json.dumps(doc))
    df = pd.read_csv(study / "runs.csv")
    df.loc[(df["arm"] == arm) & (df["seed"] == seed) & (df["update"] > 0), "accuracy"] += points / 100
    df.to_csv(study / "runs.csv", index=False)


def test_runs_shared_by_two_studies_are_warned_about_naming_both_and_the_runs(tmp_path):
    a, b = write_study(tmp_path / "a", seed=0), write_study(tmp_path / "b", seed=0)  # the same runs
    for seed in (0, 1, 2, 3):
        _bump(b, "mc_min", seed, 1.0)  # another realized accuracy: another run
    _shift_updates(b, "mc_value")  # same final accuracy, but no common eval after update 0: not shown the same
    with pytest.warns(DuplicateRunsWarning) as rec:
        rows = build_rows_many([a, b], forecast_fn=synthetic_forecasts)
    assert len(rows) == 40  # counted, as warned
    msg = str(rec[0].message)
    shared = [f"{arm}/seed{s}" for arm in ("grpo", "grpo_2xlr", "hybrid_0.5") for s in range(4)]
    assert f"{a} and {b} share 12 run(s): {', '.join(sorted(shared))}." in msg
    assert "mc_min" not in msg and "mc_value" not in msg


def test_a_run_with_another_realized_accuracy_is_not_shared_though_its_runs_csv_curve_is(tmp_path):
    a, b = write_study(tmp_path / "a", seed=0), write_study(tmp_path / "b", seed=0)  # the same runs, same curves
    fa, fb = build_rows(a, forecast_fn=synthetic_forecasts), build_rows(b, forecast_fn=synthetic_forecasts)
    fb.loc[fb["arm"] == "mc_min", "realized"] += 1.0  # only the realized accuracy differs (not runs.csv)
    (sa, sb, runs), = duplicate_runs([fa, fb], [a, b])
    assert (sa, sb) == (str(a), str(b))
    assert runs == sorted(f"{arm}/seed{s}" for arm in ("grpo", "grpo_2xlr", "hybrid_0.5", "mc_value") for s in range(4))


def test_distinct_studies_give_no_warning(tmp_path):
    studies = [write_study(tmp_path / n, seed=i) for i, n in enumerate("ab")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(build_rows_many(studies, forecast_fn=synthetic_forecasts)) == 40


def test_a_study_all_of_whose_runs_are_in_another_is_refused(tmp_path):
    a, b = write_study(tmp_path / "a", seed=0), write_study(tmp_path / "b", seed=0)
    with pytest.raises(StudyFormatError, match=rf"every run of {a} \(20 runs\) is also read from {b} .*pass only "
                                               rf"one of them \(e.g. drop {a}\)"):
        build_rows_many([a, b], forecast_fn=synthetic_forecasts)


def test_the_shipped_granularity_studies_overlap_and_tiny_and_lr_share_retrained_arms():
    grain = [DATA / "study_reward_granularity", DATA / "study_tiny_granularity"]
    with pytest.raises(StudyFormatError, match=rf"every run of {grain[1]} \(12 runs\) is also read from {grain[0]}"):
        build_rows_many(grain)
    tiny = [DATA / "study_tiny", DATA / "study_tiny_lr"]
    with pytest.warns(DuplicateRunsWarning):
        frames = [build_rows(d) for d in tiny]
        build_rows_many(tiny)
    (sa, sb, runs), = duplicate_runs(frames, tiny)
    assert (sa, sb) == tuple(map(str, tiny))
    assert runs == [f"{arm}/seed{s}" for arm in ("grpo", "grpo_2xlr") for s in range(4)]
