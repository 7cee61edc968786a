"""What a damaged or edited calibration file's error says, and which edits are refused.

- A file that is not valid JSON: the shipped default gets the full command of
  ``data/calibration/README.md`` (with its ``--forecaster``) and no circular "or pass --calibration
  default"; another file gets ``calib fit`` with ``--forecaster FORECASTER`` (the choices listed) and
  its real path as ``--out``.
- An edited top-level ``forecaster`` (or ``domain.forecaster``): the error says the field and the
  data disagree, naming both, and rebuilds with the forecaster the data columns hold.
- An edited ``params`` block (the calibrator's settings, never read back before) is refused naming
  ``params.<name>``, both values and the rebuild command.
- An edited ``check`` block names the value: ``check.point[0] is X in the file but refitting ... gives Y``.

Built on copies of the shipped default (``calib/data/calibration.json``) and an isotonic fit of its rows.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import calib.model
from calib.dataset import FORECASTERS, read_rows
from calib.file_check import DEFAULT_COMMAND
from calib.model import CalibrationFileError, default_path, fit_calibration, load_calibration

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TEXT = default_path().read_text()
DEFAULT = json.loads(DEFAULT_TEXT)
README = REPO / "data" / "calibration" / "README.md"


def _write(tmp_path: Path, name: str, document) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _refused(path) -> str:
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    return str(info.value)


# ---- 1. a file that is not valid JSON --------------------------------------------------------------------------------

def test_the_default_command_is_the_documented_one_and_the_shipped_forecaster():
    assert DEFAULT_COMMAND in README.read_text()
    assert f"--forecaster {DEFAULT['forecaster']}" in DEFAULT_COMMAND


def test_a_truncated_default_gets_the_readme_command_and_no_circular_alternative(tmp_path, monkeypatch):
    path = _write(tmp_path, "calibration", DEFAULT_TEXT[: len(DEFAULT_TEXT) // 3])
    monkeypatch.setattr(calib.model, "default_path", lambda: path)
    monkeypatch.chdir(tmp_path)
    for spec in ("default", str(path), "calibration.json"):  # by name, its path, or a relative path to it
        message = _refused(spec)
        assert message.startswith(f"calibration file {path} is damaged: not valid JSON (") or \
            message.startswith(f"calibration file {spec} is damaged: not valid JSON (")
        assert message.endswith(f"refit it in a gradprobe checkout with `{DEFAULT_COMMAND}` "
                                "(data/calibration/README.md), or reinstall gradprobe"), message
        assert "--calibration default" not in message


def test_a_link_to_the_default_is_the_default(tmp_path, monkeypatch):
    path = _write(tmp_path, "calibration", "{")
    monkeypatch.setattr(calib.model, "default_path", lambda: path)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    message = _refused(link)
    assert DEFAULT_COMMAND in message and "--calibration default" not in message


def test_another_truncated_file_must_name_its_forecaster_and_gets_its_own_path(tmp_path):
    path = _write(tmp_path, "mine", DEFAULT_TEXT[:1000])
    message = _refused(path)
    assert f"refit it with `calib fit ROWS.csv --forecaster FORECASTER --out {path}`, where FORECASTER is the " \
           f"forecaster it was fitted for (one of {', '.join(FORECASTERS)}; without --forecaster calib fit fits " \
           "forecast_probe, a different calibration)" in message
    assert "--out FILE" not in message
    assert message.endswith("or pass --calibration default")  # another file: the default is an alternative


# ---- 2. an edited forecaster field ----------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["forecaster", "domain.forecaster"])
def test_an_edited_forecaster_is_said_to_disagree_with_the_data(tmp_path, field):
    d = copy.deepcopy(DEFAULT)
    (d["domain"] if field.startswith("domain") else d)["forecaster"] = "forecast_probe"
    path = _write(tmp_path, "edited", d)
    message = _refused(path)
    assert message.startswith(f"calibration file {path} is damaged: its forecaster and its data disagree: field "
                              f"{field} is 'forecast_probe' but data.columns holds the forecast column "
                              "'forecast_cost_only' (the forecaster the calibration was fitted on)"), message
    assert f"`calib fit ROWS.csv --forecaster forecast_cost_only --out {path}`" in message
    assert "is missing" not in message
    assert message.endswith("to calibrate forecast_probe, fit a new file with --forecaster forecast_probe")


def test_an_edited_forecaster_in_the_default_gets_the_readme_command(tmp_path, monkeypatch):
    d = copy.deepcopy(DEFAULT)
    d["forecaster"] = "forecast_signal_proxy"
    path = _write(tmp_path, "calibration", d)
    monkeypatch.setattr(calib.model, "default_path", lambda: path)
    message = _refused("default")
    assert "field forecaster is 'forecast_signal_proxy' but data.columns holds the forecast column " \
           "'forecast_cost_only'" in message
    assert message.endswith(f"To repair it, refit it in a gradprobe checkout with `{DEFAULT_COMMAND}` "
                            "(data/calibration/README.md), or reinstall gradprobe"), message


# ---- 3. an edited params block -------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit, expected", [
    (lambda p: p.__setitem__("epsilon", 3.0), "params.epsilon is 3.0 in the file but the refit uses 1.35"),
    (lambda p: p.__setitem__("alpha", 0.01), "params.alpha is 0.01 in the file but the refit uses 0.0"),
    (lambda p: p.__setitem__("max_iter", 1000.5), "params.max_iter is 1000.5 in the file but the refit uses 1000"),
    (lambda p: p.__setitem__("max_iter", "1000"), "params.max_iter is '1000', not a number (the refit uses 1000)"),
    (lambda p: p.pop("epsilon"), "params.epsilon is missing (the refit uses 1.35)"),
    (lambda p: p.__setitem__("tol", 1e-3), "params.tol is not a parameter of this calibration"),
])
def test_an_edited_param_is_refused_naming_it_both_values_and_the_command(tmp_path, edit, expected):
    d = copy.deepcopy(DEFAULT)
    assert d["params"] == {"alpha": 0.0, "epsilon": 1.35, "max_iter": 1000}  # what the refit uses
    edit(d["params"])
    path = _write(tmp_path, "params", d)
    message = _refused(path)
    assert message.startswith(f"calibration file {path}: {expected}"), message
    assert "an edit of params would be silently ignored; it is refused instead" in message
    assert message.endswith(f"To repair or change the file, refit it with `calib fit ROWS.csv --forecaster "
                            f"forecast_cost_only --out {path}` (ROWS.csv: the rows it was fitted from; `calib rows "
                            "STUDY_DIR... --out ROWS.csv` rebuilds them from the studies in its domain), or pass "
                            "--calibration default")


def test_a_missing_params_block_is_damage(tmp_path):
    d = copy.deepcopy(DEFAULT)
    del d["params"]
    assert re.search(r"is damaged: field 'params' is missing or malformed; refit it with `calib fit ROWS.csv "
                     r"--forecaster forecast_cost_only", _refused(_write(tmp_path, "noparams", d)))


def test_an_isotonic_file_checks_its_boolean_setting(tmp_path):
    rows = read_rows(REPO / "data" / "calibration" / "rows.csv")
    path = fit_calibration(rows, forecaster="forecast_cost_only", method="isotonic").save(tmp_path / "iso.json")
    d = json.loads(path.read_text())
    assert d["params"] == {"feature": 0, "increasing": True}
    assert load_calibration(path).method == "isotonic"  # unedited: loads
    d["params"]["increasing"] = False
    message = _refused(_write(tmp_path, "iso2", d))
    assert "params.increasing is false in the file but the refit uses true" in message
    assert "--method isotonic" in message


# ---- 4. an edited check block ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, i", [("point", 0), ("upper", 5)])
def test_an_edited_check_value_is_named_with_both_values(tmp_path, name, i):
    d = copy.deepcopy(DEFAULT)
    old = d["check"][name][i]
    d["check"][name][i] = old + 1.0
    path = _write(tmp_path, "check", d)
    message = _refused(path)
    m = re.match(rf"calibration file {re.escape(str(path))}: check\.{name}\[{i}\] is (\S+) in the file but "
                 r"refitting the file's data gives (\S+) \(1 of its (\d+) values differ\)", message)
    assert m, message
    assert float(m.group(1)) == pytest.approx(old + 1.0) and float(m.group(2)) == pytest.approx(old, abs=1e-6)
    assert int(m.group(3)) == len(d["data"]["rows"])
    assert f"does not reproduce its stored {name} predictions" in message
    assert f"--out {path}`" in message
