"""The calibration file (versioned JSON, refit on load) and its application to probe results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import calib.model
from calib.apply import CalibrationApplyError, calibrate_probe, check_applicable, probe_features
from calib.dataset import RowsError, build_rows
from calib.model import FORMAT_VERSION, CalibrationFileError, fit_calibration, load_calibration
from calib_helpers import default_arms, probe_entry, single_thread_blas, write_study  # noqa: F401


@pytest.fixture()
def rows(tmp_path):
    arms, rewards = default_arms(n_extra=6, rng=np.random.default_rng(7))
    return build_rows(write_study(tmp_path / "study", arms=arms, rewards=rewards, slope=0.6, bias=-1.0, noise=0.2))


def test_fit_recovers_slope_and_bias_of_the_study(rows):
    # the study was written with realized = -1.0 + 0.6 * predicted + N(0, 0.2) per run; within 5 OLS SEs
    cal = fit_calibration(rows)
    p = cal.fitted_parameters()
    x = cal.rows["predicted_gain"].to_numpy()
    sxx = np.sum((x - x.mean()) ** 2)
    assert abs(p["coef"]["predicted_gain"] - 0.6) < 5 * 0.2 / np.sqrt(sxx)
    assert abs(p["intercept"] + 1.0) < 5 * 0.2 * np.sqrt(1 / x.size + x.mean() ** 2 / sxx)
    assert cal.counts == {"rows_in": len(rows), "dropped_other_budgets": 2 * len(rows) // 3,
                          "dropped_reference": 4, "dropped_nan_target": 0, "rows": 40}


@pytest.mark.parametrize("method", ["linear", "isotonic"])
def test_save_load_round_trip(tmp_path, rows, method):
    cal = fit_calibration(rows, method=method)
    path = cal.save(tmp_path / "cal.json")
    d = json.loads(path.read_text())
    assert d["format_version"] == FORMAT_VERSION and d["training"]["rows"] == 40
    assert d["features"] == ["predicted_gain"] and d["budget"] == "tokens"
    assert {"scikit-learn", "mapie", "numpy", "gradprobe"} <= set(d["versions"])
    back = load_calibration(path)
    x = np.array([[-8.0], [-1.0], [0.5], [4.0]])
    for a, b in zip(cal.predict(x), back.predict(x)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_incompatible_or_foreign_files_are_refused(tmp_path, rows):
    path = fit_calibration(rows).save(tmp_path / "cal.json")
    d = json.loads(path.read_text())
    old = dict(d, format_version=0)
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(CalibrationFileError, match=r"format version 0 .* reads version 1. Refit it"):
        load_calibration(tmp_path / "old.json")
    (tmp_path / "probe.json").write_text(json.dumps({"rewards": []}))
    with pytest.raises(CalibrationFileError, match="not a gradprobe calibration file"):
        load_calibration(tmp_path / "probe.json")
    tampered = json.loads(path.read_text())
    tampered["check"]["point"][0] += 1.0  # what a library change that alters the fit would look like
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    with pytest.raises(CalibrationFileError, match="does not reproduce its stored point predictions"):
        load_calibration(tmp_path / "tampered.json")
    with pytest.raises(CalibrationFileError, match="not found"):
        load_calibration(tmp_path / "nope.json")
    damaged = json.loads(path.read_text())
    del damaged["data"]
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    with pytest.raises(CalibrationFileError, match="damaged: field 'data' is missing"):
        load_calibration(tmp_path / "damaged.json")


def test_default_is_not_shipped_yet(monkeypatch, tmp_path):
    monkeypatch.setattr(calib.model, "default_path", lambda: tmp_path / "calibration.json")
    with pytest.raises(CalibrationFileError, match="no default calibration is shipped yet"):
        load_calibration("default")


def test_default_lives_in_the_package_data():
    assert calib.model.default_path() == Path(calib.model.__file__).parent / "data" / "calibration.json"


def test_single_arm_and_bad_settings(tmp_path, rows):
    with pytest.raises(RowsError, match="cannot calibrate"):
        fit_calibration(rows[rows["arm"].isin(["grpo", "mc_value"])])
    with pytest.raises(ValueError, match="must start with 'predicted_gain'"):
        fit_calibration(rows, features=("snr",))
    with pytest.raises(ValueError, match="need at least 2 distinct models"):
        fit_calibration(rows, cv="model")
    with pytest.raises(ValueError, match="isotonic calibrator uses predicted_gain only"):
        fit_calibration(rows, method="isotonic", features=("predicted_gain", "snr"))
    # with the grpo rows kept, grpo still does not count as a second arm
    with pytest.raises(RowsError, match=r"1 arm\(s\) besides grpo"):
        fit_calibration(rows[rows["arm"].isin(["grpo", "mc_value"])], include_reference=True)


def _probe_result(budget_tokens=1_000_000):
    _, rewards = default_arms()
    return {"config": {"model": "tiny", "task": "chain_sum", "budget_tokens": budget_tokens, "budget_seconds": None},
            "rewards": [probe_entry(r, *v) for r, v in rewards.items()]}


def test_calibrate_probe_result(rows):
    cal = fit_calibration(rows)
    result = calibrate_probe(_probe_result(), cal, source="x.json")
    by = {r["name"]: r for r in result["rewards"]}
    assert by["outcome"]["calibrated_gain"] == 0.0 and by["outcome"]["calibrated_interval"] == [0.0, 0.0]
    feats = probe_features(result, "tokens")
    pred = 1e6 / 60000 * 0.10 - 1e6 / 6400 * 0.04  # mc_value vs outcome at 1M tokens
    assert feats.loc["mc_value", "predicted_gain"] == pytest.approx(pred)
    point, lo, hi = cal.predict(np.array([[pred]]))
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(point[0])
    assert by["mc_value"]["calibrated_interval"] == pytest.approx([lo[0], hi[0]])
    assert lo[0] < point[0] < hi[0]
    assert result["calibration"]["source"] == "x.json" and result["calibration"]["notes"] == []
    far = calibrate_probe(_probe_result(budget_tokens=10_000_000), cal)
    assert len(far["calibration"]["notes"]) == 1 and "extrapolation" in far["calibration"]["notes"][0]
    other = _probe_result()
    other["config"]["model"] = "smollm2-135m"
    notes = calibrate_probe(other, cal)["calibration"]["notes"]
    assert len(notes) == 1 and "fitted on model(s) ['tiny']" in notes[0]


def test_calibration_needs_outcome_among_the_rewards(rows):
    cal = fit_calibration(rows)
    with pytest.raises(CalibrationApplyError, match="needs the 'outcome' reward too"):
        check_applicable(cal, rewards=("mc_value",))
    result = _probe_result()
    result["rewards"] = [r for r in result["rewards"] if r["name"] != "outcome"]
    with pytest.raises(CalibrationApplyError, match="needs the 'outcome' reward too"):
        calibrate_probe(result, cal)
