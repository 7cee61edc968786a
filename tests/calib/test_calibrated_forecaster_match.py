"""The calibrated block says which forecaster it calibrates when that is not the verdicts' forecaster.

A trial user's report: under ``gradprobe probe --forecaster probe --calibration default`` the calibrated numbers were
cost only's (the shipped calibration corrects ``forecast_cost_only``) under a plain "calibrated gain" title, beside
verdicts that quote the probe's gains. A calibration is valid only for the forecaster it was fitted on, so it stays
applied to cost only's gain (never to the probe's); the block now says whose gain it is, in its title and in a note
right under it, and ``calibrated.json`` records the verdicts' forecaster (``calibration.verdict_forecaster``,
``calibration.calibrates_verdict``). Built on the shipped study's real probe (``data/study_tiny/probe``) with its
forecast section made as ``gradprobe probe`` makes it (:func:`gradprobe.forecast.forecast_section`).
"""

from __future__ import annotations

import json
import shutil

import pytest

import calib
from calib.apply import calibrate, format_calibrated, load_probe, write_calibrated
import calib.cli
from calib_helpers import COST_ONLY_NOTE as NOTE, SHIPPED_PROBE as PROBE
from gradprobe.forecast import forecast_section
from gradprobe.outputs import json_safe


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


def _probed(method: str | None):
    """The shipped probe with the forecast section ``gradprobe probe --forecaster METHOD`` writes (None: none)."""
    raw, _, task = load_probe(PROBE)
    if method is not None:
        raw["forecast"] = forecast_section(raw, method=method)
    return raw, task


def test_probe_verdicts_with_the_cost_only_calibration_say_whose_gain_is_calibrated(default, tmp_path):
    raw, task = _probed("probe")
    doc = calibrate(default, raw, task=task)
    c = doc["calibration"]
    assert (c["forecaster"], c["forecaster_name"], c["verdict_forecaster"], c["calibrates_verdict"]) == (
        "forecast_cost_only", "cost_only", "probe", False)
    assert c["forecaster_note"] == NOTE and doc["notes"].count(NOTE) == 1
    # still applied to cost only's gain, the forecaster it was fitted on, not to the probe's gains the verdicts quote
    rows = {r["arm"]: r for r in raw["forecast"]["rows"]}
    by = {r["name"]: r for r in doc["rewards"]}
    assert rows["mc_value"]["gain_probe"] == pytest.approx(-1.7825, abs=1e-4)
    assert rows["mc_value"]["gain_cost_only"] == pytest.approx(-4.6246, abs=1e-4)
    assert by["mc_value"]["forecast"] == pytest.approx(rows["mc_value"]["gain_cost_only"], abs=1e-12)
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(0.82689 * -4.62460 - 0.46476, abs=1e-4)  # -4.289
    lines = format_calibrated(doc).splitlines()
    assert lines[1].startswith("calibrated gain vs GRPO at 250,000 tokens of cost_only's gain, not probe's (linear "
                               "correction of forecast_cost_only, 90% conformal interval")
    assert lines[2] == f"note: {NOTE}"  # under the title, above the numbers it qualifies
    assert sum(NOTE in line for line in lines) == 1  # not repeated among the notes at the bottom
    saved = json.loads(write_calibrated(tmp_path, doc).read_text())["calibration"]
    assert (saved["verdict_forecaster"], saved["calibrates_verdict"]) == ("probe", False)
    assert saved["forecaster_note"] == NOTE


@pytest.mark.parametrize("method", ["cost_only", "auto"])  # auto: the shipped validation record picks cost only
def test_a_calibration_of_the_verdicts_forecaster_prints_as_before(default, method):
    raw, task = _probed(method)
    doc = calibrate(default, raw, task=task)
    c = doc["calibration"]
    assert (c["verdict_forecaster"], c["calibrates_verdict"], c["forecaster_note"]) == ("cost_only", True, None)
    text = format_calibrated(doc)
    assert text.splitlines()[1].startswith("calibrated gain vs GRPO at 250,000 tokens (linear correction of "
                                           "forecast_cost_only")
    assert "not probe" not in text and "forecaster of the verdicts" not in text
    assert "cost_only's gain" not in text


def test_without_a_forecast_section_no_verdict_forecaster_is_claimed(default):
    raw, task = _probed(None)  # calib apply on a probe.json without a forecast section: computed there, no verdict
    doc = calibrate(default, raw, task=task)
    c = doc["calibration"]
    assert (c["verdict_forecaster"], c["calibrates_verdict"], c["forecaster_note"]) == (None, None, None)


def test_an_auto_choice_of_another_forecaster_is_named_as_auto(default):
    raw, task = _probed("probe")
    raw["forecast"]["method_choice"] = "auto: validated best, ..."  # a validation record that picked the probe
    note = calibrate(default, raw, task=task)["calibration"]["forecaster_note"]
    assert "not probe, the forecaster of the verdicts (chosen by --forecaster auto)" in note


def test_the_command_prints_the_label_under_forecaster_probe(default, tmp_path, capsys):
    """``calib apply`` on a probe folder whose probe.json holds a --forecaster probe section."""
    study = shutil.copytree(PROBE.parent, tmp_path / "study_tiny")
    raw, _ = _probed("probe")
    (study / "probe" / "probe.json").write_text(json.dumps(json_safe(raw)))
    assert calib.cli.main(["apply", str(study / "probe")]) == 0
    out = capsys.readouterr().out
    assert "calibrated gain vs GRPO at 250,000 tokens of cost_only's gain, not probe's (" in out
    assert out.count(f"note: {NOTE}") == 1
