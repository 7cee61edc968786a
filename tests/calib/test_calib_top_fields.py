"""A calibration file's top-level ``confidence_level``, ``include_reference`` and ``format_version`` are read by the
one JSON-number rule (:func:`gradprobe.outputs.is_json_number`) and refused in one line naming the file and the field.

Before: ``confidence_level`` an integer too large for a float raised OverflowError (a traceback from ``calib apply``
and ``gradprobe probe --calibration FILE``), the string ``"0.9"`` was accepted, ``true`` was read as 1.0 and refused
as "refitting its data fails", ``null`` was refused without naming the field; ``format_version: true`` was read as
version 1 (the refusal blamed field 'features'); ``include_reference`` took anything (``"yes"``, 1.5, NaN) as a
boolean. The shipped files still load.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from calib.cli import main as calib_main
from calib.model import CalibrationFileError, default_path, load_calibration
from gradprobe.cli import main as gradprobe_main

V1 = Path(__file__).resolve().parent / "data" / "calibration_v1.json"
DEFAULT = json.loads(default_path().read_text())
HUGE = 10 ** 400  # JSON holds it; a float does not
HUGE_TEXT = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2", "--group",
         "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap", "50",
         "--no-progress"]


def _tail(path: Path, *, confidence: str | None = None) -> str:
    """The rebuild command of a damaged copy of the default at ``path`` (calib.file_check.rebuild_command);
    ``confidence``: the recorded level it shows as an invalid --confidence (as the file spells it: true, not True)."""
    opt = "" if confidence is None else " --confidence CONFIDENCE"
    which = "" if confidence is None else (f" (CONFIDENCE: the file's {confidence} is not a valid --confidence: give "
                                           "the value it was fitted with, see `calib fit --help`)")
    return (f"refit it with `calib fit ROWS.csv --forecaster forecast_cost_only{opt} --out {path}`{which} (ROWS.csv: "
            "the rows it was fitted from; `calib rows STUDY_DIR... --out ROWS.csv` rebuilds them from the studies in "
            "its domain), or pass --calibration default")


def _copy(tmp_path: Path, field: str, value, base: dict = DEFAULT) -> Path:
    d = copy.deepcopy(base)
    if value is _MISSING:
        del d[field]
    else:
        d[field] = value
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(d))
    return path


_MISSING = object()
LEVEL = "not a number in (0, 1) (the intervals' coverage, e.g. 0.9)"


@pytest.mark.parametrize("value, shown, confidence", [
    (HUGE, HUGE_TEXT, HUGE_TEXT), ("0.9", 'the string "0.9"', "'0.9'"), (True, "true", "true"),
    (None, "null", "null"), (math.nan, "NaN", "NaN"), (1.5, "1.5", "1.5"), (0, "0", "0"),
    ([0.9], "a list [0.9]", "[0.9]")],
    ids=["huge", "string", "true", "null", "nan", "1.5", "0", "list"])
def test_a_confidence_level_that_is_no_number_in_0_1_is_refused_naming_the_field(tmp_path, value, shown, confidence):
    path = _copy(tmp_path, "confidence_level", value)
    with pytest.raises(CalibrationFileError) as e:  # was: OverflowError, loaded ("0.9"), or an unnamed field
        load_calibration(path)
    head = f"calibration file {path} is damaged: field 'confidence_level' is {shown}, {LEVEL}; "
    # every recorded level but the default becomes the CONFIDENCE placeholder (none is dropped: the command would
    # refit at the default), a huge integer shown short
    assert str(e.value) == head + _tail(path, confidence=confidence)
    assert "\n" not in str(e.value)


def test_a_missing_confidence_level_says_what_it_must_be(tmp_path):
    path = _copy(tmp_path, "confidence_level", _MISSING)
    with pytest.raises(CalibrationFileError) as e:  # was: "field 'confidence_level' is missing or malformed"
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'confidence_level' is missing (it must be a "
                            f"number in (0, 1), e.g. 0.9); {_tail(path)}")


@pytest.mark.parametrize("value, shown", [
    ("yes", 'the string "yes"'), (1.5, "1.5"), (math.nan, "NaN"), (HUGE, HUGE_TEXT), (1, "1"), (0, "0"),
    (None, "null"), ({"x": True}, 'an object {"x": true}')],
    ids=["string", "1.5", "nan", "huge", "1", "0", "null", "object"])
def test_an_include_reference_that_is_no_boolean_is_refused(tmp_path, value, shown):
    path = _copy(tmp_path, "include_reference", value)
    with pytest.raises(CalibrationFileError) as e:  # was: bool(value), loaded
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'include_reference' is {shown}, not a JSON "
                            f"boolean (true or false); {_tail(path)}")


def test_a_missing_include_reference_says_what_it_must_be(tmp_path):
    path = _copy(tmp_path, "include_reference", _MISSING)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'include_reference' is missing (it must be a "
                            f"JSON boolean, true or false); {_tail(path)}")


GENERIC = "refit it with `calib fit ROWS.csv --out FILE` (or pass --calibration default)"


@pytest.mark.parametrize("value, shown, fix", [
    (True, "is true", GENERIC), (False, "is false", GENERIC), ("2", 'is the string "2"', GENERIC),
    (None, "is null", GENERIC), (_MISSING, "is missing", GENERIC), (2.0, "is 2.0", None), (1.0, "is 1.0", GENERIC)])
def test_a_format_version_that_is_no_integer_is_refused_naming_it(tmp_path, value, shown, fix):
    path = _copy(tmp_path, "format_version", value)
    with pytest.raises(CalibrationFileError) as e:  # was: true read as version 1, blaming field 'features'
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'format_version' {shown}, not an integer (the "
                            f"calibration format version: this calib reads versions [1, 2]); {fix or _tail(path)}")


def test_a_format_version_too_large_for_a_float_is_shown_shortened(tmp_path):
    path = _copy(tmp_path, "format_version", HUGE)
    with pytest.raises(CalibrationFileError) as e:  # was: its 401 digits in the message
        load_calibration(path)
    # was "Upgrade gradprobe to read it": no gradprobe writes a version of 401 digits, so the file is damaged
    assert str(e.value).startswith(f"calibration file {path} is damaged: field 'format_version' is {HUGE_TEXT}, far "
                                   "above any calibration format version (this calib reads versions [1, 2]; a newer "
                                   "gradprobe's would be a small whole number); restore the file from a copy, or ")
    assert "Upgrade" not in str(e.value)


def test_a_version_1_file_checks_the_same_fields(tmp_path):
    v1 = json.loads(V1.read_text())
    path = _copy(tmp_path, "confidence_level", "0.9", base=v1)
    with pytest.raises(CalibrationFileError) as e:  # was: loaded
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'confidence_level' is the string \"0.9\", "
                            f"{LEVEL}; {GENERIC}")
    path = _copy(tmp_path, "include_reference", "no", base=v1)
    with pytest.raises(CalibrationFileError) as e:  # was: bool("no"), True
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'include_reference' is the string \"no\", not "
                            f"a JSON boolean (true or false); {GENERIC}")


def test_the_shipped_files_still_load_with_their_recorded_values():
    cal = load_calibration("default")
    assert (cal.format_version, cal.confidence_level, cal.include_reference) == (2, 0.9, False)
    assert type(cal.confidence_level) is float and cal.include_reference is False
    old = load_calibration(V1)
    assert (old.format_version, old.confidence_level, old.include_reference) == (1, 0.9, False)


def test_both_commands_refuse_a_huge_confidence_level_in_one_line(tmp_path, capsys):
    path = _copy(tmp_path, "confidence_level", HUGE)
    head = f"calibration file {path} is damaged: field 'confidence_level' is {HUGE_TEXT}, {LEVEL}; refit it with"
    (tmp_path / "probe").mkdir()
    assert calib_main(["apply", str(tmp_path / "probe"), "--calibration", str(path)]) == 2  # was: OverflowError
    err = capsys.readouterr().err
    assert err.startswith(f"calib apply: error: {head}") and err.count("\n") == 1
    out = tmp_path / "out"
    assert gradprobe_main([*PROBE, "--out", str(out), "--calibration", str(path)]) == 2  # before any compute
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe probe: error: {head}") and err.count("\n") == 1 and not out.exists()


def test_an_integer_beyond_pythons_text_limit_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(DEFAULT).replace('"confidence_level": 0.9', '"confidence_level": 1' + "0" * 5000))
    with pytest.raises(CalibrationFileError) as e:  # was: a bare ValueError "Exceeds the limit (4300 digits)..."
        load_calibration(path)
    assert str(e.value).startswith(f"calibration file {path} is damaged: not valid JSON (Exceeds the limit (4300 "
                                   "digits) for integer string conversion")
