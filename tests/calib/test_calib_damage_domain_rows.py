"""Damaged input that calib used to take, then crash on or fit silently, is refused at the door.

- A calibration file whose ``domain`` block is damaged (``domain.models`` the string ``"tiny"``, a reversed
  ``domain.budget_range``...) loaded, then ``calib.domain.check_domain`` raised ``TypeError: string
  indices must be integers`` (``gradprobe probe --calibration FILE``: after the probe's compute) or
  judged probes against a nonsense range. ``load_calibration`` now refuses it with CalibrationFileError
  naming the file, the field and the ``calib fit`` command that rebuilds it.
- A rows CSV cut inside its last cell (``-2.6000000000000085`` cut to ``-2.``) was read as -2.0, and one
  cut mid-line as a failed run; ``read_rows`` now refuses a file that does not end with a line break.
  A paired row whose ``target`` is not its ``realized`` minus grpo's on the same seed is refused by
  ``select_rows`` (every shipped row satisfies the identity exactly).
- ``fit_calibration`` of a list of dicts raised AttributeError; it is now a TypeError saying to pass a
  DataFrame.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from calib.cli import main
from calib.dataset import RowsError, read_rows, select_rows
from calib.domain import Domain, check_domain
from calib.file_check import _DOMAIN_CHECKS
from calib.model import CalibrationFileError, default_path, fit_calibration, load_calibration
from calib_helpers import edited_calibration

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"
DEFAULT = json.loads(default_path().read_text())
PROBE = {"config": {"model": "tiny", "task": "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1",
                    "budget_tokens": 250000.0}}


def _fix(path) -> str:
    return (f"; refit it with `calib fit ROWS.csv --forecaster forecast_cost_only --out {path}` (ROWS.csv: the rows it "
            "was fitted from; `calib rows STUDY_DIR... --out ROWS.csv` rebuilds them from the studies in its domain), "
            "or pass --calibration default")


def _damaged(tmp_path, edit) -> Path:
    return edited_calibration(tmp_path, DEFAULT, edit)


def _set(field, value):
    return lambda dom: dom.__setitem__(field, value)


DOMAIN_DAMAGES = {  # name: (damage, the field and problem the message must name)
    "models_a_string": (_set("models", "tiny"), "field domain.models is 'tiny', not a non-empty list of models "
                                                '(objects with a string "key")'),
    "models_empty": (_set("models", []), "field domain.models is a list [], not a non-empty list of models"),
    "model_without_key": (lambda dom: dom["models"][1].pop("key"),
                          "field domain.models[1].key is missing (it must be a string)"),
    "model_dtype_a_number": (lambda dom: dom["models"][0].__setitem__("dtype", 32),
                             "field domain.models[0].dtype is 32, not a string or null"),
    "task_a_string": (lambda dom: dom["tasks"].__setitem__(0, "chain_sum"),
                      "field domain.tasks[0] is 'chain_sum', not a task (an object with a string \"key\")"),
    "task_key_a_number": (lambda dom: dom["tasks"][1].__setitem__("key", 7),
                          "field domain.tasks[1].key is 7, not a string"),
    "task_config_null": (lambda dom: dom["tasks"][0].__setitem__("config", None),
                         "field domain.tasks[0].config is null, not an object (it must be the resolved "
                         "configuration, an object)"),
    "studies_an_object": (_set("studies", {"key": "s"}), 'field domain.studies is an object {"key": "s"}, not a '
                                                         "non-empty list of studies"),
    "study_without_sha": (lambda dom: dom["studies"][0].pop("plan_sha256"),
                          "field domain.studies[0].plan_sha256 is missing (it must be a string)"),
    "unknown_budget_kind": (_set("budget_kind", "generated_tokens"),
                            "field domain.budget_kind is 'generated_tokens', not one of ['tokens', 'time', 'updates']"),
    "reversed_budget_range": (_set("budget_range", [1e9, 1.0]), "field domain.budget_range is [1000000000.0, 1.0], "
                                                                "reversed: its low 1000000000.0 exceeds its high 1.0"),
    "budget_range_of_three": (_set("budget_range", [1.0, 2.0, 3.0]),
                              "field domain.budget_range is a list [1.0, 2.0, 3.0], not two finite positive numbers "
                              "[low, high]"),
    "budget_range_infinite": (_set("budget_range", [1.0, "inf"]), 'field domain.budget_range is a list [1.0, "inf"], '
                                                                  "not two finite positive numbers"),
    "budget_range_a_bool": (_set("budget_range", [True, 2.0]), "field domain.budget_range is a list [true, 2.0], "
                                                               "not two finite positive numbers"),
    "arms_a_string": (_set("arms", "mc_value"), "field domain.arms is 'mc_value', not a non-empty list of strings"),
    "forecaster_a_number": (_set("forecaster", 3), "field domain.forecaster is 3, not one of ['forecast_probe', "),
    "rewards_a_string": (_set("rewards", "outcome"), "field domain.rewards is 'outcome', not null or a list of "
                                                     "strings"),
    "loss_types_of_numbers": (_set("loss_types", [1]), "field domain.loss_types is a list [1], not null or a list of "
                                                       "strings"),
    "budget_kind_missing": (lambda dom: dom.pop("budget_kind"), "field domain.budget_kind is missing or malformed;"),
}


def test_the_damage_of_domain_models_used_to_crash_the_domain_check():
    """The reproduction: the untouched default checks a probe; models = "tiny" made check_domain raise TypeError."""
    cal = load_calibration(default_path())
    assert check_domain(cal, PROBE) == []
    cal.domain.models = "tiny"  # what Domain.from_dict took from the damaged file
    with pytest.raises(TypeError, match="string indices must be integers"):
        check_domain(cal, PROBE)


@pytest.mark.parametrize("name", list(DOMAIN_DAMAGES))
def test_a_damaged_domain_block_is_refused_at_load_naming_the_field_and_the_fix(tmp_path, name):
    damage, problem = DOMAIN_DAMAGES[name]
    path = _damaged(tmp_path, damage)
    with pytest.raises(CalibrationFileError) as e:
        load_calibration(path)
    msg = str(e.value)
    assert msg.startswith(f"calibration file {path} is damaged: {problem}"), msg
    assert msg.endswith(_fix(path)) or "--cv study" in msg, msg  # a damaged studies list changes cv "auto"
    assert "\n" not in msg


def test_a_domain_that_is_not_an_object_is_refused(tmp_path):
    d = copy.deepcopy(DEFAULT)
    d["domain"] = ["tiny"]
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationFileError, match=r"is damaged: field 'domain' is malformed: it is a list, not an "
                                                   r"object \(studies, models, tasks, budget_kind"):
        load_calibration(path)


def test_every_domain_field_is_checked_and_intact_files_load(tmp_path):
    assert set(_DOMAIN_CHECKS) == {f.name for f in dataclasses.fields(Domain)}
    for dom_edit in (lambda dom: None, _set("budget_range", [250000, 250000])):  # integers are numbers
        load_calibration(_damaged(tmp_path, dom_edit))
    load_calibration(REPO / "tests" / "calib" / "data" / "calibration_v2_arms_only.json")  # no rewards recorded
    # rewards and loss_types are optional, but the shipped file's data rows record them: dropped, they are damage
    for dom_edit, field in ((lambda dom: dom.pop("rewards"), "rewards"), (_set("loss_types", None), "loss_types")):
        with pytest.raises(CalibrationFileError, match=rf"field domain\.{field} is null, but the file's data rows "):
            load_calibration(_damaged(tmp_path, dom_edit))


def _lines(data: bytes) -> int:
    return data.count(b"\n")  # the shipped file's lines; its last is the one cut


def _cut(tmp_path, n_bytes: int) -> tuple[Path, bytes]:
    data = ROWS.read_bytes()
    path = tmp_path / "rows.csv"
    path.write_bytes(data[:-n_bytes])
    return path, data


def test_a_rows_file_cut_inside_its_last_cell_is_refused_not_read_as_a_shorter_number(tmp_path):
    data = ROWS.read_bytes()
    assert data.endswith(b",-2.6000000000000085\n")  # the reproduction's last cell (the shipped file)
    path, _ = _cut(tmp_path, len(b"6000000000000085\n"))
    assert path.read_bytes().endswith(b",-2.")
    with pytest.raises(RowsError) as e:
        read_rows(path)
    assert str(e.value) == (f"{path} is cut short: its last line (line {_lines(data)}) does not end with a line break, "
                            "so it may have lost cells or the end of its last cell (`calib rows` ends every line with "
                            f"one); rebuild the file with `calib rows STUDY_DIR... --out {path}`")


def test_a_rows_file_cut_mid_line_is_refused_not_taken_for_a_failed_run(tmp_path, capsys):
    path, data = _cut(tmp_path, 200)
    with pytest.raises(RowsError, match=rf"is cut short: its last line \(line {_lines(data)}\) does not end"):
        read_rows(path)
    out = tmp_path / "cal.json"
    assert main(["fit", str(path), "--forecaster", "forecast_cost_only", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is cut short" in err and err.count("\n") == 1 and not out.exists()


def test_a_rows_file_ending_with_a_line_break_still_reads(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(ROWS.read_bytes().replace(b"\n", b"\r\n"))
    assert len(read_rows(path)) == 140 == len(read_rows(ROWS))


def test_every_shipped_paired_target_is_realized_minus_grpo_on_its_seed():
    rows = read_rows(ROWS)
    assert rows["paired"].all()
    ref = rows[rows["is_reference"]].set_index(["study", "seed"])["realized"]
    expected = rows["realized"].to_numpy() - ref.loc[list(zip(rows["study"], rows["seed"]))].to_numpy()
    assert (rows["target"].to_numpy() == expected).all()  # exactly: calib rows computes it so
    _, counts = select_rows(rows, forecaster="forecast_cost_only")
    assert counts["rows"] == 83


def test_a_paired_target_that_disagrees_with_the_realized_accuracies_is_refused(tmp_path, capsys):
    rows = read_rows(ROWS)
    i = int(rows.index[(rows["arm"] == "mc_value") & (rows["study"] == "study_tiny@b6b755233a8f")
                       & (rows["seed"] == 0)][0])
    r = rows.loc[i]
    grpo = float(rows.loc[(rows["arm"] == "grpo") & (rows["study"] == r["study"]) & (rows["seed"] == 0),
                          "realized"].iloc[0])
    rows.loc[i, "target"] = r["target"] + 0.5
    with pytest.raises(RowsError) as e:
        select_rows(rows, forecaster="forecast_cost_only")
    assert str(e.value) == (
        f"the rows table, study 'study_tiny@b6b755233a8f', arm 'mc_value', seed 0 (read from {ROWS}, line {i + 2}): "
        f"paired target "
        f"{float(r['target']) + 0.5!r} is not realized {float(r['realized'])!r} minus grpo's realized {grpo!r} on the "
        f"same seed ({float(r['realized']) - grpo!r}, tolerance 1e-06 points): the rows were edited or damaged; "
        "rebuild them with `calib rows STUDY_DIR... --out ROWS.csv`")
    rows.loc[i, "target"] = r["target"] + 5e-7  # within the tolerance (a rounding): taken
    select_rows(rows, forecaster="forecast_cost_only")
    # through calib fit: refused on one line, nothing written
    rows.loc[i, "target"] = r["target"] - 1.0
    path, out = tmp_path / "rows.csv", tmp_path / "cal.json"
    rows.to_csv(path, index=False)
    assert main(["fit", str(path), "--forecaster", "forecast_cost_only", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"arm 'mc_value', seed 0 (read from {path}, line {i + 2}): paired target" in err, err
    assert err.count("\n") == 1 and not out.exists()
    # two files: each run keeps its own file and line
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    other = rows["study"] != r["study"]
    rows[other].to_csv(first, index=False)
    rows[~other].to_csv(second, index=False)
    line = 2 + int(np.flatnonzero((rows[~other].index == i))[0])
    assert main(["fit", str(first), str(second), "--forecaster", "forecast_cost_only", "--out", str(out)]) == 2
    assert f"seed 0 (read from {second}, line {line}): paired target" in capsys.readouterr().err
    del rows.attrs["row_places"]  # a table built in memory: no file to name
    with pytest.raises(RowsError, match=r"arm 'mc_value', seed 0: paired target"):
        select_rows(rows, forecaster="forecast_cost_only")


def test_unpaired_rows_and_rows_without_the_reference_are_not_checked():
    rows = read_rows(ROWS)
    no_ref = rows[~rows["is_reference"]].reset_index(drop=True)
    no_ref.loc[0, "target"] += 3.0  # its grpo row is not in the table: nothing to check against
    select_rows(no_ref, forecaster="forecast_cost_only")
    unpaired = rows.copy()
    unpaired["paired"] = False  # target vs the mean of grpo's seeds: not this check's identity
    unpaired.loc[unpaired["arm"] == "mc_value", "target"] += 3.0
    select_rows(unpaired, forecaster="forecast_cost_only")


def test_fit_calibration_of_a_list_of_dicts_is_a_type_error_saying_what_to_pass():
    records = read_rows(ROWS).to_dict("records")
    with pytest.raises(TypeError) as e:
        fit_calibration(records, forecaster="forecast_cost_only")
    assert str(e.value) == ("fit_calibration: rows is a list, not a pandas DataFrame; pass the rows table as a "
                            "DataFrame, e.g. calib.dataset.read_rows(PATH) of a `calib rows STUDY_DIR... --out "
                            "ROWS.csv` file (or pandas.DataFrame(rows) of a list of row dicts)")


@pytest.mark.parametrize("edit, field, why", [
    (lambda dom: dom.update(budget_range=[250000.0, 300000.0]), "domain.budget_range",
     "is [250000.0, 300000.0], but the file's data rows span [250000, 250000]: the domain block was edited"),
    (lambda dom: dom["arms"].append("zzz_extra"), "domain.arms", "but the file's data rows hold"),
    (lambda dom: dom["models"].append(dict(dom["models"][0], key="other-model")), "domain.models keys",
     "but the file's data rows hold"),
])
def test_a_domain_block_edited_away_from_its_data_is_refused(tmp_path, edit, field, why):
    """The domain is the fitted rows' (calib.domain.domain_of_rows): a range widened by hand would pass a probe's
    budget as inside it; the loader compares the block with the file's own data rows."""
    d = copy.deepcopy(DEFAULT)
    edit(d["domain"])
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    assert f"field {field} " in str(info.value) and why in str(info.value), str(info.value)
    assert "refit it with `calib fit" in str(info.value)
