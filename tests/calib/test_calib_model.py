"""The calibration file (versioned JSON, refit on load, domain recorded) and its application to probe results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import calib
import calib.model
from calib.apply import (CalibrationApplyError, calibrate, calibrate_probe, check_applicable, format_calibrated,
                         load_probe, probe_forecasts, write_calibrated)
from calib.dataset import RowsError, build_rows, build_rows_many
from calib.model import FORMAT_VERSION, CalibrationFileError, fit_calibration, load_calibration
from calib_helpers import TOKENS, default_arms, single_thread_blas, synthetic_forecasts, write_study  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def rows(tmp_path):
    arms = default_arms(n_extra=6, rng=np.random.default_rng(7))
    return build_rows(write_study(tmp_path / "study", arms=arms, slope=0.6, bias=-1.0, noise=0.2),
                      forecast_fn=synthetic_forecasts)


def test_fit_recovers_slope_and_bias_of_the_study(rows):
    # the study was written with realized = -1.0 + 0.6 * forecast_probe + N(0, 0.2) per run; within 5 OLS SEs
    cal = fit_calibration(rows)
    p = cal.fitted_parameters()
    x = cal.rows["forecast_probe"].to_numpy()
    sxx = np.sum((x - x.mean()) ** 2)
    assert abs(p["coef"]["forecast_probe"] - 0.6) < 5 * 0.2 / np.sqrt(sxx)
    assert abs(p["intercept"] + 1.0) < 5 * 0.2 * np.sqrt(1 / x.size + x.mean() ** 2 / sxx)
    assert cal.counts["rows"] == 9 * 4 and cal.counts["dropped_no_forecast"] == 4 and cal.cv == "arm"  # one study
    assert fit_calibration(rows, forecaster="forecast_first_order").counts["rows"] == 10 * 4


@pytest.mark.parametrize("method", ["linear", "isotonic", "none"])
def test_save_load_round_trip(tmp_path, rows, method):
    cal = fit_calibration(rows, method=method)
    path = cal.save(tmp_path / "cal.json")
    d = json.loads(path.read_text())
    assert d["format_version"] == FORMAT_VERSION == 2 and d["training"]["rows"] == 36
    assert d["forecaster"] == "forecast_probe" and d["domain"]["budget_kind"] == "tokens"
    assert d["domain"]["tasks"][0]["config"]["min_terms"] == 3 and d["domain"]["models"][0]["key"] == "tiny"
    assert {"scikit-learn", "mapie", "numpy", "gradprobe"} <= set(d["versions"])
    back = load_calibration(path)
    assert back.domain == cal.domain and back.forecaster == cal.forecaster and not back.legacy
    x = np.array([[-8.0], [-1.0], [0.5], [4.0]])
    for a, b in zip(cal.predict(x), back.predict(x)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    if method == "none":
        np.testing.assert_allclose(back.predict(x)[0], x[:, 0])


def test_cv_auto_leaves_one_study_out_with_several_studies(tmp_path):
    rows = build_rows_many([write_study(tmp_path / n, seed=i) for i, n in enumerate("abc")],
                           forecast_fn=synthetic_forecasts)
    cal = fit_calibration(rows)
    assert cal.cv == "study" and len(cal.domain.studies) == 3
    assert fit_calibration(rows, cv="arm").cv == "arm"


def test_damaged_or_foreign_files_are_refused_naming_the_file_and_the_fix(tmp_path, rows):
    path = fit_calibration(rows).save(tmp_path / "cal.json")
    text = path.read_text()
    (tmp_path / "truncated.json").write_text(text[: len(text) // 2])
    with pytest.raises(CalibrationFileError, match=r"truncated.json is damaged: not valid JSON .* refit it with "
                                                   r"`calib fit ROWS.csv --forecaster FORECASTER --out "
                                                   r"\S*truncated.json`"):
        load_calibration(tmp_path / "truncated.json")
    for version, fix in ((0, "Refit it"), (99, "Upgrade gradprobe to read it, or refit it")):
        (tmp_path / "v.json").write_text(json.dumps(dict(json.loads(text), format_version=version)))
        with pytest.raises(CalibrationFileError, match=rf"v.json has calibration format version {version} .* reads "
                                                       rf"versions \[1, 2\]. {fix}"):
            load_calibration(tmp_path / "v.json")
    (tmp_path / "probe.json").write_text(json.dumps({"rewards": []}))
    with pytest.raises(CalibrationFileError, match="probe.json is not a gradprobe calibration file"):
        load_calibration(tmp_path / "probe.json")
    for drop, field in ((("data",), "'data'"), (("domain",), "'domain'"), (("domain", "tasks"), "domain.tasks"),
                        (("forecaster",), "'forecaster'"), (("check",), "'check'")):
        d = json.loads(text)
        parent = d
        for k in drop[:-1]:
            parent = parent[k]
        del parent[drop[-1]]
        (tmp_path / "damaged.json").write_text(json.dumps(d))
        with pytest.raises(CalibrationFileError, match=rf"damaged.json is damaged: field {field} is missing or "
                                                       r"malformed; refit it"):
            load_calibration(tmp_path / "damaged.json")
    tampered = json.loads(text)
    tampered["check"]["point"][0] += 1.0  # what a library change that alters the fit would look like
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    with pytest.raises(CalibrationFileError, match="does not reproduce its stored point predictions"):
        load_calibration(tmp_path / "tampered.json")
    with pytest.raises(CalibrationFileError, match="not found"):
        load_calibration(tmp_path / "nope.json")


#: the calibration shipped as the default until 2026-12-01 (format version 1), kept as a fixture
V1 = Path(__file__).resolve().parent / "data" / "calibration_v1.json"


def test_old_shipped_calibration_still_loads_as_version_1():
    cal = load_calibration(V1)
    assert cal.legacy and cal.format_version == 1 and cal.features == ("predicted_gain",)
    assert cal.fitted_parameters()["coef"]["predicted_gain"] == pytest.approx(0.016925, abs=1e-6)
    assert cal.domain.arms == ["grpo_2xlr", "hybrid_0.5", "mc_advantage", "mc_value", "select_half"]
    with pytest.raises(CalibrationFileError, match="version-1 calibration is read-only"):
        cal.to_dict()
    # applied to the first-order gain, as before: the shipped study's own probe
    result, folder, task = load_probe(REPO / "data" / "study_tiny" / "probe")
    doc = calibrate(cal, result, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    e = {r["name"]: r for r in result["rewards"]}
    pred = 250_000 / e["mc_value"]["tokens_per_update"] * e["mc_value"]["predicted_gain_per_update"] \
        - 250_000 / e["outcome"]["tokens_per_update"] * e["outcome"]["predicted_gain_per_update"]
    assert by["mc_value"]["forecast"] == pytest.approx(pred)
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(0.016925 * pred - 4.31488, abs=1e-4)
    assert not doc["outside_domain"] and "compared by name" in doc["notes"][0]


def test_the_shipped_default_is_version_2_fitted_on_every_shipped_study_with_the_validated_forecaster():
    from gradprobe.forecast.forecaster import load_validation

    cal = calib.load("default")
    assert calib.model.default_path() == REPO / "calib" / "data" / "calibration.json"
    assert not cal.legacy and cal.format_version == 2
    record = load_validation()
    assert cal.forecaster == f"forecast_{record['best']}"  # the forecaster that validates best, leaving a study out
    validated = {s.split("@")[0] for s in record["studies"]}
    # every shipped study but the FLOPs-budgeted one, the one superseded by a superset of its runs, and the ones on
    # 4,000 held-out prompts, kept out so that the calibration never saw them (data/study_tiny_heldout4k/README.md)
    unseen = {p.name for p in (REPO / "data").glob("study_*_heldout4k")}
    assert "study_tiny_heldout4k" in unseen
    assert validated == {p.name for p in (REPO / "data").glob("study_*")} - {"study_tiny_hard", "study_tiny_granularity",
                                                                               *unseen}
    fitted = {(s["name"] if isinstance(s, dict) else s.split("@")[0]) for s in cal.domain.studies}
    assert fitted == validated - {"study_tiny_lr"}  # learning-rate arms have no cost-only forecast (outside its domain)
    # applied to a shipped study's own probe: finite calibrated gains with intervals around them
    result, folder, task = load_probe(REPO / "data" / "study_tiny" / "probe")
    doc = calibrate(cal, result, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    lo, hi = by["mc_value"]["calibrated_interval"]
    assert math.isfinite(by["mc_value"]["calibrated_gain"]) and lo < hi


def test_default_not_shipped(monkeypatch, tmp_path):
    monkeypatch.setattr(calib.model, "default_path", lambda: tmp_path / "calibration.json")
    with pytest.raises(CalibrationFileError, match="no default calibration is shipped yet"):
        load_calibration("default")


def test_single_arm_and_bad_settings(rows):
    with pytest.raises(RowsError, match="cannot calibrate"):
        fit_calibration(rows[rows["arm"].isin(["grpo", "mc_value", "grpo_2xlr"])])
    with pytest.raises(ValueError, match="need at least 2 distinct studies"):
        fit_calibration(rows, cv="study")
    with pytest.raises(ValueError, match="unknown calibration method"):
        fit_calibration(rows, method="spline")
    with pytest.raises(RowsError, match="unknown forecaster"):
        fit_calibration(rows, forecaster="predicted_gain")


def _probe_result(arms, *, model="tiny", task="chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1",
                  budget_tokens=TOKENS, section=True):
    """A probe result with gradprobe.forecast's ``forecast`` section (one row per reward)."""
    from calib_helpers import forecasts_of

    fc = forecasts_of({a: s for a, s in arms.items() if s["lr_scale"] == 1.0}).assign(arm=lambda d: d["reward"])
    rows = [{"arm": r["reward"], "gain_probe": r["forecast_probe"], "gain_cost_only": r["forecast_cost_only"],
             "gain_signal_proxy": r["forecast_signal_proxy"], "first_order_gain": r["forecast_first_order"]}
            for _, r in fc.iterrows()]
    out = {"config": {"model": model, "task": task, "budget_tokens": budget_tokens, "budget_seconds": None},
           "rewards": [{"name": r, "inner_product": 0.5, "per_group": [0.25, 0.25], "predicted_gain_per_update": 0.005,
                        "tokens_per_update": 300, "predicted_gain_at_budget": 4.0} for r in fc["reward"]]}
    if section:
        out["forecast"] = {"available": True, "rows": rows}
    return out


def test_calibrate_a_probe_result_and_write_calibrated_json(tmp_path, rows):
    arms = default_arms(n_extra=6, rng=np.random.default_rng(7))
    cal = fit_calibration(rows)
    result = _probe_result(arms)
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "probe.json").write_text(json.dumps(result))
    before = (tmp_path / "probe" / "probe.json").read_bytes()
    loaded, folder, task = load_probe(tmp_path / "probe")
    doc = calib.calibrate(cal, loaded, source="x.json", task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    assert by["outcome"]["calibrated_gain"] == 0.0 and by["outcome"]["calibrated_interval"] == [0.0, 0.0]
    f = probe_forecasts(loaded, "forecast_probe").loc["mc_value", "forecast_probe"]
    assert f == pytest.approx(rows.loc[rows["arm"] == "mc_value", "forecast_probe"].iloc[0])
    point, lo, hi = cal.predict(np.array([[f]]))
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(point[0]) and lo[0] < point[0] < hi[0]
    assert by["mc_value"]["calibrated_interval"] == pytest.approx([lo[0], hi[0]])
    assert not doc["outside_domain"] and doc["warnings"] == [] and doc["calibration"]["source"] == "x.json"
    path = write_calibrated(folder, doc)
    assert path == tmp_path / "probe" / "calibrated.json"
    assert (tmp_path / "probe" / "probe.json").read_bytes() == before  # probe.json is never rewritten
    written = json.loads(path.read_text())["rewards"][1]["calibrated_gain"]
    assert written == pytest.approx(doc["rewards"][1]["calibrated_gain"])
    assert "mc_value" in format_calibrated(doc) and "forecast_probe" in format_calibrated(doc)


def test_outside_domain_is_computed_and_marked(rows):
    arms = default_arms(n_extra=6, rng=np.random.default_rng(7))
    cal = fit_calibration(rows)
    doc = calibrate(cal, _probe_result(arms, model="smollm2-135m", task="basic_arithmetic"))
    assert doc["outside_domain"] and all(r["outside_domain"] for r in doc["rewards"])
    assert [w.split(" ")[0] for w in doc["warnings"]] == ["model", "task"]
    inside = calibrate(cal, _probe_result(arms))
    for a, b in zip(doc["rewards"], inside["rewards"]):  # the number is the same, only marked
        assert a["calibrated_gain"] == pytest.approx(b["calibrated_gain"], nan_ok=True)
    assert "outside domain" in format_calibrated(doc)


def test_probe_without_forecasts_or_outcome(rows):
    cal = fit_calibration(rows)
    arms = default_arms(n_extra=6, rng=np.random.default_rng(7))
    bare = _probe_result(arms, model="no-curve-model", section=False)
    bare["forecast"] = {"available": False, "note": "no reference curve for model 'no-curve-model'"}
    with pytest.raises(CalibrationApplyError, match="does not have: no reference curve for model 'no-curve-model'"):
        calibrate(cal, bare)
    result = _probe_result(arms)
    result["rewards"] = [r for r in result["rewards"] if r["name"] != "outcome"]
    with pytest.raises(CalibrationApplyError, match="needs the 'outcome' reward too"):
        calibrate(cal, result)
    with pytest.raises(CalibrationApplyError, match="needs the 'outcome' reward too"):
        check_applicable(cal, rewards=("mc_value",))
    with pytest.raises(CalibrationApplyError, match="none is shipped for model 'no-curve-model': pass --reference-curve"):
        check_applicable(cal, rewards=("outcome", "mc_value"), model="no-curve-model", has_curve=False)
    check_applicable(cal, rewards=("outcome", "mc_value"), model="no-curve-model", has_curve=True)  # a curve given
    # a reward the forecaster cannot say anything about: no number, and said so
    result = _probe_result(arms)
    result["forecast"]["rows"][1]["gain_probe"] = None
    doc = calibrate(cal, result)
    name = result["forecast"]["rows"][1]["arm"]
    assert math.isnan({r["name"]: r for r in doc["rewards"]}[name]["calibrated_gain"])
    assert any(f"cannot say anything about ['{name}']" in n for n in doc["notes"])


def test_calibrate_probe_fills_the_in_memory_result_only(tmp_path, rows):
    arms = default_arms(n_extra=6, rng=np.random.default_rng(7))
    cal = fit_calibration(rows)
    result = _probe_result(arms)
    calibrate_probe(result, cal, source="s")
    by = {r["name"]: r for r in result["rewards"]}
    assert by["outcome"]["calibrated_gain"] == 0.0 and result["calibration"]["format"] == "gradprobe-calibrated"
    assert "calibrated gain vs GRPO" in format_calibrated(result)
