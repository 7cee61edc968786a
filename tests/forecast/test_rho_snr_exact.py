"""The SNR of rho-1 of a reward that is an exact rescaling of grpo's reads ``exact``, not a number of order 1e14.

``outcome_loo`` (the leave-one-out baseline) is G / (G - 1) = 8/7 times grpo's advantage on every group, so every
bootstrap replicate of rho equals 8/7 up to float rounding: the se is about 5e-16 rho and |rho-1|/se about 2.6e14
on the shipped ``data/study_tiny_llama`` probe. The printed table and the verdicts that quote the SNR say ``exact``
(0 < se <= sqrt(eps) |rho|); the stored ``snr`` (a calibration feature) and every forecast number are unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_section, format_forecast
from gradprobe.forecast.curves import ReferenceCurve, default_curve_path
from gradprobe.forecast import proxies
from gradprobe.forecast.special_rows import equal_cost_row

PROBE = Path(__file__).resolve().parents[2] / "data" / "study_tiny_llama" / "probe" / "probe.json"


@pytest.fixture(scope="module")
def section():
    curve = ReferenceCurve.load(default_curve_path().with_name("tiny_frontier_grpo.json"))
    return forecast_section(json.loads(PROBE.read_text()), curve=curve, source=PROBE)


def test_the_forecast_table_prints_exact_for_outcome_loo_and_numbers_for_the_others(section):
    rows = {r["reward"]: r for r in section["rows"]}
    loo = rows["outcome_loo"]
    assert loo["rho_raw"] == pytest.approx(8 / 7, rel=1e-14) and loo["snr"] > 1e14  # stored as computed
    assert loo["rho"] == pytest.approx(8 / 7, rel=1e-14)
    lines = format_forecast(section).splitlines()
    [row] = [x for x in lines if x.startswith("outcome_loo ")]
    assert row.split()[4:7] == ["[1.14,", "1.14]", "exact"] and "2573485" not in row
    [mc] = [x for x in lines if x.startswith("mc_value ")]
    assert mc.split()[6] == f"{rows['mc_value']['snr']:.2f}" == "2.66"  # a measured SNR prints as before
    assert ("exact: rho's bootstrap replicates equal it to float rounding (se <= 1.5e-08 |rho|): each contributing "
            "group's alignment is rho times grpo's (e.g. grpo's advantages rescaled), so rho is exact on the probe "
            "batch, not noisy") in lines


def test_the_rule_reads_stored_rows_and_the_verdict_quotes_it():
    se_at_rounding, rtol = proxies.se_at_rounding, proxies.ROUNDING_RTOL  # looked up here: the table test needs neither
    assert rtol == pytest.approx(1.4901161193847656e-08, rel=1e-15)  # sqrt of float64's eps
    raw = 8 / 7
    assert se_at_rounding(raw, 257348550135457.6)  # se = 5.6e-16 |rho|
    assert not se_at_rounding(raw, "inf") and not se_at_rounding(raw, math.inf)  # se exactly 0: one group (below)
    at = (raw - 1) / (rtol * raw)  # the SNR whose se is exactly the tolerance
    assert se_at_rounding(raw, at * (1 + 1e-12)) and not se_at_rounding(raw, at * (1 - 1e-12))
    assert not any(se_at_rounding(r, s) for r, s in [(2.92, 2.66), (raw, None), (None, 1e15), (raw, 0.0),
                                                      (math.nan, 1e15), (raw, math.nan), (raw, "x")])
    row = {"rho_raw": raw, "snr": 257348550135457.6, "gain_probe": 0.4, "gain_probe_interval": [0.1, 0.7]}
    verdict = equal_cost_row(row, "250k", "tokens", 0.95)["verdict"]
    assert verdict.endswith("the probe's forecast, not validated better than cost only: +0.4 [+0.1, +0.7] (95% "
                            "interval) vs grpo, SNR of rho-1 exact")


def _one_group_probe(x: float, y: float, b: int = 16) -> dict:
    """A probe whose reward and grpo contribute in one group of ``b`` only (x and y there), grpo's cost."""
    r, o = np.zeros(b), np.zeros(b)
    r[3], o[3] = x, y
    return probe_result({"outcome": o, "noisy": r}, {"outcome": 4480.0, "noisy": 4480.0})


def test_a_ratio_on_one_contributing_group_prints_inf_not_exact():
    """One informative group: every replicate that draws it is its ratio, se is exactly 0 and the SNR inf. That is no
    rescaling across groups, so the table says inf (as before the 'exact' rule), with no 'exact' line, beside the
    reading note that rho rests on 1 of 16 groups."""
    sec = forecast_section(_one_group_probe(2.0, 1.0), curve=synthetic_curve(noise=0.3, seeds=4), method="probe")
    [row] = [r for r in sec["rows"] if r["reward"] == "noisy"]
    assert row["rho_raw"] == 2.0 and row["snr"] == "inf"  # json_safe's encoding of se = 0
    assert "rho rests on few groups: 1 of 16 contribute to this reward's alignment and 1 to grpo's" in row["note"]
    lines = format_forecast(sec).splitlines()
    [printed] = [x for x in lines if x.startswith("noisy ")]
    assert printed.split()[2] == "2.00" and printed.split()[6] == "inf"
    assert not any(x.startswith(proxies.EXACT_SNR) for x in lines)


@pytest.mark.parametrize("draws", [20, 300, 2000])
def test_one_group_is_never_exact_whatever_its_values(draws):
    """Products w c at w = 3, 5... round, so a computed replicate could miss the group's ratio by an ulp and make an se
    'at rounding'; the replicates of a one-group ratio are that ratio exactly."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        b = int(rng.integers(2, 40))
        r, o = np.zeros(b), np.zeros(b)
        i = int(rng.integers(b))
        r[i], o[i] = rng.normal(), abs(rng.normal()) + 0.01
        eff = proxies.probe_efficiency("r", [r], [o], counts=proxies.stratified_counts([b], draws, int(b)))
        assert eff.se == 0.0 and eff.rho_raw == r[i] / o[i]
        assert proxies.rho_snr_text(eff.rho_raw, eff.snr, "inf") == "inf"


def test_an_exact_rescaling_of_several_groups_stays_exact():
    o = np.random.default_rng(0).normal(2.0, 0.5, size=16)
    eff = proxies.probe_efficiency("r", [1.5 * o], [o], counts=proxies.stratified_counts([16], 2000, 0))
    assert 0 < eff.se <= proxies.ROUNDING_RTOL * 1.5 and eff.rho_raw == pytest.approx(1.5, rel=1e-15)
    assert proxies.rho_snr_text(eff.rho_raw, eff.snr, f"{eff.snr:.2f}") == "exact"
