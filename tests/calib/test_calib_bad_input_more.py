"""Four bad inputs of calib, each refused in one line that names the file, the field and the fix.

Before:

- ``calib rows STUDY`` on a study whose ``probe/probe.json`` had a reward entry without ``tokens_per_update`` said
  only "probe entry 'mc_value' lacks 'tokens_per_update'; re-run the probe with this gradprobe" (no file, no field,
  and a fix that does not apply to a study's probe);
- a ``study.json`` ``plan_sha256`` of ``true`` raised TypeError, ``0`` was taken for absent (the rows were built from
  analysis.json's), a list or a 40-digit text was blamed on analysis.json ("re-analyse the study");
- a calibration file with ``format_version: 1`` and a version-2 body said "field 'features' is missing", a 400-digit
  version said "Upgrade gradprobe to read it";
- messages showed a JSON value as Python writes it: ``True``, ``None`` (a data text cell, the ``forecaster`` field, a
  ``domain`` field).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from calib.cli import main as calib_main
from calib.dataset import StudyFormatError, build_rows
from calib.model import CalibrationFileError, default_path, load_calibration
from study_helpers import shipped_copy

DEFAULT = json.loads(default_path().read_text())
V1 = json.loads((Path(__file__).resolve().parent / "data" / "calibration_v1.json").read_text())
SHA = "b6b755233a8f3526465af0208eca0a6c7551451c1cd610925ccbc3acfcd84f92"  # data/study_tiny's plan
HUGE = 10 ** 400
HUGE_TEXT = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
FORECASTERS = "['forecast_probe', 'forecast_cost_only', 'forecast_signal_proxy', 'forecast_first_order']"
GENERIC = "refit it with `calib fit ROWS.csv --out FILE` (or pass --calibration default)"


def _restore(study: Path, file: str) -> str:
    """The fix of a damaged file of a shipped study copy (it has no runs/: resuming would train every run again)."""
    return (f"this is the probe of a study without run folders ({study} has no runs/: resuming it would train every "
            f"run again): restore {study / file} from a copy of the study")


def _edit_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _refit(path: Path) -> str:
    """The rebuild command of a copy of the default calibration at ``path`` (calib.file_check.rebuild_command)."""
    return (f"refit it with `calib fit ROWS.csv --forecaster forecast_cost_only --out {path}` (ROWS.csv: the rows it "
            "was fitted from; `calib rows STUDY_DIR... --out ROWS.csv` rebuilds them from the studies in its domain), "
            "or pass --calibration default")


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


# --- 1: a probe entry without tokens_per_update ------------------------------------------------------------------

@pytest.mark.parametrize("key, state, why", [
    ("tokens_per_update", "is missing", "the generated tokens per update, which the token budget is divided by"),
    ("per_group", "is missing", "the per-group alignments the entry's efficiency is measured from")])
def test_rows_name_the_probe_file_and_field_an_entry_lacks(tmp_path, capsys, key, state, why):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    _edit_json(study / "probe" / "probe.json", lambda d: d["rewards"][1].pop(key))
    want = (f"{study}/probe/probe.json field rewards[1].{key} {state}: the forecasts need it ({why}); "
            + _restore(study, "probe/probe.json"))
    with pytest.raises(StudyFormatError) as e:  # was: "probe entry 'mc_value' lacks 'tokens_per_update'; re-run..."
        build_rows(study)
    assert str(e.value) == want
    assert calib_main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    assert capsys.readouterr().err == f"calib rows: error: {want}\n"
    assert not (tmp_path / "rows.csv").exists()


def test_a_null_tokens_per_update_is_named_as_null(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    _edit_json(study / "probe" / "probe.json", lambda d: d["rewards"][2].__setitem__("tokens_per_update", None))
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    assert str(e.value) == (f"{study}/probe/probe.json field rewards[2].tokens_per_update is null: the forecasts need "
                            "it (the generated tokens per update, which the token budget is divided by); "
                            + _restore(study, "probe/probe.json"))


# --- 2: study.json's plan_sha256 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [
    (True, "true"), (0, "0"), ([SHA], f'["{SHA[:55]}...'), (SHA[:40], f'"{SHA[:40]}"'),
    (SHA.upper(), f'"{SHA.upper()[:56]}...'), ("", '""'), (HUGE, HUGE_TEXT)],
    ids=["true", "0", "list", "40-hex", "upper", "empty", "huge"])
def test_a_plan_sha256_that_is_no_sha256_is_refused_naming_study_json(tmp_path, value, shown):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    _edit_json(study / "study.json", lambda d: d.__setitem__("plan_sha256", value))
    with pytest.raises(StudyFormatError) as e:  # was: TypeError, rows built (0), or "re-analyse the study"
        build_rows(study)
    assert str(e.value) == (f"{study}/study.json field plan_sha256 is {shown}, not the SHA-256 of the study's plan "
                            f"(64 lowercase hex digits, as text); restore {study}/study.json from a copy of the study "
                            "(`gradprobe study` writes it when the study's plan is frozen)")


def test_an_absent_plan_sha256_still_reads_analysis_json_s(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "study_tiny")
    _edit_json(study / "study.json", lambda d: d.pop("plan_sha256"))
    rows = build_rows(study)
    assert set(rows["plan_sha256"]) == {SHA} and set(rows["study"]) == {f"study_tiny@{SHA[:12]}"} and len(rows) == 20


# --- 3: a calibration file's format_version ----------------------------------------------------------------------

@pytest.mark.parametrize("version, body, content", [
    (1, "v2", "a version-2 calibration ('forecaster' and 'domain', no 'features')"),  # was: 'features' is missing
    (2, "v1", "a version-1 calibration ('features', no 'forecaster' nor 'domain')"),  # was: 'forecaster' is missing
])
def test_a_version_field_that_does_not_match_the_body_says_so(tmp_path, version, body, content):
    path = _write(tmp_path, dict(DEFAULT if body == "v2" else V1, format_version=version))
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    fix = _refit(path) if body == "v2" else GENERIC
    assert str(e.value) == (f"calibration file {path} is damaged: its field 'format_version' does not match its "
                            f"content: it is {version}, but the file holds {content}; restore the file from a copy, "
                            f"or {fix}")


@pytest.mark.parametrize("version, shown", [(HUGE, HUGE_TEXT), (1001, "1001"), (10 ** 30, str(10 ** 30))],
                         ids=["huge", "1001", "1e30"])
def test_a_version_far_above_any_format_is_called_damaged(tmp_path, version, shown):
    path = _write(tmp_path, dict(DEFAULT, format_version=version))
    with pytest.raises(CalibrationFileError) as e:  # was: "Upgrade gradprobe to read it"
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'format_version' is {shown}, far above any "
                            "calibration format version (this calib reads versions [1, 2]; a newer gradprobe's would "
                            f"be a small whole number); restore the file from a copy, or {_refit(path)}")
    assert "Upgrade" not in str(e.value)


@pytest.mark.parametrize("version", [3, 1000])
def test_a_plausible_future_version_keeps_the_upgrade_advice(tmp_path, version):
    path = _write(tmp_path, dict(DEFAULT, format_version=version))
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    assert str(e.value) == (f"{path} has calibration format version {version} (written by gradprobe "
                            f"{DEFAULT['versions']['gradprobe']}); this calib reads versions [1, 2]. Upgrade gradprobe "
                            "to read it, or refit it with this version: `calib fit ROWS.csv --out FILE` (the rows are "
                            "in the file's \"data\").")


# --- 4: values read from JSON shown as JSON ----------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [(True, "true"), (None, "null"), (False, "false"), (3, "3")])
def test_a_text_data_cell_is_shown_as_json(tmp_path, value, shown):
    d = copy.deepcopy(DEFAULT)
    j = d["data"]["columns"].index("arm")
    d["data"]["rows"][4][j] = value
    path = _write(tmp_path, d)
    with pytest.raises(CalibrationFileError) as e:  # was: "is True", "is None"
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field data.rows[4][{j}] (column 'arm') is {shown}, "
                            f"not a string; {_refit(path)}")


@pytest.mark.parametrize("value, shown", [(True, "true"), (None, "null"), (7, "7"), ([1], "a list [1]")])
def test_a_forecaster_that_is_no_text_is_shown_as_json(tmp_path, value, shown):
    path = _write(tmp_path, dict(DEFAULT, forecaster=value))
    with pytest.raises(CalibrationFileError) as e:  # was: "(True, not one of", "(None, not one of"
        load_calibration(path)
    # the refit names the forecaster of the data's column (was no --forecaster: calib fit's default forecast_probe)
    assert str(e.value) == (f"calibration file {path} is damaged: field 'forecaster' ({shown}, not one of "
                            f"{FORECASTERS}) is missing or malformed; refit it with `calib fit ROWS.csv --forecaster "
                            f"forecast_cost_only --out {path}` "
                            "(ROWS.csv: the rows it was fitted from; `calib rows STUDY_DIR... --out ROWS.csv` rebuilds "
                            "them from the studies in its domain), or pass --calibration default")


@pytest.mark.parametrize("field, value, shown, what", [
    ("budget_kind", True, "true", "not one of ['tokens', 'time', 'updates']"),
    ("budget_kind", False, "false", "not one of ['tokens', 'time', 'updates']"),
    ("arms", True, "true", "not a non-empty list of strings"),
    ("rewards", False, "false", "not null or a list of strings"),
    ("budget_kind", "generated_tokens", "'generated_tokens'", "not one of ['tokens', 'time', 'updates']")])
def test_a_domain_field_is_shown_as_json_and_text_stays_quoted(tmp_path, field, value, shown, what):
    d = copy.deepcopy(DEFAULT)
    d["domain"][field] = value
    path = _write(tmp_path, d)
    with pytest.raises(CalibrationFileError) as e:  # was: "is True", "is False"
        load_calibration(path)
    assert str(e.value) == (f"calibration file {path} is damaged: field domain.{field} is {shown}, {what}; "
                            + _refit(path))


def test_the_shipped_files_still_load():
    assert load_calibration("default").format_version == 2
    assert load_calibration(Path(__file__).resolve().parent / "data" / "calibration_v1.json").format_version == 1
