"""A study folder without ``probe/probe.json``: the error says why from ``study.json``'s probe record (run with
--no-probe, or a failed probe) and the command that adds the probe; it said "the probe runs last", which is wrong
(the probe runs before the arms)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gradprobe.forecast import study_forecasts

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def study(tmp_path):
    d = tmp_path / "study_tiny"
    shutil.copytree(REPO / "data" / "study_tiny", d)
    (d / "probe" / "probe.json").unlink()
    return d


def test_a_study_run_without_its_probe(study):
    doc = json.loads((study / "study.json").read_text())
    doc.pop("probe")  # what --no-probe leaves
    (study / "study.json").write_text(json.dumps(doc))
    with pytest.raises(FileNotFoundError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{study}/probe/probe.json is missing; the study has no probe (it ran with --no-probe, or "
                            f"stopped during the probe): run it with `gradprobe study {study}/plan.toml --out {study}` "
                            "(it keeps finished runs and runs only the probe)")


def test_a_study_whose_probe_failed(study):
    doc = json.loads((study / "study.json").read_text())
    doc["probe"] = {"status": "failed", "error": "ValueError: out of memory", "seconds": 3.0}
    (study / "study.json").write_text(json.dumps(doc))
    with pytest.raises(FileNotFoundError, match=r"probe\.json is missing; the study's probe failed \(ValueError: out of "
                                                r"memory\); run it again with `gradprobe study .*/plan\.toml --out"):
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
                            f"stopped during the probe): run it with `gradprobe study {study}/plan.toml --out {study}` "
                            "(it keeps finished runs and runs only the probe)")
