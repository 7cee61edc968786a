"""The forecast when grpo's own reward gives no comparison: no gradient on the batch (its rewards equal in every
group), a non-positive alignment (raw rho undefined), and a guided probe (the reference is the guided outcome).
The rows say so: blank probe columns, verdicts that say they are cost only, the reference row's label, notes,
and the same in probe.json (NaN -> null) as in the printed table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast
from gradprobe.forecast.special_rows import GUIDED_REFERENCE_VERDICT

C_OUT, C_MC, C_CONST = 4_000, 20_000, 4_000
WHY = "(cost only: grpo had no gradient on this batch, so the probe cannot compare)"
GUIDANCE = {"fraction": 0.25, "prefix": 0.5, "cap": 2.0}


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4)


def _flat_outcome_probe(**kw):
    """outcome flat (every group equal: per-group sums and signal proxy 0), mc_value with signal, const flat."""
    mc = np.random.default_rng(0).normal(2.0, 1.0, size=8)
    return probe_result({"outcome": np.zeros(8), "mc_value": mc, "const": np.zeros(8)},
                        {"outcome": C_OUT, "mc_value": C_MC, "const": C_CONST},
                        signal={"outcome": np.zeros(8), "mc_value": mc ** 2, "const": np.zeros(8)}, **kw)


def _json_rows(section: dict) -> dict:
    """probe.json's forecast rows as written and read back (strict JSON: NaN must already be null)."""
    return {r["arm"]: r for r in json.loads(json.dumps(section, allow_nan=False))["rows"]}


def _printed_row(text: str, arm: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [arm])


@pytest.mark.parametrize("method", ["cost_only", "probe", "signal_proxy"])
def test_flat_reference_blanks_the_probe_columns_and_says_the_verdict_is_cost_only(curve, method):
    t = forecast_rewards(curve, _flat_outcome_probe(), method=method, n_draws=300).table.set_index("arm")
    mc = t.loc["mc_value"]
    for key in ("rho_raw", "rho", "snr", "gain_probe", "rho_signal_proxy", "gain_signal_proxy"):
        assert math.isnan(mc[key]), key
    assert all(math.isnan(x) for x in mc["rho_interval"]) and all(math.isnan(x) for x in mc["gain_probe_interval"])
    # the verdict is the cost-only forecast (grpo's curve at T / c_R updates), and says so
    assert mc["forecast_gain"] == mc["gain_cost_only"] == pytest.approx(curve(250_000 / C_MC) - curve(250_000 / C_OUT))
    lo, hi = mc["gain_interval"]
    assert hi < 0  # 5x the tokens per update: not worth them
    assert mc["verdict"] == f"not worth its tokens at 250k {WHY}: {mc['forecast_gain']:+.1f} [{lo:+.1f}, {hi:+.1f}] vs grpo"
    assert mc["method"] == ("cost_only" if method == "cost_only" else "cost_only (grpo had no gradient)")
    out = t.loc["outcome"]
    assert out["verdict"] == "reference (grpo): no gradient on this batch" and bool(out["no_signal"]) is True
    assert out["forecast_gain"] == 0.0
    assert t.loc["const", "method"] == "no_signal"  # a flat reward stays without forecast


def test_flat_reference_section_prints_and_saves_the_same_blanks(curve):
    sec = forecast_section(_flat_outcome_probe(), curve=curve, method="cost_only")
    rows = _json_rows(sec)
    mc = rows["mc_value"]
    assert mc["rho"] is None and mc["rho_raw"] is None and mc["snr"] is None and mc["gain_probe"] is None
    assert mc["rho_interval"] == [None, None] and mc["gain_probe_interval"] == [None, None]
    assert isinstance(mc["gain_cost_only"], float) and mc["forecast_gain"] == mc["gain_cost_only"]
    assert WHY in mc["verdict"]
    text = format_forecast(sec)
    cells = _printed_row(text, "mc_value")
    # arm, tokens/update, raw rho, rho, rho 95%, SNR, eff.updates, accuracy, gain, interval (2 cells), probe, ...
    assert cells[2:6] == ["-", "-", "-", "-"] and cells[11] == "-"
    assert cells[8] == f"{mc['forecast_gain']:+.1f}" and cells[12] == f"{mc['gain_cost_only']:+.1f}"
    assert "outcome: reference (grpo): no gradient on this batch" in text
    assert f"mc_value: {mc['verdict']}" in text
    assert any("(rho, its interval, the SNR of rho-1 and the probe forecast are blank)" in n for n in sec["notes"])


def test_no_signal_row_has_no_first_order_gain(curve):
    sec = forecast_section(_flat_outcome_probe(), curve=curve, method="cost_only")
    const = _json_rows(sec)["const"]
    assert const["no_signal"] is True and const["first_order_gain"] is None
    assert isinstance(_json_rows(sec)["mc_value"]["first_order_gain"], float)  # a reward with signal keeps its own


def _negative_reference_batches():
    """Two probe batches whose outcome sums are -3 and +1 (mean -1): grpo's alignment is not positive."""
    rng = np.random.default_rng(3)
    out = []
    for k, total in enumerate((-3.0, 1.0)):
        o = rng.normal(0.0, 1.0, size=8)
        o += (total - o.sum()) / 8
        mc = rng.normal(1.0, 1.0, size=8)
        out.append(probe_result({"outcome": o, "mc_value": mc}, {"outcome": C_OUT, "mc_value": C_MC},
                                signal={"outcome": o ** 2 + 0.1, "mc_value": mc ** 2}, draw=0))
    return out


@pytest.mark.parametrize("method", ["cost_only", "probe"])
def test_undefined_raw_rho_says_why_on_its_row(curve, method):
    t = forecast_rewards(curve, _negative_reference_batches(), method=method, n_draws=300).table.set_index("arm")
    mc = t.loc["mc_value"]
    assert math.isnan(mc["rho_raw"]) and mc["rho"] == 1.0 and mc["snr"] == 0.0
    assert mc["note"].startswith("raw rho undefined: grpo's own <g_outcome, u> (mean over the 2 probe batches) = -1 "
                                 "is not positive")
    assert "rho falls back to 1 = cost only" in mc["note"]
    assert mc["forecast_gain"] == pytest.approx(mc["gain_cost_only"])
    assert mc["method"] == ("cost_only" if method == "cost_only" else "cost_only (rho undefined)")
    assert "(cost only:" not in mc["verdict"]  # grpo has a gradient: the cost-only verdict is the forecaster's own
    assert t.loc["outcome", "verdict"] == "reference (grpo)"


def test_guided_probe_labels_its_reference_and_notes_whose_update_it_is(curve):
    guided = _negative_reference_batches()[1]  # a positive alignment
    guided["config"]["guidance"] = dict(GUIDANCE)
    sec = forecast_section(guided, curve=curve, method="cost_only")
    rows = _json_rows(sec)
    assert rows["outcome"]["verdict"] == GUIDED_REFERENCE_VERDICT == (
        "guided outcome (this probe's reference: the unguided grpo update is not in a guided probe; compare in a study)")
    text = format_forecast(sec)
    assert f"outcome: {GUIDED_REFERENCE_VERDICT}" in text
    notes = [n for n in sec["notes"] if n.startswith("a guided probe")]
    assert notes == ["a guided probe (fraction 0.25, prefix 0.5): every entry is of the guided, importance-weighted "
                     "update, the reference included, so the gains vs grpo here are vs the guided outcome, not "
                     "unguided grpo (compare the two in a study)"]
    assert f"note: {notes[0]}" in text
    assert text.splitlines()[1].startswith("forecast vs the guided outcome at ") and "read on grpo's curve" in text
    plain = _negative_reference_batches()[1]
    psec = forecast_section(plain, curve=curve, method="cost_only")
    assert _json_rows(psec)["outcome"]["verdict"] == "reference (grpo)"
    assert "outcome:" not in format_forecast(psec) and not any("guided" in n for n in psec["notes"])
    assert format_forecast(psec).splitlines()[1].startswith("forecast vs grpo at ")


def test_guided_probe_with_a_flat_reference_says_both(curve):
    probe = _flat_outcome_probe()
    probe["config"]["guidance"] = dict(GUIDANCE)
    t = forecast_rewards(curve, probe, method="cost_only", n_draws=300).table.set_index("arm")
    assert t.loc["outcome", "verdict"] == f"{GUIDED_REFERENCE_VERDICT}: no gradient on this batch"
    assert "(cost only: the guided outcome had no gradient on this batch, so the probe cannot compare)" in \
        t.loc["mc_value", "verdict"]
    sec = forecast_section(probe, curve=curve, method="cost_only")
    text = format_forecast(sec)
    assert text.splitlines()[1].startswith("forecast vs the guided outcome at ")
    assert sec["guided"] is True
    assert f"outcome: {GUIDED_REFERENCE_VERDICT}: no gradient on this batch" in text
