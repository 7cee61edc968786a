"""A budget inside the calibration's 0.5x-2x tolerance but outside its fitted range gets a printed note.

A trial user ran ``gradprobe probe --budget-tokens 500k --calibration default`` and got calibrated gains with no
domain note, although the default calibration was fitted at 250k tokens only (``budget_range`` [250000, 250000]):
:func:`calib.domain.check_domain` accepts half to twice the fitted range silently. The rule is unchanged (no
``outside_domain`` mark inside the band); a note (``outside`` False) now says the budget is extrapolated.
Built on the shipped study's real probe (``data/study_tiny/probe``) with its budget edited in memory.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from calib.apply import calibrate, format_calibrated
from calib.domain import budget_text, check_domain
from calib.model import load_calibration
from calib.probe_input import load_probe

PROBE = Path(__file__).resolve().parents[2] / "data" / "study_tiny" / "probe"
NOTE_500K = ("tokens budget 500k is outside the fitted 250k-250k but within the 0.5x-2x tolerance (125k-500k): "
             "extrapolated, so the calibrated gain and interval were not fitted or validated at this budget")


@pytest.fixture(scope="module")
def shipped():
    result, _, task = load_probe(PROBE)  # read only: nothing is written
    return load_calibration("default"), result, task


def at_budget(result: dict, tokens: float) -> dict:
    out = copy.deepcopy(result)
    out["config"]["budget_tokens"] = tokens
    return out


def test_the_default_calibration_was_fitted_at_250k_only(shipped):
    assert shipped[0].domain.budget_range == [250000.0, 250000.0]


def test_500k_is_calibrated_unmarked_with_a_note_that_it_is_extrapolated(shipped):
    cal, result, task = shipped
    doc = calibrate(cal, at_budget(result, 500_000), task=task)
    assert doc["outside_domain"] is False and not any(r["outside_domain"] for r in doc["rewards"])
    assert [str(w) for w in doc["warnings"]] == [NOTE_500K]
    w = doc["warnings"][0]
    assert (w.field, w.outside, w.reward) == ("budget_value", False, None)
    assert f"note: {NOTE_500K}" in format_calibrated(doc).splitlines()


@pytest.mark.parametrize("tokens, text", [(125_000, "125k"), (300_000, "300k")])
def test_the_band_edges_and_inside_get_the_note(shipped, tokens, text):
    cal, result, task = shipped
    ws = check_domain(cal, at_budget(result, tokens), task=task)
    assert [(w.field, w.outside) for w in ws] == [("budget_value", False)]
    assert str(ws[0]).startswith(f"tokens budget {text} is outside the fitted 250k-250k but within the 0.5x-2x")


def test_the_fitted_budget_gets_no_note_and_outside_the_band_is_marked_as_before(shipped):
    cal, result, task = shipped
    assert check_domain(cal, at_budget(result, 250_000), task=task) == []
    ws = check_domain(cal, at_budget(result, 600_000), task=task)
    assert [(w.field, w.outside) for w in ws] == [("budget_value", True)]
    assert str(ws[0]) == ("tokens budget 600000 is outside the calibration's domain (250000-250000; accepted "
                          "125000-500000): the calibrated gain is an extrapolation")


def test_budget_text():
    assert [budget_text("tokens", v) for v in (250_000, 1_500_000, 800, 333_000)] == ["250k", "1.5M", "800", "333k"]
    assert budget_text("time", 90) == "90 s"
