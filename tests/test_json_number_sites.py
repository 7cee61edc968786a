"""The JSON-number rule (:func:`gradprobe.outputs.is_json_number`) at the sites that still had their own, its one
float conversion (:func:`gradprobe.outputs.json_number_float`) and how a refusal shows an integer too large for a
float (:func:`gradprobe.outputs.json_number_text`: the digits the file holds, shortened and counted, never the
``inf`` it reads as).

Each test fails on the code before this change: a probe's ``config.budget_tokens`` or forecast of 10**400 crashed
calib with OverflowError; the probe's held-out accuracy read JSON ``true`` as 1 (an accuracy of 100 points); saved
curves, TRL logs and calibration files named a 401-digit integer "inf"; a plan's integer key kept a numpy integer
(np.int64, which ``json`` cannot write); ``seed_bootstrap_draws([])`` raised only at the first ``next()``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calib.file_check import CalibrationFileError, check_fitted, check_predictions
from calib.probe_input import DICT_FIX, CalibrationApplyError, _gain, check_probe_budgets
from gradprobe.forecast import CurveError, ReferenceCurve, default_curve_path
from gradprobe.forecast.curve_fit import REPLICATE_SEED, seed_bootstrap_draws
from gradprobe.forecast.start_check import heldout_measurement
from gradprobe.outputs import json_number_float, json_number_text
from gradprobe.training.coerce import coerce

HUGE = 10 ** 400  # JSON and TOML hold it; a float cannot (about 1.8e308 at most)
HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
RERUN = "re-run `gradprobe probe` (calib never edits probe.json)"


# ----------------------------------------------------------------------------- the helpers

@pytest.mark.parametrize("value, want", [
    (1, 1.0), (np.int64(3), 3.0), (np.float64(2.5), 2.5), (0.25, 0.25), (HUGE, math.inf), (-HUGE, -math.inf),
    (2 ** 1023, 8.98846567431158e+307), (math.inf, math.inf)], ids=[
    "int", "np.int64", "np.float64", "float", "huge", "-huge", "2**1023", "inf"])
def test_json_number_float_gives_a_python_float_and_a_huge_integer_as_inf(value, want):
    got = json_number_float(value)
    assert type(got) is float and got == want


def test_json_number_float_keeps_nan_and_refuses_what_is_no_number():
    assert math.isnan(json_number_float(math.nan))
    for bad in (True, False, np.bool_(True), None, "1.5", [1.0], {"x": 1}):
        with pytest.raises(ValueError, match="is not a number$"):
            json_number_float(bad)


@pytest.mark.parametrize("value, text, want", [
    (HUGE, None, HUGE_SHOWN),
    (HUGE, "inf", HUGE_SHOWN),
    (-HUGE, "-inf", "-" + HUGE_SHOWN),
    (2 ** 1024, None, "1797693134...4224137216 (an integer of 309 digits, too large for a float)"),
    (10 ** 5000, None, "an integer of about 5001 digits (too large for a float)"),  # past Python's int-to-text limit
    (2 ** 1023, None, repr(2 ** 1023)),  # a float holds it: shown as it is
    (1.5, None, "1.5"), (np.float64(2.0), "2.0", "2.0"), (True, None, "True"), ("x", None, "'x'"),
    (math.inf, "inf", "inf")], ids=[
    "huge", "huge-text", "-huge", "2**1024", "beyond-str-limit", "2**1023", "float", "text-given", "bool", "str",
    "inf"])
def test_json_number_text_shows_the_text_given_but_a_huge_integer_as_its_digits(value, text, want):
    assert json_number_text(value, text) == want


# ----------------------------------------------------------------------------- calib: a probe result

@pytest.mark.parametrize("key, unit", [("budget_tokens", "tokens"), ("budget_seconds", "device-seconds")])
def test_a_probe_budget_too_large_for_a_float_is_refused_not_a_crash(key, unit):
    config = {"budget_tokens": 1000, key: HUGE}
    with pytest.raises(CalibrationApplyError) as e:  # was OverflowError
        check_probe_budgets({"config": config})
    assert str(e.value) == (f"probe.json field config.{key} is {HUGE_SHOWN}, not a budget (a finite number of {unit} "
                            f"> 0: gains are forecast at it); {DICT_FIX}")  # a dict: no probe.json to re-run


def test_probe_budgets_take_a_numpy_integer_and_keep_their_messages_for_other_values():
    """The one rule takes numpy integers (refused before, as no other reader did); a refusal shows the value as
    probe.json spells it (true, Infinity, [1000]; text quoted): was Python's True and inf."""
    check_probe_budgets({"config": {"budget_tokens": np.int64(1000), "budget_seconds": 2.5}})
    for value, shown in ((True, "true"), ("1000", "'1000'"), (math.inf, "Infinity"), (0, "0"), ([1000], "[1000]"),
                         ({"n": 1000}, '{"n": 1000}')):
        with pytest.raises(CalibrationApplyError) as e:
            check_probe_budgets({"config": {"budget_tokens": value}})
        assert str(e.value) == (f"probe.json field config.budget_tokens is {shown}, not a budget (a finite number of "
                                f"tokens > 0: gains are forecast at it); {DICT_FIX}")


@pytest.mark.parametrize("column", ["forecast_probe", "forecast_first_order"])
def test_a_forecast_too_large_for_a_float_is_refused_not_a_crash(column):
    with pytest.raises(CalibrationApplyError) as e:  # was OverflowError
        _gain(-HUGE, "rewards[0].x", column, "probe.json")
    assert str(e.value) == (f"probe.json field rewards[0].x is -{HUGE_SHOWN}: it is not a finite number (null means "
                            f"no forecast); {RERUN}")


def test_forecasts_keep_their_reading_and_messages():
    assert _gain(3, "f", "forecast_probe", "p") == 3.0 and math.isnan(_gain(None, "f", "forecast_probe", "p"))
    assert _gain(np.float64(250.0), "f", "forecast_first_order", "p") == 250.0
    for value, column, problem in [
            (True, "forecast_probe", "is not a number"),
            ("abc", "forecast_probe", "is not a number (a number, or null for no forecast)"),
            ([1.0], "forecast_probe", "is not a number (a number, or null for no forecast)"),
            ("inf", "forecast_first_order", "is infinite (null means no forecast)"),
            (math.inf, "forecast_probe", "is infinite (null means no forecast)"),
            (250.0, "forecast_probe", "is outside [-100, 100] (a gain vs GRPO in accuracy points)")]:
        with pytest.raises(CalibrationApplyError) as e:
            _gain(value, "f", column, "p")
        shown = repr(value) if isinstance(value, str) else json.dumps(value)  # true, Infinity: was True, inf
        assert str(e.value) == f"p field f is {shown}: it {problem}; {RERUN}"


# ----------------------------------------------------------------------------- the probe's held-out accuracy

def _batch(h, groups=None, prompts=None) -> dict:
    ref = {"heldout_accuracy": h}
    if groups is not None:
        ref["heldout_group_accuracy"] = groups
    if prompts is not None:
        ref["prompts"] = prompts
    return {"reference": ref}


def test_the_heldout_accuracy_never_reads_true_as_one():
    """JSON true in probe.json is no accuracy: it was read as 1 (100 points) and pooled with the others."""
    assert heldout_measurement([_batch(True, prompts=8)]) is None  # was (100.0, ..., 8)
    acc, se, n = heldout_measurement([_batch(True, prompts=8), _batch(0.5, prompts=4)])
    assert (acc, n) == (50.0, 4)  # was (75.0, 12)
    assert se == pytest.approx(100 * math.sqrt((3 / 6) * (3 / 6) / 4))


def test_the_heldout_group_accuracies_and_prompts_pass_over_what_is_no_number():
    acc, se, n = heldout_measurement([_batch(0.5, groups=[1.0, True, 0.0, False, None, math.nan, HUGE])])
    assert (acc, n) == (50.0, 2)  # were 4 groups (true and false read as 1 and 0); HUGE crashed with OverflowError
    acc, se, n = heldout_measurement([_batch(np.float64(0.25), prompts=True)])
    assert (acc, se, n) == (25.0, None, 0)  # prompts true was counted as 1 prompt
    assert heldout_measurement([_batch(HUGE, prompts=8)]) is None  # was OverflowError


# ----------------------------------------------------------------------------- saved curves and TRL logs

def _curve_with(tmp_path, edit):
    d = json.loads(default_curve_path().read_text())
    edit(d)
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CurveError) as e:
        ReferenceCurve.load(path)
    return str(e.value)


def test_a_saved_curve_names_a_huge_integer_by_its_digits_not_as_inf(tmp_path):
    msg = _curve_with(tmp_path, lambda d: d["params"].__setitem__("A", HUGE))
    assert f"field params.A is {HUGE_SHOWN}, it must be a finite number in [0, 100]" in msg  # was "is inf"
    msg = _curve_with(tmp_path, lambda d: d["metadata"].__setitem__("lr", -HUGE))
    assert f"field metadata.lr is -{HUGE_SHOWN}, it must be a finite number > 0 (" in msg  # was 57 digits and "..."


def _trl(tmp_path, entry: dict):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"step": 0, "eval_accuracy": 0.5}, entry]}))
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_trl_state(path)
    return str(e.value), path


def test_a_trl_step_or_accuracy_too_large_for_a_float_is_shown_as_the_file_holds_it(tmp_path):
    msg, path = _trl(tmp_path, {"step": HUGE, "eval_accuracy": 0.6})
    assert msg == (f"{path}: log_history[1] field 'step' = {HUGE_SHOWN} must be an optimizer step count >= 0; fix or "
                   "delete that entry")  # was "= inf"
    msg, path = _trl(tmp_path, {"step": 7, "eval_accuracy": -HUGE})
    assert msg == (f"{path}: log_history[1] (step 7) field 'eval_accuracy' = -{HUGE_SHOWN} is not a finite number; "
                   "fix or delete that eval")  # was "= -inf"
    msg, path = _trl(tmp_path, {"step": -3, "eval_accuracy": 0.6})  # other values: as before
    assert msg == (f"{path}: log_history[1] field 'step' = -3 must be an optimizer step count >= 0; fix or delete "
                   "that entry")


# ----------------------------------------------------------------------------- calibration files

def test_a_calibration_check_value_too_large_for_a_float_is_shown_as_the_file_holds_it():
    with pytest.raises(CalibrationFileError) as e:
        check_predictions({"point": [0.5, HUGE]}, {"point": np.array([0.5, 1.0])}, path="c.json", fix="FIX")
    assert str(e.value).startswith(f"calibration file c.json: check.point[1] is {HUGE_SHOWN} in the file but "
                                   "refitting the file's data gives 1.0 (1 of its 2 values differ): ")  # was "inf"
    with pytest.raises(CalibrationFileError) as e:  # other values as before
        check_predictions({"point": [0.5, 2]}, {"point": np.array([0.5, 1.0])}, path="c.json", fix="FIX")
    assert str(e.value).startswith("calibration file c.json: check.point[1] is 2.0 in the file but refitting ")


def test_a_fitted_value_too_large_for_a_float_is_shown_as_the_file_holds_it():
    with pytest.raises(CalibrationFileError) as e:
        check_fitted({"slope": -HUGE}, {"slope": 1.0}, path="c.json", fix="FIX")
    assert str(e.value).startswith(f"calibration file c.json: fitted.slope is -{HUGE_SHOWN} in the file but "
                                   "refitting the file's data gives 1.0. ")  # was "-inf"
    with pytest.raises(CalibrationFileError) as e:
        check_fitted({"slope": 3}, {"slope": 1.0}, path="c.json", fix="FIX")
    assert str(e.value).startswith("calibration file c.json: fitted.slope is 3.0 in the file but refitting the file's "
                                   "data gives 1.0. ")


# ----------------------------------------------------------------------------- plans

def test_a_plan_integer_key_gives_a_python_int_that_json_can_write():
    got = coerce(np.int64(3), int, "train.k")
    assert type(got) is int and got == 3  # was np.int64(3): json.dumps raised TypeError
    got = coerce([np.int64(1), 2], tuple[int, ...], "train.ks")
    assert got == (1, 2) and all(type(x) is int for x in got)
    assert json.dumps({"k": coerce(np.int64(3), int, "k"), "x": coerce(np.float64(0.5), float, "x")}) == \
        '{"k": 3, "x": 0.5}'


# ----------------------------------------------------------------------------- seed-bootstrap draws

def test_seed_bootstrap_draws_refuses_no_seeds_at_the_call():
    """Documented to raise ValueError for an empty ``positive``; as a generator it raised only at next()."""
    with pytest.raises(ValueError, match="positive is empty"):
        seed_bootstrap_draws([], need=2)
    draws = seed_bootstrap_draws([np.array([1.0, 2.0]), np.array([3.0])], need=3)
    first = [(d.tolist(), ok) for d, ok in (next(draws), next(draws))]
    rng = np.random.Generator(np.random.PCG64(REPLICATE_SEED))  # the draws, as the docstring gives them
    want = [rng.integers(0, 2, size=2).tolist() for _ in range(2)]
    assert [d for d, _ in first] == want
    assert [ok for _, ok in first] == [len({u for i in d for u in ([1.0, 2.0], [3.0])[i]}) >= 3 for d in want]
