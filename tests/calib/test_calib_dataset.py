"""Calibration rows across studies: forecasts joined with realized gains, identities, grpo rows, bad input."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calib.dataset import (COLUMNS, FORECAST_COLUMNS, REQUIRED, RowsError, StudyFormatError, build_rows,
                           build_rows_many, read_rows, select_rows)
from calib_helpers import (TOKENS, default_arms, forecasts_of, single_thread_blas, synthetic_forecasts,  # noqa: F401
                           write_study)

STUDY_TINY = Path(__file__).resolve().parents[2] / "data" / "study_tiny_sparse"
RESOLVED = "chain_sum:allow_negation=false,max_digits=1,max_terms=4,min_digits=1,min_terms=3"


def rows_of(study):
    return build_rows(study, forecast_fn=synthetic_forecasts)


def test_rows_join_forecasts_and_realized_gains(tmp_path):
    study = write_study(tmp_path / "s", slope=0.6, bias=-1.0, noise=0.3)
    rows = rows_of(study)
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == len(default_arms()) * 4 and (rows["budget"] == "tokens").all()
    assert (rows["budget_value"] == TOKENS).all()
    truth = {(a, s): t for a, s, t in json.loads((study / "truth.json").read_text())}
    for _, r in rows[~rows["is_reference"]].iterrows():
        assert r["target"] == pytest.approx(truth[(r["arm"], r["seed"])], abs=1e-9)
    # hand-computed: mc_value, c = 60000, rho = 3: f(1e6/60000*3) - f(1e6/6400), f(n) = 30 (1 - exp(-n/40))
    r = rows[rows["arm"] == "mc_value"].iloc[0]
    f = lambda n: 30 * (1 - math.exp(-n / 40))  # noqa: E731
    assert r["forecast_probe"] == pytest.approx(f(1e6 / 60000 * 3) - f(1e6 / 6400))
    assert r["forecast_first_order"] == pytest.approx(0.04 * 1e6 / 60000 * 3 - 0.04 * 1e6 / 6400)
    assert r["token_multiplier"] == pytest.approx(60000 / 6400) and r["rho"] == 3.0 and r["paired"]
    lr = rows[rows["arm"] == "grpo_2xlr"]
    assert lr["forecast_probe"].isna().all() and lr["lr_scale"].eq(2.0).all()


def test_identities_study_sha_and_resolved_task(tmp_path):
    study = write_study(tmp_path / "mystudy")
    rows = rows_of(study)
    sha = hashlib.sha256((study / "plan.toml").read_bytes()).hexdigest()
    assert set(rows["study"]) == {f"mystudy@{sha[:12]}"} and set(rows["plan_sha256"]) == {sha}
    assert set(rows["model"]) == {"tiny"}
    # the plan's [task] + [task.config], resolved with reasoning-gym's defaults (allow_negation)
    assert set(rows["task"]) == {RESOLVED}
    cfg = json.loads(rows["task_config"].iloc[0])
    assert cfg["config"] == {"allow_negation": False, "max_digits": 1, "max_terms": 4, "min_digits": 1, "min_terms": 3}
    # a second study with the same folder name but another plan is another study
    other = rows_of(write_study(tmp_path / "b" / "mystudy", task_config={"min_terms": 2, "max_terms": 3}))
    assert set(other["study"]) != set(rows["study"]) and set(other["task"]) != {RESOLVED}


def test_grpo_rows_are_zero_and_left_out_by_default(tmp_path):
    rows = rows_of(write_study(tmp_path / "s"))
    ref = rows[rows["is_reference"]]
    assert len(ref) == 4 and (ref["forecast_probe"] == 0).all() and (ref["target"] == 0).all()
    sel, counts = select_rows(rows)
    assert not sel["is_reference"].any() and counts["dropped_reference"] == 4
    # the learning-rate arm has no probe forecast: dropped and named, not an error
    assert counts["dropped_no_forecast"] == 4 and counts["no_forecast_arms"] == [f"{rows['study'][0]}/grpo_2xlr"]
    assert counts["rows"] == 12 and set(sel["arm"]) == {"mc_value", "hybrid_0.5", "mc_min"}
    sel, counts = select_rows(rows, forecaster="forecast_first_order", include_reference=True)
    assert sel["is_reference"].sum() == 4 and counts["dropped_no_forecast"] == 0 and counts["rows"] == 20


def test_unpaired_seed_is_compared_with_grpo_mean(tmp_path):
    rows = rows_of(write_study(tmp_path / "s", missing_grpo_seeds=(3,)))
    r = rows[(rows["arm"] == "mc_value") & (rows["seed"] == 3)].iloc[0]
    grpo = rows[rows["arm"] == "grpo"]
    assert not r["paired"] and len(grpo) == 3
    assert r["target"] == pytest.approx(r["realized"] - grpo["realized"].mean())
    assert rows[rows["seed"] != 3]["paired"].all()


def test_nan_targets_are_dropped_and_counted(tmp_path, caplog):
    rows = rows_of(write_study(tmp_path / "s", nan_runs=(("mc_min", 1), ("mc_value", 2))))
    assert rows["target"].isna().sum() == 2  # kept in the rows (no data lost)
    with caplog.at_level("WARNING"):
        sel, counts = select_rows(rows)
    assert counts["dropped_nan_target"] == 2 and counts["rows"] == 12 - 2
    assert np.isfinite(sel["target"]).all()
    assert "mc_min/seed1" in caplog.text and "mc_value/seed2" in caplog.text


def test_missing_columns_and_unknown_forecaster_are_named(tmp_path):
    rows = rows_of(write_study(tmp_path / "s"))
    with pytest.raises(RowsError, match=r"lacks column\(s\) \['is_reference', 'target'\]"):
        select_rows(rows.drop(columns=["target", "is_reference"]))
    with pytest.raises(RowsError, match=r"lacks column\(s\) \['forecast_cost_only'\]"):
        select_rows(rows.drop(columns=["forecast_cost_only"]), forecaster="forecast_cost_only")
    with pytest.raises(RowsError, match="unknown forecaster 'predicted_gain'; choose one of"):
        select_rows(rows, forecaster="predicted_gain")
    assert set(REQUIRED) <= set(COLUMNS)


def test_single_arm_cannot_be_calibrated(tmp_path):
    arms = {k: v for k, v in default_arms().items() if k in ("grpo", "grpo_2xlr", "mc_value")}
    rows = rows_of(write_study(tmp_path / "s", arms=arms))
    with pytest.raises(RowsError, match=r"cannot calibrate forecast_probe: the rows have 1 arm\(s\) with a forecast "
                                        r"besides grpo \(\['mc_value'\]\)"):
        select_rows(rows)
    assert select_rows(rows, forecaster="forecast_first_order")[1]["rows"] == 8  # grpo_2xlr has a first-order number


def test_study_format_errors_name_the_file_and_field(tmp_path):
    study = write_study(tmp_path / "s")
    (study / "analysis.json").rename(study / "analysis.bak")
    with pytest.raises(StudyFormatError, match="analysis.json is missing; run `gradprobe study`"):
        rows_of(study)
    (study / "analysis.bak").rename(study / "analysis.json")
    (study / "plan.toml").rename(study / "plan.bak")
    with pytest.raises(StudyFormatError, match="plan.toml is missing; `gradprobe study` freezes the plan there"):
        rows_of(study)
    (study / "plan.bak").rename(study / "plan.toml")
    with pytest.raises(StudyFormatError, match=r"lack column\(s\) \['rho'\]"):
        build_rows(study, forecast_fn=lambda d, curve=None: synthetic_forecasts(d).drop(columns=["rho"]))
    with pytest.raises(StudyFormatError, match="arm 'mc_min' has no forecast row"):
        build_rows(study, forecast_fn=lambda d, curve=None: synthetic_forecasts(d).query("arm != 'mc_min'"))
    with pytest.raises(StudyFormatError, match="does not exist or is not a folder"):
        rows_of(tmp_path / "nothing")
    with pytest.raises(StudyFormatError, match="is not a study folder"):
        rows_of(tmp_path)


def test_csv_round_trip_and_old_format_refused(tmp_path):
    rows = rows_of(write_study(tmp_path / "s"))
    rows.to_csv(tmp_path / "rows.csv", index=False)
    back = read_rows(tmp_path / "rows.csv")
    pd.testing.assert_frame_equal(back[list(REQUIRED)], rows[list(REQUIRED)], check_dtype=False)
    assert back["is_reference"].dtype == bool
    old = pd.DataFrame({"model": ["tiny"], "task": ["chain_sum"], "arm": ["a"], "predicted_gain": [1.0],
                        "target": [0.5]})
    old.to_csv(tmp_path / "old.csv", index=False)
    with pytest.raises(RowsError, match=r"old.csv is a rows file of the old format .* rebuild it with `calib rows"):
        read_rows(tmp_path / "old.csv")
    with pytest.raises(FileNotFoundError, match="not found; write it with `calib rows"):
        read_rows(tmp_path / "none.csv")


def test_several_studies_and_a_study_given_twice(tmp_path):
    a, b = write_study(tmp_path / "a", seed=1), write_study(tmp_path / "b", model="llama-tiny", seed=2)
    both = build_rows_many([a, b], forecast_fn=synthetic_forecasts)
    assert both["study"].nunique() == 2 and set(both["model"]) == {"tiny", "llama-tiny"} and len(both) == 40
    with pytest.raises(StudyFormatError, match=r"study 'a@[0-9a-f]{12}' is given twice"):
        build_rows_many([a, a], forecast_fn=synthetic_forecasts)
    with pytest.raises(StudyFormatError, match="no study folders given"):
        build_rows_many([])


def test_curve_is_passed_to_the_forecaster(tmp_path):
    rows = build_rows(write_study(tmp_path / "s"), curve="grpo run of another study", forecast_fn=synthetic_forecasts)
    assert set(rows["curve_source"]) == {"given: grpo run of another study"}
    assert set(FORECAST_COLUMNS) <= set(forecasts_of(default_arms()).columns)


def test_real_forecaster_on_the_shipped_study():
    """calib rows on data/study_tiny_sparse through gradprobe.forecast.study_forecasts (the contract, wired)."""
    rows = build_rows(STUDY_TINY)
    assert len(rows) == 6 * 4 and rows["study"].str.startswith("study_tiny_sparse@b30b502e2f0e").all()
    assert set(rows["task"]) == {RESOLVED} and set(rows["model"]) == {"tiny"}
    r = rows[(rows["arm"] == "mc_value") & (rows["seed"] == 0)].iloc[0]
    assert r["realized"] == pytest.approx(73.7) and r["target"] == pytest.approx(73.7 - 78.8)
    # the raw first order is the probe's extrapolation difference: (T / c) s g - (T / c_grpo) g_grpo
    probe = {e["name"]: e for e in json.loads((STUDY_TINY / "probe" / "probe.json").read_text())["rewards"]}
    g, c = probe["outcome"]["predicted_gain_per_update"], probe["outcome"]["tokens_per_update"]
    lr = rows[rows["arm"] == "grpo_2xlr"].iloc[0]
    assert lr["forecast_first_order"] == pytest.approx(250_000 / c * g * (2 - 1))
    assert math.isnan(lr["forecast_probe"])  # outside what a first-order probe can tell
    assert (rows.loc[rows["arm"] == "grpo", ["forecast_probe", "forecast_cost_only", "target"]] == 0).all().all()
