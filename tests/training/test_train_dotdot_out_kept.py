"""A refused ``gradprobe train`` (and :func:`gradprobe.train`) removed an existing empty folder reached through
``..``: ``--out new9/../old`` with ``old`` there and empty, and a failure after the run folder's lock was taken (here
a ``[model] name`` that is an empty folder), removed ``old``; ``--out new9/../old/sub`` removed it too, and the cleanup
even tried ``rmdir("new9/..")``, the working directory. :func:`gradprobe.study.folder.hold_run_folder` took each
leading part of the path for a folder it had made; it now removes what
:func:`gradprobe.outputs.removed_if_left_empty` removes: the folders ``mkdir -p`` made (``new9``, ``sub``), never one
that existed before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.study.folder import hold_run_folder
from gradprobe.tiers import tier_path

PLANS = Path(__file__).resolve().parents[2] / "plans"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory holding ``old`` (an empty folder) and ``bad.toml``, the tiny plan with a ``[model] name``
    that is a folder of tokenizer files only (``emptymodel``): its tokenizer passes the checks made before the run
    folder is held (the prompts' lengths), its missing ``config.json`` is refused once the folder is held."""
    (tmp_path / "old").mkdir()
    (tmp_path / "emptymodel").mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copyfile(tier_path("tiny") / name, tmp_path / "emptymodel" / name)
    text = (PLANS / "tiny.toml").read_text()
    start = text.index('\nname = "tiny"          #')
    end = text.index("\n", start + 1)
    (tmp_path / "bad.toml").write_text(text[:start] + '\nname = "emptymodel"' + text[end:])
    monkeypatch.chdir(tmp_path)
    return tmp_path


BEFORE = ["bad.toml", "emptymodel", "old"]


@pytest.mark.parametrize("out", ["new9/../old", "new9/../old/sub"])
def test_a_refused_train_keeps_an_empty_folder_reached_through_dotdot(here, capsys, out):
    rc = main(["train", "--plan", "bad.toml", "--arm", "grpo", "--out", out, "--updates", "1", "--no-progress"])
    assert rc == 2 and "model folder 'emptymodel' has no config.json" in capsys.readouterr().err
    assert sorted(os.listdir(here)) == BEFORE and os.listdir(here / "old") == []


def test_a_refused_train_call_keeps_an_empty_folder_reached_through_dotdot(here):
    os.rename(here / "old", here / "old3")
    with pytest.raises(Exception, match="model folder 'emptymodel' has no config.json"):
        gradprobe.train("bad.toml", "new7/../old3", arm="grpo", updates=1)
    assert sorted(os.listdir(here)) == ["bad.toml", "emptymodel", "old3"] and os.listdir(here / "old3") == []


def test_holding_a_folder_reached_through_dotdot_removes_only_what_it_made(tmp_path, monkeypatch):
    (tmp_path / "old").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="refused"):
        with hold_run_folder("new9/../old/sub/deeper"):
            assert (tmp_path / "old" / "sub" / "deeper" / ".lock").is_file() and (tmp_path / "new9").is_dir()
            raise RuntimeError("refused")
    assert os.listdir(tmp_path) == ["old"] and os.listdir(tmp_path / "old") == []
    with hold_run_folder("old"):  # no error: the lock file removed, the folder kept
        pass
    assert os.listdir(tmp_path) == ["old"] and os.listdir(tmp_path / "old") == []
    with pytest.raises(RuntimeError, match="refused"):  # a folder the block wrote into is kept whole
        with hold_run_folder("new9/../new10"):
            (tmp_path / "new10" / "config.json").write_text("{}")
            raise RuntimeError("refused")
    assert sorted(os.listdir(tmp_path)) == ["new10", "old"]  # new9, made only to pass through, removed
    assert sorted(os.listdir(tmp_path / "new10")) == [".lock", "config.json"]
