"""The one JSON-number rule (:func:`gradprobe.outputs.is_json_number`) in the older reader of gradprobe's JSON
encoding, :func:`gradprobe.outputs.json_float` (null -> NaN, "inf"/"-inf" -> +-inf), and in its callers.

Before this change ``json_float(True)`` read 1.0 (JSON ``true``, numpy booleans likewise), ``json_float(10**400)``
crashed with OverflowError (``json_number_float`` reads +inf), a list or an object raised TypeError; so a
``probe.json`` with ``true`` in a number field gave a table of 1.0, a ``tokens.jsonl`` score ``true`` a score of
1, calib's first-order gain at a time budget used ``seconds_per_update: true`` as 1 second, and calib carried its
own wrappers (``calib.file_check._stored_float``, the number branches of ``calib.probe_input._gain``), whose
messages the last tests here keep. ``_beyond_float`` is public as :func:`gradprobe.outputs.beyond_float`.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

import gradprobe.outputs
from calib.model import CalibrationFileError, default_path, load_calibration
from calib.probe_input import CalibrationApplyError, _gain, first_order_gain
from gradprobe.api.probe_result import ProbeResult
from gradprobe.outputs import json_float

HUGE = 10 ** 400  # JSON holds it; a float cannot (about 1.8e308 at most)
HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
ENCODING = "a number of gradprobe's JSON encoding (a number, null, \"inf\" or \"-inf\")"
RERUN = "re-run `gradprobe probe` (calib never edits probe.json)"


# ----------------------------------------------------------------------------- json_float itself

@pytest.mark.parametrize("value, shown", [(True, "True"), (False, "False"), (np.bool_(True), repr(np.bool_(True))),
                                          (np.bool_(False), repr(np.bool_(False)))],
                         ids=["true", "false", "np.True_", "np.False_"])
def test_json_float_refuses_a_boolean(value, shown):
    with pytest.raises(ValueError) as e:  # was 1.0 / 0.0
        json_float(value)
    assert str(e.value) == f"{shown} is a boolean (JSON true/false), not {ENCODING}: a boolean is never read as 1 or 0"


@pytest.mark.parametrize("value, want", [(HUGE, math.inf), (-HUGE, -math.inf), (2 ** 1024, math.inf)],
                         ids=["huge", "-huge", "2**1024"])
def test_json_float_reads_an_integer_too_large_for_a_float_as_inf_by_its_sign(value, want):
    got = json_float(value)  # was OverflowError
    assert type(got) is float and got == want


@pytest.mark.parametrize("value, want", [
    (None, math.nan), ("inf", math.inf), ("-inf", -math.inf), (" +Inf ", math.inf), ("nan", math.nan),
    ("Infinity", math.inf), ("-infinity", -math.inf), (1.5, 1.5), (0, 0.0), (-3, -3.0), (np.int64(7), 7.0),
    (np.float64(2.5), 2.5), (np.float32(0.5), 0.5), (np.array(1.25), 1.25), (math.inf, math.inf),
    (2 ** 1023, 8.98846567431158e+307)], ids=[
    "null", "inf", "-inf", "+Inf-spaced", "nan-text", "Infinity", "-infinity", "1.5", "0", "-3", "np.int64",
    "np.float64", "np.float32", "0-d-array", "float-inf", "2**1023"])
def test_json_float_keeps_every_reading_it_had(value, want):
    got = json_float(value)
    assert type(got) is float and (math.isnan(got) if math.isnan(want) else got == want)


@pytest.mark.parametrize("value", ["abc", "", "1.5", [1.0], {"x": 1}, (1.0,)], ids=[
    "text", "empty", "number-as-text", "list", "object", "tuple"])
def test_json_float_refuses_anything_else_with_a_value_error(value):
    with pytest.raises(ValueError) as e:  # a list, an object, a tuple raised TypeError
        json_float(value)
    assert str(e.value) == f"{value!r} is not {ENCODING}"


def test_beyond_float_is_public_and_says_whether_an_integer_is_too_large_for_a_float():
    from gradprobe.outputs import beyond_float  # was the private _beyond_float

    assert "beyond_float" in gradprobe.outputs.__all__ and beyond_float.__doc__
    assert [beyond_float(v) for v in (HUGE, -HUGE, 2 ** 1024, 2 ** 1023, np.int64(5), True, math.inf, 1e308, "1" * 400,
                                      None)] == [True, True, True, False, False, False, False, False, False, False]


# ----------------------------------------------------------------------------- gradprobe: a probe folder

def _probe(folder: Path, reward: dict | None = None, row: dict | None = None) -> ProbeResult:
    r = {"name": "outcome", "inner_product": 0.5, "interval": [0.25, "inf"], "snr": None,
         "predicted_gain_per_update": 0.125, "tokens_per_update": 300, "predicted_gain_at_budget": 2.0}
    f = {"arm": "outcome", "forecast_gain": 1.5, "gain_interval": [-1.0, 4.0], "forecast_accuracy": 60.0, "rho": 1.0,
         "rho_raw": 1.0, "rho_interval": [0.5, 2.0], "snr": "inf", "effective_updates": 10.0, "gain_probe": 1.5,
         "gain_cost_only": 0.0, "gain_signal_proxy": None, "method": "probe", "verdict": "ok"}
    raw = {"rewards": [{**r, **(reward or {})}], "forecast": {"available": True, "rows": [{**f, **(row or {})}]}}
    (folder / "probe.json").write_text(json.dumps(raw))
    return ProbeResult(json.loads((folder / "probe.json").read_text()), folder)


def test_the_probe_table_reads_the_json_encoding_and_keeps_its_columns(tmp_path):
    table = _probe(tmp_path, reward={"inner_product": HUGE}).table  # HUGE was OverflowError
    row = table.loc["outcome"]
    assert list(table.columns) == [
        "inner_product", "inner_product_low", "inner_product_high", "snr", "gain_per_update", "tokens_per_update",
        "gain_at_budget", "no_signal", "forecast_gain", "forecast_gain_low", "forecast_gain_high",
        "forecast_accuracy", "rho", "rho_raw", "rho_low", "rho_high", "rho_snr", "effective_updates", "gain_probe",
        "gain_cost_only", "gain_signal_proxy", "method", "verdict", "no_verdict_reason"]
    assert row["inner_product"] == math.inf and row["inner_product_low"] == 0.25
    assert row["inner_product_high"] == math.inf and math.isnan(row["snr"]) and row["tokens_per_update"] == 300
    assert (row["forecast_gain_low"], row["forecast_gain_high"], row["rho_low"], row["rho_high"]) == (-1, 4, 0.5, 2)
    assert row["rho_snr"] == math.inf and math.isnan(row["gain_signal_proxy"]) and row["verdict"] == "ok"


@pytest.mark.parametrize("reward, row, field, shown", [
    ({"snr": True}, None, "rewards[0].snr", "true"),
    ({"interval": [False, 1.0]}, None, "rewards[0].interval[0]", "false"),
    (None, {"rho_interval": [0.5, "abc"]}, "forecast.rows[0].rho_interval[1]", '"abc"'),
    (None, {"gain_probe": True}, "forecast.rows[0].gain_probe", "true")], ids=[
    "snr-true", "interval-false", "rho-interval-text", "gain-probe-true"])
def test_the_probe_table_refuses_a_boolean_naming_the_file_the_field_and_the_fix(tmp_path, reward, row, field, shown):
    probe = _probe(tmp_path, reward, row)
    with pytest.raises(ValueError) as e:  # true/false were read as 1.0 / 0.0
        _ = probe.table
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'probe.json'} field {field} is {shown}: ")
    assert message.endswith(f"; re-run `gradprobe probe --out '{tmp_path}'` (with the same settings) to write the "
                            "probe's files again") and "\n" not in message
    assert ("is a boolean" in message) is (shown in ("true", "false"))


def _tokens_line(score) -> str:
    return json.dumps({"row": 0, "prompt_id": "p0", "score": score, "truncated": False, "tokens": [1, 2],
                       "texts": ["a", "b"], "alignment": [0.5, -0.5], "advantages": {"outcome": [1.0, 1.0]}})


def test_the_tokens_table_refuses_a_score_of_true_naming_the_line(tmp_path):
    probe = _probe(tmp_path)
    (tmp_path / "tokens.jsonl").write_text(_tokens_line(None) + "\n" + _tokens_line(True) + "\n")
    with pytest.raises(ValueError) as e:  # was a score of 1.0
        probe.tokens()
    assert str(e.value) == (f"{tmp_path / 'tokens.jsonl'} is damaged (line 2: field score: True is a boolean (JSON "
                            f"true/false), not {ENCODING}: a boolean is never read as 1 or 0); re-run `gradprobe "
                            f"probe --out '{tmp_path}'` (with the same settings) to write the probe's files again")
    (tmp_path / "tokens.jsonl").write_text(_tokens_line(None) + "\n" + _tokens_line("inf") + "\n")
    scores = probe.tokens()["score"].tolist()
    assert math.isnan(scores[0]) and scores[2:] == [math.inf, math.inf]


# ----------------------------------------------------------------------------- calib

def test_a_time_budget_refuses_seconds_per_update_true():
    entry = {"name": "outcome", "predicted_gain_per_update": 0.5, "tokens_per_update": 100}
    assert first_order_gain({**entry, "seconds_per_update": 2.0}, "time", 10.0) == 2.5
    for bad in (True, None, "abc", 0):
        with pytest.raises(CalibrationApplyError) as e:  # true was read as 1 second
            first_order_gain({**entry, "seconds_per_update": bad}, "time", 10.0)
        assert str(e.value) == ("probe entry 'outcome' has no positive seconds_per_update; a time budget needs it "
                                "(re-run the probe with this gradprobe)")


@pytest.mark.parametrize("value, problem", [
    (True, "is not a number"), (False, "is not a number"),
    (np.bool_(True), "is not a number (a number, or null for no forecast)"),
    ({"x": 1}, "is not a number (a number, or null for no forecast)"),
    ("-inf", "is infinite (null means no forecast)"),
    (HUGE, "is not a finite number (null means no forecast)"),
    (-100.5, "is outside [-100, 100] (a gain vs GRPO in accuracy points)")], ids=[
    "true", "false", "np.True_", "object", "-inf", "huge", "below"])
def test_a_probe_forecast_keeps_its_messages_with_json_float(value, problem):
    with pytest.raises(CalibrationApplyError) as e:
        _gain(value, "forecast.rows[0].gain_probe", "forecast_probe", "probe.json")
    # as probe.json spells it (true, {"x": 1}; text quoted; numpy's bool, no JSON value, by repr): was True
    shown = HUGE_SHOWN if value is HUGE else repr(value) if isinstance(value, (str, np.bool_)) else json.dumps(value)
    assert str(e.value) == f"probe.json field forecast.rows[0].gain_probe is {shown}: it {problem}; {RERUN}"
    assert _gain(-100, "f", "forecast_probe", "p") == -100.0 and _gain(250, "f", "forecast_first_order", "p") == 250.0


def _calibration(tmp_path: Path, name: str, value) -> Path:
    d = copy.deepcopy(json.loads(default_path().read_text()))
    d["check"][name][0] = value
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("value", [True, False, "abc", [1.0]], ids=["true", "false", "text", "list"])
def test_a_calibration_file_with_a_non_number_in_its_check_block_is_refused_as_before(tmp_path, value):
    path = _calibration(tmp_path, "point", value)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value).startswith(f"calibration file {path} is damaged: field check.point is missing or malformed; "
                                   "refit it with `calib fit ROWS.csv --forecaster forecast_cost_only --out ")
    assert "\n" not in str(e.value)


def test_a_calibration_check_value_too_large_for_a_float_is_shown_as_its_digits(tmp_path):
    path = _calibration(tmp_path, "lower", -HUGE)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value).startswith(f"calibration file {path}: check.lower[0] is -{HUGE_SHOWN} in the file but "
                                   "refitting the file's data gives ")


def test_a_probe_result_without_a_folder_still_names_the_field_and_a_fix(tmp_path):
    probe = ProbeResult(_probe(tmp_path, reward={"predicted_gain_at_budget": "n/a"}).raw)
    with pytest.raises(ValueError) as e:  # was the bare "'n/a' is not a number ..." without the field
        _ = probe.table
    assert str(e.value) == (f"probe.json field rewards[0].predicted_gain_at_budget is \"n/a\": 'n/a' is not "
                            f"{ENCODING}; re-run the probe")
