"""One rule for "is this JSON (or TOML) value a usable number": :func:`gradprobe.outputs.is_json_number`.

Its answers on a table of values (with its options ``finite`` and ``integer``), and every site that reads a number
from a file agreeing with it: the ``metrics.jsonl`` / TRL reader (``curve_sources._number``), a calibration file's
``data`` rows, ``domain.budget_range``, ``fitted`` and ``check`` blocks (``calib.file_check``) and a plan's TOML
values (``gradprobe.training.coerce``). The cases where a site disagreed with the others are pinned too: JSON
``true`` in a calibration file's ``check`` block was read as 1.0, and an integer too large for a float crashed
each reader with OverflowError instead of being refused naming its field. A refusal shows such an integer as the file
holds it, shortened (:data:`HUGE_SHOWN`), not as the ``inf`` it would read as.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calib.file_check import CalibrationFileError, DamagedField, _budget_range, check_fitted, check_predictions, \
    read_data
from gradprobe.outputs import is_json_number
from gradprobe.forecast.curve_fit import CurveError
from gradprobe.forecast.curve_sources import _number
from gradprobe.forecast.curves import ReferenceCurve
from gradprobe.training.coerce import coerce
from gradprobe.training.plan import PlanError, parse_plan

from helpers_training import tiny_plan

HUGE = 10 ** 400  # an integer JSON and TOML can hold, beyond float's range (about 1.8e308)
#: how a message shows HUGE: the digits the file holds, shortened and counted (was "inf", which the file does not hold)
HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"

#: value -> (is_json_number(v), finite=True, integer=True, integer=True and finite=True)
TABLE = [
    (True, (False, False, False, False)),
    (False, (False, False, False, False)),
    (None, (False, False, False, False)),
    (0, (True, True, True, True)),
    (1, (True, True, True, True)),
    (1.5, (True, True, False, False)),
    (math.nan, (True, False, False, False)),
    (math.inf, (True, False, False, False)),
    (-math.inf, (True, False, False, False)),
    ("1.5", (False, False, False, False)),
    (np.float64(2.0), (True, True, False, False)),
    (np.int64(3), (True, True, True, True)),
    (np.bool_(True), (False, False, False, False)),
    (HUGE, (True, False, True, False)),
    ([1.5], (False, False, False, False)),
    ({"x": 1}, (False, False, False, False)),
]
VALUES = [v for v, _ in TABLE]


def _spelled(value) -> str:
    """How calib's messages show a value read from a JSON file: as JSON spells it (true, null, NaN, Infinity, [1.5];
    was Python's True, None, nan, inf), text quoted by repr, numpy's bool (no JSON value) by repr."""
    return HUGE_SHOWN if value is HUGE else repr(value) if isinstance(value, (str, np.bool_)) else json.dumps(value)

IDS = ["true", "false", "null", "0", "1", "1.5", "nan", "inf", "-inf", "str-1.5", "np.float64", "np.int64",
       "np.bool_", "huge-int", "list", "object"]


@pytest.mark.parametrize("value, expected", TABLE, ids=IDS)
def test_the_predicate_answers_the_table(value, expected):
    got = (is_json_number(value), is_json_number(value, finite=True), is_json_number(value, integer=True),
           is_json_number(value, integer=True, finite=True))
    assert got == expected


def _float(value) -> float:
    """What a reader should make of a number of the table: its float, the huge integer as infinity."""
    return math.inf if value is HUGE else float(value)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ----------------------------------------------------------------------------- metrics.jsonl / TRL reader

#: how the reader shows a value it refuses (JSON's spelling for true/false/null; text with the unquote hint)
REFUSED = {"true": "true is not a number", "false": "false is not a number", "null": "null is not a number",
           "str-1.5": "'1.5' is not a number (a JSON string: write the number unquoted)",
           "np.bool_": "np.True_ is not a number",  # never in JSON; was read as 1.0
           "list": "[1.5] is not a number", "object": "{'x': 1} is not a number"}


@pytest.mark.parametrize("name, value", list(zip(IDS, VALUES)), ids=IDS)
def test_the_eval_reader_takes_exactly_the_numbers(name, value):
    where = "m.jsonl:3: field 'acc'"
    if is_json_number(value):
        got = _number(value, where)
        assert type(got) is float and _same(got, _float(value))
        assert name not in REFUSED
        return
    with pytest.raises(CurveError) as e:
        _number(value, where)
    assert str(e.value) == f"{where} = {REFUSED[name]}; fix or delete that eval"


def _metrics(tmp_path, line: str):
    rows = [json.dumps({"eval": True, "update": u, "greedy_accuracy": a}) for u, a in ((0, 0.5), (2, 0.6), (4, 0.65))]
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join([*rows, line]) + "\n")
    return path


@pytest.mark.parametrize("line, why", [
    ('{"eval": true, "update": ' + str(HUGE) + ', "greedy_accuracy": 0.7}',
     f"field 'update' = {HUGE_SHOWN} must be an update count >= 0"),
    ('{"eval": true, "update": 8, "greedy_accuracy": -' + str(HUGE) + "}",
     f"field 'greedy_accuracy' = -{HUGE_SHOWN} is not a finite number")], ids=["update", "accuracy"])
def test_a_number_too_large_for_a_float_is_refused_naming_the_line(tmp_path, line, why):
    path = _metrics(tmp_path, line)
    with pytest.raises(CurveError) as e:  # was OverflowError
        ReferenceCurve.from_metrics(path)
    assert str(e.value) == f"{path}:4: {why}; fix or delete that eval"


# ----------------------------------------------------------------------------- calibration files

def _rows(value, column: str):
    d = {"data": {"columns": ["study", "x", "seed"], "rows": [["s", 1.0, 0], ["s", 2.0, 1]]}}
    d["data"]["rows"][1][["study", "x", "seed"].index(column)] = value
    return read_data(d, text_columns=["study"], number_columns=["x"], integer_columns=["seed"])


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_calibration_number_column_takes_exactly_the_finite_numbers(value):
    if is_json_number(value, finite=True):
        got = _rows(value, "x")["x"].tolist()
        assert got == [1.0, float(value)] and type(got[1]) is float
        return
    with pytest.raises(DamagedField) as e:  # the huge integer crashed with OverflowError
        _rows(value, "x")
    assert str(e.value) == f"data.rows[1][1] (column 'x') is {_spelled(value)}, not a finite number"


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_calibration_integer_column_takes_exactly_the_finite_integers(value):
    if is_json_number(value, finite=True, integer=True):
        assert _rows(value, "seed")["seed"].tolist() == [0, int(value)]
        return
    with pytest.raises(DamagedField) as e:
        _rows(value, "seed")
    want = f"is {HUGE_SHOWN}" if value is HUGE else f"is {_spelled(value)}, not an integer"  # HUGE is one: too large
    assert str(e.value) == f"data.rows[1][2] (column 'seed') {want}"


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_budget_range_takes_exactly_two_finite_positive_numbers(value):
    if is_json_number(value, finite=True) and value > 0:
        _budget_range([value, 5.0], "domain.budget_range")
        return
    with pytest.raises(DamagedField) as e:
        _budget_range([value, 5.0], "domain.budget_range")
    assert str(e.value).startswith("domain.budget_range is ")
    assert str(e.value).endswith(", not two finite positive numbers [low, high] (the smallest and largest budget of "
                                 "the training rows)")


def _check(stored_value, predicted: float):
    check_predictions({"point": [stored_value]}, {"point": np.array([predicted])}, path="c.json", fix="FIX")


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_check_block_takes_exactly_the_numbers_and_the_nonfinite_encoding(value):
    """Numbers (and null / "inf" for non-finite ones, :func:`gradprobe.outputs.json_safe`); JSON true was read as
    1.0 and passed beside a prediction of 1.0."""
    if is_json_number(value) or value is None:
        _check(value, math.nan if value is None else _float(value))
        return
    with pytest.raises(CalibrationFileError) as e:
        _check(value, 1.0 if value is not False else 0.0)
    assert str(e.value) == "calibration file c.json is damaged: field check.point is missing or malformed; FIX"


def test_the_check_blocks_nonfinite_strings_still_read():
    _check("inf", math.inf)
    _check("-inf", -math.inf)


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_fitted_block_takes_exactly_the_numbers(value):
    if is_json_number(value) or value is None:
        refit = math.nan if value is None else _float(value)
        check_fitted({"slope": value}, {"slope": refit}, path="c.json", fix="FIX")
        return
    with pytest.raises(CalibrationFileError) as e:
        check_fitted({"slope": value}, {"slope": 1.0}, path="c.json", fix="FIX")
    # shown as the file spells it (true, [1.5], {"x": 1}; text quoted): was Python's True
    assert str(e.value).startswith(f"calibration file c.json: fitted.slope is {_spelled(value)}, not a number "
                                   "(refitting the file's data gives 1.0). ")


# ----------------------------------------------------------------------------- plans (TOML)

@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_a_plan_takes_exactly_the_numbers_for_a_float_key_and_the_integers_for_an_integer_key(value):
    """A float key takes the numbers a float can hold (HUGE is refused showing its digits, not read as inf); an
    integer key the integers, as Python ints (numpy's np.int64 stayed one, which json cannot write)."""
    for tp, ok, name in ((float, is_json_number(value) and value is not HUGE, "a number"),
                         (int, is_json_number(value, integer=True), "an integer")):
        if ok:
            got = coerce(value, tp, "train.k")
            if tp is float:
                assert type(got) is float and _same(got, _float(value))
            else:
                assert type(got) is int and got == value
                json.dumps(got)
            continue
        with pytest.raises(PlanError) as e:
            coerce(value, tp, "train.k")
        assert str(e.value) == f"train.k must be {name}, got {HUGE_SHOWN if value is HUGE else repr(value)}"


def test_a_learning_rate_too_large_for_a_float_is_refused_showing_its_digits():
    text = tiny_plan(train={"lr": 12345}).replace("lr = 12345", f"lr = {HUGE}")
    with pytest.raises(PlanError) as e:  # was OverflowError, then "got inf"
        parse_plan(text)
    assert str(e.value) == f"train.lr must be a number, got {HUGE_SHOWN}"
