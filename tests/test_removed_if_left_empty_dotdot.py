"""A failed command removes the folders it made on the way to its ``--out`` and left empty
(:func:`gradprobe.outputs.removed_if_left_empty`), also one made only to be passed through: ``--out new9/../new10/run``
(both missing) makes ``new9`` too, since the system takes the ``..`` after it, and ``new9`` was left behind. A folder
that existed before is never removed, also one reached through such a path (``new9/../old/run`` with ``old`` there
and empty), which the old cleanup removed: it took ``new9/../old`` for a folder it had made."""

from __future__ import annotations

import os

import pytest

from gradprobe.cli import main
from gradprobe.outputs import removed_if_left_empty


def _fail_after_making(out) -> None:
    with pytest.raises(RuntimeError, match="refused"):
        with removed_if_left_empty(out):
            os.makedirs(out)
            raise RuntimeError("refused")


def test_a_folder_made_only_to_pass_through_is_removed(tmp_path):
    """Was: ``['new9']`` left."""
    _fail_after_making(tmp_path / "new9" / ".." / "new10" / "run")
    assert os.listdir(tmp_path) == []


def test_a_folder_that_existed_is_kept_when_reached_through_dotdot(tmp_path):
    """Was: ``old`` (empty, there before) removed with ``new9/../old/run``; ``new9`` left."""
    (tmp_path / "old").mkdir()
    _fail_after_making(tmp_path / "new9" / ".." / "old" / "run")
    assert os.listdir(tmp_path) == ["old"] and os.listdir(tmp_path / "old") == []


def test_a_made_folder_holding_something_is_kept_and_the_others_go(tmp_path):
    """``run`` holds a file the block wrote: it and ``new10`` stay; ``new9``, made and empty, goes (it was kept
    whenever an earlier folder of the walk was not empty)."""
    out = tmp_path / "new9" / ".." / "new10" / "run"
    with pytest.raises(RuntimeError):
        with removed_if_left_empty(out):
            os.makedirs(out)
            (out / "part").write_text("x")
            raise RuntimeError("refused")
    assert sorted(os.listdir(tmp_path)) == ["new10"] and os.listdir(tmp_path / "new10" / "run") == ["part"]


def test_a_link_on_the_way_is_followed_not_removed(tmp_path):
    """``link/new`` with ``link -> real``: ``real/new`` is made and removed again; the link and ``real`` stay."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    _fail_after_making(tmp_path / "link" / "new" / ".." / "run")
    assert sorted(os.listdir(tmp_path)) == ["link", "real"] and os.listdir(tmp_path / "real") == []


@pytest.mark.parametrize("command", [["rank-prompts", "--model", "tiny-qwen2", "--pool", "4"], ["probe"]])
def test_a_refused_command_leaves_no_folder_of_a_dotdot_out(tmp_path, monkeypatch, capsys, command):
    """An unknown task is refused after the folder was made (``prepare_output_dir`` comes first)."""
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--task", "nosuch_task", "--out", "new9/../new10/run", "--no-progress"]) == 2
    assert "unknown task 'nosuch_task'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
