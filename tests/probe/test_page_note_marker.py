"""``report.html`` rewrites the no-curve note's "the gains above are" (the console's raw table is above it; the page's
is below) with the words the note is built from: :data:`gradprobe.forecast.section.RAW_GAINS_ABOVE`, one
definition for the writer (:func:`~gradprobe.forecast.section.forecast_section`) and the page
(:func:`gradprobe.probe.report_html._page_note`). A synthetic probe result, no model run."""

from __future__ import annotations

import numpy as np
from forecast_helpers import probe_result

from gradprobe.forecast import section
from gradprobe.forecast.section import forecast_section, format_forecast
from gradprobe.probe import report_html
from gradprobe.probe.report_html import render_probe_report

TAIL = ("the raw first-order extrapolation (expected to overestimate); a forecast needs a reference curve: pass "
        "--reference-curve (Python: reference_curve=; a grpo run's metrics.jsonl, a TRL trainer_state.json, a CSV of "
        "update,accuracy, a study "
        "folder or a saved curve)")


def _no_curve_probe() -> dict:
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    p = probe_result({"outcome": o, "mc": 2.0 * o}, {"outcome": 1000.0, "mc": 1500.0}, model="not-shipped")
    p["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    for r in p["rewards"]:  # the raw table's other columns, as a probe writes them
        r.update(snr=1.0, predicted_gain_at_budget=2.0, interval=[1.0, 3.0])
    return p


def test_the_page_rewrites_the_note_the_section_writes():
    p = _no_curve_probe()
    note = forecast_section(p)["note"]
    assert note == f"no reference curve for model 'not-shipped': the gains above are {TAIL}"
    assert f"forecast: none. {note}" in format_forecast(forecast_section(p))  # the console keeps "above"
    below = f"no reference curve for model 'not-shipped': the gains in the raw per-reward table below are {TAIL}"
    assert report_html._page_note(note) == below
    page = render_probe_report(dict(p, forecast=forecast_section(p)), [])
    said = below.replace("'", "&#39;")
    assert f'<p class="note">No forecast: {said}</p>' in page and "the gains above" not in page


def test_a_reworded_note_is_still_rewritten_on_the_page(monkeypatch):
    """The note is built from the shared words: reworded there (as both modules see them once imported), the note
    says the new words and the page still finds and replaces them."""
    for module in (section, report_html):
        monkeypatch.setattr(module, "RAW_GAINS_ABOVE", "the raw gains printed above are")
    note = forecast_section(_no_curve_probe())["note"]
    assert note == f"no reference curve for model 'not-shipped': the raw gains printed above are {TAIL}"
    assert report_html._page_note(note) == ("no reference curve for model 'not-shipped': the gains in the raw "
                                            f"per-reward table below are {TAIL}")
