"""The SNR of rho-1 of a reward that is an exact rescaling of grpo's reads ``exact``, not a number of order 1e14.

``outcome_loo`` (the leave-one-out baseline) is G / (G - 1) = 8/7 times grpo's advantage on every group, so every
bootstrap replicate of rho equals 8/7 up to float rounding: the se is about 5e-16 rho and |rho-1|/se about 2.6e14
on the shipped ``data/study_tiny_llama`` probe. The printed table and the verdicts that quote the SNR say ``exact``
(se <= sqrt(eps) |rho|); the stored ``snr`` (a calibration feature) and every forecast number are unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

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
    assert se_at_rounding(raw, "inf") and se_at_rounding(raw, math.inf)  # JSON's "inf": se exactly 0
    at = (raw - 1) / (rtol * raw)  # the SNR whose se is exactly the tolerance
    assert se_at_rounding(raw, at * (1 + 1e-12)) and not se_at_rounding(raw, at * (1 - 1e-12))
    assert not any(se_at_rounding(r, s) for r, s in [(2.92, 2.66), (raw, None), (None, 1e15), (raw, 0.0),
                                                      (math.nan, 1e15), (raw, math.nan), (raw, "x")])
    row = {"rho_raw": raw, "snr": 257348550135457.6, "gain_probe": 0.4, "gain_probe_interval": [0.1, 0.7]}
    verdict = equal_cost_row(row, "250k", "tokens", 0.95)["verdict"]
    assert verdict.endswith("the probe's forecast, not validated better than cost only: +0.4 [+0.1, +0.7] (95% "
                            "interval) vs grpo, SNR of rho-1 exact")
