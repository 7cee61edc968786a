"""grpo's row carries the title's mark: where the reference curve gives no verdict at the budget, the title's
"grpo reaches 82.4* points" and grpo's accuracy in the table are the same number, so both are marked (trial
finding: the row showed it without the ``*``); grpo's gain is 0 by definition, read off no curve, and stays
unmarked."""

from __future__ import annotations

import html
import json
import re

import numpy as np
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import ReferenceCurve
from gradprobe.forecast.section import forecast_section, format_forecast, row_marks
from gradprobe.probe.report_html import render_probe_report


def _probe(budget_tokens):
    rng = np.random.default_rng(0)
    return probe_result({"outcome": rng.normal(1.0, 0.3, 16), "hybrid": rng.normal(2.0, 0.3, 16)},
                        {"outcome": 4480.0, "hybrid": 15029.0}, budget_tokens=budget_tokens)


def _short_curve():
    """Two seeds evaluated up to update 5: a 1M-token budget (223 grpo updates) lies far past 2x its last eval."""
    n = np.tile(np.arange(6, dtype=float), 2)
    y = np.array([60, 63, 66, 68, 70, 71, 61, 64, 66, 69, 70, 72], float)
    return ReferenceCurve(updates=n, accuracy=y, seeds=np.repeat([0, 1], 6), source="short.csv")


def _cells(text, arm):
    [line] = [x for x in text.splitlines() if x.split()[:1] == [arm] and "[" in x]
    return line.split()  # arm, tokens, raw rho, rho, [lo, hi] (2 cells), SNR, eff.updates, accuracy, gain, ...


def test_grpos_accuracy_is_marked_as_the_titles_when_the_curve_gives_no_verdict():
    sec = forecast_section(_probe(1_000_000), curve=_short_curve(), curve_spec="short.csv", method="cost_only")
    assert sec["no_verdict_reason"].startswith("grpo's 223 effective updates lie 44.6x past the curve's last eval")
    text = format_forecast(sec)
    acc = f"{sec['grpo_accuracy']:.1f}"
    assert f"(grpo reaches {acc}* points there)" in text.splitlines()[1]
    grpo = _cells(text, "outcome")
    assert grpo[8:10] == [f"{acc}*", "+0.0"]  # accuracy marked as in the title; the 0 gain by definition is not
    hybrid = _cells(text, "hybrid")
    assert hybrid[8].endswith("*") and hybrid[9].endswith("*")


def test_no_mark_where_the_curve_gives_verdicts():
    text = format_forecast(forecast_section(_probe(250_000), curve=synthetic_curve(noise=0.3, seeds=4),
                                            curve_spec="synthetic", method="cost_only"))
    assert "*" not in " ".join(_cells(text, "outcome") + _cells(text, "hybrid"))


def test_row_marks_is_one_rule_for_the_console_and_the_html_report():
    """The HTML report had its own copy of the rule (grpo's row: ``reward == reference_reward and lr_scale == 1``,
    where the console took a row without ``lr_scale`` for grpo's too); both now call :func:`row_marks`."""
    probe = _probe(1_000_000)
    sec = forecast_section(probe, curve=_short_curve(), curve_spec="short.csv", method="cost_only")
    grpo = next(r for r in sec["rows"] if r["reward"] == "outcome")
    hybrid = next(r for r in sec["rows"] if r["reward"] == "hybrid")
    assert row_marks(sec, grpo) == ("*", "") and row_marks(sec, hybrid) == ("*", "*")
    assert row_marks(dict(sec, no_verdict_reason=None), grpo) == ("", "")
    assert row_marks(sec, dict(grpo, lr_scale=2.0)) == ("", "")  # grpo at another rate is no reference row
    assert row_marks(sec, {k: v for k, v in grpo.items() if k != "lr_scale"}) == ("*", "")  # a row without the field
    probe["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    for r in probe["rewards"]:  # the raw table's other columns, as a probe writes them
        r.update(snr=1.0, predicted_gain_at_budget=2.0, interval=[1.0, 3.0])
    sec = probe["forecast"] = json.loads(json.dumps(sec, allow_nan=False))  # as probe.json holds it
    page = html.unescape(render_probe_report(probe, []))
    table = page[page.index('<table id="verdicts">'):]
    table = table[:table.index("</table>")]
    for r in sec["rows"]:
        row = re.search(rf"<tr[^>]*><td>{r['arm']}</td>.*?</tr>", table, re.S).group(0)
        acc, gain = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[4:6]
        console = _cells(format_forecast(sec), r["arm"])[8:10]
        assert [acc, gain] == console, (r["arm"], acc, gain, console)
        assert (acc[-1:] == "*", gain[-1:] == "*") == tuple(m == "*" for m in row_marks(sec, r))
    # a grpo row without lr_scale (the case where the template's own copy of the rule differed): still marked
    for r in sec["rows"]:
        if r["reward"] == "outcome":
            del r["lr_scale"]
    page = html.unescape(render_probe_report(probe, []))
    row = re.search(r"<tr[^>]*><td>outcome</td>.*?</tr>", page[page.index('<table id="verdicts">'):], re.S).group(0)
    assert re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[4:6] == [f"{sec['grpo_accuracy']:.1f}*", "+0.0"]
