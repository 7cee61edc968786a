"""Calibration rows from a synthetic study folder: joins, lr_scale, grpo rows, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from calib.dataset import (COLUMNS, REQUIRED, RowsError, StudyFormatError, build_rows, build_rows_many, read_rows,
                           select_rows)
from calib_helpers import BUDGETS, default_arms, predicted_vs_grpo, single_thread_blas, write_study  # noqa: F401


def test_rows_join_probe_and_study(tmp_path):
    arms, rewards = default_arms()
    study = write_study(tmp_path / "s", slope=0.6, bias=-1.0, noise=0.3)
    rows = build_rows(study)
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == len(arms) * 4 * len(BUDGETS)
    truth = {(a, s, b): (p, t) for a, s, b, p, t in json.loads((study / "truth.json").read_text())}
    for _, r in rows[~rows["is_reference"]].iterrows():
        pred, target = truth[(r["arm"], r["seed"], r["budget"])]
        assert r["predicted_gain"] == pytest.approx(pred, rel=1e-12)
        assert r["target"] == pytest.approx(target, abs=1e-9)
    # hand-computed: hybrid_0.5 at tokens = 1e6/60000*0.07 - 1e6/6400*0.04 = 1.1667 - 6.25
    r = rows[(rows["arm"] == "hybrid_0.5") & (rows["budget"] == "tokens")].iloc[0]
    assert r["predicted_gain"] == pytest.approx(1e6 / 60000 * 0.07 - 1e6 / 6400 * 0.04)
    assert r["token_multiplier"] == pytest.approx(60000 / 6400)
    assert math.isnan(r["cosine"]) and r["snr"] == 3.0
    assert r["model"] == "tiny" and r["task"] == "chain_sum" and r["paired"]


def test_lr_scale_scales_the_predicted_gain_first_order(tmp_path):
    rows = build_rows(write_study(tmp_path / "s"))
    for b, value in BUDGETS.items():
        two = rows[(rows["arm"] == "grpo_2xlr") & (rows["budget"] == b)].iloc[0]
        one = rows[(rows["arm"] == "grpo") & (rows["budget"] == b)].iloc[0]
        assert two["gain_per_update"] == pytest.approx(2 * one["gain_per_update"])
        assert two["predicted_gain_abs"] == pytest.approx(2 * one["predicted_gain_abs"])
        assert two["predicted_gain"] == pytest.approx(one["predicted_gain_abs"])  # 2g - g
        assert two["alignment"] == one["alignment"]  # the direction is the reward's, not the step's


def test_grpo_rows_are_zero_and_left_out_by_default(tmp_path):
    rows = build_rows(write_study(tmp_path / "s"))
    ref = rows[rows["is_reference"]]
    assert len(ref) == 4 * 3 and (ref["predicted_gain"] == 0).all() and (ref["target"] == 0).all()
    sel, counts = select_rows(rows)
    assert not sel["is_reference"].any() and counts["dropped_reference"] == 4
    assert (sel["budget"] == "tokens").all() and counts["dropped_other_budgets"] == 40
    sel, counts = select_rows(rows, include_reference=True)
    assert sel["is_reference"].sum() == 4 and counts["dropped_reference"] == 0


def test_unpaired_seed_is_compared_with_grpo_mean(tmp_path):
    rows = build_rows(write_study(tmp_path / "s", missing_grpo_seeds=(3,)))
    r = rows[(rows["arm"] == "mc_value") & (rows["seed"] == 3) & (rows["budget"] == "tokens")].iloc[0]
    grpo = rows[(rows["arm"] == "grpo") & (rows["budget"] == "tokens")]
    assert not r["paired"]
    assert r["target"] == pytest.approx(r["realized"] - grpo["realized"].mean())
    assert rows[(rows["seed"] != 3)]["paired"].all()


def test_nan_targets_are_dropped_and_counted(tmp_path, caplog):
    rows = build_rows(write_study(tmp_path / "s", nan_runs=(("mc_min", 1), ("mc_value", 2))))
    assert rows["target"].isna().sum() == 2 * 3  # kept in the rows (no data lost), one per budget
    with caplog.at_level("WARNING"):
        sel, counts = select_rows(rows)
    assert counts["dropped_nan_target"] == 2 and counts["rows"] == 16 - 2
    assert np.isfinite(sel["target"]).all()
    assert "mc_min/seed1" in caplog.text and "mc_value/seed2" in caplog.text


def test_missing_columns_are_named(tmp_path):
    rows = build_rows(write_study(tmp_path / "s")).drop(columns=["target", "is_reference"])
    with pytest.raises(RowsError, match=r"lacks column\(s\) \['is_reference', 'target'\]"):
        select_rows(rows)
    with pytest.raises(RowsError, match=r"lacks column\(s\) \['snr'\]"):
        select_rows(build_rows(write_study(tmp_path / "t")).drop(columns=["snr"]), features=("predicted_gain", "snr"))
    assert set(REQUIRED) <= set(COLUMNS)


def test_single_arm_cannot_be_calibrated(tmp_path):
    arms, rewards = default_arms()
    arms = {k: arms[k] for k in ("grpo", "mc_value")}
    rows = build_rows(write_study(tmp_path / "s", arms=arms, rewards=rewards))
    with pytest.raises(RowsError, match=r"cannot calibrate: the rows have 1 arm\(s\) besides grpo \(\['mc_value'\]\)"):
        select_rows(rows)


def test_nonfinite_feature_is_refused_with_its_name(tmp_path):
    rows = build_rows(write_study(tmp_path / "s"))
    with pytest.raises(RowsError, match="feature 'cosine' is NaN or infinite in 16 of 16 rows"):
        select_rows(rows, features=("predicted_gain", "cosine"))


def test_study_format_errors_name_the_file_and_field(tmp_path):
    study = write_study(tmp_path / "s")
    (study / "analysis.json").rename(study / "analysis.bak")
    with pytest.raises(StudyFormatError, match="analysis.json is missing; run `gradprobe study`"):
        build_rows(study)
    (study / "analysis.bak").rename(study / "analysis.json")
    probe = json.loads((study / "probe" / "probe.json").read_text())
    probe["rewards"] = [r for r in probe["rewards"] if r["name"] != "mc_min"]
    (study / "probe" / "probe.json").write_text(json.dumps(probe))
    with pytest.raises(StudyFormatError, match="no entry for reward 'mc_min'"):
        build_rows(study)


def test_probe_rewards_as_dict_by_name_and_csv_round_trip(tmp_path):
    study = write_study(tmp_path / "s")
    rows = build_rows(study)
    probe = json.loads((study / "probe" / "probe.json").read_text())
    probe["rewards"] = {r.pop("name"): r for r in probe["rewards"]}
    (study / "probe" / "probe.json").write_text(json.dumps(probe))
    pd.testing.assert_frame_equal(build_rows(study), rows)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    back = read_rows(tmp_path / "rows.csv")
    pd.testing.assert_frame_equal(back[list(REQUIRED)], rows[list(REQUIRED)], check_dtype=False)
    both = build_rows_many([study, write_study(tmp_path / "t", model="other")])
    assert set(both["model"]) == {"tiny", "other"} and len(both) == 2 * len(rows)


def test_probe_without_seconds_leaves_time_rows_unusable_only(tmp_path):
    study = write_study(tmp_path / "s")
    probe = json.loads((study / "probe" / "probe.json").read_text())
    for r in probe["rewards"]:
        r["seconds_per_update"] = None
    (study / "probe" / "probe.json").write_text(json.dumps(probe))
    rows = build_rows(study)
    assert rows.loc[rows["budget"] == "time", "predicted_gain"].isna().all()
    assert rows.loc[rows["budget"] != "time", "predicted_gain"].notna().all()
    select_rows(rows, budget="tokens")
    with pytest.raises(RowsError, match="feature 'predicted_gain' is NaN or infinite in 16 of 16 rows"):
        select_rows(rows, budget="time")
