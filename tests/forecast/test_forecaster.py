"""forecast_rewards: effective updates on a known curve, the three forecasters side by side, fallbacks,
learning-rate arms, FLOPs budgets, batch rescaling, verdicts and the probe.json section."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast
from gradprobe.forecast.forecaster import VALIDATION

T = 250_000
C_OUT, C_MC = 4_000, 20_000


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})


def _groups(seed, b=16):
    return np.random.default_rng(seed).normal(2.0, 1.0, size=b)


def _exact_probe(rho=2.0, **kw):
    o = _groups(0)
    return probe_result({"outcome": o, "mc": rho * o}, {"outcome": C_OUT, "mc": C_MC},
                        signal={"outcome": o ** 2, "mc": 9.0 * o ** 2}, **kw)


def test_effective_updates_and_gains_on_a_known_curve(curve):
    res = forecast_rewards(curve, _exact_probe(rho=2.0))
    t = res.table.set_index("arm")
    n_ref = T / C_OUT
    assert res.grpo_accuracy == pytest.approx(curve(n_ref), abs=1e-12)
    mc = t.loc["mc"]
    assert mc["rho"] == pytest.approx(2.0, rel=1e-12) and mc["snr"] > 1e12
    assert mc["effective_updates"] == pytest.approx(T / C_MC * 2.0, rel=1e-12)
    assert mc["forecast_accuracy"] == pytest.approx(curve(T / C_MC * 2.0), abs=1e-12)
    assert mc["forecast_gain"] == pytest.approx(curve(T / C_MC * 2.0) - curve(n_ref), abs=1e-12)
    assert mc["gain_cost_only"] == pytest.approx(curve(T / C_MC) - curve(n_ref), abs=1e-12)
    assert mc["rho_signal_proxy"] == pytest.approx(3.0, rel=1e-12)  # sqrt(9)
    assert mc["gain_signal_proxy"] == pytest.approx(curve(T / C_MC * 3.0) - curve(n_ref), abs=1e-12)
    lo, hi = mc["gain_interval"]
    assert lo < mc["forecast_gain"] < hi and hi - lo < 5  # the curve's seed spread only (rho is exact)
    # the raw first-order extrapolation: (T / c_R) g_R - (T / c_outcome) g_outcome
    g = 100 * 1e-4 * _groups(0).sum()
    assert mc["first_order_gain"] == pytest.approx(T / C_MC * 2 * g - T / C_OUT * g, rel=1e-12)
    out = t.loc["outcome"]
    assert out["forecast_gain"] == 0.0 and out["gain_interval"] == (0.0, 0.0) and out["verdict"] == "reference (grpo)"
    assert 0 <= t["forecast_accuracy"].min() and t["forecast_accuracy"].max() <= 100


def test_forecast_is_invariant_to_the_scale_of_the_reference_direction(curve):
    a = forecast_rewards(curve, _exact_probe(rho=1.7))
    o = 1e4 * _groups(0)
    b = forecast_rewards(curve, probe_result({"outcome": o, "mc": 1.7 * o}, {"outcome": C_OUT, "mc": C_MC},
                                             signal={"outcome": o ** 2, "mc": 9.0 * o ** 2},
                                             gain_per_update={"outcome": 1.0, "mc": 1.0}))
    cols = ["rho", "effective_updates", "forecast_gain", "gain_cost_only", "gain_signal_proxy"]
    np.testing.assert_allclose(a.table[cols].to_numpy(float), b.table[cols].to_numpy(float), rtol=1e-10)


def test_low_snr_reward_falls_back_to_cost_only_and_says_so(curve):
    rng = np.random.default_rng(1)
    o = rng.normal(0.5, 3.0, size=8)
    noisy = o + rng.normal(0.0, 6.0, size=8)
    res = forecast_rewards(curve, probe_result({"outcome": o, "noisy": noisy}, {"outcome": C_OUT, "noisy": C_MC}))
    r = res.table.set_index("arm").loc["noisy"]
    assert r["snr"] < 1 and r["rho"] == 1.0
    assert r["method"] == "cost_only (SNR of rho-1 <= 1)" and "shrunk to 1" in r["note"]
    assert r["forecast_gain"] == r["gain_cost_only"] and r["gain_interval"] == r["gain_cost_only_interval"]
    assert any("signal proxy" in n for n in res.notes)  # this probe result has none
    assert math.isnan(r["gain_signal_proxy"])


def test_learning_rate_arms_are_outside_the_probe_unless_their_curve_is_given(curve):
    arms = {"grpo": {"reward": "outcome"}, "grpo_2xlr": {"reward": "outcome", "lr_scale": 2.0}}
    res = forecast_rewards(curve, _exact_probe(), arms=arms)
    r = res.table.set_index("arm").loc["grpo_2xlr"]
    assert r["method"] == "outside_probe" and math.isnan(r["forecast_gain"]) and math.isnan(r["gain_cost_only"])
    assert r["verdict"] == "outside what the probe can tell (learning-rate change)"
    assert "lr_curve" in r["note"]
    fast = synthetic_curve(params={"R0": 60.0, "A": 80.0, "n_mid": 8.0, "B": 1.5}, seeds=2)
    res2 = forecast_rewards(curve, _exact_probe(), arms=arms, lr_curve={2.0: fast})
    r2 = res2.table.set_index("arm").loc["grpo_2xlr"]
    assert r2["forecast_gain"] == pytest.approx(fast(T / C_OUT) - curve(T / C_OUT), abs=1e-12)
    assert "learning-rate curve" in r2["note"]


def test_flops_budget_uses_the_update_flops(curve):
    probe = _exact_probe(rho=1.0)
    res = forecast_rewards(curve, probe, budget_flops=1e13)
    fpt = 2.0e9 / 1000  # ledger: generation FLOPs / charged tokens
    f_out, f_mc = fpt * (C_OUT + 3 * C_OUT), fpt * (C_MC + 3 * C_OUT)
    t = res.table.set_index("arm")
    assert t.loc["mc", "effective_updates"] == pytest.approx(1e13 / f_mc, rel=1e-12)
    assert res.grpo_accuracy == pytest.approx(curve(1e13 / f_out), abs=1e-12)
    assert res.budget == {"kind": "flops", "value": 1e13} and "FLOPs" in t.loc["mc", "verdict"]
    with pytest.raises(ValueError, match="not both"):
        forecast_rewards(curve, probe, budget_flops=1e13, budget_tokens=T)


def test_probe_batch_differing_from_the_curves_update_is_rescaled(curve):
    res = forecast_rewards(curve, _exact_probe(prompts=8, group=4))
    t = res.table.set_index("arm")
    assert t.loc["outcome", "tokens_per_update"] == 4 * C_OUT
    assert any("rescaled by 4" in n for n in res.notes)


def test_verdicts_say_worth_it_or_not_with_the_interval(curve):
    res = forecast_rewards(curve, _exact_probe(rho=1.0))  # 5x the tokens for the same per-update gain
    v = res.table.set_index("arm").loc["mc", "verdict"]
    r = res.table.set_index("arm").loc["mc"]
    assert r["gain_interval"][1] < 0 and v.startswith("not worth its tokens at 250k: ")
    assert f"{r['forecast_gain']:+.1f} [{r['gain_interval'][0]:+.1f}, {r['gain_interval'][1]:+.1f}] vs grpo" in v
    good = forecast_rewards(curve, _exact_probe(rho=12.0)).table.set_index("arm").loc["mc"]
    assert good["gain_interval"][0] > 0 and good["verdict"].startswith("worth its tokens at 250k")


def test_bad_input_names_the_fix(curve):
    with pytest.raises(ValueError, match="add it to --rewards"):
        forecast_rewards(curve, probe_result({"mc": _groups(0)}, {"mc": C_MC}))
    with pytest.raises(ValueError, match="method 'x' must be one of"):
        forecast_rewards(curve, _exact_probe(), method="x")
    p = _exact_probe()
    del p["rewards"][1]["per_group"]
    with pytest.raises(ValueError, match="lacks 'per_group'"):
        forecast_rewards(curve, p)
    with pytest.raises(ValueError, match="arm 'a' has reward 'zzz'"):
        forecast_rewards(curve, _exact_probe(), arms={"a": {"reward": "zzz"}})


def test_several_batches_average_the_ratio(curve):
    o1, o2 = _groups(1), _groups(2)
    batches = [probe_result({"outcome": o1, "mc": 2.0 * o1}, {"outcome": C_OUT, "mc": C_MC}),
               probe_result({"outcome": o2, "mc": 3.0 * o2}, {"outcome": C_OUT, "mc": C_MC})]
    res = forecast_rewards(curve, batches)
    rho_raw = res.table.set_index("arm").loc["mc", "rho_raw"]
    assert rho_raw == pytest.approx((2 * o1.sum() + 3 * o2.sum()) / (o1.sum() + o2.sum()), rel=1e-13)
    # a combined probe.json reads the same: its pooled entries as gradprobe.probe.batches.combine_batches writes them
    # (per_group joined / N, sums the batches' mean), the batches beside them
    pooled = probe_result({"outcome": np.concatenate([o1, o2]) / 2, "mc": np.concatenate([2.0 * o1, 3.0 * o2]) / 2},
                          {"outcome": C_OUT, "mc": C_MC})
    combined = dict(pooled, batches=batches)
    assert forecast_rewards(curve, combined).table["rho_raw"].tolist() == res.table["rho_raw"].tolist()
    with pytest.raises(ValueError, match=r"rewards\[0\]\.inner_product \(reward 'outcome'\) is .*, but its batches "
                                         "give"):
        forecast_rewards(curve, dict(batches[0], batches=batches))  # batch 0's entries are no pooled entries


def test_forecast_section_default_curve_and_json(curve):
    section = forecast_section(_exact_probe(model="tiny"))  # the shipped tiny-tier curve
    assert section["available"] and section["curve_is_default"] and "study_tiny" in section["curve"]
    json.dumps(section, allow_nan=False)  # probe.json-ready
    none = forecast_section(_exact_probe(model="smollm2-135m"))
    assert not none["available"] and "reference curve" in none["note"] and "raw first-order" in none["note"]
    text = format_forecast(forecast_section(_exact_probe(model="other"), curve=curve, curve_spec="mine.json",
                                            method="probe"))
    assert "forecaster: probe (as asked)" in text and "reference curve: synthetic" in text
    assert "mc: not worth its tokens" in text
    auto = forecast_section(_exact_probe(model="other"), curve=curve)  # the CLI's default
    assert auto["method"] == VALIDATION["best"] and auto["method_choice"].startswith("auto: validated best")
    assert f"forecaster: {VALIDATION['best']} (auto: validated best, {VALIDATION['evidence']})" in format_forecast(auto)
    assert VALIDATION["evidence"].startswith("leave one study out over")
    assert "forecast: none." in format_forecast(none)
