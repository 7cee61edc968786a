"""A calibration file's ``domain.rewards`` (and ``domain.loss_types``) are checked against its own data rows.

``calib fit`` records the rewards the fitted arms trained (:func:`calib.domain.domain_of_rows`); a reward added to
``domain.rewards`` by hand (``"r/myrw.py:brevity"``) made ``calib apply`` judge that plug-in reward inside the
domain, and one removed (``hybrid_0.5``) was judged outside it while its arm is listed. Where the data block holds
the rows' ``reward`` and ``loss_type`` columns, the loader refuses such an edit the way it refuses an edited
``domain.arms``: the file, the field, both values and the refit command. Data without these columns (files written
before them) cannot say which reward each arm trained; the fields are then read as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib.dataset import read_rows
from calib_helpers import edited_calibration
from calib.domain import check_rewards
from calib.model import CalibrationFileError, default_path, fit_calibration, load_calibration

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"
REWARDS = ["hybrid_0.5", "majority_vote", "mc_advantage", "mc_value", "outcome", "outcome_loo", "process",
           "process_hybrid_0.1", "process_hybrid_0.5", "process_hybrid_0.9"]
LOSS_TYPES = ["bnpo", "cispo", "grpo", "gspo"]


@pytest.fixture(scope="module")
def with_columns() -> dict:
    """The shipped calibration refitted, its data block holding each row's reward and loss type."""
    cal = fit_calibration(read_rows(ROWS), forecaster="forecast_cost_only")
    d = cal.to_dict()
    assert d["data"]["columns"][-2:] == ["reward", "loss_type"]  # calib fit records them
    assert d["domain"]["rewards"] == REWARDS and d["domain"]["loss_types"] == LOSS_TYPES
    return d


def _write(tmp_path, d, edit=lambda dom: None) -> Path:
    return edited_calibration(tmp_path, d, edit, "cal.json")


def test_an_intact_file_with_the_columns_loads(tmp_path, with_columns):
    cal = load_calibration(_write(tmp_path, with_columns))
    assert cal.domain.rewards == REWARDS and cal.domain.loss_types == LOSS_TYPES


@pytest.mark.parametrize("edit, field, start, differ", [
    (lambda dom: dom["rewards"].append("r/myrw.py:brevity"), "rewards", 'a list ["hybrid_0.5", ',
     " (it adds ['r/myrw.py:brevity'])"),
    (lambda dom: dom["rewards"].remove("hybrid_0.5"), "rewards", 'a list ["majority_vote", ',
     " (it lacks ['hybrid_0.5'])"),
    (lambda dom: dom.update(rewards=None), "rewards", "null", ""),
    (lambda dom: dom["loss_types"].remove("gspo"), "loss_types", 'a list ["bnpo", "cispo", "grpo"]',
     " (it lacks ['gspo'])"),
])
def test_a_reward_domain_edited_away_from_the_data_is_refused(tmp_path, with_columns, edit, field, start, differ):
    path = _write(tmp_path, with_columns, edit)
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    msg, column = str(info.value), {"rewards": "reward", "loss_types": "loss_type"}[field]
    assert msg.startswith(f"calibration file {path} is damaged: field domain.{field} is {start}"), msg
    held = 'a list ["bnpo", "cispo", "grpo", "gspo"]' if field == "loss_types" else 'a list ["hybrid_0.5", '
    assert f", but the file's data rows hold {held}" in msg, msg
    assert msg.endswith(
        f" in their {column!r} column{differ}: the domain block was edited; refit it with `calib fit ROWS.csv "
        f"--forecaster forecast_cost_only --out {path}` (ROWS.csv: the rows it was fitted from; `calib rows "
        "STUDY_DIR... --out ROWS.csv` rebuilds them from the studies in its domain), or pass --calibration default"), msg


def _without_columns() -> dict:
    """The shipped calibration as files written before the data block held reward and loss_type."""
    d = json.loads(default_path().read_text())
    assert d["data"]["columns"][-2:] == ["reward", "loss_type"]
    d["data"]["columns"] = d["data"]["columns"][:-2]
    d["data"]["rows"] = [row[:-2] for row in d["data"]["rows"]]
    return d


def test_a_file_without_the_columns_reads_its_rewards_as_recorded(tmp_path):
    d = _without_columns()
    cal = load_calibration(_write(tmp_path, d, lambda dom: dom["rewards"].append("r/myrw.py:brevity")))
    assert cal.domain.rewards[-1] == "r/myrw.py:brevity"


def test_a_reward_missing_from_the_rewards_but_named_by_an_arm_is_said_so_not_never_an_arm(tmp_path):
    """Without the columns an edit cannot be proven; the warning no longer says "it was never an arm" beside an arm
    list that names it, and says what the mismatch may mean."""
    d = _without_columns()
    cal = load_calibration(_write(tmp_path, d, lambda dom: dom["rewards"].remove("hybrid_0.5")))
    probe = {"config": {"loss_type": "grpo"}, "rewards": [{"name": "outcome"}, {"name": "hybrid_0.5"},
                                                          {"name": "my_reward"}]}
    hybrid, mine = check_rewards(cal, probe)
    assert hybrid.reward == "hybrid_0.5" and hybrid.outside and mine.reward == "my_reward"
    assert hybrid.startswith("reward 'hybrid_0.5' is outside the calibration's domain: by its domain.rewards no arm "
                             "of the calibration's studies trained it (arms ['bnpo', ")
    assert ("), though one of its arms is named 'hybrid_0.5'; if that arm trained 'hybrid_0.5', the file's "
            "domain.rewards was edited: refit it with `calib fit` (or pass --calibration default); the calibration's "
            "intervals were validated on other rewards") in hybrid
    assert "never an arm" not in hybrid
    assert mine.startswith("reward 'my_reward' is outside the calibration's domain: it was never an arm of the "
                           "calibration's studies (arms [")
