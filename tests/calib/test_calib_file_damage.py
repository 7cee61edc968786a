"""A calibration file that disagrees with itself is refused, never half-read or silently ignored.

- A damaged ``data`` block (a column missing, a row of the wrong length, a string or null where a
  number belongs, ``data`` not an object) raises CalibrationFileError naming the file, the field
  (``data.columns[...]``, ``data.rows[i][j]`` and its column) and the ``calib fit`` command that
  rebuilds it, not a raw pandas/scikit-learn error.
- An edited ``fitted`` block (which the loader refits from ``data``) raises CalibrationFileError naming
  the parameter and both values; an unchanged copy, and every shipped calibration file, still load.

Built on copies of the shipped default (``calib/data/calibration.json``), the version-1 fixture and a
synthetic isotonic calibration.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

import calib.model
from calib.dataset import build_rows
from calib.model import CalibrationFileError, default_path, fit_calibration, load_calibration
from calib_helpers import default_arms, single_thread_blas, synthetic_forecasts, write_study  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
V1 = Path(__file__).resolve().parent / "data" / "calibration_v1.json"
DEFAULT = json.loads(default_path().read_text())
COLUMNS = DEFAULT["data"]["columns"]  # study, model, task, arm, seed, budget_value, forecast_cost_only, target
# the default's documented rebuild command (data/calibration/README.md)
README_COMMAND = "calib fit data/calibration/rows.csv --forecaster forecast_cost_only --out calib/data/calibration.json"
# the shipped default's fitted parameters and row count (read, not copied: the default is rebuilt when studies are added)
COEF, INTERCEPT, SCALE = (DEFAULT["fitted"]["coef"]["forecast_cost_only"], DEFAULT["fitted"]["intercept"],
                          DEFAULT["fitted"]["scale"])
N_ROWS = len(DEFAULT["data"]["rows"])


def _write(tmp_path: Path, name: str, document: dict) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document))
    return path


def _drop_column(d, name):
    j = d["data"]["columns"].index(name)
    d["data"]["columns"].pop(j)
    for row in d["data"]["rows"]:
        row.pop(j)


def _set(d, i, column, value):
    d["data"]["rows"][i][COLUMNS.index(column)] = value


DAMAGES = {  # name: (damage, the field and problem the message must name)
    "no_study_column": (lambda d: _drop_column(d, "study"), r"field data.columns\['study'\] is missing \(the columns "
                                                            r"are \['model', 'task'"),
    "no_target_column": (lambda d: _drop_column(d, "target"), r"field data.columns\['target'\] is missing"),
    "no_forecast_column": (lambda d: _drop_column(d, "forecast_cost_only"),
                           r"field data.columns\['forecast_cost_only'\] is missing"),
    "short_row": (lambda d: d["data"]["rows"][3].pop(), r"field data.rows\[3\] is malformed: it has 9 values; "
                                                        r"data.columns names 10"),
    "long_row": (lambda d: d["data"]["rows"][0].append(1.0), r"field data.rows\[0\] is malformed: it has 11 values"),
    "row_not_a_list": (lambda d: d["data"]["rows"].__setitem__(2, 5.0),
                       r"field data.rows\[2\] is malformed: it is a number, not a list"),
    "string_target": (lambda d: _set(d, 5, "target", "abc"),
                      r"field data.rows\[5\]\[7\] \(column 'target'\) is 'abc', not a finite number"),
    "null_forecast": (lambda d: _set(d, 6, "forecast_cost_only", None),
                      r"field data.rows\[6\]\[6\] \(column 'forecast_cost_only'\) is null, not a finite number"),
    "bool_budget": (lambda d: _set(d, 1, "budget_value", True),
                    r"field data.rows\[1\]\[5\] \(column 'budget_value'\) is true, not a finite number"),
    "number_arm": (lambda d: _set(d, 4, "arm", 3), r"field data.rows\[4\]\[3\] \(column 'arm'\) is 3, not a string"),
    "fractional_seed": (lambda d: _set(d, 7, "seed", 1.5), r"field data.rows\[7\]\[4\] \(column 'seed'\) is 1.5, not "
                                                           r"an integer"),
    "data_a_list": (lambda d: d.__setitem__("data", d["data"]["rows"]),
                    r"field 'data' is malformed: it is a list, not an object \{\"columns\""),
    "data_a_string": (lambda d: d.__setitem__("data", "rows.csv"), r"field 'data' is malformed: it is a string"),
    "rows_an_object": (lambda d: d["data"].__setitem__("rows", {}), r"field data.rows is missing, empty or malformed"),
    "no_rows": (lambda d: d["data"].__setitem__("rows", []), r"field data.rows is missing, empty or malformed"),
    "columns_a_string": (lambda d: d["data"].__setitem__("columns", "study,model"),
                         r"field data.columns is missing or malformed"),
    "duplicate_column": (lambda d: d["data"]["columns"].__setitem__(1, "study"),
                         r"field data.columns is missing or malformed \(it must be a list of distinct column names\)"),
}


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_a_damaged_data_block_names_the_file_the_field_and_the_rebuild_command(tmp_path, name):
    damage, expected = DAMAGES[name]
    d = copy.deepcopy(DEFAULT)
    damage(d)
    path = _write(tmp_path, name, d)
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    message = str(info.value)
    assert message.startswith(f"calibration file {path} is damaged: ")
    assert re.search(expected, message), message
    # the fix: calib fit with the file's own settings (the default's: only its forecaster differs) onto the file
    assert f"refit it with `calib fit ROWS.csv --forecaster forecast_cost_only --out {path}`" in message
    assert "`calib rows STUDY_DIR... --out ROWS.csv` rebuilds them" in message


def test_a_removed_row_is_caught_by_the_refit(tmp_path):
    d = copy.deepcopy(DEFAULT)
    d["data"]["rows"].pop(10)
    with pytest.raises(CalibrationFileError, match=rf"field training.rows is {N_ROWS}, not the number of rows of the "
                                                   rf"data block \({N_ROWS - 1}\)"):
        load_calibration(_write(tmp_path, "short0", d))
    d["training"]["rows"] = N_ROWS - 1  # the count edited too: the refit still catches the removed row
    with pytest.raises(CalibrationFileError, match=rf"fitted.coef.forecast_cost_only is {re.escape(repr(COEF))} in the "
                                                   r"file but refitting the file's data gives 0\.\d+") as info:
        load_calibration(_write(tmp_path, "short", d))
    refit = float(re.search(r"data gives (-?[\d.e-]+)\.", str(info.value)).group(1))
    assert refit != pytest.approx(COEF, rel=1e-6)
    d["fitted"] = calib.model._from_v2(d)._fit().fitted_parameters()  # fitted made to match: check.* still has N_ROWS
    with pytest.raises(CalibrationFileError, match=rf"short2.json is damaged: field check.point has {N_ROWS} values for "
                                                   rf"the {N_ROWS - 1} rows of data \(rows were added or removed\); "
                                                   r"refit it"):
        load_calibration(_write(tmp_path, "short2", d))


def test_a_damaged_version_1_file_gets_the_generic_fix(tmp_path):
    d = json.loads(V1.read_text())
    d["data"]["rows"][0][d["data"]["columns"].index("predicted_gain")] = "n/a"
    with pytest.raises(CalibrationFileError, match=r"v1.json is damaged: field data.rows\[0\]\[5\] \(column "
                                                   r"'predicted_gain'\) is 'n/a', not a finite number; refit it with "
                                                   r"`calib fit ROWS.csv --out FILE`"):
        load_calibration(_write(tmp_path, "v1", d))


def test_the_damaged_default_names_the_documented_command(tmp_path, monkeypatch):
    d = copy.deepcopy(DEFAULT)
    _set(d, 0, "target", "x")
    path = _write(tmp_path, "calibration", d)
    monkeypatch.setattr(calib.model, "default_path", lambda: path)
    with pytest.raises(CalibrationFileError, match=re.escape(f"refit it in a gradprobe checkout with `{README_COMMAND}`"
                                                             " (data/calibration/README.md), or reinstall gradprobe")):
        load_calibration("default")
    assert README_COMMAND in (REPO / "data" / "calibration" / "README.md").read_text()  # the command is documented


# ---- the fitted block is verified -----------------------------------------------------------------------------------

def test_an_unchanged_copy_of_the_default_loads_and_predicts_the_same(tmp_path):
    shipped = load_calibration("default")
    copy_ = load_calibration(_write(tmp_path, "copy", DEFAULT))
    x = np.array([[-6.0], [0.0], [2.5]])
    for a, b in zip(shipped.predict(x), copy_.predict(x)):
        np.testing.assert_array_equal(a, b)
    assert copy_.fitted_parameters()["coef"]["forecast_cost_only"] == pytest.approx(COEF, rel=1e-12)


# the refit's number is compared within 1e-9 relative, not as text: BLAS builds and CPUs round the Huber fit's
# last bits differently (the file check itself allows calib.file_check.FITTED_RTOL = 1e-6)
REFIT = r"(?P<refit>-?\d+\.\d+(?:e-?\d+)?)"


@pytest.mark.parametrize("edit, expected, refit", [
    (lambda f: f["coef"].__setitem__("forecast_cost_only", 0.9),
     rf"fitted.coef.forecast_cost_only is 0.9 in the file but refitting the file's data gives {REFIT}", COEF),
    (lambda f: f.__setitem__("intercept", f["intercept"] * (1 + 1e-5)),
     rf"fitted.intercept is {re.escape(repr(INTERCEPT * (1 + 1e-5)))} in the file but refitting the file's data gives "
     rf"{REFIT}", INTERCEPT),
    (lambda f: f.pop("scale"), rf"fitted.scale is missing \(refitting the file's data gives {REFIT}", SCALE),
    (lambda f: f.__setitem__("slope", 1.0), r"fitted.slope is not a parameter of this calibration", None),
    (lambda f: f["coef"].__setitem__("forecast_cost_only", "0.85"),
     r"fitted.coef.forecast_cost_only is '0.85', not a number", None),
], ids=["slope", "intercept_rel_1e-5", "scale_removed", "extra_key", "string_value"])
def test_an_edited_fitted_value_is_refused_naming_the_parameter_and_both_values(tmp_path, edit, expected, refit):
    d = copy.deepcopy(DEFAULT)
    edit(d["fitted"])
    path = _write(tmp_path, "edited", d)
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    message = str(info.value)
    found = re.search(expected, message)
    assert message.startswith(f"calibration file {path}: ") and found, message
    if refit is not None:
        assert float(found.group("refit")) == pytest.approx(refit, rel=1e-9)
    assert "the file was edited or damaged" in message and "an edit of fitted would be silently ignored" in message
    assert f"`calib fit ROWS.csv --forecaster forecast_cost_only --out {path}`" in message
    # one clean sentence for the fix, not "refit it from rows: refit it with"
    assert ("it is refused instead). To repair or change the file, refit it with `calib fit ROWS.csv --forecaster "
            f"forecast_cost_only --out {path}` (ROWS.csv: the rows it was fitted from;") in message
    assert message.count("refit it") == 1


def test_fitted_within_the_tolerance_loads_and_a_v2_file_without_fitted_is_damaged(tmp_path):
    d = copy.deepcopy(DEFAULT)
    d["fitted"]["coef"]["forecast_cost_only"] *= 1 + 1e-9  # printing noise, not an edit
    load_calibration(_write(tmp_path, "noise", d))
    del d["fitted"]
    with pytest.raises(CalibrationFileError, match=r"no_fitted.json is damaged: field 'fitted' is missing or "
                                                   r"malformed; refit it with `calib fit"):
        load_calibration(_write(tmp_path, "no_fitted", d))
    d["fitted"] = [0.85, -0.37]
    with pytest.raises(CalibrationFileError, match=r"fitted is a list where the refit has an object"):
        load_calibration(_write(tmp_path, "list_fitted", d))


def test_version_1_files_are_verified_and_still_load_without_fitted(tmp_path):
    d = json.loads(V1.read_text())
    assert load_calibration(V1).legacy
    d["fitted"]["intercept"] = -4.0
    with pytest.raises(CalibrationFileError, match=r"fitted.intercept is -4.0 in the file but refitting the file's "
                                                   r"data gives -4.31488.*refit it with `calib fit ROWS.csv --out FILE`"):
        load_calibration(_write(tmp_path, "v1_edited", d))
    del d["fitted"]  # an old file without the block: loaded, verified by its check predictions
    assert load_calibration(_write(tmp_path, "v1_no_fitted", d)).legacy


def test_an_isotonic_calibration_verifies_its_knots(tmp_path):
    rows = build_rows(write_study(tmp_path / "study", arms=default_arms(n_extra=6, rng=np.random.default_rng(7)),
                                  slope=0.6, bias=-1.0, noise=0.2), forecast_fn=synthetic_forecasts)
    path = fit_calibration(rows, method="isotonic").save(tmp_path / "iso.json")
    assert load_calibration(path).method == "isotonic"  # unchanged: loads
    d = json.loads(path.read_text())
    d["fitted"]["y_thresholds"][1] += 0.5
    with pytest.raises(CalibrationFileError, match=r"fitted.y_thresholds\[1\] is .* in the file but refitting"):
        load_calibration(_write(tmp_path, "iso_edited", d))
    d = json.loads(path.read_text())
    n = len(d["fitted"]["X_thresholds"])
    d["fitted"]["X_thresholds"].pop()
    with pytest.raises(CalibrationFileError, match=rf"fitted.X_thresholds has {n - 1} values where refitting the "
                                                   rf"file's data gives {n}.*--method isotonic --out"):
        load_calibration(_write(tmp_path, "iso_short", d))


def test_every_shipped_calibration_file_loads():
    found = [p for folder in ("calib/data", "gradprobe/data", "data/calibration", "tests/calib/data")
             for p in sorted((REPO / folder).rglob("*.json")) if '"gradprobe-calibration"' in p.read_text()]
    assert {p.relative_to(REPO).as_posix() for p in found} >= {
        "calib/data/calibration.json", "tests/calib/data/calibration_v1.json",
        "tests/calib/data/calibration_v2_arms_only.json"}
    for p in found:
        load_calibration(p)
