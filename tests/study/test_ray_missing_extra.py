"""--executor ray where Ray is not installed: the refusal names gradprobe's extra that installs it
(``pip install 'gradprobe[ray]'``), from the CLI before the study folder is written and from the executor itself."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from study_helpers import toy_plan, write_plan

from gradprobe.cli import main
from gradprobe.study import executors
from gradprobe.study.folder import StudyError


def test_cli_names_the_ray_extra_and_writes_nothing(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    plan = write_plan(tmp_path, toy_plan("noray", seeds=(0,)))
    assert main(["study", str(plan), "--out", str(tmp_path / "study"), "--executor", "ray", "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'gradprobe[ray]'" in err and "--executor local" in err
    assert not (tmp_path / "study").exists()


def test_the_ray_executor_names_the_extra_when_ray_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(StudyError, match=r"pip install 'gradprobe\[ray\]'"):
        list(executors._iter_ray([{"kind": "run"}], threads=1))
