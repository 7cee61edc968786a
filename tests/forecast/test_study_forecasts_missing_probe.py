"""A study folder without ``probe/probe.json``: the error says why from ``study.json``'s probe record (run with
--no-probe, or a failed probe) and the command that adds the probe; it said "the probe runs last", which is wrong
(the probe runs before the arms).

The resume advice ("it keeps finished runs and runs only the probe") holds for a study that keeps its run folders
(``runs/``: the ``study`` fixture adds one to the copy of data/study_tiny). A shipped study keeps only its tables (no
``runs/``), where resuming would train every run again: there the fix is to restore ``probe/`` from a copy of the
study, as for a lost ``probe/arms.json`` (``gradprobe.forecast.study._arms_fix``); it used to advise resuming.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gradprobe.forecast import study_forecasts

REPO = Path(__file__).resolve().parents[2]


def _copy(tmp_path: Path, runs: bool) -> Path:
    """data/study_tiny (which has no runs/) without probe/probe.json, in tmp_path; with an empty runs/ when ``runs``."""
    d = tmp_path / "study_tiny"
    shutil.copytree(REPO / "data" / "study_tiny", d, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    assert not (d / "runs").exists()
    if runs:
        (d / "runs").mkdir()
    (d / "probe" / "probe.json").unlink()
    return d


@pytest.fixture
def study(tmp_path):
    """A study that keeps its run folders: resuming it runs only the probe."""
    return _copy(tmp_path, runs=True)


@pytest.fixture
def shipped(tmp_path):
    """A study as shipped under data/ (no runs/): resuming it would train every run again."""
    return _copy(tmp_path, runs=False)


def _record(study: Path, probe) -> None:
    """Write ``probe`` as study.json's probe record (None: no record, what --no-probe leaves)."""
    doc = json.loads((study / "study.json").read_text())
    doc.pop("probe")
    if probe is not None:
        doc["probe"] = probe
    (study / "study.json").write_text(json.dumps(doc))


def _restore(study: Path) -> str:
    return (f"restore {study}/probe from a copy of the study that holds it ({study} has no runs/: resuming the study "
            "to run its probe would train every run again)")


def test_a_study_run_without_its_probe(study):
    doc = json.loads((study / "study.json").read_text())
    doc.pop("probe")  # what --no-probe leaves
    (study / "study.json").write_text(json.dumps(doc))
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{study}/probe/probe.json is missing; the study has no probe (it ran with --no-probe, or "
                            f"stopped during the probe): run it with `gradprobe study '{study}/plan.toml' --out "
                            f"'{study}'` (it keeps finished runs and runs only the probe)")


def test_a_study_whose_probe_failed(study):
    doc = json.loads((study / "study.json").read_text())
    doc["probe"] = {"status": "failed", "error": "ValueError: out of memory", "seconds": 3.0}
    (study / "study.json").write_text(json.dumps(doc))
    with pytest.raises(FileNotFoundError, match=r"probe\.json is missing; the study's probe failed \(ValueError: out of "
                                                r"memory\); run it again with `gradprobe study '.*/plan\.toml' "
                                                r"--out '"):
        study_forecasts(study)


def test_a_study_without_its_probe_folder(study):
    """With probe/ gone (--no-probe), `calib rows` stopped at probe/arms.json "is written with probe.json by
    `gradprobe study`", with no command to run."""
    shutil.rmtree(study / "probe")
    doc = json.loads((study / "study.json").read_text())
    doc.pop("probe")
    (study / "study.json").write_text(json.dumps(doc))
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{study}/probe/arms.json is missing; the study has no probe (it ran with --no-probe, or "
                            f"stopped during the probe): run it with `gradprobe study '{study}/plan.toml' --out "
                            f"'{study}'` (it keeps finished runs and runs only the probe)")


def test_a_shipped_study_run_without_its_probe_is_told_to_restore_it_not_to_resume(shipped):
    _record(shipped, None)
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(shipped)
    assert str(e.value) == (f"{shipped}/probe/probe.json is missing; the study has no probe (it ran with --no-probe, "
                            f"or stopped during the probe): {_restore(shipped)}")
    assert "gradprobe study" not in str(e.value)


def test_a_shipped_study_whose_probe_failed_is_told_to_restore_it_not_to_resume(shipped):
    _record(shipped, {"status": "failed", "error": "ValueError: out of memory", "seconds": 3.0})
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(shipped)
    assert str(e.value) == (f"{shipped}/probe/probe.json is missing; the study's probe failed (ValueError: out of "
                            f"memory): {_restore(shipped)}")


def test_a_shipped_study_without_its_probe_folder_is_told_to_restore_it(shipped):
    shutil.rmtree(shipped / "probe")
    _record(shipped, None)
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(shipped)
    assert str(e.value) == (f"{shipped}/probe/arms.json is missing; the study has no probe (it ran with --no-probe, "
                            f"or stopped during the probe): {_restore(shipped)}")
