""""SNR" named two quantities in ``gradprobe probe``'s output: the per-reward table's <g_R,u> / se and the forecast's
|rho - 1| / se (trial finding). Every printed label outside the two table headers now names its quantity: "SNR of
rho-1" (with |rho-1|/se where a note explains it) in the forecast's notes, verdicts, method column and help, "SNR of
<g_R, u>" in the no-gradient note and report.html's raw table. The two console headers name their ratios,
"<g,u>/se" and "|rho-1|/se" (the constants ``ALIGNMENT_SNR_HEADER`` and ``RHO_SNR_HEADER``)."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.cli import main
from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast
from gradprobe.forecast import section as section_module
from gradprobe.forecast.proxies import probe_efficiency, stratified_counts
from gradprobe.probe import table as table_module
from gradprobe.probe.report_html import render_probe_report

C_OUT, C_R = 4480.0, 15029.0


def _probe(noisy: np.ndarray) -> dict:
    o = np.random.default_rng(0).normal(2.0, 0.5, size=16)
    p = probe_result({"outcome": o, "noisy": noisy, "flat": np.zeros(16)}, {"outcome": C_OUT, "noisy": C_OUT,
                                                                            "flat": C_R})
    p["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    for r in p["rewards"]:  # the raw table's other columns, as a probe writes them
        r.update(snr=1.5, predicted_gain_at_budget=2.0, interval=[1.0, 3.0], signal_proxy_per_group=None)
    p["rewards"][2].update(snr=0.0, interval=[0.0, 0.0], valid_completions=128)
    return p


@pytest.fixture(scope="module")
def curve():
    return synthetic_curve(noise=0.3, seeds=4)


def test_a_fallback_on_a_low_snr_of_rho_names_it(curve):
    noisy = np.random.default_rng(3).normal(2.0, 8.0, size=16)  # rho about 1, far from measured
    row = forecast_rewards(curve, _probe(noisy), method="probe", n_draws=300).table.set_index("arm").loc["noisy"]
    assert row["method"] == "cost_only (SNR of rho-1 <= 1)"
    assert f"SNR of rho-1 (|rho-1|/se) {row['snr']:.2f} <= 1: rho shrunk to 1" in row["note"]
    cost = forecast_rewards(curve, _probe(noisy), method="cost_only", n_draws=300).table.set_index("arm")
    assert f"(SNR of rho-1 {row['snr']:.2f} <= 1, so rho is shrunk to 1)" in cost.loc["noisy", "verdict"]


def test_the_equal_cost_verdict_quotes_the_snr_of_rho(curve):
    o = np.random.default_rng(0).normal(2.0, 0.5, size=16)  # grpo's groups (_probe's)
    twin = 2.5 * o + np.random.default_rng(1).normal(0.0, 0.5, size=16)  # rho about 2.5 at grpo's cost, measured
    row = forecast_rewards(curve, _probe(twin), method="cost_only", n_draws=300).table.set_index("arm").loc["noisy"]
    assert 3 < row["snr"] < 1e3 and row["verdict"].endswith(f" vs grpo, SNR of rho-1 {row['snr']:.2f}")
    exact = forecast_rewards(curve, _probe(2.5 * o), method="cost_only", n_draws=300).table.set_index("arm")
    assert exact.loc["noisy", "verdict"].endswith(" vs grpo, SNR of rho-1 exact")  # 2.5 x grpo's on every group


def test_the_no_gradient_note_names_the_alignments_snr(curve):
    row = forecast_rewards(curve, _probe(np.ones(16)), n_draws=300).table.set_index("arm").loc["flat"]
    assert row["note"].startswith("its <g_R, u>, interval and SNR of <g_R, u> are exact zeros, not a measurement")


def test_the_reading_notes_name_the_snr_of_rho():
    r, ref = np.zeros(16), np.random.default_rng(0).normal(1.0, 0.3, size=16)
    r[:2] = -0.5
    eff = probe_efficiency("r", [r], [ref], counts=stratified_counts([16], 300, 0))
    assert any("so its SNR of rho-1 and its interval are not to be trusted" in n for n in eff.notes)


def test_the_help_names_the_snr_of_rho(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the probe's efficiency ratio shrunk by the SNR of rho-1, |rho-1|/se (cost only where it is <= 1)" in text
    assert "the forecast's rho and gain intervals and SNR of rho-1 always come from its own 2000 draws" in text


def test_report_html_names_the_raw_tables_snr(curve):
    p = _probe(np.ones(16))
    p["forecast"] = json.loads(json.dumps(forecast_section(p, curve=curve, method="cost_only"), allow_nan=False))
    page = html.unescape(render_probe_report(p, []))
    assert "<th>SNR of <g_R, u></th>" in page and "<th>SNR</th>" not in page
    assert ("its SNR, <g_R, u> / its bootstrap standard error (not the forecast's SNR of rho - 1,\n|rho - 1| / se)"
            in page)


def test_the_console_headers_are_the_two_constants(curve, monkeypatch):
    p = _probe(np.ones(16))
    p.update(ledger={"generated_tokens": {}, "charged_generated_tokens": 1000, "flops": {"generation": 2.0e9}},
             costs={}, config=dict(p["config"], reference="heldout", precondition="adam"))
    sec = forecast_section(p, curve=curve, method="cost_only")
    assert (table_module.ALIGNMENT_SNR_HEADER, section_module.RHO_SNR_HEADER) == ("<g,u>/se", "|rho-1|/se")
    header = next(x for x in table_module.format_table(p).splitlines() if x.startswith("reward "))
    assert header.split()[:6] == ["reward", "<g_R,u>", "95%", "interval", "<g,u>/se", "gain/update"]
    header = next(x for x in format_forecast(sec).splitlines() if x.startswith("arm "))
    assert header.split()[5:9] == ["rho", "95%", "|rho-1|/se", "eff.updates"]
