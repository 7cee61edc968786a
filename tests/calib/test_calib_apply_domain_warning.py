"""``calib.apply`` from Python warns (CalibrationDomainWarning, once per call) when a reward is outside
the calibration's domain, naming the reward and the arms the calibration was fitted on; inside the
domain it is silent. The command-line paths (``calib apply``, ``gradprobe probe --calibration``, which
go through :func:`calib.apply.calibrate` / :func:`calib.apply.calibrate_probe`) print their own mark and
do not warn.

Built on the shipped study's real probe (``data/study_tiny/probe``) with one reward renamed to a name
no shipped study trained, and the shipped default calibration.
"""

from __future__ import annotations

import copy
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import calib
import calib.cli
from calib.apply import calibrate, calibrate_probe, load_probe
from calib.domain import CalibrationDomainWarning

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "data" / "study_tiny" / "probe"


@pytest.fixture(scope="module")
def default():
    return calib.load("default")


@pytest.fixture(scope="module")
def renamed():
    """The study's probe.json with ``mc_value`` renamed ``my_reward`` (a reward no shipped study trained)."""
    result = copy.deepcopy(load_probe(PROBE)[0])
    next(r for r in result["rewards"] if r["name"] == "mc_value")["name"] = "my_reward"
    result["config"]["rewards"] = ["my_reward" if r == "mc_value" else r for r in result["config"]["rewards"]]
    return result


def _with_task(raw: dict):
    """A gradprobe.ProbeResult look-alike: ``raw`` probe.json, ``folder`` the study's probe (its full task)."""
    return SimpleNamespace(raw=raw, folder=PROBE)


def _domain_warnings(record):
    return [w for w in record if issubclass(w.category, CalibrationDomainWarning)]


def test_the_warning_class_is_exported():
    assert calib.CalibrationDomainWarning is CalibrationDomainWarning and issubclass(CalibrationDomainWarning,
                                                                                        UserWarning)
    assert "CalibrationDomainWarning" in dir(calib)


def test_a_reward_outside_the_domain_warns_once_naming_it_and_the_arms(default, renamed):
    with pytest.warns(CalibrationDomainWarning) as record:
        table = calib.apply(default, _with_task(renamed))
    (w,) = _domain_warnings(record)  # once per call
    message = str(w.message)
    assert message.startswith("reward 'my_reward' is outside the calibration's domain, fitted on the arms [")
    for arm in default.domain.arms:
        assert repr(arm) in message
    assert "['my_reward'] was never trained by its arms" in message and "the probe's" not in message
    assert w.filename == __file__  # points at the caller's line
    # the table and its attrs still mark it, as before
    assert bool(table.loc["my_reward", "outside_domain"]) and table.attrs["document"]["outside_domain"]
    assert not table.drop(index="my_reward")["outside_domain"].any()


def test_the_function_form_warns_too_and_can_be_turned_into_an_error(default, renamed):
    with pytest.warns(CalibrationDomainWarning, match=r"reward 'my_reward' is outside") as record:
        calib.apply.apply_calibration(default, _with_task(renamed))
    assert len(_domain_warnings(record)) == 1 and record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationDomainWarning)
        with pytest.raises(CalibrationDomainWarning, match="my_reward"):
            calib.apply(default, _with_task(renamed))


def test_inside_the_domain_there_is_no_warning(default):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        table = calib.apply(default, PROBE)
    assert _domain_warnings(record) == [] and not table["outside_domain"].any()


def test_a_probe_level_departure_marks_every_reward_and_says_so(default, renamed):
    # a bare dict has no full task configuration: the task is outside, so every reward is marked
    with pytest.warns(CalibrationDomainWarning) as record:
        table = calib.apply(default, renamed)
    (w,) = _domain_warnings(record)
    assert table["outside_domain"].all()
    assert str(w.message).startswith(f"rewards {list(table.index)} are outside the calibration's domain")
    assert "the probe's task is outside it (every reward is marked)" in str(w.message)


def test_the_command_line_paths_do_not_warn(default, renamed, tmp_path, capsys):
    study = shutil.copytree(PROBE.parent, tmp_path / "study_tiny")
    raw, _, task = load_probe(PROBE)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        doc = calibrate(default, renamed, task=task)  # calib apply's and the document's path
        result = calibrate_probe(copy.deepcopy(renamed), default, task=task)  # gradprobe probe --calibration's
        probe_json = study / "probe" / "probe.json"
        probe_json.write_text(probe_json.read_text().replace('"mc_value"', '"my_reward"'))
        assert calib.cli.main(["apply", str(study / "probe")]) == 0
    assert _domain_warnings(record) == []
    assert doc["outside_domain"] and result["calibration"]["outside_domain"]
    marked = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.endswith("outside domain")]
    assert marked == ["my_reward"]  # the CLI's own mark, on the marked reward's row only
