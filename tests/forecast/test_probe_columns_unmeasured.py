"""What `gradprobe probe` prints and saves leaves out the probe numbers it has not measured (a trial user's three
cases): an arm of grpo's cost whose rho's SNR is <= 1 (the probe's fallback, cost only, is 0 by construction there),
a zero reference update (every <g, u> is 0), and grpo's own <g_outcome, u> interval below 0 (rho undefined).
The calibration's path, forecast_rewards (study_forecasts), keeps the probe forecaster as validated."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast

C = 4_000  # tokens per update of grpo and of the equal-cost arms
NAN_PAIR = [None, None]


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4)


def _probe(outcome_interval, *, zero_reference=False):
    """outcome (16 positive groups, its probe interval ``outcome_interval``); ``noisy`` (rho_raw 1.2, SNR about
    0.55) at grpo's cost and at 5x it; ``strong`` (rho about 2.5, SNR >> 1) at 3x grpo's cost and ``twin`` (the same)
    at grpo's. ``zero_reference``: every per-group <g, u> exactly 0 (a zero reference update), signal kept."""
    rng = np.random.default_rng(7)
    out = rng.normal(3.0, 1.0, 16)
    noise = rng.normal(0.0, 5.0, 16)
    noisy = 1.2 * out + noise - noise.mean()
    strong = 2.5 * out + rng.normal(0.0, 0.3, 16)
    pg = {"outcome": out, "noisy": noisy, "noisy_costly": noisy, "strong": strong, "twin": strong}
    signal = {k: np.abs(v) + 0.1 for k, v in pg.items()}
    if zero_reference:
        pg = {k: np.zeros(16) for k in pg}
    pr = probe_result(pg, {"outcome": C, "noisy": C, "noisy_costly": 5 * C, "strong": 3 * C, "twin": C},
                      signal=signal)
    pr["rewards"][0]["interval"] = list(outcome_interval)
    if zero_reference:
        pr["reference"]["norm"] = 0.0
    return pr


def _rows(section: dict) -> dict:
    """probe.json's forecast rows as written and read back (strict JSON)."""
    return {r["arm"]: r for r in json.loads(json.dumps(section, allow_nan=False))["rows"]}


def _cell(text: str, arm: str, column: str) -> str:
    """The printed forecast table's cell of ``arm`` under ``column`` (a right-aligned header such as ``probe``)."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("arm ") and " cost-only " in line)
    end = next(m.end() for m in re.finditer(r"\S+(?: \S+)*", header) if m.group() == column)  # 2+ spaces apart
    return next(line for line in lines if line.split()[:1] == [arm])[:end].split()[-1]


def test_equal_cost_arm_with_snr_at_most_1_has_no_probe_forecast_under_the_probe(curve):
    pr = _probe((20.0, 75.0))  # grpo's own interval off 0: rho is defined
    t = forecast_rewards(curve, pr, method="probe").table.set_index("arm")
    noisy = t.loc["noisy"]
    assert noisy["rho_raw"] == pytest.approx(1.2) and noisy["snr"] < 1 and noisy["rho"] == 1.0
    assert all(math.isnan(x) for x in noisy["rho_interval"])  # shrunk all the way: no [1.00, 1.00]
    assert t.loc["outcome", "rho_interval"] == (1.0, 1.0)  # grpo's own ratio is 1 exactly
    assert all(math.isfinite(x) for x in t.loc["strong", "rho_interval"])  # SNR > 1: a measured interval
    assert noisy["gain_probe"] == 0.0  # forecast_rewards (the calibration's rows) keeps the validated fallback
    sec = forecast_section(pr, curve=curve, method="probe")
    rows = _rows(sec)
    r = rows["noisy"]
    assert r["gain_probe"] is None and r["gain_probe_interval"] == NAN_PAIR and r["rho_interval"] == NAN_PAIR
    assert r["by_construction"] is True and r["gain_interval"] == NAN_PAIR and r["rho"] == 1.0
    assert r["method"] == "cost_only (SNR of rho-1 <= 1)"
    snr = f"{r['snr']:.2f}"
    assert r["verdict"].startswith(
        f"no forecast at 250k: the probe cannot tell this reward from grpo (SNR of rho-1 {snr} <= 1, so rho is shrunk "
        "to 1), and cost only, its fallback, cannot tell rewards of equal cost apart: its forecast is +0.0 by "
        "construction (the same tokens per update as grpo), not a measurement (interval: none)")
    assert "no detectable difference" not in r["verdict"] and "[+0.0, +0.0]" not in r["verdict"]
    # at 5x grpo's cost the fallback is cost only's own forecast, not a 0 by construction: it stays
    costly = rows["noisy_costly"]
    assert costly["gain_probe"] == pytest.approx(costly["gain_cost_only"]) and costly["gain_probe"] < -1
    assert costly["verdict"].startswith("not worth its tokens at 250k: ")
    assert rows["twin"]["gain_probe"] > 1 and rows["twin"]["snr"] > 1  # rho about 2.5 at grpo's cost: measured
    assert rows["twin"]["verdict"].startswith("worth its tokens at 250k: ")
    text = format_forecast(sec)
    assert [_cell(text, "noisy", c) for c in ("rho", "rho 95%", "|rho-1|/se", "probe", "cost-only")] == [
        "1.00", "-", snr, "-", "+0.0"]


def test_equal_cost_arm_with_snr_at_most_1_quotes_no_probe_forecast_under_cost_only(curve):
    pr = _probe((20.0, 75.0))
    t = forecast_rewards(curve, pr, method="cost_only").table.set_index("arm")
    snr = f"{t.loc['noisy', 'snr']:.2f}"
    assert t.loc["noisy", "verdict"] == (
        "cost only cannot tell rewards of equal cost apart: at 250k its forecast is +0.0 by construction (the same "
        "tokens per update as grpo), not a measurement (interval: none); the probe's forecast, not validated better "
        f"than cost only: none, since the probe cannot tell this reward from grpo (SNR of rho-1 {snr} <= 1, so rho is "
        "shrunk to 1)")
    assert f"SNR of rho-1 {t.loc['twin', 'snr']:.2f}" in t.loc["twin", "verdict"]  # a probe that can tell: quoted
    rows = _rows(forecast_section(pr, curve=curve, method="cost_only"))
    assert rows["noisy"]["gain_probe"] is None and rows["noisy"]["gain_probe_interval"] == NAN_PAIR
    assert rows["noisy"]["verdict"].startswith(t.loc["noisy", "verdict"])
    assert rows["twin"]["gain_probe"] == pytest.approx(t.loc["twin", "gain_probe"])


@pytest.mark.parametrize("method", ["cost_only", "probe"])
def test_zero_reference_update_blanks_the_probe_columns(curve, method):
    sec = forecast_section(_probe((0.0, 0.0), zero_reference=True), curve=curve, method=method)
    rows = _rows(sec)
    for arm in ("noisy", "noisy_costly", "strong", "twin"):
        r = rows[arm]
        assert r["no_verdict_reason"] is None and r["no_signal"] is False
        assert (r["rho_raw"], r["rho"], r["snr"], r["gain_probe"]) == (None, None, None, None), arm
        assert r["rho_interval"] == NAN_PAIR and r["gain_probe_interval"] == NAN_PAIR
        assert "SNR 0.00" not in r["verdict"] and "rho falls back to 1" not in r["note"]
        assert isinstance(r["gain_signal_proxy"], float)  # verl's proxy does not read u: still measured
        assert r["method"] == ("cost_only" if method == "cost_only" else "cost_only (rho undefined)")
    why = "rho is undefined (the reference update is zero: every <g_R, u> is 0)"
    if method == "cost_only":
        quote = f"the probe's forecast, not validated better than cost only: none, since {why} ("
        assert quote in rows["noisy"]["verdict"]
    else:
        assert rows["noisy"]["verdict"].startswith(f"no forecast at 250k: {why}, and cost only, its fallback, ")
        assert rows["strong"]["verdict"].startswith(
            f"not worth its tokens at 250k (cost only: {why}, so the probe cannot compare): "
            f"{rows['strong']['gain_cost_only']:+.1f}")
        assert rows["strong"]["forecast_gain"] == rows["strong"]["gain_cost_only"]
    assert any(n.startswith("the reference update u is zero, so every <g_R, u> is exactly 0") for n in sec["notes"])
    text = format_forecast(sec)
    assert [_cell(text, "strong", c) for c in ("raw rho", "rho", "rho 95%", "|rho-1|/se", "probe")] == ["-"] * 5
    assert _cell(text, "strong", "cost-only") == f"{rows['strong']['gain_cost_only']:+.1f}"


@pytest.mark.parametrize("method", ["cost_only", "probe"])
def test_grpo_interval_below_0_leaves_rho_undefined(curve, method):
    pr = _probe((-20.0, -1.0))  # grpo's own <g_outcome, u> interval lies below 0
    t = forecast_rewards(curve, pr, method=method).table.set_index("arm")
    assert math.isfinite(t.loc["strong", "gain_probe"]) and t.loc["strong", "snr"] > 1  # the calibration's path
    sec = forecast_section(pr, curve=curve, method=method)
    rows = _rows(sec)
    why = "rho is undefined (grpo's own <g_outcome, u> interval [-2.000e+01, -1.000e+00] lies below 0)"
    strong = rows["strong"]
    assert (strong["rho_raw"], strong["rho"], strong["snr"], strong["gain_probe"]) == (None, None, None, None)
    assert strong["rho_interval"] == NAN_PAIR and isinstance(strong["gain_signal_proxy"], float)
    assert strong["forecast_gain"] == pytest.approx(t.loc["strong", "gain_cost_only"])  # cost only's forecast
    if method == "probe":
        assert strong["method"] == "cost_only (rho undefined)"
        assert strong["verdict"].startswith(f"not worth its tokens at 250k (cost only: {why}, so the probe cannot "
                                            "compare): ")
        assert rows["twin"]["verdict"].startswith(f"no forecast at 250k: {why}, and cost only, its fallback, ")
    else:
        assert f"not validated better than cost only: none, since {why} (this reward" in rows["twin"]["verdict"]
    note = ("grpo's own <g_outcome, u> = +4.666e+01, 95% interval [-2.000e+01, -1.000e+00] over prompts, lies below "
            "0: the denominator may be 0 or negative, so rho (each reward's <g_R, u> over grpo's) is undefined")
    assert any(n.startswith(note) for n in sec["notes"])


@pytest.mark.parametrize("method", ["cost_only", "probe"])
def test_grpo_interval_including_0_keeps_the_validated_probe_forecast(curve, method):
    """An interval that includes 0 with a positive mean is how every shipped study probe reads, and the probe
    forecaster was validated on them as they are: its forecast is kept (special_rows.reference_rho_undefined)."""
    t = forecast_rewards(curve, _probe((-10.0, 75.0)), method=method).table.set_index("arm")
    for iv in ((-10.0, 75.0), (1.0, 75.0)):
        kept = _rows(forecast_section(_probe(iv), curve=curve, method=method))["strong"]
        assert kept["gain_probe"] == pytest.approx(t.loc["strong", "gain_probe"]) and kept["snr"] > 1


@pytest.mark.parametrize("method", ["cost_only", "probe"])
def test_grpo_interval_including_0_says_rho_has_an_unbounded_confidence_set(curve, method):
    """Fieller's theorem: with grpo's own <g_outcome, u> interval including 0, rho's confidence set is unbounded; the
    numbers are kept (validated as they are) and a note says so, only then (special_rows.reference_rho_unbounded)."""
    sec = forecast_section(_probe((-10.0, 75.0)), curve=curve, method=method)
    note = [n for n in sec["notes"] if "unbounded confidence set" in n]
    assert len(note) == 1
    assert re.match(r"grpo's own <g_outcome, u> = \+\d\.\d{3}e\+\d\d, 95% interval \[-1\.000e\+01, \+7\.500e\+01\] "
                    r"over prompts, includes 0: rho \(each reward's <g_R, u> over grpo's\) then has an unbounded ",
                    note[0])
    assert note[0].endswith("probe more --prompts or --probe-batches to narrow grpo's interval")
    assert "unbounded confidence set" in format_forecast(sec)
    for iv in ((1.0, 75.0), (-20.0, -1.0)):  # off 0 (rho defined, no note) and below 0 (rho undefined: its own note)
        assert not any("unbounded confidence set" in n
                       for n in forecast_section(_probe(iv), curve=curve, method=method)["notes"])
