"""study_forecasts on the shipped tiny studies: data/study_tiny (9 evals per run) and data/study_tiny_sparse
(the same cell with 3 evals per run and a select_half arm, whose probe predates the signal proxy); the
forecasts on a study with its own grpo curve are in-sample."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from forecast_helpers import synthetic_curve

from gradprobe.forecast import STUDY_COLUMNS, ReferenceCurve, forecast_rewards, study_forecasts

STUDY = "data/study_tiny"
SPARSE = "data/study_tiny_sparse"


@pytest.fixture(scope="module")
def table():
    return study_forecasts(STUDY)


def test_one_row_per_arm_with_the_promised_columns(table):
    assert list(table.columns) == list(STUDY_COLUMNS)
    assert sorted(table["arm"]) == sorted(json.load(open(f"{STUDY}/analysis.json"))["arms"])
    assert set(table["budget"]) == {"tokens"} and set(table["budget_value"]) == {250_000.0}
    assert table["in_sample"].all() and table["curve_source"].str.startswith("in-sample: study study_tiny").all()
    g = table.set_index("arm").loc["grpo"]
    assert (g["forecast_probe"], g["forecast_cost_only"], g["forecast_first_order"]) == (0.0, 0.0, 0.0)


def test_features_follow_from_the_probe_and_the_curve(table):
    probe = {r["name"]: r for r in json.load(open(f"{STUDY}/probe/probe.json"))["rewards"]}
    curve = ReferenceCurve.from_study(STUDY)
    t = table.set_index("arm")
    c_o, c_mc = probe["outcome"]["tokens_per_update"], probe["mc_value"]["tokens_per_update"]
    mc = t.loc["mc_value"]
    assert mc["token_multiplier"] == pytest.approx(c_mc / c_o, rel=1e-15)
    assert mc["forecast_cost_only"] == pytest.approx(curve(250_000 / c_mc) - curve(250_000 / c_o), abs=1e-12)
    g_o, g_mc = probe["outcome"]["predicted_gain_per_update"], probe["mc_value"]["predicted_gain_per_update"]
    assert mc["forecast_first_order"] == pytest.approx(250_000 / c_mc * g_mc - 250_000 / c_o * g_o, rel=1e-12)
    # the old raw number: the difference of the probe's predicted_gain_at_budget values
    assert mc["forecast_first_order"] == pytest.approx(
        probe["mc_value"]["predicted_gain_at_budget"] - probe["outcome"]["predicted_gain_at_budget"], rel=1e-12)
    lr = t.loc["grpo_2xlr"]
    assert lr["method"] == "outside_probe" and math.isnan(lr["forecast_probe"]) and math.isnan(lr["forecast_cost_only"])
    assert lr["forecast_first_order"] == pytest.approx(250_000 / c_o * g_o, rel=1e-12)  # 2x grpo's: still raw
    assert math.isfinite(mc["forecast_signal_proxy"]) and t.loc["grpo", "forecast_signal_proxy"] == 0.0


def test_selection_arms_and_probes_without_the_signal_proxy_say_so():
    t = study_forecasts(SPARSE).set_index("arm")
    assert "prompt-selection arm" in t.loc["select_half", "note"]
    # the sparse study's probe.json predates the signal proxy: NaN, not a made-up number
    assert math.isnan(t.loc["mc_value", "forecast_signal_proxy"]) and t.loc["grpo", "forecast_signal_proxy"] == 0.0


def test_diminishing_returns_beat_the_first_order_extrapolation_in_sample(table):
    rows = table[(table["arm"] != "grpo") & table["forecast_cost_only"].notna()]
    mae = {c: float(np.mean(np.abs(rows[c] - rows["realized_gain"])))
           for c in ("forecast_cost_only", "forecast_probe", "forecast_first_order")}
    assert mae["forecast_cost_only"] < 1.0 < 10 < mae["forecast_first_order"]
    assert mae["forecast_probe"] < mae["forecast_first_order"] / 5


def test_an_external_curve_is_a_leave_out(table):
    other = synthetic_curve(params={"R0": 67.6, "A": 90.0, "n_mid": 30.0, "B": 1.0}, seeds=2)
    t = study_forecasts(SPARSE, curve=other).set_index("arm")
    assert not t["in_sample"].any() and (t["curve_source"] == "synthetic").all()
    assert t.loc["mc_value", "forecast_cost_only"] == pytest.approx(other(250_000 / 25_510) - other(250_000 / 4_477),
                                                                    abs=1e-12)
    own = study_forecasts(SPARSE).set_index("arm")
    assert t.loc["mc_value", "forecast_cost_only"] != own.loc["mc_value", "forecast_cost_only"]


def test_missing_study_files_name_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        study_forecasts(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="analysis.json is missing"):
        study_forecasts(tmp_path)


def test_hybrid_efficiency_is_linear_in_its_weight(table):
    """hybrid_0.5's advantages are 0.5 A(mc_value) + 0.5 A(outcome), so its per-group contributions are too:
    rho(hybrid) - 1 = 0.5 (rho(mc_value) - 1) exactly, with the same SNR (paired bootstrap), on real probe data."""
    res = forecast_rewards(ReferenceCurve.from_study(STUDY), json.load(open(f"{STUDY}/probe/probe.json")))
    t = res.table.set_index("arm")
    assert t.loc["hybrid_0.5", "rho_raw"] - 1 == pytest.approx(0.5 * (t.loc["mc_value", "rho_raw"] - 1), rel=1e-9)
    assert t.loc["hybrid_0.5", "snr"] == pytest.approx(t.loc["mc_value", "snr"], rel=1e-9)


def test_the_auto_forecasters_record_is_what_the_shipped_calibration_report_measured(tmp_path):
    """The shipped validation record (what `gradprobe probe --forecaster auto` uses) is the one
    `calib report --validation-out` derives from the shipped report's metrics, and it chose the forecaster
    with the lowest leave-one-study-out error; a damaged record is refused naming the file."""
    from calib.report import validation_record
    from gradprobe.forecast.forecaster import VALIDATION, load_validation

    metrics = json.loads((Path(STUDY).parent / "calibration" / "report" / "metrics.json").read_text())
    derived = validation_record(metrics, source=VALIDATION["source"])
    assert derived == VALIDATION
    errors = metrics["errors"][metrics["headline_cv"]]
    mae = {k: errors[f"forecast_{k}"]["raw"]["common"]["mae"] for k in ("probe", "cost_only", "signal_proxy")}
    assert VALIDATION["best"] == min(mae, key=mae.get)
    assert f"cost only {mae['cost_only']:.2f}" in VALIDATION["evidence"]
    bad = tmp_path / "v.json"
    bad.write_text('{"best": "oracle", "evidence": "x"}')
    with pytest.raises(ValueError, match="v.json.*calib report"):
        load_validation(bad)
    bad.write_text("{")
    with pytest.raises(ValueError, match="cannot be read"):
        load_validation(bad)

def test_a_study_budgeted_in_flops_without_a_matched_token_read_is_refused_by_name():
    """data/study_tiny_hard is budgeted in FLOPs: its analysis refuses every read at a common token count
    (gaps wider than promised), so there is no realized gain at a token budget to forecast or calibrate."""
    with pytest.raises(ValueError, match=r"study_tiny_hard/analysis.json: arm 'select_\w+' has no gain vs grpo at the "
                                         r"matched token budget .*leave this study out"):
        study_forecasts("data/study_tiny_hard", n_draws=200)


def test_guided_arms_say_the_probe_does_not_see_the_guidance(tmp_path):
    import shutil

    study = tmp_path / "study"
    shutil.copytree(SPARSE, study)
    plan = (study / "plan.toml").read_text()
    assert "[arms.mc_value]\n" in plan
    (study / "plan.toml").write_text(plan.replace("[arms.mc_value]\n", "[arms.mc_value]\nguidance = { fraction = 0.25 }\n"))
    t = study_forecasts(study).set_index("arm")
    assert "guided arm: the probe sees only its reward" in t.loc["mc_value", "note"]
    assert "guided arm" not in t.loc["select_half", "note"] and "guided arm" not in t.loc["grpo", "note"]
