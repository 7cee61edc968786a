"""A calibration file whose ``method`` was edited is refused naming the ``method`` field, its allowed values and the
fix. A linear fit edited to ``"method": "isotonic"`` (a trial user's ``method.json``) was refused as
"params.feature is missing", which does not name the field edited; an unknown method as "refitting its data fails
(unknown calibration method ...)"."""

from __future__ import annotations

import copy
import json

import pytest

from calib.cli import main as calib_main
from calib.file_check import FIT_CHOICES
from calib.model import CalibrationFileError, default_path, load_calibration

DEFAULT = json.loads(default_path().read_text())  # the shipped file: a linear fit (HuberRegressor's params)


def _edited(tmp_path, method, name="method.json"):
    d = copy.deepcopy(DEFAULT)
    if method is _DROP:
        del d["method"]
    else:
        d["method"] = method
    path = tmp_path / name
    path.write_text(json.dumps(d))
    return path


_DROP = object()


@pytest.mark.parametrize("method", ["isotonic", "none"])
def test_a_valid_method_on_another_methods_fit_is_named(tmp_path, method):
    assert DEFAULT["method"] == "linear"
    path = _edited(tmp_path, method)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    msg = str(e.value)
    assert msg.startswith(f"calibration file {path} is damaged: field 'method' is {method!r}, but its params block "
                          "(alpha, epsilon, max_iter) is a 'linear' calibrator's")
    assert "'method' was edited" in msg
    assert ("Restore \"method\": \"linear\" (the method it was fitted with; one of ['linear', 'isotonic', "
            "'none'])") in msg
    assert f"--method {method} --out {path}`" in msg  # the refit with the method the file now names
    assert "params.feature" not in msg


@pytest.mark.parametrize("method, shown", [("isotonicx", "'isotonicx'"), (None, "null"), (3, "3"),
                                           (_DROP, "missing")])
def test_an_unknown_method_is_refused_with_the_allowed_values(tmp_path, method, shown):
    path = _edited(tmp_path, method)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value).startswith(
        f"calibration file {path} is damaged: field 'method' is {shown}, not one of "
        f"{list(FIT_CHOICES['method'])} (the calibrator `calib fit --method` fitted); to repair or change the file, "
        "refit it with `calib fit ROWS.csv")


def test_calib_apply_prints_the_method_refusal(tmp_path, capsys):
    path = _edited(tmp_path, "isotonic")
    probe = tmp_path / "probe.json"
    probe.write_text("{}")
    assert calib_main(["apply", str(probe), "--calibration", str(path)]) != 0
    assert "field 'method' is 'isotonic', but its params block" in capsys.readouterr().err


def test_the_shipped_file_still_loads():
    assert load_calibration("default").method == "linear"
