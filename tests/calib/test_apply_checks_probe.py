"""``calib apply`` and ``gradprobe.load_probe`` run the forecast's checks of a probe.json; a stored forecast section is
checked against the forecast of the probe's batches.

A tester edited ``probe.json``'s ``forecast`` section (mc_value's ``gain_cost_only`` and ``forecast_gain`` from
-3.3 to +5.0): ``calib apply`` calibrated the edited number (+3.670 instead of -3.207) without a word. A tripled
pooled entry, refused by the forecast, was shown by ``gradprobe.load_probe(...).table`` and calibrated too. The
readers now run :func:`gradprobe.forecast.probe_input.probe_batches_of` naming the file, and ``calib apply``
recomputes a section gradprobe wrote with its shipped curve (deterministic, about 0.3 s) and refuses a difference
(:func:`calib.probe_input.check_forecast_section`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import calib
import gradprobe
from calib.cli import main
import calib.probe_input
from calib.probe_input import CalibrationApplyError
from gradprobe.forecast import forecast_section
from gradprobe.layout import rerun_advice
from gradprobe.outputs import json_safe
from gradprobe.probe.batches import combine_batches
from gradprobe.probe.run import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
#: the shipped probes record the task by name only, outside the default calibration's domain: said, not tested here
pytestmark = pytest.mark.filterwarnings("ignore::calib.domain.CalibrationDomainWarning")


@pytest.fixture(scope="module")
def pooled() -> dict:
    """Two shipped single-batch probes pooled by combine_batches, with the forecast section gradprobe probe writes
    (the shipped tiny curve), as JSON."""
    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    raw = json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))
    raw["forecast"] = json_safe(forecast_section(raw))
    return json.loads(json.dumps(raw))


def _saved(tmp_path: Path, raw: dict, name: str = "p") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "probe.json").write_text(json.dumps(raw))
    return folder


def _row(raw: dict, arm: str) -> tuple[int, dict]:
    return next((i, r) for i, r in enumerate(raw["forecast"]["rows"]) if r["arm"] == arm)


def _rounded(value):
    """``value`` with every finite float rounded to 4 decimal places (a re-save with ``round(x, 4)``)."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else value
    return [_rounded(v) for v in value] if isinstance(value, list) else \
        {k: _rounded(v) for k, v in value.items()} if isinstance(value, dict) else value


def test_an_edited_forecast_section_is_refused_naming_the_field_and_both_values(tmp_path, capsys, pooled):
    intact = calib.apply("default", _saved(tmp_path, pooled, "intact"))  # the intact section, and a re-saved one,
    assert intact.loc["mc_value", "forecast"] == _row(pooled, "mc_value")[1]["gain_cost_only"]  # apply as before
    coarse = calib.apply("default", _saved(tmp_path, _rounded(pooled), "rounded4"))
    assert coarse["calibrated_gain"].tolist() == pytest.approx(intact["calibrated_gain"].tolist(), abs=1e-3)
    raw = json.loads(json.dumps(pooled))
    i, row = _row(raw, "mc_value")
    before = row["gain_cost_only"]
    assert raw["forecast"]["curve_is_default"] and raw["forecast"]["method"] == "cost_only" and before < -1.0
    row["gain_cost_only"] = row["forecast_gain"] = 5.0  # the tester's edit
    folder = _saved(tmp_path, raw)
    assert main(["apply", str(folder), "--out", str(tmp_path / "c.json")]) == 2  # was: 0, a calibrated +3.670
    err = capsys.readouterr().err
    assert f"{folder / 'probe.json'} field forecast.rows[{i}].forecast_gain (arm 'mc_value') is 5.0, but the " \
           f"forecast of its batches gives {before!r} (gradprobe.forecast.forecast_section with the shipped curve, " \
           "method 'cost_only', within 0.001 points); the section was edited or damaged after the probe wrote it" in err
    assert "delete its 'forecast' field (calib then computes the forecast from the batches)" in err
    assert not (tmp_path / "c.json").exists()
    with pytest.raises(CalibrationApplyError, match=r"^probe.json field forecast.rows\[1\].forecast_gain "):
        calib.apply("default", raw)  # a dict: the same check
    row["forecast_gain"] = before + 0.5 * calib.probe_input.SECTION_TOLERANCE  # within it: gain_cost_only differs
    with pytest.raises(CalibrationApplyError, match=r"field forecast.rows\[1\].gain_cost_only \(arm 'mc_value'\) is "
                                                    r"5.0, but the forecast of its batches gives -"):
        calib.apply("default", raw)
    del raw["forecast"]  # the fix the message gives: the section is then computed from the batches
    table = calib.apply("default", raw)
    assert table.loc["mc_value", "forecast"] == pytest.approx(before, abs=1e-12)


def test_a_tripled_pooled_entry_is_refused_by_load_probe_and_calib_apply(tmp_path, capsys, pooled):
    raw = json.loads(json.dumps(pooled))
    entry = raw["rewards"][1]
    assert entry["name"] == "mc_value" and entry["inner_product"] == 465.58605398689656
    entry["per_group"] = [3 * x for x in entry["per_group"]]
    for key in ("inner_product", "predicted_gain_per_update", "predicted_gain_at_budget"):
        entry[key] *= 3
    folder = _saved(tmp_path, raw)
    file = folder / "probe.json"
    expected = (f"{file} field rewards[1].inner_product (reward 'mc_value') is {3 * 465.58605398689656!r}, but its "
                "batches give 465.58605398689656 (inner_product = the mean of its batches' batches[k].rewards[1]."
                "inner_product, as gradprobe.probe.batches.combine_batches pools them)")
    with pytest.raises(ValueError) as info:  # was: read, its .table showing the tripled numbers
        gradprobe.load_probe(folder)
    assert str(info.value).startswith(expected) and str(info.value).endswith(rerun_advice(folder))
    assert main(["apply", str(folder), "--out", str(tmp_path / "c.json")]) == 2  # was: calibrated
    assert expected in capsys.readouterr().err
    with pytest.raises(CalibrationApplyError, match=r"^probe.json field rewards\[1\].inner_product \(reward "
                                                    r"'mc_value'\) is 1396.75"):
        calib.apply("default", raw)  # a dict never read from a file: checked by calibrate itself
