"""calib reads ``probe.json`` only through gradprobe's reader (:func:`gradprobe.load_probe`), with its
own error type (:class:`calib.apply.CalibrationApplyError`) and messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gradprobe.api.probe
from calib.apply import CalibrationApplyError, load_probe

STUDY_PROBE = Path(__file__).resolve().parents[2] / "data" / "study_tiny" / "probe"


def test_calib_reads_through_gradprobe_load_probe(monkeypatch):
    seen = []
    real = gradprobe.api.probe.load_probe
    monkeypatch.setattr(gradprobe.api.probe, "load_probe", lambda path: seen.append(path) or real(path))
    result, folder, task = load_probe(STUDY_PROBE)
    assert seen == [STUDY_PROBE]
    assert result == json.loads((STUDY_PROBE / "probe.json").read_text()) and folder == STUDY_PROBE
    assert task["name"] == "chain_sum" and task["config"]["max_terms"] == 4  # the study plan's full task
    assert load_probe(STUDY_PROBE / "probe.json")[1] == STUDY_PROBE  # the file itself reads the same


def test_missing_and_bad_files_raise_calib_errors_naming_the_path(tmp_path):
    with pytest.raises(CalibrationApplyError) as info:
        load_probe(tmp_path / "nothing")
    assert str(info.value) == f"{tmp_path / 'nothing'} not found; pass a `gradprobe probe --out` folder " \
                              "(it holds probe.json)"
    with pytest.raises(CalibrationApplyError, match=r"empty/probe.json not found"):
        (tmp_path / "empty").mkdir()
        load_probe(tmp_path / "empty")
    (tmp_path / "study" / "probe").mkdir(parents=True)  # a study folder: its probe is in probe/
    shutil.copy(STUDY_PROBE / "probe.json", tmp_path / "study" / "probe" / "probe.json")
    with pytest.raises(CalibrationApplyError) as info:
        load_probe(tmp_path / "study")
    assert str(info.value).endswith(f"(a study folder: its probe is {tmp_path / 'study' / 'probe'})")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "probe.json").write_text("{\"rewards\": [")
    with pytest.raises(CalibrationApplyError,
                       match=r"bad/probe.json is not valid JSON .*re-run `gradprobe probe --out '.*bad'`"):
        load_probe(tmp_path / "bad")
    (tmp_path / "bad" / "probe.json").write_text("{\"config\": {}}")
    with pytest.raises(CalibrationApplyError, match=r"bad/probe.json has no 'rewards' list"):
        load_probe(tmp_path / "bad")


def test_a_folder_whose_probe_was_killed_mid_replacement_names_the_kept_earlier_probe(tmp_path):
    """A probe killed by SIGKILL while it replaced an earlier one leaves the earlier files in .earlier-probe/;
    gradprobe.load_probe and calib apply said only "probe.json not found"."""
    import gradprobe

    folder = tmp_path / "p"
    (folder / ".earlier-probe").mkdir(parents=True)
    (folder / ".earlier-probe" / "probe.json").write_text((STUDY_PROBE / "probe.json").read_text())
    expected = (f"{folder / 'probe.json'} not found: a probe was killed while it replaced the one in {folder}, whose "
                f"files are kept in {folder / '.earlier-probe'}; the next `gradprobe probe --out {folder}` restores "
                "them first, or move them back by hand")
    with pytest.raises(FileNotFoundError) as e:
        gradprobe.load_probe(folder)
    assert str(e.value) == expected
    with pytest.raises(CalibrationApplyError) as e:
        load_probe(folder)
    assert str(e.value) == expected
