"""``report.html`` labels the calibrated gain as ``gradprobe probe`` prints it (:func:`calib.apply.format_calibrated`).

Under ``gradprobe probe --forecaster probe --calibration default`` the shipped calibration corrects cost only's gain,
not the probe gains the verdicts quote. The console says so (its title: "of cost_only's gain, not probe's", and a
note); the page put a plain "calibrated gain" column beside the probe's gain. It now heads the column
``calibrated gain (cost_only's, not probe's)``, shows cost only's own gain beside it (the number the calibration
read), puts the console's note under the table, and marks each calibrated gain with its caveats (``tied``: the three
rewards share cost only's forecast, so their calibrated gains are equal) with the console's notes under the table.
A calibration of the verdicts' own forecaster (``--forecaster cost_only``) gets no such label or note.

Built on the shipped study's real probe (``data/study_tiny/probe``), its forecast section made as ``gradprobe probe``
makes it and the calibration applied as ``gradprobe probe --calibration default`` applies it
(:func:`calib.apply.calibrate_probe`), as tests/calib/test_calibrated_forecaster_match.py does; no model run."""

from __future__ import annotations

import html
import re

import pytest

import calib
from calib.apply import calibrate_probe, format_calibrated, load_probe
from calib_helpers import COST_ONLY_NOTE as NOTE, SHIPPED_PROBE as PROBE
from gradprobe.forecast import forecast_section
from gradprobe.probe.report_html import render_probe_report

TIE = ("['mc_value', 'mc_advantage', 'hybrid_0.5'] have the same forecast_cost_only (-4.625; cost only reads only the "
       "tokens per update: 25,520 for each), so the calibration gives them the same calibrated gain (-4.289) and "
       "interval: it cannot tell them apart, and the difference between them is not measured by it")
TIED = ("mc_value", "mc_advantage", "hybrid_0.5")


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


def _calibrated(default, method: str, edit=None) -> tuple[dict, str]:
    """(the probe result as ``gradprobe probe --forecaster METHOD --calibration default`` holds it before writing the
    page, the unescaped page); ``edit(result)`` runs on the forecast section before the calibration."""
    raw, _, task = load_probe(PROBE)
    raw["forecast"] = forecast_section(raw, method=method)
    if edit is not None:
        edit(raw)
    calibrate_probe(raw, default, source="default", task=task)
    return raw, html.unescape(render_probe_report(raw, []))


def _table(page: str) -> str:
    start = page.index('<table id="verdicts">')
    return page[start:page.index("</table>", start)]


def _header(page: str) -> list[str]:
    return re.findall(r"<th>(.*?)</th>", _table(page), re.S)


def _rows(page: str) -> dict[str, list[str]]:
    """arm -> its cells in the verdict table."""
    return {m.group(1): re.findall(r"<td[^>]*>(.*?)</td>", m.group(0), re.S)
            for m in re.finditer(r"<tr[^>]*><td>([^<]+)</td>.*?</tr>", _table(page), re.S)}


def _after_table(page: str) -> str:
    """The verdict section from the end of its table to the pre-screen line."""
    end = page.index("</table>", page.index('<table id="verdicts">'))
    return page[end:page.index('<p id="pre-screen">', end)]


def test_probe_verdicts_with_the_cost_only_calibration_are_labelled_as_on_the_console(default):
    raw, page = _calibrated(default, "probe")
    console = format_calibrated(raw)
    assert "250,000 tokens of cost_only's gain, not probe's (" in console and f"note: {NOTE}" in console
    assert _header(page) == ["arm", "reward", "tokens / update", "rho", "forecast accuracy", "gain vs grpo",
                             "interval", "cost_only's gain vs grpo", "calibrated gain (cost_only's, not probe's)",
                             "calibrated interval", "method", "verdict"]
    rows = _rows(page)
    # the verdicts quote the probe's gains; beside them cost only's gain, which the calibration corrects
    assert [rows[a][5] for a in TIED] == ["-1.8", "-5.1", "-2.9"]
    assert [rows[a][7:10] for a in TIED] == [["-4.6", "-4.3 tied", "[-7.6, -1.0]"]] * 3
    assert rows["outcome"][7:10] == ["+0.0", "+0.0", "[+0.0, +0.0]"]  # grpo itself: no caveat
    below = _after_table(page)
    assert f'<p class="note" id="calibration-forecaster">{NOTE}</p>' in below
    tie = f"{TIE}; the probe gains the verdicts quote: mc_value -1.8, mc_advantage -5.1, hybrid_0.5 -2.9"
    assert f"note: {tie}" in console and f'<p class="note calibration">{tie}</p>' in below
    assert page.count(NOTE) == 1  # said once, as the console says it once
    # a reward outside the calibration's domain is marked after its caveats, as the console marks it
    next(r for r in raw["rewards"] if r["name"] == "mc_value")["outside_domain"] = True
    next(r for r in raw["calibration"]["rewards"] if r["name"] == "mc_value")["outside_domain"] = True
    assert "-4.289        [-7.603, -0.981]  tied  outside domain" in format_calibrated(raw)
    assert _rows(html.unescape(render_probe_report(raw, [])))["mc_value"][8] == "-4.3 tied outside domain"


@pytest.mark.parametrize("method", ["cost_only", "auto"])  # auto: the shipped validation record picks cost only
def test_a_calibration_of_the_verdicts_forecaster_gets_no_label(default, method):
    raw, page = _calibrated(default, method)
    assert raw["calibration"]["calibration"]["forecaster_note"] is None
    assert _header(page)[5:10] == ["gain vs grpo", "interval", "calibrated gain", "calibrated interval", "method"]
    rows = _rows(page)
    assert [rows[a][5:9] for a in TIED] == [["-4.6", "[-5.8, -3.7]", "-4.3 tied", "[-7.6, -1.0]"]] * 3
    assert rows["outcome"][7:9] == ["+0.0", "[+0.0, +0.0]"]
    assert f'<p class="note calibration">{TIE}</p>' in _after_table(page)  # the caveat holds whoever's verdicts
    for words in ("not probe's", "cost_only's gain", "forecaster of the verdicts", 'id="calibration-forecaster"'):
        assert words not in page


def test_a_no_verdict_row_keeps_its_mark_and_gets_no_calibrated_gain(default):
    """A row that gives no verdict (its ``no_verdict_reason``, here set by hand) keeps its ``*`` on every number read
    off the curve; calib gives it no calibrated gain (NaN, interval [NaN, NaN]): n/a as on the console (the interval
    read "[+nan, +nan]"), no caveat, and the others' tie is between the two left."""
    why = "the reference curve falls: check the curve"

    def no_verdict(raw):
        row = next(r for r in raw["forecast"]["rows"] if r["arm"] == "mc_value")
        row.update(no_verdict_reason=why, verdict=f"no verdict at 250k: {why}")

    raw, page = _calibrated(default, "probe", no_verdict)
    console = format_calibrated(raw).splitlines()
    assert "mc_value            -4.625         n/a                     n/a" in console
    rows = _rows(page)
    assert rows["mc_value"][5] == "-1.8*" and rows["mc_value"][7:10] == ["-4.6*", "n/a*", "n/a*"]
    assert rows["mc_value"][11] == f"no verdict at 250k: {why}"
    assert [rows[a][7:10] for a in TIED[1:]] == [["-4.6", "-4.3 tied", "[-7.6, -1.0]"]] * 2
    below = _after_table(page)
    assert below.index('<p class="note" id="no-verdict">') < below.index('id="calibration-forecaster"')
    gone = ("forecast_cost_only cannot say anything about ['mc_value'] (no forecast: probe.json says mc_value: no "
            f"verdict: {why}); no calibrated gain is given for them")
    assert f"note: {gone}" in console and f'<p class="note calibration">{gone}</p>' in below
    assert "['mc_advantage', 'hybrid_0.5'] have the same forecast_cost_only" in below
