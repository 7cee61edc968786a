"""``report.html`` marks a forecast row read off a reference curve that gives no verdict at the budget (its
``no_verdict_reason``) as ``gradprobe probe`` prints it: no verdict wording or colour, the reason in the row's verdict
cell, the numbers read off the curve marked ``*`` with the console's line under the table, and the intervals figure
does not draw the row as a forecast (its caption says why). A row that gives a verdict renders as before.

Synthetic probe results and CSV curves (those of tests/forecast/test_curve_adequacy.py), no model run."""

from __future__ import annotations

import html
import json
import math
import re

import numpy as np
import pytest
from forecast_helpers import probe_result

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast
from gradprobe.forecast.curves import load_reference_curve
from gradprobe.probe.report_figures import NO_VERDICT_LABEL, interval_figure
from gradprobe.probe.report_html import render_probe_report

C_OUT, C_HYB = 4_480, 15_029  # tokens per update of outcome and hybrid (the trial's 16x8 batch)
GOOD = [(0, 0.46), (5, 0.55), (10, 0.62), (20, 0.70), (40, 0.76), (60, 0.78)]
CURVES = {"good": GOOD, "crash": GOOD + [(80, 0.05)],
          "decreasing": [(0, 0.70), (5, 0.66), (10, 0.60), (20, 0.52), (40, 0.42), (60, 0.36)]}
FALLS = ("the reference curve falls (A 22.2 < R0 70.0 points), so read off it fewer updates forecast more accuracy "
         "and a costlier reward looks better: check the curve")
MISFIT = ("the reference curve is not described by its fit (rmse 23.0 points; the eval at update 80 is 52.7 points "
          "below it): check the curve")
FOOTNOTE = "* read off a reference curve that gives no verdict here (why: in the row's verdict); not advice"
ADVICE = ("worth its", "not worth", "no detectable difference")


def _curve(tmp_path, name: str):
    path = tmp_path / f"{name}.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in CURVES[name]))
    return load_reference_curve(path)


def _probe(rewards=("outcome", "hybrid")) -> dict:
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    scale = {"outcome": 1.0, "hybrid": 2.0}
    p = probe_result({r: scale[r] * o for r in rewards}, {"outcome": C_OUT, "hybrid": C_HYB}, signal={
        r: scale[r] ** 2 * o ** 2 for r in rewards})
    p["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    for r in p["rewards"]:  # the raw table's other columns, as a probe writes them
        r.update(snr=1.0, predicted_gain_at_budget=2.0, interval=[1.0, 3.0])
    return p


def _page(tmp_path, name: str, **kw) -> tuple[dict, str]:
    """(the probe result with its ``forecast`` as probe.json holds it, the unescaped page)."""
    p = _probe(**kw)
    p["forecast"] = json.loads(json.dumps(forecast_section(p, curve=_curve(tmp_path, name), method="cost_only"),
                                          allow_nan=False))
    return p, html.unescape(render_probe_report(p, []))


def _verdict_rows(page: str) -> dict[str, str]:
    """arm -> the whole ``<tr ...>...</tr>`` of the verdict table (unescaped page)."""
    start = page.index('<table id="verdicts">')
    table = page[start:page.index("</table>", start)]
    return {m.group(1): m.group(0) for m in re.finditer(r"<tr[^>]*><td>([^<]+)</td>.*?</tr>", table, re.S)}


def _cells(row: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)


def test_a_falling_curve_row_shows_its_reason_marked_numbers_and_no_verdict(tmp_path):
    p, page = _page(tmp_path, "decreasing")
    fc = p["forecast"]
    hyb = {r["arm"]: r for r in fc["rows"]}["hybrid"]
    assert hyb["no_verdict_reason"] == FALLS and fc["no_verdict_reason"] == FALLS
    assert f"{hyb['forecast_gain']:+.1f}" == "+17.5"  # read off the falling curve: the costlier reward "gains"
    row = _verdict_rows(page)["hybrid"]
    assert row.startswith('<tr class="noverdict"><td>hybrid</td>')
    cells = _cells(row)
    # arm, reward, tokens / update, rho, forecast accuracy, gain, interval, method, verdict
    assert cells[2:4] == ["15,029", "2.00"]  # measured, not read off the curve: unmarked (the console's too)
    assert cells[4:7] == [f"{hyb['forecast_accuracy']:.1f}*", "+17.5*", "[+16.3, +18.7]*"]
    assert cells[8] == f"no verdict at 250k: {FALLS}"  # the reason beside the row
    assert '<td class="verdict noverdict">' in row
    assert not any(a in row for a in ADVICE)
    assert f'<p class="note" id="no-verdict">{FOOTNOTE}</p>' in page
    assert f"(grpo reaches {fc['grpo_accuracy']:.1f}* points there)" in page  # the console marks it too
    assert f"(grpo reaches {fc['grpo_accuracy']:.1f}* points there)" in format_forecast(fc)
    # grpo's own row is the reference: its accuracy is the title's, marked as the console marks it; its gain is 0 by
    # definition, read off no curve, and unmarked
    out = _cells(_verdict_rows(page)["outcome"])
    assert out[4:7] == [f"{fc['grpo_accuracy']:.1f}*", "+0.0", "[+0.0, +0.0]"] and out[8] == "reference (grpo)"
    assert not re.search(r'(?:src|href)="(?!data:)', page) and "<script" not in page  # still self-contained


def test_a_row_that_gives_a_verdict_renders_as_before(tmp_path):
    p, page = _page(tmp_path, "good")
    assert p["forecast"]["no_verdict_reason"] is None
    row = _verdict_rows(page)["hybrid"]
    assert row.startswith("<tr><td>hybrid</td><td>hybrid</td>")
    cells = _cells(row)
    assert cells[4:7] == [f"{p['forecast']['rows'][1]['forecast_accuracy']:.1f}", "-9.8", "[-10.1, -9.4]"]
    verdict = p["forecast"]["rows"][1]["verdict"]  # with the validation record's clause (hybrid is not validated)
    assert verdict.startswith("not worth its tokens at 250k: -9.8 [-10.1, -9.4] vs grpo") and cells[8] == verdict
    assert '<td class="verdict not">not worth its tokens' in row
    assert 'id="no-verdict"' not in page and "noverdict" not in page.split("</style>")[1] and "*" not in row
    assert f"(grpo reaches {p['forecast']['grpo_accuracy']:.1f} points there)" in page


def test_one_table_with_a_no_verdict_arm_and_a_verdict_arm(tmp_path):
    """A learning-rate arm read off its own (crashing) curve gives no verdict; the x1 arm beside it keeps its."""
    p = _probe()
    arms = {"outcome": {"reward": "outcome"}, "hybrid": {"reward": "hybrid"},
            "hybrid_x2": {"reward": "hybrid", "lr_scale": 2.0}}
    res = forecast_rewards(_curve(tmp_path, "good"), p, method="cost_only", n_draws=300, arms=arms,
                           lr_curve={2.0: _curve(tmp_path, "crash")})
    p["forecast"] = json.loads(json.dumps(dict(res.to_dict(), method_choice="as asked"), allow_nan=False))
    rows = {r["arm"]: r for r in p["forecast"]["rows"]}
    assert rows["hybrid_x2"]["no_verdict_reason"] == MISFIT and rows["hybrid"]["no_verdict_reason"] is None
    page = html.unescape(render_probe_report(p, []))
    shown = _verdict_rows(page)
    x2, x1 = _cells(shown["hybrid_x2"]), _cells(shown["hybrid"])
    assert shown["hybrid_x2"].startswith('<tr class="noverdict">') and shown["hybrid"].startswith("<tr><td>")
    assert x2[8].startswith(f"no verdict at 250k: {MISFIT}") and x2[5].endswith("*") and x2[6].endswith("*")
    assert x1[8] == "not worth its tokens at 250k: -9.8 [-10.1, -9.5] vs grpo"
    assert x1[5:7] == ["-9.8", "[-10.1, -9.5]"]
    assert f"{FOOTNOTE}</p>" in page
    assert "grpo reaches" in page and "* points there" not in page  # the main curve gives verdicts
    fig, caption = interval_figure(p)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    xs = ax.containers[0].lines[0].get_xdata()
    assert math.isnan(xs[labels.index("hybrid_x2")])  # not drawn as a forecast
    assert xs[labels.index("hybrid")] == pytest.approx(rows["hybrid"]["forecast_gain"])
    notes = [(t.get_text(), t.xy[1]) for t in ax.texts]
    assert notes == [(NO_VERDICT_LABEL, labels.index("hybrid_x2"))]
    assert ("an arm read off a reference curve that gives no verdict at the budget is not drawn (its numbers are not "
            "a forecast: the verdict table gives them, marked *, and says why)") in caption
    assert "not drawn" in html.unescape(render_probe_report(p, [])).split("<figcaption>")[1]


def test_the_figure_does_not_draw_a_no_verdict_arm_as_a_forecast(tmp_path):
    p, _ = _page(tmp_path, "decreasing")
    fig, caption = interval_figure(p)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["hybrid"]
    assert all(math.isnan(x) for x in ax.containers[0].lines[0].get_xdata())  # no dot at +17.5
    assert len(ax.containers) == 1 and [t.get_text() for t in ax.texts] == [NO_VERDICT_LABEL]
    assert "gives no verdict at the budget is not drawn" in caption
    good, _ = _page(tmp_path, "good")
    fig, caption = interval_figure(good)
    assert fig.axes[0].containers[0].lines[0].get_xdata()[0] == pytest.approx(-9.8, abs=0.05)
    assert not fig.axes[0].texts and "no verdict" not in caption


def test_grpo_alone_says_why_under_the_table(tmp_path):
    """No row's verdict says why (grpo alone): the line under the table gives the section's reason, as the console."""
    p, page = _page(tmp_path, "crash", rewards=("outcome",))
    assert p["forecast"]["no_verdict_reason"] == MISFIT
    line = f"* read off a reference curve that gives no verdict here: {MISFIT}"
    assert line in format_forecast(p["forecast"])
    assert f'<p class="note" id="no-verdict">{line}</p>' in page
    assert f"(grpo reaches {p['forecast']['grpo_accuracy']:.1f}* points there)" in page


def test_a_verdict_beside_a_no_verdict_reason_is_not_shown_as_advice(tmp_path):
    """A probe.json whose no-verdict row carries advice (hand-edited, or written by another tool): the page says
    no verdict and why, not the advice."""
    p, _ = _page(tmp_path, "decreasing")
    row = next(r for r in p["forecast"]["rows"] if r["arm"] == "hybrid")
    row["verdict"] = "worth its tokens at 250k: +17.5 [+17.5, +17.5] vs grpo"
    cells = _cells(_verdict_rows(html.unescape(render_probe_report(p, [])))["hybrid"])
    assert cells[8] == f"no verdict at 250k: {FALLS}"


def test_the_title_names_the_update_the_forecast_is_for_when_it_differs_from_the_probes(tmp_path):
    """As the console's title (forecast.update, gradprobe.forecast.probe_input.update_batches): the forecast reads the
    curve's updates, so a probe of another update size is told which update the forecast is for."""
    p = _probe()
    fc = json.loads(json.dumps(forecast_section(p, curve=_curve(tmp_path, "good"), method="cost_only"),
                               allow_nan=False))
    assert fc["update"] is None
    assert "for the curve's" not in html.unescape(render_probe_report({**p, "forecast": fc}, []))
    fc["update"] = {"curve": [16, 8], "probe": [32, 8], "stated": True}
    page = html.unescape(render_probe_report({**p, "forecast": fc}, []))
    assert (f"<p>Forecast vs grpo at 250k tokens, for the curve's 16x8 updates, not the 32x8 of --update-prompts x "
            f"--update-group (grpo reaches {fc['grpo_accuracy']:.1f} points there), by the") in page
    fc["update"] = {"curve": [16, 8], "probe": [8, 4], "stated": False}  # the probe's own batch, no flag given
    page = html.unescape(render_probe_report({**p, "forecast": fc}, []))
    assert "for the curve's 16x8 updates, not the probe's 8x4 (grpo reaches " in page
